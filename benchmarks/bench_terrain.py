"""Terrain sensors: the JAX ray engine (caliper_jax.rays, height fields included) vs MuJoCo's
``mj_multiRay`` on the eight terrain scenes, same rays, same run (issue 19, must-show 4).

    python benchmarks/bench_terrain.py [--scenes flat,slope] [--reps 5] [--mj-budget 8] [--json]

Per scene, with the body at the origin (its height above the ground there) and four headings
(0, 90, 180, 270 degrees):

* ``frame``: a 160 x 120 depth frame of the default ``DepthSensor`` (58 degree vertical field,
  tilted so every ray is 15 degrees below the horizon, 0.8 m up, 4 m range);
* ``scan``: a VLP-32 scan of the default ``LidarSensor`` (32 rings x 1800 beams, 20 degrees of
  tilt, 30 m range).

JAX: ``cast_rays`` (distance and geom, what ``mj_multiRay`` returns) jitted once per scene and
sensor with the pose traced, float32; compile time (lower + compile) is reported apart from the
run time (median of ``--reps`` calls per heading, mean over headings). ``capture`` is the whole
sensor frame (cast, range gate, noise and dropout, re-gate, world points) on the same path.
MuJoCo (float64, C, one thread): one ``mj_multiRay`` per frame, the shell body excluded, ``cutoff``
the sensor's reach (it only culls geoms by their bounding volume; the JAX walk stops at the range).
A MuJoCo call that takes long is not repeated: the headings are timed once each until
``--mj-budget`` seconds are spent per scene and sensor; the output says how many calls were timed.
``agree``: rays with the same geom and distances within 1e-3 m (float32 against float64); MuJoCo
lets the odd ray exactly on a grid line of a height field fall through (tests/test_terrain_scenes.py).
Target: the slope scene (the seed's 372 ms/frame, 11 s/scan case) at least 50x faster in JAX.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HEADINGS_DEG = (0.0, 90.0, 180.0, 270.0)
TARGET = 50.0


def _pose(scene, yaw_deg):
    from caliper_jax.terrain.scenes import BODY_HEIGHT

    T = np.eye(4)
    c, s = math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg))
    T[:2, :2] = [[c, -s], [s, c]]
    T[2, 3] = BODY_HEIGHT + float(scene.height(0.0, 0.0))
    return T


def _rays(sensor, T):
    """(origin (3,), world directions (N, 3), reach): the sensor's rays at body pose T."""
    from caliper_jax.terrain.sensors import DepthSensor

    R, p = T[:3, :3], T[:3, 3]
    if isinstance(sensor, DepthSensor):
        local = sensor.directions()
        body = local @ sensor.rotation().T
        reach = sensor.max_range / float(np.min(-local[:, 2]))
    else:
        body = np.asarray(sensor.directions())
        reach = sensor.max_range
    return R @ np.asarray(sensor.mount) + p, np.ascontiguousarray(body @ R.T), reach


def _median_time(fn, reps):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def _bench(scene, sensor, reps, mj_budget):
    import jax
    import jax.numpy as jnp
    import mujoco

    from caliper_jax.rays import cast_rays
    from caliper_jax.terrain.sensors import capture

    m = scene.mj
    shell = scene.shell_body_id
    poses = [_pose(scene, h) for h in HEADINGS_DEG]
    o0, d0, reach = _rays(sensor, poses[0])
    n = len(d0)

    def cast(xpos, xmat, o, d):
        h = cast_rays(scene.rays, xpos, xmat, o, d, max_range=reach, exclude_body=shell)
        return h.distance, h.geom

    def grab(T, key):
        c = capture(scene, sensor, T, key)
        return c.points, c.valid

    f32 = jnp.float32
    args = []
    for T in poses:
        xpos, xmat = scene.poses(T)
        o, d, _ = _rays(sensor, T)
        args.append(tuple(jnp.asarray(x, f32) for x in (xpos, xmat, o, d)))
    t = time.perf_counter()
    cast_c = jax.jit(cast).lower(*args[0]).compile()
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    grab_c = jax.jit(grab).lower(jnp.asarray(poses[0], f32), jax.random.PRNGKey(0)).compile()
    capture_compile_s = time.perf_counter() - t
    jax_s, cap_s, outs = [], [], []
    for T, a in zip(poses, args, strict=True):
        outs.append([np.asarray(x) for x in cast_c(*a)])
        jax_s.append(_median_time(lambda a=a: jax.block_until_ready(cast_c(*a)), reps))
        key = jax.random.PRNGKey(1)
        Tj = jnp.asarray(T, f32)
        jax.block_until_ready(grab_c(Tj, key))
        cap_s.append(_median_time(lambda Tj=Tj, key=key: jax.block_until_ready(grab_c(Tj, key)), reps))
    # MuJoCo: the same rays, one mj_multiRay per frame
    d = mujoco.MjData(m)
    mj_s, agree, calls, spent = [], [], 0, 0.0
    for T, (dist_j, geom_j) in zip(poses, outs, strict=True):
        if calls and spent > mj_budget:
            break
        d.mocap_pos[m.body_mocapid[shell]] = T[:3, 3]
        mujoco.mju_mat2Quat(d.mocap_quat[m.body_mocapid[shell]], T[:3, :3].ravel())
        mujoco.mj_kinematics(m, d)
        o, dirs, _ = _rays(sensor, T)
        gid, dist = np.zeros(n, np.int32), np.zeros(n)
        flat = np.ascontiguousarray(dirs.ravel())

        def call(o=o, flat=flat, gid=gid, dist=dist):
            mujoco.mj_multiRay(m, d, o, flat, None, 1, shell, gid, dist, None, n, reach)

        ts = [_median_time(call, 1)]
        if ts[0] * reps < mj_budget / len(poses):            # cheap: the median of reps calls
            ts += [_median_time(call, 1) for _ in range(reps - 1)]
        mj_s.append(statistics.median(ts))
        calls += len(ts)
        spent += sum(ts)
        ref = np.where((gid >= 0) & (dist <= reach), dist, np.inf)
        ref_g = np.where(np.isfinite(ref), gid, -1)
        with np.errstate(invalid="ignore"):
            same = (geom_j == ref_g) & ((~np.isfinite(ref)) | (np.abs(dist_j - ref) <= 1e-3))
        agree.append(float(same.mean()))
    jax_mean = float(np.mean(jax_s))
    mj_mean = float(np.mean(mj_s))
    return {"rays": n, "jax_compile_s": compile_s, "jax_ms": 1e3 * jax_mean,
            "capture_compile_s": capture_compile_s, "capture_ms": 1e3 * float(np.mean(cap_s)),
            "mujoco_ms": 1e3 * mj_mean, "mujoco_calls": calls, "mujoco_headings": len(mj_s),
            "speedup": mj_mean / jax_mean, "agree": float(np.mean(agree)),
            "hit_fraction": float(np.mean([np.isfinite(o[0]).mean() for o in outs]))}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenes", default="all", help="comma-separated scene names (default: all eight)")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--mj-budget", type=float, default=8.0,
                   help="seconds of mj_multiRay per scene and sensor before headings are skipped")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)

    import jax

    from caliper_jax.errors import CaliperError
    from caliper_jax.terrain.scenes import SCENES, load_scene
    from caliper_jax.terrain.sensors import DepthSensor, LidarSensor

    names = SCENES if a.scenes == "all" else tuple(x.strip() for x in a.scenes.split(",") if x.strip())
    try:
        scenes = [load_scene(s) for s in names]
    except CaliperError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    sensors = {"frame": DepthSensor(), "scan": LidarSensor()}
    rows = []
    for sc in scenes:
        row = {"scene": sc.name, "height_field": sc.info["hfield_resolution"] is not None}
        for kind, sensor in sensors.items():
            row[kind] = _bench(sc, sensor, a.reps, a.mj_budget)
        rows.append(row)
        if not a.json:
            print(f"  {sc.name}: frame {row['frame']['speedup']:.1f}x, scan {row['scan']['speedup']:.1f}x",
                  file=sys.stderr, flush=True)
    slope = next((r for r in rows if r["scene"] == "slope"), None)
    verdict = None
    if slope is not None:
        verdict = {k: slope[k]["speedup"] >= TARGET for k in sensors}
    result = {"backend": jax.default_backend(), "dtype": "float32", "headings_deg": list(HEADINGS_DEG),
              "reps": a.reps, "mj_budget_s": a.mj_budget, "target_slope_speedup": TARGET,
              "slope_meets_target": verdict, "rows": rows}
    if a.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"JAX ray engine ({result['backend']}, float32) vs mj_multiRay (float64, one thread); ms per "
          f"frame, mean over {len(HEADINGS_DEG)} headings (JAX: median of {a.reps} per heading)")
    for kind, label in (("frame", "160x120 depth frame"), ("scan", "VLP-32 scan, 32 x 1800 beams")):
        print(f"\n{label}:")
        print(f"{'scene':<7} {'hfield':>6} {'jax ms':>8} {'capture':>8} {'mj ms':>9} {'mj calls':>8} "
              f"{'speedup':>8} {'agree':>7} {'hits':>5}   compile s (cast / capture)")
        for r in rows:
            b = r[kind]
            calls = f"{b['mujoco_calls']}" + ("" if b["mujoco_headings"] == len(HEADINGS_DEG) else
                                              f" ({b['mujoco_headings']} hd)")
            print(f"{r['scene']:<7} {'yes' if r['height_field'] else 'no':>6} {b['jax_ms']:>8.2f} "
                  f"{b['capture_ms']:>8.2f} {b['mujoco_ms']:>9.1f} {calls:>8} {b['speedup']:>7.1f}x "
                  f"{b['agree']:>7.2%} {b['hit_fraction']:>5.0%}   {b['jax_compile_s']:.1f} / "
                  f"{b['capture_compile_s']:.1f}")
    if verdict is not None:
        print(f"\nslope >= {TARGET:.0f}x: frame {'yes' if verdict['frame'] else 'NO'} "
              f"({slope['frame']['speedup']:.0f}x), scan {'yes' if verdict['scan'] else 'NO'} "
              f"({slope['scan']['speedup']:.0f}x)")
    if any(r[k]["mujoco_headings"] < len(HEADINGS_DEG) for r in rows for k in sensors):
        print("(mj calls: slow mj_multiRay frames were timed once per heading, and headings past "
              f"--mj-budget {a.mj_budget:g} s were skipped: 'hd' = headings timed)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

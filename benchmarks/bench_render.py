"""Ray-cast cameras: the JAX ray engine (caliper_jax.rays) vs MuJoCo's ``mj_multiRay``, same scene,
same camera, same run.

    python benchmarks/bench_render.py [--task tasks/zoo/01_lift.caliper-task.json] [--size 96]
                                      [--worlds 1 16 64] [--block 8] [--reps 5] [--json]

Scene: the zoo task's compiled MuJoCo model, one random arm pose per world (``mj_forward``).
Camera: a ``size`` x ``size`` pinhole camera fixed in the world, looking at the arm.

JAX (float32, jitted, compile time = lower + compile, reported apart):
* ``ds``: depth + segmentation frames (what ``mj_multiRay`` returns), ``render_worlds`` with
  ``outputs=("depth", "segmentation")``, worlds ``--block`` at a time;
* ``full``: whole frames (depth, segmentation, world normals, Lambert RGB), same path;
* ``vmap``: whole frames through one plain ``jax.vmap`` over all worlds;
* ``rays/s``: ``cast_rays`` (distance, geom, normal) under one ``vmap``.
MuJoCo (float64, C, one thread): one ``mj_multiRay`` per camera frame per world, as
``mjx_backend.sensors`` used to cast, on MjData whose kinematics are current; ``mj+n`` also asks
it for normals. Run times are medians of ``--reps`` calls. ``speedup`` = JAX ds frames/s over
MuJoCo frames/s (the same outputs). Target: >= 5x at 64 worlds on the 2-core CPU.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _worlds(mj, n, seed=0):
    import mujoco

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        d = mujoco.MjData(mj)
        lo, hi = mj.jnt_range[:, 0], mj.jnt_range[:, 1]
        for j in range(mj.njnt):
            if mj.jnt_type[j] in (2, 3):                   # slide / hinge
                a = mj.jnt_qposadr[j]
                d.qpos[a] = rng.uniform(lo[j], hi[j]) if hi[j] > lo[j] else rng.normal(0, 0.5)
        mujoco.mj_forward(mj, d)
        out.append(d)
    return out


def _time(fn, reps, *args):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn(*args)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def _mj_frames(mj, ds, eye, dirs, normals=False):
    """One mj_multiRay per world: the whole camera frame from one origin."""
    import mujoco

    n = len(dirs)
    geomid, dist = np.zeros(n, np.int32), np.zeros(n)
    nrm = np.zeros(3 * n) if normals else None
    flat = np.ascontiguousarray(dirs.ravel())
    for d in ds:
        mujoco.mj_multiRay(mj, d, eye, flat, None, 1, -1, geomid, dist, nrm, n, 10.0)


def _jax(fn, reps, *args):
    """(compile s, run s) of ``jax.jit(fn)`` on ``args``."""
    import jax

    t = time.perf_counter()
    comp = jax.jit(fn).lower(*args).compile()
    compile_s = time.perf_counter() - t
    jax.block_until_ready(comp(*args))
    return compile_s, _time(lambda *a: jax.block_until_ready(comp(*a)), reps, *args)


def _look_at(eye, target):
    fwd = np.asarray(target, float) - eye
    fwd /= np.linalg.norm(fwd)
    right = np.cross(fwd, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, fwd)
    return np.stack([right, up, -fwd], axis=1)             # columns: camera x, y, z


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default=str(ROOT / "tasks/zoo/01_lift.caliper-task.json"))
    p.add_argument("--size", type=int, default=96)
    p.add_argument("--worlds", type=int, nargs="+", default=[1, 16, 64])
    p.add_argument("--block", type=int, default=8, help="worlds per block in render_worlds")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)

    import jax

    from caliper_jax.rays import PinholeCamera, cast_rays, render, render_worlds, scene_from_mujoco
    from tasks.scene import build_scene
    from tasks.schema import load_task

    mj = build_scene(load_task(a.task)).scene.mj
    scene = scene_from_mujoco(mj)
    eye = np.array([1.2, -1.2, 1.0])
    R = _look_at(eye, [0.2, 0.0, 0.2])
    cam = PinholeCamera.fixed(eye, R, width=a.size, height=a.size, fovy=60.0, max_range=10.0)
    dirs = cam.directions().reshape(-1, 3) @ R.T
    nray = len(dirs)

    def ds_frames(xp, xm):
        return render_worlds(scene, cam, {"geom_xpos": xp, "geom_xmat": xm}, block=a.block,
                             outputs=("depth", "segmentation"))

    def full_frames(xp, xm):
        return render_worlds(scene, cam, {"geom_xpos": xp, "geom_xmat": xm}, block=a.block)

    def vmap_frames(xp, xm):
        return jax.vmap(lambda p, m: render(scene, cam, {"geom_xpos": p, "geom_xmat": m}))(xp, xm)

    def rays(xp, xm):
        return jax.vmap(lambda p, m: cast_rays(scene, p, m, eye, dirs, max_range=10.0))(xp, xm)

    rows = []
    for W in a.worlds:
        worlds = _worlds(mj, W)
        xp = np.stack([d.geom_xpos for d in worlds]).astype(np.float32)
        xm = np.stack([d.geom_xmat for d in worlds]).astype(np.float32)
        row = {"worlds": W, "rays_per_frame": nray, "block": a.block}
        for name, fn in (("ds", ds_frames), ("full", full_frames), ("vmap", vmap_frames), ("rays", rays)):
            row[f"jax_{name}_compile_s"], row[f"jax_{name}_s"] = _jax(fn, a.reps, xp, xm)
            row[f"jax_{name}_frames_per_s"] = W / row[f"jax_{name}_s"]
        row["jax_rays_per_s"] = W * nray / row["jax_rays_s"]
        row["mujoco_s"] = _time(_mj_frames, a.reps, mj, worlds, eye, dirs)
        row["mujoco_normals_s"] = _time(_mj_frames, a.reps, mj, worlds, eye, dirs, True)
        row["mujoco_frames_per_s"] = W / row["mujoco_s"]
        row["mujoco_normals_frames_per_s"] = W / row["mujoco_normals_s"]
        row["mujoco_rays_per_s"] = W * nray / row["mujoco_s"]
        row["speedup"] = row["jax_ds_frames_per_s"] / row["mujoco_frames_per_s"]
        row["speedup_full_vs_mj_normals"] = row["jax_full_frames_per_s"] / row["mujoco_normals_frames_per_s"]
        rows.append(row)

    result = {"task": Path(a.task).name, "ngeom": int(mj.ngeom), "camera": f"{a.size}x{a.size}",
              "backend": jax.default_backend(), "dtype": "float32", "rows": rows}
    if a.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{result['task']}: {mj.ngeom} geoms, camera {a.size}x{a.size} ({nray} rays), JAX on "
          f"{result['backend']} float32 (block {a.block}) vs mj_multiRay; frames/s, median of {a.reps}")
    print(f"{'worlds':>6} {'jax ds':>8} {'jax full':>9} {'jax vmap':>9} {'mj':>8} {'mj+n':>8} {'speedup':>8} "
          f"{'full/mj+n':>9} {'jax rays/s':>11} {'mj rays/s':>10}  compile s (ds/full/vmap/rays)")
    for r in rows:
        print(f"{r['worlds']:>6} {r['jax_ds_frames_per_s']:>8.0f} {r['jax_full_frames_per_s']:>9.0f} "
              f"{r['jax_vmap_frames_per_s']:>9.0f} {r['mujoco_frames_per_s']:>8.0f} "
              f"{r['mujoco_normals_frames_per_s']:>8.0f} {r['speedup']:>7.2f}x "
              f"{r['speedup_full_vs_mj_normals']:>8.2f}x {r['jax_rays_per_s']:>11.3g} "
              f"{r['mujoco_rays_per_s']:>10.3g}  " + "/".join(f"{r[f'jax_{k}_compile_s']:.1f}"
                                                          for k in ("ds", "full", "vmap", "rays")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Panda planning, the whole call: ``caliper_jax.planning.plan`` against OMPL's RRT-Connect with
Pinocchio/coal mesh collision checking, on the same problems, alternating in one run.

    python benchmarks/bench_plan.py                       # 24 problems per scene, batch 64
    python benchmarks/bench_plan.py --n 8 --batch 16 --json out.json
    python benchmarks/bench_plan.py --skip ompl,batch     # ours only

Scenes (``caliper_jax.planning.problems``): ``panda_problems`` (reaching across a bar and past a
post) and ``panda_pillar_problems`` (swinging past a pillar, a wall behind), start and goal 1 cm
clear, the straight line blocked; both planned at ``--resolution`` (default 0.005 rad), margin 0.

* **ours**: one ``plan(model, cm, goal, start, seed=k, resolution=...)`` call per problem, timed
  whole -- start/goal classification, endpoint escape, the jitted search, the jitted shortcut,
  the exact check of the returned path (MuJoCo behind the sphere cover, at resolution / 4) --
  with ``PlanResult.times`` for the split (medians). The first call of a scene (compile) is
  timed apart: the first call minus a repeat of it.
* **OMPL** 2.x (PyPI) ``og.RRTConnect`` through ``og.SimpleSetup``, default range, validity
  callback in Python: ``pin.computeCollisions`` on coal's convex hulls of the URDF's collision
  meshes (``--ompl-geometry mesh``: the triangle meshes, about 9x slower per check), SRDF pairs
  removed, the same obstacles as coal boxes and a half-space; the longest unchecked segment is
  the resolution (Euclidean, so at least as fine as our per-joint resolution). Timed whole with a
  wall clock around ``solve`` + ``simplifySolution`` (all its checks are exact).
* Ours and OMPL alternate problem by problem, so drifting machine load hits both alike.
* **coal re-check**: every path we return is re-checked by coal at the planning resolution
  (per-joint step) on the meshes: ``coal-valid`` must be 100%.
* **batched**: ``--batch`` problems (the set repeated) planned by ``plan_many`` in one call,
  endpoint escape + one vmapped search and shortcut + the exact check of every path: problems/s
  (the median of 3 identical calls after a compiling one).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

STAGES = ("setup", "classify", "escape", "search", "shortcut", "exact", "retime")


def _pct(xs, q):
    import numpy as np

    return float(np.percentile(np.asarray(xs, float), q)) if len(xs) else float("nan")


def coal_scene(ps, convex: bool = False):
    """(pinocchio model, data, geometry model, geometry data) of the panda among ``ps.obstacles``;
    ``convex``: every collision mesh replaced by coal's convex hull of it."""
    import coal
    import numpy as np
    import pinocchio as pin

    import robots

    root = robots.example_robot_data_dir()
    urdf = root / "panda_description/urdf/panda.urdf"
    model = pin.buildModelFromUrdf(str(urdf))
    geom = pin.buildGeomFromUrdf(model, str(urdf), pin.GeometryType.COLLISION,
                                 package_dirs=[str(root.parent.parent)])
    geom.addAllCollisionPairs()
    pin.removeCollisionPairs(model, geom, str(ps.srdf))
    robot_geoms = list(range(len(geom.geometryObjects)))
    for o in ps.obstacles:
        if o.kind == "box":
            shape = coal.Box(*(2 * np.asarray(o.half)))
            M = pin.SE3(np.asarray(o.R), np.asarray(o.p))
        elif o.kind == "halfspace":      # solid below the plane through p with normal R[:, 2]
            nrm = np.asarray(o.R)[:, 2]
            shape = coal.Halfspace(nrm, float(nrm @ np.asarray(o.p)))
            M = pin.SE3.Identity()
        else:
            raise SystemExit(f"bench_plan: no coal shape for obstacle kind {o.kind}")
        gid = geom.addGeometryObject(pin.GeometryObject(o.name, 0, 0, M, shape))
        for r in robot_geoms:
            if geom.geometryObjects[r].parentJoint > 0:
                geom.addCollisionPair(pin.CollisionPair(r, gid))
    if convex:
        for go in geom.geometryObjects:
            if isinstance(go.geometry, coal.BVHModelBase):
                go.geometry.buildConvexRepresentation(False)
                go.geometry = go.geometry.convex
    return model, model.createData(), geom, pin.GeometryData(geom)


def coal_path_valid(scene, path, resolution: float) -> bool:
    """Every state of ``path`` and of its edges at ``resolution`` (per joint) collision-free under coal."""
    import numpy as np
    import pinocchio as pin

    model, data, geom, gdata = scene
    for a, b in zip(path[:-1], path[1:], strict=True):
        n = max(1, int(np.ceil(np.max(np.abs(b - a)) / resolution - 1e-9)))
        for t in np.arange(n + 1) / n:
            q = a + t * (b - a)
            if pin.computeCollisions(model, data, geom, gdata, np.r_[q, q[-1]], True):
                return False
    return True


def ours(ps):
    """(one(k) -> (seconds, times, success, path), compile seconds)."""
    from caliper_jax.planning import plan

    cm = ps.collision_model()

    def one(k):
        t0 = time.perf_counter()
        r = plan(ps.model, cm, ps.goals[k], ps.starts[k], seed=k, resolution=ps.resolution)
        return time.perf_counter() - t0, r.times, r.success and r.planner == "vrrtconnect", r.waypoints

    first, second = one(0), one(0)
    return one, {"first_s": first[0], "warm_s": second[0], "compile_s": max(first[0] - second[0], 0.0),
                 "first_split": first[1]}


def ompl_solver(ps, scene, timeout: float):
    """one(k) -> (seconds, success) for OMPL RRT-Connect + Pinocchio/coal, solve + simplify."""
    import pinocchio as pin
    from ompl import base as ob
    from ompl import geometric as og
    from ompl import util as ou

    ou.setLogLevel(ou.LogLevel.LOG_ERROR)
    model, data, geom, gdata = scene
    nq = ps.model.nq
    lo, hi = ps.model.qpos_lower, ps.model.qpos_upper
    import numpy as np

    q = np.zeros(model.nq)

    def valid(state):
        for i in range(nq):
            q[i] = state[i]
        q[nq] = q[nq - 1]                  # the second finger mimics the first
        return not pin.computeCollisions(model, data, geom, gdata, q, True)

    def one(k):
        t0 = time.perf_counter()
        space = ob.RealVectorStateSpace(nq)
        b = ob.RealVectorBounds(nq)
        for i in range(nq):
            b.setLow(i, float(lo[i]))
            b.setHigh(i, float(hi[i]))
        space.setBounds(b)
        ss = og.SimpleSetup(space)
        ss.setStateValidityChecker(valid)
        si = ss.getSpaceInformation()
        si.setStateValidityCheckingResolution(ps.resolution / space.getMaximumExtent())
        s, g = space.allocState(), space.allocState()
        for i in range(nq):
            s[i], g[i] = float(ps.starts[k, i]), float(ps.goals[k, i])
        ss.setStartAndGoalStates(s, g)
        ss.setPlanner(og.RRTConnect(si))
        ss.solve(timeout)
        ok = bool(ss.haveExactSolutionPath())
        if ok:
            ss.simplifySolution()
        return time.perf_counter() - t0, ok

    return one


def batched(ps, B, repeats: int = 3):
    import numpy as np

    from caliper_jax.planning import plan_many

    cm = ps.collision_model()
    idx = np.arange(B) % len(ps)
    starts, goals = ps.starts[idx], ps.goals[idx]

    def run():
        t0 = time.perf_counter()
        out = plan_many(ps.model, cm, starts, goals, seed=1, resolution=ps.resolution)
        return time.perf_counter() - t0, out

    first, _ = run()
    runs = sorted((run() for _ in range(repeats)), key=lambda x: x[0])
    t, out = runs[len(runs) // 2]
    return {"batch": B, "seconds": t, "problems_per_s": B / t, "success": float(np.mean(out.success)),
            "times": out.times, "compile_s": max(first - t, 0.0)}


def scene_rows(ps, args, skip):
    import numpy as np

    mine, comp = ours(ps)
    scene = None if "coal" in skip else coal_scene(ps)
    theirs = None if "ompl" in skip else ompl_solver(ps, coal_scene(ps, args.ompl_geometry == "convex"),
                                                     args.timeout)
    rows, orows = [], []
    for k in range(len(ps)):             # alternating, so load drift hits both alike
        rows.append(mine(k))
        if theirs is not None:
            orows.append(theirs(k))
    coal_ok = ([coal_path_valid(scene, p, ps.resolution) for _, _, ok, p in rows if ok]
               if "coal" not in skip else [])
    t = [r[0] for r in rows]
    entry = {"scene": ps.name, "n": len(ps), "resolution": ps.resolution,
             "success": float(np.mean([r[2] for r in rows])), "median_ms": 1e3 * _pct(t, 50),
             "p95_ms": 1e3 * _pct(t, 95), "split_median_ms": {s: 1e3 * _pct([r[1][s] for r in rows], 50)
                                                              for s in STAGES},
             "coal_valid": f"{sum(coal_ok)}/{len(coal_ok)}", **comp}
    if theirs is not None:
        ot = [r[0] for r in orows]
        entry["ompl"] = {"success": float(np.mean([r[1] for r in orows])), "median_ms": 1e3 * _pct(ot, 50),
                         "p95_ms": 1e3 * _pct(ot, 95)}
        entry["speedup_median"] = entry["ompl"]["median_ms"] / entry["median_ms"]
    return entry


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=24, help="problems per scene (default 24)")
    ap.add_argument("--resolution", type=float, default=0.005, help="edge resolution, rad (default 0.005)")
    ap.add_argument("--batch", type=int, default=64, help="problems in the batched call (default 64)")
    ap.add_argument("--timeout", type=float, default=10.0, help="OMPL time limit per problem (s)")
    ap.add_argument("--ompl-geometry", default="convex", choices=("convex", "mesh"),
                    help="OMPL's coal geometry: convex hulls of the meshes (default: what our exact stage "
                         "checks, and 9x faster coal checks) or the triangle meshes")
    ap.add_argument("--scenes", default="panda,pillar", help="comma list: panda, pillar")
    ap.add_argument("--skip", default="", help="comma list: ompl, coal (the re-check), batch")
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    import jax

    from caliper_jax.planning.problems import panda_pillar_problems, panda_problems

    makers = {"panda": panda_problems, "pillar": panda_pillar_problems}
    out = {"backend": jax.default_backend(), "n": args.n, "resolution": args.resolution, "rows": []}
    print(f"whole plan() call vs OMPL RRTConnect + coal (solve + simplify), {args.n} problems per scene, "
          f"resolution {args.resolution} rad, margin 0, alternating; backend {jax.default_backend()}")
    print(f"{'scene':<14}{'planner':<12}{'success':>8}{'median ms':>11}{'p95 ms':>9}   notes")
    for name in filter(None, args.scenes.split(",")):
        ps = makers[name](args.n, seed=0, resolution=args.resolution)
        e = scene_rows(ps, args, skip)
        split = ", ".join(f"{s} {v:.1f}" for s, v in e["split_median_ms"].items())
        print(f"{ps.name:<14}{'ours':<12}{e['success']:>8.0%}{e['median_ms']:>11.2f}{e['p95_ms']:>9.2f}   "
              f"split (median ms): {split}; coal-valid {e['coal_valid']}; first call {e['first_s']:.2f} s "
              f"(warm {e['warm_s'] * 1e3:.0f} ms)")
        if "ompl" in e:
            o = e["ompl"]
            print(f"{'':<14}{'OMPL+coal':<12}{o['success']:>8.0%}{o['median_ms']:>11.2f}{o['p95_ms']:>9.2f}"
                  "   "
                  f"speed-up of the median: {e['speedup_median']:.1f}x")
        out["rows"].append(e)
        if "batch" not in skip:
            b = batched(ps, args.batch)
            split = ", ".join(f"{s} {v:.2f}" for s, v in b["times"].items())
            print(f"{'':<14}batched {b['batch']} problems in one plan_many call: {b['problems_per_s']:.1f} "
                  f"problems/s, success {b['success']:.0%} (split s: {split}); "
                  f"compile {b['compile_s']:.1f} s")
            out.setdefault("batched", []).append(b)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=float))


if __name__ == "__main__":
    main()

"""Panda planning: the jitted RRT-Connect on the sphere checker against OMPL's RRT-Connect with
Pinocchio/coal mesh collision checking, on the same problems, in one run.

    python benchmarks/bench_plan.py                 # 32 problems, batch 64
    python benchmarks/bench_plan.py --n 8 --batch 16 --json out.json
    python benchmarks/bench_plan.py --skip ompl     # ours only (no ompl / coal needed)

Problems: ``caliper_jax.planning.panda_problems(n)`` (the panda reaching across a bar and past a
post, start and goal 1 cm clear, the straight line blocked), planned with margin 0 at the set's
edge resolution (0.05 rad).

* **ours** (``caliper_jax.planning.plan``'s fast path, phase by phase): endpoint escape
  (:func:`~caliper_jax.planning.vrrt.escape_endpoints`: only where the conservative sphere cover
  rejects a start or goal; its edges are checked by the exact GJK checker) + the jitted search
  (+ jitted shortcutting with ``--simplify``) = **planning time**. Then every returned path is
  checked by the exact mesh checker at 4x the resolution (``verify``, reported apart; success
  needs it). Compile time = first call minus a second identical call, reported apart.
* **OMPL** 2.x (PyPI) ``og.RRTConnect`` through ``og.SimpleSetup``, default range, validity
  callback in Python: ``pin.computeCollisions`` on the URDF's collision meshes (coal), SRDF pairs
  removed, the same obstacles as coal boxes and a half-space; the longest unchecked segment is
  0.05 rad (Euclidean in joint space, so at least as fine as our per-joint 0.05).
  ``getLastPlanComputationTime`` (+ ``getLastSimplificationTime`` with simplification).
  Ours and OMPL alternate problem by problem, so drifting machine load hits both alike.
* **batched**: ``--batch`` problems (the set repeated when ``--n`` is smaller) escaped in one call
  and searched + shortcut in ONE vmapped call: problems/s (the median of 3 identical timed calls
  after a compiling one); the exact check of all paths apart.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _pct(xs, q):
    import numpy as np

    return float(np.percentile(np.asarray(xs, float), q)) if len(xs) else float("nan")


def ours(ps, simplify: bool):
    """(one(k) -> (escape s, search s, verify s, success, iterations), compile seconds)."""
    import jax
    import numpy as np

    from caliper_jax.planning import Checker
    from caliper_jax.planning.planner import _obstacles, escape_checker, exact_fine_checker, fast_checker
    from caliper_jax.planning.vrrt import SearchOptions, escape_endpoints, solve_one
    from caliper_jax.planning.vshortcut import ShortcutOptions

    cm = ps.collision_model()
    exact = escape_checker(Checker(ps.model, cm, resolution=ps.resolution))
    fine = exact_fine_checker(exact)
    fast = fast_checker(ps.model, cm)
    params = fast.with_obstacles(_obstacles(cm), margin=0.0)
    span = float(np.max(fast.upper - fast.lower))
    opts = SearchOptions(resolution=ps.resolution)
    sm = ShortcutOptions(resolution=ps.resolution, max_span=span) if simplify else None

    def one(k):
        key = jax.random.PRNGKey(k)
        k_esc, k_search = jax.random.split(key)
        t0 = time.perf_counter()
        ends, moved = escape_endpoints(fast, exact, np.stack([ps.starts[k], ps.goals[k]]), k_esc,
                                       params=params)
        t1 = time.perf_counter()
        if not np.all(np.isfinite(ends)):
            return t1 - t0, 0.0, 0.0, False, 0
        r = solve_one(fast, ends[0], ends[1], k_search, opts, sm, params)
        t2 = time.perf_counter()
        ok = bool(r["found"])
        if ok:
            p = r["path"][:int(r["length"])].copy()
            p[0], p[-1] = ends
            p = np.concatenate([ps.starts[k][None], p, ps.goals[k][None]])
            ok = fine.path_valid(p)
        t3 = time.perf_counter()
        return t1 - t0, t2 - t1, t3 - t2, ok, int(r["iterations"])

    from caliper_jax.planning.vrrt import valid_padded

    both = np.concatenate([ps.starts, ps.goals])      # warm the escape shapes on a rejected endpoint
    rejected = both[~valid_padded(fast, both, params)][:1]
    if rejected.shape[0]:
        escape_endpoints(fast, exact, rejected, jax.random.PRNGKey(0), params=params)
    first, second = one(0), one(0)
    compile_s = {"search": max(first[1] - second[1], 0.0), "escape_exact": max(first[0] - second[0], 0.0),
                 "verify_exact": max(first[2] - second[2], 0.0)}
    return one, compile_s


def ompl_solver(ps, simplify: bool, timeout: float):
    """one(k) -> (seconds, success, status) for OMPL RRT-Connect + Pinocchio/coal."""
    import coal
    import numpy as np
    import pinocchio as pin
    from ompl import base as ob
    from ompl import geometric as og
    from ompl import util as ou

    import robots

    ou.setLogLevel(ou.LogLevel.LOG_ERROR)
    root = robots.example_robot_data_dir()
    urdf = root / "panda_description/urdf/panda.urdf"
    srdf = root / "panda_description/srdf/panda.srdf"
    model = pin.buildModelFromUrdf(str(urdf))
    geom = pin.buildGeomFromUrdf(model, str(urdf), pin.GeometryType.COLLISION,
                                 package_dirs=[str(root.parent.parent)])
    geom.addAllCollisionPairs()
    pin.removeCollisionPairs(model, geom, str(srdf))
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
    data, gdata = model.createData(), pin.GeometryData(geom)
    nq = ps.model.nq
    lo, hi = np.asarray(ps.model.qpos_lower), np.asarray(ps.model.qpos_upper)

    def to_pin(x):
        q = np.zeros(model.nq)
        q[:nq] = [x[i] for i in range(nq)]
        q[nq:] = q[nq - 1]                 # the second finger mimics the first
        return q

    def valid(state):
        return not pin.computeCollisions(model, data, geom, gdata, to_pin(state), True)

    def one(k):
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
        status = ss.solve(timeout)
        ok = bool(ss.haveExactSolutionPath())
        t = ss.getLastPlanComputationTime()
        if ok and simplify:
            ss.simplifySolution()
            t += ss.getLastSimplificationTime()
        return t, ok, str(status)

    return one


def batched(ps, B, simplify: bool, repeats: int = 3):
    import jax
    import numpy as np

    from caliper_jax.planning import Checker
    from caliper_jax.planning.planner import _obstacles, escape_checker, exact_fine_checker, fast_checker
    from caliper_jax.planning.vrrt import SearchOptions, escape_endpoints, solve_many
    from caliper_jax.planning.vshortcut import ShortcutOptions

    cm = ps.collision_model()
    exact = escape_checker(Checker(ps.model, cm, resolution=ps.resolution))
    fine = exact_fine_checker(exact)
    fast = fast_checker(ps.model, cm)
    params = fast.with_obstacles(_obstacles(cm), margin=0.0)
    idx = np.arange(B) % len(ps)
    starts, goals = ps.starts[idx], ps.goals[idx]
    opts = SearchOptions(resolution=ps.resolution)
    sm = ShortcutOptions(resolution=ps.resolution, max_span=float(np.max(fast.upper - fast.lower))) \
        if simplify else None

    def run(seed):
        key = jax.random.PRNGKey(seed)
        k_esc, k_search = jax.random.split(key)
        t0 = time.perf_counter()
        ends, moved = escape_endpoints(fast, exact, np.concatenate([starts, goals]), k_esc, params=params)
        t1 = time.perf_counter()
        fin = np.all(np.isfinite(ends), axis=1)
        e = np.where(fin[:, None], ends, np.concatenate([starts, goals]))
        r = solve_many(fast, e[:B], e[B:], k_search, opts, sm, params)
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1, fin[:B] & fin[B:], e, r

    t0 = time.perf_counter()
    run(1)
    first = time.perf_counter() - t0
    runs = [run(1) for _ in range(repeats)]           # the median of identical timed calls
    t_esc, t_search, fin, e, r = sorted(runs, key=lambda x: x[0] + x[1])[len(runs) // 2]
    compile_s = max(first - t_esc - t_search, 0.0)
    t0 = time.perf_counter()
    ok = []
    for k in range(B):
        good = bool(fin[k] and r["found"][k])
        if good:
            p = r["path"][k, :int(r["length"][k])].copy()
            p[0], p[-1] = e[k], e[B + k]
            good = fine.path_valid(np.concatenate([starts[k][None], p, goals[k][None]]))
        ok.append(good)
    t_verify = time.perf_counter() - t0
    return {"batch": B, "simplify": simplify, "escape_s": t_esc, "search_s": t_search,
            "problems_per_s": B / (t_esc + t_search), "success": float(np.mean(ok)),
            "max_iterations_used": int(np.max(r["iterations"])), "verify_s": t_verify, "compile_s": compile_s}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=32, help="problems (default 32)")
    ap.add_argument("--batch", type=int, default=64, help="problems in the batched call (default 64)")
    ap.add_argument("--timeout", type=float, default=10.0, help="OMPL time limit per problem (s)")
    ap.add_argument("--skip", default="", help="comma list: single (the per-problem table), ompl, batch, "
                    "simplify")
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    import jax
    import numpy as np

    from caliper_jax.planning import panda_problems

    ps = panda_problems(args.n, seed=0)
    out = {"backend": jax.default_backend(), "n": args.n, "resolution": ps.resolution, "rows": []}
    print(f"panda among boxes: {args.n} problems, resolution {ps.resolution} rad, margin 0, "
          f"backend {jax.default_backend()}")
    print(f"{'planner':<28}{'success':>9}{'median ms':>11}{'p95 ms':>9}   notes")
    modes = [False] + ([] if "simplify" in skip else [True])
    for simplify in ([] if "single" in skip else modes):
        tag = "simplified" if simplify else "raw"
        mine, comp = ours(ps, simplify)
        theirs = None if "ompl" in skip else ompl_solver(ps, simplify, args.timeout)
        rows, orows = [], []
        for k in range(args.n):             # interleaved, so load drift hits both alike
            rows.append(mine(k))
            if theirs is not None:
                orows.append(theirs(k))
        plan_t = [a + b for a, b, _, _, _ in rows]
        succ = float(np.mean([r[3] for r in rows]))
        ver = [c for _, _, c, _, _ in rows]
        med, p95 = 1e3 * _pct(plan_t, 50), 1e3 * _pct(plan_t, 95)
        esc = 1e3 * _pct([a for a, *_ in rows], 50)
        print(f"{'ours (' + tag + ')':<28}{succ:>9.0%}{med:>11.2f}{p95:>9.2f}   escape median {esc:.2f} ms; "
              f"exact verify median {1e3 * _pct(ver, 50):.1f} ms (apart); compile: search "
              f"{comp['search']:.2f} s, exact checkers {comp['escape_exact'] + comp['verify_exact']:.1f} s")
        entry = {"planner": "ours", "simplify": simplify, "success": succ, "median_ms": med, "p95_ms": p95,
                 "escape_median_ms": esc, "verify_median_ms": 1e3 * _pct(ver, 50), "compile_s": comp}
        if theirs is not None:
            ot = [t for t, ok, _ in orows]
            osucc = float(np.mean([ok for _, ok, _ in orows]))
            omed, op95 = 1e3 * _pct(ot, 50), 1e3 * _pct(ot, 95)
            print(f"{'OMPL RRTConnect+coal (' + tag + ')':<28}{osucc:>9.0%}{omed:>11.2f}{op95:>9.2f}   "
                  f"speed-up of the median: {omed / med:.1f}x")
            entry["ompl"] = {"success": osucc, "median_ms": omed, "p95_ms": op95,
                             "speedup_median": omed / med}
        out["rows"].append(entry)
    if "batch" not in skip:
        for simplify in modes:
            b = batched(ps, args.batch, simplify)
            print(f"batched {b['batch']} problems in one call ({'simplified' if simplify else 'raw'}): "
                  f"{b['problems_per_s']:.1f} problems/s (escape {b['escape_s']:.3f} s + search "
                  f"{b['search_s']:.3f} s), success {b['success']:.0%}, longest search "
                  f"{b['max_iterations_used']} iterations; exact verify {b['verify_s']:.2f} s (apart); "
                  f"compile {b['compile_s']:.1f} s")
            out.setdefault("batched", []).append(b)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

"""Planning collision checker throughput (issue 21, must-show 3): configurations/s of
``caliper_jax.planning.spherecheck.PlanningChecker.valid`` on the panda among the
``panda_problems`` obstacles (a bar, a post, the ground; SRDF allow-list), next to Pinocchio/coal
``pin.computeCollisions`` per configuration in the same run.

    python benchmarks/bench_plan_check.py                 # batches 1, 64, 4096; 2000 coal configs
    python benchmarks/bench_plan_check.py --quick         # fewer repeats
    python benchmarks/bench_plan_check.py --json out.json

Rows:

* ``spheres, lane kernel`` -- ``jax.jit(checker.valid)`` (the lane layout: batch in the last axis,
  blocks of ``--block`` lanes) at batch 1, 64, 4096; compile time (first call minus a timed call)
  printed apart;
* ``spheres, vmap`` -- the same kernel run per configuration under ``jax.vmap`` (batch first): the
  formulation the lane layout replaces;
* ``exact: MuJoCo engine`` -- :class:`caliper_jax.planning.exact.MujocoEngine` (the planners' exact
  stage: caliper kinematics + ``mj_collision`` on the hulls) on the coal configurations, with the
  count of verdicts that differ from coal's;
* ``pinocchio/coal`` -- ``pin.computeCollisions(model, data, geom_model, geom_data, q, True)``
  (stop at the first collision) in a Python loop: the panda URDF's collision meshes plus the same
  obstacles as coal boxes and a half-space, the SRDF's disabled pairs removed and fixed-fixed pairs
  (world obstacles, the base link) dropped -- the pairs our checker checks.

Also printed: the fraction of random configurations each calls colliding (the sphere model is
conservative, so it says "collides" more often) and how many of the problem set's starts and goals
(clear by 1 cm under the exact meshes) the sphere model accepts.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _timed(fn, repeats):
    """(compile s, seconds per call): the first call minus the best of ``repeats`` timed calls."""
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return max(first - best, 0.0), best


def coal_scene(ps):
    """Pinocchio model + geometry model of the panda with the problem set's obstacles."""
    import coal
    import pinocchio as pin

    import robots

    root = robots.example_robot_data_dir()
    urdf = root / "panda_description/urdf/panda.urdf"
    model = pin.buildModelFromUrdf(str(urdf))
    gmodel = pin.buildGeomFromUrdf(model, str(urdf), pin.GeometryType.COLLISION,
                                   package_dirs=[str(root.parent.parent)])   # package://example-robot-data/...
    n_robot = len(gmodel.geometryObjects)
    for o in ps.obstacles:
        if o.kind == "box":
            shape = coal.Box(*(2 * o.half))
            placement = pin.SE3(o.R, o.p)
        elif o.kind == "halfspace":
            n = o.R[:, 2]
            shape = coal.Halfspace(n, float(n @ o.p))
            placement = pin.SE3.Identity()
        else:
            raise ValueError(o.kind)
        gmodel.addGeometryObject(pin.GeometryObject(o.name, 0, placement, shape))
    gmodel.addAllCollisionPairs()
    pin.removeCollisionPairs(model, gmodel, str(ps.srdf))
    keep = []
    for cp in gmodel.collisionPairs:
        a, b = gmodel.geometryObjects[cp.first], gmodel.geometryObjects[cp.second]
        if a.parentJoint == 0 and b.parentJoint == 0:
            continue                                   # fixed-fixed: no motion changes it
        keep.append(cp)
    gmodel.removeAllCollisionPairs()
    for cp in keep:
        gmodel.addCollisionPair(cp)
    return model, gmodel, n_robot


def bench(args):
    import jax
    import jax.numpy as jnp
    import numpy as np

    from caliper_jax.planning.problems import panda_problems
    from caliper_jax.planning.spherecheck import _collides, planning_checker

    out = {"backend": jax.default_backend(), "dtype": "float64" if args.x64 else "float32", "rows": []}
    t0 = time.perf_counter()
    ps = panda_problems(args.problems)
    t_problems = time.perf_counter() - t0
    t0 = time.perf_counter()
    checker = planning_checker(ps.model, ps.obstacles, srdf=ps.srdf, block=args.block)
    out["build_s"] = time.perf_counter() - t0
    d = checker.describe()
    out["spheres"], out["self_sphere_pairs"] = d["spheres"], d["self_sphere_pairs"]
    print(f"panda among {', '.join(o.name for o in ps.obstacles)} (SRDF); {d['spheres']} spheres, "
          f"{d['self_sphere_pairs']} self sphere pairs, {d['moving_spheres']} moving spheres x "
          f"{len(ps.obstacles)} obstacles; checker built in {out['build_s']:.2f} s "
          f"(problem set drawn in {t_problems:.1f} s)")
    ends = np.concatenate([ps.starts, ps.goals])
    ok = checker.valid_np(ends)
    out["endpoints_valid"] = [int(ok.sum()), int(ok.size)]
    print(f"problem starts/goals the sphere model accepts: {ok.sum()}/{ok.size}")

    rng = np.random.default_rng(0)
    top = max(args.batches)
    dt = checker.params.margin.dtype
    qs_all = jnp.asarray(rng.uniform(checker.lower, checker.upper, (top, checker.nq)), dt)
    valid = jax.jit(checker.valid)

    model, rs, moving = checker.model, checker.spheres, checker._moving

    def one(p, q):
        return _collides(model, rs, moving, p, q[:, None])[0]

    lo, hi = (jnp.asarray(x, dt) for x in (checker.lower, checker.upper))

    def per_config(p, qs):
        return jnp.all((qs >= lo) & (qs <= hi), 1) & ~jax.vmap(one, in_axes=(None, 0))(p, qs)

    vmapped = jax.jit(per_config)

    rows = []
    for name, fn in (("spheres, lane kernel", valid), ("spheres, vmap", vmapped)):
        for B in args.batches:
            qs = qs_all[:B]
            comp, sec = _timed(lambda fn=fn, qs=qs: fn(checker.params, qs).block_until_ready(), args.repeats)
            rows.append({"method": name, "batch": B, "configs_per_s": B / sec, "s_per_call": sec,
                         "compile_s": comp})
    frac_sphere = 1 - float(np.mean(np.asarray(valid(checker.params, qs_all))))

    import pinocchio as pin

    pmodel, gmodel, _ = coal_scene(ps)
    pdata, gdata = pmodel.createData(), pin.GeometryData(gmodel)
    qn = np.asarray(qs_all[:args.coal], np.float64)
    qpin = np.concatenate([qn[:, :8], qn[:, 7:8]], axis=1)      # the second finger mimics the first
    hits = np.zeros(qn.shape[0], bool)
    t0 = time.perf_counter()
    for k in range(qn.shape[0]):
        hits[k] = pin.computeCollisions(pmodel, pdata, gmodel, gdata, qpin[k], True)
    dt = time.perf_counter() - t0
    rows.append({"method": "pinocchio/coal computeCollisions", "batch": 1, "configs_per_s": qn.shape[0] / dt,
                 "s_per_call": dt / qn.shape[0], "compile_s": 0.0})
    from caliper_jax.planning.exact import MujocoEngine

    engine = MujocoEngine(ps.model, ps.collision_model())
    t0 = time.perf_counter()
    mj_hits = engine.collides(qn)
    dt = time.perf_counter() - t0
    rows.append({"method": "exact: MuJoCo engine (+ kinematics)", "batch": qn.shape[0],
                 "configs_per_s": qn.shape[0] / dt, "s_per_call": dt / qn.shape[0], "compile_s": 0.0})
    out["mujoco_disagrees_with_coal"] = int(np.sum(mj_hits != hits))
    out["coal_pairs"] = len(gmodel.collisionPairs)
    out["colliding_fraction"] = {"spheres": frac_sphere, "coal": float(hits.mean())}
    sph = np.asarray(valid(checker.params, qs_all[:args.coal]))
    out["sphere_valid_but_coal_colliding"] = int(np.sum(sph & hits))
    out["rows"] = rows

    print(f"\n{'method':<34}{'batch':>7}{'configs/s':>14}{'per call':>12}{'compile':>10}")
    for r in rows:
        print(f"{r['method']:<34}{r['batch']:>7}{r['configs_per_s']:>14.4g}{r['s_per_call'] * 1e6:>10.1f}us"
              f"{r['compile_s']:>9.2f}s")
    lane = {r["batch"]: r["configs_per_s"] for r in rows if r["method"] == "spheres, lane kernel"}
    coal_rate = rows[-2]["configs_per_s"]
    print(f"exact MuJoCo engine: {rows[-1]['configs_per_s']:.3g} configs/s = "
          f"{rows[-1]['configs_per_s'] / coal_rate:.0f}x coal; verdicts differing from coal: "
          f"{out['mujoco_disagrees_with_coal']} of {qn.shape[0]}")
    print(f"\ncoal pairs {out['coal_pairs']}; random configurations colliding: spheres {frac_sphere:.1%}, "
          f"coal {hits.mean():.1%}; sphere-valid but coal-colliding: "
          f"{out['sphere_valid_but_coal_colliding']} of {qn.shape[0]} (must be 0)")
    print(f"lane kernel at batch {top}: {lane[top]:.3g} configs/s = {lane[top] / coal_rate:.0f}x coal")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 64, 4096])
    ap.add_argument("--block", type=int, default=None, help="lanes per block (default: the module's BLOCK)")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--coal", type=int, default=2000, help="configurations for the Pinocchio/coal loop")
    ap.add_argument("--problems", type=int, default=8, help="problems drawn (their starts/goals are checked)")
    ap.add_argument("--quick", action="store_true", help="5 repeats, 300 coal configurations, 2 problems")
    ap.add_argument("--x64", action="store_true", help="float64 (default float32)")
    ap.add_argument("--json", metavar="PATH", help="write the results as JSON")
    args = ap.parse_args(argv)
    if args.quick:
        args.repeats, args.coal, args.problems = 5, 300, 2
    import jax

    if args.x64:
        jax.config.update("jax_enable_x64", True)
    from caliper_jax.planning.spherecheck import BLOCK

    args.block = args.block or BLOCK
    out = bench(args)
    out["block"] = args.block
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

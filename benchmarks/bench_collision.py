"""Collision, CHOMP and planning throughput and success rates in one run.

    python benchmarks/bench_collision.py            # float32 (throughput precision)
    python benchmarks/bench_collision.py --x64      # float64
    python benchmarks/bench_collision.py --quick    # smaller batches and problem sets

Prints, on whatever JAX backend is active (CPU here; a GPU is picked up automatically):

1. panda batched self + world collision queries (SRDF allow-list, two boxes and the ground; 9 mesh
   hulls): GJK yes/no over every pair at each batch size (configurations/s and pair queries/s),
   the sphere-filtered check (must give the same answers), exact signed distances (GJK, EPA on the
   overlapping pairs) and the sphere approximation's distances;
2. CHOMP (``caliper_jax.trajopt.trajopt``: 8 initialisations per problem, 200 Adam steps, 32
   waypoints, then the exact check) on the seeded collide_arm set at batch 1, 64 and 512
   problems per call: problems/s and success rate; then the seeded panda-among-boxes set in one
   call;
3. planners on the same seeded sets: RRT-Connect, RRT* and PRM on collide_arm, RRT-Connect on
   panda, planned with a 5 mm margin: success rate and time per problem.

Success means a path whose every edge is collision-free when checked with the exact colliders at
the set's edge resolution (0.02 rad collide_arm, 0.05 rad panda); every returned path is then
re-checked at a 4x finer resolution; CHOMP batches are solved twice and the planners' first three
problems too, to compare the path bytes. Compile time is the first call minus a second call of
the same shapes, reported apart from the timed runs. The problem sets are
``caliper_jax.planning.problems`` (start and goal clear by 1 cm, straight line between them
blocked).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


#: Clearance the planners must keep at their samples: between two samples 0.02 rad apart the
#: collide_arm can dip up to ~2.4 mm into the bar (seen without a margin), which the 4x finer
#: re-check (no margin) would report.
PLAN_MARGIN = 0.005


def _twice(fn):
    """(compile seconds, run seconds, first result, second result): a first call and a second
    identical one."""
    t0 = time.perf_counter()
    first = fn()
    t_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    second = fn()
    run = time.perf_counter() - t0
    return max(t_first - run, 0.0), run, first, second


def _rates(B, pairs, dt):
    return f"{B / dt:>9.0f} configs/s {B * pairs / dt:>11.0f} pair queries/s"


def bench_checks(batches, np, jax, jnp):
    from caliper_jax.collision import api, query
    from caliper_jax.planning.problems import panda_problems

    ps = panda_problems(0)
    panda = ps.model
    cm = ps.collision_model()
    spheres = ps.sphere_model()
    P = cm.npair
    print(f"\n[1] panda collision queries: {sum(cm.pair_self)} self + {P - sum(cm.pair_self)} world pairs "
          f"(9 mesh hulls of up to {cm.hull_verts.shape[1]} vertices, 2 boxes, ground), dtype {panda.dtype}")
    rng = np.random.default_rng(0)
    lo, hi = np.asarray(panda.qpos_lower), np.asarray(panda.qpos_upper)
    gjk = jax.jit(jax.vmap(lambda q: query.in_collision(panda, cm, q)))
    filt = api.SphereFilter(cm)
    for B in batches:
        qs = rng.uniform(lo, hi, (B, panda.nq))
        qj = jnp.asarray(qs, panda.dtype)
        comp, dt, _, hit = _twice(lambda qj=qj: jax.block_until_ready(gjk(qj)))
        hit = np.asarray(hit)
        print(f"  GJK yes/no, every pair,     batch {B:>6}: {_rates(B, P, dt)} ({dt * 1e3:9.2f} ms/call; "
              f"compile {comp:5.1f} s; {100 * hit.mean():.0f}% in collision)")
        comp, dt, _, hit2 = _twice(lambda qs=qs, B=B: api.filtered_in_collision(panda, filt, qs, chunk=B,
                                                                             fixed=True))
        same = "same answers" if np.array_equal(hit2, hit) else "ANSWERS DIFFER"
        print(f"  sphere cover + GJK on rest, batch {B:>6}: {_rates(B, P, dt)} ({dt * 1e3:9.2f} ms/call; "
              f"compile {comp:5.1f} s; {same})")
    B = min(1024, max(batches))
    qs = rng.uniform(lo, hi, (B, panda.nq))
    comp, dt, _, _ = _twice(lambda: api.distances(panda, cm, qs))
    print(f"  exact signed distances,     batch {B:>6}: {_rates(B, P, dt)} (GJK, EPA on overlaps; "
          f"compile {comp:.1f} s)")
    sd = jax.jit(jax.vmap(lambda q: query.sphere_distances(panda, spheres, q)))
    B = max(batches)
    qj = jnp.asarray(rng.uniform(lo, hi, (B, panda.nq)), panda.dtype)
    comp, dt, _, _ = _twice(lambda: jax.block_until_ready(sd(qj)))
    print(f"  sphere approximation,       batch {B:>6}: {_rates(B, spheres.npair, dt)} ({spheres.n_robot} "
          f"spheres, {spheres.npair} sphere pairs; compile {comp:.1f} s)")


def _chomp_run(ps, P, np, inits=8):
    from caliper_jax.planning import Checker
    from caliper_jax.trajopt import trajopt

    exact = ps.collision_model()
    spheres = ps.sphere_model()
    chk = Checker(ps.model, exact, resolution=ps.resolution, batch=1024)
    fine = Checker(ps.model, exact, resolution=ps.resolution / 4, batch=1024)
    starts, goals = ps.starts[:P], ps.goals[:P]
    comp, dt, res, res2 = _twice(lambda: trajopt(ps.model, starts, goals, inits=inits, seed=0,
                                                 spheres=spheres, checker=chk))
    ok = int(res.success.sum())
    valid = sum(fine.path_valid(p) for p, s in zip(res.paths, res.success, strict=True) if s)
    same = res.paths.tobytes() == res2.paths.tobytes()
    return comp, dt, ok, valid, same


def bench_chomp(batches, n_panda, np):
    from caliper_jax.planning.problems import collide_arm_problems, panda_problems

    arm = collide_arm_problems(max(batches), seed=0)
    print(f"\n[2] CHOMP, 8 initialisations per problem, 200 Adam steps, 32 waypoints; seeded collide_arm set "
          f"({len(arm)} problems, fold under a bar), exact check at {arm.resolution} rad")
    for P in batches:
        comp, dt, ok, valid, same = _chomp_run(arm, P, np)
        print(f"  collide_arm batch {P:>4}: {P / dt:8.2f} problems/s ({dt:7.2f} s per call incl. exact "
              f"check; compile {comp:5.1f} s), success {ok}/{P} ({100 * ok / P:.1f}%), valid at 4x finer "
              f"{valid}/{ok}, same bytes on a rerun: {'yes' if same else 'NO'}")
    if n_panda:
        pan = panda_problems(n_panda, seed=0)
        comp, dt, ok, valid, same = _chomp_run(pan, n_panda, np)
        print(f"  panda among boxes, {n_panda} problems in one call: {n_panda / dt:6.2f} problems/s "
              f"({dt:.1f} s; compile {comp:.1f} s), success {ok}/{n_panda} ({100 * ok / n_panda:.1f}%), "
              f"valid at 4x finer {valid}/{ok}, same bytes on a rerun: {'yes' if same else 'NO'}")


def _planner_run(ps, name, np):
    from caliper_jax.planning import Checker, plan

    cm = ps.collision_model()
    coarse = Checker(ps.model, cm, resolution=ps.resolution, margin=PLAN_MARGIN)
    fine = Checker(ps.model, cm, resolution=ps.resolution / 4)
    plan(ps.model, cm, ps.goals[0], ps.starts[0], planner=name, seed=0, checker=coarse)     # compile
    times, ok, valid, same = [], 0, 0, 0
    for k in range(len(ps)):
        t0 = time.perf_counter()
        r = plan(ps.model, cm, ps.goals[k], ps.starts[k], planner=name, seed=k, checker=coarse)
        times.append(time.perf_counter() - t0)
        if r.success:
            ok += 1
            valid += fine.path_valid(r.waypoints)
            if k < 3:
                r2 = plan(ps.model, cm, ps.goals[k], ps.starts[k], planner=name, seed=k, checker=coarse)
                same += r2.success and r2.waypoints.tobytes() == r.waypoints.tobytes()
    n = len(ps)
    print(f"  {ps.name:<11} {name:<10} success {ok}/{n} ({100 * ok / n:.1f}%), valid at 4x finer "
          f"{valid}/{ok}, same bytes for same seed {same}/{min(3, ok)}; time/problem mean "
          f"{np.mean(times):.3f} s, median {np.median(times):.3f} s, max {np.max(times):.3f} s")


def bench_planners(n_arm, n_panda, np):
    from caliper_jax.planning.problems import collide_arm_problems, panda_problems

    arm = collide_arm_problems(n_arm, seed=0)
    print(f"\n[3] planners on the seeded sets: collide_arm {n_arm} problems (edge resolution "
          f"{arm.resolution} rad), panda among boxes {n_panda} problems (0.05 rad); planned with a "
          f"{1000 * PLAN_MARGIN:g} mm margin, re-checked 4x finer without one")
    for name in ("rrtconnect", "rrtstar", "prm"):
        _planner_run(arm, name, np)
    if n_panda:
        _planner_run(panda_problems(n_panda, seed=0), "rrtconnect", np)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--x64", action="store_true", help="float64 instead of float32")
    ap.add_argument("--quick", action="store_true", help="smaller batches and problem sets")
    ap.add_argument("--skip", default="", help="comma list of sections to skip: checks,chomp,planners")
    ap.add_argument("--batches", default=None, help="collision batch sizes (default 1,1024,4096 on CPU, "
                                                    "1,1024,16384 on an accelerator)")
    args = ap.parse_args()
    import jax

    if args.x64:
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np

    print(f"backend {jax.default_backend()} ({', '.join(str(d) for d in jax.devices())}), "
          f"x64 {jax.config.jax_enable_x64}")
    skip = set(args.skip.split(","))
    if args.batches:
        batches = tuple(int(b) for b in args.batches.split(","))
    elif args.quick:
        batches = (1, 256)
    else:
        batches = (1, 1024, 4096) if jax.default_backend() == "cpu" else (1, 1024, 16384)
    t0 = time.perf_counter()
    if "checks" not in skip:
        bench_checks(batches, np, jax, jnp)
    if "chomp" not in skip:
        bench_chomp((1, 16) if args.quick else (1, 64, 512), 4 if args.quick else 20, np)
    if "planners" not in skip:
        bench_planners(6 if args.quick else 40, 4 if args.quick else 20, np)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Dynamics trajopt against CHOMP + TOPP-RA, and the fixed-path minimum-time cross-check.

Part 1 (fixed path, the must-show's reference solution): for ``--n`` paths (the CHOMP paths of
the collide_arm set, as cubic splines) the minimum time under the joint velocity and acceleration
limits (``vel+acc``) and with the torque limits too (``+torque``, first-order interpolated rows),
three ways on one grid of ``--grid`` intervals: the repo's TOPP-RA (exact, reachability), the
``toppra`` package (vel+acc only, same grid, collocation), and the trajopt solver constrained to
the path (:mod:`caliper_jax.trajopt.path_timing`: augmented Lagrangian over the squared path
speeds, the same rows). Ratio = trajopt / TOPP-RA; the must-show asks within 5%.

Part 2 (free trajectory, same problems): CHOMP (8 inits) then torque-limited TOPP-RA of its path
(``topp_torque``) against the dynamics trajopt (multiple shooting, minimum time, torque/velocity/
joint limits, collision cost; Gauss-Newton inner steps), warm-started from the CHOMP path. The
shooting has no joint acceleration limit, so TOPP-RA is also run on the torque and velocity limits
only (acceleration limit 1e4 rad/s^2) for a like-for-like duration. Success: CHOMP collision-free
and TOPP-RA feasible / shooting converged (violation <= 1e-3) and collision-free (exact colliders
at the set's resolution). Times are wall seconds after a warm-up call (compile excluded; printed
separately); durations are the trajectories' lengths in seconds.

    python benchmarks/bench_trajopt.py --n 4 [--json out.json] [--float32]
"""
from __future__ import annotations

import argparse
import json
import logging
import time

import jax
import jax.numpy as jnp
import numpy as np


def _toppra(wp, vmax, amax, n_grid):
    import toppra
    import toppra.algorithm as algo
    import toppra.constraint as constraint

    logging.getLogger("toppra").setLevel(logging.ERROR)
    path = toppra.SplineInterpolator(np.linspace(0, 1, wp.shape[0]), wp, bc_type="natural")
    vel = constraint.JointVelocityConstraint(np.stack([-vmax, vmax], 1))
    acc = constraint.JointAccelerationConstraint(np.stack([-amax, amax], 1),
                                                 discretization_scheme=constraint.DiscretizationType.Collocation)
    inst = algo.TOPPRA([vel, acc], path, gridpoints=np.linspace(0, 1, n_grid + 1),
                       parametrizer="ParametrizeSpline")
    traj = inst.compute_trajectory(0, 0)
    return float(traj.duration) if traj is not None else float("nan")


def fixed_path(model, paths, n_grid):
    from caliper_jax.motion import MotionLimits
    from caliper_jax.motion.reachability import (
        interpolate_constraints,
        joint_limit_constraints,
        stack_constraints,
        topp_ra,
    )
    from caliper_jax.motion.spline import cubic_spline, spline_eval
    from caliper_jax.motion.torque import torque_constraints
    from caliper_jax.trajopt import path_timing

    lim = MotionLimits.from_model(model)
    dt = model.dtype

    @jax.jit
    def rows(wp):
        grid = jnp.linspace(0.0, 1.0, n_grid + 1, dtype=dt)
        path = spline_eval(cubic_spline(wp), grid)
        va = joint_limit_constraints(path, lim)
        tq = interpolate_constraints(grid, torque_constraints(model, path))
        return grid, va, stack_constraints(va, tq)

    ref = jax.jit(topp_ra)
    out = []
    for wp in paths:
        grid, va, full = rows(jnp.asarray(wp, dt))
        row = {}
        for name, cons in (("vel+acc", va), ("+torque", full)):
            r = ref(grid, cons)
            t0 = time.perf_counter()
            _, T, viol = path_timing.time_optimal_jit(grid, cons)
            T = float(T)
            row[name] = {"topp_ra": float(r.duration), "topp_ra_feasible": bool(r.feasible), "trajopt": T,
                         "trajopt_violation": float(viol), "ratio": T / float(r.duration),
                         "trajopt_s": time.perf_counter() - t0}
        row["vel+acc"]["toppra_pkg"] = _toppra(np.asarray(wp, np.float64), np.asarray(lim.vmax),
                                               np.asarray(lim.amax), n_grid)
        out.append(row)
    return out


def free_trajectory(ps, chomp_paths, chomp_ok, horizon):
    from caliper_jax.motion import MotionLimits, topp_torque
    from caliper_jax.planning import Checker
    from caliper_jax.trajopt import trajopt_dynamic

    model = ps.model
    spheres = ps.sphere_model()
    check = Checker(model, ps.collision_model(), resolution=ps.resolution, batch=256)
    out = []
    for p in range(len(ps)):
        t0 = time.perf_counter()
        tt = topp_torque(model, chomp_paths[p])
        t_topp = time.perf_counter() - t0
        # the shooting has no joint acceleration limit: TOPP-RA on torque (and velocity) limits only
        tq_only = topp_torque(model, chomp_paths[p], limits=MotionLimits.from_model(model, acceleration=1e4))
        t0 = time.perf_counter()
        res = trajopt_dynamic(model, ps.starts[p], ps.goals[p], horizon=horizon, objective="time",
                              spheres=spheres, init=chomp_paths[p])
        t_dyn = time.perf_counter() - t0
        clear = bool(check.path_valid(res.q[0]))
        out.append({"chomp_topp_success": bool(chomp_ok[p]) and bool(tt.feasible), "topp_s": t_topp,
                    "topp_duration": float(tt.duration), "topp_torque_only_duration": float(tq_only.duration),
                    "topp_torque_only_feasible": bool(tq_only.feasible),
                    "dyn_success": bool(res.converged[0]) and clear, "dyn_converged": bool(res.converged[0]),
                    "dyn_collision_free": clear, "dyn_violation": float(res.violation[0]),
                    "dyn_duration": float(res.duration[0]), "dyn_s": t_dyn,
                    "dyn_max_tau_ratio": float(np.max(np.abs(res.tau[0])
                                                      / np.asarray(model.dof_effort_limit)))})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4, help="problems (collide_arm set, seed 0)")
    ap.add_argument("--grid", type=int, default=100, help="fixed-path grid intervals")
    ap.add_argument("--horizon", type=int, default=24, help="shooting intervals")
    ap.add_argument("--float32", action="store_true", help="run at float32 (default float64)")
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args(argv)
    if not args.float32:
        jax.config.update("jax_enable_x64", True)

    from caliper_jax.planning.problems import collide_arm_problems
    from caliper_jax.trajopt import trajopt

    ps = collide_arm_problems(args.n, seed=0)
    if not args.float32:
        ps.model = ps.model.astype(jnp.float64)
    t0 = time.perf_counter()
    trajopt(ps.model, ps.starts, ps.goals, inits=8, seed=0, spheres=ps.sphere_model())  # compile
    t_compile_chomp = time.perf_counter() - t0
    t0 = time.perf_counter()
    chomp = trajopt(ps.model, ps.starts, ps.goals, inits=8, seed=0, spheres=ps.sphere_model())
    t_chomp = (time.perf_counter() - t0) / len(ps)

    t0 = time.perf_counter()
    fixed_path(ps.model, chomp.paths[:1], args.grid)                       # compile
    t_compile_path = time.perf_counter() - t0
    fixed = fixed_path(ps.model, chomp.paths, args.grid)

    t0 = time.perf_counter()
    free_trajectory(_first(ps), chomp.paths[:1], chomp.success[:1], args.horizon)   # compile
    t_compile_dyn = time.perf_counter() - t0
    free = free_trajectory(ps, chomp.paths, chomp.success, args.horizon)

    print(f"collide_arm, {len(ps)} problems, {'float32' if args.float32 else 'float64'}; compile: CHOMP "
          f"{t_compile_chomp:.1f} s, path timing {t_compile_path:.1f} s, dynamics {t_compile_dyn:.1f} s")
    print("\nfixed path, minimum time (s): TOPP-RA | toppra pkg | trajopt on the path (ratio)")
    for p, row in enumerate(fixed):
        va, tq = row["vel+acc"], row["+torque"]
        print(f"  {p}: vel+acc {va['topp_ra']:.4f} | {va['toppra_pkg']:.4f} | {va['trajopt']:.4f} "
              f"({va['ratio']:.4f})   +torque {tq['topp_ra']:.4f} | - | {tq['trajopt']:.4f} "
              f"({tq['ratio']:.4f})")
    worst = max(max(abs(r["vel+acc"]["ratio"] - 1), abs(r["+torque"]["ratio"] - 1)) for r in fixed)
    print(f"  worst |ratio - 1|: {worst:.4f} (must be < 0.05)")
    print("\nfree trajectory: CHOMP + TOPP-RA(torque) | dynamics trajopt (min time, warm from CHOMP)")
    sr_a = np.mean([r["chomp_topp_success"] for r in free])
    sr_b = np.mean([r["dyn_success"] for r in free])
    print(f"  success {sr_a:.2f} | {sr_b:.2f}")
    print(f"  time/problem (s) {t_chomp + np.mean([r['topp_s'] for r in free]):.3f} | "
          f"{np.mean([r['dyn_s'] for r in free]):.3f} (+ CHOMP {t_chomp:.3f})")
    for p, r in enumerate(free):
        print(f"  {p}: duration {r['topp_duration']:.3f} (torque limits only "
              f"{r['topp_torque_only_duration']:.3f}) | {r['dyn_duration']:.3f}  (violation "
              f"{r['dyn_violation']:.1e}, collision-free {r['dyn_collision_free']}, max|tau|/effort "
              f"{r['dyn_max_tau_ratio']:.3f})")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"n": len(ps), "float32": args.float32, "chomp_s_per_problem": t_chomp,
                       "compile_s": {"chomp": t_compile_chomp, "path": t_compile_path,
                                     "dynamics": t_compile_dyn},
                       "fixed_path": fixed, "free": free}, fh, indent=1)
    return 0


def _first(ps):
    from caliper_jax.planning.problems import ProblemSet

    return ProblemSet(ps.name, ps.model, ps.obstacles, ps.srdf, ps.starts[:1], ps.goals[:1], ps.resolution)


if __name__ == "__main__":
    raise SystemExit(main())

"""Motion benchmark: batched S-curve MOVE_J and TOPP-RA in JAX against Ruckig and toppra loops.

Run: python benchmarks/bench_motion.py [--x64] [--topp-paths 1000] [--ref-paths 100]
Prints compile time separately from run time (median of repeats, after a warm-up call), the
per-problem cost on each side, and the largest duration deviation from the reference library.
"""
from __future__ import annotations

import argparse
import logging
import os
import time

import numpy as np


def _median_time(fn, repeats=5):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _fmt(seconds):
    if seconds >= 1.0:
        return f"{seconds:8.3f} s "
    if seconds >= 1e-3:
        return f"{seconds * 1e3:8.3f} ms"
    return f"{seconds * 1e6:8.3f} us"


def bench_scurve(jax, jnp, motion, dtype, n_samples, ndof=7, sizes=(1, 1000, 100_000), sample_batch=10_000):
    rng = np.random.default_rng(0)
    v = rng.uniform(0.5, 3.0, ndof)
    lim = motion.MotionLimits.from_arrays(-np.full(ndof, 6.0), np.full(ndof, 6.0), v)
    lim_j = jax.tree_util.tree_map(lambda x: jnp.asarray(x, dtype), lim)

    def plan(q0, q1):
        return jax.vmap(motion.move_j, in_axes=(0, 0, None))(q0, q1, lim_j)

    def sample(traj):
        return jax.vmap(lambda t: t.grid(n_samples))(traj)

    print(f"\n== S-curve MOVE_J, {ndof}-dof rest-to-rest moves ({jnp.dtype(dtype).name}) ==")
    print(f"{'batch':>8} {'compile':>11} {'run (batch)':>12} {'per move':>11}")
    rows = {}
    for n in sizes:
        q0 = jnp.asarray(rng.uniform(-3, 3, (n, ndof)), dtype)
        q1 = jnp.asarray(rng.uniform(-3, 3, (n, ndof)), dtype)
        t0 = time.perf_counter()
        fn = jax.jit(plan).lower(q0, q1).compile()
        compile_s = time.perf_counter() - t0
        jax.block_until_ready(fn(q0, q1))
        run = _median_time(lambda fn=fn, q0=q0, q1=q1: jax.block_until_ready(fn(q0, q1)))
        rows[n] = run / n
        print(f"{n:>8} {_fmt(compile_s):>11} {_fmt(run):>12} {_fmt(run / n):>11}")
    # Plan and sample as two jitted calls: in one jit, XLA on CPU fuses the planner into the
    # per-sample loop and recomputes it for every sample (see docs/motion.md).
    n = sample_batch
    q0 = jnp.asarray(rng.uniform(-3, 3, (n, ndof)), dtype)
    q1 = jnp.asarray(rng.uniform(-3, 3, (n, ndof)), dtype)
    plan_fn = jax.jit(plan).lower(q0, q1).compile()
    traj = plan_fn(q0, q1)
    t0 = time.perf_counter()
    sample_fn = jax.jit(sample).lower(traj).compile()
    compile_s = time.perf_counter() - t0
    jax.block_until_ready(sample_fn(traj))
    run_ps = _median_time(lambda: jax.block_until_ready(sample_fn(plan_fn(q0, q1))), repeats=5)
    print(f"plan + {n_samples} samples (q, qd, qdd), batch {n}: sampler compile {_fmt(compile_s).strip()}, "
          f"run {_fmt(run_ps).strip()}, {_fmt(run_ps / n).strip()} per move")
    ours_dur = np.asarray(traj.duration, dtype=np.float64)
    return lim, np.asarray(q0, np.float64), np.asarray(q1, np.float64), ours_dur, rows, run_ps / n


def bench_ruckig(lim, q0, q1, ours_dur, n_ref, n_samples):
    try:
        import ruckig
    except ImportError:
        print("ruckig not installed: skipping the Ruckig comparison")
        return None
    ndof = q0.shape[1]
    otg = ruckig.Ruckig(ndof)
    inp = ruckig.InputParameter(ndof)
    inp.max_velocity, inp.max_acceleration, inp.max_jerk = list(lim.vmax), list(lim.amax), list(lim.jmax)
    traj = ruckig.Trajectory(ndof)
    durs = []
    t0 = time.perf_counter()
    for i in range(n_ref):
        inp.current_position, inp.target_position = list(q0[i]), list(q1[i])
        otg.calculate(inp, traj)
        durs.append(traj.duration)
    plan_s = (time.perf_counter() - t0) / n_ref
    t0 = time.perf_counter()
    for i in range(n_ref):
        inp.current_position, inp.target_position = list(q0[i]), list(q1[i])
        otg.calculate(inp, traj)
        for t in np.linspace(0.0, traj.duration, n_samples):
            traj.at_time(t)
    plan_sample_s = (time.perf_counter() - t0) / n_ref
    rel = np.abs(ours_dur[:n_ref] - np.array(durs)) / np.array(durs)
    print(f"Ruckig loop ({n_ref} moves, Python bindings): {_fmt(plan_s).strip()} per move planned, "
          f"{_fmt(plan_sample_s).strip()} per move planned + {n_samples} samples")
    print(f"max |duration - Ruckig| / Ruckig over {n_ref} moves: {rel.max():.2e}")
    return plan_s, plan_sample_s, rel.max()


def bench_topp(jax, jnp, motion, dtype, n_paths, n_ref, ndof=6, n_wp=5, n_grid=100):
    rng = np.random.default_rng(1)
    wp = rng.uniform(-1.5, 1.5, (n_paths, n_wp, ndof))
    vmax = rng.uniform(0.5, 2.0, (n_paths, ndof))
    amax = rng.uniform(1.0, 5.0, (n_paths, ndof))

    def solve(wp, vmax, amax):
        def one(w, v, a):
            lim = motion.MotionLimits(None, None, v, a, None)
            return motion.topp_ra_spline(motion.cubic_spline(w, bc="natural"), lim, n_grid)[0]
        return jax.vmap(one)(wp, vmax, amax)

    args = tuple(jnp.asarray(x, dtype) for x in (wp, vmax, amax))
    t0 = time.perf_counter()
    fn = jax.jit(solve).lower(*args).compile()
    compile_s = time.perf_counter() - t0
    res = jax.block_until_ready(fn(*args))
    run = _median_time(lambda: jax.block_until_ready(fn(*args)), repeats=3)
    print(f"\n== TOPP-RA, {n_paths} natural-spline paths, {ndof} dof, {n_wp} waypoints, "
          f"{n_grid} grid intervals ({jnp.dtype(dtype).name}) ==")
    print(f"ours: compile {_fmt(compile_s).strip()}, run {_fmt(run).strip()} for the batch, "
          f"{_fmt(run / n_paths).strip()} per path; all feasible: {bool(np.all(np.asarray(res.feasible)))}")
    ours_dur = np.asarray(res.duration, dtype=np.float64)
    try:
        import toppra as ta
        import toppra.algorithm as algo
        import toppra.constraint as constraint
    except ImportError:
        print("toppra not installed: skipping the toppra comparison")
        return run / n_paths, None
    logging.getLogger("toppra").setLevel(logging.ERROR)
    grid = np.linspace(0.0, 1.0, n_grid + 1)
    ss = np.linspace(0.0, 1.0, n_wp)
    ref = []
    t0 = time.perf_counter()
    for i in range(n_ref):
        path = ta.SplineInterpolator(ss, wp[i], bc_type="natural")
        vel = constraint.JointVelocityConstraint(np.stack([-vmax[i], vmax[i]], 1))
        acc = constraint.JointAccelerationConstraint(
            np.stack([-amax[i], amax[i]], 1), discretization_scheme=constraint.DiscretizationType.Collocation)
        inst = algo.TOPPRA([vel, acc], path, gridpoints=grid, solver_wrapper="seidel")
        sd = inst.compute_parameterization(0.0, 0.0)[1]
        ref.append(np.sum(2.0 * np.diff(grid) / (sd[1:] + sd[:-1])))
    per_ref = (time.perf_counter() - t0) / n_ref
    ref = np.array(ref)
    rel = np.abs(ours_dur[:n_ref] - ref) / ref
    print(f"toppra loop ({n_ref} paths, seidel solver, same grid and constraints): "
          f"{_fmt(per_ref).strip()} per path")
    print(f"speed-up per path: {per_ref / (run / n_paths):.0f}x; "
          f"max |duration - toppra| / toppra: {rel.max():.2e} (mean {rel.mean():.2e})")
    return run / n_paths, (per_ref, rel.max())


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--x64", action="store_true", help="run in float64 (default float32)")
    ap.add_argument("--topp-paths", type=int, default=1000)
    ap.add_argument("--ref-paths", type=int, default=100, help="paths/moves timed in the reference loops")
    ap.add_argument("--samples", type=int, default=100)
    args = ap.parse_args()
    import jax

    if args.x64:
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    import caliper_jax.motion as motion

    dtype = jnp.float64 if args.x64 else jnp.float32
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}, {os.cpu_count()} CPU cores visible")
    lim, q0, q1, ours_dur, per_move, per_move_sampled = bench_scurve(jax, jnp, motion, dtype, args.samples)
    ref = bench_ruckig(lim, q0, q1, ours_dur, min(args.ref_paths * 20, q0.shape[0]), args.samples)
    if ref is not None:
        plan_s, plan_sample_s, _ = ref
        print(f"speed-up per move vs Ruckig: planning {plan_s / per_move[max(per_move)]:.0f}x "
              f"(largest batch), planning + sampling {plan_sample_s / per_move_sampled:.0f}x")
    bench_topp(jax, jnp, motion, dtype, args.topp_paths, args.ref_paths)


if __name__ == "__main__":
    main()

"""Closed-loop control benchmark: batched computed-torque rollouts (gate + controller + plant, one
``lax.scan`` vmapped over worlds) on panda.

Run: python benchmarks/bench_control.py [--worlds 1 64 1024 8192] [--ticks 200] [--x64]
Prints the compile time separately from the run time (median of repeats after a warm-up call)
and the throughput in world-ticks per second (one world-tick = one gated control tick plus one
semi-implicit Euler step of the plant).
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def _median(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robot", default="panda")
    ap.add_argument("--worlds", type=int, nargs="+", default=[1, 64, 1024])
    ap.add_argument("--ticks", type=int, default=200, help="control ticks per rollout (default 200)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--x64", action="store_true", help="float64 (default float32)")
    args = ap.parse_args(argv)

    import jax

    if args.x64:
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    from caliper_jax import control
    from caliper_jax.control.runner import _rollout_jit, initial_states
    from caliper_jax.loading import load
    from caliper_jax.motion import MotionLimits

    model = load(args.robot)
    params = control.control_params(model)
    safety = control.safety_params(model, float(params.dt))
    limits = MotionLimits.from_model(model)
    lo, hi = np.asarray(model.qpos_lower), np.asarray(model.qpos_upper)
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    dtype = model.dtype
    print(f"robot {model.name} (nq={model.nq}), {args.ticks} ticks of {float(params.dt)} s per rollout, "
          f"{jnp.dtype(dtype).name}, backend {jax.default_backend()} ({jax.devices()[0].device_kind})")
    print(f"{'worlds':>7} {'compile':>9} {'run':>9} {'world-ticks/s':>14} {'us/world-tick':>14}")
    for n in args.worlds:
        rng = np.random.default_rng(n)
        q0 = mid + 0.3 * half * rng.uniform(-1, 1, (n, model.nq))
        goal = mid + 0.3 * half * rng.uniform(-1, 1, (n, model.nq))
        source = jax.vmap(lambda a, b: control.goal_source(a, b, limits))(jnp.asarray(q0, dtype),
                                                                          jnp.asarray(goal, dtype))
        state, _ = initial_states(model, q0)
        kw = dict(ticks=args.ticks, every=1, batched=True, leaves=(), source_batched=True)
        t0 = time.perf_counter()
        compiled = _rollout_jit.lower(model, params, safety, source, state, **kw).compile()
        compile_s = time.perf_counter() - t0
        run = lambda c=compiled, s=source, st=state: jax.block_until_ready(c(model, params, safety, s, st))
        final, rows = run()
        assert bool(np.all(np.isfinite(np.asarray(rows.tau)))), "non-finite effort"
        run_s = _median(run, args.repeats)
        rate = n * args.ticks / run_s
        print(f"{n:>7} {compile_s:>8.2f}s {run_s:>8.3f}s {rate:>14.4g} {1e6 / rate:>14.2f}")


if __name__ == "__main__":
    main()

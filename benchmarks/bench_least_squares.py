"""Our Levenberg-Marquardt (caliper_jax.least_squares, host loop over chunked jitted residuals and
Jacobians) against optimistix's ``LevenbergMarquardt`` (the maintained JAX library: the whole solve
one traced program), on the system-identification problems of tests/test_sysid.py.

    python benchmarks/bench_least_squares.py [--iterations 30] [--problems swing,push]
        [--solvers ours,optimistix]

Problems (float64, planted data, so the truth is known): ``swing`` (two-link arm, no contact:
damping of both joints and one armature, start 1.4/0.7/1.3 x truth) and ``push`` (a pusher sliding a
cube: the cube's friction and mass, start 1.4/0.7 x truth, the contact time constant held). Both
solvers work on the same unconstrained parameters z (log-sigmoid inside the bounds,
``ParamSet.to_values``), the same scaled residuals of all episodes' segments, the same iteration
cap. Ours is timed as the whole ``sysid.identify`` call a user makes (its RMSE report included); its
compile time is the first call minus the second (same shapes). optimistix is timed as
``jit(least_squares)``: first call (compile + run) and a second call (run). Printed: worst relative
parameter error against the truth, final cost 0.5 |r|^2, iterations / steps, compile, run.
"""
from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from caliper_jax import sysid  # noqa: E402
from caliper_jax.sysid import scenes  # noqa: E402

PROBLEMS = {
    # name: (scene, parameters, episodes, steps, chunk, planted-data kwargs, start factors)
    "swing": ("swing", "damping,armature:j2", 4, 40, 10, {"amplitude": 1.2}, (1.4, 0.7, 1.3)),
    "push": ("push", "friction:cube,mass:cube", 3, 40, 4, {"amplitude": 0.08, "offset": 0.16}, (1.4, 0.7)),
}


def problem(name: str):
    scene, names, episodes, steps, chunk, kw, factors = PROBLEMS[name]
    mj = scenes.scene(scene)
    ps = sysid.param_set(mj, names)
    data = sysid.planted_dataset(mj, ps, ps.nominal, episodes=episodes, steps=steps,
                                 key=jax.random.PRNGKey(0 if name == "swing" else 1), **kw)
    start = ps.nominal * np.resize(np.asarray(factors), len(ps))
    return mj, ps, data, chunk, start


def ours(mj, ps, data, chunk, start, iterations):
    ev = sysid.Evaluator(mj, ps, chunk, 8)
    times, res = [], None
    for _ in range(2):
        t = time.perf_counter()
        res = sysid.identify(mj, data, ps, start=start, chunk=chunk, evaluator=ev, validation=0.0,
                             iterations=iterations)
        times.append(time.perf_counter() - t)
    return res.values, res.cost[-1], res.iterations, times[0] - times[1], times[1]


def optimistix(mj, ps, data, chunk, start, iterations):
    import optimistix as optx

    ev = sysid.Evaluator(mj, ps, chunk, 8)
    chunks = sysid.make_chunks(data, chunk)
    scale = jnp.asarray(sysid.feature_scale(mj, data, np.arange(data.episodes)))
    ch = sysid.Chunks(*(jnp.asarray(a) for a in chunks))

    def fn(z, _):
        return ev.residual_fn(ps.to_values(z), ch, scale)

    solver = optx.LevenbergMarquardt(rtol=1e-9, atol=1e-12)
    def run(z0):
        sol = optx.least_squares(fn, solver, z0, max_steps=iterations, throw=False)
        return sol.value, sol.stats["num_steps"]

    solve = jax.jit(run)
    z0 = jnp.asarray(ps.to_z(start))
    times, z, steps = [], None, 0
    for _ in range(2):
        t = time.perf_counter()
        z, steps = jax.block_until_ready(solve(z0))
        times.append(time.perf_counter() - t)
    r = np.asarray(fn(z, None))
    values = np.asarray(ps.to_values(z))
    return values, 0.5 * float(r @ r), int(steps), times[0] - times[1], times[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--problems", default="swing,push")
    ap.add_argument("--solvers", default="ours,optimistix", help="comma-separated subset of ours,optimistix")
    a = ap.parse_args()
    head = ("problem", "solver", "param err", "cost", "iters", "compile s", "run s")
    print("{:8} {:12} {:>10} {:>10} {:>6} {:>10} {:>8}".format(*head))
    for name in a.problems.split(","):
        mj, ps, data, chunk, start = problem(name)
        for label in a.solvers.split(","):
            fn = {"ours": ours, "optimistix": optimistix}[label]
            v, cost, its, comp, run = fn(mj, ps, data, chunk, start, a.iterations)
            err = float(np.max(np.abs(v - ps.nominal) / ps.nominal))
            row = f"{name:8} {label:12} {err:10.2e} {cost:10.3e} {its:6d} {comp:10.2f} {run:8.2f}"
            print(row, flush=True)


if __name__ == "__main__":
    main()

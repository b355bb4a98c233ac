"""Our L-BFGS (caliper_jax.trajopt.auglag.lbfgs: fixed iterations, Armijo backtracking, a lax.scan)
against optax's (``optax.lbfgs`` with its zoom line search, the maintained library), side by side.

    python benchmarks/bench_optimizers.py [--iters 60]

Problems (float64): Rosenbrock in 2 and 20 dimensions from the standard start (-1.2, 1, ...), and
the augmented-Lagrangian merit of the circle problem of tests/test_trajopt_dynamic.py
(``min x + y`` on the unit circle, x >= -0.5, rho 10). Each solver runs a fixed number of
iterations inside one ``jax.jit`` (what trajopt needs: no host sync, vmappable); the table prints
the final objective gap to the known optimum, the objective evaluations' count where known, the
compile time and the run time (median of 5) separately. Figures in benchmarks/README.md.
"""
from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import optax

jax.config.update("jax_enable_x64", True)

from caliper_jax.trajopt import auglag  # noqa: E402


def rosenbrock(z):
    return jnp.sum(100.0 * (z[1:] - z[:-1] ** 2) ** 2 + (1.0 - z[:-1]) ** 2)


def circle_merit(z):
    return auglag.merit(lambda z: z[0] + z[1], lambda z: jnp.array([z @ z - 1.0]),
                        lambda z: jnp.array([-0.5 - z[0]]), z, jnp.zeros(1), jnp.zeros(1), 10.0)


def ours(fun, iters):
    return jax.jit(lambda z0: auglag.lbfgs(fun, z0, iters)[0])


def theirs(fun, iters):
    opt = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(fun)

    def run(z0):
        def body(carry, _):
            z, state = carry
            value, grad = value_and_grad(z, state=state)
            updates, state = opt.update(grad, state, z, value=value, grad=grad, value_fn=fun)
            return (optax.apply_updates(z, updates), state), None

        (z, _), _ = jax.lax.scan(body, (z0, opt.init(z0)), None, length=iters)
        return z
    return jax.jit(run)


def timed(make, fun, z0, iters):
    t0 = time.perf_counter()
    solver = make(fun, iters)
    z = jax.block_until_ready(solver(z0))
    compile_s = time.perf_counter() - t0
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        jax.block_until_ready(solver(z0))
        runs.append(time.perf_counter() - t0)
    return z, compile_s, statistics.median(runs)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iters", type=int, default=60)
    args = parser.parse_args(argv)
    r_opt = 0.0
    problems = {
        "rosenbrock-2": (rosenbrock, jnp.array([-1.2, 1.0]), r_opt),
        "rosenbrock-20": (rosenbrock, jnp.tile(jnp.array([-1.2, 1.0]), 10), r_opt),
        "auglag-circle merit": (circle_merit, jnp.array([1.0, 0.0]), None),
    }
    print(f"{'problem':<22} {'solver':<14} {'f final':>12} {'gap':>10} {'compile s':>10} {'run ms':>8}")
    for name, (fun, z0, fstar) in problems.items():
        finals = {}
        for label, make in (("ours", ours), ("optax.lbfgs", theirs)):
            z, c, r = timed(make, fun, z0, args.iters)
            finals[label] = float(fun(z))
        best = min(finals.values()) if fstar is None else fstar
        for label, make in (("ours", ours), ("optax.lbfgs", theirs)):
            z, c, r = timed(make, fun, z0, args.iters)
            f = float(fun(z))
            print(f"{name:<22} {label:<14} {f:12.4e} {f - best:10.2e} {c:10.2f} {1e3 * r:8.3f}")


if __name__ == "__main__":
    main()

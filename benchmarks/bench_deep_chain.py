"""Deep chains: load time, jit compile time and run time of FK, RNEA, CRBA and forward dynamics
for serial chains of N revolute links (``robots.chains.chain_urdf``), plus ``caliper fk`` and
``caliper load`` end to end (a fresh process each: imports included, an empty compilation cache).

    python benchmarks/bench_deep_chain.py [--links 100 300 1000] [--ops fk rnea crba fd]
                                          [--batch 256] [--unrolled] [--no-cli]

Compile and run are timed apart (``jit(f).lower(...).compile()``, then the best of a few calls).
``--batch B`` adds ``jit(vmap(f))`` over B configurations. ``--unrolled`` forces the unrolled
per-body walk (the path of small robots; what every model used before the level walk) for a
before/after comparison -- expect minutes beyond ~100 links. Results: benchmarks/README.md.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax import dynamics, kinematics, levels
from caliper_jax.io.urdf import read_urdf_string
from caliper_jax.model import build_model, tables
from robots.chains import chain_urdf

OPS = {
    "fk": lambda m, q: kinematics.forward_kinematics(m, q),
    "rnea": lambda m, q: dynamics.rnea(m, q, q, q),
    "crba": lambda m, q: dynamics.crba(m, q),
    "fd": lambda m, q: dynamics.forward_dynamics(m, q, q, q),
}


def _best(fn, *args, rounds=5):
    jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - t)
    return best


def _compile(fn, *args):
    t = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    return compiled, time.perf_counter() - t


def bench(n: int, ops, batch: int, cli: bool):
    text = chain_urdf(n)
    t0 = time.perf_counter()
    desc = read_urdf_string(text)
    t1 = time.perf_counter()
    model = build_model(desc)
    tables(model)
    levels.schedule(model)
    t2 = time.perf_counter()
    path = "levels" if levels.use_levels(model) else "unrolled"
    print(f"\n{n} links ({path} walk): parse {t1 - t0:.3f} s, build_model + tables {t2 - t1:.3f} s",
          flush=True)
    q = jax.random.uniform(jax.random.PRNGKey(0), (model.nq,), model.dtype, -1.0, 1.0)
    qs = jax.random.uniform(jax.random.PRNGKey(1), (batch, model.nq), model.dtype, -1.0, 1.0)
    for op in ops:
        fn = OPS[op]
        one, c1 = _compile(lambda q_, f=fn: f(model, q_), q)
        line = f"  {op:<5} compile {c1:6.2f} s   run {_best(one, q) * 1e3:8.3f} ms"
        if batch:
            many, cb = _compile(jax.vmap(lambda q_, f=fn: f(model, q_)), qs)
            line += f"   | vmap {batch}: compile {cb:6.2f} s   run {_best(many, qs) * 1e3:8.2f} ms"
        print(line, flush=True)
    if cli:
        with tempfile.TemporaryDirectory() as tmp:
            urdf = os.path.join(tmp, f"chain{n}.urdf")
            with open(urdf, "w") as f:
                f.write(text)
            env = dict(os.environ, XDG_CACHE_HOME=tmp)      # a cold compilation cache
            for cmd in (["load", urdf, "--json"], ["fk", urdf]):
                t = time.perf_counter()
                subprocess.run([sys.executable, "-m", "caliper_jax.cli", *cmd], check=True,
                               stdout=subprocess.DEVNULL, env=env)
                print(f"  caliper {cmd[0]:<4} (new process, end to end) {time.perf_counter() - t:6.2f} s",
                      flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--links", type=int, nargs="+", default=[100, 300, 1000])
    ap.add_argument("--ops", nargs="+", default=list(OPS), choices=list(OPS))
    ap.add_argument("--batch", type=int, default=0, help="also jit(vmap) over this many configurations")
    ap.add_argument("--unrolled", action="store_true", help="force the unrolled per-body walk")
    ap.add_argument("--no-cli", action="store_true", help="skip the caliper load / fk processes")
    args = ap.parse_args()
    if args.unrolled:
        levels.MAX_UNROLLED_BODIES = levels.MAX_UNROLLED_DEPTH = 10**9
    print(f"jax {jax.__version__}, {jax.default_backend()}, float32 (jnp default {jnp.zeros(1).dtype}), "
          f"{os.cpu_count()} CPUs, numpy {np.__version__}")
    for n in args.links:
        bench(n, args.ops, args.batch, cli=not args.no_cli and not args.unrolled)


if __name__ == "__main__":
    main()

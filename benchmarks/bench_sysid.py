"""System identification through contact: planted-parameter recovery and forward vs reverse mode.

For each scene: simulate episodes with MuJoCo C at the planted (nominal) parameters under random
smooth servo targets, start the fit from perturbed values, identify through chunked MJX rollouts
(float64), and report recovered values, relative errors, validation RMSE before/after, and the
time per Jacobian: forward mode (``jax.jacfwd``, what :mod:`caliper_jax.sysid` uses) against
reverse mode (``jax.grad`` of the loss, one gradient) on the same residual function. Reverse mode
fails on MJX's constraint solver (a ``lax.while_loop`` unless ``opt.iterations == 1``); the
benchmark reports that error rather than a time.

    python benchmarks/bench_sysid.py                 # swing + push, small sizes
    python benchmarks/bench_sysid.py --episodes 8 --steps 100 --json
"""
from __future__ import annotations

import argparse
import json
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

from caliper_jax import sysid  # noqa: E402
from caliper_jax.sysid import scenes  # noqa: E402

CASES = {
    "swing": dict(params="damping,armature", perturb=(1.5, 0.6, 1.4, 0.7), excite=dict(amplitude=1.2),
                  chunk=10),
    "push": dict(params="friction,mass", perturb=(1.4, 0.7), excite=dict(amplitude=0.08, offset=0.16),
                 chunk=4),
    "grip": dict(params="friction,solimp", perturb=(0.7, 1.05), excite=dict(amplitude=0.03, offset=0.08),
                 chunk=4),
}


def modes(ev, chunks, scale, values, reps=3):
    """(forward s, reverse s, compile s each) per evaluation of all parameters' derivatives."""
    import jax.numpy as jnp

    blk = next(iter(ev._blocks(chunks)))[1]
    sc = jnp.asarray(scale)

    def loss(v):
        r = ev.residual_fn(v, blk, sc)
        return 0.5 * jnp.sum(r ** 2)

    rev = jax.jit(jax.grad(loss))
    fwd = ev._res_jac
    out = {}
    for name, f in (("forward_jacfwd", lambda: fwd(jnp.asarray(values), blk, sc)),
                    ("reverse_grad", lambda: rev(jnp.asarray(values)))):
        t = time.perf_counter()
        try:
            jax.block_until_ready(f())
        except ValueError as exc:    # MJX's constraint solver is a while_loop unless opt.iterations == 1
            out[name] = {"error": str(exc).splitlines()[0]}
            continue
        compile_s = time.perf_counter() - t
        t = time.perf_counter()
        for _ in range(reps):
            jax.block_until_ready(f())
        out[name] = {"compile_s": compile_s, "run_s": (time.perf_counter() - t) / reps}
    return out


def run(name, episodes, steps, chunk, seed, compare):
    case = CASES[name]
    chunk = chunk or case["chunk"]
    mj = scenes.scene(name)
    ps = sysid.param_set(mj, case["params"])
    truth = ps.nominal
    data = sysid.planted_dataset(mj, ps, truth, episodes=episodes, steps=steps, key=jax.random.PRNGKey(seed),
                                 **case["excite"])
    start = truth * np.asarray(case["perturb"])
    t = time.perf_counter()
    ev = sysid.Evaluator(mj, ps, chunk, block=8)
    res = sysid.identify(mj, data, ps, start=start, chunk=chunk, evaluator=ev, key=jax.random.PRNGKey(seed))
    wall = time.perf_counter() - t
    s = res.summary()
    out = {"scene": name, "episodes": episodes, "steps": steps, "chunk": chunk,
           "parameters": {n: {"truth": float(a), "start": float(b), "found": float(c),
                              "rel_error": float(abs(c - a) / a)}
                          for n, a, b, c in zip(ps.names, truth, start, res.values, strict=True)},
           "rmse_all_features": s["rmse_all_features"], "iterations": res.iterations,
           "converged": res.converged, "wall_s_incl_compile": wall, "residual_calls": ev.calls}
    if compare:
        ch = sysid.make_chunks(data, chunk)
        scale = np.ones(mj.nq + mj.nv)
        out["derivatives"] = modes(ev, ch, scale, truth)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenes", default="swing,push", help="comma separated: swing, push, grip")
    ap.add_argument("--episodes", type=int, default=3)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--chunk", type=int, default=None, help="steps per chunk (default per scene: 10 swing, 4 "
                                                            "push/grip)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-compare", action="store_true", help="skip the forward/reverse timing")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    results = [run(n, a.episodes, a.steps, a.chunk, a.seed, not a.no_compare) for n in a.scenes.split(",")]
    if a.json:
        print(json.dumps(results, indent=2))
        return
    for r in results:
        print(f"{r['scene']}: {r['episodes']} episodes x {r['steps']} steps, chunk {r['chunk']}, "
              f"{r['iterations']} LM iterations ({r['wall_s_incl_compile']:.1f} s incl. compile)")
        for n, p in r["parameters"].items():
            print(f"  {n:<16} truth {p['truth']:.5g}  start {p['start']:.5g}  found {p['found']:.6g}  "
                  f"rel err {p['rel_error']:.2e}")
        for sp, d in r["rmse_all_features"].items():
            print(f"  {sp:<10} rmse (all features) {d['before']:.4g} -> {d['after']:.4g}")
        for m, d in r.get("derivatives", {}).items():
            if "error" in d:
                print(f"  {m:<15} fails: {d['error']}")
            else:
                print(f"  {m:<15} compile {d['compile_s']:.1f} s  run {1e3 * d['run_s']:.1f} ms")


if __name__ == "__main__":
    main()

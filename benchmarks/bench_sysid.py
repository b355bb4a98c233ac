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
    python benchmarks/bench_sysid.py --task sort-blocks   # zoo scene: jaw pushes a block, MJX and C data
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


ZOO = dict(params="friction:short_block,mass:short_block,damping:j1", truth=(1.2, 0.06, 2.0),
           perturb=(1.3, 0.75, 1.5), steps=120, chunk=4)


def run_zoo(task, seed):
    """The zoo case (docs/sysid.md, "Zoo scene"): gripper_arm pushes sort-blocks' short block
    (:func:`caliper_jax.sysid.scenes.zoo_push`); planted data from MJX and from MuJoCo C."""
    from caliper_jax.sysid.identify import POS_FLOOR, VEL_FLOOR
    from tasks.env import resolve_task

    ts = resolve_task(task)
    mj = ts.scene.mj
    ps = sysid.param_set(mj, ZOO["params"])
    truth = np.asarray(ZOO["truth"])
    start = truth * np.asarray(ZOO["perturb"])
    qpos0, ctrl = scenes.zoo_push(mj, ts.q0, ZOO["steps"])
    t = time.perf_counter()
    ev = sysid.Evaluator(mj, ps, ZOO["chunk"], block=8)
    out = []
    for engine in ("mjx", "mujoco"):
        data = sysid.planted_dataset(mj, ps, truth, qpos0=qpos0, ctrl=ctrl, engine=engine)
        res = sysid.identify(mj, data, ps, start=start, chunk=ZOO["chunk"], evaluator=ev, iterations=25,
                             key=jax.random.PRNGKey(seed))
        wall = time.perf_counter() - t
        tr = sysid.make_chunks(data.take(res.train_episodes), ZOO["chunk"])
        st = np.concatenate([data.qpos[res.train_episodes], data.qvel[res.train_episodes]], -1)
        scale = np.maximum(st.reshape(-1, mj.nq + mj.nv).std(axis=0),
                           np.r_[np.full(mj.nq, POS_FLOOR), np.full(mj.nv, VEL_FLOOR)])
        r, J = ev.residuals(truth, tr, scale, jacobian=True)
        bias = -np.linalg.lstsq(J, r, rcond=None)[0]
        s = res.summary()
        out.append({"scene": f"{task} ({engine} data)", "episodes": len(ctrl), "steps": ZOO["steps"],
                    "chunk": ZOO["chunk"],
                    "parameters": {n: {"truth": float(a), "start": float(b), "found": float(c),
                                       "rel_error": float(abs(c - a) / a), "linear_bias": float(d / a)}
                                   for n, a, b, c, d in zip(ps.names, truth, start, res.values, bias,
                                                            strict=True)},
                    "rmse_all_features": s["rmse_all_features"], "iterations": res.iterations,
                    "converged": res.converged, "cost_end": res.cost[-1], "cost_at_truth": 0.5 * float(r @ r),
                    "wall_s_incl_compile": wall, "residual_calls": ev.calls})
        t = time.perf_counter()
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
    ap.add_argument("--task", help="a gripper_arm zoo task (sort-blocks): the zoo push case, not --scenes")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.task:
        results = run_zoo(a.task, a.seed)
    else:
        results = [run(n, a.episodes, a.steps, a.chunk, a.seed, not a.no_compare)
                   for n in a.scenes.split(",")]
    if a.json:
        print(json.dumps(results, indent=2))
        return
    for r in results:
        print(f"{r['scene']}: {r['episodes']} episodes x {r['steps']} steps, chunk {r['chunk']}, "
              f"{r['iterations']} LM iterations ({r['wall_s_incl_compile']:.1f} s incl. compile)")
        for n, p in r["parameters"].items():
            bias = f"  linearised bias {p['linear_bias']:+.2e}" if "linear_bias" in p else ""
            print(f"  {n:<16} truth {p['truth']:.5g}  start {p['start']:.5g}  found {p['found']:.6g}  "
                  f"rel err {p['rel_error']:.2e}{bias}")
        if "cost_at_truth" in r:
            print(f"  cost (0.5 |r|^2) at the fit {r['cost_end']:.4g}, at the truth {r['cost_at_truth']:.4g}")
        for sp, d in r["rmse_all_features"].items():
            print(f"  {sp:<10} rmse (all features) {d['before']:.4g} -> {d['after']:.4g}")
        for m, d in r.get("derivatives", {}).items():
            if "error" in d:
                print(f"  {m:<15} fails: {d['error']}")
            else:
                print(f"  {m:<15} compile {d['compile_s']:.1f} s  run {1e3 * d['run_s']:.1f} ms")


if __name__ == "__main__":
    main()

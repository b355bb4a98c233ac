"""Trajectory optimisation through contact: LM on MJX forward-mode Jacobians against sampling.

Scene: the sysid "push" scene (a slider pusher under a position servo, a capsule prop on a table,
4 ms steps). Task: push the prop from rest to ``--dx`` metres along x in ``--steps`` steps, controls
``--knots`` points linearly interpolated (servo target bounded to [-0.1, 0.3] m).

* ``lm``: :func:`caliper_jax.trajopt.contact.trajopt_contact` (float64), from a ramp into the prop;
  reports iterations, evaluations (each one MJX rollout carrying K nu tangents), compile and run
  seconds, the MJX final error and the MuJoCo C replay's.
* ``cem`` / ``random``: the cross-entropy method and random shooting over the same knots and the
  same cost (``mujoco.rollout``, MuJoCo C, multithreaded), with a budget of rollouts equal to the
  LM's evaluations x (1 + K nu) (each tangent counted as a rollout: generous to sampling).

    python benchmarks/bench_trajopt_contact.py
    python benchmarks/bench_trajopt_contact.py --dx 0.1 --knots 8 --json
"""
from __future__ import annotations

import argparse
import json
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

from caliper_jax.sysid import scenes  # noqa: E402
from caliper_jax.trajopt.contact import ContactEvaluator, interpolation, trajopt_contact  # noqa: E402

RANGE = np.array([[-0.1, 0.3]])
TOL = 2e-3
W_SMOOTH = 1.0


def _sampler_cost(mj, q0, W, U, target, body):
    """(N,) costs 0.5 |r|^2 (as the LM's, at rest weight 0) and (N, 3) final positions of the
    knot sets U (N, K, nu), simulated with ``mujoco.rollout``."""
    import mujoco
    from mujoco import rollout

    d = mujoco.MjData(mj)
    d.qpos[:] = q0
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    s0 = np.zeros(mujoco.mj_stateSize(mj, spec))
    mujoco.mj_getState(mj, d, s0, spec)
    ctrl = np.einsum("tk,nku->ntu", W, U)
    state, _ = rollout.rollout(mj, d, s0[None], ctrl)
    qT = state[:, -1, 1:1 + mj.nq]
    pos = np.zeros((len(U), 3))
    for i, q in enumerate(qT):
        d.qpos[:] = q
        mujoco.mj_kinematics(mj, d)
        pos[i] = d.xpos[body]
    err = (pos - target) / TOL
    dif = np.diff(U, axis=1).reshape(len(U), -1)
    return 0.5 * (np.sum(err ** 2, axis=1) + W_SMOOTH * np.sum(dif ** 2, axis=1)), pos


def cem(mj, q0, W, mean, target, body, budget, rng, pop=64, elite=8, random=False):
    lo, hi = RANGE[:, 0], RANGE[:, 1]
    std = np.full_like(mean, 0.1)
    best_c, best_p, used = np.inf, None, 0
    t = time.perf_counter()
    while used + pop <= budget:
        U = np.clip(mean + std * rng.standard_normal((pop,) + mean.shape), lo, hi)
        c, p = _sampler_cost(mj, q0, W, U, target, body)
        used += pop
        i = int(np.argmin(c))
        if c[i] < best_c:
            best_c, best_p = float(c[i]), p[i]
        if not random:
            e = np.argsort(c)[:elite]
            mean, std = U[e].mean(axis=0), U[e].std(axis=0) + 1e-4
    return {"rollouts": used, "cost": best_c, "error_m": float(np.linalg.norm(best_p - target)),
            "run_s": time.perf_counter() - t}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dx", type=float, default=0.07)
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--knots", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    mj = scenes.scene("push")
    q0, v0 = mj.qpos0.copy(), np.zeros(mj.nv)
    target = np.array([a.dx, 0.0, 0.03])
    init = np.linspace(0.0, 0.12, a.knots)[:, None]
    ev = ContactEvaluator(mj, steps=a.steps, knots=a.knots, ctrlrange=RANGE)
    res = trajopt_contact(mj, q0, v0, target, steps=a.steps, knots=a.knots, init=init, ctrlrange=RANGE,
                          tol=TOL, w_smooth=W_SMOOTH, evaluator=ev)
    n_var = a.knots * mj.nu
    out = {"lm": {"iterations": res.iterations, "evaluations": ev.calls, "compile_s": res.compile_s,
                  "run_s": res.run_s, "cost": res.cost[-1], "error_mjx_m": res.error,
                  "error_c_replay_m": res.replay_error, "success": res.success}}
    budget = ev.calls * (1 + n_var)
    W = interpolation(a.steps, a.knots)
    rng = np.random.default_rng(a.seed)
    out["cem"] = cem(mj, q0, W, init.copy(), target, ev.body_id, budget, rng)
    out["random"] = cem(mj, q0, W, init.copy(), target, ev.body_id, budget, rng, random=True)
    if a.json:
        print(json.dumps(out, indent=1))
        return
    print(f"push prop {a.dx * 100:.0f} cm, {a.steps} steps, {a.knots} knots; "
          f"sampling budget {budget} rollouts")
    lm = out["lm"]
    print(f"lm      {lm['iterations']} it, {lm['evaluations']} evals, compile {lm['compile_s']:.1f} s, "
          f"run {lm['run_s']:.1f} s, error MJX {lm['error_mjx_m'] * 1e3:.3f} mm, "
          f"C replay {lm['error_c_replay_m'] * 1e3:.3f} mm")
    for k in ("cem", "random"):
        o = out[k]
        print(f"{k:7s} {o['rollouts']} rollouts, run {o['run_s']:.1f} s, "
              f"best error {o['error_m'] * 1e3:.3f} mm")


if __name__ == "__main__":
    main()

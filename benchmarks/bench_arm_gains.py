"""Servo tracking of a registry arm in its contact scene: the figures behind the gains of
``tasks.arms`` (Panda, SO-101).

    python benchmarks/bench_arm_gains.py [--arm panda] [--kp 0.5 1 2] [--kv 0.25 0.5 1] [--json]

For each pair of gain scales (kp times a, kv times b on every arm joint; 1, 1 is the profile) and
each arm joint, from the home pose (gravity compensation, armature and damping as the profile builds them):
- ``step``: a 0.1 rad step of that joint's target -> 90 % rise time (ms), overshoot (% of the step)
  and the error after 1 s (mrad);
- ``track``: a 0.5 rad minimum-jerk move of every joint at once in 1 s (the expert's kind of
  motion; -0.5 rad for a joint whose upper limit is nearer) -> the largest tracking error during
  the move (mrad) and 0.2 s after it.
Simulated time, not wall time: the figures do not depend on the machine's load.
"""
from __future__ import annotations

import argparse
import json

import numpy as np


def _scene(arm: str, kp_scale: float, kv_scale: float):
    from tasks.arms import PROFILES
    from tasks.scene import build_scene
    from tasks.schema import parse_task

    prof = PROFILES[arm]
    task = parse_task({"version": 2, "name": f"{arm}-gains", "robot": arm, "q0": list(prof.home),
                       "scene": {"props": []}}, base_dir=".")
    arm_joints = [j for j in prof.kp if j != "gripper" and "finger" not in j]
    kp = {j: v * (kp_scale if j in arm_joints else 1.0) for j, v in prof.kp.items()}
    kv = {j: v * (kv_scale if j in arm_joints else 1.0) for j, v in prof.kv.items()}
    return build_scene(task, kp=kp, kv=kv), arm_joints


def _run(ts, targets_fn, seconds: float):
    """(n, nq) measured q at 500 Hz while the servo targets follow ``targets_fn(t) -> (nq,)``."""
    import mujoco

    mj, L = ts.scene.mj, ts.scene.layout
    d = mujoco.MjData(mj)
    d.qpos[:] = ts.qpos(ts.q0)
    mujoco.mj_forward(mj, d)
    out = []
    for k in range(int(round(seconds / mj.opt.timestep))):
        d.ctrl[:] = np.asarray(targets_fn(k * mj.opt.timestep))[L.ctrl_to_q]
        mujoco.mj_step(mj, d)
        out.append(L.q_from_qpos(d.qpos)[0])
    return np.array(out), mj.opt.timestep


def measure(arm: str, kp_scale: float, kv_scale: float) -> dict:
    ts, joints = _scene(arm, kp_scale, kv_scale)
    q0 = np.asarray(ts.q0, np.float64)
    names = list(ts.model.joint_names)
    rows = []
    for j in joints:
        i = names.index(j)
        goal = q0.copy()
        goal[i] += 0.1
        q, h = _run(ts, lambda t, goal=goal: goal, 1.0)
        x = (q[:, i] - q0[i]) / 0.1
        rise = int(np.argmax(x >= 0.9)) * h if np.any(x >= 0.9) else float("inf")
        rows.append(dict(joint=j, rise_ms=1e3 * rise, overshoot_pct=100 * max(0.0, x.max() - 1.0),
                         final_mrad=1e3 * abs(q[-1, i] - goal[i])))
    delta = np.zeros_like(q0)
    hi = np.asarray(ts.model.qpos_upper, np.float64)
    for j in joints:                        # +0.5 rad, or -0.5 where that would pass the upper limit
        i = names.index(j)
        delta[i] = 0.5 if q0[i] + 0.5 <= hi[i] - 0.05 else -0.5

    def law(t):
        s = min(t / 1.0, 1.0)
        return q0 + delta * s ** 3 * (10 - 15 * s + 6 * s * s)

    q, h = _run(ts, law, 1.2)
    ref = np.array([law(k * h) for k in range(len(q))])
    err = np.abs(q - ref)[:, [names.index(j) for j in joints]]
    n_move = int(round(1.0 / h))
    return dict(arm=arm, kp_scale=kp_scale, kv_scale=kv_scale, steps=rows,
                track_max_mrad=1e3 * float(err[:n_move].max()), track_after_mrad=1e3 * float(err[-1].max()))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arm", default="panda", choices=("panda", "so101"))
    p.add_argument("--kp", type=float, nargs="+", default=[1.0])
    p.add_argument("--kv", type=float, nargs="+", default=[0.25, 0.5, 1.0])
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    out = [measure(args.arm, a, b) for a in args.kp for b in args.kv]
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    for r in out:
        worst_rise = max(s["rise_ms"] for s in r["steps"])
        worst_over = max(s["overshoot_pct"] for s in r["steps"])
        worst_final = max(s["final_mrad"] for s in r["steps"])
        print(f"{r['arm']} kp x{r['kp_scale']:g} kv x{r['kv_scale']:g}: step rise <= {worst_rise:.0f} ms, "
              f"overshoot <= {worst_over:.1f} %, "
              f"error after 1 s <= {worst_final:.2f} mrad; 0.5 rad/1 s min-jerk track error max "
              f"{r['track_max_mrad']:.1f} mrad, {r['track_after_mrad']:.2f} mrad 0.2 s after")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

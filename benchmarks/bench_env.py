"""CPU VecEnv throughput: world-ticks/s (control ticks x worlds per second) against raw
``mujoco.rollout`` of the same compiled scene, in the same run.

    python benchmarks/bench_env.py [--task lift-cube] [--worlds 1 16 64 256] [--ticks 4096]
                                   [--repeats 5] [--nthread N] [--no-randomization] [--json]

Per world count W:
- ``env``: ``tasks.env.VecEnv`` (engine "mujoco"), ``step`` with a constant action (the start pose,
  gripper open): safety gate, grasp rule, ``substeps`` MuJoCo steps, observation, success
  predicate, auto-reset -- everything an RL loop gets;
- ``raw rollout``: ``mujoco.rollout.Rollout.rollout`` on the task's MjModel, persistent thread
  pool, pre-allocated outputs, one call of ``substeps`` steps per tick from the previous tick's
  final state, constant controls (the start pose's servo targets), no warm start carried over;
- ``raw batch``: ``mujoco.batch.Batch.step(nstep=substeps)`` of the same worlds and controls (the
  engine VecEnv runs on, without its end-of-tick position stage), for reference.
All use the same number of threads (``--nthread``, default ``os.cpu_count()``) and run
alternately, ``--repeats`` rounds of ``--ticks / W`` ticks (at least 20); the fastest round of
each is kept (the shared machine drifts). ``overhead`` = raw rollout rate / env rate - 1.
First-call times (build, first reset and step: scene compile and JAX compiles) are reported apart.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def raw_rollout(mj, qpos0, ctrl0, W: int, substeps: int, nthread: int):
    """(first-call seconds, tick function) of raw mujoco.rollout over W worlds."""
    import mujoco
    import mujoco.rollout

    S = mujoco.mjtState
    full = int(S.mjSTATE_FULLPHYSICS)
    d = mujoco.MjData(mj)
    d.qpos[:] = qpos0
    state0 = np.empty(mujoco.mj_stateSize(mj, full))
    mujoco.mj_getState(mj, d, state0, full)
    pool = mujoco.rollout.Rollout(nthread=nthread)
    datas = [mujoco.MjData(mj) for _ in range(max(1, nthread))]
    models = [mj] * W
    box = {"state": np.tile(state0, (W, 1))}
    control = np.zeros((W, substeps, mj.nu))
    control[:] = ctrl0
    out = np.empty((W, substeps, state0.size))
    sensordata = np.empty((W, substeps, mj.nsensordata))

    def tick():
        pool.rollout(models, datas, box["state"], control, control_spec=int(S.mjSTATE_CTRL),
                     skip_checks=True, nstep=substeps, state=out, sensordata=sensordata)
        box["state"] = out[:, -1].copy()

    return _timed(tick), tick, pool


def raw_batch(mj, qpos0, ctrl0, W: int, substeps: int, nthread: int):
    """Tick function of raw mujoco.batch over W worlds (constant controls)."""
    import mujoco.batch

    b = mujoco.batch.Batch(mj, W, nthread=nthread)
    b.qpos[:] = qpos0
    b.ctrl[:] = ctrl0
    b.forward()
    return lambda: b.step(nstep=substeps)


def bench_worlds(ts, W: int, args, nthread: int) -> dict:
    """One row: VecEnv and raw rollout over W worlds, timed alternately."""
    from tasks.env import VecEnv
    from tasks.env_spec import EnvRandomization

    spec = None if args.no_randomization else EnvRandomization()
    t0 = time.perf_counter()
    env = VecEnv(ts, W, nthread=nthread, randomization=spec)
    build_s = time.perf_counter() - t0
    reset_s = _timed(env.reset)
    action = np.tile(ts.q0, (W, 1))
    action[:, env.layout.gripper_q] = env.layout.gripper_open
    step_s = _timed(lambda: env.step(action))
    lay, mj = ts.scene.layout, ts.scene.mj
    qpos0 = lay.qpos_from_q(ts.q0[None], base=mj.qpos0)[0]
    raw_first_s, raw_tick, pool = raw_rollout(mj, qpos0, action[0, lay.ctrl_to_q], W, env.layout.substeps,
                                              nthread)
    batch_tick = raw_batch(mj, qpos0, action[0, lay.ctrl_to_q], W, env.layout.substeps, nthread)
    ticks = max(20, args.ticks // W)
    runs = {"env": lambda: env.step(action), "raw": raw_tick, "batch": batch_tick}
    times = {k: [] for k in runs}
    for _ in range(args.repeats):
        for k, fn in runs.items():
            times[k].append(_timed(lambda fn=fn: [fn() for _ in range(ticks)]))
    env.close()
    pool.close()
    env_rate, raw_rate, batch_rate = (W * ticks / min(times[k]) for k in ("env", "raw", "batch"))
    return dict(worlds=W, ticks=ticks, env_wtps=env_rate, raw_wtps=raw_rate, raw_batch_wtps=batch_rate,
                overhead_pct=100.0 * (raw_rate / env_rate - 1.0), env_build_s=build_s,
                env_first_reset_s=reset_s, env_first_step_s=step_s, raw_first_call_s=raw_first_s,
                substeps=env.layout.substeps, nthread=nthread)


def bench(args) -> list[dict]:
    from tasks.env import resolve_task

    ts = resolve_task(args.task)
    nthread = args.nthread or os.cpu_count() or 1
    return [bench_worlds(ts, W, args, nthread) for W in args.worlds]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="lift-cube")
    p.add_argument("--worlds", type=int, nargs="+", default=[1, 16, 64, 256])
    p.add_argument("--ticks", type=int, default=4096, help="world-ticks per round (ticks = this / worlds)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--nthread", type=int, default=None)
    p.add_argument("--no-randomization", action="store_true")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    rows = bench(args)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    r0 = rows[0]
    print(f"task {args.task}: {r0['substeps']} MuJoCo steps per control tick, {r0['nthread']} threads; "
          "world-ticks/s, best of rounds")
    print(f"{'worlds':>6} {'VecEnv':>10} {'raw rollout':>12} {'overhead':>9} {'raw batch':>10} | "
          f"first calls: {'build':>6} {'reset':>6} {'step':>6} {'raw':>6}")
    for r in rows:
        first = (f"{r['env_build_s']:>6.2f} {r['env_first_reset_s']:>6.2f} {r['env_first_step_s']:>6.2f} "
                 f"{r['raw_first_call_s']:>6.3f}")
        print(f"{r['worlds']:>6} {r['env_wtps']:>10.0f} {r['raw_wtps']:>12.0f} {r['overhead_pct']:>8.1f}% "
              f"{r['raw_batch_wtps']:>10.0f} | {'':>13}{first}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

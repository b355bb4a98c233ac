"""Task VecEnv throughput: the MJX engine (jitted step, whole-episode scan) next to the CPU engine.

    python benchmarks/bench_env_mjx.py [--task lift-cube] [--worlds 1 16 64] [--ticks 100]
                                       [--no-randomization] [--no-cpu] [--json]

Every row runs ``--ticks`` control ticks from a fresh reset with the same scripted lift policy
(close the gripper; once the cube is held, swing up: success every ~12 ticks, so auto-reset is
exercised). For each world count W (a GPU run would pass ``--worlds 1024 4096 16384``):
- ``mjx step``: ``MjxEnv.jit_step`` and the jitted policy called once per tick from Python (the
  state stays on the device; two dispatches per tick);
- ``mjx scan``: ``MjxEnv.rollout``, policy included, as one ``lax.scan``;
- ``cpu step``: :class:`tasks.env.VecEnv` (MuJoCo's C batch, one thread per CPU), NumPy policy.
Figures are world-ticks per second (W x ticks / wall time, best of 3; one tick = ``substeps``
physics steps, 10 on lift-cube); compile times (lower + XLA compile) are reported apart.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np


def best_of(fn, repeats=3):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def make_policy(layout, q0, xp):
    """Close the gripper; once the held flag is up, swing to a pose that lifts the cube 0.13 m."""
    c = layout.gripper_closed
    held = layout.nq + layout.nv + 1
    lift = xp.asarray([0.9, -1.5, c], dtype=xp.float32)
    rest = np.array(q0, np.float32)
    rest[layout.gripper_q] = c
    rest = xp.asarray(rest)

    def policy(obs):
        return xp.where(obs[:, held:held + 1] > 0.5, lift, rest)
    return policy


def bench_mjx(ts, W, args, randomization):
    import jax

    from tasks.env_mjx import MjxEnv

    env = MjxEnv(ts, W, randomization=randomization)
    t0 = time.perf_counter()
    st = jax.block_until_ready(env.jit_reset(jax.random.PRNGKey(0)))
    reset_s = time.perf_counter() - t0
    policy = make_policy(env.layout, ts.q0, jax.numpy)
    act = jax.jit(policy)
    t0 = time.perf_counter()
    step = env.jit_step.lower(st, act(st.obs)).compile()
    step_compile = time.perf_counter() - t0

    def run_steps():
        s = st
        for _ in range(args.ticks):
            s = step(s, act(s.obs))
        jax.block_until_ready(s)

    step_s = best_of(run_steps)
    t0 = time.perf_counter()
    scan = env._rollout_jit.lower(st, policy, args.ticks).compile()
    scan_compile = time.perf_counter() - t0
    scan_s = best_of(lambda: jax.block_until_ready(scan(st)))    # static policy and length are baked in
    successes = int(np.asarray(scan(st)[1].terminated).sum())
    tag = f"mjx ({jax.default_backend()})"
    return [dict(engine=tag, what="step", worlds=W, compile_s=step_compile, reset_compile_s=reset_s,
                 world_ticks_per_s=W * args.ticks / step_s),
            dict(engine=tag, what="scan", worlds=W, compile_s=scan_compile,
                 world_ticks_per_s=W * args.ticks / scan_s, successes=successes)]


def bench_cpu(ts, W, args, randomization):
    from tasks.env import VecEnv

    env = VecEnv(ts, W, randomization=randomization)
    policy = make_policy(env.layout, ts.q0, np)

    def run_episode():
        o, _ = env.reset(seed=0)
        n = 0
        for _ in range(args.ticks):
            o, _, term, _, _ = env.step(policy(o))
            n += int(term.sum())
        return n

    step_s = best_of(run_episode)
    successes = run_episode()
    env.close()
    return [dict(engine="cpu (mujoco C batch)", what="step", worlds=W,
                 world_ticks_per_s=W * args.ticks / step_s, successes=successes)]


def print_table(rows) -> None:
    """One line per world count: MJX step and scan (compile s in brackets) next to the CPU engine."""
    by = {}
    for r in rows:
        by.setdefault(r["worlds"], {})[(r["engine"].split()[0], r.get("what"))] = r

    def cell(r):
        if r is None:
            return "-"
        if "note" in r:
            return r["note"]
        comp = f" ({r['compile_s']:.0f} s)" if "compile_s" in r else ""
        return f"{r['world_ticks_per_s']:.3g}{comp}"

    print(f"{'worlds':>7}  {'mjx step':>16}  {'mjx scan':>16}  {'cpu step':>10}  {'cpu / mjx scan':>14}")
    for W, d in by.items():
        scan, cpu = d.get(("mjx", "scan")), d.get(("cpu", "step"))
        ratio = f"{cpu['world_ticks_per_s'] / scan['world_ticks_per_s']:.3g}x" if scan and cpu and \
            "note" not in cpu else "-"
        print(f"{W:>7}  {cell(d.get(('mjx', 'step'))):>16}  {cell(scan):>16}  {cell(cpu):>10}  {ratio:>14}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="lift-cube")
    p.add_argument("--worlds", type=int, nargs="+", default=[1, 16, 64])
    p.add_argument("--ticks", type=int, default=100, help="control ticks per timed run")
    p.add_argument("--no-randomization", action="store_true", help="randomisation off (default: on)")
    p.add_argument("--no-cpu", action="store_true", help="skip the CPU engine")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)

    from tasks.env import resolve_task
    from tasks.env_spec import EnvRandomization

    randomization = None if args.no_randomization else EnvRandomization()
    ts = resolve_task(args.task)
    rows = []
    for W in args.worlds:
        rows += bench_mjx(ts, W, args, randomization)
        if not args.no_cpu:
            try:
                rows += bench_cpu(ts, W, args, randomization)
            except ImportError as exc:                     # the CPU engine is optional here
                rows.append(dict(engine="cpu", worlds=W, note=f"skipped: {exc}"))
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    from tasks.env_spec import make_layout

    print(f"{args.task}: world-ticks/s (1 tick = {make_layout(ts).substeps} physics steps), "
          f"randomisation {'off' if randomization is None else 'on'}, {args.ticks} ticks per run")
    print_table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The studio's live session in real time: 1 ms MuJoCo physics for the gripper_arm zoo scenes on one core.

    python benchmarks/bench_studio_live.py [--seconds 5] [--tasks lift-cube ...] [--cpu 0] [--drive] [--json]

For each zoo task whose robot is gripper_arm (default: all of them), a
:class:`caliper_jax.studio.live.LiveSession` (1 ms timestep, debt cap 0.25 s) runs on its own
background thread, paced by the wall clock, for ``--seconds`` with nobody driving it (idle: the
servo holds the start pose) -- or, with ``--drive``, with the servo target swept and the gripper
closed half way. The process is pinned to one CPU (``--cpu``, when the OS allows it). Every
10 ms the benchmark samples the session's debt (the accumulated clock time not yet stepped).

Reported per task: the step cost (mean and 99th percentile of 1 ms steps timed one by one before
the live run, in microseconds), the simulated and wall time of the live run and their ratio (1.0 =
real time), the steps run, the largest debt seen (ms) against the cap, the time dropped by the cap
(s; 0 when the cap was never exceeded), and whether the session ended with an error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np


def gripper_arm_tasks() -> list[str]:
    from tasks.schema import find_task, load_task, zoo_names

    return [n for n in zoo_names() if "gripper_arm" in str(load_task(find_task(n)).robot)]


def step_cost(session, steps: int = 2000) -> tuple[float, float]:
    """Mean and 99th percentile (microseconds) of single 1 ms steps, from the reset state."""
    session.reset()
    times = np.empty(steps)
    for i in range(steps):
        t = time.perf_counter()
        session.advance(1)
        times[i] = time.perf_counter() - t
    session.reset()
    return float(1e6 * times.mean()), float(1e6 * np.percentile(times, 99))


def run_live(session, seconds: float, drive: bool) -> dict:
    session.max_debt_s = session.dropped_s = 0.0
    debts = []
    session.start()
    t0 = time.perf_counter()
    tick0 = session.tick
    q0 = np.asarray(session.target, np.float64)
    while (now := time.perf_counter()) - t0 < seconds and session.running:
        debts.append(session._acc)
        if drive:
            phase = (now - t0) / seconds
            q = q0.copy()
            q[0] = 0.6 * np.sin(2 * np.pi * phase)
            session.set_target(q)
            if phase > 0.5:
                session.set_gripper(True)
        time.sleep(0.01)
    wall = time.perf_counter() - t0
    sim = (session.tick - tick0) * session.dt
    session.stop()
    return {
        "wall_s": wall,
        "sim_s": sim,
        "realtime_factor": sim / wall,
        "steps": session.tick - tick0,
        "max_debt_ms": 1e3 * max(session.max_debt_s, max(debts, default=0.0)),
        "sampled_debt_p99_ms": 1e3 * float(np.percentile(debts, 99)) if debts else 0.0,
        "debt_cap_ms": 1e3 * session.debt_cap,
        "dropped_s": session.dropped_s,
        "cap_exceeded": session.dropped_s > 0.0,
        "error": session.error,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="live run per task (default 5 s)")
    ap.add_argument(
        "--tasks", nargs="*", default=None, help="zoo task names (default: every gripper_arm task)"
    )
    ap.add_argument(
        "--cpu", type=int, default=0, help="pin the process to this CPU (default 0; -1: no pinning)"
    )
    ap.add_argument("--drive", action="store_true", help="sweep the servo target and close the gripper")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args(argv)
    pinned = None
    if args.cpu >= 0 and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, {args.cpu})
            pinned = args.cpu
        except OSError as exc:
            print(f"bench_studio_live: could not pin to CPU {args.cpu}: {exc}", file=sys.stderr)
    from caliper_jax.studio.live import LiveSession

    names = args.tasks or gripper_arm_tasks()
    rows = []
    for name in names:
        s = LiveSession(name)
        mean_us, p99_us = step_cost(s)
        row = {
            "task": name,
            "timestep_ms": 1e3 * s.dt,
            "step_mean_us": mean_us,
            "step_p99_us": p99_us,
            **run_live(s, args.seconds, args.drive),
        }
        rows.append(row)
    out = {"cpu": pinned, "mode": "drive" if args.drive else "idle", "seconds": args.seconds, "tasks": rows}
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"live sessions, 1 ms physics, {out['mode']}, {args.seconds:g} s each, CPU {pinned}")
        print(
            f"{'task':22s} {'step us':>8s} {'p99 us':>7s} {'sim/wall':>9s} {'steps':>7s} "
            f"{'max debt ms':>11s} {'dropped s':>9s}  error"
        )
        for r in rows:
            print(
                f"{r['task']:22s} {r['step_mean_us']:8.1f} {r['step_p99_us']:7.1f} "
                f"{r['realtime_factor']:9.4f} {r['steps']:7d} {r['max_debt_ms']:11.2f} "
                f"{r['dropped_s']:9.3f}  {r['error'] or '-'}"
            )
    ok = all(not r["cap_exceeded"] and r["error"] is None and r["realtime_factor"] > 0.99 for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

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

    python benchmarks/bench_studio_live.py --gizmo [--robot panda] [--moves 60] [--cache DIR] [--json]

The Jog tab's live path instead: a ``StudioApp`` of ``--robot`` (start time and the IK / HUD /
collision compiles done at load, ``warm_s``; with ``--cache DIR`` jax's persistent compilation
cache is on, so a second run with the same DIR shows the warm start), then ``--moves`` pointer
moves of the IK gizmo on a 3 cm circle around the tool, each handled as the GUI's callback does
(IK -> servo target -> draw -> HUD; the exact collision report is handed to the latest-wins
worker). Reported: the server's handling time per move (median, p95, max) against the 50 ms
budget, the collision report's own time (median, p95; it trails the drag), and "Apply scene" times
for 1 box, the box moved, 2 boxes and none against the 1 s budget (the obstacles placed in the
padded scene and drawn; then with the first collision report of the new scene), with the number
of new compiles of the collision kernel (0: the padded scene reused the compiled check).
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


def pct(xs, q) -> float:
    return float(1e3 * np.percentile(np.asarray(xs), q))


def run_gizmo(robot: str, moves: int, cache) -> dict:
    """The Jog tab's gizmo -> IK -> draw latency and the Apply-scene time (see the docstring)."""
    if cache:
        from pathlib import Path

        from caliper_jax.cli.runtime import enable_compile_cache

        enable_compile_cache(Path(cache))
    from caliper_jax.collision.api import _stage1
    from caliper_jax.studio import StudioApp

    t0 = time.perf_counter()
    app = StudioApp(robot, port=0)
    start_s = time.perf_counter() - t0
    try:
        jog = app.jog
        T0 = jog.tool_pose()
        handle, report = [], []
        for k in range(moves):
            a = 2 * np.pi * k / moves
            jog.gizmo.position = T0[:3, 3] + 0.03 * np.array([np.cos(a) - 1.0, np.sin(a), 0.0])
            t = time.perf_counter()
            jog._gizmo_cb(None)  # what a pointer move runs on the server
            handle.append(time.perf_counter() - t)
            t = time.perf_counter()
            jog.worker.wait()
            report.append(time.perf_counter() - t + handle[-1])
        ik_ok = bool(jog.last_ik and jog.last_ik["success"])
        compiles = _stage1._cache_size()
        scenes, first = {}, {}
        for label, boxes in (
            ("1 box", "0.45,0.0,0.3,0.05,0.05,0.05"),
            ("moved", "0.45,0.2,0.35,0.05,0.05,0.05"),
            ("2 boxes", "0.45,0.2,0.35,0.05,0.05,0.05;0.3,-0.3,0.2,0.04,0.04,0.04"),
            ("none", ""),
        ):
            t = time.perf_counter()
            jog.set_scene(boxes=boxes, sync=False)  # what the Apply button runs
            scenes[label] = time.perf_counter() - t
            jog.worker.wait()
            first[label] = time.perf_counter() - t
        return {
            "robot": robot,
            "start_s": start_s,
            "warm_s": jog.warm_s,
            "moves": moves,
            "ik_reached": ik_ok,
            "handle_ms": {"median": pct(handle, 50), "p95": pct(handle, 95), "max": 1e3 * max(handle)},
            "collision_report_ms": {"median": pct(report, 50), "p95": pct(report, 95)},
            "budget_ms": 50.0,
            "apply_scene_s": scenes,
            "apply_budget_s": 1.0,
            "apply_then_report_s": first,
            "scene_recompiles": _stage1._cache_size() - compiles,
        }
    finally:
        app.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gizmo", action="store_true", help="the Jog gizmo latency and Apply scene instead")
    ap.add_argument("--robot", default="panda", help="--gizmo: the robot (default panda)")
    ap.add_argument("--moves", type=int, default=60, help="--gizmo: pointer moves (default 60)")
    ap.add_argument("--cache", default=None, help="--gizmo: jax persistent compilation cache folder")
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
    if args.gizmo:
        r = run_gizmo(args.robot, args.moves, args.cache)
        if args.json:
            print(json.dumps(r, indent=1))
        else:
            h, c = r["handle_ms"], r["collision_report_ms"]
            print(f"studio gizmo, {r['robot']}: start {r['start_s']:.1f} s "
                  f"(compiles at load {r['warm_s']:.1f} s)")
            print(f"pointer move -> IK -> draw, server handling: median {h['median']:.1f} ms, p95 "
                  f"{h['p95']:.1f} ms, max {h['max']:.1f} ms (budget 50 ms), {r['moves']} moves")
            print(f"exact collision report (trails the drag): median {c['median']:.1f} ms, "
                  f"p95 {c['p95']:.1f} ms")
            print("apply scene: " + ", ".join(f"{k} {v:.3f} s" for k, v in r["apply_scene_s"].items())
                  + f" (budget 1 s), new compiles {r['scene_recompiles']}")
            print("apply scene + its collision report: "
                  + ", ".join(f"{k} {v:.3f} s" for k, v in r["apply_then_report_s"].items()))
        ok = r["handle_ms"]["p95"] < 50.0 and max(r["apply_scene_s"].values()) < 1.0 and r["ik_reached"]
        return 0 if ok and r["scene_recompiles"] == 0 else 1
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

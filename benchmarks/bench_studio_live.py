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

    python benchmarks/bench_studio_live.py --gizmo [--robot panda] [--moves 60] [--rate 60]
        [--cache DIR] [--json]

The Jog tab's live path instead: a ``StudioApp`` of ``--robot`` (start time and the IK / HUD /
collision compiles done at load, ``warm_s``; with ``--cache DIR`` jax's persistent compilation
cache is on, so a second run with the same DIR shows the warm start), then ``--moves`` pointer
moves of the IK gizmo on a 3 cm circle around the tool, each handled as the GUI's callback does
(the move goes to the latest-wins drag worker: IK -> servo target -> draw -> HUD; the exact
collision report is handed to its own latest-wins worker). Reported: the server's handling time of
one move at a time (median, p95, max); then a drag: ``--moves`` moves arriving at ``--rate`` Hz
(60) while the collision report runs, each move's latency from arrival to drawn (median, p95, max)
against the 50 ms budget, with the number of solves and of superseded moves; the collision report's
own time (median, p95; it trails the drag), and "Apply scene" times for 1 box, the box moved, 2
boxes and none against the 1 s budget (the obstacles placed in the padded scene and drawn; then
with the first collision report of the new scene), with the number of new compiles of the collision
kernel (0: the padded scene reused the compiled check).
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


def _gizmo_pose(jog) -> np.ndarray:
    """The gizmo's pose now (4, 4), as the callback reads it."""
    from caliper_jax.io.rotations import quat_to_mat

    T = np.eye(4)
    T[:3, :3] = quat_to_mat(np.asarray(jog.gizmo.wxyz, np.float64))
    T[:3, 3] = np.asarray(jog.gizmo.position, np.float64)
    return T


def drag_at_rate(jog, T0, moves: int, rate: float, pool: bool = False) -> dict:
    """``moves`` pointer moves of the gizmo on a 3 cm circle arriving at ``rate`` Hz, as a browser
    sends them during a drag, with the collision report running on its worker meanwhile. Each
    move's latency: from its arrival to the end of the first solve that started after it arrived
    (the solve that answers it: its own, or a newer move's when it was superseded). ``pool``: the
    dispatch before the drag worker, for comparison: every move solved at once on a thread of a
    32-thread pool, as viser runs a plain callback, none dropped."""
    from concurrent.futures import ThreadPoolExecutor

    n0 = len(jog.drag.history)
    dropped0, reports0 = jog.drag.dropped, jog.reports
    executor = ThreadPoolExecutor(max_workers=32) if pool else None
    pooled = []

    def solve(T, t0):
        t1 = time.perf_counter()
        jog.solve_target(T, move_gizmo=False, sync=False)
        pooled.append((t0, t1, time.perf_counter()))
    arrivals = []
    t_start = time.perf_counter()
    for k in range(moves):
        while (now := time.perf_counter()) < t_start + k / rate:
            time.sleep(min(0.002, t_start + k / rate - now))
        a = 2 * np.pi * k / moves
        jog.gizmo.position = T0[:3, 3] + 0.03 * np.array([np.sin(a), 1.0 - np.cos(a), 0.0])
        arrivals.append(time.perf_counter())
        if k == moves - 1:
            reports_during = jog.reports - reports0  # collision reports run while dragging
        if pool:
            executor.submit(solve, _gizmo_pose(jog), arrivals[-1])
        else:
            jog._gizmo_cb(None)
    if pool:
        executor.shutdown(wait=True)
    jog.drag.wait()
    jog.worker.wait()
    solves = pooled if pool else list(jog.drag.history)[n0:]
    latency = []
    for t in arrivals:
        done = [f for s, st, f in solves if s >= t]
        latency.append(min(done) - t)
    return {
        "dispatch": "thread pool (before)" if pool else "drag worker",
        "rate_hz": rate,
        "moves": moves,
        "solved": len(solves),
        "dropped": 0 if pool else jog.drag.dropped - dropped0,
        "collision_reports_during": reports_during,
        "latency_ms": {"median": pct(latency, 50), "p95": pct(latency, 95), "max": 1e3 * max(latency)},
        "solve_ms": {"median": pct([f - st for _, st, f in solves], 50),
                     "p95": pct([f - st for _, st, f in solves], 95)},
    }


def run_gizmo(robot: str, moves: int, cache, rate: float = 60.0) -> dict:
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
        for k in range(moves):  # one at a time: the server's cost of one move, nothing overlapping
            a = 2 * np.pi * k / moves
            jog.gizmo.position = T0[:3, 3] + 0.03 * np.array([np.cos(a) - 1.0, np.sin(a), 0.0])
            t = time.perf_counter()
            jog._gizmo_cb(None)  # what a pointer move runs on the server
            jog.drag.wait()
            handle.append(time.perf_counter() - t)
            t = time.perf_counter()
            jog.worker.wait()
            report.append(time.perf_counter() - t + handle[-1])
        drag = drag_at_rate(jog, T0, moves, rate)
        before = drag_at_rate(jog, T0, moves, rate, pool=True)
        drag2 = drag_at_rate(jog, T0, moves, rate)  # again after the comparison: load drifts
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
            "drag": drag,
            "drag_again": drag2,
            "drag_before": before,
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
    ap.add_argument("--rate", type=float, default=60.0, help="--gizmo: pointer moves per second (default 60)")
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
        r = run_gizmo(args.robot, args.moves, args.cache, args.rate)
        if args.json:
            print(json.dumps(r, indent=1))
        else:
            h, c = r["handle_ms"], r["collision_report_ms"]
            print(f"studio gizmo, {r['robot']}: start {r['start_s']:.1f} s "
                  f"(compiles at load {r['warm_s']:.1f} s)")
            for d in (r["drag"], r["drag_before"], r["drag_again"]):
                lat = d["latency_ms"]
                print(f"drag at {d['rate_hz']:g} Hz, {d['dispatch']}, pointer move -> drawn: median "
                      f"{lat['median']:.1f} ms, p95 {lat['p95']:.1f} ms, max {lat['max']:.1f} ms (budget "
                      f"50 ms); {d['solved']} solves for {d['moves']} moves ({d['dropped']} superseded), "
                      f"solve median {d['solve_ms']['median']:.1f} ms, "
                      f"{d['collision_reports_during']} collision report(s) ran during it")
            print(f"one move at a time, IK -> draw, server handling: median {h['median']:.1f} ms, p95 "
                  f"{h['p95']:.1f} ms, max {h['max']:.1f} ms, {r['moves']} moves")
            print(f"exact collision report (trails the drag): median {c['median']:.1f} ms, "
                  f"p95 {c['p95']:.1f} ms")
            print("apply scene: " + ", ".join(f"{k} {v:.3f} s" for k, v in r["apply_scene_s"].items())
                  + f" (budget 1 s), new compiles {r['scene_recompiles']}")
            print("apply scene + its collision report: "
                  + ", ".join(f"{k} {v:.3f} s" for k, v in r["apply_then_report_s"].items()))
        p95 = max(r["drag"]["latency_ms"]["p95"], r["drag_again"]["latency_ms"]["p95"])
        ok = (p95 < 50.0 and max(r["apply_scene_s"].values()) < 1.0
              and r["ik_reached"])
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

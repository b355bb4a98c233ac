"""Control subcommands: ``caliper control`` (a closed-loop move to a joint goal, with a report and
an optional q(t) plot) and ``caliper record`` (the same loop recorded as a LeRobot v3 dataset,
one episode per world)."""
from __future__ import annotations

import argparse
import sys

import numpy as np

from caliper_jax.cli import runtime
from caliper_jax.cli.common import (
    at_least,
    budget,
    coordinate_names,
    emit,
    limit_warnings,
    load_robot,
    memory_budget,
    parse_configuration,
    positive,
    require_finite,
    require_inertia,
    robot_args,
    seed,
)
from caliper_jax.errors import CaliperError


def _start(model, text):
    """--q0, or the neutral pose moved inside the position limits."""
    from caliper_jax.configuration import neutral

    if text is not None:
        return parse_configuration(model, text, "--q0")
    lo, hi = np.asarray(model.qpos_lower), np.asarray(model.qpos_upper)
    return np.clip(np.asarray(neutral(model), dtype=np.float64), lo, hi)


#: final error (rad or m, to the goal clamped into the limits) under which the goal counts as reached
GOAL_TOLERANCE = 1e-3


def _setup(args, worlds: int = 1):
    from caliper_jax import control

    at_least(args.ticks, "--ticks", 1)
    positive(args.dt, "--dt")
    positive(args.kp, "--kp", allow_zero=True)
    positive(args.kd, "--kd", allow_zero=True)
    budget(worlds * args.ticks, "--ticks x --worlds (world-ticks)" if worlds > 1 else "--ticks")
    model = load_robot(args)
    if worlds == 1:   # control keeps every tick's rows; record keeps frames (checked there)
        memory_budget(8 * 8 * args.ticks * model.nv, "--ticks (the stored rollout)")
    if model.nq != model.nv:
        raise CaliperError(f"{model.name!r} has a free or ball joint (nq={model.nq}, nv={model.nv}); "
                           "joint-space control needs one coordinate per dof")
    require_inertia(model, "computed-torque control")
    goal = parse_configuration(model, args.goal, "--goal")
    q0 = _start(model, args.q0)
    params = control.control_params(model, kp=args.kp, kd=args.kd, dt=args.dt)
    safety = control.safety_params(model, args.dt)
    return model, goal, q0, params, safety


def _goal_problem(err, ticks, dt, move_duration, names) -> str | None:
    """Why the goal was not reached (None: it was), naming the joint that is furthest off."""
    worst = int(np.argmax(err))
    if not err[worst] > GOAL_TOLERANCE:
        return None
    why = (f"; the planned move takes {move_duration:.3g} s but --ticks x --dt is {ticks * dt:.3g} s"
           if ticks * dt < move_duration else "")
    return (f"goal not reached: joint {names[worst]} ends {err[worst]:.3g} from the goal (tolerance "
            f"{GOAL_TOLERANCE:g}){why}")


def _limits(model):
    from caliper_jax.motion import MotionLimits

    return MotionLimits.from_model(model)


def _outside(model, goal):
    lo, hi = np.asarray(model.qpos_lower), np.asarray(model.qpos_upper)
    return [name for name, g, a, b in zip(model.joint_names, goal, lo, hi, strict=True) if not a <= g <= b]


def _plot(path, times, q, goal, names):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return 'matplotlib is not installed (pip install "caliper-jax[plot]"); no plot written'
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for j, name in enumerate(names):
        line, = ax.plot(times, q[:, j], label=name)
        ax.axhline(goal[j], color=line.get_color(), linestyle="--", linewidth=0.8)
    ax.set_xlabel("t [s]")
    ax.set_ylabel("q [rad or m]")
    ax.set_title("computed-torque move (dashed: gated goal)")
    ax.legend(fontsize="small", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return None


def cmd_control(args) -> int:
    from caliper_jax import control

    if args.plot:
        from caliper_jax.cli.motion import _out_dir

        _out_dir(args.plot, "--plot")
    model, goal, q0, params, safety = _setup(args)
    source = control.goal_source(q0, goal, _limits(model))
    start_warnings = limit_warnings(model, q0, "--q0")
    res = control.simulate(model, source, q0, args.ticks, params=params, safety=safety)
    require_finite(f"control {model.name}", hint="the closed loop diverged: try a smaller --dt or gains",
                   q=res.q, tau=res.tau)
    lo, hi = np.asarray(model.qpos_lower), np.asarray(model.qpos_upper)
    reachable = np.clip(goal, lo, hi)
    err = np.abs(reachable - res.q_final)
    problem = _goal_problem(err, args.ticks, args.dt, float(source.traj.duration), coordinate_names(model))
    effort = np.asarray(model.dof_effort_limit, dtype=np.float64)
    tau_max = res.max_abs_tau
    within = bool(np.all(np.max(np.abs(res.tau), axis=0) <= effort))
    report = {
        "robot": model.name, "joints": list(model.joint_names), "ticks": int(args.ticks), "dt": args.dt,
        "duration": int(args.ticks) * args.dt, "kp": args.kp, "kd": args.kd, "q0": q0.tolist(),
        "goal": goal.tolist(), "goal_gated": reachable.tolist(), "goal_outside_limits": _outside(model, goal),
        "move_duration": float(source.traj.duration), "q_final": res.q_final.tolist(),
        "final_error": float(err.max()), "final_error_per_joint": err.tolist(),
        "max_effort": tau_max.tolist(),
        "effort_limit": [None if not np.isfinite(e) else float(e) for e in effort],
        "within_effort_limits": within, "estopped": bool(res.estopped), "warnings": res.warnings(),
        "goal_reached": problem is None, "goal_tolerance": GOAL_TOLERANCE, "problem": problem,
        "limit_warnings": start_warnings, "plot": None,
    }
    if args.plot:
        with runtime.writing(), runtime.partial_output(args.plot):   # an interrupt: whole file or none
            plot_problem = _plot(args.plot, res.times, res.q, reachable, model.joint_names)
        if plot_problem:
            print(f"caliper: note: {plot_problem}", file=sys.stderr)
            report["plot_error"] = plot_problem
        else:
            report["plot"] = args.plot
    lines = [f"{model.name}: {args.ticks} ticks of {args.dt} s, computed torque kp={args.kp} kd={args.kd}",
             f"  q_final     = {np.array2string(res.q_final, precision=4)}",
             f"  final error = {err.max():.3e} (to the goal clamped into the limits)"]
    for name, t, e in zip(model.joint_names, tau_max, effort, strict=True):
        lines.append(f"  effort {name:<24} max {t:9.4g} of {e:.4g}")
    if report["goal_outside_limits"]:
        outside = ", ".join(report["goal_outside_limits"])
        lines.append(f"  goal outside the limits on {outside}: clamped by the gate")
    for name, w in report["warnings"].items():
        lines.append(f"  warning {name}: {w['count']} ticks, first at tick {w['first_tick']}")
    if not report["warnings"]:
        lines.append("  no safety interventions")
    if report["estopped"]:
        lines.append("  E-STOP latched")
    if report["plot"]:
        lines.append(f"  plot: {report['plot']}")
    lines += [f"  warning: {w}" for w in start_warnings]
    lines.append(f"  PROBLEM: {problem}" if problem else f"  goal reached (within {GOAL_TOLERANCE:g})")
    emit(args, report, "\n".join(lines))
    return 0 if problem is None and not report["estopped"] else 1


def _world_starts(model, q0, worlds, seed, spread):
    """World 0 starts at q0; the others at q0 + U(-spread, spread), clipped to the limits."""
    rng = np.random.default_rng(seed)
    lo, hi = np.asarray(model.qpos_lower), np.asarray(model.qpos_upper)
    starts = q0 + rng.uniform(-spread, spread, size=(worlds, model.nq))
    starts[0] = q0
    return np.clip(starts, lo, hi)


def cmd_record(args) -> int:
    import jax

    from caliper_jax import control

    at_least(args.worlds, "--worlds", 1)
    seed(args.seed)
    at_least(args.fps, "--fps", 1)
    budget(args.worlds, "--worlds", "batch")
    model, goal, q0, params, safety = _setup(args, worlds=args.worlds)
    from caliper_jax.control.record import check_root
    from caliper_jax.dataset.atomic import recover as recover_dataset

    every = control.decimation(args.dt, args.fps)      # fail before any work
    budget(args.worlds * -(-args.ticks // every) * every,   # whole frames are simulated
           f"--ticks rounded up to whole frames of {every:,} ticks (--fps {args.fps} at --dt {args.dt:g}) "
           "x --worlds")
    memory_budget(4 * 8 * args.worlds * (-(-args.ticks // every)) * model.nq,
                  "--worlds x --ticks / --fps (the recorded frames)")
    check_root(args.out)
    positive(args.spread, "--spread", allow_zero=True)
    starts = _world_starts(model, q0, args.worlds, args.seed, args.spread)
    limits = _limits(model)
    goals = np.broadcast_to(goal, starts.shape)
    source = jax.vmap(lambda a, b: control.goal_source(a, b, limits))(starts.astype(np.float64), goals)
    with runtime.partial_output(args.out, cleanup=lambda: recover_dataset(args.out)):   # interrupt: no output
        res = control.record(args.out, model, source, starts, args.ticks, args.fps, params=params,
                             safety=safety, task=args.task, seed=args.seed, source_batched=True,
                             write_guard=runtime.writing)
    lo, hi = np.asarray(model.qpos_lower), np.asarray(model.qpos_upper)
    require_finite(f"record {model.name}", hint="the closed loop diverged: try a smaller --dt or gains",
                   q_final=res.q_final)
    err = np.abs(np.clip(goal, lo, hi) - res.q_final).max(axis=1)
    reached = err <= GOAL_TOLERANCE
    warnings = control.flags.summary(res.warn_count.sum(axis=0),
                                     np.where(res.warn_first < 0, 2**31 - 1, res.warn_first).min(axis=0))
    report = {
        "robot": model.name, "out": str(args.out), "episodes": res.episodes, "worlds": args.worlds,
        "frames_per_episode": res.frames_per_episode, "fps": args.fps, "ticks_per_frame": every,
        "ticks": res.ticks, "dt": args.dt, "task": args.task, "seed": args.seed,
        "final_error_per_world": err.tolist(), "max_effort": res.max_abs_tau.max(axis=0).tolist(),
        "estopped_worlds": int(np.sum(res.estopped)), "warnings": warnings,
        "goal_reached": reached.tolist(), "goal_tolerance": GOAL_TOLERANCE,
    }
    text = (f"{model.name}: recorded {len(res.episodes)} episode(s) x {res.frames_per_episode} frames at "
            f"{args.fps} fps (every {every} ticks of {args.dt} s) into {args.out}\n"
            f"  final error per world: max {err.max():.3e}\n"
            f"  safety interventions: {', '.join(warnings) if warnings else 'none'}")
    if not reached.all():   # the episodes are still data (e.g. short clips): recorded, and said
        text += (f"\n  warning: {int((~reached).sum())} of {args.worlds} world(s) did not reach the goal "
                 f"(final error > {GOAL_TOLERANCE:g}); raise --ticks for whole moves")
    emit(args, report, text)
    return 0


def _common(p):
    robot_args(p)
    p.add_argument("--goal", required=True, help="joint goal (nq numbers, comma/space separated)")
    p.add_argument("--q0", help="start configuration (default: neutral, moved inside the limits)")
    p.add_argument("--ticks", type=int, default=2000, help="control ticks (default 2000)")
    p.add_argument("--dt", type=float, default=1e-3, help="control tick in seconds (default 1e-3)")
    p.add_argument("--kp", type=float, default=100.0, help="position gain (default 100)")
    p.add_argument("--kd", type=float, default=20.0, help="velocity gain (default 20)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("control", help="computed-torque move to a joint goal through the safety gate")
    _common(p)
    p.add_argument("--plot", metavar="FILE.png", help="write a PNG of q(t) (needs matplotlib)")
    p.set_defaults(func=cmd_control)

    p = sub.add_parser("record", help="record closed-loop episodes as a LeRobot v3 dataset")
    _common(p)
    p.add_argument("--out", required=True,
                   help="dataset directory (new or empty; an existing dataset is appended to)")
    p.add_argument("--fps", type=int, default=50, help="frames per second; must divide 1/dt (default 50)")
    p.add_argument("--worlds", type=int, default=1,
                   help="episodes recorded at once, one per world (default 1)")
    p.add_argument("--spread", type=float, default=0.1,
                   help="worlds 1.. start at q0 + U(-spread, spread) (default 0.1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the world start draws (default 0)")
    p.add_argument("--task", default="reach the goal", help="episode task string")
    p.set_defaults(func=cmd_record)

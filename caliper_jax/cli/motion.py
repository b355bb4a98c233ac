"""Motion subcommands: ``caliper move`` (plan and sample a move) and ``caliper report`` (path
report + trajectory lint of a move, the CI gate with ``--strict``).

The move is one of:

* ``--goal Q`` (repeatable): MOVE_J from ``--q0`` through each goal (rest at every goal);
* ``--target POSE``: IK to the pose (seeded at ``--q0``), then MOVE_J to it;
* ``--target POSE --linear [--screw]``: MOVE_L of the tool frame (straight line, or screw);
* ``--target POSE --via POINT``: MOVE_C through the via point.

Poses are 16 numbers, row-major ``T_world_frame`` (what ``caliper fk --json`` prints); a target
of 3 numbers x, y, z keeps the start orientation. ``--q0`` defaults to the neutral configuration
clipped into the joint limits. Exit codes: 0 done; 1 a Cartesian move whose IK failed or jumped
(its report is still printed), an unreachable ``--target``, or ``report --strict`` with Error
findings; 2 bad input.
"""
from __future__ import annotations

import argparse
import json
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import numpy as np

from caliper_jax.cli import runtime
from caliper_jax.cli.common import (
    at_least,
    budget,
    coordinate_names,
    emit,
    finite_or_none,
    limit_problems,
    load_robot,
    memory_budget,
    parse_configuration,
    parse_vector,
    positive,
    require_finite,
    require_within_limits,
    robot_args,
    steps_of,
)
from caliper_jax.errors import CaliperError

ROW_FORMATS = (".json", ".npz", ".csv")


def _fmt(x, precision=4):
    return np.array2string(np.asarray(x), precision=precision, suppress_small=True, max_line_width=110)


def _json_safe(obj):
    """Non-finite floats -> None (JSON has no inf), NumPy scalars/arrays -> Python."""
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _json_safe(obj.tolist())
    if isinstance(obj, (np.floating, float)):
        return float(obj) if np.isfinite(obj) else None
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def parse_pose_or_point(text: str, what: str) -> np.ndarray:
    """16 numbers (row-major 4x4) -> (4, 4); 3 numbers -> a point (3,)."""
    from caliper_jax.ik.poses import parse_pose_text

    parts = [p for p in text.replace(",", " ").split() if p]
    if len(parts) == 3:
        return parse_vector(text, 3, what, "a point")
    return parse_pose_text(text, what)


# ---- planning shared by move and report ------------------------------------------------------

class Planned(NamedTuple):
    kind: str
    trajectory: object       # Trajectory / SplineTrajectory (JAX pytree with sample/grid)
    segments: int
    q_start: np.ndarray
    q_end: np.ndarray
    frame: str
    cartesian: object        # CartesianReport or None
    problem: str | None      # why the move is not usable (IK failure, jump), else None


def _start(model, args, limits, within: bool) -> np.ndarray:
    from caliper_jax.configuration import neutral

    if args.q0 is not None:
        q0 = parse_configuration(model, args.q0, "--q0")
        if within:
            require_within_limits(model, q0, "--q0")
        return q0
    return np.clip(np.asarray(neutral(model), np.float64), limits.lower, limits.upper)


def _check_flags(args):
    if (args.goal is None) == (args.target is None):
        raise CaliperError("give --goal (joint positions, repeatable) or --target (a pose), not both or none")
    if args.target is None and (args.via is not None or args.linear or args.screw):
        raise CaliperError("--via, --linear and --screw need --target")
    if args.via is not None and args.screw:
        raise CaliperError("--screw is a MOVE_L option; it cannot be combined with --via (MOVE_C)")
    positive(args.dt, "--dt")
    positive(args.max_jump, "--max-jump")


@lru_cache(maxsize=None)
def _jitted(name: str):
    import jax

    from caliper_jax import motion

    return jax.jit(getattr(motion, name))


def plan_move(model, args, within_limits: bool = True) -> Planned:
    """The move the flags describe (see the module notes). ``within_limits``: a --q0 or --goal
    outside the joint limits is an error (``move``); ``report`` lints it instead (T001)."""
    from caliper_jax.ik import api as ik_api
    from caliper_jax.motion import MotionLimits, cartesian

    _check_flags(args)
    limits = MotionLimits.from_model(model)
    q0 = _start(model, args, limits, within_limits)
    frame_idx, frame = ik_api.resolve_frame(model, args.frame)
    if args.goal is not None:
        budget(len(args.goal), "--goal (waypoints of one move)", "batch")
        goals = [parse_configuration(model, g, "--goal") for g in args.goal]
        for g in goals if within_limits else ():
            require_within_limits(model, g, "--goal")
        traj = _jitted("retime_waypoints")(np.stack([q0, *goals]), limits)
        return Planned("MOVE_J", traj, len(goals), q0, goals[-1], frame, None, None)
    target = parse_pose_or_point(args.target, "--target")
    kw = dict(frame=frame_idx, position_only=args.position_only, dt=args.dt, max_jump=args.max_jump,
              strict=False)
    if args.via is not None or args.linear or args.screw:
        _cartesian_budget(model, q0, frame_idx, args, target)
    if args.via is not None:
        via = parse_pose_or_point(args.via, "--via")
        move = cartesian.move_c(model, q0, via, target, **kw)
    elif args.linear or args.screw:
        move = cartesian.move_l(model, q0, target, screw=args.screw, **kw)
    else:
        return _ik_then_move_j(model, args, q0, target, frame, limits)
    rep = move.report
    names = coordinate_names(model)
    problem = None
    if rep.ik_failures:
        problem = (f"IK did not converge at {len(rep.ik_failures)} of {rep.n_samples} samples (first at "
                   f"sample {rep.ik_failures[0]}); a start at or near a singularity (e.g. a fully "
                   f"stretched arm) cannot leave it along the line -- try another --q0")
    elif rep.discontinuities:
        d = rep.discontinuities[0]
        problem = (f"joint {names[d.joint]} jumps {d.jump:.3g} rad at t={d.time:.3f} s "
                   f"(> --max-jump {rep.max_jump_limit:g})")
    return Planned(rep.kind, move.trajectory, 1, q0, move.q[-1], frame, rep, problem)


def _cartesian_budget(model, q0, frame_idx, args, target) -> None:
    """IK samples of a Cartesian move, bounded below by the straight-line length at the tool's
    speed cap, against the steps budget before any IK is solved."""
    from caliper_jax import api
    from caliper_jax.motion import CartesianLimits

    points = [np.asarray(api.fk(model, q0)[frame_idx])[:3, 3]]
    for text in (args.via, args.target):
        if text is not None:
            x = parse_pose_or_point(text, "--target")
            points.append(x[:3, 3] if x.shape == (4, 4) else x)
    length = float(sum(np.linalg.norm(b - a) for a, b in zip(points, points[1:], strict=False)))
    budget(steps_of(length / CartesianLimits().linear_velocity, args.dt),
           f"--dt (at least {length:.3g} m of Cartesian path sampled every {args.dt:g} s, IK samples)")


def _ik_then_move_j(model, args, q0, target, frame, limits) -> Planned:
    from caliper_jax import api
    from caliper_jax.ik import api as ik_api

    if target.shape == (3,):
        T = np.array(api.fk(model, q0)[model.frame_id(frame)], dtype=np.float64)   # a writable copy
        T[:3, 3] = target
        target = T
    res = ik_api.ik(model, target, frame=frame, seed_q=q0, position_only=args.position_only)
    problem = None
    if not res.success:
        problem = (f"--target: IK did not converge (residual {float(res.pos_residual):.3g} m, "
                   f"{float(res.rot_residual):.3g} rad)")
    traj = _jitted("move_j")(q0, res.q, limits)
    return Planned("MOVE_J", traj, 1, q0, np.asarray(res.q), frame, None, problem)


def _checked(model, plan: Planned, rows, within_limits: bool = True) -> Planned:
    """The sampled rows are checked before they are reported as a usable move: finite, and inside
    the joint limits (a Cartesian move's IK may leave them); a violation becomes the plan's problem
    (``report`` leaves the limits to its lint, T001)."""
    require_finite(f"{plan.kind}", hint="the trajectory is not usable", t=rows[0], q=rows[1], qd=rows[2],
                   qdd=rows[3])
    if plan.problem is not None or not within_limits:
        return plan
    q = np.asarray(rows[1], dtype=np.float64)
    lo, hi = np.asarray(model.qpos_lower, np.float64), np.asarray(model.qpos_upper, np.float64)
    worst = np.argmax(np.maximum(lo - q, q - hi).max(axis=1))      # the row that leaves them most
    problems = limit_problems(model, q[worst], "the move")
    if problems:
        return plan._replace(problem=f"{problems[0]} at t={float(rows[0][worst]):.3f} s")
    return plan


# ---- move -----------------------------------------------------------------------------------------

def _out_dir(path: str, flag: str = "--out") -> None:
    """An output file must be writable where it points (see common.output_file)."""
    from caliper_jax.cli.common import output_file

    output_file(path, flag)


def _row_format(path: str) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in ROW_FORMATS:
        raise CaliperError(f"--out: expected a file ending in {', '.join(ROW_FORMATS)}, "
                           f"got {Path(path).name!r}")
    return suffix


def write_rows(path: str, rows, names) -> None:
    """Rows to .json / .npz / .csv (by suffix)."""
    p = Path(path)
    suffix = _row_format(path)
    t, q, qd, qdd = (np.asarray(x, np.float64) for x in rows)
    if suffix == ".npz":
        np.savez(p, times=t, q=q, qd=qd, qdd=qdd, joint_names=np.array(names))
    elif suffix == ".json":
        p.write_text(json.dumps({"joint_names": list(names), "times": t.tolist(), "q": q.tolist(),
                                 "qd": qd.tolist(), "qdd": qdd.tolist()}))
    else:
        header = ["t"] + [f"{k}_{n}" for k in ("q", "qd", "qdd") for n in names]
        np.savetxt(p, np.column_stack([t, q, qd, qdd]), delimiter=",", header=",".join(header), comments="",
                   fmt="%.17g")


def cmd_move(args) -> int:
    from caliper_jax.motion.path_metrics import dof_names
    from caliper_jax.motion.trajectory import sample_at, uniform_times

    if args.out:
        _row_format(args.out)
        _out_dir(args.out)
    model = load_robot(args)
    plan = plan_move(model, args)
    duration = float(plan.trajectory.duration)
    n = budget(steps_of(duration, args.dt) + 1, f"--dt ({duration:.4g} s sampled every {args.dt:g} s, rows)")
    memory_budget(3 * 8 * n * (1 + 3 * model.nq), "--dt (the sampled rows)")
    rows = sample_at(plan.trajectory, uniform_times(duration, args.dt))
    plan = _checked(model, plan, rows)
    names = dof_names(model)
    if args.out:
        with runtime.writing(), runtime.partial_output(args.out):   # an interrupt: whole file or none
            write_rows(args.out, rows, names)
    report = {"robot": model.name, "kind": plan.kind, "frame": plan.frame, "ok": plan.problem is None,
              "problem": plan.problem, "duration": duration, "segments": plan.segments,
              "rows": int(rows[0].shape[0]), "dt": args.dt, "joint_names": list(names),
              "q_start": plan.q_start.tolist(), "q_end": np.asarray(plan.q_end).tolist(),
              "cartesian": None if plan.cartesian is None else plan.cartesian.to_dict(), "out": args.out}
    lines = [f"{model.name} {plan.kind}: {duration:.4f} s, {plan.segments} segment(s), {report['rows']} rows "
             f"every {args.dt:g} s"]
    lines += [f"  q_start = {_fmt(plan.q_start)}", f"  q_end   = {_fmt(plan.q_end)}"]
    if plan.cartesian is not None:
        c = plan.cartesian
        why = ("" if c.stretch_joint is None else
               f" (joint {coordinate_names(model)[c.stretch_joint]} at {c.velocity_ratio:.3f}x vmax)")
        lines += [f"  tool {c.frame}: path {c.path_length:.4g} m, {c.path_angle:.4g} rad; {c.n_samples} IK "
                  f"samples, max residual {c.max_pos_residual:.2e} m / {c.max_rot_residual:.2e} rad",
                  f"  nominal {c.nominal_duration:.4f} s, stretch x{c.stretch:.4f}{why}; largest joint step "
                  f"{c.max_jump:.4g} (limit {c.max_jump_limit:g})"]
        if c.via_time is not None:
            lines.append(f"  passes the via point at t={c.via_time:.4f} s")
    if plan.problem:
        lines.append(f"  PROBLEM: {plan.problem}")
    if args.out:
        lines.append(f"  wrote rows (t, q, qd, qdd) to {args.out}")
    emit(args, _json_safe(report), "\n".join(lines))
    return 0 if plan.problem is None else 1


# ---- report ---------------------------------------------------------------------------------------

def collision_findings(model, args, times, q) -> list:
    """T008/T009 from the collision lint, when --clearance or --ground is given (else none).

    THE ONE CALL SITE of ``caliper_jax.collision`` in this module (that package is maintained
    separately; wire changes to its API here)."""
    if args.clearance is None and args.ground is None:
        return []
    from caliper_jax.collision import build_collision_model, ground, lint_collision

    clearance = 0.02 if args.clearance is None else args.clearance
    obstacles = [] if args.ground is None else [ground(args.ground)]
    cm = build_collision_model(model, obstacles)
    return list(lint_collision(model, cm, times, q, clearance=clearance))


def cmd_report(args) -> int:
    from caliper_jax.motion.path_metrics import lint_model_path
    from caliper_jax.motion.trajectory import sample_at
    from doctors.trajectory import ERROR, WARNING, format_report, sort_findings

    at_least(args.samples, "--samples", 2)
    segments = len(args.goal) if args.goal else 1
    n = budget(args.samples * segments, "--samples x segments (rows linted)")
    if args.clearance is not None:
        positive(args.clearance, "--clearance", allow_zero=True)
    finite_or_none(args.ground, "--ground")
    model = load_robot(args)
    memory_budget(4 * 8 * n * (1 + 3 * model.nq + 6 * model.nv), "--samples (the linted rows and Jacobians)")
    plan = plan_move(model, args, within_limits=False)     # outside the limits: T001, not an error
    duration = float(plan.trajectory.duration)
    times = np.linspace(0.0, duration, args.samples * plan.segments)
    rows = sample_at(plan.trajectory, times)
    plan = _checked(model, plan, rows, within_limits=False)
    rep, findings, metrics = lint_model_path(model, *rows, frame=plan.frame)
    findings = sort_findings(list(findings) + collision_findings(model, args, rows[0], rows[1]))
    errors = sum(f.severity == ERROR for f in findings)
    warnings = sum(f.severity == WARNING for f in findings)
    report = {"robot": model.name, "kind": plan.kind, "frame": metrics.frame, "ok": plan.problem is None,
              "problem": plan.problem, "q_start": plan.q_start.tolist(),
              "q_end": np.asarray(plan.q_end).tolist(), **rep.to_dict(),
              "lint": {"errors": errors, "warnings": warnings, "findings": [f.to_dict() for f in findings]},
              "cartesian": None if plan.cartesian is None else plan.cartesian.to_dict()}
    head = f"{model.name} {plan.kind} ({plan.segments} segment(s)), Jacobian of {metrics.frame}"
    problem = [f"PROBLEM: {plan.problem}"] if plan.problem else []
    text = "\n".join([head, *problem, format_report(rep, findings)])
    emit(args, _json_safe(report), text)
    failed = errors > 0 or plan.problem is not None
    return 1 if args.strict and failed else 0


# ---- parsers ----------------------------------------------------------------------------------------

def _move_args(p):
    robot_args(p)
    p.add_argument("--goal", action="append", default=None,
                   help="joint goal (nq numbers); repeat for a multi-segment MOVE_J")
    p.add_argument("--target",
                   help="tool pose: 16 numbers, row-major T_world_frame; or x,y,z (start orientation)")
    p.add_argument("--via", help="MOVE_C via point x,y,z (or a pose; its position is used)")
    p.add_argument("--linear", action="store_true", help="MOVE_L: straight line to --target")
    p.add_argument("--screw", action="store_true", help="MOVE_L as a screw motion (constant twist)")
    p.add_argument("--q0", help="start configuration (default: neutral clipped into the limits)")
    p.add_argument("--frame", help="tool frame (default: the robot's tool frame)")
    p.add_argument("--position-only", dest="position_only", action="store_true",
                   help="track the tool position only (orientation free; arms with < 6 dof)")
    p.add_argument("--dt", type=float, default=0.01, help="sample period, s (default 0.01)")
    p.add_argument("--max-jump", dest="max_jump", type=float, default=0.5,
                   help="largest joint step between Cartesian samples, rad (default 0.5)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("move", help="plan a MOVE_J / MOVE_L / MOVE_C and sample it")
    _move_args(p)
    p.add_argument("--out", help="write the sampled rows (t, q, qd, qdd) to FILE (.json, .npz or .csv)")
    p.set_defaults(func=cmd_move)

    p = sub.add_parser("report", help="path report and trajectory lint (T001-T009) of a move")
    _move_args(p)
    p.add_argument("--samples", type=int, default=100, help="rows per segment (default 100)")
    p.add_argument("--strict", action="store_true", help="exit 1 on Error findings (CI gate)")
    p.add_argument("--clearance", type=float, default=None,
                   help="run the collision lint (T008/T009) with this near-miss margin, m (0: T008 only)")
    p.add_argument("--ground", type=float, default=None, metavar="Z",
                   help="ground plane (solid below Z) for the collision lint; implies it")
    p.set_defaults(func=cmd_report)

"""Collision and planning subcommands: ``caliper check | plan | trajopt``.

Obstacles on every command: ``--ground Z`` (solid below height Z), ``--box cx,cy,cz,hx,hy,hz`` and
``--sphere cx,cy,cz,r`` (both repeatable). Self-collision uses the tree adjacency plus an SRDF's
disabled pairs: ``--srdf PATH``, or found next to the URDF (``../srdf/<name>.srdf``) unless
``--no-srdf``. Exit codes: 0 success, 1 a negative result (no path, CHOMP still colliding, a
collision with ``check --strict``), 2 bad input (one line naming the flag). Every report lists the
obstacles, the SRDF used and the uncovered links; ``plan`` and ``trajopt`` state the edge resolution
their answer was checked at. No maths here: the commands call ``caliper_jax.collision``,
``caliper_jax.planning`` and ``caliper_jax.trajopt``.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from caliper_jax.cli.common import (
    at_least,
    budget,
    configuration,
    emit,
    finite_or_none,
    limit_warnings,
    load_robot,
    parse_configuration,
    positive,
    require_finite,
    require_within_limits,
    robot_args,
    seed,
)
from caliper_jax.errors import CaliperError


def _scene_args(p):
    """The robot argument and the scene flags shared by check, plan and trajopt."""
    robot_args(p)
    p.add_argument("--ground", type=float, default=None, metavar="Z",
                   help="ground plane: solid below height Z")
    p.add_argument("--box", action="append", default=[], metavar="cx,cy,cz,hx,hy,hz",
                   help="box obstacle: centre and half extents (repeatable)")
    p.add_argument("--sphere", action="append", default=[], metavar="cx,cy,cz,r",
                   help="sphere obstacle (repeatable)")
    p.add_argument("--srdf", default=None, help="SRDF whose <disable_collisions> pairs are not checked")
    p.add_argument("--no-srdf", action="store_true", help="do not look for an SRDF next to the URDF")


def _obstacles(args):
    from caliper_jax.collision.geometry import ground, parse_box, parse_sphere

    def parsed(parse, text, flag):
        try:
            return parse(text)
        except CaliperError as exc:   # every message names the flag
            raise CaliperError(str(exc) if str(exc).startswith(flag) else f"{flag} {text!r}: {exc}") from None

    budget(len(args.box) + len(args.sphere), "--box / --sphere (obstacles)", "batch")
    obs = [parsed(parse_box, b, "--box") for b in args.box] + [parsed(parse_sphere, s, "--sphere")
                                                              for s in args.sphere]
    if args.ground is not None:
        obs.append(ground(finite_or_none(args.ground, "--ground")))
    return obs


def _edge_budget(model, resolution: float) -> None:
    """Samples along the longest possible edge (the widest joint range) at ``--resolution``."""
    positive(resolution, "--resolution")
    span = np.asarray(model.qpos_upper, np.float64) - np.asarray(model.qpos_lower, np.float64)
    widest = float(np.max(np.where(np.isfinite(span), span, 2 * np.pi))) if model.nq else 0.0
    budget(widest / resolution, f"--resolution ({resolution:g} over a joint range of {widest:.4g}: "
           "states per edge check)")


def find_srdf(model) -> Path | None:
    """``<urdf dir>/../srdf/<urdf stem>.srdf`` when it exists (the ROS package layout)."""
    src = Path(model.source)
    if not src.suffix:
        return None
    cand = src.parent.parent / "srdf" / f"{src.stem}.srdf"
    return cand if cand.is_file() else None


def _srdf(args, model):
    if args.srdf:
        from caliper_jax import limits

        try:
            return limits.check_file(args.srdf, "SRDF file")
        except CaliperError as exc:
            raise CaliperError(f"--srdf: {exc}") from None
    if args.no_srdf:
        return None
    return find_srdf(model)


def _scene(args, model):
    """(obstacles, srdf path or None) from the scene flags."""
    return _obstacles(args), _srdf(args, model)


def _fmt(v) -> str:
    return np.array2string(np.asarray(v), precision=4, separator=",", suppress_small=True)


# ---- check ------------------------------------------------------------------------------------

def cmd_check(args) -> int:
    from caliper_jax.collision import api, build_collision_model

    at_least(args.top, "--top", 0)
    positive(args.margin, "--margin", allow_zero=True)
    model = load_robot(args)
    q = configuration(model, args.joints)
    warnings = limit_warnings(model, q, "--joints")
    obstacles, srdf = _scene(args, model)
    cm = build_collision_model(model, obstacles, srdf=srdf)
    report = api.check(model, cm, q, margin=args.margin)
    report["limit_warnings"] = warnings
    report["srdf"] = None if srdf is None else str(srdf)
    report["allowed_pairs"] = len(cm.allowed)
    shown = report["link_pairs"] if args.all_pairs else report["link_pairs"][: args.top]
    lines = [f"{model.name} q = {_fmt(q)}",
             f"  {report['self_pairs']} self pairs, {report['world_pairs']} world pairs checked "
             f"({len(cm.allowed)} link pairs allowed to touch{', SRDF ' + str(srdf) if srdf else ''})"]
    if report["min_distance"] is None:
        lines.append("  nothing to check")
    else:
        verdict = "IN COLLISION" if report["in_collision"] else "clear"
        lines.append(f"  {verdict}: min distance {report['min_distance']:+.5f} m")
        for r in shown:
            lines.append(f"    {r['kind']:<5} {r['a']:>20} / {r['b']:<20} {r['distance']:+.5f} m")
    for u in report["uncovered"]:
        lines.append(f"  uncovered: {u['link']}: {u['reason']}")
    for n in report["notes"]:
        lines.append(f"  note: {n}")
    lines += [f"  warning: {w}" for w in warnings]
    emit(args, report, "\n".join(lines))
    return 1 if (args.strict and report["in_collision"]) else 0


# ---- plan ---------------------------------------------------------------------------------------

def cmd_plan(args) -> int:
    from caliper_jax.collision import build_collision_model
    from caliper_jax.collision.lint import lint_trajectory
    from caliper_jax.planning import PLANNERS, RETIMERS, Checker, plan, plan_trajectory

    if args.planner not in PLANNERS:
        raise CaliperError(f"--planner: expected one of {', '.join(PLANNERS)}, got {args.planner!r}")
    if args.retime is not None and args.retime not in RETIMERS:
        raise CaliperError(f"--retime: expected one of {', '.join(RETIMERS)}, got {args.retime!r}")
    positive(args.clearance, "--clearance", allow_zero=True)
    positive(args.margin, "--margin", allow_zero=True)
    positive(args.step, "--step")
    seed(args.seed)
    if args.max_iterations is not None:
        budget(at_least(args.max_iterations, "--max-iterations", 1), "--max-iterations")
    if args.batch is not None:
        budget(at_least(args.batch, "--batch", 1), "--batch", "batch")
    model = load_robot(args)
    _edge_budget(model, args.resolution)
    goal = parse_configuration(model, args.goal, "--goal")   # outside the limits: out_of_reach, exit 1
    if args.start is None:                      # neutral, moved inside the joint limits
        from caliper_jax.configuration import default_start

        start = default_start(model)
    else:
        start = configuration(model, args.start, "--start")
    obstacles, srdf = _scene(args, model)
    cm = build_collision_model(model, obstacles, srdf=srdf)
    checker = Checker(model, cm, margin=args.margin, resolution=args.resolution, batch=args.batch)
    res = plan(model, cm, goal, start, planner=args.planner, seed=args.seed, step=args.step,
               max_iterations=args.max_iterations, smooth=not args.no_smooth, checker=checker)
    report = {"robot": model.name, "goal": goal.tolist(), "start": start.tolist(),
              "seed": args.seed, "srdf": None if srdf is None else str(srdf), "obstacles": list(cm.obstacles),
              "uncovered": [u.to_dict() for u in cm.uncovered], **res.to_dict(),
              "note": f"edges checked at a {args.resolution:g} resolution (sampled, not continuous)"}
    lines = [f"{model.name}: {res.status} ({res.planner}, seed {args.seed}) -- {res.reason}"]
    if res.success:
        for i, w in enumerate(res.waypoints):
            lines.append(f"  {i:>3}  {_fmt(w)}")
        if args.retime:
            traj = plan_trajectory(model, res.waypoints, method=args.retime)
            findings = lint_trajectory(model, cm, traj, clearance=args.clearance)
            report["trajectory"] = {"method": args.retime, "duration": float(traj.duration),
                                    "segments": int(res.waypoints.shape[0] - 1),
                                    "findings": [f.to_dict() for f in findings]}
            how = ("jerk-limited S-curves" if args.retime == "scurve"
                   else "time-optimal on the segments") + ", rest at waypoints"
            lines.append(f"  retimed ({how}): {float(traj.duration):.4f} s; T008/T009 on 100 rows per "
                         f"segment: {len(findings)} finding(s)")
            lines += [f"    [{f.code}] {f.severity}: {f.message}" for f in findings]
    shown = [f"{k} {v:.3f}" for k, v in res.times.items() if v >= 5e-4 or k == "total"]
    lines.append("  time (s): " + ", ".join(shown))
    lines.append(f"  {res.calls} batched validity calls, {res.states_checked} states checked at resolution "
                 f"{args.resolution:g} (sampled edge checks)")
    if not cm.npair:
        lines.append("  note: no collision pair is checked (links uncovered or allowed to touch): "
                     "limits only")
    for u in cm.uncovered:
        lines.append(f"  uncovered: {u.link}: {u.reason}")
    emit(args, report, "\n".join(lines))
    return 0 if res.success else 1


# ---- trajopt ------------------------------------------------------------------------------------

def cmd_trajopt(args) -> int:
    from caliper_jax.collision import build_collision_model, build_sphere_model
    from caliper_jax.trajopt import ChompOptions, trajopt

    at_least(args.waypoints, "--waypoints", 3)
    at_least(args.iterations, "--iterations", 0)
    at_least(args.inits, "--inits", 1)
    seed(args.seed)
    positive(args.learning_rate, "--learning-rate")
    if args.dynamics:
        _dynamics_flags(args)
    budget(args.inits * args.waypoints, "--inits x --waypoints (paths optimised at once)", "batch")
    budget(args.inits * args.iterations, "--inits x --iterations (optimiser steps)")
    model = load_robot(args)
    _edge_budget(model, args.resolution)
    start = parse_configuration(model, args.start, "--start")
    goal = parse_configuration(model, args.goal, "--goal")
    require_within_limits(model, start, "--start")
    require_within_limits(model, goal, "--goal")
    free = _free_names(model, args.free)
    obstacles, srdf = _scene(args, model)
    spheres, fits = build_sphere_model(model, obstacles, srdf=srdf)
    exact = build_collision_model(model, obstacles, srdf=srdf)
    opts = ChompOptions(n_waypoints=args.waypoints, iterations=args.iterations,
                        learning_rate=args.learning_rate).check()
    res = trajopt(model, start, goal, inits=args.inits, seed=args.seed, opts=opts, spheres=spheres,
                  exact=exact, resolution=args.resolution, free=free)
    require_finite(f"trajopt {model.name}", hint="the optimisation diverged: lower --learning-rate",
                   path=res.paths[0])
    if args.dynamics:
        return _trajopt_dynamics(args, model, start, goal, spheres, exact, srdf, res)
    ok = bool(res.success[0])
    held = res.held[0] if res.held else []
    report = {"robot": model.name, "start": start.tolist(), "goal": goal.tolist(), "seed": args.seed,
              "success": ok, "cost": float(res.costs[0]), "initial_cost": float(res.initial_costs[0]),
              "chosen_init": int(res.chosen[0]), "inits": args.inits, "waypoints": res.paths[0].tolist(),
              "srdf": None if srdf is None else str(srdf), "obstacles": list(exact.obstacles),
              "spheres": [f.to_dict() for f in fits], "uncovered": [u.to_dict() for u in exact.uncovered],
              "held_joints": held,
              "note": f"checked with the exact colliders at a {args.resolution:g} resolution (sampled)"}
    lines = [f"{model.name}: CHOMP {'collision-free' if ok else 'FAILED (still in collision)'}; cost "
             f"{report['initial_cost']:.4g} (straight line) -> {report['cost']:.4g} "
             f"(init {report['chosen_init']} of {args.inits})"]
    for w in res.paths[0][:: max(1, args.waypoints // 8)]:
        lines.append(f"  {_fmt(w)}")
    if held:
        lines.append(f"  held (start == goal; --free NAMES lets them move): {', '.join(held)}")
    emit(args, report, "\n".join(lines))
    return 0 if ok else 1


def _dynamics_flags(args):
    """Checks of the --dynamics flags (before any solve) -> the duration or None."""
    at_least(args.horizon, "--horizon", 2)
    budget(args.horizon, "--horizon (shooting intervals)", "batch")
    duration = None if args.duration is None else positive(args.duration, "--duration")
    if args.objective == "effort" and duration is None:
        raise CaliperError("--objective effort needs --duration SECONDS (a fixed-time problem)")
    return duration


def _trajopt_dynamics(args, model, start, goal, spheres, exact, srdf, chomp) -> int:
    """``trajopt --dynamics``: multiple shooting over the native dynamics, warm-started from the
    CHOMP path just computed; success = converged and collision-free (exact colliders)."""
    from caliper_jax.planning import Checker
    from caliper_jax.trajopt import trajopt_dynamic

    duration = _dynamics_flags(args)
    res = trajopt_dynamic(model, start, goal, horizon=args.horizon, duration=duration,
                          objective=args.objective, spheres=spheres, init=chomp.paths[0], key=args.seed)
    require_finite(f"trajopt --dynamics {model.name}", hint="lower --horizon or raise --duration",
                   q=res.q[0], tau=res.tau[0])
    clear = bool(Checker(model, exact, resolution=args.resolution).path_valid(res.q[0]))
    ok = bool(res.converged[0]) and clear
    report = {"robot": model.name, "start": start.tolist(), "goal": goal.tolist(), "seed": args.seed,
              "dynamics": True, "objective": args.objective, "horizon": args.horizon, "success": ok,
              "converged": bool(res.converged[0]), "collision_free": clear,
              "violation": float(res.violation[0]), "objective_value": float(res.objective[0]),
              "duration": float(res.duration[0]), "times": res.times[0].tolist(), "q": res.q[0].tolist(),
              "qd": res.qd[0].tolist(), "tau": res.tau[0].tolist(), "chomp_success": bool(chomp.success[0]),
              "srdf": None if srdf is None else str(srdf), "obstacles": list(exact.obstacles),
              "note": f"collision-checked with the exact colliders at a {args.resolution:g} resolution; "
                      "tau is held on each interval"}
    state = "OK" if ok else ("FAILED (not converged)" if not res.converged[0] else "FAILED (collides)")
    lines = [f"{model.name}: dynamics trajopt ({args.objective}) {state}; "
             f"duration {report['duration']:.4g} s, "
             f"objective {report['objective_value']:.4g}, violation {report['violation']:.2g}, "
             f"max |tau| {_fmt(np.abs(res.tau[0]).max(axis=0))}"]
    for t, q in list(zip(res.times[0], res.q[0], strict=True))[:: max(1, args.horizon // 8)]:
        lines.append(f"  t={t:.3f}  {_fmt(q)}")
    emit(args, report, "\n".join(lines))
    return 0 if ok else 1


def _free_names(model, text) -> list[str]:
    names = [t for t in (text or "").replace(",", " ").split() if t]
    if names == ["all"]:
        return list(model.joint_names)
    for name in names:
        if name not in model.joint_names:
            raise CaliperError(f"--free: robot {model.name!r} has no joint named {name!r} "
                               f"(joints: {', '.join(model.joint_names)})")
    return names


def _seeded_args(p):
    p.add_argument("--seed", type=int, default=0, help="PRNG seed (same seed, same path)")
    p.add_argument("--resolution", type=float, default=0.02,
                   help="edge-check step of the exact check, rad or m (default 0.02)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="collision check at one configuration: distances, colliding pairs, "
                                     "uncovered links")
    _scene_args(p)
    p.add_argument("--joints", help="joint positions (default neutral)")
    p.add_argument("--margin", type=float, default=0.0, help="also list pairs closer than this (m)")
    p.add_argument("--top", type=int, default=10, help="link pairs to print, closest first (default 10)")
    p.add_argument("--all-pairs", action="store_true", help="print every link pair")
    p.add_argument("--strict", action="store_true", help="exit 1 when in collision")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("plan", help="collision-free joint-space path to a goal (jitted RRT-Connect default)")
    _scene_args(p)
    p.add_argument("--goal", required=True, help="goal joint positions")
    p.add_argument("--start", default=None,
                   help="start joint positions (default: the neutral pose moved inside the joint limits)")
    p.add_argument("--planner", default="auto",
                   help="auto (default: the jitted vrrtconnect on sphere-covered robots among primitive "
                        "obstacles, else / on failure the host rrtconnect), vrrtconnect, rrtconnect, rrtstar "
                        "or prm")
    _seeded_args(p)
    p.add_argument("--margin", type=float, default=0.0,
                   help="required clearance, m (sampled edges can graze by a few mm: e.g. 0.005)")
    p.add_argument("--step", type=float, default=0.3, help="tree extension step (default 0.3)")
    p.add_argument("--max-iterations", type=int, default=None, help="search budget")
    p.add_argument("--no-smooth", action="store_true", help="skip shortcut smoothing")
    p.add_argument("--batch", type=int, default=None,
                   help="pad every exact collision call to this many states (one compiled shape)")
    p.add_argument("--retime", nargs="?", const="scurve", default=None, metavar="scurve|topp",
                   help="time the path (scurve: jerk-limited, the default; topp: time-optimal on the "
                        "segments) and lint it (T008/T009)")
    p.add_argument("--clearance", type=float, default=0.02, help="T009 near-miss clearance, m (0 disables)")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("trajopt", help="CHOMP trajectory optimisation between two configurations")
    _scene_args(p)
    p.add_argument("--start", required=True, help="start joint positions")
    p.add_argument("--goal", required=True, help="goal joint positions")
    p.add_argument("--waypoints", type=int, default=32)
    p.add_argument("--iterations", type=int, default=200)
    p.add_argument("--learning-rate", type=float, default=0.02)
    p.add_argument("--inits", type=int, default=8, help="initialisations optimised together (default 8)")
    p.add_argument("--free", default=None, metavar="NAMES",
                   help="joints that may move although start == goal (comma separated, or 'all'; by "
                        "default a joint the problem does not move, e.g. a gripper finger, is held)")
    p.add_argument("--dynamics", action="store_true",
                   help="then optimise torques and states over the rigid-body dynamics (multiple "
                        "shooting, torque/velocity/joint limits), warm-started from the CHOMP path")
    p.add_argument("--objective", choices=("time", "effort"), default="time",
                   help="with --dynamics: minimum time (default) or minimum effort (needs --duration)")
    p.add_argument("--horizon", type=int, default=24, help="with --dynamics: shooting intervals (default 24)")
    p.add_argument("--duration", type=float, default=None,
                   help="with --dynamics: the duration, s (fixed for effort; the initial guess for time)")
    _seeded_args(p)
    p.set_defaults(func=cmd_trajopt)


__all__ = ["register", "find_srdf"]

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

from caliper_jax.cli.common import configuration, emit, load_robot, parse_vector, robot_args
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

    obs = [parse_box(b) for b in args.box] + [parse_sphere(s) for s in args.sphere]
    if args.ground is not None:
        obs.append(ground(args.ground))
    return obs


def find_srdf(model) -> Path | None:
    """``<urdf dir>/../srdf/<urdf stem>.srdf`` when it exists (the ROS package layout)."""
    src = Path(model.source)
    if not src.suffix:
        return None
    cand = src.parent.parent / "srdf" / f"{src.stem}.srdf"
    return cand if cand.is_file() else None


def _srdf(args, model):
    if args.srdf:
        return Path(args.srdf)
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

    if args.top < 0:
        raise CaliperError(f"--top must be >= 0, got {args.top}")
    model = load_robot(args)
    q = configuration(model, args.joints)
    obstacles, srdf = _scene(args, model)
    cm = build_collision_model(model, obstacles, srdf=srdf)
    report = api.check(model, cm, q, margin=args.margin)
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
    if not (np.isfinite(args.clearance) and args.clearance >= 0):
        raise CaliperError(f"--clearance must be >= 0 (0 disables T009), got {args.clearance}")
    model = load_robot(args)
    goal = parse_vector(args.goal, model.nq, "--goal", model.name)
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

    model = load_robot(args)
    start = parse_vector(args.start, model.nq, "--start", model.name)
    goal = parse_vector(args.goal, model.nq, "--goal", model.name)
    obstacles, srdf = _scene(args, model)
    spheres, fits = build_sphere_model(model, obstacles, srdf=srdf)
    exact = build_collision_model(model, obstacles, srdf=srdf)
    opts = ChompOptions(n_waypoints=args.waypoints, iterations=args.iterations,
                        learning_rate=args.learning_rate).check()
    res = trajopt(model, start, goal, inits=args.inits, seed=args.seed, opts=opts, spheres=spheres,
                  exact=exact, resolution=args.resolution)
    ok = bool(res.success[0])
    report = {"robot": model.name, "start": start.tolist(), "goal": goal.tolist(), "seed": args.seed,
              "success": ok, "cost": float(res.costs[0]), "initial_cost": float(res.initial_costs[0]),
              "chosen_init": int(res.chosen[0]), "inits": args.inits, "waypoints": res.paths[0].tolist(),
              "srdf": None if srdf is None else str(srdf), "obstacles": list(exact.obstacles),
              "spheres": [f.to_dict() for f in fits], "uncovered": [u.to_dict() for u in exact.uncovered],
              "note": f"checked with the exact colliders at a {args.resolution:g} resolution (sampled)"}
    lines = [f"{model.name}: CHOMP {'collision-free' if ok else 'FAILED (still in collision)'}; cost "
             f"{report['initial_cost']:.4g} (straight line) -> {report['cost']:.4g} "
             f"(init {report['chosen_init']} of {args.inits})"]
    for w in res.paths[0][:: max(1, args.waypoints // 8)]:
        lines.append(f"  {_fmt(w)}")
    emit(args, report, "\n".join(lines))
    return 0 if ok else 1


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

    p = sub.add_parser("plan", help="collision-free joint-space path to a goal (RRT-Connect by default)")
    _scene_args(p)
    p.add_argument("--goal", required=True, help="goal joint positions")
    p.add_argument("--start", default=None, help="start joint positions (default neutral)")
    p.add_argument("--planner", default="rrtconnect", help="rrtconnect (default), rrtstar or prm")
    _seeded_args(p)
    p.add_argument("--margin", type=float, default=0.0,
                   help="required clearance, m (sampled edges can graze by a few mm: e.g. 0.005)")
    p.add_argument("--step", type=float, default=0.3, help="tree extension step (default 0.3)")
    p.add_argument("--max-iterations", type=int, default=None, help="search budget")
    p.add_argument("--no-smooth", action="store_true", help="skip shortcut smoothing")
    p.add_argument("--batch", type=int, default=None,
                   help="pad every collision call to this many states (one compiled shape)")
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
    _seeded_args(p)
    p.set_defaults(func=cmd_trajopt)


__all__ = ["register", "find_srdf"]

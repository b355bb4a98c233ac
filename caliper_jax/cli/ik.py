"""IK, singularity and calibration subcommands: ``caliper ik | analyze | calibrate``.

Poses in and out are 4x4 row-major ``T_world_frame`` -- the matrices ``caliper fk --json``
prints -- so a frame's matrix from fk pasted into ``ik --target`` solves that very pose.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from caliper_jax.cli.common import (
    at_least,
    budget,
    configuration,
    emit,
    limit_warnings,
    load_robot,
    parse_configuration,
    parse_vector,
    positive,
    require_finite,
    robot_args,
    seed,
)
from caliper_jax.errors import CaliperError


def _fmt(x, precision=6):
    return np.array2string(np.asarray(x), precision=precision, suppress_small=True, max_line_width=100)


def _finite_or_none(x):
    x = float(x)
    return x if np.isfinite(x) else None


def _names(text):
    return [t for t in (text or "").replace(",", " ").split() if t]


# ---- ik --------------------------------------------------------------------------------------

def cmd_ik(args) -> int:
    from caliper_jax import api
    from caliper_jax.ik import api as ik_api
    from caliper_jax.ik.poses import LAYOUT, parse_pose_text, pose_from_position

    if (args.target is None) == (args.position is None):
        raise CaliperError("give exactly one of --target (16 numbers, row-major 4x4) or --position x,y,z")
    restarts = 8 if args.restarts is None else at_least(args.restarts, "--restarts", 1)
    iters = 100 if args.max_iters is None else at_least(args.max_iters, "--max-iters", 1)
    if args.tol is not None:
        positive(args.tol, "--tol")
    seed(args.seed)
    budget(restarts, "--restarts", "batch")
    budget(restarts * iters, "--restarts x --max-iters (solver iterations)")
    model = load_robot(args)
    if args.target is not None:
        target = parse_pose_text(args.target, "--target")
    else:
        target = pose_from_position(parse_vector(args.position, 3, "--position", model.name))
    frame_idx, frame = ik_api.resolve_frame(model, args.frame)
    seed_q = None if args.q0 is None else parse_configuration(model, args.q0, "--q0")
    warnings = [] if seed_q is None else limit_warnings(model, seed_q, "--q0")
    overrides = {}
    for field, cast in (("restarts", int), ("max_iters", int), ("tol", float)):
        value = getattr(args, field)
        if value is not None:
            overrides[field] = cast(value)
    res = ik_api.ik(model, target, frame=frame, seed_q=seed_q, key=args.seed, locked=_names(args.lock),
                    position_only=args.position is not None, **overrides)
    T = api.fk(model, res.q)[frame_idx]
    require_finite(f"ik {model.name}", q=res.q, T=T)
    report = {
        "robot": model.name, "frame": frame, "layout": LAYOUT,
        "mode": "position" if args.position is not None else "pose",
        "success": bool(res.success), "q": res.q.tolist(),
        "pos_residual": float(res.pos_residual), "rot_residual": float(res.rot_residual),
        "iterations": int(res.iterations), "restart": int(res.restart), "seed": args.seed,
        "target": target.tolist(), "T": T.tolist(), "limit_warnings": warnings,
    }
    status = "converged" if res.success else "NOT converged (best restart shown)"
    text = "\n".join([
        f"{model.name} ik -> {frame}: {status} after {int(res.iterations)} iterations "
        f"(restart {int(res.restart)})",
        f"  q = {_fmt(res.q)}",
        f"  residual: position {float(res.pos_residual):.3e} m, rotation {float(res.rot_residual):.3e} rad"
        + (" (ignored: --position)" if args.position is not None else ""),
        f"  p = {_fmt(T[:3, 3])}",
        *[f"  warning: {w}" for w in warnings],
    ])
    emit(args, report, text)
    return 0 if res.success else 1


# ---- analyze ------------------------------------------------------------------------------

def cmd_analyze(args) -> int:
    from caliper_jax.ik import api as ik_api

    model = load_robot(args)
    q = configuration(model, args.joints)
    warnings = limit_warnings(model, q, "--joints")
    out = ik_api.analyze(model, q, frame=args.frame)
    require_finite(f"analyze {model.name}", singular_values=out["singular_values"])
    report = {
        "robot": model.name, "frame": out["frame"], "q": q.tolist(),
        "singular_values": out["singular_values"].tolist(),
        "manipulability": float(out["manipulability"]),
        "condition_number": _finite_or_none(out["condition_number"]),
        "inverse_condition_number": float(out["inverse_condition_number"]),
        "rank": int(out["rank"]), "nullspace_dim": int(model.nv - int(out["rank"])),
        "translation": {
            "singular_values": out["translation_singular_values"].tolist(),
            "manipulability": float(out["translation_manipulability"]),
            "condition_number": _finite_or_none(out["translation_condition_number"]),
            "ellipsoid_axes": out["translation_ellipsoid_axes"].T.tolist(),
            "ellipsoid_radii": out["translation_ellipsoid_radii"].tolist(),
            "escape_direction": out["translation_escape_direction"].tolist(),
        },
        "ellipsoid_axes": out["ellipsoid_axes"].T.tolist(),
        "ellipsoid_radii": out["ellipsoid_radii"].tolist(),
        "escape_direction": out["escape_direction"].tolist(),
        "notes": "Jacobian LOCAL_WORLD_ALIGNED rows [v; w]; ellipsoid_axes lists one unit axis per row; "
                 "condition_number null means exactly singular",
        "limit_warnings": warnings,
    }
    cond = report["condition_number"]
    text = "\n".join([
        f"{model.name} analyze {out['frame']} at q = {_fmt(q, 4)}",
        f"  singular values  : {_fmt(out['singular_values'], 5)}",
        f"  manipulability   : {float(out['manipulability']):.6g} (translation "
        f"{float(out['translation_manipulability']):.6g})",
        f"  condition number : {'inf (singular)' if cond is None else f'{cond:.6g}'}",
        f"  rank             : {int(out['rank'])} of {model.nv} joints "
        f"(nullspace dimension {report['nullspace_dim']})",
        f"  escape direction : {_fmt(out['escape_direction'], 4)}",
        *[f"  warning: {w}" for w in warnings],
    ])
    emit(args, report, text)
    return 0


# ---- calibrate ------------------------------------------------------------------------------

def load_calibration_data(path: str) -> dict:
    """An .npz or .json file -> dict of NumPy arrays (and an optional 'frame' string).

    The file is read once, within ``CALIPER_MAX_FILE_MB`` (no device, FIFO or directory); every
    error names ``--data``, the file and the field."""

    from caliper_jax import limits

    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".npz", ".json"):
        raise CaliperError(f"--data: expected a .npz or .json file, got {p.suffix or 'no suffix'}")
    try:
        raw_bytes = limits.read_bytes(p, "file")
    except CaliperError as exc:
        raise CaliperError(f"--data: {exc}") from None
    if suffix == ".npz":
        from caliper_jax.io.npz import load_npz

        data = load_npz(p, f"--data: {path}", raw=raw_bytes)     # declared shapes checked first
        if not isinstance(data, dict) or not data:
            raise CaliperError(f"--data: {path} holds no arrays")
        for k, v in list(data.items()):
            if k == "frame":
                continue
            if v.dtype.kind not in "biuf":
                raise CaliperError(f"--data: field {k!r} of {path} is not a numeric array (dtype {v.dtype})")
            data[k] = v.astype(np.float64)
    else:
        try:
            text = raw_bytes.decode("utf-8")
            limits.check_depth(text, f"--data: {path}")
            raw = json.loads(text)
        except UnicodeDecodeError:
            raise CaliperError(f"--data: {path} is not UTF-8 text") from None
        except json.JSONDecodeError as exc:
            raise CaliperError(f"--data: {path} is not valid JSON ({exc.msg}, line {exc.lineno})") from None
        except RecursionError:
            raise CaliperError(f"--data: {path} is nested too deeply") from None
        if not isinstance(raw, dict):
            raise CaliperError(f"--data: {path} must hold a JSON object")
        data = {}
        for k, v in raw.items():
            if k == "frame":
                data[k] = v
                continue
            try:
                data[k] = np.asarray(v, dtype=np.float64)
            except (TypeError, ValueError, OverflowError):
                raise CaliperError(f"--data: field {k!r} is not a numeric array (a ragged or non-numeric "
                                   "list)") from None
    if "frame" in data:
        frame = data["frame"]
        if not isinstance(frame, str):
            frame = np.asarray(frame)
            if frame.shape != () or frame.dtype.kind not in "US":
                raise CaliperError("--data: field 'frame' must be a frame name (a string)")
            frame = str(frame.item())
        data["frame"] = frame
    return data


def _need(data, keys, mode):
    missing = [k for k in keys if k not in data]
    if missing:
        raise CaliperError(f"--data: mode {mode!r} needs field(s) {', '.join(missing)}")


def cmd_calibrate(args) -> int:
    try:
        return _calibrate(args)
    except CaliperError as exc:   # the engine names fields as data.q / data.T: say which file
        if str(exc).startswith("data"):
            raise CaliperError(f"--data {args.data}: {exc}") from None
        raise


def _calibrate(args) -> int:
    from caliper_jax import calibration
    from caliper_jax.ik import api as ik_api

    data = load_calibration_data(args.data)
    model = load_robot(args)
    mode = args.mode
    rows = max([np.shape(v)[0] for k, v in data.items() if k != "frame" and np.ndim(v)] or [0])
    budget(rows, "--data (observations)")
    if mode == "dynamic":
        _need(data, ("q", "qd", "qdd", "tau"), mode)
        res = calibration.identify_dynamics(model, data["q"], data["qd"], data["qdd"], data["tau"])
        bodies = []
        for b, name in enumerate(model.body_names):
            bodies.append({"joint": name, **{k: float(res.parameters[b, i])
                                             for i, k in enumerate(calibration.PARAM_NAMES)},
                           "identifiable": [k for i, k in enumerate(calibration.PARAM_NAMES)
                                            if res.identifiable[b, i]]})
        report = {"robot": model.name, "mode": mode, "samples": int(data["q"].shape[0]),
                  "rank": res.rank, "rms_torque_before": res.rms_before, "rms_torque_after": res.rms_after,
                  "bodies": bodies,
                  "notes": "parameters [m, m*c, inertia about the body origin] in body axes; only "
                           "identifiable ones are fixed by the data, the rest keep their nominal values"}
        text = "\n".join([
            f"{model.name} dynamic identification from {report['samples']} samples: "
            f"{res.rank} base parameters identified",
            f"  torque rms {res.rms_before:.4g} -> {res.rms_after:.4g}",
            *[f"  {b['joint']:<24} m = {b['m']:.6g}  ({len(b['identifiable'])} of 10 identifiable)"
              for b in bodies],
        ])
        emit(args, report, text)
        return 0
    _need(data, ("q", "T"), mode)
    frame = args.frame or data.get("frame") or ik_api.default_frame(model)
    ik_api.resolve_frame(model, frame)
    if mode == "offsets":
        res = calibration.calibrate_joint_offsets(model, data["q"], data["T"], frame)
        joints = {}
        for name in model.joint_names:
            b = model.body_id(name)
            if model.jnt_type[b] in ("revolute", "prismatic"):
                j = model.qfull_src[model.body_qadr[b]]
                joints[name] = {"offset": float(res.offsets[j]), "identifiable": bool(res.identifiable[j])}
        report = {"robot": model.name, "mode": mode, "frame": frame, "observations": int(data["q"].shape[0]),
                  "offsets": res.offsets.tolist(), "joints": joints,
                  "rms_pos_before": res.rms_pos_before, "rms_rot_before": res.rms_rot_before,
                  "rms_pos_after": res.rms_pos_after, "rms_rot_after": res.rms_rot_after,
                  "iterations": res.iterations, "converged": res.converged,
                  "notes": "model angle = commanded q + offset"}
        lines = [f"{model.name} joint-offset calibration ({frame}, {report['observations']} observations): "
                 f"{'converged' if res.converged else 'NOT converged'} in {res.iterations} iterations",
                 f"  rms error {res.rms_pos_before:.3e} m / {res.rms_rot_before:.3e} rad -> "
                 f"{res.rms_pos_after:.3e} m / {res.rms_rot_after:.3e} rad"]
        lines += [f"  {n:<24} {v['offset']:+.9f}{'' if v['identifiable'] else '  (not observable)'}"
                  for n, v in joints.items()]
        emit(args, report, "\n".join(lines))
        return 0
    res = calibration.calibrate_kinematics(model, data["q"], data["T"], frame)
    joints = [{"joint": model.body_names[b], "dp": res.dp[k].tolist(), "dr": res.dr[k].tolist()}
              for k, b in enumerate(res.bodies)]
    report = {"robot": model.name, "mode": mode, "frame": frame, "observations": int(data["q"].shape[0]),
              "rank": res.rank, "parameters": int(res.identifiable.size), "joints": joints,
              "offsets": res.offsets.tolist(),
              "rms_pos_before": res.rms_pos_before, "rms_rot_before": res.rms_rot_before,
              "rms_pos_after": res.rms_pos_after, "rms_rot_after": res.rms_rot_after,
              "iterations": res.iterations, "converged": res.converged,
              "notes": "jnt_p += dp, jnt_R = jnt_R @ exp(dr) (parent-joint frame), model angle = q + offset; "
                       "minimum-norm corrections: unobservable directions stay nominal"}
    lines = [f"{model.name} kinematic calibration ({frame}, {report['observations']} observations): "
             f"rank {res.rank} of {report['parameters']} parameters, "
             f"{'converged' if res.converged else 'NOT converged'} in {res.iterations} iterations",
             f"  rms error {res.rms_pos_before:.3e} m / {res.rms_rot_before:.3e} rad -> "
             f"{res.rms_pos_after:.3e} m / {res.rms_rot_after:.3e} rad"]
    emit(args, report, "\n".join(lines))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ik", help="inverse kinematics to a pose (row-major 4x4, as fk prints) or a point")
    robot_args(p)
    p.add_argument("--target",
                   help="T_world_frame as 16 numbers, row by row (a pasted fk --json matrix works)")
    p.add_argument("--position", help="x,y,z: position-only target (orientation free)")
    p.add_argument("--frame", help="frame to place (default: the tool frame)")
    p.add_argument("--seed", type=int, default=0, help="PRNG seed of the restart draws (default 0)")
    p.add_argument("--q0", help="initial configuration, the first restart (default mid-range)")
    p.add_argument("--lock", help="joints that must not move (names, comma separated; kept at --q0)")
    p.add_argument("--restarts", type=int, help="attempts including the seed (default 8)")
    p.add_argument("--max-iters", dest="max_iters", type=int, help="iterations per attempt (default 100)")
    p.add_argument("--tol", type=float, help="position (m) and rotation (rad) tolerance (default 1e-9)")
    p.set_defaults(func=cmd_ik)

    p = sub.add_parser("analyze",
                       help="singularity metrics: singular values, manipulability, escape direction")
    robot_args(p)
    p.add_argument("--joints", help="joint positions (nq numbers; default neutral)")
    p.add_argument("--frame", help="frame whose Jacobian is analysed (default: the tool frame)")
    p.set_defaults(func=cmd_analyze)

    p = sub.add_parser("calibrate", help="joint-offset / kinematic calibration, dynamic identification")
    robot_args(p)
    p.add_argument("--data", required=True,
                   help=".npz or .json with q (N, nq) and T (N, 4, 4 row-major) [frame]; "
                        "dynamic: q, qd, qdd, tau")
    p.add_argument("--mode", choices=("offsets", "kinematic", "dynamic"), default="offsets",
                   help="what to estimate (default offsets)")
    p.add_argument("--frame", help="measured frame (default: the data's 'frame', else the tool frame)")
    p.set_defaults(func=cmd_calibrate)

"""Core subcommands: ``caliper info | load | fk | sim``."""
from __future__ import annotations

import argparse
import platform
from pathlib import Path

import numpy as np

from caliper_jax.cli.common import (
    budget,
    configuration,
    coordinate_names,
    emit,
    enable_x64,
    frame_by_name,
    limit_warnings,
    load_robot,
    memory_budget,
    positive,
    require_finite,
    require_inertia,
    robot_args,
    steps_of,
)
from caliper_jax.errors import CaliperError


def cmd_info(args) -> int:
    import jax
    import mujoco

    import robots
    from caliper_jax import __version__

    report = {
        "caliper_jax": __version__, "python": platform.python_version(), "jax": jax.__version__,
        "backend": jax.default_backend(), "devices": [str(d) for d in jax.devices()],
        "mujoco": mujoco.__version__,
        "example_robot_data": str(robots.example_robot_data_dir() or ""),
        "robots": robots.names(),
    }
    text = "\n".join(f"{k:>20}: {', '.join(v) if isinstance(v, list) else v}" for k, v in report.items())
    emit(args, report, text)
    return 0


def cmd_load(args) -> int:
    from caliper_jax.loading import read_description
    from caliper_jax.model import build_model

    enable_x64()
    desc = read_description(args.robot, floating=True if args.floating else None, mimic=not args.no_mimic)
    model = build_model(desc)
    lo, hi = np.asarray(model.qpos_lower), np.asarray(model.qpos_upper)
    coords = coordinate_names(model)
    joints = []
    for name in model.joint_names:
        b = model.body_id(name)
        start = model.qfull_src[model.body_qadr[b]]
        n = {"free": 7, "ball": 4}.get(model.jnt_type[b], 1)
        joints.append({"name": name, "type": model.jnt_type[b], "q_index": start, "nq": n,
                       "lower": [None if not np.isfinite(x) else float(x) for x in lo[start:start + n]],
                       "upper": [None if not np.isfinite(x) else float(x) for x in hi[start:start + n]]})
    report = {
        "name": model.name, "source": model.source, "nq": model.nq, "nv": model.nv,
        "nbody": model.nbody, "nframe": model.nframe, "mass": float(np.sum(model.body_mass)),
        "joints": joints, "coordinates": coords,
        "qpos_lower": [None if not np.isfinite(x) else float(x) for x in lo],
        "qpos_upper": [None if not np.isfinite(x) else float(x) for x in hi],
        "mimic": [n for i, n in enumerate(model.body_names) if model.vfull_mimic[model.body_vadr[i]] >= 0],
        "frames": list(model.frame_names),
        "geoms": {"collision": sum(g.role == "collision" for g in model.geoms),
                  "visual": sum(g.role == "visual" for g in model.geoms)},
        "warnings": desc.warnings,
    }
    lines = [f"{model.name}: nq={model.nq} nv={model.nv} bodies={model.nbody} frames={model.nframe} "
             f"mass={report['mass']:.4g} kg", f"  source: {model.source}"]
    for j in joints:
        if j["nq"] == 1:
            a, b = lo[j["q_index"]], hi[j["q_index"]]
            lines.append(f"  joint {j['name']:<28} {j['type']:<10} [{a:+.4g}, {b:+.4g}]")
        else:
            what = "position + unit quaternion w x y z" if j["type"] == "free" else "unit quaternion w x y z"
            span = f"q[{j['q_index']}:{j['q_index'] + j['nq']}]"
            lines.append(f"  joint {j['name']:<28} {j['type']:<10} {span} ({what})")
    lines += [f"  warning: {w}" for w in desc.warnings]
    emit(args, report, "\n".join(lines))
    return 0


def cmd_fk(args) -> int:
    from caliper_jax import api

    model = load_robot(args)
    q = configuration(model, args.joints)
    if args.frame:
        frame_by_name(model, args.frame)
    warnings = limit_warnings(model, q, "--joints")
    frames = api.fk_dict(model, q)
    if args.frame:
        frames = {args.frame: frames[args.frame]}
    require_finite("fk", **{f"T_world_{k}": v for k, v in frames.items()})
    report = {"robot": model.name, "q": q.tolist(), "layout": "T_world_frame, 4x4 row-major",
              "frames": frames, "limit_warnings": warnings}
    lines = [f"{model.name} q = {np.array2string(q, precision=4)}"]
    for name, T in frames.items():
        T = np.asarray(T)
        lines.append(f"  {name:<28} p = {np.array2string(T[:3, 3], precision=5, suppress_small=True)}")
    lines += [f"  warning: {w}" for w in warnings]
    emit(args, report, "\n".join(lines))
    return 0


def _check_sim_flags(duration: float, dt: float, integrator: str, flag_duration: str = "--duration") -> int:
    """Validate the simulation flags and the work they set; returns the number of steps."""
    from caliper_jax import integrators

    positive(duration, flag_duration)
    positive(dt, "--dt")
    if dt > duration:
        raise CaliperError(f"--dt ({dt:g} s) must not exceed {flag_duration} ({duration:g} s)")
    if integrator not in integrators.INTEGRATORS:
        raise CaliperError(f"--integrator: unknown integrator {integrator!r} (expected one of "
                           f"{', '.join(integrators.INTEGRATORS)})")
    return budget(steps_of(duration, dt), f"{flag_duration} / --dt ({duration:g} s in steps of {dt:g} s)")


def cmd_sim(args) -> int:
    from caliper_jax import api

    if args.contact:  # MuJoCo contact simulation (mjx_backend), same report contract
        from caliper_jax.cli.contact import run_contact_sim

        report, text = run_contact_sim(args)
        emit(args, report, text)
        return 0
    steps = _check_sim_flags(args.duration, args.dt, args.integrator)
    if args.damping is not None:
        positive(args.damping, "--damping", allow_zero=True)
    model = load_robot(args)
    memory_budget(3 * 8 * (steps + 1) * (model.nq + model.nv + 2),
                  "--duration / --dt (the stored trajectory)")
    q0 = configuration(model, args.q0, "--q0")
    warnings = limit_warnings(model, q0, "--q0")
    require_inertia(model, "a passive simulation")
    if args.damping is not None:
        model = model.replace(dof_damping=np.full(model.nv, args.damping))
    t, qs, vs, energy = api.simulate_passive(model, q0, None, args.duration, args.dt, args.integrator)
    require_finite(f"sim {model.name}", hint="the simulation diverged: try a smaller --dt or "
                   "--integrator implicit", q=qs, v=vs, energy=energy)
    drift = float(energy[-1] - energy[0])
    rel = drift / max(abs(float(energy[0])), 1e-12)
    report = {"robot": model.name, "duration": float(t[-1]), "dt": args.dt, "integrator": args.integrator,
              "damping": args.damping, "steps": len(t) - 1, "q_final": qs[-1].tolist(),
              "v_final": vs[-1].tolist(), "energy_initial": float(energy[0]),
              "energy_final": float(energy[-1]), "energy_drift": drift, "energy_drift_relative": rel,
              "limit_warnings": warnings}
    text = (f"{model.name}: {len(t) - 1} {args.integrator} steps of {args.dt} s\n"
            f"  q_final = {np.array2string(qs[-1], precision=4)}\n"
            f"  energy {energy[0]:.6f} -> {energy[-1]:.6f} J (drift {drift:+.3e} J, {rel:+.3e} relative)")
    text += "".join(f"\n  warning: {w}" for w in warnings)
    emit(args, report, text)
    return 0


def cmd_demo(args) -> int:
    """The main job on a built-in robot: load it, FK of its frames, a passive RK4 simulation
    (``--full``: the learning loop of :func:`caliper_jax.cli.learn.full_demo`)."""
    if args.full:
        from caliper_jax.cli.learn import FULL_DEMO, full_demo

        if args.robot is not None and Path(str(args.robot)).stem != "gripper_arm":
            raise CaliperError(f"demo --full runs the zoo task {FULL_DEMO['task']} on gripper_arm, not "
                               f"{args.robot!r} (no zoo task uses it); run 'caliper demo --full' without a "
                               f"robot, or 'caliper demo {args.robot}' for its FK and simulation")

        return full_demo(args)
    if args.robot is None:
        args.robot = "pendulum2"
    from caliper_jax import api

    steps = _check_sim_flags(args.duration, 1e-3, "rk4")
    model = load_robot(args)
    memory_budget(3 * 8 * (steps + 1) * (model.nq + model.nv + 2), "--duration (the stored trajectory)")
    if args.q0 is None and model.name == "pendulum2":
        args.q0 = "1.0 0.5"
    q0 = configuration(model, args.q0, "--q0")
    warnings = limit_warnings(model, q0, "--q0")
    require_inertia(model, "the demo's passive simulation")
    frames = api.fk_dict(model, q0)
    t, qs, _, energy = api.simulate_passive(model, q0, None, args.duration, 1e-3, "rk4")
    require_finite(f"demo {model.name}", hint="the simulation diverged", q=qs, energy=energy)
    drift = float(energy[-1] - energy[0])
    report = {"robot": model.name, "nq": model.nq, "q0": q0.tolist(), "frames": frames,
              "sim": {"integrator": "rk4", "dt": 1e-3, "duration": float(t[-1]),
                      "q_final": qs[-1].tolist(), "energy_initial": float(energy[0]),
                      "energy_drift": drift}, "limit_warnings": warnings}
    lines = [f"{model.name}: nq={model.nq}, {model.nframe} frames, q0 = {np.array2string(q0, precision=3)}",
             "forward kinematics (frame origins in the world, m):"]
    for name, T in frames.items():
        origin = np.array2string(np.asarray(T)[:3, 3], precision=4, suppress_small=True)
        lines.append(f"  {name:<12} {origin}")
    lines.append(f"passive RK4 simulation, {len(t) - 1} steps of 1 ms: q_final = "
                 f"{np.array2string(qs[-1], precision=4)}")
    lines.append(f"energy {energy[0]:.6f} J -> {energy[-1]:.6f} J, drift {drift:+.2e} J")
    lines += [f"warning: {w}" for w in warnings]
    emit(args, report, "\n".join(lines))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="the built-in example: FK and a short simulation with energy drift")
    p.add_argument("robot", nargs="?", default=None, help="robot (default pendulum2; with --full: "
                                                          "gripper_arm, the robot of the lift-cube task)")
    p.add_argument("--q0", default=None, help="initial joint positions (default: 1.0 0.5 for pendulum2)")
    p.add_argument("--duration", type=float, default=2.0, help="seconds of simulation (default 2)")
    p.add_argument("--full", action="store_true",
                   help="the whole loop on lift-cube instead: asset doctor, scripted demos, dataset doctor, "
                        "train a policy, closed-loop eval (a few minutes)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="with --full: keep the dataset and checkpoints here (default: a temporary folder)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_demo, floating=False, no_mimic=False)

    p = sub.add_parser("info", help="versions, backend and the robot registry")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("load", help="load a robot and summarise its model")
    robot_args(p)
    p.set_defaults(func=cmd_load)

    p = sub.add_parser("fk", help="forward kinematics of every frame")
    robot_args(p)
    p.add_argument("--joints", help="joint positions (nq numbers, comma/space separated; default neutral)")
    p.add_argument("--frame", help="report only this frame")
    p.set_defaults(func=cmd_fk)

    p = sub.add_parser("sim", help="passive simulation from a configuration; reports energy drift")
    robot_args(p)
    p.add_argument("--q0", help="initial joint positions (default neutral)")
    p.add_argument("--duration", type=float, default=1.0, help="seconds (default 1)")
    p.add_argument("--dt", type=float, default=1e-3, help="time step (default 1e-3)")
    p.add_argument("--damping", type=float, default=None, help="override every joint's damping")
    p.add_argument("--integrator", default="rk4", help="euler | rk4 | implicit (default rk4)")
    p.add_argument("--contact", action="store_true", help="simulate with contacts in MuJoCo")
    from caliper_jax.cli.contact import add_contact_flags

    add_contact_flags(p)
    p.set_defaults(func=cmd_sim)

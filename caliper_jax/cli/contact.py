"""Subcommands: ``caliper mjcf ROBOT``, ``caliper contact-sim ROBOT``, ``caliper contact-lint ROBOT``.

Thin faces over :mod:`mjx_backend` (no maths here). Scene flags are shared: ``--ground Z``,
``--prop KIND:SIZES@X,Y,Z[:MASS[:MATERIAL]]`` (repeatable; SIZES: box half extents hx,hy,hz,
sphere radius, cylinder radius,length) or a task-style JSON object, ``--material NAME``,
``--actuators``. :func:`add_contact_flags` and :func:`run_contact_sim` let another command
(``caliper sim ROBOT --contact``) reuse them.
"""
from __future__ import annotations

import argparse
import json

import numpy as np

from caliper_jax.cli import runtime
from caliper_jax.cli.common import (
    budget,
    emit,
    limit_warnings,
    parse_configuration,
    positive,
    require_finite,
    steps_of,
)
from caliper_jax.errors import CaliperError


def parse_prop(text: str, index: int = 0):
    """A ``--prop`` value -> Prop; every error names the flag."""
    try:
        return _parse_prop(text, index)
    except CaliperError as exc:
        raise CaliperError(str(exc) if str(exc).startswith("--prop") else f"--prop {text!r}: {exc}") from None


def _parse_prop(text: str, index: int):
    from mjx_backend.scene import Prop

    text = text.strip()
    if text.startswith("{"):
        try:
            spec = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CaliperError(f"--prop: not valid JSON ({exc.msg})") from None
        return Prop.from_dict({"name": f"prop{index}", **spec})
    try:
        head, rest = text.split("@", 1)
        kind, sizes = head.split(":", 1)
        parts = rest.split(":")
        size = [float(x) for x in sizes.split(",")]
        pos = [float(x) for x in parts[0].split(",")]
        mass = float(parts[1]) if len(parts) > 1 and parts[1] else 0.1
        material = parts[2] if len(parts) > 2 and parts[2] else None
    except ValueError:
        raise CaliperError(f"--prop {text!r}: expected KIND:SIZES@X,Y,Z[:MASS[:MATERIAL]], "
                           "e.g. box:0.05,0.05,0.05@0.3,0,0.05:0.1:wood") from None
    name = f"prop{index}"
    if kind == "cylinder":
        if len(size) != 2:
            raise CaliperError(f"--prop {text!r}: a cylinder takes radius,length")
        return Prop.cylinder(name, size[0], size[1], pos, mass=mass, material=material)
    return Prop(name, kind, tuple(size), tuple(pos), mass=mass, material=material)


def add_contact_flags(p: argparse.ArgumentParser, actuators_default: str = "motor") -> None:
    """The scene flags alone (for another command, e.g. ``caliper sim --contact``)."""
    p.add_argument("--ground", type=float, default=None, metavar="Z", help="add a ground plane at height Z")
    p.add_argument("--prop", action="append", default=[], metavar="SPEC",
                   help="a prop: KIND:SIZES@X,Y,Z[:MASS[:MATERIAL]] or a JSON object (repeatable)")
    p.add_argument("--material", default=None,
                   help="contact material of the robot and ground: rigid|steel|rubber|foam|wood")
    p.add_argument("--actuators", default=actuators_default,
                   choices=("motor", "position", "velocity", "none"))
    p.add_argument("--no-contact", action="store_true", help="disable contacts")


def add_scene_arguments(p: argparse.ArgumentParser, actuators_default: str = "motor") -> None:
    p.add_argument("robot", help="path to a .urdf / MJCF file, or a registry name (caliper info)")
    add_contact_flags(p, actuators_default)
    p.add_argument("--timestep", type=float, default=None, help="MuJoCo timestep (default 0.002)")
    p.add_argument("--integrator", default=None, help="euler | rk4 | implicit | implicitfast")
    p.add_argument("--json", action="store_true", help="machine-readable report")


def _timestep(args) -> float:
    """The MuJoCo step the flags set (``--timestep``, else a command's ``--dt``, else MuJoCo's
    default), checked > 0 and finite with the flag named."""
    from mjx_backend.options import SimOptions

    if getattr(args, "timestep", None) is not None:
        return positive(args.timestep, "--timestep")
    if getattr(args, "dt", None) is not None:
        return positive(args.dt, "--dt")
    return SimOptions().timestep


def _step_budget(args, seconds: float, what: str) -> None:
    """MuJoCo steps of ``seconds`` of simulation at the step the flags set, before any work."""
    h = _timestep(args)
    flag = "--dt" if getattr(args, "timestep", None) is None and getattr(args, "dt", None) is not None \
        else "--timestep"
    budget(steps_of(seconds, h), f"{what} at {flag} {h:g} s (MuJoCo steps)")


def scene_kwargs(args) -> dict:
    """Scene keywords from parsed flags; a command's ``--dt`` stands in for ``--timestep``."""
    opts = {}
    if getattr(args, "timestep", None) is not None or getattr(args, "dt", None) is not None:
        opts["timestep"] = _timestep(args)
    if getattr(args, "integrator", None) is not None:
        opts["integrator"] = args.integrator
    if getattr(args, "no_contact", False):
        opts["contact"] = False
    ground = getattr(args, "ground", None)
    if ground is not None and not np.isfinite(ground):
        raise CaliperError("--ground must be a finite height")
    props = getattr(args, "prop", None) or ()
    budget(len(props), "--prop (props in the scene)", "batch")
    return dict(actuators=getattr(args, "actuators", "motor"), ground=ground,
                material=getattr(args, "material", None), options=opts,
                props=[parse_prop(t, i) for i, t in enumerate(props)])


def _model(args):
    import jax

    from caliper_jax.loading import load

    jax.config.update("jax_enable_x64", True)
    return load(args.robot)


def cmd_mjcf(args) -> int:
    from mjx_backend.mjcf import model_to_mjcf

    if args.out:
        from caliper_jax.cli.motion import _out_dir

        _out_dir(args.out)
    model = _model(args)
    doc = model_to_mjcf(model, **scene_kwargs(args))
    if args.check:
        from mjx_backend.layout import compile_xml

        compile_xml(doc.xml, f"MJCF generated for {model.name!r}")
    if args.out:
        with runtime.writing(), runtime.partial_output(args.out):   # an interrupt: whole file or none
            doc.save(args.out)
    report = {"robot": model.name, "out": args.out, "actuators": doc.actuators,
              "actuated": list(doc.actuated),
              "bodies": list(doc.body_names), "props": [p.name for p in doc.props], "notes": list(doc.notes),
              "compiled": bool(args.check)}
    if not args.out and not args.json:
        print(doc.xml)
        return 0
    text = f"wrote {args.out} ({len(doc.xml)} bytes, {len(doc.body_names)} bodies)" if args.out else doc.xml
    text += "".join(f"\n  note: {n}" for n in doc.notes)
    if not args.out:
        report["xml"] = doc.xml
    emit(args, report, text)
    return 0


def run_contact_sim(args) -> tuple[dict, str]:
    """Hold the start pose (servos) or apply zero torque for ``--duration`` on the CPU backend."""
    from mjx_backend.cpu import MujocoBackend

    positive(args.duration, "--duration")
    h = _timestep(args)
    if h > args.duration:
        raise CaliperError(f"the MuJoCo step ({h:g} s) must not exceed --duration ({args.duration:g} s)")
    _step_budget(args, args.duration, f"--duration {args.duration:g} s")
    model = _model(args)
    q0 = getattr(args, "q0", None)
    q0 = None if q0 is None else parse_configuration(model, q0, "--q0")
    warnings = [] if q0 is None else limit_warnings(model, q0, "--q0")
    with MujocoBackend(model, 1, q0=q0, rollout=False, **scene_kwargs(args)) as b:
        b.enable()
        s = b.step(b.timestep * max(1, int(round(args.duration / b.timestep))))
        contacts = b.contacts()
        props = {k: v[0].tolist() for k, v in b.prop_poses().items()}
    require_finite(f"contact-sim {model.name}", q=s.q, v=s.v,
                   hint="the MuJoCo simulation diverged: try a smaller --timestep")
    report = {"robot": model.name, "duration": s.time, "ticks": s.tick, "q_final": s.q[0].tolist(),
              "v_final": s.v[0].tolist(), "effort": s.effort[0].tolist(), "contacts": len(contacts),
              "props": props,
              "contact_list": [{"geom1": c.geom1, "geom2": c.geom2, "depth": c.depth,
                                "normal_force": c.normal_force} for c in contacts],
              "limit_warnings": warnings}
    actuators = getattr(args, "actuators", "motor")
    lines = [f"{model.name}: {s.tick} MuJoCo steps ({s.time:.3f} s), actuators={actuators}",
             f"  q_final = {np.array2string(s.q[0], precision=4)}", f"  contacts: {len(contacts)}"]
    lines += [f"  prop {k}: pos = {np.array2string(np.array(v[:3]), precision=4)}" for k, v in props.items()]
    lines += [f"  warning: {w}" for w in warnings]
    return report, "\n".join(lines)


def cmd_contact_sim(args) -> int:

    report, text = run_contact_sim(args)
    emit(args, report, text)
    return 0


def cmd_contact_lint(args) -> int:
    from mjx_backend.lint import OBSERVE_S, SETTLE_S, contact_lint

    _step_budget(args, SETTLE_S + OBSERVE_S, f"the {SETTLE_S + OBSERVE_S:g} s settle rollout")
    if _timestep(args) > OBSERVE_S / 10:
        raise CaliperError(f"--timestep {_timestep(args):g} s leaves too few samples in the lint's "
                           f"{OBSERVE_S:g} s observe window (at most {OBSERVE_S / 10:g} s)")
    model = _model(args)
    q0 = None if args.q0 is None else parse_configuration(model, args.q0, "--q0")
    warnings = [] if q0 is None else limit_warnings(model, q0, "--q0")
    findings = contact_lint(model, q0=q0, **scene_kwargs(args))
    report = {"robot": model.name, "findings": [f.as_dict() for f in findings], "limit_warnings": warnings}
    lines = [f"{model.name}: contact lint (settle 1.0 s, observe 0.5 s): "
             f"{len(findings)} finding{'s' if len(findings) != 1 else ''}"]
    for f in findings:
        lines += [f"  {f.code} {f.severity}: {f.message}", f"       fix: {f.fix}"]
    lines += [f"  warning: {w}" for w in warnings]
    emit(args, report, "\n".join(lines))
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("mjcf", help="print or write the MJCF generated for a robot scene")
    add_scene_arguments(p)
    p.add_argument("--out", metavar="FILE", help="write the MJCF here instead of printing it")
    p.add_argument("--check", action="store_true", help="also compile it with MuJoCo")
    p.set_defaults(func=cmd_mjcf)

    p = subparsers.add_parser("contact-sim", help="contact simulation with MuJoCo (CPU): ground, props")
    add_scene_arguments(p, actuators_default="position")
    p.add_argument("--q0", help="initial joint positions (default: the model's neutral pose)")
    p.add_argument("--duration", type=float, default=1.0, help="seconds (default 1)")
    p.set_defaults(func=cmd_contact_sim)

    p = subparsers.add_parser("contact-lint", help="contact-stability lint C001-C003 over a settle rollout")
    add_scene_arguments(p, actuators_default="position")
    p.add_argument("--q0", help="initial joint positions (default: the model's neutral pose)")
    p.set_defaults(func=cmd_contact_lint)


__all__ = ["add_contact_flags", "add_scene_arguments", "parse_prop", "register", "run_contact_sim",
           "scene_kwargs"]

"""``caliper identify``: system identification, one face for two engines.

- ``--mode contact`` (default): friction, damping, armature, prop mass and contact solref/solimp
  of a MuJoCo scene (``--task``: a zoo task name or task file, an MJCF ``.xml``, or a built-in
  ``sysid:swing|push|grip`` scene) by Levenberg-Marquardt through chunked MJX rollouts
  (:func:`caliper_jax.sysid.identify`). DATA: an ``.npz`` with ``qpos`` (E, T+1, nq), ``qvel``
  (E, T+1, nv), ``ctrl`` (E, T, nu), one row per MuJoCo timestep, in the scene's coordinates.
- ``--mode inertial``: the contact-free identification of every body's inertial parameters,
  linear in them (:func:`caliper_jax.calibration.identify_dynamics`); ``--robot`` names the robot,
  DATA holds ``q``, ``qd``, ``qdd`` (N, nq/nv) and ``tau`` (N, nv).

Both print the same report: ``parameters`` {name: {value, nominal, ...}}, ``rmse`` {split: {before,
after: {feature: RMSE}}} over a held-out validation split (``--validation``, drawn with
``--seed``), and ``rmse_all_features``.
"""
from __future__ import annotations

import argparse

import numpy as np

from caliper_jax.cli.common import at_least, emit, enable_x64, seed
from caliper_jax.errors import CaliperError


def _scene(task: str):
    """A compiled MjModel from ``--task``."""
    from pathlib import Path

    if task.startswith("sysid:"):
        from caliper_jax.sysid.scenes import scene

        return scene(task.split(":", 1)[1])
    if task.lower().endswith(".xml"):
        import mujoco

        if not Path(task).is_file():
            raise CaliperError(f"--task {task}: no such MJCF file")
        try:
            return mujoco.MjModel.from_xml_path(task)
        except ValueError as exc:
            raise CaliperError(f"--task {task}: MuJoCo cannot load it: {exc}") from None
    from tasks.env import resolve_task

    return resolve_task(task).scene.mj


def _parse_start(text, names) -> np.ndarray | None:
    """``name=value,...`` (a parameter name or kind) or P numbers -> (P,) start values."""
    if not text:
        return None
    parts = [p for p in text.replace(" ", ",").split(",") if p]
    if all("=" not in p for p in parts):
        try:
            vals = np.array([float(p) for p in parts])
        except ValueError:
            raise CaliperError(f"--start: not a list of numbers: {text!r}") from None
        if vals.size != len(names):
            raise CaliperError(f"--start: expected {len(names)} values ({', '.join(names)}), got {vals.size}")
        return vals
    out = {}
    for p in parts:
        k, _, v = p.partition("=")
        try:
            out[k] = float(v)
        except ValueError:
            raise CaliperError(f"--start: {p!r} is not name=number") from None
    return out


def _contact(args) -> int:
    import jax

    from caliper_jax import sysid
    from mjx_backend.versions import import_mjx

    enable_x64()
    import_mjx()        # its note about the missing warp backend goes to stderr: --json stays clean
    if not args.task:
        raise CaliperError("--task is required with --mode contact (a zoo task, an MJCF .xml or sysid:push)")
    mj = _scene(args.task)
    default = "friction" if sysid.params.prop_bodies(mj) else "damping"
    ps = sysid.param_set(mj, args.params or default)
    data = sysid.load_trajectories(args.data, mj)
    start = _parse_start(args.start, ps.names)
    if isinstance(start, dict):
        vals = ps.nominal.copy()
        for k, v in start.items():
            hit = [i for i, p in enumerate(ps.params) if k in (p.name, p.kind)]
            if not hit:
                raise CaliperError(f"--start: {k!r} is not one of the parameters ({', '.join(ps.names)})")
            vals[hit] = v
        start = vals
    chunk = at_least(args.chunk, "--chunk")
    res = sysid.identify(mj, data, ps, start=start, chunk=min(chunk, data.steps), validation=args.validation,
                         key=jax.random.PRNGKey(seed(args.seed)),
                         iterations=at_least(args.iterations, "--iterations", 0),
                         fit=[n.strip() for n in args.fit.split(",") if n.strip()] if args.fit else None)
    report = {"mode": "contact", "task": args.task, "episodes": data.episodes, "steps": data.steps,
              **res.summary()}
    _emit(args, report)
    return 0


def _inertial(args) -> int:
    import jax

    from caliper_jax import calibration
    from caliper_jax.calibration.dynamic import check_samples
    from caliper_jax.cli.ik import load_calibration_data
    from caliper_jax.loading import load

    enable_x64()
    if not args.robot:
        raise CaliperError("--robot is required with --mode inertial")
    model = load(args.robot)
    data = load_calibration_data(args.data)
    missing = [k for k in ("q", "qd", "qdd", "tau") if k not in data]
    if missing:
        raise CaliperError(f"{args.data}: --mode inertial needs field(s) {', '.join(missing)}")
    q, qd, qdd, tau = check_samples(model, data["q"], data["qd"], data["qdd"], data["tau"],
                                    what=str(args.data))
    from caliper_jax.sysid.identify import split_episodes

    tr, va = split_episodes(jax.random.PRNGKey(seed(args.seed)), q.shape[0], args.validation)
    res = calibration.identify_dynamics(model, q[tr], qd[tr], qdd[tr], tau[tr])
    names = [f"tau:{n}" for n in _dof_names(model)]

    def rmse(m_pi, idx):
        r = calibration.torque_residuals(model, m_pi, q[idx], qd[idx], qdd[idx], tau[idx])
        r = np.asarray(r).reshape(len(idx), model.nv)
        return dict(zip(names, np.sqrt(np.mean(r ** 2, axis=0)).tolist(), strict=True))

    split = {"train": tr, "validation": va} if len(va) else {"train": tr}
    table = {s: {"before": rmse(res.nominal, i), "after": rmse(res.parameters, i)} for s, i in split.items()}
    params = {}
    for b, body in enumerate(model.body_names):
        for i, k in enumerate(calibration.PARAM_NAMES):
            params[f"{k}:{body}"] = {"value": float(res.parameters[b, i]),
                                     "nominal": float(res.nominal[b, i]),
                                     "identifiable": bool(res.identifiable[b, i])}
    report = {"mode": "inertial", "robot": model.name, "samples": int(q.shape[0]), "rank": res.rank,
              "parameters": params, "rmse": table,
              "rmse_all_features": {s: {w: float(np.sqrt(np.mean(np.square(list(d[w].values())))))
                                        for w in ("before", "after")} for s, d in table.items()},
              "train_samples": int(len(tr)), "validation_samples": int(len(va))}
    _emit(args, report)
    return 0


def _dof_names(model) -> list:
    from caliper_jax.cli.common import coordinate_names

    names = coordinate_names(model)
    return names if len(names) == model.nv else [f"dof{i}" for i in range(model.nv)]


def _emit(args, report) -> None:
    head = f"{report['mode']} identification"
    if "iterations" in report:
        state = "converged" if report["converged"] else "iteration cap"
        head += f" ({report['iterations']} iterations, {state})"
    lines = [head]
    for split, d in report["rmse_all_features"].items():
        lines.append(f"  {split:<10} state rmse (all features) {d['before']:.4g} -> {d['after']:.4g}"
                     if report["mode"] == "contact" else
                     f"  {split:<10} torque rmse {d['before']:.4g} -> {d['after']:.4g}")
    shown = list(report["parameters"].items())
    for name, p in shown[:40]:
        extra = (f"  [{p['bounds'][0]:.3g}, {p['bounds'][1]:.3g}] start {p['start']:.6g}" if "bounds" in p
                 else ("" if p.get("identifiable", True) else "  (not identifiable)"))
        lines.append(f"  {name:<28} {p['value']:.6g}{extra}")
    if len(shown) > 40:
        lines.append(f"  ... {len(shown) - 40} more (--json)")
    emit(args, report, "\n".join(lines))


def cmd_identify(args) -> int:
    if not 0.0 <= args.validation < 1.0:
        raise CaliperError(f"--validation: need a fraction in [0, 1), got {args.validation}")
    return _inertial(args) if args.mode == "inertial" else _contact(args)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("identify", help="system identification: contact/joint parameters through MJX "
                                        "rollouts, or inertial parameters (--mode inertial)")
    p.add_argument("data", help=".npz trajectories: qpos, qvel, ctrl (contact); q, qd, qdd, tau (inertial)")
    p.add_argument("--mode", choices=("contact", "inertial"), default="contact",
                   help="contact: MJX rollouts (default); inertial: linear inertial identification")
    p.add_argument("--task", help="contact: zoo task name or file, MJCF .xml, or sysid:swing|push|grip")
    p.add_argument("--robot", help="inertial: robot file or registry name")
    p.add_argument("--params", help="contact: kinds or kind:name, comma separated (friction, damping, "
                                    "armature, frictionloss, mass, solref, solimp; default friction, or "
                                    "damping without props)")
    p.add_argument("--start", help="contact: start values, P numbers or name=value (default nominal)")
    p.add_argument("--fit", help="contact: names of the parameters to fit (default all; the others stay at "
                                 "--start)")
    p.add_argument("--chunk", type=int, default=25, help="contact: steps per shooting chunk (default 25)")
    p.add_argument("--iterations", type=int, default=30, help="contact: LM iteration cap (default 30)")
    p.add_argument("--validation", type=float, default=0.25,
                   help="fraction of episodes (samples, inertial) held out (default 0.25)")
    p.add_argument("--seed", type=int, default=0, help="PRNG seed of the train/validation split")
    p.add_argument("--json", action="store_true", help="machine-readable report")
    p.set_defaults(func=cmd_identify)

"""What every command shares: number parsing, robot loading, the robot arguments, report output,
the work budgets and the checks of inputs and results.

Budgets (``caliper_jax.limits``): every flag that sets an amount of work or memory is checked
against a budget *before* any work, with a one-line error naming the flag, the estimate and the
limit; ``CALIPER_MAX_STEPS``, ``CALIPER_MAX_BATCH``, ``CALIPER_MAX_MEMORY_MB``,
``CALIPER_MAX_FILE_MB`` and ``CALIPER_MAX_BODIES`` raise them (README, "Limits").

Configurations given on the command line are checked against the joint limits the same way
everywhere: a command that *evaluates* a configuration (fk, analyze, check, sim, ik --q0) reports
each coordinate outside its limits as a warning (``"limit_warnings"`` in the report, a ``warning:``
line in the text, exit code unchanged); a command that *moves to* one (move, trajopt) refuses it
(exit 2, the joint named with its limits). ``plan`` answers ``out_of_reach`` naming the joint
(its negative result, exit 1); ``report`` is the path lint: the violation is its T001 Error
finding (``--strict`` exits 1). ``control``/``record`` keep their safety gate, which clamps a goal
into the limits and says so.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from caliper_jax import limits
from caliper_jax.errors import CaliperError


def emit(args: argparse.Namespace, report: dict, text: str) -> None:
    """Print ``report`` as JSON when ``--json`` was given, else the human ``text``. A report that
    holds NaN or inf where a number should be is not printed as a success: an error naming it."""
    where = _non_finite(report, "")
    if where is not None:
        raise CaliperError(f"the result {where or 'report'} is not finite (NaN or inf); nothing printed")
    if getattr(args, "json", False):
        print(json.dumps(report, indent=2, sort_keys=False, allow_nan=False))
    else:
        print(text)


def _non_finite(obj, path: str):
    """The path (``frames.tool[2][3]``) of the first NaN/inf float in a report, else None."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            found = _non_finite(v, f"{path}.{k}" if path else str(k))
            if found is not None:
                return found
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            found = _non_finite(v, f"{path}[{i}]")
            if found is not None:
                return found
    elif isinstance(obj, np.ndarray):
        if obj.dtype.kind in "fc" and not np.all(np.isfinite(obj)):
            return path
    elif isinstance(obj, (float, np.floating)) and not math.isfinite(obj):
        return path
    return None


def enable_x64():
    import jax

    jax.config.update("jax_enable_x64", True)


def parse_vector(text: str, n: int, what: str, model_name: str) -> np.ndarray:
    """'0.1,0.2 0.3' -> array of n floats, with a one-line error naming the flag."""
    parts = [p for p in text.replace(",", " ").split() if p]
    try:
        values = np.array([float(p) for p in parts])
    except ValueError:
        raise CaliperError(f"{what}: not a list of numbers: {text!r}") from None
    if values.size != n:
        raise CaliperError(f"{what}: expected {n} values for {model_name!r}, got {values.size}")
    if not np.all(np.isfinite(values)):
        raise CaliperError(f"{what}: non-finite value in {text!r}")
    return values


def load_robot(args):
    from caliper_jax.progress import set_stage

    set_stage(f"loading {args.robot}")
    enable_x64()
    from caliper_jax.loading import load

    model = load(args.robot, floating=True if getattr(args, "floating", False) else None,
                 mimic=not getattr(args, "no_mimic", False))
    set_stage("compiling and running")
    return model


def configuration(model, text, what="--joints"):
    from caliper_jax.configuration import neutral

    if text is None:
        return np.asarray(neutral(model))
    return parse_configuration(model, text, what)


def parse_configuration(model, text: str, flag: str) -> np.ndarray:
    """nq numbers for ``model``; the quaternion (w x y z) of a free or ball joint must be a unit
    quaternion (within 1e-3, then normalised): a zero quaternion is an error naming the joint."""
    q = parse_vector(text, model.nq, flag, model.name)
    for b, name in enumerate(model.body_names):
        kind = model.jnt_type[b]
        if kind not in ("free", "ball") or model.vfull_mimic[model.body_vadr[b]] >= 0:
            continue
        start = model.qfull_src[model.body_qadr[b]] + (3 if kind == "free" else 0)
        quat = q[start:start + 4]
        norm = float(np.linalg.norm(quat))
        if abs(norm - 1.0) > 1e-3:
            raise CaliperError(f"{flag}: joint {name} (q[{start}:{start + 4}]) needs a unit quaternion "
                               f"w x y z, got {' '.join(f'{x:g}' for x in quat)} (norm {norm:.4g})")
        q[start:start + 4] = quat / norm
    return q


def frame_by_name(model, name: str, flag: str = "--frame") -> int:
    """The index of frame ``name``; the error names the flag."""
    try:
        return model.frame_id(name)
    except CaliperError as exc:
        raise type(exc)(f"{flag}: {exc}") from None


def robot_args(p):
    p.add_argument("robot", help="path to a .urdf / MJCF file, or a registry name (caliper info)")
    p.add_argument("--floating", action="store_true", help="add a free-floating base (URDF)")
    p.add_argument("--no-mimic", action="store_true", help="treat mimic joints as independent")
    p.add_argument("--json", action="store_true", help="machine-readable report")


# ---- numbers from flags -----------------------------------------------------------------------

def seed(value, flag: str = "--seed") -> int:
    """A PRNG seed: an integer in [0, 2**32)."""
    if value is None or int(value) != value or not 0 <= value < 2**32:
        raise CaliperError(f"{flag} must be an integer in [0, 2**32), got {value}")
    return int(value)


def positive(value, flag: str, *, allow_zero: bool = False) -> float:
    """A finite number > 0 (>= 0 with ``allow_zero``) or a one-line error naming ``flag``."""
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise CaliperError(f"{flag}: expected a number, got {value!r}") from None
    if not math.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
        kind = "a non-negative" if allow_zero else "a positive"
        raise CaliperError(f"{flag} must be {kind} finite number, got {value}")
    return x


def at_least(value, flag: str, minimum: int = 1) -> int:
    """An integer >= ``minimum`` or a one-line error naming ``flag``."""
    if value is None or int(value) != value or value < minimum:
        raise CaliperError(f"{flag} must be an integer >= {minimum}, got {value}")
    return int(value)


def finite_or_none(value, flag: str):
    """None, or a finite number (a height, an offset)."""
    if value is None:
        return None
    x = float(value)
    if not math.isfinite(x):
        raise CaliperError(f"{flag} must be a finite number, got {value}")
    return x


def budget(amount, what: str, name: str = "steps") -> int:
    """``amount`` of work against the budget ``name`` (see caliper_jax.limits) before any work."""
    return limits.check(name, amount, what)


def memory_budget(nbytes, what: str) -> None:
    limits.check_memory(nbytes, what)


def steps_of(duration: float, dt: float) -> float:
    """How many steps of ``dt`` cover ``duration`` (a float: it may be astronomically large)."""
    return math.ceil(duration / dt) if duration / dt < 1e300 else math.inf


# ---- outputs, checked before any work ----------------------------------------------------------

def _probe_writable(folder: Path, flag: str) -> None:
    """Create and remove a scratch file in ``folder``: the only test that also holds for root (for
    whom ``os.access`` says yes to ``/proc``) and for read-only mounts."""
    import os

    probe = folder / f".caliper-probe-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise CaliperError(f"{flag}: cannot write in {str(folder)!r} ({exc.strerror or exc}); "
                           "nothing was done") from None
    os.close(fd)
    try:
        os.unlink(probe)
    except OSError:
        pass


def output_file(path, flag: str = "--out") -> Path:
    """An output *file* that can be written where it points, checked before any work: its folder
    exists and is writable, the path is not a directory. Returns it as a Path."""
    p = Path(path)
    if p.is_dir():
        raise CaliperError(f"{flag}: {path} is a directory, expected a file name")
    if not p.parent.is_dir():
        raise CaliperError(f"{flag}: the folder {str(p.parent)!r} does not exist")
    _probe_writable(p.parent, flag)
    return p


def output_dir(path, flag: str = "--out", *, empty: bool = True) -> Path:
    """An output *folder* that can be created (or, when it exists, is a folder -- an empty one with
    ``empty``), checked before any work: its nearest existing ancestor is a writable folder."""
    p = Path(path)
    if p.exists() or p.is_symlink():
        if not p.is_dir():
            raise CaliperError(f"{flag}: {path} exists and is not a folder")
        if empty and any(p.iterdir()):
            raise CaliperError(f"{flag}: {path} exists and is not an empty directory")
        _probe_writable(p, flag)
        return p
    top = p.absolute().parent
    while not top.exists() and top != top.parent:
        top = top.parent
    if not top.is_dir():
        raise CaliperError(f"{flag}: {str(top)!r} is not a folder, so {path} cannot be created")
    _probe_writable(top, flag)
    return p


def int_fields_within(config, where: str, name: str = "batch", skip=("seed",)) -> None:
    """Every integer (and list-of-integer) field of dataclass ``config`` against the budget ``name``
    (a chunk size, a layer width, a probe count...), before anything is built from it."""
    import dataclasses

    for f in dataclasses.fields(config):
        if f.name in skip:
            continue
        value = getattr(config, f.name)
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            numeric = isinstance(v, (int, float)) and not isinstance(v, bool)
            if numeric and isinstance(f.default, (int, tuple)):
                limits.check(name, v, f"{where}.{f.name}")


# ---- names of coordinates and the joint limits -------------------------------------------------

_FREE = ("x", "y", "z", "qw", "qx", "qy", "qz")
_BALL = ("qw", "qx", "qy", "qz")


def coordinate_names(model) -> list[str]:
    """One name per position coordinate q[i]: the joint's name; ``base[x]``/``base[qw]`` for the
    coordinates of free and ball joints."""
    names = [f"q[{i}]" for i in range(model.nq)]
    for b, name in enumerate(model.body_names):
        if model.vfull_mimic[model.body_vadr[b]] >= 0:
            continue
        start = model.qfull_src[model.body_qadr[b]]
        kind = model.jnt_type[b]
        parts = _FREE if kind == "free" else _BALL if kind == "ball" else None
        if parts is None:
            names[start] = name
        else:
            for k, c in enumerate(parts):
                names[start + k] = f"{name}[{c}]"
    return names


def limit_problems(model, q, flag: str) -> list[str]:
    """One message per coordinate of ``q`` outside [qpos_lower, qpos_upper], naming the joint."""
    q = np.asarray(q, dtype=np.float64)
    lo = np.asarray(model.qpos_lower, dtype=np.float64)
    hi = np.asarray(model.qpos_upper, dtype=np.float64)
    span = np.where(np.isfinite(hi - lo), hi - lo, 0.0)
    tol = 1e-9 * np.maximum(1.0, span)
    bad = np.flatnonzero((q < lo - tol) | (q > hi + tol))
    names = coordinate_names(model)
    return [f"{flag}: joint {names[i]} = {q[i]:.6g} is outside its limits [{lo[i]:.6g}, {hi[i]:.6g}]"
            for i in bad]


def require_within_limits(model, q, flag: str) -> None:
    """Refuse a configuration to move to that lies outside the joint limits (exit 2)."""
    problems = limit_problems(model, q, flag)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise CaliperError(problems[0] + more)


def limit_warnings(model, q, flag: str) -> list[str]:
    """Warnings for a configuration that is only evaluated (fk, analyze, check, sim)."""
    return limit_problems(model, q, flag)


# ---- inertia and results -------------------------------------------------------------------------

def massless_joints(model) -> list[str]:
    """Joints whose subtree carries no mass and no rotational inertia (M would be singular)."""
    carried = np.asarray(model.body_mass, dtype=np.float64) + np.trace(
        np.asarray(model.body_inertia, dtype=np.float64), axis1=1, axis2=2)
    subtree = carried.copy()
    for i in reversed(range(model.nbody)):
        if model.body_parent[i] >= 0:
            subtree[model.body_parent[i]] += subtree[i]
    return [name for name, m in zip(model.body_names, subtree, strict=True) if not m > 0]


def require_inertia(model, what: str) -> None:
    """Dynamics are undefined when a joint moves nothing with inertia: an error naming the links."""
    light = massless_joints(model)
    if not light:
        return
    bodies = {model.body_id(n) for n in light}
    links = [f for f, b, k in zip(model.frame_names, model.frame_body, model.frame_kind, strict=True)
             if k == "link" and b in bodies]
    raise CaliperError(f"{model.name!r}: {what} needs inertial data: link(s) {', '.join(links) or '?'} carry "
                       f"no mass or inertia, so nothing with inertia moves with joint(s) {', '.join(light)} "
                       "(add <inertial> elements; caliper doctor ROBOT --repair computes them from geometry)")


def require_finite(what: str, hint: str = "", **arrays) -> None:
    """Results are checked before they are printed as a success: NaN/inf is an error naming them."""
    for name, value in arrays.items():
        a = np.asarray(value, dtype=np.float64)
        if not np.all(np.isfinite(a)):
            raise CaliperError(f"{what}: the result {name} is not finite (NaN or inf)"
                               + (f"; {hint}" if hint else ""))


def ray_arg(p, what: str) -> None:
    p.add_argument("--ray", metavar="ADDRESS", default=None,
                   help=f"split the run's {what} over the running Ray cluster at ADDRESS (auto, or HOST:PORT "
                        f"of its head; needs caliper-jax[cluster]); see docs/cluster.md")


def ray_ready(engine: str) -> None:
    """Before a ``--ray`` run: Ray is installed (else the one-line error naming the extra) and the
    engine is the CPU one (the worlds split over the cluster are MuJoCo C worlds)."""
    from learn.cluster import require_ray

    require_ray()
    if engine != "mujoco":
        raise CaliperError("--ray splits the CPU engine's worlds over the cluster; --engine mjx runs on one "
                           "accelerator (drop --ray)")

"""What every command shares: number parsing, robot loading, the robot arguments, report output."""
from __future__ import annotations

import argparse
import json

import numpy as np

from caliper_jax.errors import CaliperError


def emit(args: argparse.Namespace, report: dict, text: str) -> None:
    """Print ``report`` as JSON when ``--json`` was given, else the human ``text``."""
    if getattr(args, "json", False):
        print(json.dumps(report, indent=2, sort_keys=False, allow_nan=False))
    else:
        print(text)


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
    enable_x64()
    from caliper_jax.loading import load

    return load(args.robot, floating=True if getattr(args, "floating", False) else None,
                mimic=not getattr(args, "no_mimic", False))


def configuration(model, text, what="--joints"):
    from caliper_jax.configuration import neutral

    if text is None:
        return np.asarray(neutral(model))
    return parse_vector(text, model.nq, what, model.name)


def robot_args(p):
    p.add_argument("robot", help="path to a .urdf / MJCF file, or a registry name (caliper info)")
    p.add_argument("--floating", action="store_true", help="add a free-floating base (URDF)")
    p.add_argument("--no-mimic", action="store_true", help="treat mimic joints as independent")
    p.add_argument("--json", action="store_true", help="machine-readable report")

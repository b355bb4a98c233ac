"""Robot registry: the fixture robots shipped here, and real robots from an installed
``example-robot-data`` package, by name. Works from a source checkout and an installed wheel
(the URDFs are package data next to this file). NumPy-free and JAX-free.
"""
from __future__ import annotations

import difflib
import importlib.metadata
from functools import lru_cache
from pathlib import Path

from caliper_jax.errors import CaliperError, NotFoundError

FIXTURE_DIR = Path(__file__).resolve().parent
FIXTURES = ("pendulum2", "collide_arm", "gripper_arm", "toy")

# Short names for real robots, as paths under example-robot-data's robots/ folder.
ALIASES = {
    "panda": "panda_description/urdf/panda.urdf",
    "ur3": "ur_description/urdf/ur3_robot.urdf",
    "ur5": "ur_description/urdf/ur5_robot.urdf",
    "ur10": "ur_description/urdf/ur10_robot.urdf",
    "so100": "so_arm_description/urdf/so100.urdf",
    "so101": "so_arm_description/urdf/so101.urdf",
    "kinova": "kinova_description/robots/kinova.urdf",
    "xarm7": "xarm_description/urdf/xarm7.urdf",
    "z1": "z1_description/urdf/z1.urdf",
    "double_pendulum": "double_pendulum_description/urdf/double_pendulum.urdf",
    "solo12": "solo_description/robots/solo12.urdf",
    "anymal_c": "anymal_c_simple_description/urdf/anymal.urdf",
    "go1": "go1_description/urdf/go1.urdf",
    "talos_arm": "talos_data/robots/talos_left_arm.urdf",
}
# Robots whose natural base floats (loaded with a free joint when asked by name).
FLOATING = {"solo12", "anymal_c", "go1"}


@lru_cache(maxsize=1)
def example_robot_data_dir() -> Path | None:
    """The ``robots`` folder of an installed example-robot-data, or None."""
    try:
        dist = importlib.metadata.distribution("example-robot-data")
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in dist.files or ():
        parts = Path(str(f)).parts
        if "example-robot-data" in parts and "robots" in parts:
            path = Path(dist.locate_file(f))
            while path.name != "robots":
                path = path.parent
            return path
    return None


def fixture_path(name: str) -> Path:
    return FIXTURE_DIR / f"{name}.urdf"


def names() -> list[str]:
    """Every name this registry can resolve right now."""
    out = list(FIXTURES)
    if example_robot_data_dir() is not None:
        out += sorted(ALIASES)
    return out


def canonical(name: str) -> str:
    """A registry name matched case-insensitively (``Panda`` -> ``panda``); else ``name`` unchanged."""
    if name in FIXTURES or name in ALIASES:
        return name
    return next((known for known in (*FIXTURES, *ALIASES) if known.lower() == name.lower()), name)


def resolve(name: str) -> Path:
    """A registry name (any case) -> the robot description file."""
    name = canonical(name)
    if name in FIXTURES:
        return fixture_path(name)
    root = example_robot_data_dir()
    if name in ALIASES or root is not None:
        if root is None:
            raise CaliperError(
                f"robot {name!r} comes from example-robot-data, which is not installed "
                "(it is a dependency of caliper-jax: pip install example-robot-data)")
        rel = ALIASES.get(name)
        if rel is not None and (root / rel).is_file():
            return root / rel
        # a bare name only: rglob refuses absolute patterns, and a path is not a registry name
        matches = sorted(root.rglob(f"{name}.urdf")) if name and Path(name).name == name else []
        if matches:
            return matches[0]
    known = names()
    close = difflib.get_close_matches(name.lower(), known, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise NotFoundError(f"unknown robot {name!r}: not a file and not a registry name "
                        f"({hint}known: {', '.join(known)})")


def is_floating(name: str) -> bool:
    return canonical(name) in FLOATING

"""Load a robot by path or registry name into a Model."""
from __future__ import annotations

from pathlib import Path

from caliper_jax.errors import ModelError
from caliper_jax.io import RobotDescription, read_urdf
from caliper_jax.io.mjcf import read_mjcf
from caliper_jax.model import Model, build_model

MJCF_SUFFIXES = (".xml", ".mjcf")


def read_description(robot: str | Path, *, floating: bool | None = None, mimic: bool = True,
                     mesh_roots=()) -> RobotDescription:
    """Path (.urdf, .xml/.mjcf) or registry name -> host-side description.

    ``floating``: add a free joint above a URDF's root link (default: only for registry robots
    that float, e.g. quadrupeds). MJCF files say themselves whether they float.
    """
    import robots

    path = Path(robot)
    if not path.exists():
        if floating is None:
            floating = robots.is_floating(str(robot))
        path = robots.resolve(str(robot))
    if path.is_dir():
        raise ModelError(f"{path}: is a directory, expected a .urdf or MJCF file")
    if path.suffix.lower() in MJCF_SUFFIXES:
        if floating:
            raise ModelError(f"{path}: floating= applies to URDF; declare a <freejoint/> in the MJCF")
        return _within_budget(read_mjcf(path))
    if path.suffix.lower() == ".xacro":
        raise ModelError(f"{path}: expand the xacro first (caliper doctor {path} --repair writes a URDF)")
    return _within_budget(read_urdf(path, floating=bool(floating), mimic=mimic, mesh_roots=mesh_roots))


def _within_budget(desc: RobotDescription) -> RobotDescription:
    """The chain-length budget (``CALIPER_MAX_BODIES``), checked before the model tables are built."""
    from caliper_jax import limits

    limits.check("bodies", len(desc.bodies), f"{desc.source}: moving bodies (joints)")
    return desc


def load(robot: str | Path, *, floating: bool | None = None, mimic: bool = True, dtype=None,
         mesh_roots=()) -> Model:
    """Load a robot (path or registry name) as a Model with leaves of ``dtype``."""
    return build_model(read_description(robot, floating=floating, mimic=mimic, mesh_roots=mesh_roots),
                       dtype=dtype)

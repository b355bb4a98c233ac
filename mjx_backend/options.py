"""Simulation options, with MuJoCo's own defaults, validated on the host.

They land in the generated MJCF (``<option>``, ``<flag>``, ``<size>``), so the CPU and the MJX
backends read one compiled model and cannot disagree about them. ``mjx_impl`` only concerns the
MJX backend (None: MJX picks, "jax" on a CPU).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

from caliper_jax.errors import CaliperError

INTEGRATORS = ("euler", "rk4", "implicit", "implicitfast")
SOLVERS = ("pgs", "cg", "newton")
CONES = ("pyramidal", "elliptic")
JACOBIANS = ("dense", "sparse", "auto")
MJX_IMPLS = ("jax", "warp", "cpp")
_MJCF_NAMES = {"euler": "Euler", "rk4": "RK4", "pgs": "PGS", "cg": "CG", "newton": "Newton"}


@dataclass(frozen=True)
class SimOptions:
    timestep: float = 0.002
    integrator: str = "euler"
    solver: str = "newton"
    cone: str = "pyramidal"
    jacobian: str = "auto"
    iterations: int = 100
    ls_iterations: int = 50
    tolerance: float = 1e-8
    ls_tolerance: float = 0.01
    impratio: float = 1.0
    contact: bool = True            # False: <flag contact="disable"/>
    nconmax: int | None = None      # contact capacity (MuJoCo <size>; MJX warp naconmax per world)
    njmax: int | None = None        # constraint-row capacity
    mjx_impl: str | None = None

    def __post_init__(self):
        for name, allowed in (("integrator", INTEGRATORS), ("solver", SOLVERS), ("cone", CONES),
                              ("jacobian", JACOBIANS)):
            value = getattr(self, name)
            if value not in allowed:
                raise CaliperError(f"option {name}={value!r}: expected one of {', '.join(allowed)}")
        if self.mjx_impl is not None and self.mjx_impl not in MJX_IMPLS:
            raise CaliperError(f"option mjx_impl={self.mjx_impl!r}: expected one of {', '.join(MJX_IMPLS)}")
        for name in ("timestep", "tolerance", "ls_tolerance", "impratio"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value)) or value < 0 or (
                    name in ("timestep", "impratio") and value == 0):
                raise CaliperError(f"option {name}={value!r}: expected a positive finite number")
        for name in ("iterations", "ls_iterations"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise CaliperError(f"option {name}={value!r}: expected an integer >= 1")
        for name in ("nconmax", "njmax"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise CaliperError(f"option {name}={value!r}: expected None or an integer >= 1")

    def replace(self, **changes) -> "SimOptions":
        return replace(self, **changes)

    def option_attributes(self) -> dict:
        """Attributes of the MJCF ``<option>`` element."""
        return {
            "timestep": repr(float(self.timestep)),
            "integrator": _MJCF_NAMES.get(self.integrator, self.integrator),
            "solver": _MJCF_NAMES[self.solver], "cone": self.cone, "jacobian": self.jacobian,
            "iterations": str(self.iterations), "ls_iterations": str(self.ls_iterations),
            "tolerance": repr(float(self.tolerance)), "ls_tolerance": repr(float(self.ls_tolerance)),
            "impratio": repr(float(self.impratio)),
        }


def as_options(options=None, **overrides) -> SimOptions:
    """SimOptions from None, a SimOptions or a mapping, with keyword overrides."""
    if options is None:
        options = SimOptions()
    elif isinstance(options, dict):
        known = {f.name for f in fields(SimOptions)}
        unknown = set(options) - known
        if unknown:
            raise CaliperError(f"unknown simulation option(s): {', '.join(sorted(unknown))}")
        options = SimOptions(**options)
    elif not isinstance(options, SimOptions):
        raise CaliperError(f"options must be a SimOptions or a dict, got {type(options).__name__}")
    return options.replace(**overrides) if overrides else options


__all__ = ["SimOptions", "as_options", "INTEGRATORS", "SOLVERS", "CONES", "JACOBIANS", "MJX_IMPLS"]

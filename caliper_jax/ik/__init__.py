"""Inverse kinematics and singularity analysis.

``numerical``  damped least squares / Levenberg-Marquardt IK, batched, jittable, with restarts,
               joint locking and hard limits (pure JAX, one target per call).
``analytic``   closed-form 6R IK for UR-type arms (all 8 branches).
``singularity`` singular values, manipulability, condition number, ellipsoid, nullspace, escape
               direction of a frame Jacobian.
``poses``      the one pose layout (4x4 row-major T_world_frame) and its validation.
``implicit``   implicit-function derivatives of a converged solve (``solve_diff``: jax.grad through IK).
``api``        NumPy-in/out faces: ``ik``, ``ik_position``, ``ik_sensitivity``, ``analytic_ik``, ``analyze``.

The package itself is callable: ``caliper_jax.ik(model, T, ...)`` is ``caliper_jax.ik.ik(model, T,
...)``. ``caliper_jax`` exports ``ik`` as this package (not the bare function), so ``cj.ik(...)``,
``cj.ik.analyze(...)``, ``from caliper_jax import ik`` and ``import caliper_jax.ik`` name one object
whatever the import order (docs/stability.md).
"""
import sys as _sys
import types as _types

from caliper_jax.ik.api import (
    AnalyticSolution,
    IKSolution,
    analytic_ik,
    analyze,
    default_frame,
    default_seed,
    ik,
    ik_position,
    ik_sensitivity,
)
from caliper_jax.ik.implicit import solve_diff
from caliper_jax.ik.numerical import IKOptions, IKResult, solve, solve_batch, solve_compacting
from caliper_jax.ik.poses import LAYOUT, as_poses, parse_pose_text

__all__ = [
    "AnalyticSolution", "IKSolution", "analytic_ik", "analyze", "default_frame", "default_seed", "ik",
    "ik_position", "ik_sensitivity", "IKOptions", "IKResult", "solve", "solve_batch",
    "solve_compacting", "solve_diff", "LAYOUT", "as_poses", "parse_pose_text",
]


class _CallableModule(_types.ModuleType):
    """The module type of ``caliper_jax.ik``: calling the package calls :func:`ik`."""

    def __call__(self, *args, **kwargs):
        return ik(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallableModule

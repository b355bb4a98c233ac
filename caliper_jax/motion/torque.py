"""Torque limits for TOPP-RA, from the rigid-body dynamics along a path q(s).

With qd = q' sd and qdd = q' sdd + q'' sd^2 the inverse dynamics is linear in (sdd, sd^2):

    tau = M(q) q' sdd + (M(q) q'' + C(q, q') q') sd^2 + g(q),

so ``|tau_i| <= effort_i`` is one TOPP-RA row per dof (``reachability.PathConstraints``). The
coefficients come from RNEA without forming M or C: with gravity switched off,
``a = rnea(q, 0, q')`` and ``b = rnea(q, q', q'')`` (the Coriolis term is quadratic in the
velocity, so it scales with sd^2 exactly); ``c = g(q)`` is RNEA at rest with gravity. All
vmapped over the grid. Joints without an effort limit (inf) get rows that never bind.

Like every TOPP-RA row these hold at the grid points (collocation); ``dense_torques`` evaluates
the torques between them for checking.
"""
from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax import dynamics
from caliper_jax.errors import CaliperError
from caliper_jax.model import Model
from caliper_jax.motion.limits import MotionLimits
from caliper_jax.motion.reachability import (
    PathConstraints,
    ToppRAResult,
    interpolate_constraints,
    joint_limit_constraints,
    joint_rows,
    stack_constraints,
    topp_ra,
    topp_ra_spline,
)
from caliper_jax.motion.spline import CubicSpline, PathSamples, cubic_spline, spline_eval

Array = jnp.ndarray


def torque_coefficients(model: Model, q, qs, qss, gravity=None):
    """(a, b, c) (nv,) with tau = a sdd + b sd^2 + c at one path point (q, q', q''): three RNEA
    evaluations (gravity off: (0, q'), (q', q''); gravity on: (0, 0)) as one vmapped call, so
    the compiled program holds one RNEA."""
    g = model.gravity if gravity is None else jnp.asarray(gravity, model.dtype)
    zero = jnp.zeros_like(qs)
    v = jnp.stack([zero, qs, zero])
    acc = jnp.stack([qs, qss, zero])
    grav = jnp.stack([jnp.zeros_like(g), jnp.zeros_like(g), g])
    a, b, c = jax.vmap(lambda v_, a_, g_: dynamics.rnea(model, q, v_, a_, gravity=g_))(v, acc, grav)
    return a, b, c


def torque_constraints(model: Model, path: PathSamples, effort=None, gravity=None) -> PathConstraints:
    """``-effort <= tau <= effort`` rows at every sample of ``path`` (q, q', q'' of shape
    (N + 1, nv)); ``effort`` (nv,) defaults to ``model.dof_effort_limit``."""
    effort = model.dof_effort_limit if effort is None else effort
    a, b, c = jax.vmap(lambda q, qs, qss: torque_coefficients(model, q, qs, qss, gravity))(
        path.q, path.qs, path.qss)
    eff = jnp.broadcast_to(jnp.asarray(effort, a.dtype), a.shape)
    return PathConstraints(a, b, c, -eff, eff)


def topp_ra_torque(model: Model, spline: CubicSpline, limits, n_grid: int, effort=None, gravity=None,
                   interpolate: bool = True) -> tuple[ToppRAResult, PathSamples]:
    """TOPP-RA over ``n_grid`` uniform intervals of ``spline`` with joint velocity, acceleration
    and torque limits (``n_grid`` static). The torque rows use first-order interpolation
    (``reachability.interpolate_constraints``) unless ``interpolate=False`` (collocation):
    bang-bang torque profiles switch inside intervals, and collocated rows then overshoot the
    effort between grid points (measured on 100 intervals: 16% on pendulum2, 2.9x on a panda
    path; interpolated: 0.008% and 0.44%). Pure: jit / vmap at the caller."""
    def extra(path):
        rows = torque_constraints(model, path, effort, gravity)
        return interpolate_constraints(path.s, rows) if interpolate else rows

    return topp_ra_spline(spline, limits, n_grid, extra=extra)


def path_torques(model: Model, path: PathSamples, result: ToppRAResult, gravity=None):
    """RNEA torques (N + 1, nv) at the grid points of a TOPP-RA result (the interval's sdd)."""
    _, q, qd, qdd = joint_rows(path, result)
    return jax.vmap(lambda a, b, c: dynamics.rnea(model, a, b, c, gravity=gravity))(q, qd, qdd)


def refine_grid(gridpoints, per_interval: int):
    """(s, interval) with ``per_interval`` evenly spaced points in each grid interval, the grid
    points included (every ``per_interval``-th), and the end point (interval N - 1)."""
    s_grid = jnp.asarray(gridpoints)
    n = s_grid.shape[0] - 1
    frac = jnp.arange(per_interval, dtype=s_grid.dtype) / per_interval
    ds = s_grid[1:] - s_grid[:-1]
    s = jnp.concatenate([(s_grid[:-1, None] + ds[:, None] * frac).reshape(-1), s_grid[-1:]])
    idx = jnp.concatenate([jnp.repeat(jnp.arange(n), per_interval), jnp.array([n - 1])])
    return s, idx


def state_between(result: ToppRAResult, s, idx):
    """(sd^2, sdd) at parameters ``s`` inside intervals ``idx`` of a TOPP-RA result: the solver's
    own model of the motion (sdd constant per interval, sd^2 linear in s)."""
    x = result.sd[:-1][idx] ** 2 + 2.0 * (s - result.s[idx]) * result.sdd[idx]
    return jnp.maximum(x, 0.0), result.sdd[idx]


def dense_torques(model: Model, spline: CubicSpline, result: ToppRAResult, per_interval: int = 8,
                  gravity=None):
    """(s (N * per_interval + 1,), tau (..., nv)): RNEA torques between the grid points too, with
    the TOPP-RA state inside each interval (``state_between``). ``per_interval`` static."""
    s, idx = refine_grid(result.s, per_interval)
    x, sdd = state_between(result, s, idx)
    path = spline_eval(spline, s)
    sd = jnp.sqrt(x)[:, None]
    qd = path.qs * sd
    qdd = path.qs * sdd[:, None] + path.qss * sd * sd
    tau = jax.vmap(lambda a, b, c: dynamics.rnea(model, a, b, c, gravity=gravity))(path.q, qd, qdd)
    return s, tau


# ---- NumPy face ----------------------------------------------------------------------------------

class TorqueTopp(NamedTuple):
    """Rows at the grid points (NumPy): ``times``, ``s``, ``sd``, ``q``, ``qd``, ``qdd``, ``tau``
    (RNEA there); ``duration``, ``feasible``, ``fail_index`` (-1 when feasible), the ``effort``
    used; with ``dense > 0`` also ``dense_s`` and ``dense_tau``, the torques between the grid
    points (``dense_torques``), else empty arrays."""

    times: np.ndarray
    s: np.ndarray
    sd: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray
    duration: float
    feasible: bool
    fail_index: int
    effort: np.ndarray
    dense_s: np.ndarray
    dense_tau: np.ndarray


@lru_cache(maxsize=None)
def _topp_fn(n_grid: int, bc: str, dense: int):
    """One compiled program holding a single (vmapped) RNEA: the torque coefficients are taken at
    the refined points, whose every ``dense``-th is a grid point (the TOPP-RA rows); the torques
    at every point are then tau = a sdd + b sd^2 + c with the solver's state there."""
    per = max(dense, 1)

    def run(model, waypoints, vmax, amax, effort):
        spline = cubic_spline(waypoints, bc=bc)
        grid = jnp.linspace(spline.knots[0], spline.knots[-1], n_grid + 1)
        s, idx = refine_grid(grid, per)
        fine = spline_eval(spline, s)
        coef = torque_constraints(model, fine, effort)
        on_grid = lambda z: z[::per]
        path = PathSamples(grid, *(on_grid(z) for z in fine[1:]))
        rows = interpolate_constraints(grid, PathConstraints(*(on_grid(z) for z in coef)))
        lim = MotionLimits(None, None, vmax, amax, None)
        res = topp_ra(grid, stack_constraints(joint_limit_constraints(path, lim), rows))
        x, sdd = state_between(res, s, idx)
        tau = coef.a * sdd[:, None] + coef.b * x[:, None] + coef.c
        return res, joint_rows(path, res), on_grid(tau), (s, tau)

    return jax.jit(run)


def topp_torque(model: Model, waypoints, *, limits: MotionLimits | None = None, effort=None,
                n_grid: int = 100, bc: str = "natural", dense: int = 0) -> TorqueTopp:
    """Time-optimal timing of the cubic spline through ``waypoints`` (K, nq) under joint velocity,
    acceleration and torque limits (``effort`` (nv,), default the model's; ``inf`` for none).
    ``dense`` > 0 also evaluates the torques at that many points per grid interval."""
    from caliper_jax.ik.api import jit_model

    wp = np.asarray(waypoints, dtype=np.float64)
    if wp.ndim != 2 or wp.shape[0] < 2 or wp.shape[1] != model.nq or not np.all(np.isfinite(wp)):
        raise CaliperError(f"waypoints: expected finite (K >= 2, {model.nq}) for {model.name!r}, got shape "
                           f"{wp.shape}")
    if model.nq != model.nv:
        raise CaliperError(f"topp_torque needs nq == nv; {model.name!r} has nq={model.nq}, nv={model.nv}")
    for name, value, low in (("n_grid", n_grid, 2), ("dense", dense, 0)):
        if not (isinstance(value, int) and value >= low):
            raise CaliperError(f"{name} must be an integer >= {low}, got {value!r}")
    limits = MotionLimits.from_model(model) if limits is None else limits
    eff = np.broadcast_to(np.asarray(model.dof_effort_limit if effort is None else effort, np.float64),
                          (model.nv,))
    if np.any(np.isnan(eff)) or np.any(eff <= 0):
        raise CaliperError(f"effort: every entry must be > 0 (inf for none), got {eff}")
    dtype = model.dtype
    arrays = (jnp.asarray(x, dtype) for x in (wp, limits.vmax, limits.amax, eff))
    res, rows, tau, between = _topp_fn(n_grid, bc, dense)(jit_model(model), *arrays)
    t, q, qd, qdd = (np.asarray(x, np.float64) for x in rows)
    s_dense, tau_dense = between if dense else (np.zeros((0,)), np.zeros((0, model.nv)))
    f64 = lambda x: np.asarray(x, np.float64)
    return TorqueTopp(t, f64(res.s), f64(res.sd), q, qd, qdd, f64(tau), float(res.duration),
                      bool(res.feasible), int(res.fail_index), np.array(eff), f64(s_dense), f64(tau_dense))


__all__ = ["torque_coefficients", "torque_constraints", "topp_ra_torque", "path_torques", "refine_grid",
           "state_between", "dense_torques", "TorqueTopp", "topp_torque"]

"""Tool-frame paths for Cartesian moves (MOVE_L, screw, MOVE_C) and their time law.

A :class:`PosePath` maps a parameter u in [0, 1] to a pose of the tool frame. One pytree serves
every kind, so one compiled function samples them all:

* line (MOVE_L): p(u) = p0 + u (p1 - p0), R(u) = R0 exp(u w) with w = log(R0^T R1) (slerp);
* screw: T(u) = T0 exp(u xi) with xi = log6(T0^-1 T1) = [v; w] in the start frame's axes --
  the rotation is the same slerp, the origin follows a helix of length |v|;
* arc (MOVE_C): p(u) = c + a cos(phi u) + b sin(phi u) on the circle through the start, via
  and end positions, swept from the start through the via to the end (phi in (0, 2 pi));
  the orientation is the start-to-end slerp (the via's orientation is not used).

The time law is one rest-to-rest S-curve of u over [0, 1]. Linear limits (v, a, j in m/s...)
divided by the path length and angular limits divided by the rotation angle give limits on u;
the smaller of each pair is used, so neither the tool speed along the path nor the angular
speed exceeds its limit (for a screw the tool origin moves at |v| du/dt exactly).

Builders validate on the host (NumPy) and raise :class:`CaliperError` naming the field: poses
must be finite rigid transforms, zero-length moves and collinear or coincident arc points are
errors. ``path_pose`` and ``cartesian_time_law`` are pure JAX (jit / vmap freely).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.configuration import _se3_exp_translation
from caliper_jax.errors import CaliperError
from caliper_jax.ik.poses import as_poses
from caliper_jax.motion.scurve import SCurve, scurve_min_time
from caliper_jax.spatial import log6, so3_exp, so3_log

Array = jnp.ndarray

#: Moves shorter than this (m) and turning less than this (rad) are zero-length.
MIN_LENGTH = 1e-9
MIN_ANGLE = 1e-9
#: Arc points closer to a line than this (relative |(pv - p0) x (p1 - p0)| / (|pv - p0| |p1 - p0|)).
COLLINEAR_TOL = 1e-9


class CartesianLimits(NamedTuple):
    """Caps of a Cartesian move (defaults from the spec): tool speed, acceleration and jerk along
    the path (m/s, m/s^2, m/s^3) and of the rotation angle (rad/s, rad/s^2, rad/s^3)."""

    linear_velocity: float = 0.25
    linear_acceleration: float = 1.0
    linear_jerk: float = 5.0
    angular_velocity: float = 1.0
    angular_acceleration: float = 5.0
    angular_jerk: float = 25.0

    def checked(self) -> CartesianLimits:
        """The same limits as floats, each > 0 and finite (else a CaliperError naming it)."""
        out = []
        for name, value in zip(self._fields, self, strict=True):
            try:
                x = float(value)
            except (TypeError, ValueError):
                raise CaliperError(f"CartesianLimits.{name}: not a number: {value!r}") from None
            if not (np.isfinite(x) and x > 0.0):
                raise CaliperError(f"CartesianLimits.{name} = {value!r}: must be > 0 and finite")
            out.append(x)
        return CartesianLimits(*out)


class PosePath(NamedTuple):
    """A tool-frame path over u in [0, 1] (see the module notes); every field is an array.

    ``length`` is the path length of the tool origin (m), ``angle`` the rotation angle (rad),
    ``via_u`` the parameter of the via point (arcs; -1 otherwise)."""

    R0: Array          # (3, 3) start orientation
    omega: Array       # (3,) rotation vector R0 -> R1 in the start frame's axes
    p0: Array          # (3,) start position (screw)
    v: Array           # (3,) screw translation part, start frame's axes
    center: Array      # (3,) line: p0; arc: the circle's centre
    cos_axis: Array    # (3,) arc: p0 - c
    sin_axis: Array    # (3,) arc: n x (p0 - c)
    direction: Array   # (3,) line: p1 - p0
    sweep: Array       # () arc angle phi
    screw: Array       # () bool
    length: Array      # ()
    angle: Array       # ()
    via_u: Array       # ()


def path_pose(path: PosePath, u):
    """(R (..., 3, 3), p (..., 3)) of the path at parameter(s) ``u``."""
    u = jnp.asarray(u, path.R0.dtype)
    uu = u[..., None]
    R = path.R0 @ so3_exp(uu * path.omega)
    phi = path.sweep * uu
    p_curve = path.center + path.cos_axis * jnp.cos(phi) + path.sin_axis * jnp.sin(phi) + path.direction * uu
    step = _screw_translation(uu * path.omega, uu * path.v)
    p_screw = path.p0 + step @ path.R0.T
    return R, jnp.where(path.screw, p_screw, p_curve)


def _screw_translation(w, v):
    """V(w) v (the translation of exp([v; w])) for batches of (w, v) (..., 3)."""
    return jax.vmap(_se3_exp_translation)(w.reshape(-1, 3), v.reshape(-1, 3)).reshape(w.shape)


def cartesian_time_law(length, angle, limits: CartesianLimits) -> SCurve:
    """The S-curve of u over [0, 1] (distance 1) whose limits keep the tool's path speed,
    acceleration and jerk within the linear caps and the rotation's within the angular caps."""
    length = jnp.asarray(length)
    angle = jnp.asarray(angle, length.dtype)

    def cap(lin, ang):
        lin_u = jnp.where(length > 0.0, lin / jnp.where(length > 0.0, length, 1.0), jnp.inf)
        ang_u = jnp.where(angle > 0.0, ang / jnp.where(angle > 0.0, angle, 1.0), jnp.inf)
        return jnp.minimum(lin_u, ang_u)

    lim = limits
    return scurve_min_time(jnp.ones_like(length), cap(lim.linear_velocity, lim.angular_velocity),
                           cap(lim.linear_acceleration, lim.angular_acceleration),
                           cap(lim.linear_jerk, lim.angular_jerk))


# ---- host-side builders ---------------------------------------------------------------------------

def _pose(T, what):
    arr = as_poses(T, what)
    if arr.shape != (4, 4):
        raise CaliperError(f"{what}: expected one 4x4 pose (16 numbers, row-major), got shape {arr.shape}")
    return arr


def _point(p, what):
    arr = np.asarray(p, dtype=np.float64)
    if arr.size == 16:
        return _pose(arr, what)[:3, 3]
    if arr.shape != (3,) or not np.all(np.isfinite(arr)):
        raise CaliperError(f"{what}: expected a finite point x, y, z (or a 4x4 pose), got shape {arr.shape}")
    return arr


_so3_log = jax.jit(so3_log)
_log6 = jax.jit(log6)


def _rotation(R0, R1):
    w = np.asarray(_so3_log(jnp.asarray(R0.T @ R1)), dtype=np.float64)
    return w, float(np.linalg.norm(w))


def _make(R0, omega, p0, *, v=None, center=None, cos_axis=None, sin_axis=None, direction=None, sweep=0.0,
          screw=False, length, angle, via_u=-1.0, dtype=None) -> PosePath:
    z = np.zeros(3)
    fields = dict(R0=R0, omega=omega, p0=p0, v=z if v is None else v, center=p0 if center is None else center,
                  cos_axis=z if cos_axis is None else cos_axis, sin_axis=z if sin_axis is None else sin_axis,
                  direction=z if direction is None else direction, sweep=sweep, screw=screw, length=length,
                  angle=angle, via_u=via_u)
    dtype = dtype or jnp.result_type(float)
    return PosePath(**{k: jnp.asarray(val, bool if k == "screw" else dtype) for k, val in fields.items()})


def _check_length(kind, length, angle, ignore_rotation):
    if length < MIN_LENGTH and (ignore_rotation or angle < MIN_ANGLE):
        raise CaliperError(f"{kind}: zero-length move (the target equals the start pose: "
                           f"{length:.3g} m, {angle:.3g} rad)")


def line_path(T_start, T_goal, *, screw: bool = False, ignore_rotation: bool = False, dtype=None) -> PosePath:
    """MOVE_L from ``T_start`` to ``T_goal`` (4x4 row-major T_world_frame): a straight line with
    slerped orientation, or with ``screw`` the constant-twist screw motion T0 exp(u xi).
    ``ignore_rotation`` (position-only moves) keeps R0 and drops the angle from the time law."""
    T0, T1 = _pose(T_start, "start pose"), _pose(T_goal, "target")
    R0, p0, R1, p1 = T0[:3, :3], T0[:3, 3], T1[:3, :3], T1[:3, 3]
    omega, angle = _rotation(R0, R1)
    if ignore_rotation:
        omega, angle = np.zeros(3), 0.0
        screw = False
    if screw:
        xi = np.asarray(_log6(jnp.asarray(R0.T @ R1), jnp.asarray(R0.T @ (p1 - p0))), dtype=np.float64)
        v = xi[:3]
        length = float(np.linalg.norm(v))
        _check_length("MOVE_L (screw)", length, angle, False)
        return _make(R0, omega, p0, v=v, screw=True, length=length, angle=angle, dtype=dtype)
    length = float(np.linalg.norm(p1 - p0))
    _check_length("MOVE_L", length, angle, ignore_rotation)
    return _make(R0, omega, p0, direction=p1 - p0, length=length, angle=angle, dtype=dtype)


def circle_through(p0, pv, p1):
    """(centre, radius, unit normal, sweep, via angle) of the circle through three points, swept
    from p0 through pv to p1 (counter-clockwise about the normal (pv - p0) x (p1 - p0)).
    Raises a CaliperError for coincident or collinear points."""
    a, b = pv - p0, p1 - p0
    la, lb, lc = np.linalg.norm(a), np.linalg.norm(b), np.linalg.norm(p1 - pv)
    if min(la, lb, lc) < MIN_LENGTH:
        which = "start and via" if la < MIN_LENGTH else "start and end" if lb < MIN_LENGTH else "via and end"
        raise CaliperError(f"MOVE_C: the {which} positions coincide (zero-length arc); "
                           "give three distinct points")
    n = np.cross(a, b)
    nn = float(np.linalg.norm(n))
    if nn <= COLLINEAR_TOL * la * lb:
        raise CaliperError("MOVE_C: start, via and end positions are collinear (no unique circle); "
                           "use MOVE_L or move the via point off the line")
    center = p0 + np.cross(la * la * b - lb * lb * a, n) / (2.0 * nn * nn)
    normal = n / nn
    e1 = p0 - center
    radius = float(np.linalg.norm(e1))
    e2 = np.cross(normal, e1)

    def angle_of(p):
        d = p - center
        ang = float(np.arctan2(d @ e2, d @ e1))
        return ang if ang > 0.0 else ang + 2.0 * np.pi

    return center, radius, normal, angle_of(p1), angle_of(pv)


def arc_path(T_start, via, T_goal, *, ignore_rotation: bool = False, dtype=None) -> PosePath:
    """MOVE_C from ``T_start`` through the point ``via`` (x, y, z, or a pose whose position is
    used) to ``T_goal``: the arc of the unique circle through the three positions that passes
    the via; the orientation is slerped from the start to the goal."""
    T0, T1 = _pose(T_start, "start pose"), _pose(T_goal, "target")
    pv = _point(via, "via")
    R0, p0, R1, p1 = T0[:3, :3], T0[:3, 3], T1[:3, :3], T1[:3, 3]
    center, radius, normal, sweep, via_angle = circle_through(p0, pv, p1)
    omega, angle = _rotation(R0, R1)
    if ignore_rotation:
        omega, angle = np.zeros(3), 0.0
    e1 = p0 - center
    return _make(R0, omega, p0, center=center, cos_axis=e1, sin_axis=np.cross(normal, e1), sweep=sweep,
                 length=radius * sweep, angle=angle, via_u=via_angle / sweep, dtype=dtype)


__all__ = ["MIN_LENGTH", "MIN_ANGLE", "COLLINEAR_TOL", "CartesianLimits", "PosePath", "path_pose",
           "cartesian_time_law", "line_path", "circle_through", "arc_path"]

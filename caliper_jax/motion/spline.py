"""Cubic splines through joint waypoints, giving q(s), q'(s), q''(s) for path parameterisation.

The second derivatives at the knots come from one tridiagonal solve (natural: zero second
derivative at both ends; clamped: given first derivatives at both ends, zero by default).
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from jax.lax.linalg import tridiagonal_solve

from caliper_jax.errors import CaliperError
from caliper_jax.motion.scurve import _float

Array = jnp.ndarray


class CubicSpline(NamedTuple):
    """Piecewise cubic: on [knots[i], knots[i+1]], q = sum_k coeffs[i, k] * (s - knots[i])**k.

    ``knots`` (K,), ``coeffs`` (K-1, 4, ndof).
    """

    knots: Array
    coeffs: Array

    @property
    def s_end(self) -> Array:
        return self.knots[-1]


class PathSamples(NamedTuple):
    """A geometric path sampled at parameters ``s``: q, dq/ds, d2q/ds2 of shape s.shape + (ndof,)."""

    s: Array
    q: Array
    qs: Array
    qss: Array


def cubic_spline(waypoints, knots=None, bc: str = "natural", start_slope=None, end_slope=None,
                 valid=None) -> CubicSpline:
    """Interpolating C2 cubic spline through ``waypoints`` (K >= 2, ndof).

    ``knots`` default to ``linspace(0, 1, K)`` and must increase strictly. ``bc`` is "natural" or
    "clamped"; a clamped spline takes ``start_slope``/``end_slope`` (dq/ds, default zero).
    ``valid`` (an integer, may be traced; default K) uses only the first ``valid`` waypoints and
    knots -- the rest is padding, so callers can bucket sizes to bound recompiles; the first
    ``valid - 1`` pieces are exactly those of the unpadded spline, the others are meaningless.
    """
    y = _float(waypoints)
    if y.ndim != 2 or y.shape[0] < 2:
        raise CaliperError(f"cubic_spline: waypoints must have shape (K >= 2, ndof), got {y.shape}")
    if bc not in ("natural", "clamped"):
        raise CaliperError(f"cubic_spline: bc must be 'natural' or 'clamped', got {bc!r}")
    n = y.shape[0]
    s = jnp.linspace(0.0, 1.0, n, dtype=y.dtype) if knots is None else _float(knots).astype(y.dtype)
    if s.shape != (n,):
        raise CaliperError(f"cubic_spline: knots must have shape ({n},), got {s.shape}")
    h = s[1:] - s[:-1]
    slope = (y[1:] - y[:-1]) / h[:, None]
    zero = jnp.zeros((1,), y.dtype)
    one = jnp.ones((1,), y.dtype)
    # Interior rows: h[i-1] M[i-1] + 2 (h[i-1] + h[i]) M[i] + h[i] M[i+1] = 6 (slope[i] - slope[i-1]).
    rhs_mid = 6.0 * (slope[1:] - slope[:-1])
    if bc == "natural":
        d = jnp.concatenate([one, 2.0 * (h[:-1] + h[1:]), one])
        dl = jnp.concatenate([zero, h[:-1], zero])
        du = jnp.concatenate([zero, h[1:], zero])
        rhs = jnp.concatenate([jnp.zeros_like(y[:1]), rhs_mid, jnp.zeros_like(y[:1])])
    else:
        def end(v):
            v = jnp.zeros_like(y[0]) if v is None else _float(v)
            return jnp.broadcast_to(v, y[0].shape).astype(y.dtype)

        ya, yb = end(start_slope), end(end_slope)
        d = jnp.concatenate([2.0 * h[:1], 2.0 * (h[:-1] + h[1:]), 2.0 * h[-1:]])
        dl = jnp.concatenate([zero, h])
        du = jnp.concatenate([h, zero])
        rhs = jnp.concatenate([
            (6.0 * (slope[0] - ya))[None],
            rhs_mid,
            (6.0 * (yb - slope[-1]))[None],
        ])
    if valid is not None:
        d, dl, du, rhs = _truncate(valid, h, slope, d, dl, du, rhs, bc, end_slope, y)
    m = tridiagonal_solve(dl, d, du, rhs)
    c0 = y[:-1]
    c1 = slope - h[:, None] * (2.0 * m[:-1] + m[1:]) / 6.0
    c2 = 0.5 * m[:-1]
    c3 = (m[1:] - m[:-1]) / (6.0 * h[:, None])
    return CubicSpline(s, jnp.stack([c0, c1, c2, c3], axis=1))


def _truncate(valid, h, slope, d, dl, du, rhs, bc, end_slope, y):
    """The tridiagonal system of the first ``valid`` points: their last row becomes the end
    condition, every later row the identity with a zero right-hand side."""
    n = d.shape[0]
    idx = jnp.arange(n)
    last = jnp.asarray(valid) - 1
    end = idx == last
    after = idx > last
    h_prev = jnp.concatenate([h[:1], h])                 # h_{i-1} for row i (row 0 unused)
    slope_prev = jnp.concatenate([slope[:1], slope])     # slope_{i-1}
    if bc == "natural":
        d = jnp.where(end | after, 1.0, d)
        dl = jnp.where(end | after, 0.0, dl)
        rhs = jnp.where((end | after)[:, None], 0.0, rhs)
    else:
        yb = jnp.zeros_like(y[0]) if end_slope is None else _float(end_slope).astype(y.dtype)
        d = jnp.where(end, 2.0 * h_prev, jnp.where(after, 1.0, d))
        dl = jnp.where(after, 0.0, dl)
        rhs = jnp.where(end[:, None], 6.0 * (yb - slope_prev), jnp.where(after[:, None], 0.0, rhs))
    du = jnp.where(end | after, 0.0, du)
    return d, dl, du, rhs


def spline_eval(spline: CubicSpline, s) -> PathSamples:
    """q, q', q'' at parameter(s) ``s`` (clamped to the knot range)."""
    knots = spline.knots
    s = jnp.clip(jnp.asarray(s, dtype=knots.dtype), knots[0], knots[-1])
    i = jnp.clip(jnp.searchsorted(knots, s, side="right") - 1, 0, knots.shape[0] - 2)
    x = (s - knots[i])[..., None]
    c = spline.coeffs[i]  # s.shape + (4, ndof)
    c0, c1, c2, c3 = c[..., 0, :], c[..., 1, :], c[..., 2, :], c[..., 3, :]
    q = c0 + x * (c1 + x * (c2 + x * c3))
    qs = c1 + x * (2.0 * c2 + 3.0 * x * c3)
    qss = 2.0 * c2 + 6.0 * x * c3
    return PathSamples(s, q, qs, qss)

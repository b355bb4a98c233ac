"""The 7-segment jerk-limited S-curve (rest to rest), planned and sampled in closed form.

A profile over a displacement ``D`` is described by four phase lengths: each of the four
jerk phases lasts ``t_jerk``, each of the two constant-acceleration phases ``t_acc``, the
constant-velocity phase ``t_cruise``. The jerk pattern is ``+J, 0, -J, 0, -J, 0, +J`` and the
duration ``4 t_jerk + 2 t_acc + t_cruise``. Everything is elementwise, so every function works
on scalars, per-dof vectors or any batch shape (broadcasting like NumPy); ``jit``/``vmap`` as
you like. Planning is O(1): closed forms plus two Newton polish steps, no data-dependent loops.

Sampling uses the profile's point symmetry about its midpoint, ``p(t) = D - p(T - t)``, so only
the accelerating half needs formulas and ``p(T) = D`` holds exactly.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

Array = jnp.ndarray


class SCurve(NamedTuple):
    """A planned rest-to-rest S-curve (a pytree; every field has the batch shape)."""

    distance: Array  # signed displacement D
    t_jerk: Array  # length of each of the 4 constant-jerk phases
    t_acc: Array  # length of each of the 2 constant-acceleration phases
    t_cruise: Array  # length of the constant-velocity phase
    jerk: Array  # jerk magnitude used by the profile (> 0)

    @property
    def duration(self) -> Array:
        return 4.0 * self.t_jerk + 2.0 * self.t_acc + self.t_cruise

    @property
    def peak_acceleration(self) -> Array:
        return self.jerk * self.t_jerk

    @property
    def peak_velocity(self) -> Array:
        return self.jerk * self.t_jerk * (self.t_jerk + self.t_acc)


def _float(x) -> Array:
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    return x


def _promote(*xs):
    xs = [_float(x) for x in xs]
    dtype = jnp.result_type(*xs)
    shape = jnp.broadcast_shapes(*(x.shape for x in xs))
    return [jnp.broadcast_to(x.astype(dtype), shape) for x in xs]


def scurve_min_time(distance, vmax, amax, jmax) -> SCurve:
    """Time-optimal rest-to-rest S-curve over ``distance`` (any sign) under vmax, amax, jmax (> 0).

    Covers every case: cruise at vmax (with or without reaching amax), no cruise with amax
    reached, no cruise and amax never reached, and ``distance == 0`` (duration 0).
    """
    dist, v, a, j = _promote(distance, vmax, amax, jmax)
    d = jnp.abs(dist)
    # Accelerating to vmax: does the acceleration saturate on the way?
    acc_saturates_to_vmax = v * j >= a * a
    tj_v = jnp.where(acc_saturates_to_vmax, a / j, jnp.sqrt(v / j))
    ta_v = jnp.where(acc_saturates_to_vmax, jnp.maximum(v / a - a / j, 0.0), 0.0)
    d_to_vmax = v * (2.0 * tj_v + ta_v)  # distance of accelerate-to-vmax plus decelerate-to-rest
    cruises = d >= d_to_vmax
    # No cruise, acceleration saturates: peak velocity solves vp^2/a + vp a/j = d (stable root).
    acc_saturates = d >= 2.0 * a**3 / (j * j)
    vp_s = 2.0 * d / (a / j + jnp.sqrt((a / j) ** 2 + 4.0 * d / a))
    ta_s = jnp.maximum(vp_s / a - a / j, 0.0)
    # No cruise, no saturation: d = 2 j tj^3. Double-where keeps the gradient finite at d = 0.
    pos = d > 0.0
    d_safe = jnp.where(pos, d, 1.0)
    tj_t = jnp.where(pos, jnp.cbrt(d_safe / (2.0 * j)), 0.0)

    t_jerk = jnp.where(cruises, tj_v, jnp.where(acc_saturates, a / j, tj_t))
    t_acc = jnp.where(cruises, ta_v, jnp.where(acc_saturates, ta_s, 0.0))
    t_cruise = jnp.where(cruises, (d - d_to_vmax) / v, 0.0)
    return SCurve(dist, t_jerk, t_acc, t_cruise, j)


def scurve_duration(distance, vmax, amax, jmax) -> Array:
    """Minimum rest-to-rest duration (see :func:`scurve_min_time`)."""
    return scurve_min_time(distance, vmax, amax, jmax).duration


def scurve_fixed_time(distance, duration, vmax, amax, jmax) -> SCurve:
    """Rest-to-rest S-curve over ``distance`` lasting exactly ``duration``.

    Keeps amax and jmax and lowers the peak velocity until the duration is hit (the profile
    family's duration is monotone in the peak velocity, so the answer is unique). A duration
    below the minimum is raised to the minimum: compare ``result.duration`` when that matters.
    """
    dist, dur, v, a, j = _promote(distance, duration, vmax, amax, jmax)
    fastest = scurve_min_time(dist, v, a, j)
    te = jnp.maximum(dur, fastest.duration)
    return _stretch(fastest, te, a, j)


def _stretch(fastest: SCurve, te: Array, a: Array, j: Array) -> SCurve:
    """Re-plan ``fastest`` (a min-time profile) to last ``te >= fastest.duration``."""
    dist = fastest.distance
    d = jnp.abs(dist)
    pos = d > 0.0
    d_safe = jnp.where(pos, d, 1.0)
    te_safe = jnp.where(pos & (te > 0.0), te, 1.0)

    # Branch 1, acceleration reaches amax: te = d/vp + vp/a + a/j, smaller root for vp.
    bq = te_safe - a / j
    disc = bq * bq - 4.0 * d_safe / a
    quad_ok = (bq > 0.0) & (disc >= 0.0)
    root = jnp.sqrt(jnp.where(quad_ok, disc, 1.0))
    vp_q = 2.0 * d_safe / jnp.where(quad_ok, bq + root, 1.0)
    use_quad = quad_ok & (vp_q >= a * a / j)
    ta_q = jnp.maximum(vp_q / a - a / j, 0.0)

    # Branch 2, acceleration stays below amax: 2 tj^3 - te tj^2 + d/j = 0, middle root. The
    # trigonometric solution tj = te/6 + te/3 cos(theta/3 - 2 pi/3), theta = arccos(1 - w),
    # w = 54 d / (j te^3), is rewritten without cancellation (long moves make w and tj/te tiny):
    # theta = 2 asin(sqrt(w/2)) and 1/2 + cos(phi - 2 pi/3) = sin(phi/2)^2 + sqrt(3)/2 sin(phi).
    # Two Newton steps then polish the root.
    w = 54.0 * d_safe / (j * te_safe**3)
    half_w = jnp.where(use_quad, 0.25, jnp.clip(0.5 * w, 0.0, 0.99))
    phi = (2.0 / 3.0) * jnp.arcsin(jnp.sqrt(half_w))
    tj_c = te_safe / 3.0 * (jnp.sin(0.5 * phi) ** 2 + 0.5 * jnp.sqrt(3.0) * jnp.sin(phi))
    for _ in range(2):
        f = (2.0 * tj_c - te_safe) * tj_c * tj_c + d_safe / j
        fp = 2.0 * tj_c * (3.0 * tj_c - te_safe)
        fp_safe = jnp.where(fp < 0.0, fp, -1.0)
        tj_c = jnp.clip(tj_c - jnp.where(fp < 0.0, f / fp_safe, 0.0), 0.0, te_safe / 3.0)

    t_jerk = jnp.where(use_quad, a / j, tj_c)
    t_acc = jnp.where(use_quad, ta_q, 0.0)
    t_jerk = jnp.where(pos, t_jerk, 0.0)
    t_acc = jnp.where(pos, t_acc, 0.0)
    # The time-optimal profile is returned untouched (bit-exact); others get the exact duration.
    stretched = te > fastest.duration
    t_jerk = jnp.where(stretched, t_jerk, fastest.t_jerk)
    t_acc = jnp.where(stretched, t_acc, fastest.t_acc)
    t_cruise = jnp.where(stretched, jnp.maximum(te - 4.0 * t_jerk - 2.0 * t_acc, 0.0), fastest.t_cruise)
    return SCurve(dist, t_jerk, t_acc, t_cruise, fastest.jerk)


class ProfileState(NamedTuple):
    """Displacement from the start and its first three time derivatives."""

    p: Array
    v: Array
    a: Array
    j: Array


def scurve_sample(profile: SCurve, t) -> ProfileState:
    """Evaluate ``profile`` at time(s) ``t`` (broadcast against the profile's fields), O(1) each.

    Before the start the state is rest at 0; after the end it is rest at ``distance``.
    """
    t = _float(t)
    dist = profile.distance
    d = jnp.abs(dist)
    sgn = jnp.where(dist < 0.0, -1.0, 1.0).astype(d.dtype)
    jk, tj, ta = profile.jerk, profile.t_jerk, profile.t_acc
    total = profile.duration
    ap = jk * tj
    vp = ap * (tj + ta)
    t_ramp = 2.0 * tj + ta
    p_ramp = 0.5 * vp * t_ramp
    # Materialise the per-profile numbers once: without the barrier XLA fuses the whole planner
    # into the per-sample loop and re-plans for every time stamp (about 15x slower on CPU).
    d, sgn, jk, tj, ta, total, ap, vp, t_ramp, p_ramp = jax.lax.optimization_barrier(
        (d, sgn, jk, tj, ta, total, ap, vp, t_ramp, p_ramp))
    tc = jnp.clip(t, 0.0, total)
    mirrored = tc > 0.5 * total
    tau = jnp.where(mirrored, total - tc, tc)

    # phase 1: jerk +J
    p1 = jk * tau**3 / 6.0
    v1 = 0.5 * jk * tau**2
    a1 = jk * tau
    # phase 2: constant acceleration ap
    s = tau - tj
    p2 = jk * tj**3 / 6.0 + 0.5 * jk * tj**2 * s + 0.5 * ap * s * s
    v2 = 0.5 * jk * tj**2 + ap * s
    # phase 3: jerk -J, written from the end of the ramp
    e = t_ramp - tau
    p3 = p_ramp - vp * e + jk * e**3 / 6.0
    v3 = vp - 0.5 * jk * e * e
    a3 = jk * e
    # cruise
    p4 = p_ramp + vp * (tau - t_ramp)

    in1 = tau <= tj
    in2 = tau <= tj + ta
    in3 = tau <= t_ramp
    zero = jnp.zeros_like(p1)
    ph = jnp.where(in1, p1, jnp.where(in2, p2, jnp.where(in3, p3, p4)))
    vh = jnp.where(in1, v1, jnp.where(in2, v2, jnp.where(in3, v3, vp + zero)))
    ah = jnp.where(in1, a1, jnp.where(in2, ap + zero, jnp.where(in3, a3, zero)))
    jh = jnp.where(in1, jk + zero, jnp.where(in2, zero, jnp.where(in3, -jk + zero, zero)))

    p = jnp.where(mirrored, d - ph, ph)
    a_ = jnp.where(mirrored, -ah, ah)
    moving = (t > 0.0) & (t < total)
    jh = jnp.where(moving, jh, 0.0)
    return ProfileState(sgn * p, sgn * vh, sgn * a_, sgn * jh)

"""Singularity analysis of a frame Jacobian: singular values, Yoshikawa manipulability, condition
number, the manipulability ellipsoid, the nullspace projector, and an escape direction.

Every function handles one configuration (or one Jacobian) and is safe to ``jax.vmap`` and to
differentiate. Jacobians are Pinocchio-style (6, nv) with rows [v; w]; "translation" selects the
three linear rows.

Manipulability is the product of the min(m, n) singular values of the (m, n) Jacobian, which is
Yoshikawa's sqrt(det(J J^T)) for m <= n (and sqrt(det(J^T J)) for a tall Jacobian). Its derivative
is given by a custom JVP, d w = sum_k (prod_{j != k} s_j) u_k^T dJ v_k, so it is finite at
singular and at repeated singular values where differentiating through the SVD is not. At an
exact rank-one singularity this still yields a useful gradient: s_min behaves like |x| there, so
the direction u_min^T (dJ/dq) v_min increases manipulability whichever sign the SVD chose.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from caliper_jax.ik.chain import frame_pose_jacobian
from caliper_jax.model import Model

PARTS = ("full", "translation", "rotation")


def select_rows(J, part: str = "full"):
    """The rows of a (6, n) Jacobian for ``part``: 'full', 'translation' or 'rotation'."""
    if part == "full":
        return J
    if part == "translation":
        return J[..., :3, :]
    if part == "rotation":
        return J[..., 3:, :]
    raise ValueError(f"part must be one of {PARTS}, got {part!r}")


def singular_values(J):
    """Singular values (min(m, n),) in descending order (NumPy's convention)."""
    return jnp.linalg.svd(J, compute_uv=False)


@jax.custom_jvp
def manipulability(J):
    """Yoshikawa manipulability: the product of the singular values, >= 0."""
    return jnp.prod(singular_values(J), axis=-1)


@manipulability.defjvp
def _manipulability_jvp(primals, tangents):
    (J,), (dJ,) = primals, tangents
    U, s, Vt = jnp.linalg.svd(J, full_matrices=False)
    # d s_k = u_k^T dJ v_k (first order, valid for distinct and for repeated values alike)
    ds = jnp.einsum("...ik,...ij,...kj->...k", U, dJ, Vt)
    # prod over j != k of s_j, without dividing by s_k
    k = s.shape[-1]
    others = jnp.where(jnp.eye(k, dtype=bool), jnp.ones((), s.dtype), s[..., None, :])
    return jnp.prod(s, axis=-1), jnp.sum(jnp.prod(others, axis=-1) * ds, axis=-1)


def condition_number(J):
    """s_max / s_min; +inf at an exact singularity, never NaN (gradient 0 there)."""
    s = singular_values(J)
    s_max, s_min = s[..., 0], s[..., -1]
    ok = s_min > jnp.finfo(s.dtype).tiny
    return jnp.where(ok, s_max / jnp.where(ok, s_min, 1.0), jnp.inf)


def inverse_condition_number(J):
    """s_min / s_max in [0, 1]; 0 at a singularity (and for a zero Jacobian)."""
    s = singular_values(J)
    ok = s[..., 0] > jnp.finfo(s.dtype).tiny
    return jnp.where(ok, s[..., -1] / jnp.where(ok, s[..., 0], 1.0), 0.0)


def ellipsoid(J):
    """Velocity manipulability ellipsoid {J qd : |qd| <= 1}: (axes (m, m), radii (m,)).

    ``axes[:, k]`` is the k-th principal direction (unit, task space), ``radii[k]`` its
    semi-axis length; sorted by decreasing radius. Rows beyond the rank get radius 0."""
    m, n = J.shape[-2], J.shape[-1]
    U, s, _ = jnp.linalg.svd(J, full_matrices=True)
    if n < m:
        s = jnp.concatenate([s, jnp.zeros(s.shape[:-1] + (m - n,), s.dtype)], axis=-1)
    return U, s


def rank(J, rtol=None):
    """Numerical rank: singular values above ``rtol * s_max`` (default max(m, n) * eps)."""
    s = singular_values(J)
    if rtol is None:
        rtol = max(J.shape[-2:]) * jnp.finfo(s.dtype).eps
    return jnp.sum(s > rtol * s[..., :1], axis=-1)


def nullspace_projector(J, rtol=None):
    """N = I - J^+ J (n, n): joint velocities N qd leave the task velocity unchanged.

    For a redundant arm (n > rank) it projects onto the self-motion manifold's tangent."""
    n = J.shape[-1]
    pinv = jnp.linalg.pinv(J, rtol=rtol) if rtol is not None else jnp.linalg.pinv(J)
    return jnp.eye(n, dtype=J.dtype) - pinv @ J


# ---- per configuration ------------------------------------------------------------------------

def jacobian(model: Model, q, frame: int, part: str = "full", reference: str = "world"):
    """The rows ``part`` of a frame's geometric Jacobian at q (equal to
    ``kinematics.frame_jacobian``; computed along the frame's chain only)."""
    return select_rows(frame_pose_jacobian(model, q, frame, reference)[2], part)


def manipulability_at(model: Model, q, frame: int, part: str = "full"):
    """Manipulability of ``frame`` at q (world-aligned Jacobian; invariant to the frame axes)."""
    return manipulability(jacobian(model, q, frame, part))


def escape_direction(model: Model, q, frame: int, part: str = "full"):
    """grad_q of the manipulability at q (nv,): the direction that increases it fastest.

    Finite everywhere, including exact singularities (see the module notes). Zero only where
    the manipulability is stationary (e.g. two singular values vanish together)."""
    return jax.grad(lambda x: manipulability_at(model, x, frame, part))(q)


def _from_svd(U, s, n):
    """Scalar metrics and the ellipsoid from one full SVD of an (m, n) Jacobian."""
    m = U.shape[-1]
    s_max, s_min = s[0], s[-1]
    tiny = jnp.finfo(s.dtype).tiny
    ok = s_min > tiny
    cond = jnp.where(ok, s_max / jnp.where(ok, s_min, 1.0), jnp.inf)
    inv = jnp.where(s_max > tiny, s_min / jnp.where(s_max > tiny, s_max, 1.0), 0.0)
    radii = s if n >= m else jnp.concatenate([s, jnp.zeros(m - n, s.dtype)])
    return cond, inv, radii


def metrics(model: Model, q, frame: int):
    """Every per-configuration metric of ``frame`` at q, as a dict of arrays (one SVD per
    Jacobian; the escape directions by forward mode over the joints)."""
    J = jacobian(model, q, frame)
    n = J.shape[-1]
    U, s, Vt = jnp.linalg.svd(J, full_matrices=True)
    Ut, st, _ = jnp.linalg.svd(J[:3], full_matrices=True)
    cond, inv, radii = _from_svd(U, s, n)
    cond_t, _, radii_t = _from_svd(Ut, st, n)
    eps = jnp.finfo(s.dtype).eps
    r = jnp.sum(s > max(J.shape) * eps * s[0])
    # N = I - V_r V_r^T (the pseudo-inverse's projector) from the same SVD
    keep = (jnp.arange(Vt.shape[0]) < r)[:, None]
    Vr = jnp.where(keep, Vt, 0.0)
    null = jnp.eye(n, dtype=J.dtype) - Vr.T @ Vr
    # grad of manipulability: forward mode through the Jacobian (nv tangents), then the SVD rule
    dJ = jax.jacfwd(lambda x: jacobian(model, x, frame))(q)          # (6, n, nv)
    return {
        "singular_values": s,
        "manipulability": jnp.prod(s),
        "condition_number": cond,
        "inverse_condition_number": inv,
        "translation_singular_values": st,
        "translation_manipulability": jnp.prod(st),
        "translation_condition_number": cond_t,
        "ellipsoid_axes": U,
        "ellipsoid_radii": radii,
        "translation_ellipsoid_axes": Ut,
        "translation_ellipsoid_radii": radii_t,
        "rank": r,
        "nullspace_projector": null,
        "escape_direction": _manipulability_gradient(J, dJ),
        "translation_escape_direction": _manipulability_gradient(J[:3], dJ[:3]),
    }


def _manipulability_gradient(J, dJ):
    """sum_k (prod_{j != k} s_j) u_k^T dJ_i v_k for each joint i (dJ: (m, n, nv))."""
    U, s, Vt = jnp.linalg.svd(J, full_matrices=False)
    ds = jnp.einsum("ik,ijq,kj->kq", U, dJ, Vt)                     # (k, nv)
    k = s.shape[-1]
    others = jnp.prod(jnp.where(jnp.eye(k, dtype=bool), jnp.ones((), s.dtype), s[None, :]), axis=-1)
    return others @ ds


__all__ = [
    "PARTS", "select_rows", "singular_values", "manipulability", "condition_number",
    "inverse_condition_number", "ellipsoid", "rank", "nullspace_projector", "jacobian",
    "manipulability_at", "escape_direction", "metrics",
]

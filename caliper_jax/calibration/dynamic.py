"""Dynamic-parameter identification: masses, centres of mass and inertias from joint-space
samples (q, qd, qdd, tau).

Each body's inertial parameters are written in the form the dynamics are linear in (10 per body):
pi_b = [m, h = m c (3), I_o (6: xx, yy, zz, xy, xz, yz)], with I_o the rotational inertia about
the body origin (parallel-axis shifted), all in body axes. ``rnea`` of the model rebuilt from pi
is then exactly Y(q, qd, qdd) pi; the regressor Y is never written by hand -- ``jax.jacfwd``
through ``dynamics.rnea`` gives it -- and the fit is the same damped Gauss-Newton as the
kinematic calibrations, which for a linear problem is exact in one step: the Jacobian (= Y) is
taken once at the nominal parameters and the minimum-norm step solves it.

Identifiability: only combinations of pi (the base parameters) are seen by any data set; the
solver returns the minimum-norm correction from the nominal model, so unidentifiable directions
keep their nominal values. ``identifiable`` flags the parameters the data fix on their own.
Physical consistency (m > 0, positive-definite inertia) is not imposed; check it before use.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax import dynamics
from caliper_jax.calibration.solver import gauss_newton_step, identifiable, rank
from caliper_jax.errors import CaliperError
from caliper_jax.ik import chain
from caliper_jax.model import Model
from caliper_jax.spatial import skew

PARAM_NAMES = ("m", "mcx", "mcy", "mcz", "Ixx", "Iyy", "Izz", "Ixy", "Ixz", "Iyz")


def _sym_to_vec(I):
    return jnp.stack([I[..., 0, 0], I[..., 1, 1], I[..., 2, 2], I[..., 0, 1], I[..., 0, 2], I[..., 1, 2]], -1)


def _vec_to_sym(v):
    xx, yy, zz, xy, xz, yz = (v[..., k] for k in range(6))
    return jnp.stack([jnp.stack([xx, xy, xz], -1), jnp.stack([xy, yy, yz], -1),
                      jnp.stack([xz, yz, zz], -1)], -2)


def inertial_parameters(model: Model):
    """(nbody, 10) [m, m c, I about the body origin] from the Model leaves."""
    m, c = model.body_mass, model.body_com
    cx = skew(c)
    I_o = model.body_inertia - m[:, None, None] * (cx @ cx)
    return jnp.concatenate([m[:, None], m[:, None] * c, _sym_to_vec(I_o)], axis=-1)


def with_inertial_parameters(model: Model, pi) -> Model:
    """The model with body_mass / body_com / body_inertia rebuilt from pi (nbody, 10).
    A body with zero mass keeps its COM at the origin."""
    m, h = pi[:, 0], pi[:, 1:4]
    ok = jnp.abs(m) > jnp.finfo(pi.dtype).tiny
    m_safe = jnp.where(ok, m, 1.0)
    c = jnp.where(ok[:, None], h / m_safe[:, None], 0.0)
    hx = skew(h)
    I_com = _vec_to_sym(pi[:, 4:]) + jnp.where(ok, 1.0 / m_safe, 0.0)[:, None, None] * (hx @ hx)
    return model.replace(body_mass=m, body_com=c, body_inertia=I_com)


def torque_residuals(model: Model, pi, qs, qds, qdds, taus):
    """Stacked rnea(model(pi), q, qd, qdd) - tau over the samples: (N * nv,)."""
    m = with_inertial_parameters(model, pi)
    pred = jax.vmap(lambda q, v, a: dynamics.rnea(m, q, v, a))(qs, qds, qdds)
    return (pred - taus).reshape(-1)


def regressor(model: Model, qs, qds, qdds):
    """Y (N * nv, nbody * 10) with rnea = Y pi, by forward-mode autodiff through rnea."""
    pi0 = inertial_parameters(model)
    zero = jnp.zeros((qs.shape[0], model.nv), model.dtype)
    fn = lambda p: torque_residuals(model, p.reshape(pi0.shape), qs, qds, qdds, zero)
    return jax.jacfwd(fn)(pi0.reshape(-1))


class DynamicIdentification(NamedTuple):
    model: Model                 # the identified model
    parameters: np.ndarray       # (nbody, 10) identified pi
    nominal: np.ndarray          # (nbody, 10) pi of the starting model
    identifiable: np.ndarray     # (nbody, 10) bool
    rank: int                    # number of base parameters the data fix
    regressor: np.ndarray        # (N * nv, nbody * 10) Y with rnea = Y pi on the samples
    rms_before: float            # torque residual, N m (or N)
    rms_after: float


def check_samples(model: Model, q, qd, qdd, tau, what="data"):
    out = []
    for name, arr, n in (("q", q, model.nq), ("qd", qd, model.nv), ("qdd", qdd, model.nv),
                         ("tau", tau, model.nv)):
        a = np.asarray(arr, dtype=np.float64)
        if a.ndim != 2 or a.shape[1] != n:
            raise CaliperError(f"{what}.{name}: expected shape (N, {n}) for {model.name!r}, got {a.shape}")
        if not np.all(np.isfinite(a)):
            raise CaliperError(f"{what}.{name}: non-finite values")
        out.append(a)
    if len({a.shape[0] for a in out}) != 1 or out[0].shape[0] == 0:
        raise CaliperError(f"{what}: q, qd, qdd, tau need the same, non-zero number of samples")
    return out


def identify_dynamics(model: Model, q, qd, qdd, tau) -> DynamicIdentification:
    """Identify every body's inertial parameters from samples q (N, nq), qd, qdd, tau (N, nv)."""
    q, qd, qdd, tau = check_samples(model, q, qd, qdd, tau)
    if model.nbody == 0:
        raise CaliperError(f"robot {model.name!r} has no moving bodies")
    dtype = model.dtype
    pi, pi0, Y, r0, r1 = _identify(chain.for_jit(model), *(jnp.asarray(a, dtype) for a in (q, qd, qdd, tau)))
    shape = (model.nbody, 10)
    return DynamicIdentification(
        model=with_inertial_parameters(model, pi.reshape(shape)), parameters=np.asarray(pi).reshape(shape),
        nominal=np.asarray(pi0).reshape(shape), identifiable=np.asarray(identifiable(Y)).reshape(shape),
        rank=int(rank(Y)), regressor=np.asarray(Y),
        rms_before=float(np.sqrt(np.mean(np.asarray(r0) ** 2))),
        rms_after=float(np.sqrt(np.mean(np.asarray(r1) ** 2))))


@jax.jit
def _identify(model, q, qd, qdd, tau):
    pi0 = inertial_parameters(model).reshape(-1)
    fn = lambda p: torque_residuals(model, p.reshape(model.nbody, 10), q, qd, qdd, tau)
    r0, Y = fn(pi0), jax.jacfwd(fn)(pi0)
    pi = pi0 + gauss_newton_step(Y, r0)
    return pi, pi0, Y, r0, fn(pi)


__all__ = ["PARAM_NAMES", "inertial_parameters", "with_inertial_parameters", "torque_residuals",
           "regressor", "DynamicIdentification", "check_samples", "identify_dynamics"]

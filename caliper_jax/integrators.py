"""Time integration of the rigid-body dynamics with joint damping, and ``simulate`` over
``lax.scan``. Integrators: ``"euler"`` (semi-implicit), ``"rk4"`` and ``"implicit"`` (implicit
in the damping velocity term, stable for stiff damping: (M + h D) qdd = tau - b - D v).
Coulomb friction is carried by the Model but not applied here (the MuJoCo backend applies it).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from caliper_jax.configuration import integrate_pos
from caliper_jax.dynamics import bias_forces, crba, forward_dynamics, solve_spd
from caliper_jax.errors import CaliperError
from caliper_jax.model import Model

INTEGRATORS = ("euler", "rk4", "implicit")


def acceleration(model: Model, q, v, tau, damping=None, gravity=None):
    """qdd with viscous damping ``-D v`` (D = model.dof_damping unless given)."""
    d = model.dof_damping if damping is None else damping
    return forward_dynamics(model, q, v, tau - d * v, gravity=gravity)


def step(model: Model, q, v, tau, dt, integrator: str = "euler", damping=None, gravity=None):
    """One step of length ``dt`` -> (q_next, v_next)."""
    if integrator == "euler":
        a = acceleration(model, q, v, tau, damping, gravity)
        v_next = v + dt * a
        return integrate_pos(model, q, v_next, dt), v_next
    if integrator == "rk4":
        def f(q_, v_):
            return v_, acceleration(model, q_, v_, tau, damping, gravity)

        k1q, k1v = f(q, v)
        k2q, k2v = f(integrate_pos(model, q, k1q, dt / 2), v + dt / 2 * k1v)
        k3q, k3v = f(integrate_pos(model, q, k2q, dt / 2), v + dt / 2 * k2v)
        k4q, k4v = f(integrate_pos(model, q, k3q, dt), v + dt * k3v)
        dq = (k1q + 2 * k2q + 2 * k3q + k4q) / 6
        dv = (k1v + 2 * k2v + 2 * k3v + k4v) / 6
        return integrate_pos(model, q, dq, dt), v + dt * dv
    if integrator == "implicit":
        d = model.dof_damping if damping is None else damping
        M = crba(model, q) + dt * jnp.diag(d)
        a = solve_spd(M, tau - bias_forces(model, q, v, gravity) - d * v)
        v_next = v + dt * a
        return integrate_pos(model, q, v_next, dt), v_next
    raise CaliperError(f"unknown integrator {integrator!r} (expected one of {', '.join(INTEGRATORS)})")


def simulate(model: Model, q0, v0, taus, dt, integrator: str = "euler", damping=None, gravity=None):
    """Roll out ``taus`` (T, nv) from (q0, v0) -> (qs (T+1, nq), vs (T+1, nv)), one ``lax.scan``."""
    def body(state, tau):
        q, v = step(model, *state, tau, dt, integrator, damping, gravity)
        return (q, v), (q, v)

    _, (qs, vs) = jax.lax.scan(body, (q0, v0), taus)
    return jnp.concatenate([q0[None], qs]), jnp.concatenate([v0[None], vs])

"""Trajectory optimisation with dynamics: direct multiple shooting over the native rigid-body
dynamics, solved by the augmented Lagrangian of :mod:`caliper_jax.trajopt.auglag` with
Gauss-Newton inner steps (or damped Newton, L-BFGS). Pure JAX; one solve jits and vmaps over problems and
initialisations.

Why multiple shooting (not iLQR/DDP): state, torque, velocity and joint limits and the terminal
goal are all plain constraints on the decision vector, a warm start from a kinematic path (CHOMP,
a planner) initialises every node directly (no rollout has to track it), and the defects keep the
problem well conditioned over long horizons; iLQR needs the constraints folded into its backward
pass and starts from a rollout.

Decision variables (N = ``horizon`` intervals, node 0 = the start state, fixed):
``q_k`` (nq) and ``v_k`` / ``v_scale`` (nv) at nodes 1..N, the torques ``tau_k`` / ``tau_scale``
(nv) held on intervals 0..N-1, and with ``free_time`` the log of the duration T (h = T / N).

* defects (equalities, k = 0..N-1): ``(x_{k+1} - step(x_k, tau_k, h)) / h`` with ``step`` the
  :func:`caliper_jax.integrators.step` of :func:`caliper_jax.dynamics.forward_dynamics`
  (semi-implicit Euler by default, joint damping included); the velocity part divided by
  ``v_scale`` as well.
* terminal goal (equalities): ``q_N = goal`` and ``v_N = 0`` (state goal), or the pose of
  ``frame`` equal to ``goal_pose`` (position in m, rotation matrix entries) with ``v_N = 0``.
* limits (inequalities, <= 0, each divided by its bound): joint position limits at every node,
  velocity limits ``|v| <= vmax``, torque limits ``|tau| <= effort`` (where finite).
* objective: ``effort``: ``h sum |tau / tau_scale|^2`` (fixed T); ``time``: ``T + w_reg h sum
  |tau / tau_scale|^2``; both plus ``w_collision h sum_k potential(q_k)``, the CHOMP hinge
  potential of the sphere-pair signed distances (:func:`caliper_jax.trajopt.chomp.obstacle`'s
  term) at the nodes and ``substeps - 1`` points between each pair.

The Python face (:func:`trajopt_dynamic`) is NumPy in, NumPy out.

Open-loop replay: the defects only say that one ``step`` of length h joins the nodes. A user runs
the torques through a simulator at a finer step, where a coarse h's solution can end far from the
goal (a Panda at N = 8, h = 0.375 s converged to 4.8e-5 rad defects and ended 391 rad away under
Euler at a fine step). So every solution is replayed open loop (:func:`replay`: the torques held
over each interval, ``replay_substeps`` steps of h / replay_substeps with ``replay_integrator``,
default the solve's) and the result reports ``replay_error`` (max |q - goal| at the end, rad; inf
when the replay diverged); a converged solution whose replay misses by more than ``replay_tol``
raises a :class:`ReplayWarning` naming the problem, the step and the remedies.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax import dynamics, integrators
from caliper_jax.collision import query
from caliper_jax.collision.scene import CollisionModel
from caliper_jax.errors import CaliperError
from caliper_jax.kinematics import frame_pose
from caliper_jax.model import Model
from caliper_jax.trajopt import auglag
from caliper_jax.trajopt.chomp import hinge

OBJECTIVES = ("effort", "time")


@dataclass(frozen=True)
class DynamicOptions:
    """Static settings (hashable: a jit cache key)."""

    horizon: int = 24                  # N intervals
    objective: str = "effort"          # "effort" | "time"
    free_time: bool = False            # optimise the duration T (always for "time")
    # integrators.step: "euler" | "rk4" | "implicit". With the torque held over h = T / N (~0.04 s
    # on collide_arm) Euler solutions miss the next node by up to 0.16 rad when replayed finely;
    # "rk4" converged there too and replays within 7e-3 rad (docs/trajopt.md, Free trajectory)
    integrator: str = "euler"
    w_effort: float = 1.0
    w_reg: float = 1e-3                # torque regulariser of the "time" objective
    w_collision: float = 10.0
    epsilon: float = 0.05              # hinge clearance, m
    substeps: int = 2
    t_min: float = 1e-2                # bounds on T when free (s)
    t_max: float = 1e2
    pose_frame: int = -1               # >= 0: terminal goal is this frame's pose, not the state
    # Gauss-Newton with a line search: on collide_arm (N = 16, minimum time) it converged from all
    # 8 warm starts tried where the exact-Hessian damped Newton (accept/reject steps, no line
    # search) stalled at 7e-2 in some and converged in others depending on 1e-3 perturbations;
    # L-BFGS stalled at 2.7e-2 on pendulum2. Use method="lbfgs" (more iterations) for many variables
    al: auglag.ALOptions = field(default_factory=lambda: auglag.ALOptions(
        outer=20, inner=10, rho0=1.0, rho_growth=3.0, rho_max=1e4, method="gauss_newton"))

    @property
    def timed(self) -> bool:
        return self.free_time or self.objective == "time"

    def check(self) -> DynamicOptions:
        if self.horizon < 2:
            raise CaliperError(f"horizon must be >= 2, got {self.horizon}")
        if self.objective not in OBJECTIVES:
            raise CaliperError(f"objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}")
        if self.integrator not in integrators.INTEGRATORS:
            raise CaliperError(f"integrator must be one of {', '.join(integrators.INTEGRATORS)}, "
                               f"got {self.integrator!r}")
        if self.substeps < 1 or not self.epsilon > 0 or min(self.w_effort, self.w_reg, self.w_collision) < 0:
            raise CaliperError("substeps must be >= 1, epsilon > 0 and the weights >= 0")
        if not 0 < self.t_min < self.t_max:
            raise CaliperError(f"need 0 < t_min < t_max, got {self.t_min}, {self.t_max}")
        self.al.check()
        return self


class Problem(NamedTuple):
    """One problem's data (array leaves; vmap over a leading axis)."""

    q0: jnp.ndarray            # (nq,) start configuration (at rest)
    goal: jnp.ndarray          # (nq,) goal configuration (state goal), or ignored
    goal_pose: jnp.ndarray     # (4, 4) goal pose of opts.pose_frame, or ignored
    duration: jnp.ndarray      # () T for a fixed-time problem
    vmax: jnp.ndarray          # (nv,) velocity limits (inf: none)
    effort: jnp.ndarray        # (nv,) torque limits (inf: none)


def scales(p: Problem):
    """(v_scale, tau_scale) (nv,): the limits where finite, else 1."""
    one = jnp.ones_like(p.vmax)
    return (jnp.where(jnp.isfinite(p.vmax), p.vmax, one), jnp.where(jnp.isfinite(p.effort), p.effort, one))


def size(model: Model, opts: DynamicOptions) -> int:
    """Length of the decision vector."""
    return opts.horizon * (model.nq + 2 * model.nv) + int(opts.timed)


def unpack(model: Model, p: Problem, z, opts: DynamicOptions):
    """z -> (q (N+1, nq), v (N+1, nv), tau (N, nv), T)."""
    N, nq, nv = opts.horizon, model.nq, model.nv
    vs, ts = scales(p)
    q = z[: N * nq].reshape(N, nq)
    v = z[N * nq: N * (nq + nv)].reshape(N, nv) * vs
    u = z[N * (nq + nv): N * (nq + 2 * nv)].reshape(N, nv) * ts
    T = jnp.exp(z[-1]) if opts.timed else p.duration
    q = jnp.concatenate([p.q0[None], q])
    v = jnp.concatenate([jnp.zeros((1, nv), z.dtype), v])
    return q, v, u, T


def pack(model: Model, p: Problem, q, v, tau, T, opts: DynamicOptions):
    """Inverse of :func:`unpack` (node 0 dropped)."""
    vs, ts = scales(p)
    parts = [q[1:].ravel(), (v[1:] / vs).ravel(), (tau / ts).ravel()]
    if opts.timed:
        parts.append(jnp.log(jnp.asarray(T, q.dtype))[None])
    return jnp.concatenate(parts)


def defects(model: Model, p: Problem, z, opts: DynamicOptions):
    """(N, nq + nv) integration defects per unit time (velocity part in units of v_scale)."""
    q, v, tau, T = unpack(model, p, z, opts)
    h = T / opts.horizon
    vs, _ = scales(p)
    step = jax.vmap(lambda a, b, c: integrators.step(model, a, b, c, h, opts.integrator))
    qn, vn = step(q[:-1], v[:-1], tau)
    return jnp.concatenate([(q[1:] - qn) / h, (v[1:] - vn) / (h * vs)], axis=1)


def collision(model: Model, spheres: CollisionModel, q, opts: DynamicOptions):
    """Mean hinge potential over the nodes and the points between them."""
    if not spheres.npair:
        return jnp.zeros((), q.dtype)
    s = jnp.arange(opts.substeps, dtype=q.dtype)[:, None, None] / opts.substeps
    dense = jnp.swapaxes(q[:-1][None] * (1 - s) + q[1:][None] * s, 0, 1).reshape(-1, q.shape[1])
    dense = jnp.concatenate([dense, q[-1:]])
    pot = jax.vmap(lambda x: query.sphere_potential(model, spheres, x, lambda d: hinge(d, opts.epsilon)))
    return jnp.mean(pot(dense))


def effort(model: Model, p: Problem, z, opts: DynamicOptions):
    """h sum |tau / tau_scale|^2."""
    _, _, tau, T = unpack(model, p, z, opts)
    _, ts = scales(p)
    return T / opts.horizon * jnp.sum((tau / ts) ** 2)


def objective(model: Model, spheres: CollisionModel, p: Problem, z, opts: DynamicOptions):
    """The objective f(z) (module docstring)."""
    q, _, _, T = unpack(model, p, z, opts)
    e = effort(model, p, z, opts)
    f = T + opts.w_reg * e if opts.objective == "time" else opts.w_effort * e
    if opts.w_collision:
        f = f + opts.w_collision * T * collision(model, spheres, q, opts)
    return f


def equalities(model: Model, p: Problem, z, opts: DynamicOptions):
    """Defects, then the terminal goal: flat (N (nq + nv) + goal rows,)."""
    q, v, _, _ = unpack(model, p, z, opts)
    vs, _ = scales(p)
    if opts.pose_frame >= 0:
        T_end = frame_pose(model, q[-1], opts.pose_frame)
        goal = jnp.concatenate([T_end[:3, 3] - p.goal_pose[:3, 3],
                                (T_end[:3, :3] - p.goal_pose[:3, :3]).ravel()])
    else:
        goal = q[-1] - p.goal
    return jnp.concatenate([defects(model, p, z, opts).ravel(), goal, v[-1] / vs])


def inequalities(model: Model, p: Problem, z, opts: DynamicOptions):
    """Joint, velocity and torque limits (and T's bounds) as rows <= 0."""
    q, v, tau, T = unpack(model, p, z, opts)
    lo, hi = model.qpos_lower.astype(z.dtype), model.qpos_upper.astype(z.dtype)
    span = jnp.where(jnp.isfinite(hi - lo), jnp.maximum(hi - lo, 1e-6), 1.0)
    joint = jnp.concatenate([jnp.where(jnp.isfinite(hi), (q[1:] - hi) / span, -1.0),
                             jnp.where(jnp.isfinite(lo), (lo - q[1:]) / span, -1.0)])
    vel = jnp.where(jnp.isfinite(p.vmax), jnp.abs(v[1:]) / p.vmax - 1.0, -1.0)
    trq = jnp.where(jnp.isfinite(p.effort), jnp.abs(tau) / p.effort - 1.0, -1.0)
    rows = [joint.ravel(), vel.ravel(), trq.ravel()]
    if opts.timed:
        rows.append(jnp.stack([jnp.log(opts.t_min) - jnp.log(T), jnp.log(T) - jnp.log(opts.t_max)]))
    return jnp.concatenate(rows)


def merit(model: Model, spheres: CollisionModel, p: Problem, z, lam, mu, rho, opts: DynamicOptions):
    """The trajopt cost minimised by the inner solver: objective + augmented-Lagrangian penalties."""
    return auglag.merit(lambda x: objective(model, spheres, p, x, opts),
                        lambda x: equalities(model, p, x, opts),
                        lambda x: inequalities(model, p, x, opts), z, lam, mu, rho)


def warm_start(model: Model, p: Problem, path, T, opts: DynamicOptions):
    """Decision vector from a joint path (K, nq) (CHOMP, a planner): resampled to N + 1 nodes
    uniformly in its index, timed uniformly over ``T``, velocities by finite differences (zero at
    the ends), torques by inverse dynamics (RNEA) of the finite-difference accelerations, clipped to
    the limits."""
    N = opts.horizon
    K = path.shape[0]
    s = jnp.linspace(0.0, K - 1.0, N + 1, dtype=path.dtype)
    i = jnp.clip(jnp.floor(s).astype(jnp.int32), 0, K - 2)
    w = (s - i)[:, None]
    q = path[i] * (1 - w) + path[i + 1] * w
    q = q.at[0].set(p.q0)
    h = T / N
    v = jnp.concatenate([jnp.zeros_like(q[:1]), (q[2:] - q[:-2]) / (2 * h), jnp.zeros_like(q[:1])])
    vs, ts = scales(p)
    v = jnp.clip(v, -vs, vs)
    a = (v[1:] - v[:-1]) / h
    tau = jax.vmap(lambda a_, b_, c_: dynamics.rnea(model, a_, b_, c_))(q[:-1], v[:-1], a)
    tau = tau + model.dof_damping * v[:-1]
    tau = jnp.clip(tau, -ts, ts)
    return pack(model, p, q, v, tau, T, opts)


def solve(model: Model, spheres: CollisionModel, p: Problem, z0, opts: DynamicOptions):
    """One multiple-shooting solve from ``z0`` -> (auglag.ALResult, q, v, tau, T). Pure."""
    res = auglag.solve(lambda x: objective(model, spheres, p, x, opts),
                       lambda x: equalities(model, p, x, opts),
                       lambda x: inequalities(model, p, x, opts), z0, opts.al)
    return (res, *unpack(model, p, res.z, opts))


@partial(jax.jit, static_argnames=("opts",))
def solve_batch(model, spheres, problems: Problem, paths, T0, opts: DynamicOptions):
    """vmap over problems (P) and initial paths (P, I, K, nq) with initial durations T0 (P, I)."""
    def one(p, path, t0):
        z0 = warm_start(model, p, path, t0, opts)
        res, q, v, tau, T = solve(model, spheres, p, z0, opts)
        return q, v, tau, T, res.f, res.violation, res.trace

    return jax.vmap(lambda p, ps, ts: jax.vmap(lambda a, b: one(p, a, b))(ps, ts))(problems, paths, T0)


# ---- NumPy face ----------------------------------------------------------------------------------

class ReplayWarning(UserWarning):
    """A converged dynamics trajectory whose open-loop replay misses the goal (step too coarse)."""


@partial(jax.jit, static_argnames=("integrator", "substeps"))
def _replay(model, q0, v0, tau, h, integrator: str, substeps: int):
    """(P, nq) start, (P, nv) start velocity, (P, N, nv) torques, (P,) interval -> the open-loop
    states at the nodes ((P, N+1, nq), (P, N+1, nv))."""
    def one(q0, v0, tau, h):
        dt = h / substeps

        def interval(x, t):
            def sub(_, y):
                return integrators.step(model, y[0], y[1], t, dt, integrator)
            x = jax.lax.fori_loop(0, substeps, sub, x)
            return x, x

        _, (qs, vs) = jax.lax.scan(interval, (q0, v0), tau)
        return jnp.concatenate([q0[None], qs]), jnp.concatenate([v0[None], vs])

    return jax.vmap(one)(q0, v0, tau, h)


def replay(model: Model, q0, tau, duration, *, v0=None, integrator: str = "euler", substeps: int = 10):
    """Open-loop replay of held torques: ``q0`` (P, nq) or (nq,), ``tau`` (P, N, nv) or (N, nv) held
    over N equal intervals of ``duration`` (P,) or scalar seconds, each integrated by ``substeps``
    steps of :func:`caliper_jax.integrators.step` (``integrator``). ``v0`` defaults to rest.
    Returns (q (P, N+1, nq), v (P, N+1, nv)) at the nodes, NumPy float64 (NaN where it diverged)."""
    if integrator not in integrators.INTEGRATORS:
        raise CaliperError(f"integrator must be one of {', '.join(integrators.INTEGRATORS)}, "
                           f"got {integrator!r}")
    if not (isinstance(substeps, (int, np.integer)) and substeps >= 1):
        raise CaliperError(f"substeps must be an integer >= 1, got {substeps!r}")
    q0 = np.atleast_2d(np.asarray(q0, np.float64))
    tau = np.asarray(tau, np.float64)
    tau = tau[None] if tau.ndim == 2 else tau
    P, N = tau.shape[:2]
    v0 = np.zeros((P, model.nv)) if v0 is None else np.atleast_2d(np.asarray(v0, np.float64))
    h = np.broadcast_to(np.asarray(duration, np.float64), (P,)) / N
    dt = model.dtype
    q, v = _replay(model, jnp.asarray(q0, dt), jnp.asarray(v0, dt), jnp.asarray(tau, dt), jnp.asarray(h, dt),
                   integrator, int(substeps))
    return np.asarray(q, np.float64), np.asarray(v, np.float64)


@dataclass
class DynamicResult:
    """Per problem (P leading): ``q`` (N+1, nq), ``qd`` (N+1, nv), ``tau`` (N, nv) held on each
    interval, ``times`` (N+1,), ``duration``, ``converged`` (violation <= tol), ``violation`` (max
    scaled constraint violation: defects per unit time, limits relative to the bound),
    ``objective``, ``chosen`` (which initialisation), ``all_objectives`` / ``all_violations``
    (P, I); ``replay_error`` (P,) max |q - q_N| (rad) at the end of the open-loop replay of the
    torques (:func:`replay`; inf if it diverged) and ``replay_ok`` (<= ``replay_tol``), with the
    replay's ``replay_integrator`` and ``replay_substeps``."""

    q: np.ndarray
    qd: np.ndarray
    tau: np.ndarray
    times: np.ndarray
    duration: np.ndarray
    converged: np.ndarray
    violation: np.ndarray
    objective: np.ndarray
    chosen: np.ndarray
    all_objectives: np.ndarray
    all_violations: np.ndarray
    replay_error: np.ndarray | None = None
    replay_ok: np.ndarray | None = None
    replay_integrator: str = "euler"
    replay_substeps: int = 10

    def to_dict(self) -> dict:
        return {k: np.asarray(v).tolist() for k, v in self.__dict__.items()}


def _limits(model: Model, limits):
    vmax = np.asarray(model.dof_velocity_limit, np.float64)
    eff = np.asarray(model.dof_effort_limit, np.float64)
    limits = dict(limits or {})
    unknown = set(limits) - {"velocity", "effort"}
    if unknown:
        raise CaliperError(f"limits: unknown keys {sorted(unknown)} (expected 'velocity', 'effort')")
    if "velocity" in limits:
        vmax = np.broadcast_to(np.asarray(limits["velocity"], np.float64), (model.nv,)).copy()
    if "effort" in limits:
        eff = np.broadcast_to(np.asarray(limits["effort"], np.float64), (model.nv,)).copy()
    for name, arr in (("velocity", vmax), ("effort", eff)):
        if np.any(np.isnan(arr)) or np.any(arr <= 0):
            raise CaliperError(f"limits[{name!r}]: every entry must be > 0 (inf for none), got {arr}")
    return vmax, eff


def _as_paths(init, starts, goals, P, K_default):
    if init is None:
        s = np.linspace(0.0, 1.0, K_default)[None, :, None]
        return (starts[:, None] * (1 - s) + goals[:, None] * s)[:, None]
    arr = np.asarray(init, np.float64)
    if arr.ndim == 2:
        arr = np.broadcast_to(arr, (P, *arr.shape))
    if arr.ndim == 3:
        arr = arr[:, None]
    if arr.ndim != 4 or arr.shape[0] != P or arr.shape[-1] != starts.shape[1] or arr.shape[2] < 2:
        raise CaliperError(f"init: expected a path (K >= 2, nq), (P, K, nq) or (P, I, K, nq) with P={P}, "
                           f"nq={starts.shape[1]}; got shape {np.shape(init)}")
    if not np.all(np.isfinite(arr)):
        raise CaliperError("init: non-finite values")
    return arr


def trajopt_dynamic(model: Model, start, goal, *, horizon: int = 24, dt: float | None = None,
                    free_time: bool | None = None, duration: float | None = None, objective: str = "effort",
                    limits: dict | None = None, obstacles=(), spheres: CollisionModel | None = None,
                    init=None, inits: int = 1, init_scale: float = 0.5, key=0, frame: str | None = None,
                    tol: float = 1e-3, opts: DynamicOptions | None = None,
                    replay_integrator: str | None = None, replay_substeps: int = 10, replay_tol: float = 1e-2,
                    **scene_kw) -> DynamicResult:
    """Dynamics-aware trajectory optimisation from rest at ``start`` to rest at ``goal``.

    ``start`` (nq,) or (P, nq); ``goal`` the same, or with ``frame`` a (4, 4) / (P, 4, 4) pose of
    that frame. Fixed time: ``dt`` (T = horizon dt) or ``duration``; ``objective="time"`` (or
    ``free_time``) optimises T, starting from ``duration`` (default: a path-length estimate at a
    third of the velocity limits). ``limits``: {"velocity": (nv,), "effort": (nv,)} overriding the
    model's. ``obstacles`` (or a prebuilt sphere model ``spheres``) give the collision cost.
    ``init``: warm-start path(s) (K, nq) / (P, K, nq) / (P, I, K, nq), e.g. CHOMP's; default the
    straight line. ``inits`` > 1 adds random ``init_scale`` bumps of the first path (PRNG ``key``).
    The best initialisation per problem (converged first, then lowest objective) is returned.
    Every solution is replayed open loop (``replay_integrator``, default the solve's, at
    ``replay_substeps`` steps per interval); a converged one that ends more than ``replay_tol`` rad
    from its final node warns (:class:`ReplayWarning`).
    """
    from caliper_jax.collision.scene import build_sphere_model
    from caliper_jax.ik.api import jit_model
    from caliper_jax.planning.sampling import as_key
    from caliper_jax.trajopt.chomp import initial_paths

    if model.nq != model.nv:
        raise CaliperError(f"trajopt_dynamic needs nq == nv; {model.name!r} has nq={model.nq}, nv={model.nv}")
    starts = np.atleast_2d(np.asarray(start, np.float64))
    P, nq = starts.shape
    if nq != model.nq or not np.all(np.isfinite(starts)):
        raise CaliperError(f"start: expected finite (P, {model.nq}), got shape {starts.shape}")
    pose_frame = -1
    if frame is not None:
        pose_frame = model.frame_id(frame)
        poses = np.asarray(goal, np.float64).reshape(-1, 4, 4)
        if poses.shape[0] == 1:
            poses = np.repeat(poses, P, 0)
        if poses.shape[0] != P or not np.all(np.isfinite(poses)):
            raise CaliperError(f"goal: with frame= expected finite (4, 4) or ({P}, 4, 4) poses, "
                               f"got {np.shape(goal)}")
        goals = starts.copy()
    else:
        goals = np.atleast_2d(np.asarray(goal, np.float64))
        if goals.shape != starts.shape or not np.all(np.isfinite(goals)):
            raise CaliperError(f"goal: expected finite {starts.shape} like start, got shape {goals.shape}")
        poses = np.repeat(np.eye(4)[None], P, 0)
    if objective not in OBJECTIVES:
        raise CaliperError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    if inits < 1:
        raise CaliperError(f"inits must be >= 1, got {inits}")
    timed = objective == "time" if free_time is None else bool(free_time)
    vmax, eff = _limits(model, limits)
    if duration is None and dt is not None:
        duration = horizon * float(dt)
    if duration is None:
        if not timed:
            raise CaliperError("a fixed-time problem needs dt= or duration=")
        ref = np.where(np.isfinite(vmax), vmax, 1.0) / 3.0
        duration = float(np.max(np.abs(goals - starts) / ref)) + 0.5
    if not (np.isfinite(duration) and duration > 0):
        raise CaliperError(f"duration/dt must be > 0, got {duration}")
    base = opts or DynamicOptions()
    opts = DynamicOptions(**{**base.__dict__, "horizon": horizon, "objective": objective, "free_time": timed,
                             "pose_frame": pose_frame}).check()
    if spheres is None:
        spheres, _ = build_sphere_model(model, obstacles, **scene_kw)
    paths = _as_paths(init, starts, goals if frame is None else starts, P, max(horizon + 1, 2))
    if inits > 1:
        k = as_key(key)
        extra = []
        for pi in range(P):
            line = initial_paths(jnp.asarray(paths[pi, 0, 0]), jnp.asarray(paths[pi, 0, -1]),
                                 jax.random.fold_in(k, pi), inits, paths.shape[2], init_scale)
            bump = np.asarray(line[1:], np.float64) - np.asarray(line[0], np.float64)[None]
            extra.append(paths[pi, :1] + bump)
        paths = np.concatenate([paths, np.stack(extra)], axis=1)
    lo, hi = np.asarray(model.qpos_lower, np.float64), np.asarray(model.qpos_upper, np.float64)
    paths = np.clip(paths, lo, hi)
    I = paths.shape[1]
    dtp = model.dtype
    problems = Problem(jnp.asarray(starts, dtp), jnp.asarray(goals, dtp), jnp.asarray(poses, dtp),
                       jnp.full((P,), duration, dtp), jnp.asarray(np.broadcast_to(vmax, (P, model.nv)), dtp),
                       jnp.asarray(np.broadcast_to(eff, (P, model.nv)), dtp))
    out = solve_batch(jit_model(model), spheres, problems, jnp.asarray(paths, dtp),
                      jnp.full((P, I), duration, dtp), opts)
    q, v, tau, T, f, viol, _ = (np.asarray(x, np.float64) for x in out)
    ok = np.isfinite(f) & (viol <= tol)
    pick = np.where(ok.any(axis=1), np.argmin(np.where(ok, f, np.inf), axis=1), np.argmin(viol, axis=1))
    r = np.arange(P)
    times = T[r, pick][:, None] * np.linspace(0.0, 1.0, horizon + 1)[None]
    res = DynamicResult(q[r, pick], v[r, pick], tau[r, pick], times, T[r, pick], ok[r, pick], viol[r, pick],
                        f[r, pick], pick, f, viol)
    return _with_replay(model, res, replay_integrator or opts.integrator, replay_substeps, replay_tol)


def _with_replay(model: Model, res: DynamicResult, integrator: str, substeps: int,
                 tol: float) -> DynamicResult:
    """``res`` with its open-loop replay error; warns for converged solutions that miss."""
    if not (np.isfinite(tol) and tol > 0):
        raise CaliperError(f"replay_tol must be a finite value > 0, got {tol!r}")
    qr, _ = replay(model, res.q[:, 0], res.tau, res.duration, v0=res.qd[:, 0], integrator=integrator,
                   substeps=substeps)
    err = np.abs(qr[:, -1] - res.q[:, -1]).max(axis=-1)
    err = np.where(np.isfinite(err), err, np.inf)
    res.replay_error, res.replay_ok = err, err <= tol
    res.replay_integrator, res.replay_substeps = integrator, int(substeps)
    N = res.tau.shape[1]
    for p in np.flatnonzero(res.converged & ~res.replay_ok):
        h = float(res.duration[p]) / N
        warnings.warn(f"trajopt_dynamic: problem {p} converged (violation {res.violation[p]:.2g}), but its "
                      f"torques replayed open loop with {integrator} at h/{substeps} = {h / substeps:.3g} s "
                      f"end "
                      f"{err[p]:.3g} rad from the goal (replay_tol {tol:g}): the step h = {h:.3g} s is too "
                      "coarse for this integrator -- use a larger horizon, opts integrator='rk4', or track "
                      "the trajectory with feedback", ReplayWarning, stacklevel=3)
    return res


__all__ = ["DynamicOptions", "DynamicResult", "OBJECTIVES", "Problem", "ReplayWarning", "defects",
           "equalities", "inequalities", "merit", "objective", "pack", "size", "replay", "solve",
           "solve_batch", "trajopt_dynamic", "unpack", "warm_start"]

"""Numerical inverse kinematics: damped least squares / Levenberg-Marquardt on the body-frame
pose error, with manipulability-gated damping, a per-step clamp, hard joint limits, joint locking,
and restarts solved together as a batch.

One target per call (``solve``); batch over targets with ``jax.vmap`` (``solve_batch`` does it),
jit at the caller. The iteration is one ``lax.while_loop`` that stops as soon as one restart has
converged (under ``vmap``: when every target of the batch has), so it is jittable end to end with
a fixed worst-case budget of ``max_iters`` iterations.

Error and step. With T the current pose of the frame and T* the target (both T_world_frame):
  pose      e = log6(T^-1 T*) in the frame's own axes, J = the LOCAL Jacobian;
  position  e = [R^T (p* - p); 0] (orientation free), the angular rows switched off;
  rotation  e = [0; log3(R^T R*)] (position free), the linear rows switched off.
Per-row weights W (6,) scale e and J (``pos_weight`` / ``rot_weight`` of the options, or a
traced ``weights`` argument, so one compiled solver serves every mode); a zero weight switches a
row off (it gets a unit diagonal in the solve and drops out of the manipulability).

The step is dq = J^T (J J^T + mu lambda^2 I)^-1 e, where lambda^2 = d (1 - w/w0)^2 when the
manipulability w = sqrt(det(J J^T)) < w0, else 0, floored at ``damping_floor``. It is scaled
so that no joint moves more than ``step_clamp``; locked joints get zero columns; a joint resting
on a limit that the descent direction J^T e pushes outward is dropped from J (an active set:
clamping alone stalls there); every iterate is clamped into the limits, so no returned q violates
them. Convergence: |p* - p| <= tol and rotation angle <= tol (for the rows switched on).

Levenberg-Marquardt acceptance: a step is kept only if it lowers |e|; the multiplier mu (1 at a
start) shrinks 10x after a kept step and grows 10x after a rejected one. At mu = 1 the damping
is exactly the gated schedule above; shrinking it lets near-singular but reachable targets
converge (a fixed lambda^2 = 1e-3 contracts the error along a singular value s only by
lambda^2 / (s^2 + lambda^2) per step, i.e. not at all for s ~ 1e-3).

Restarts: slot 0 starts from the seed, slots 1.. from uniform draws within the limits (+-pi
where a joint is unbounded) made from the PRNG key; locked joints keep the seed value. A slot
that stalls (|e| not halved within ``stall_iters`` iterations) takes the next draw of a pool made
from the same key. The draws depend on the key only, so a target's answer does not depend on its
place in a batch, and the same key gives the same bytes. Result: the lowest-index slot that
converged (the loop stops at the first convergence), else the slot with the lowest residual.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np

from caliper_jax.configuration import integrate_pos, random_configuration
from caliper_jax.ik.chain import frame_pose_jacobian
from caliper_jax.io.description import JOINT_NQ, JOINT_NV
from caliper_jax.model import Model
from caliper_jax.spatial import log6


@dataclasses.dataclass(frozen=True)
class IKOptions:
    """Solver settings (hashable: a static argument under jit). Defaults: caliper_facts.md."""

    tol: float = 1e-9               # on |p* - p| (m) and the rotation angle (rad)
    max_iters: int = 100            # steps per restart
    restarts: int = 8               # total attempts, the first from the seed
    step_clamp: float = 0.3         # max |dq_i| per step (rad or m)
    manip_threshold: float = 1e-3   # w0: damping switches on below this manipulability
    damping: float = 1e-3           # d: lambda^2 at w = 0
    damping_floor: float = 1e-10    # lambda^2 never below this
    pos_weight: float = 1.0         # 0: orientation only
    rot_weight: float = 1.0         # 0: position only
    unbounded_range: float = float(np.pi)  # restart draws for joints without limits
    stall_iters: int = 10           # a slot whose |e| is not halved in this many iterations
    pool: int = 8                   # restarts * pool draws are made (re-used cyclically)

    def __post_init__(self):
        checks = [
            (self.tol > 0, "tol must be > 0"),
            (int(self.max_iters) >= 1, "max_iters must be >= 1"),
            (int(self.restarts) >= 1, "restarts must be >= 1"),
            (int(self.stall_iters) >= 1 and int(self.pool) >= 1, "stall_iters and pool must be >= 1"),
            (self.step_clamp > 0, "step_clamp must be > 0"),
            (self.manip_threshold > 0, "manip_threshold must be > 0"),
            (self.damping >= 0 and self.damping_floor >= 0, "damping must be >= 0"),
            (self.pos_weight >= 0 and self.rot_weight >= 0, "weights must be >= 0"),
            (self.pos_weight > 0 or self.rot_weight > 0, "pos_weight and rot_weight cannot both be 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"IKOptions: {message}")


class IKResult(NamedTuple):
    """Per target: ``success`` (), ``q`` (nq,), ``pos_residual`` (), ``rot_residual`` (),
    ``iterations`` () of the returned restart, ``restart`` () its index (0 = the seed)."""

    success: jnp.ndarray
    q: jnp.ndarray
    pos_residual: jnp.ndarray
    rot_residual: jnp.ndarray
    iterations: jnp.ndarray
    restart: jnp.ndarray


def effective_tol(opts: IKOptions, dtype) -> float:
    """The tolerance actually used: ``opts.tol``, floored at 100 eps of the solve dtype (so a
    float32 solve asks for ~1.2e-5, a float64 one for the full 1e-9)."""
    return max(float(opts.tol), 100.0 * float(jnp.finfo(dtype).eps))


def free_masks(model: Model, locked=()):
    """Host side: (free_v (nv,), free_q (nq,)) boolean NumPy masks with the joints at the body
    indices ``locked`` switched off."""
    free_v, free_q = np.ones(model.nv, bool), np.ones(model.nq, bool)
    locked = set(locked)
    for i, jtype in enumerate(model.jnt_type):
        va = model.body_vadr[i]
        if model.vfull_mimic[va] >= 0 or i not in locked:
            continue
        v0, q0 = model.vfull_src[va], model.qfull_src[model.body_qadr[i]]
        free_v[v0:v0 + JOINT_NV[jtype]] = False
        free_q[q0:q0 + JOINT_NQ[jtype]] = False
    return free_v, free_q


def weights_from(opts: IKOptions, dtype=None):
    """The row weights (6,) [pos_weight x3, rot_weight x3] of the options."""
    return jnp.asarray([opts.pos_weight] * 3 + [opts.rot_weight] * 3, dtype)


def pose_error(model: Model, q, frame: int, R_t, p_t, weights):
    """(W e (6,), W J (6, nv), pos residual, rot residual) at q for the target (R_t, p_t)."""
    R, p, J = frame_pose_jacobian(model, q, frame, "local")
    R_err = R.T @ R_t
    p_err = R.T @ (p_t - p)
    twist = log6(R_err, p_err)
    rot_on = jnp.max(weights[3:]) > 0
    e = jnp.concatenate([jnp.where(rot_on, twist[:3], p_err), twist[3:]])
    return e * weights, J * weights[:, None], _norm(p_t - p), _norm(twist[3:])


def _norm(x):
    sq = jnp.sum(x * x)
    ok = sq > 0
    return jnp.where(ok, jnp.sqrt(jnp.where(ok, sq, 1.0)), 0.0)


def damping(J, opts: IKOptions, active=None):
    """(J J^T, lambda^2) for the Jacobian J: lambda^2 = d (1 - w / w0)^2 when
    w = sqrt(det(J J^T)) < w0, else 0; floored at ``damping_floor`` (and at 10 eps times the
    largest diagonal entry of J J^T, which keeps a float32 solve well posed; in float64
    ``damping_floor`` dominates). Rows off in ``active`` (bool (m,)) get a unit diagonal: they
    drop out of the determinant and decouple from the solve."""
    JJt = J @ J.T
    if active is not None:
        JJt = JJt + jnp.diag(jnp.where(active, 0.0, 1.0).astype(J.dtype))
    eps = jnp.finfo(J.dtype).eps
    floor = jnp.maximum(opts.damping_floor, 10.0 * eps * jnp.max(jnp.diagonal(JJt)))
    w = jnp.sqrt(jnp.maximum(jnp.linalg.det(JJt), 0.0))
    w0 = opts.manip_threshold
    lam2 = jnp.where(w < w0, opts.damping * (1.0 - w / w0) ** 2, 0.0)
    return JJt, jnp.maximum(lam2, floor)


def dls_step(J, e, opts: IKOptions, mu=1.0, active=None):
    """Damped least-squares step J^T (J J^T + mu lambda^2 I)^-1 e with manipulability gating
    (rows off in ``active`` must carry zero e and J)."""
    JJt, lam2 = damping(J, opts, active)
    A = JJt + mu * lam2 * jnp.eye(JJt.shape[0], dtype=J.dtype)
    return J.T @ jsl.cho_solve(jsl.cho_factor(A, lower=True), e[:, None])[:, 0]


def _dof_limits(model: Model):
    """Per dof: the q index of its coordinate, and its limits (-inf/inf for ball/free dofs)."""
    dof_q = np.zeros(model.nv, np.int64)
    bounded = np.zeros(model.nv, bool)
    for i, jtype in enumerate(model.jnt_type):
        va = model.body_vadr[i]
        if model.vfull_mimic[va] < 0 and jtype in ("revolute", "prismatic"):
            v = model.vfull_src[va]
            dof_q[v], bounded[v] = model.qfull_src[model.body_qadr[i]], True
    inf = jnp.asarray(np.inf, model.dtype)
    lower = jnp.where(bounded, model.qpos_lower[dof_q], -inf)
    upper = jnp.where(bounded, model.qpos_upper[dof_q], inf)
    return dof_q, lower, upper


def _clamp_step(dq, step_clamp):
    biggest = jnp.max(jnp.abs(dq))
    return dq * jnp.minimum(1.0, step_clamp / jnp.maximum(biggest, step_clamp))


def _project(q, seed, lower, upper, free_q):
    """Clamp free coordinates into the limits; locked ones stay exactly at the seed."""
    return jnp.where(free_q, jnp.clip(q, lower, upper), seed)


def restart_draws(model: Model, key, count: int, opts: IKOptions):
    """(count, nq) uniform draws within the limits (+-``unbounded_range`` where a joint has
    none) from ``key`` -- the same for every target."""
    lower, upper = model.qpos_lower, model.qpos_upper
    if all(t in ("revolute", "prismatic") for t in model.jnt_type):
        lo = jnp.where(jnp.isfinite(lower), lower, -opts.unbounded_range)
        hi = jnp.where(jnp.isfinite(upper), upper, opts.unbounded_range)
        return jax.random.uniform(key, (count, model.nq), dtype=model.dtype, minval=lo, maxval=hi)
    keys = jax.random.split(key, count)                    # quaternion coordinates
    draws = jax.vmap(lambda k: random_configuration(model, k, opts.unbounded_range))(keys)
    return draws.astype(model.dtype)


def restart_configurations(model: Model, key, seed, free_q, opts: IKOptions, count=None):
    """(count, nq) starting points (default ``opts.restarts``): the seed (clamped into the
    limits), then uniform draws within the limits from ``key``; locked coordinates keep the
    seed value."""
    count = opts.restarts if count is None else count
    seed = _project(seed, seed, model.qpos_lower, model.qpos_upper, free_q)
    if count == 1:
        return seed[None]
    draws = jnp.where(free_q, restart_draws(model, key, count - 1, opts), seed)
    return jnp.concatenate([seed[None], draws], axis=0)


class SlotState(NamedTuple):
    """Per restart slot (leading axis: restarts): the accepted iterate and its evaluation, the
    LM multiplier, the stall bookkeeping."""

    q: jnp.ndarray
    e: jnp.ndarray
    J: jnp.ndarray
    pos_residual: jnp.ndarray
    rot_residual: jnp.ndarray
    conv: jnp.ndarray
    cost: jnp.ndarray
    mu: jnp.ndarray
    ref: jnp.ndarray
    count: jnp.ndarray
    fresh: jnp.ndarray
    draws: jnp.ndarray
    iters: jnp.ndarray


class SolveState(NamedTuple):
    """Everything one target's solve carries between ``advance`` calls (a pytree: vmap, slice,
    concatenate it freely)."""

    slots: SlotState
    it: jnp.ndarray          # () passes made (the first evaluates the starting points)
    target: jnp.ndarray      # (4, 4)
    seed: jnp.ndarray        # (nq,) clamped seed


def init_state(model: Model, target_T, seed, free_q=None, *,
               opts: IKOptions = IKOptions()) -> SolveState:
    """The state before the first pass: every slot fresh (its start comes from the pool)."""
    dtype = model.dtype
    free_q = jnp.ones(model.nq, bool) if free_q is None else jnp.asarray(free_q, bool)
    seed = jnp.asarray(seed, dtype)
    seed = _project(seed, seed, model.qpos_lower, model.qpos_upper, free_q)
    n = opts.restarts
    z = lambda *shape, dt=dtype: jnp.zeros((n,) + shape, dt)
    inf = jnp.full((n,), jnp.inf, dtype)
    slots = SlotState(q=jnp.broadcast_to(seed, (n, model.nq)), e=z(6), J=z(6, model.nv), pos_residual=inf,
                      rot_residual=inf, conv=z(dt=bool), cost=inf, mu=jnp.ones(n, dtype), ref=inf,
                      count=z(dt=jnp.int32), fresh=jnp.ones(n, bool), draws=z(dt=jnp.int32),
                      iters=z(dt=jnp.int32))
    return SolveState(slots, jnp.zeros((), jnp.int32), jnp.asarray(target_T, dtype), seed)


def running(state: SolveState, opts: IKOptions):
    """Whether the target still iterates: not yet evaluated, or no slot converged and budget left."""
    return (state.it == 0) | ((state.it <= opts.max_iters) & ~jnp.any(state.slots.conv))


def advance(model: Model, state: SolveState, key, free_v=None, free_q=None, weights=None, passes=None,
            *, frame: int, opts: IKOptions = IKOptions()) -> SolveState:
    """Up to ``passes`` more iterations (default: to the end) of one target's solve."""
    dtype = model.dtype
    R_t, p_t, seed = state.target[:3, :3], state.target[:3, 3], state.seed
    free_v = jnp.ones(model.nv, bool) if free_v is None else jnp.asarray(free_v, bool)
    free_q = jnp.ones(model.nq, bool) if free_q is None else jnp.asarray(free_q, bool)
    weights = weights_from(opts, dtype) if weights is None else jnp.asarray(weights, dtype)
    passes = opts.max_iters + 1 if passes is None else passes
    active = weights > 0
    pos_on, rot_on = jnp.any(active[:3]), jnp.any(active[3:])
    lower, upper = model.qpos_lower, model.qpos_upper
    tol = effective_tol(opts, dtype)
    dof_q, lower_v, upper_v = _dof_limits(model)
    # only 1-dof joints: q and v coordinates coincide, integration is addition
    simple = model.nq == model.nv and all(t in ("revolute", "prismatic") for t in model.jnt_type)
    n = opts.restarts
    draws = restart_draws(model, key, n * opts.pool - 1, opts)
    pool = jnp.concatenate([seed[None], jnp.where(free_q, draws, seed)])

    def evaluate(q):
        e, J, pos_res, rot_res = pose_error(model, q, frame, R_t, p_t, weights)
        conv = (~pos_on | (pos_res <= tol)) & (~rot_on | (rot_res <= tol))
        cost = jnp.sum(e * e)
        return e, jnp.where(free_v[None, :], J, 0.0), pos_res, rot_res, conv, jnp.where(
            jnp.isfinite(cost), cost, jnp.inf)

    def propose(q, e, J, mu):
        g = J.T @ e                                     # descent direction of |e|^2 / 2
        qv = q if simple else q[dof_q]
        blocked = ((qv <= lower_v) & (g < 0)) | ((qv >= upper_v) & (g > 0))
        dq = dls_step(jnp.where(blocked[None, :], 0.0, J), e, opts, mu, active)
        dq = _clamp_step(jnp.where(blocked, 0.0, dq), opts.step_clamp)
        q_next = q + dq if simple else integrate_pos(model, q, dq)
        return _project(q_next, seed, lower, upper, free_q)

    def slot_update(q_new, st: SlotState) -> SlotState:
        """One slot: evaluate the proposal, keep it if better (or fresh), update mu / stall."""
        e1, J1, pos1, rot1, conv1, cost1 = evaluate(q_new)
        keep = st.fresh | (cost1 < st.cost)
        pick = lambda a, b: jnp.where(keep, a, b)
        cost = pick(cost1, st.cost)
        conv = pick(conv1, st.conv)
        mu = jnp.where(keep, jnp.maximum(st.mu * 0.1, 1e-12), jnp.minimum(st.mu * 10.0, 1e12))
        improved = st.fresh | (cost < 0.25 * st.ref)       # |e| halved
        count = jnp.where(improved, 0, st.count + 1)
        stalled = (count >= opts.stall_iters) & ~conv
        return SlotState(q=pick(q_new, st.q), e=pick(e1, st.e), J=pick(J1, st.J),
                         pos_residual=pick(pos1, st.pos_residual), rot_residual=pick(rot1, st.rot_residual),
                         conv=conv, cost=cost, mu=jnp.where(st.fresh, 1.0, mu),
                         ref=jnp.where(improved, cost, st.ref), count=jnp.where(stalled, 0, count),
                         fresh=stalled, draws=st.draws + stalled.astype(jnp.int32),
                         iters=st.iters + (~st.fresh).astype(jnp.int32))

    def cond(carry):
        state, k = carry
        return (k < passes) & running(state, opts)

    def body(carry):
        state, k = carry
        st = state.slots
        restart = pool[(jnp.arange(n) + n * st.draws) % pool.shape[0]]
        q_new = jnp.where(st.fresh[:, None], restart, jax.vmap(propose)(st.q, st.e, st.J, st.mu))
        return state._replace(slots=jax.vmap(slot_update)(q_new, st), it=state.it + 1), k + 1

    state, _ = jax.lax.while_loop(cond, body, (state, jnp.zeros((), jnp.int32)))
    return state


def finish(state: SolveState, weights=None, opts: IKOptions = IKOptions()) -> IKResult:
    """The answer of a (finished or interrupted) solve: the lowest-index converged slot, else the
    slot with the lowest residual."""
    st = state.slots
    dtype = st.q.dtype
    weights = weights_from(opts, dtype) if weights is None else jnp.asarray(weights, dtype)
    wp, wr = jnp.max(weights[:3]), jnp.max(weights[3:])
    cost = jnp.sqrt((wp * st.pos_residual) ** 2 + (wr * st.rot_residual) ** 2)
    cost = jnp.where(jnp.isfinite(cost), cost, jnp.inf)
    best = jnp.where(jnp.any(st.conv), jnp.argmax(st.conv), jnp.argmin(cost))
    return IKResult(success=st.conv[best], q=st.q[best], pos_residual=st.pos_residual[best],
                    rot_residual=st.rot_residual[best], iterations=st.iters[best],
                    restart=best.astype(jnp.int32))


def solve(model: Model, target_T, seed, key, free_v=None, free_q=None, weights=None, *, frame: int,
          opts: IKOptions = IKOptions()) -> IKResult:
    """Solve one target ``target_T`` (4, 4) T_world_frame for ``frame`` from ``seed`` (nq,).

    ``free_v`` (nv,) / ``free_q`` (nq,) boolean masks lock joints (default: all free); ``key`` a
    PRNG key for the restart draws; ``weights`` (6,) row weights (default from ``opts``; this
    argument overrides the options' weights and may be traced). Pure: jit / vmap at the caller.
    Equal to ``finish(advance(init_state(...)))``; the pieces let a caller stop, compact and
    resume a large batch (see ``caliper_jax.ik.api``)."""
    state = init_state(model, target_T, seed, free_q, opts=opts)
    state = advance(model, state, key, free_v, free_q, weights, frame=frame, opts=opts)
    return finish(state, weights, opts)


def solve_batch(model: Model, targets_T, seeds, key, free_v=None, free_q=None, weights=None, *,
                frame: int, opts: IKOptions = IKOptions()) -> IKResult:
    """``solve`` vmapped over targets (B, 4, 4) and seeds (B, nq); key, masks, weights shared."""
    fn = lambda T, s: solve(model, T, s, key, free_v, free_q, weights, frame=frame, opts=opts)
    return jax.vmap(fn)(targets_T, seeds)


def solve_compacting(model: Model, targets_T, seeds, key, free_v=None, free_q=None, weights=None, *,
                     frame: int, opts: IKOptions = IKOptions(), chunk: int = 128,
                     passes: int = 16) -> IKResult:
    """``solve_batch`` for a large batch (B, 4, 4), wholly on device (one jittable function): a
    ``lax.while_loop`` advances ``chunk`` lanes ``passes`` iterations at a time, each round
    gathering the lowest-index targets still running (``jnp.nonzero`` with a static size) and
    scattering them back, so finished targets stop costing work without a host round trip.
    Per target the arithmetic is that of ``solve`` (its state is carried whole)."""
    B = targets_T.shape[0]
    chunk = max(1, min(int(chunk), B))
    states = jax.vmap(lambda T, s: init_state(model, T, s, free_q, opts=opts))(targets_T, seeds)
    step = lambda st: advance(model, st, key, free_v, free_q, weights, passes, frame=frame, opts=opts)

    def body(carry):
        states, run = carry
        idx = jnp.nonzero(run, size=chunk, fill_value=B)[0]       # B: a padding lane, dropped below
        sub = jax.tree_util.tree_map(lambda x: x[jnp.minimum(idx, B - 1)], states)
        sub = jax.vmap(step)(sub)
        states = jax.tree_util.tree_map(lambda x, y: x.at[idx].set(y, mode="drop"), states, sub)
        run = run.at[idx].set(jax.vmap(lambda st: running(st, opts))(sub), mode="drop")
        return states, run

    states, _ = jax.lax.while_loop(lambda c: jnp.any(c[1]), body, (states, jnp.ones(B, bool)))
    return jax.vmap(lambda st: finish(st, weights, opts))(states)


__all__ = ["IKOptions", "IKResult", "SlotState", "SolveState", "effective_tol", "free_masks",
           "weights_from", "pose_error", "dls_step", "restart_draws", "restart_configurations", "init_state",
           "running", "advance", "finish", "solve", "solve_batch", "solve_compacting"]

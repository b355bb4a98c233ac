"""NumPy-in, NumPy-out faces of IK, analytic IK and singularity analysis.

Poses in and out: 4x4 ``T_world_frame`` row-major (``caliper_jax.ik.poses.LAYOUT``), the layout
``caliper_jax.api.fk`` returns, so ``ik(model, fk(model, q)[..., frame, :, :])`` round-trips.
Inputs may carry leading batch dimensions; every batch is solved by one jitted, vmapped call.
"""
from __future__ import annotations

import dataclasses
import re
from functools import lru_cache
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.api import _as_array, _batched
from caliper_jax.errors import CaliperError
from caliper_jax.ik import analytic, chain, implicit, numerical, singularity
from caliper_jax.ik.poses import as_poses, pose_from_position
from caliper_jax.model import Model

GRIPPER_WORDS = re.compile(r"gripper|finger|jaw|claw|hand", re.IGNORECASE)
TOOL_WORDS = re.compile(r"tcp|tool|eef|ee_link|end_effector|flange", re.IGNORECASE)


# ---- frames, joints, seeds ---------------------------------------------------------------------

def default_frame(model: Model) -> str:
    """The tool frame when none is named: the last link frame on the deepest body that is neither
    a gripper joint nor below one (preferring tcp / tool / eef / end_effector / flange names,
    then names without gripper words). Gripper joints: a joint whose name contains gripper / finger /
    jaw / claw / hand, a mimic joint, and the most distal joint whose child link's name does."""
    def child_link(body):
        return next((n for n, b, k in zip(model.frame_names, model.frame_body, model.frame_kind, strict=True)
                     if b == body and k == "link"), "")

    mimic = {b for b in range(model.nbody) if model.vfull_mimic[model.body_vadr[b]] >= 0}
    grip = {b for b in range(model.nbody) if GRIPPER_WORDS.search(model.body_names[b])} | mimic
    by_child = [b for b in range(model.nbody) if GRIPPER_WORDS.search(child_link(b)) and b not in mimic]
    if by_child:
        grip.add(max(by_child, key=lambda b: (len(model.supports(b)), b)))
    arm = [b for b in range(model.nbody) if not any(a in grip for a in model.supports(b))]
    if not arm:
        arm = list(range(model.nbody))
    if not arm:
        raise CaliperError(f"robot {model.name!r} has no moving joints")
    best = max(arm, key=lambda b: (len(model.supports(b)), b))
    links = [i for i, (b, k) in enumerate(zip(model.frame_body, model.frame_kind, strict=True))
             if b == best and k == "link"]
    frames = links or [i for i, b in enumerate(model.frame_body) if b == best]
    tool = [i for i in frames if TOOL_WORDS.search(model.frame_names[i])]
    plain = [i for i in frames if not GRIPPER_WORDS.search(model.frame_names[i])]
    return model.frame_names[(tool or plain or frames)[-1]]


def resolve_frame(model: Model, frame) -> tuple[int, str]:
    """(index, name) of a frame given by name, index or None (the default tool frame)."""
    if frame is None:
        frame = default_frame(model)
    if isinstance(frame, (int, np.integer)):
        if not 0 <= int(frame) < model.nframe:
            raise CaliperError(f"frame index {frame} out of range for {model.name!r} ({model.nframe} frames)")
        idx = int(frame)
    else:
        idx = model.frame_id(str(frame))
    if model.frame_body[idx] < 0:
        raise CaliperError(f"frame {model.frame_names[idx]!r} is fixed to the world: no joint moves it")
    return idx, model.frame_names[idx]


def locked_bodies(model: Model, locked) -> tuple:
    """Joint names (or body indices) -> body indices, with a clear error for unknown names."""
    out = []
    for item in locked or ():
        if isinstance(item, (int, np.integer)):
            if not 0 <= int(item) < model.nbody:
                raise CaliperError(f"locked: joint index {item} out of range")
            out.append(int(item))
        else:
            b = model.body_id(str(item))
            if model.vfull_mimic[model.body_vadr[b]] >= 0:
                raise CaliperError(f"locked: {item!r} is a mimic joint; lock its source joint instead")
            out.append(b)
    return tuple(sorted(set(out)))


def default_seed(model: Model) -> np.ndarray:
    """Mid-range of each bounded coordinate, the neutral value elsewhere."""
    from caliper_jax.configuration import neutral

    lo, hi = np.asarray(model.qpos_lower, np.float64), np.asarray(model.qpos_upper, np.float64)
    one_dof = all(t in ("revolute", "prismatic") for t in model.jnt_type)
    q = np.zeros(model.nq) if one_dof else np.asarray(neutral(model), np.float64)
    bounded = np.isfinite(lo) & np.isfinite(hi)
    return np.where(bounded, 0.5 * (lo + hi), q)


jit_model = chain.for_jit


@lru_cache(maxsize=64)
def _int_key(seed: int):
    return jax.random.PRNGKey(seed)


def _key(key):
    if key is None:
        key = 0
    if isinstance(key, (int, np.integer)):
        return _int_key(int(key))
    return jnp.asarray(key)


# ---- numerical IK --------------------------------------------------------------------------------

class IKSolution(NamedTuple):
    """NumPy arrays with the targets' batch shape: ``success`` (...,), ``q`` (..., nq),
    ``pos_residual`` (...,) m, ``rot_residual`` (...,) rad, ``iterations`` (...,), ``restart``
    (...,) the slot that produced q (0 = the seed); ``frame`` the frame name."""

    success: np.ndarray
    q: np.ndarray
    pos_residual: np.ndarray
    rot_residual: np.ndarray
    iterations: np.ndarray
    restart: np.ndarray
    frame: str


@lru_cache(maxsize=None)
def _ik_fn(frame: int, opts: numerical.IKOptions):
    """jit(vmap(solve)) for one frame and solver settings; the weights, masks, key and seeds are
    traced arguments, so pose / position-only / weighted / locked solves share one compile."""
    def run(model, targets, seeds, key, free_v, free_q, weights):
        return numerical.solve_batch(model, targets, seeds, key, free_v, free_q, weights, frame=frame,
                                     opts=opts)

    return jax.jit(run)


CHUNK = 128      # lanes per compiled call when a batch is larger than this
PASSES = 16      # iterations between compactions of a large batch


@lru_cache(maxsize=None)
def _chunk_fns(frame: int, opts: numerical.IKOptions):
    """Jitted pieces of the compacting solve, all compiled for CHUNK lanes."""
    def init(model, targets, seeds, free_q):
        return jax.vmap(lambda T, s: numerical.init_state(model, T, s, free_q, opts=opts))(targets, seeds)

    def advance(model, states, key, free_v, free_q, weights, passes):
        step = lambda st: numerical.advance(model, st, key, free_v, free_q, weights, passes, frame=frame,
                                            opts=opts)
        states = jax.vmap(step)(states)
        return states, jax.vmap(lambda st: numerical.running(st, opts))(states)

    def finish(states, weights):
        return jax.vmap(lambda st: numerical.finish(st, weights, opts))(states)

    return jax.jit(init), jax.jit(advance), jax.jit(finish)


def _solve_compacting(model, targets, seeds, key, free_v, free_q, weights, frame, opts):
    """Solve a large batch CHUNK lanes at a time, PASSES iterations at a time, carrying only the
    targets still running into the next round. Per target the arithmetic is that of
    ``numerical.solve`` (the state is carried whole); the work stops tracking the slowest target
    of the batch, which on CPU is most of the cost of one big vmapped loop."""
    init, advance, finish = _chunk_fns(frame, opts)
    B = targets.shape[0]
    pad = lambda idx: np.concatenate([idx, np.full(CHUNK - len(idx), idx[0])]) if len(idx) < CHUNK else idx
    chunks = [pad(np.arange(i, min(i + CHUNK, B))) for i in range(0, B, CHUNK)]
    parts = [init(model, targets[c], seeds[c], free_q) for c in chunks]
    host = jax.tree_util.tree_map(lambda *xs: np.concatenate([np.asarray(x) for x in xs])[:B], *parts)
    active = np.arange(B)
    while active.size:
        still = []
        for i in range(0, active.size, CHUNK):
            real = active[i:i + CHUNK]
            idx = pad(real)
            sub = jax.tree_util.tree_map(lambda x, idx=idx: jnp.asarray(x[idx]), host)
            sub, run = advance(model, sub, key, free_v, free_q, weights, PASSES)
            n = len(real)
            for dst, src in zip(jax.tree_util.tree_leaves(host), jax.tree_util.tree_leaves(sub), strict=True):
                dst[real] = np.asarray(src)[:n]
            still.append(real[np.asarray(run)[:n]])
        active = np.concatenate(still)
    outs = [finish(jax.tree_util.tree_map(lambda x, c=c: jnp.asarray(x[c]), host), weights) for c in
            (pad(np.arange(i, min(i + CHUNK, B))) for i in range(0, B, CHUNK))]
    return jax.tree_util.tree_map(lambda *xs: np.concatenate([np.asarray(x) for x in xs])[:B], *outs)


def ik_options(**overrides) -> numerical.IKOptions:
    try:
        return numerical.IKOptions(**overrides)
    except (TypeError, ValueError) as exc:
        raise CaliperError(str(exc)) from None


class _Prepared(NamedTuple):
    batch: tuple
    frame_idx: int
    frame_name: str
    opts: numerical.IKOptions          # weights folded to 1 (they travel as a traced argument)
    args: tuple      # (model, targets (B, 4, 4), seeds (B, nq), key, free_v, free_q, weights)


def _prepare(model: Model, target_T, frame, seed_q, key, locked, position_only, options,
             overrides) -> _Prepared:
    """Validate the NumPy inputs of ``ik`` on the host and build the solver's arguments."""
    targets = as_poses(target_T, "target")
    frame_idx, frame_name = resolve_frame(model, frame)
    opts = options or numerical.IKOptions()
    if position_only:
        overrides.setdefault("rot_weight", 0.0)
    if overrides:
        try:
            opts = dataclasses.replace(opts, **overrides)
        except (TypeError, ValueError) as exc:
            raise CaliperError(str(exc)) from None
    batch = targets.shape[:-2]
    flat = targets.reshape((-1, 4, 4))
    seed = default_seed(model) if seed_q is None else np.asarray(seed_q, np.float64)
    if seed.shape[-1:] != (model.nq,) or not np.all(np.isfinite(seed)):
        raise CaliperError(f"seed_q: expected {model.nq} finite values per target, got shape {seed.shape}")
    try:
        seeds = np.broadcast_to(seed, batch + (model.nq,)).reshape(-1, model.nq)
    except ValueError:
        raise CaliperError(f"seed_q: shape {seed.shape} does not match the targets' batch {batch}") from None
    bodies = locked_bodies(model, locked)
    free_v, free_q = numerical.free_masks(model, bodies)
    lo, hi = np.asarray(model.qpos_lower), np.asarray(model.qpos_upper)
    outside = (~free_q) & ((seeds < lo) | (seeds > hi))
    if np.any(outside):
        j = int(np.argmax(outside.any(axis=0)))
        raise CaliperError(f"locked: coordinate {j} of seed_q is outside its limits "
                           f"[{lo[j]:.6g}, {hi[j]:.6g}]")
    dtype = model.dtype
    weights = np.array([opts.pos_weight] * 3 + [opts.rot_weight] * 3, dtype=np.dtype(dtype))
    static_opts = dataclasses.replace(opts, pos_weight=1.0, rot_weight=1.0)
    args = (jit_model(model), jnp.asarray(flat, dtype), jnp.asarray(seeds, dtype), _key(key),
            jnp.asarray(free_v), jnp.asarray(free_q), weights)
    return _Prepared(batch, frame_idx, frame_name, static_opts, args)


COMPACT_MODES = (True, False, "host", "device")


def ik(model: Model, target_T, *, frame=None, seed_q=None, key=0, locked=(), position_only: bool = False,
       options: numerical.IKOptions | None = None, compact=True, **overrides) -> IKSolution:
    """Numerical IK for targets (..., 4, 4) T_world_frame (row-major) of ``frame``.

    ``seed_q`` (nq,) or (..., nq) the first restart (default: mid-range of the limits);
    ``key`` int or PRNG key for the other restarts; ``locked`` joint names kept at the seed;
    ``position_only`` ignores the target rotation; ``overrides`` set ``IKOptions`` fields.
    Up to CHUNK targets are one jitted call. Larger batches (``compact``): ``True`` / ``"host"``
    run CHUNK at a time with the unconverged targets compacted on the host every PASSES
    iterations; ``"device"`` does the same compaction inside one jitted call
    (``numerical.solve_compacting``: no host round trip); ``False`` one vmapped call."""
    if compact not in COMPACT_MODES:
        raise CaliperError(f"compact: expected one of {COMPACT_MODES}, got {compact!r}")
    prep = _prepare(model, target_T, frame, seed_q, key, locked, position_only, options, overrides)
    frame_idx, static_opts, args, batch = prep.frame_idx, prep.opts, prep.args, prep.batch
    if args[1].shape[0] > CHUNK and compact in (True, "host"):
        res = _solve_compacting(*args, frame_idx, static_opts)
    elif args[1].shape[0] > CHUNK and compact == "device":
        res = _device_fn(frame_idx, static_opts, CHUNK, PASSES)(*args)
    else:
        res = _ik_fn(frame_idx, static_opts)(*args)
    shape = lambda x, tail=(): np.asarray(x).reshape(batch + tail)
    return IKSolution(success=shape(res.success), q=shape(res.q, (model.nq,)),
                      pos_residual=shape(res.pos_residual), rot_residual=shape(res.rot_residual),
                      iterations=shape(res.iterations), restart=shape(res.restart), frame=prep.frame_name)


@lru_cache(maxsize=None)
def _device_fn(frame: int, opts: numerical.IKOptions, chunk: int, passes: int):
    def run(model, targets, seeds, key, free_v, free_q, weights):
        return numerical.solve_compacting(model, targets, seeds, key, free_v, free_q, weights, frame=frame,
                                          opts=opts, chunk=chunk, passes=passes)

    return jax.jit(run)


@lru_cache(maxsize=None)
def _sensitivity_fn(frame: int, opts: numerical.IKOptions):
    def run(model, q, targets, success, free_v, weights):
        one = lambda qq, T, ok: implicit.twist_sensitivity(model, qq, T, ok, free_v, weights, frame=frame,
                                                           opts=opts)
        return jax.vmap(one)(q, targets, success)

    return jax.jit(run)


def ik_sensitivity(model: Model, target_T, *, frame=None, seed_q=None, key=0, locked=(),
                   position_only: bool = False, options: numerical.IKOptions | None = None,
                   **overrides) -> tuple[IKSolution, np.ndarray]:
    """``ik`` plus the implicit-function derivative of each solution with respect to its target:
    ``(solution, dq_dxi)`` with ``dq_dxi`` (..., nq, 6) = dq* / dxi for the target moved in its own
    axes, T*(xi) = T* exp(xi), xi = [v (m); w (rad)] (``caliper_jax.ik.implicit``). Zero for the
    targets that did not converge (``solution.success`` False), for locked joints and for joints
    resting on a limit; finite at singular configurations (damped). For gradients inside JAX
    (with respect to the target or the Model's parameters) use ``implicit.solve_diff``."""
    prep = _prepare(model, target_T, frame, seed_q, key, locked, position_only, options, dict(overrides))
    sol = ik(model, target_T, frame=frame, seed_q=seed_q, key=key, locked=locked, position_only=position_only,
             options=options, **overrides)
    m, targets, _, _, free_v, _, weights = prep.args
    q = jnp.asarray(sol.q.reshape(-1, model.nq), model.dtype)
    ok = jnp.asarray(sol.success.reshape(-1))
    dq = _sensitivity_fn(prep.frame_idx, prep.opts)(m, q, targets, ok, free_v, weights)
    return sol, np.asarray(dq).reshape(prep.batch + (model.nq, 6))


def ik_position(model: Model, position, **kwargs) -> IKSolution:
    """Position-only IK for points (..., 3) of ``frame`` (orientation free)."""
    return ik(model, pose_from_position(position, "position"), position_only=True, **kwargs)


# ---- analytic IK -------------------------------------------------------------------------------

class AnalyticSolution(NamedTuple):
    """``q`` (..., 8, nq), ``valid`` (..., 8), ``pos_residual`` / ``rot_residual`` (..., 8)."""

    q: np.ndarray
    valid: np.ndarray
    pos_residual: np.ndarray
    rot_residual: np.ndarray
    frame: str


_GEOMETRY: dict = {}


def _fitted(model: Model, frame: int) -> analytic.URGeometry:
    """``analytic.fit_ur``, cached on the kinematic leaves' bytes and the frame."""
    leaves = (model.jnt_R, model.jnt_p, model.jnt_axis, model.frame_R, model.frame_p)
    key = (model.body_parent, model.jnt_type, model.frame_names, frame,
           tuple(np.asarray(x).tobytes() for x in leaves))
    if key not in _GEOMETRY:
        if len(_GEOMETRY) > 64:
            _GEOMETRY.clear()
        _GEOMETRY[key] = analytic.fit_ur(model, frame)
    return _GEOMETRY[key]


@lru_cache(maxsize=None)
def _analytic_fn(frame: int, q_index: tuple, x64: bool):
    # one closure per jax_enable_x64 setting: JAX can replay the NumPy index array, first traced
    # with x64 off, as an int32 constant in a float64 trace (see model.tables)
    geom = analytic.URGeometry(frame, None, None, None, None, None, None, np.array(q_index), 0.0)

    def run(model, params, targets, refs, tol):
        return jax.vmap(lambda t, r: analytic.solve(model, geom, t, r, tol, params=params))(targets, refs)

    return jax.jit(run)


def analytic_ik(model: Model, target_T, *, frame=None, reference_q=None,
                tol: float = 1e-6) -> AnalyticSolution:
    """Every closed-form branch (8) for UR-type 6R arms, for targets (..., 4, 4)."""
    targets = as_poses(target_T, "target")
    frame_idx, frame_name = resolve_frame(model, frame)
    geom = _fitted(model, frame_idx)
    solver = _analytic_fn(frame_idx, tuple(int(i) for i in geom.q_index), bool(jax.config.jax_enable_x64))
    batch = targets.shape[:-2]
    ref = np.zeros(model.nq) if reference_q is None else np.asarray(reference_q, np.float64)
    if ref.shape[-1:] != (model.nq,):
        raise CaliperError(f"reference_q: expected {model.nq} values, got shape {ref.shape}")
    refs = np.broadcast_to(ref, batch + (model.nq,)).reshape(-1, model.nq)
    dtype = model.dtype
    flat = jnp.asarray(targets.reshape(-1, 4, 4), dtype)
    res = solver(jit_model(model), analytic.params_of(geom, dtype), flat, jnp.asarray(refs, dtype),
                 jnp.asarray(tol, dtype))
    shape = lambda x, tail=(): np.asarray(x).reshape(batch + (8,) + tail)
    return AnalyticSolution(q=shape(res.q, (model.nq,)), valid=shape(res.valid),
                            pos_residual=shape(res.pos_residual), rot_residual=shape(res.rot_residual),
                            frame=frame_name)


# ---- singularity analysis ------------------------------------------------------------------------

def analyze(model: Model, q, *, frame=None) -> dict:
    """Singularity metrics of ``frame`` at configurations q (..., nq): a dict of NumPy arrays
    (see ``singularity.metrics``) plus ``frame``."""
    frame_idx, frame_name = resolve_frame(model, frame)
    qa = _as_array(model, q, model.nq, "q")
    fn = _batched(singularity.metrics, 1, qa.ndim - 1, (frame_idx,))
    out = jax.tree_util.tree_map(np.asarray, fn(jit_model(model), qa))
    out["frame"] = frame_name
    return out


__all__ = ["default_frame", "resolve_frame", "locked_bodies", "default_seed", "IKSolution", "ik_options",
           "ik", "ik_sensitivity", "ik_position", "AnalyticSolution", "analytic_ik", "analyze"]

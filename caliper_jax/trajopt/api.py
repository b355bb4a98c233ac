"""NumPy-in, NumPy-out CHOMP over many problems and initialisations in one jitted call.

Each problem is optimised from ``inits`` initial paths at once (``vmap`` over problems and over
initialisations); candidates are then checked with the *exact* colliders at the edge resolution,
cheapest first, and the cheapest collision-free one is returned.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.collision import query
from caliper_jax.collision.scene import CollisionModel, build_collision_model, build_sphere_model
from caliper_jax.errors import CaliperError
from caliper_jax.model import Model
from caliper_jax.planning.sampling import as_key
from caliper_jax.planning.validity import Checker
from caliper_jax.trajopt.chomp import ChompOptions, initial_paths, optimize


@partial(jax.jit, static_argnames=("opts",))
def solve_batch(model, spheres, starts, goals, inits, opts: ChompOptions, free=None):
    """vmap over problems (P) and initialisations (K): inits (P, K, n, nq) ->
    (paths (P, K, n, nq), costs (P, K), traces (P, K, iterations)). ``free`` (P, nq) bool: the
    joints each problem may move (default all)."""
    if free is None:
        free = jnp.ones(starts.shape, bool)
    one = lambda s, g, i, f: optimize(model, spheres, s, g, i, opts, free=f)
    return jax.vmap(lambda s, g, ks, f: jax.vmap(lambda i: one(s, g, i, f))(ks))(starts, goals, inits, free)


def free_joints(model: Model, starts, goals, free=None) -> np.ndarray:
    """(P, nq) bool: which joints each problem may move. Default: the joints whose start and goal
    differ -- a joint the problem does not ask to move (a gripper finger, a mimic source, a wrist at
    the same angle at both ends) stays where it is. ``free``: joint names (or a (nq,) / (P, nq) bool
    mask) that may move as well, to let the optimiser use them to go around obstacles."""
    starts, goals = np.atleast_2d(starts), np.atleast_2d(goals)
    moving = starts != goals
    if free is None:
        return moving
    if isinstance(free, str):
        free = [free]
    arr = np.asarray(free)
    if arr.dtype == bool:
        return moving | np.broadcast_to(arr, moving.shape)
    extra = np.zeros(model.nq, bool)
    names = list(model.joint_names)
    for name in free:
        if name not in names:
            raise CaliperError(f"free: robot {model.name!r} has no joint named {name!r} "
                               f"(joints: {', '.join(names)})")
        extra[model.qfull_src[model.body_qadr[model.body_id(name)]]] = True
    return moving | extra[None]


@partial(jax.jit, static_argnames=("count", "n"))
def _initial_batch(starts, goals, key, lower, upper, scale, count: int, n: int):
    """(P, count, n, nq) initial paths; problem ``p`` draws from ``fold_in(key, p)``, so its
    initialisations do not depend on the rest of the batch."""
    keys = jax.vmap(lambda p: jax.random.fold_in(key, p))(jnp.arange(starts.shape[0]))
    one = lambda s, g, k: initial_paths(s, g, k, count, n, scale, lower, upper)
    return jax.vmap(one)(starts, goals, keys)


@dataclass
class TrajoptResult:
    paths: np.ndarray        # (P, n, nq) the chosen path per problem
    costs: np.ndarray        # (P,) its CHOMP cost
    success: np.ndarray      # (P,) collision-free (exact colliders, at the resolution)
    chosen: np.ndarray       # (P,) which initialisation won (-1: none collision-free; cheapest kept)
    initial_costs: np.ndarray  # (P,) cost of the straight line before optimisation
    all_costs: np.ndarray    # (P, K)
    trace: np.ndarray | None = None  # (P, iterations) cost before each step of the chosen path
    fell_back: np.ndarray | None = None  # (P,) answered by the adam rerun (ChompOptions.fallback)
    held: list | None = None  # P lists: the joints held at their start (start == goal, not in ``free``)

    @property
    def hints(self) -> list:
        """Per problem: None, or for a failed problem that held joints, the sentence saying so (a
        detour may need them: pass their names as ``free``)."""
        held = self.held or [[] for _ in self.success]
        return [None if ok or not h else
                f"no collision-free path with joint(s) {', '.join(h)} held at their start (start == goal); "
                f"pass free={h!r} to let the optimiser move them"
                for ok, h in zip(self.success.tolist(), held, strict=True)]

    def to_dict(self) -> dict:
        return {"success": self.success.tolist(), "costs": self.costs.tolist(),
                "chosen": self.chosen.tolist(), "initial_costs": self.initial_costs.tolist(),
                "held": self.held, "hints": self.hints, "paths": self.paths.tolist()}


def _q_names(model: Model) -> list[str]:
    """One name per position coordinate: its joint's (the driver's for a mimic), else ``q[i]``."""
    names = [f"q[{i}]" for i in range(model.nq)]
    for name in model.joint_names:
        i = int(model.qfull_src[model.body_qadr[model.body_id(name)]])
        if names[i] == f"q[{i}]":
            names[i] = name
    return names


def trajopt(model: Model, starts, goals, obstacles=(), *, inits: int = 8, seed=0,
            opts: ChompOptions | None = None, init_scale: float = 1.0, resolution: float = 0.02,
            spheres: CollisionModel | None = None, exact: CollisionModel | None = None,
            checker: Checker | None = None, free=None, **scene_kw) -> TrajoptResult:
    """Optimise paths from ``starts`` to ``goals`` ((P, nq) or (nq,)) among ``obstacles``.

    Only the joints whose start and goal differ move, plus those named in ``free`` (see
    :func:`free_joints`): a joint the problem does not ask to move is held at its start. The
    result names them per problem (``held``) and, for a problem that failed while holding joints,
    says so (``hints``).

    ``spheres``/``exact`` default to the sphere approximation and the exact colliders of the model
    among ``obstacles`` (``scene_kw`` -- srdf, disabled_pairs -- go to both builders).
    """
    opts = (opts or ChompOptions()).check()
    starts = np.atleast_2d(np.asarray(starts, dtype=np.float64))
    goals = np.atleast_2d(np.asarray(goals, dtype=np.float64))
    if starts.shape != goals.shape or starts.shape[-1] != model.nq:
        raise CaliperError(f"starts and goals must both be (P, {model.nq}); "
                           f"got {starts.shape} and {goals.shape}")
    if not (np.all(np.isfinite(starts)) and np.all(np.isfinite(goals))):
        raise CaliperError("starts/goals: non-finite values")
    if inits < 1:
        raise CaliperError(f"inits must be >= 1, got {inits}")
    if spheres is None:
        spheres, _ = build_sphere_model(model, obstacles, **scene_kw)
    elif not query.is_sphere_model(spheres):
        raise CaliperError("spheres: expected a sphere model (build_sphere_model), got robot colliders of "
                           f"kinds {sorted(set(spheres.kinds[:spheres.n_robot]))}")
    if checker is None:
        exact = exact or build_collision_model(model, obstacles, **scene_kw)
        checker = Checker(model, exact, resolution=resolution)
    dt = model.dtype
    P, n = starts.shape[0], opts.n_waypoints
    lo, hi = checker.lower, checker.upper
    moving = free_joints(model, starts, goals, free)
    init = _initial_batch(jnp.asarray(starts, dt), jnp.asarray(goals, dt), as_key(seed), jnp.asarray(lo, dt),
                          jnp.asarray(hi, dt), jnp.asarray(init_scale, dt), inits, n)
    init = jnp.where(jnp.asarray(moving)[:, None, None, :], init, jnp.asarray(starts, dt)[:, None, None, :])
    paths, costs, traces = solve_batch(model, spheres, jnp.asarray(starts, dt), jnp.asarray(goals, dt), init,
                                       opts, jnp.asarray(moving))
    paths, costs = np.asarray(paths, dtype=np.float64), np.asarray(costs, dtype=np.float64)
    paths = np.where(moving[:, None, None, :], paths, starts[:, None, None, :])   # held: exactly at start
    # the first init is the straight line; its cost before the first step is the trace's head
    c0 = np.asarray(traces[:, 0, 0], dtype=np.float64) if opts.iterations else costs[:, 0]
    order = np.argsort(np.where(np.isfinite(costs), costs, np.inf), axis=1, kind="stable")
    chosen = np.full(P, -1)
    pending = list(range(P))
    for rank in range(inits):
        if not pending:
            break
        cand = [(p, int(order[p, rank])) for p in pending]
        a = np.concatenate([paths[p, k, :-1] for p, k in cand])
        b = np.concatenate([paths[p, k, 1:] for p, k in cand])
        ok_edges = checker.edges_valid(a, b).reshape(len(cand), n - 1)
        ok_states = checker.valid(np.stack([paths[p, k, 0] for p, k in cand]))
        still = []
        for (p, k), ok_e, ok_s in zip(cand, ok_edges, ok_states, strict=True):
            if ok_e.all() and ok_s:
                chosen[p] = k
            else:
                still.append(p)
        pending = still
    pick = np.where(chosen >= 0, chosen, order[:, 0])
    rows = np.arange(P)
    trace = np.asarray(traces, dtype=np.float64)[rows, pick]
    names = _q_names(model)
    held = [[names[j] for j in np.flatnonzero(~moving[p])] for p in range(P)]
    result = TrajoptResult(paths[rows, pick], costs[rows, pick], chosen >= 0, chosen, c0, costs, trace,
                           np.zeros(P, dtype=bool), held)
    # A problem that moves at most one joint has one path up to timing (the joint must sweep its
    # segment): no update rule changes its answer, so it is not rerun (that would compile a
    # second solver for nothing).
    failed = np.flatnonzero((chosen < 0) & (moving.sum(axis=1) >= 2))
    if failed.size and opts.update == "covariant" and opts.fallback:
        # The covariant step settles on the nearest stationary point, which can leave the arm
        # through a thin obstacle; Adam's normalised steps wander out of such minima.
        again = trajopt(model, starts[failed], goals[failed], obstacles, inits=inits, seed=seed,
                        opts=replace(opts, update="adam", optimizer=None), init_scale=init_scale,
                        resolution=resolution, spheres=spheres, checker=checker, free=free, **scene_kw)
        result = _merge(result, failed, again)
    return result


def _merge(result: TrajoptResult, rows: np.ndarray, again: TrajoptResult) -> TrajoptResult:
    """``result`` with problems ``rows`` replaced by ``again``'s answers where those succeeded."""
    take = rows[again.success]
    sub = again.success
    out = {f: np.array(getattr(result, f), copy=True) for f in ("paths", "costs", "success", "chosen",
                                                              "all_costs")}
    for f in out:
        out[f][take] = getattr(again, f)[sub]
    trace = result.trace
    if trace is not None and again.trace is not None and trace.shape[1:] == again.trace.shape[1:]:
        trace = np.array(trace, copy=True)
        trace[take] = again.trace[sub]
    fell_back = np.array(result.fell_back, copy=True)
    fell_back[take] = True
    return TrajoptResult(out["paths"], out["costs"], out["success"], out["chosen"], result.initial_costs,
                         out["all_costs"], trace, fell_back, result.held)

"""The planning front door: classify the goal, search, shortcut-smooth, hand off to retiming.

Planners: ``vrrtconnect`` -- RRT-Connect as one jitted loop on the sphere planning checker
(:mod:`caliper_jax.planning.vrrt`, :mod:`caliper_jax.planning.spherecheck`), then the exact
check of the returned path at 4x the planning resolution (:mod:`caliper_jax.planning.exact`:
MuJoCo's collision pipeline on the hulls behind the sphere cover; it also classifies start and
goal, checks endpoint escapes, and checks the host planners' paths); the host planners ``rrtconnect``,
``rrtstar``, ``prm`` (NumPy trees, batched exact GJK checks); ``auto`` (the default) is
``vrrtconnect`` when the scene's obstacles are spheres, capsules, boxes or half-spaces, falling
back to ``rrtconnect`` when the fast path returns no verified path.

``plan`` is deterministic for a seed: every random number comes from the JAX PRNG key.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import jax
import numpy as np

from caliper_jax.collision.scene import CollisionModel
from caliper_jax.errors import CaliperError
from caliper_jax.model import Model
from caliper_jax.planning.aot import program
from caliper_jax.planning.prm import prm
from caliper_jax.planning.reach import BLOCKED, OUT_OF_REACH, REACHABLE, classify_joint_goal
from caliper_jax.planning.rrt import rrt_connect, rrt_star
from caliper_jax.planning.sampling import Sampler, as_key
from caliper_jax.planning.smoothing import path_length, shortcut
from caliper_jax.planning.validity import Checker

PLANNERS = ("auto", "vrrtconnect", "rrtconnect", "rrtstar", "prm")
#: Attempts of the fast path (fresh keys) before ``auto`` falls back to the host planner.
FAST_ATTEMPTS = 3
#: Search iterations per round of :func:`plan_many` (problems that stopped leave between rounds).
BATCH_CHUNK = 32


@dataclass
class PlanResult:
    """``status``: reachable (a path was found) / blocked / out_of_reach, with a ``reason``.
    ``waypoints``: the smoothed path (n, nq) from start to goal; ``raw``: before smoothing."""

    status: str
    reason: str
    planner: str
    waypoints: np.ndarray | None
    raw: np.ndarray | None
    iterations: int = 0
    nodes: int = 0
    calls: int = 0
    states_checked: int = 0
    resolution: float = 0.0
    #: Wall-clock seconds per stage of the call (reporting only: nothing depends on them, and
    #: ``to_dict`` leaves them out so the same seed gives the same report bytes): ``setup`` (the
    #: exact stage and sphere cover of a new scene; 0 once cached), ``classify`` (start and
    #: goal), ``escape``, ``search``, ``shortcut``, ``exact`` (the final exact check of the
    #: returned path), ``retime``, and ``total``.
    times: dict = field(default_factory=dict)
    #: The timed trajectory when ``plan(..., retime=...)`` was asked for.
    trajectory: object = None

    @property
    def success(self) -> bool:
        return self.waypoints is not None

    @property
    def length(self) -> float:
        return path_length(self.waypoints) if self.waypoints is not None else float("nan")

    def to_dict(self) -> dict:
        return {
            "status": self.status, "reason": self.reason, "planner": self.planner, "success": self.success,
            "waypoints": None if self.waypoints is None else self.waypoints.tolist(),
            "raw_waypoints": None if self.raw is None else int(self.raw.shape[0]),
            "length": None if self.waypoints is None else self.length,
            "iterations": self.iterations, "nodes": self.nodes, "validity_calls": self.calls,
            "states_checked": self.states_checked, "edge_resolution": self.resolution,
        }


def plan(model: Model, cm: CollisionModel, goal, start=None, *, planner: str = "auto", seed=0,
         resolution: float = 0.02, margin: float = 0.0, step: float = 0.3, max_iterations: int | None = None,
         smooth: bool = True, checker: Checker | None = None, retime: str | None = None) -> PlanResult:
    """Plan a collision-free joint-space path from ``start`` to ``goal``. ``start`` defaults to
    :func:`~caliper_jax.configuration.default_start` (the neutral pose moved inside the joint
    limits). ``seed`` is an int or a JAX key. ``resolution`` is the edge-check step (rad or m),
    ``margin`` a required clearance (m). ``max_iterations`` bounds the search (planner-specific
    default); for PRM it bounds the roadmap size in samples. ``checker``: the host planners'
    checker (default: the JAX GJK :class:`Checker` at ``margin`` and ``resolution``; when given,
    its margin and resolution win). Start and goal, the fast path's endpoint escapes and its final
    path check run on the exact MuJoCo stage (:func:`exact_checker`). ``retime``: one of
    ``RETIMERS`` to time the path too (``PlanResult.trajectory``). ``PlanResult.times`` splits the
    call's wall-clock time by stage (see the module docstring for ``planner``)."""
    t_start = time.perf_counter()
    if planner not in PLANNERS:
        raise CaliperError(f"unknown planner {planner!r} (expected one of {', '.join(PLANNERS)})")
    if not (np.isfinite(step) and step > 0):
        raise CaliperError(f"step must be > 0, got {step!r}")
    if max_iterations is not None and max_iterations < 1:
        raise CaliperError(f"max_iterations must be >= 1, got {max_iterations!r}")
    if retime is not None and retime not in RETIMERS:
        raise CaliperError(f"retiming method must be one of {', '.join(RETIMERS)}, got {retime!r}")
    if checker is not None:
        margin, resolution = checker.margin, checker.resolution
    exact = exact_checker(model, cm, margin=margin, resolution=resolution)
    t_setup = time.perf_counter() - t_start
    goal = np.asarray(goal, dtype=np.float64).reshape(-1)
    if start is None:
        from caliper_jax.configuration import default_start

        start = default_start(model)
    start = np.asarray(start, dtype=np.float64).reshape(-1)
    for name, x in (("goal", goal), ("start", start)):
        if x.shape != (model.nq,) or not np.all(np.isfinite(x)):
            raise CaliperError(f"{name}: expected {model.nq} finite joint values for {model.name!r}")
    used = [exact]
    before = {id(exact): (exact.calls, exact.states)}
    times = dict.fromkeys(("setup", "classify", "escape", "search", "shortcut", "exact", "retime"), 0.0)
    times["setup"] = t_setup

    def result(status, reason, path=None, raw=None, stats=None):
        calls = sum(c.calls - before[id(c)][0] for c in used)
        states = sum(c.states - before[id(c)][1] for c in used)
        out = PlanResult(status, reason, planner, path, raw, getattr(stats, "iterations", 0),
                         getattr(stats, "nodes", 0), calls, states, resolution)
        t0 = time.perf_counter()
        if retime is not None and path is not None:
            out.trajectory = plan_trajectory(model, path, method=retime)
        times["retime"] = time.perf_counter() - t0
        times["total"] = time.perf_counter() - t_start
        out.times = times
        return out

    t0 = time.perf_counter()
    s = classify_joint_goal(exact, start)
    g = classify_joint_goal(exact, goal) if s.status == REACHABLE else None
    times["classify"] = time.perf_counter() - t0
    if s.status != REACHABLE:
        return result(s.status, f"start: {s.reason}")
    if g.status != REACHABLE:
        return result(g.status, g.reason)
    if planner in ("auto", "vrrtconnect"):
        fast = _plan_fast(model, cm, start, goal, exact, as_key(seed), step=step, margin=margin,
                          max_iterations=max_iterations, smooth=smooth, times=times)
        if fast is not None and (fast[0] is not None or planner == "vrrtconnect"):
            path, raw, stats, note = fast
            if path is None:
                return result(BLOCKED, f"vrrtconnect: {note}; sampling-based, so this is not a proof that "
                                       "none exists", stats=stats)
            out = result(REACHABLE, f"path found by vrrtconnect: {path.shape[0]} waypoints, length "
                                    f"{path_length(path):.4g} (joint space); {note}", path, raw, stats)
            out.planner = "vrrtconnect"
            out.calls += stats.calls
            out.states_checked += stats.states
            return out
        if planner == "vrrtconnect":
            raise CaliperError("planner 'vrrtconnect' needs obstacles of kinds sphere, capsule, box or "
                               "half-space and revolute/prismatic joints")
        planner = "rrtconnect"                      # auto: the host planner
    checker = checker or Checker(model, cm, margin=margin, resolution=resolution)
    used.append(checker)
    before.setdefault(id(checker), (checker.calls, checker.states))
    sampler = Sampler(as_key(seed), checker.lower, checker.upper)
    t0 = time.perf_counter()
    if planner == "rrtconnect":
        raw, stats = rrt_connect(checker, start, goal, sampler, step=step,
                                 max_iterations=max_iterations or 2000)
    elif planner == "rrtstar":
        raw, stats = rrt_star(checker, start, goal, sampler, step=step,
                              max_iterations=max_iterations or 3000)
    else:
        raw, stats = prm(checker, start, goal, sampler, max_nodes=max_iterations or 4096)
    times["search"] = time.perf_counter() - t0
    if raw is None:
        return result(BLOCKED, f"no collision-free path found by {planner} within its budget "
                               f"({stats.iterations} iterations, {stats.nodes} nodes); sampling-based, so "
                               "this is not a proof that none exists", stats=stats)
    t0 = time.perf_counter()
    path = shortcut(checker, raw, sampler) if smooth else raw
    times["shortcut"] = time.perf_counter() - t0
    fine = exact_fine_checker(exact)
    t0 = time.perf_counter()
    ok = fine.path_valid(path)
    times["exact"] = time.perf_counter() - t0
    if not ok:
        return result(BLOCKED, f"the path found by {planner} failed the exact check at resolution "
                               f"{fine.resolution:g} (an obstacle between the samples of its edges)",
                      stats=stats)
    return result(REACHABLE, f"path found by {planner}: {path.shape[0]} waypoints, length "
                             f"{path_length(path):.4g} (joint space)", path, raw, stats)


# ---- the fast path ----------------------------------------------------------------------------

@dataclass
class _FastStats:
    iterations: int = 0
    nodes: int = 0
    calls: int = 0
    states: int = 0


_FAST: dict = {}


def _obstacles(cm: CollisionModel) -> list:
    from caliper_jax.collision.geometry import Collider

    R, p = np.asarray(cm.R, np.float64), np.asarray(cm.p, np.float64)
    radius, half = np.asarray(cm.radius, np.float64), np.asarray(cm.half, np.float64)
    return [Collider(cm.names[i], -1, cm.kinds[i], R[i], p[i], float(radius[i]), half[i], obstacle=True)
            for i in range(cm.n_robot, cm.ncollider)]


def fast_checker(model: Model, cm: CollisionModel):
    """The sphere planning checker for ``model`` with ``cm``'s allow-list and obstacle kinds
    (cached per model object, obstacle kinds and allow-list: a moved obstacle reuses it and its
    compiled search), or None when an obstacle kind has no sphere closed form or the robot is not
    supported by the sphere checker."""
    from caliper_jax.planning.spherecheck import KINDS, planning_checker

    kinds = cm.kinds[cm.n_robot:]
    if any(k not in KINDS for k in kinds):
        return None
    key = (id(model), kinds, cm.allowed)
    hit = _FAST.get(key)
    if hit is None or hit[0] is not model:
        try:
            fast = planning_checker(model, _obstacles(cm), disabled_pairs=cm.allowed)
        except CaliperError:            # e.g. joints the lane kernel does not support: host planners
            return None
        hit = _FAST[key] = (model, fast)
    return hit[1]


#: (id(cm), id(model), margin, resolution) -> ExactChecker; the identity checks on a hit guard
#: against reused ids (a CollisionModel is unhashable, so no weak-key dictionary).
_EXACT: dict = {}


def exact_checker(model: Model, cm: CollisionModel, *, margin: float = 0.0, resolution: float = 0.02):
    """The exact validity stage (cached per collision model, model, margin and resolution): an
    :class:`~caliper_jax.planning.exact.ExactChecker` -- MuJoCo's collision pipeline on ``cm``'s
    colliders, behind the robot's conservative sphere cover (:func:`fast_checker`) when the
    obstacles have sphere closed forms."""
    from caliper_jax.planning.exact import ExactChecker

    key = (id(cm), id(model), float(margin), float(resolution))
    hit = _EXACT.get(key)
    if hit is None or hit.model is not model or hit.cm is not cm:
        fast = fast_checker(model, cm)
        params = None if fast is None else fast.with_obstacles(_obstacles(cm), margin=float(margin))
        hit = _EXACT[key] = ExactChecker(model, cm, margin=margin, resolution=resolution, cover=fast,
                                      cover_params=params)
    return hit


def exact_fine_checker(checker: Checker, factor: int = 4) -> Checker:
    """The exact stage at ``checker.resolution / factor`` and no margin: the final check of every
    path the fast planner returns."""
    return exact_checker(checker.model, checker.cm, resolution=checker.resolution / factor)


def _split_attempt(key, attempt):
    return jax.random.split(jax.random.fold_in(key, attempt))


#: The keys of one fast-path attempt (escape, search): one persisted program, not two eager ops
#: traced on every fresh process.
_attempt_keys = program("planner.attempt_keys", _split_attempt, lambda: ())


def _plan_fast(model, cm, start, goal, exact: Checker, key, *, step, margin, max_iterations, smooth, times):
    """(path, raw, stats, note) -- path None when no verified path -- or None when unsupported.
    Adds its stages' seconds to ``times``."""
    from caliper_jax.planning.vrrt import (
        CODES,
        ENDPOINT_INVALID,
        TREE_FULL,
        SearchOptions,
        escape_endpoints,
        search_one,
        shortcut_one,
    )
    from caliper_jax.planning.vshortcut import ShortcutOptions

    fast = fast_checker(model, cm)
    if fast is None:
        return None
    params = fast.with_obstacles(_obstacles(cm), margin=max(margin, exact.margin))
    lo, hi = np.asarray(fast.lower), np.asarray(fast.upper)
    span = float(np.max(np.where(np.isfinite(hi - lo), hi - lo, 2 * np.pi)))
    opts = SearchOptions(step=float(step), resolution=exact.resolution,
                         max_iterations=int(max_iterations or 4000))
    smoothing = ShortcutOptions(resolution=exact.resolution, max_span=span) if smooth else None
    fine = exact_fine_checker(exact)
    f_calls, f_states = fine.calls, fine.states
    stats = _FastStats()
    note = ""

    def timed(stage, fn, *a, **k):
        t0 = time.perf_counter()
        out = fn(*a, **k)
        times[stage] += time.perf_counter() - t0
        return out

    def finish(out):
        stats.calls += fine.calls - f_calls
        stats.states += fine.states - f_states
        return out

    for attempt in range(FAST_ATTEMPTS):
        k_esc, k_search = _attempt_keys(key, jax.device_put(np.int32(attempt)))
        ends, moved = timed("escape", escape_endpoints, fast, exact, np.stack([start, goal]), k_esc,
                            params=params)
        if not np.all(np.isfinite(ends)):
            note = "no escape from an endpoint the sphere model rejects"
            continue
        r = timed("search", search_one, fast, ends[0], ends[1], k_search, opts, params)
        stats.iterations += int(r["iterations"])
        stats.nodes = int(r["nodes"])
        stats.calls += int(r["iterations"])
        stats.states += int(r["states"])
        if not r["found"] and int(r["code"]) == TREE_FULL:     # a bigger tree (one more compile)
            opts = opts._replace(capacity=4 * opts.capacity)
            r = timed("search", search_one, fast, ends[0], ends[1], k_search, opts, params)
            stats.iterations += int(r["iterations"])
            stats.calls += int(r["iterations"])
            stats.states += int(r["states"])
        if not r["found"]:
            note = CODES[int(r["code"])]
            if int(r["code"]) != ENDPOINT_INVALID:
                return finish((None, None, stats, note))   # budget or capacity: more attempts rarely help
            continue
        raw_buf, raw_n = r["raw"], int(r["raw_length"])
        if smoothing is not None:
            sm = timed("shortcut", shortcut_one, fast, r, k_search, smoothing, params)
            path_buf, path_n = sm["path"], int(sm["length"])
            stats.states += int(sm["states"])
        else:
            path_buf, path_n = raw_buf, raw_n
        paths = []
        for buf, n in ((raw_buf, raw_n), (path_buf, path_n)):
            p = buf[:n].copy()
            p[0], p[-1] = ends[0], ends[1]        # the float64 endpoints, not their float32 copies
            if moved[0]:
                p = np.concatenate([start[None], p])
            if moved[1]:
                p = np.concatenate([p, goal[None]])
            paths.append(p)
        raw, path = paths
        if timed("exact", fine.path_valid, path):
            escaped = int(moved.sum())
            note = (f"{stats.iterations} iterations; exact check (MuJoCo behind the sphere cover) at "
                    f"resolution {fine.resolution:g} passed"
                    + (f"; {escaped} endpoint(s) escaped the sphere cover by an exactly checked edge"
                       if escaped else ""))
            return finish((path, raw, stats, note))
        note = f"the exact check at resolution {fine.resolution:g} failed"
    return finish((None, None, stats, note))


@dataclass
class PlanBatch:
    """:func:`plan_many`'s result for B problems: ``success`` (B,) bool (a path that passed the
    exact check), ``waypoints`` (list of (n_k, nq) arrays, None where it failed), ``reasons``
    (one line per problem), ``times`` (seconds per stage of the whole call: ``classify``,
    ``escape``, ``search`` (search and shortcut, one vmapped call), ``exact``, ``total``)."""

    success: np.ndarray
    waypoints: list
    reasons: list
    times: dict


def plan_many(model: Model, cm: CollisionModel, starts, goals, *, seed=0, resolution: float = 0.02,
              margin: float = 0.0, step: float = 0.3, max_iterations: int | None = None,
              smooth: bool = True, chunk: int | None = BATCH_CHUNK) -> PlanBatch:
    """Plan ``starts[k] -> goals[k]`` ((B, nq) each) in one call of the fast path, validation
    included: every endpoint classified and escaped in one batched call each, every search and
    shortcut in ONE vmapped call (:func:`~caliper_jax.planning.vrrt.solve_many`), every returned
    path's edges checked by the exact stage at ``resolution / 4`` in one call. No retries and no
    host fallback (``plan`` has both). CaliperError when the scene has no sphere closed form.
    ``chunk``: search iterations per round; between rounds the problems that stopped leave the
    batch (:func:`~caliper_jax.planning.vrrt.solve_many`), so the batch no longer runs every
    problem as long as its slowest one; None: one vmapped loop to the end."""
    from caliper_jax.planning.vrrt import CODES, SearchOptions, escape_endpoints, solve_many
    from caliper_jax.planning.vshortcut import ShortcutOptions

    t_start = time.perf_counter()
    fast = fast_checker(model, cm)
    if fast is None:
        raise CaliperError("plan_many needs obstacles of kinds sphere, capsule, box or half-space and "
                           "revolute/prismatic joints")
    starts = np.asarray(starts, np.float64).reshape(-1, model.nq)
    goals = np.asarray(goals, np.float64).reshape(-1, model.nq)
    if starts.shape != goals.shape or not (np.all(np.isfinite(starts)) and np.all(np.isfinite(goals))):
        raise CaliperError(f"starts, goals: expected two finite (B, {model.nq}) arrays, got {starts.shape} "
                           f"and {goals.shape}")
    B = starts.shape[0]
    exact = exact_checker(model, cm, margin=margin, resolution=resolution)
    fine = exact_fine_checker(exact)
    times = {}
    t0 = time.perf_counter()
    both = np.concatenate([starts, goals])
    ok_ends = exact.valid(both)
    times["classify"] = time.perf_counter() - t0
    key = as_key(seed)
    k_esc, k_search = jax.random.split(key)
    params = fast.with_obstacles(_obstacles(cm), margin=float(margin))
    t0 = time.perf_counter()
    ends, moved = escape_endpoints(fast, exact, np.where(ok_ends[:, None], both, goals[:1]), k_esc,
                                   params=params)
    times["escape"] = time.perf_counter() - t0
    fin = np.all(np.isfinite(ends), axis=1) & ok_ends
    e = np.where(fin[:, None], ends, both)
    lo, hi = np.asarray(fast.lower), np.asarray(fast.upper)
    span = float(np.max(np.where(np.isfinite(hi - lo), hi - lo, 2 * np.pi)))
    opts = SearchOptions(step=float(step), resolution=float(resolution),
                         max_iterations=int(max_iterations or 4000))
    sm = ShortcutOptions(resolution=float(resolution), max_span=span) if smooth else None
    t0 = time.perf_counter()
    r = solve_many(fast, e[:B], e[B:], k_search, opts, sm, params, chunk=chunk)
    times["search"] = time.perf_counter() - t0
    paths, reasons = [None] * B, [""] * B
    for k in range(B):
        if not (ok_ends[k] and ok_ends[B + k]):
            reasons[k] = "start or goal outside the limits or in collision"
        elif not (fin[k] and fin[B + k]):
            reasons[k] = "no escape from an endpoint the sphere model rejects"
        elif not r["found"][k]:
            reasons[k] = CODES[int(r["code"][k])]
        else:
            p = r["path"][k, :int(r["length"][k])].copy()
            p[0], p[-1] = e[k], e[B + k]
            paths[k] = np.concatenate([starts[k][None]] * bool(moved[k]) + [p]
                                      + [goals[k][None]] * bool(moved[B + k]))
    t0 = time.perf_counter()
    have = [k for k in range(B) if paths[k] is not None]
    success = np.zeros(B, bool)
    if have:
        a = np.concatenate([paths[k][:-1] for k in have])
        b = np.concatenate([paths[k][1:] for k in have])
        ok = fine.edges_valid(a, b)
        first = np.cumsum([0] + [paths[k].shape[0] - 1 for k in have])
        for i, k in enumerate(have):
            success[k] = bool(ok[first[i]:first[i + 1]].all())
            if not success[k]:
                paths[k] = None
                reasons[k] = f"the exact check at resolution {fine.resolution:g} failed"
    times["exact"] = time.perf_counter() - t0
    times["total"] = time.perf_counter() - t_start
    return PlanBatch(success, paths, reasons, times)


RETIMERS = ("scurve", "topp")


def plan_trajectory(model: Model, waypoints, limits=None, method: str = "scurve"):
    """Time a waypoint path with the motion module, under ``limits`` (default: the model's
    :class:`~caliper_jax.motion.MotionLimits`):

    * ``"scurve"``: :func:`caliper_jax.motion.retime_waypoints` -- jerk-limited S-curves, rest at
      every waypoint; the joints are synchronised in time, not in shape, so the motion can leave
      the straight (checked) segments between waypoints: lint it (:func:`lint_trajectory`);
    * ``"topp"``: :func:`caliper_jax.motion.topp_piecewise_linear` -- time-optimal,
      acceleration-limited, stops at every waypoint, and stays exactly on the checked segments
      (jerk unbounded at the switches).
    """
    from caliper_jax.motion import MotionLimits, retime_waypoints, topp_piecewise_linear

    if method not in RETIMERS:
        raise CaliperError(f"retiming method must be one of {', '.join(RETIMERS)}, got {method!r}")
    limits = limits or MotionLimits.from_model(model)
    waypoints = np.asarray(waypoints, dtype=np.float64)
    if method == "topp":
        return topp_piecewise_linear(waypoints, limits)
    return retime_waypoints(waypoints, limits)


__all__ = ["BLOCKED", "FAST_ATTEMPTS", "OUT_OF_REACH", "PLANNERS", "exact_fine_checker",
           "exact_checker", "fast_checker",
           "PlanBatch", "PlanResult", "REACHABLE", "RETIMERS", "plan", "plan_many",
           "plan_trajectory"]

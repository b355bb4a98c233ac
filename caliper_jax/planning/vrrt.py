"""RRT-Connect as one jitted ``lax.while_loop`` with fixed-capacity trees (vmappable over problems).

The whole search -- sampling, nearest neighbours, steering, edge checks, tree growth, the
connection test and the path read-out -- is one pure function of arrays, so XLA runs it without a
Python round trip per iteration and ``jax.vmap`` plans many problems in one call.

* **Trees**: two fixed-capacity arrays ``q (2, C, nq)`` and ``parent (2, C)`` (tree 0 grows from
  the start, tree 1 from the goal), with fill counts ``n (2,)``. Nearest neighbour: squared
  joint-space distance over all ``C`` slots, empty slots masked.
* **``E`` motions per iteration** (``candidates``, default 8), all checked in ONE batched
  validity call. RRT-Connect's two phases are a mode of the loop state rather than nested loops
  (one checker call site keeps the HLO, hence the compile, small): *extend* grows tree ``a`` one
  ``step`` towards each of E random samples (the first one may be the other root, ``goal_bias``)
  and keeps every valid motion; the loop then switches to *connect*, which grows tree ``b``
  towards the kept node nearest to it, E steps per iteration (the valid prefix is kept), until it
  arrives (found), is blocked, or the budget ends. The trees swap roles after every failed extend
  and every blocked connect. The start and goal ride along in every call (their validity is the
  ``ENDPOINT_INVALID`` verdict).
* **Edges** are checked at ``resolution`` (max per-joint gap between checked states): the new
  node and ``2^L - 1`` interior states at ``j / 2^L`` of the motion (``2^L >= step /
  resolution``), in bisection (van der Corput) order -- midpoint first. Sampled, not
  continuous (see :mod:`caliper_jax.planning.validity`).
* **Path read-out** walks both parent chains (``path_capacity`` steps) into a fixed buffer
  ``(P, nq)``, start first, padded by repeating the goal.

Randomness: two words drawn from the JAX key, then a counter-based hash per iteration
(:func:`counter_uniform`); the same key gives the same bytes.
The ``valid`` function must be pure JAX: ``valid(params, qs (B, nq)) -> (B,) bool``, true when
``qs`` is inside the limits and collision-free (e.g. ``planning_checker(...).valid``).
"""
from __future__ import annotations

import threading
import weakref
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.errors import CaliperError
from caliper_jax.planning.aot import program, program_key
from caliper_jax.planning.lattice import bisection_order, counter_uniform, levels_for
from caliper_jax.planning.vshortcut import shortcut_search

#: Why a search stopped without a path (``SearchOut.code``).
FOUND, ENDPOINT_INVALID, BUDGET, TREE_FULL, PATH_TOO_LONG = 0, 1, 2, 3, 4
CODES = ("found", "start or goal invalid under the planning checker", "iteration budget spent",
         "tree capacity full", "path longer than path_capacity")


class SearchOptions(NamedTuple):
    """Static search settings (hashable: part of the jit cache key).

    ``step``: largest per-joint move of one extension (rad or m); ``resolution``: largest
    per-joint gap between checked states on an edge; ``capacity``: nodes per tree;
    ``max_iterations``: motions tried; ``goal_bias``: probability of extending towards the other
    root; ``path_capacity``: waypoints in the returned buffer; ``candidates``: motions per
    iteration (``E``: extend towards E samples at once, or up to E connect steps)."""

    step: float = 0.3
    resolution: float = 0.05
    capacity: int = 256
    max_iterations: int = 4000
    goal_bias: float = 0.05
    path_capacity: int = 128
    candidates: int = 8

    def validate(self) -> SearchOptions:
        for name in ("step", "resolution"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v > 0):
                raise CaliperError(f"SearchOptions.{name} must be > 0, got {v!r}")
        for name, least in (("capacity", 2), ("max_iterations", 1), ("path_capacity", 2), ("candidates", 1)):
            if int(getattr(self, name)) < least:
                raise CaliperError(f"SearchOptions.{name} must be >= {least}, got {getattr(self, name)!r}")
        if not 0.0 <= self.goal_bias <= 1.0:
            raise CaliperError(f"SearchOptions.goal_bias must be in [0, 1], got {self.goal_bias!r}")
        return self


class SearchOut(NamedTuple):
    """``path (P, nq)`` start ... goal, padded with the goal after ``length`` waypoints;
    ``found`` bool; ``code`` (see ``CODES``); ``iterations``; ``nodes`` (both trees);
    ``states`` checked."""

    path: jax.Array
    length: jax.Array
    found: jax.Array
    code: jax.Array
    iterations: jax.Array
    nodes: jax.Array
    states: jax.Array


def extension_fractions(opts: SearchOptions) -> np.ndarray:
    """Where a motion of at most ``step`` is checked: the end (1.0), then the interior in
    bisection order."""
    return np.concatenate([[1.0], bisection_order(levels_for(opts.step, opts.resolution))])


def _walk(q, parent, i0, steps: int):
    """Both parent chains at once: q (2, C, nq), parent (2, C), i0 (2,) start nodes ->
    (buffers (2, steps, nq) of nodes i0, parent(i0), ...; counts (2,); complete (2,) bool)."""
    buf = jnp.zeros((2, steps, q.shape[-1]), q.dtype)
    two = jnp.arange(2)

    def body(k, c):
        i, buf, cnt = c
        live = i >= 0
        j = jnp.maximum(i, 0)
        buf = buf.at[:, k].set(jnp.where(live[:, None], q[two, j], 0.0))
        return jnp.where(live, parent[two, j], -1), buf, cnt + live.astype(jnp.int32)

    i, buf, cnt = jax.lax.fori_loop(0, steps, body, (i0, buf, jnp.zeros(2, jnp.int32)))
    return buf, cnt, i < 0


def rrt_connect_search(valid, params, lower, upper, start, goal, key, opts: SearchOptions) -> SearchOut:
    """One RRT-Connect search (pure JAX; jit with ``valid`` and ``opts`` static, vmap over
    ``start``/``goal``/``key``). ``lower``/``upper`` (nq,): the sampling box (finite);
    ``start``/``goal`` (nq,). The same as :func:`search_init`, then :func:`search_steps` up to
    ``opts.max_iterations``, then :func:`search_result`."""
    seed = jax.random.bits(key, (2,), jnp.uint32)
    s = search_steps(valid, params, lower, upper, start, goal, seed, search_init(start, goal, opts),
                     opts.max_iterations, opts)
    return search_result(s, start, opts)


def search_init(start, goal, opts: SearchOptions) -> dict:
    """The loop state of a new search: trees ``q (2, C, nq)``, ``parent (2, C)``, fill counts
    ``n (2,)``, iteration ``it``, and the mode / role / verdict scalars (``stop`` ends it)."""
    dt = start.dtype
    nq, C, i32 = start.shape[0], int(opts.capacity), jnp.int32
    q = jnp.zeros((2, C, nq), dt).at[0, 0].set(start).at[1, 0].set(goal)
    parent = jnp.full((2, C), -1, jnp.int32)
    # mode 1 = connect: the first motions grow tree 1 (goal) straight towards the start (a = 0)
    return dict(q=q, parent=parent, n=jnp.ones(2, i32), it=i32(0), mode=i32(1), a=i32(0), tgt=i32(0),
                last=i32(0), found=jnp.bool_(False), full=jnp.bool_(False), ends=jnp.bool_(True),
                stop=jnp.bool_(False))


def search_steps(valid, params, lower, upper, start, goal, seed, state: dict, until, opts: SearchOptions):
    """Run the search ``state`` until it stops or its iteration count reaches ``until`` (a
    traced int: a batch can be advanced in chunks and resumed); ``seed`` (2,) uint32 words."""
    dt = start.dtype
    nq, C, E = start.shape[0], int(opts.capacity), int(opts.candidates)
    frac = jnp.asarray(extension_fractions(opts), dt)
    K = frac.shape[0]
    step = jnp.asarray(opts.step, dt)
    i32 = jnp.int32
    slots = jnp.arange(C, dtype=i32)
    sidx = jnp.arange(1, E + 1, dtype=i32)

    def nearest(Q, n, x):                                     # x (..., nq) -> (...,) slot
        d = jnp.sum((Q - x[..., None, :]) ** 2, axis=-1)
        return jnp.argmin(jnp.where(slots < n, d, jnp.inf), axis=-1).astype(i32), jnp.min(
            jnp.where(slots < n, d, jnp.inf), axis=-1)

    def cond(s):
        return ~s["stop"] & (s["it"] < until)

    def body(s):
        u = counter_uniform(seed, s["it"], (E, nq + 1), np.dtype(dt).type)
        connect = s["mode"] == 1
        a = s["a"]
        b = 1 - a
        # extend proposals: E motions of tree a towards random samples (the first may be the other root)
        X = lower + u[:, :nq] * (upper - lower)
        biased = (sidx == 1) & (u[:, nq] < opts.goal_bias)
        X = jnp.where(biased[:, None], s["q"][b, 0], X)
        near_a, _ = nearest(s["q"][a], s["n"][a], X)
        qa = s["q"][a][near_a]
        span = jnp.max(jnp.abs(X - qa), axis=-1)
        xe = jnp.where((span <= step)[:, None], X, qa + (X - qa) * (step / jnp.maximum(span, step))[:, None])
        # connect proposals: up to E consecutive steps of tree b towards the target node of tree a
        goal_q = s["q"][a, s["tgt"]]
        near_b, _ = nearest(s["q"][b], s["n"][b], goal_q)
        qb = s["q"][b][near_b]
        ns = jnp.maximum(jnp.ceil(jnp.max(jnp.abs(goal_q - qb)) / step - 1e-6), 1.0).astype(i32)
        ends_c = qb + (jnp.minimum(sidx, ns) / ns).astype(dt)[:, None] * (goal_q - qb)
        starts_c = jnp.concatenate([qb[None], ends_c[:-1]])
        seg0 = jnp.where(connect, starts_c, qa)
        seg1 = jnp.where(connect, ends_c, xe)
        pts = seg0[:, None] + frac[None, :, None] * (seg1 - seg0)[:, None]
        v = valid(params, jnp.concatenate([pts.reshape(E * K, nq), start[None], goal[None]]))
        ends_ok = v[-1] & v[-2]
        seg_ok = jnp.all(v[:E * K].reshape(E, K), axis=1)
        # grow the tree
        t = jnp.where(connect, b, a)
        nt = s["n"][t]
        room = nt + E <= C
        ext_ok = seg_ok & ~connect & room
        ext_slot = nt + jnp.cumsum(ext_ok, dtype=i32) - 1
        prefix = jnp.cumprod(seg_ok.astype(i32))
        m = jnp.sum(prefix)
        con_ok = (prefix == 1) & (sidx <= ns) & connect & room
        con_parent = jnp.concatenate([near_b[None], nt + sidx[:-1] - 1])
        slot = jnp.where(connect, jnp.where(con_ok, nt + sidx - 1, C), jnp.where(ext_ok, ext_slot, C))
        par = jnp.where(connect, con_parent, near_a)
        q2 = s["q"].at[t, slot].set(seg1, mode="drop")
        par2 = s["parent"].at[t, slot].set(par, mode="drop")
        n2 = s["n"].at[t].add(jnp.sum(slot < C).astype(i32))
        found = connect & room & (m >= ns)
        grew = jnp.any(ext_ok)
        # extend -> connect towards the new node nearest to tree b
        _, d_b = nearest(s["q"][b], s["n"][b], xe)
        pick = jnp.argmin(jnp.where(ext_ok, d_b, jnp.inf)).astype(i32)
        keep_connecting = connect & room & (m == E) & ~found
        mode = jnp.where(connect, found | keep_connecting, grew).astype(i32)
        a2 = jnp.where(connect, jnp.where(found | keep_connecting, a, b), jnp.where(grew, a, b))
        return dict(q=q2, parent=par2, n=n2, it=s["it"] + 1, mode=mode, a=a2,
                    tgt=jnp.where(~connect & grew, ext_slot[pick], s["tgt"]),
                    last=jnp.where(found, nt + ns - 1, s["last"]), found=found, full=~room, ends=ends_ok,
                    stop=found | ~room | ~ends_ok)

    return jax.lax.while_loop(cond, body, state)


def search_result(s: dict, start, opts: SearchOptions) -> SearchOut:
    """The :class:`SearchOut` of a (stopped or budget-spent) search state ``s``: both parent
    chains read out into the path buffer."""
    P, E, i32 = int(opts.path_capacity), int(opts.candidates), jnp.int32
    K = extension_fractions(opts).shape[0]
    a = s["a"]
    order = jnp.stack([a, 1 - a])
    bufs, cnt, complete = _walk(s["q"][order], s["parent"][order], jnp.stack([s["tgt"], s["last"]]), P)
    A, B, da, db, ca, cb = bufs[0], bufs[1], cnt[0], cnt[1], complete[0], complete[1]
    L = da + db - 1
    fits = ca & cb & (L <= P)
    Lc = jnp.clip(L, 1, P)
    k = jnp.minimum(jnp.arange(P, dtype=jnp.int32), Lc - 1)
    src = jnp.where(a == 0, k, Lc - 1 - k)                   # position along root_a ... root_b
    ia = jnp.clip(da - 1 - src, 0, P - 1)
    ib = jnp.clip(src - da + 1, 0, P - 1)
    path = jnp.where((src < da)[:, None], A[ia], B[ib])
    found = s["found"] & fits
    code = jnp.where(found, FOUND, jnp.where(~s["ends"], ENDPOINT_INVALID,
                     jnp.where(s["found"], PATH_TOO_LONG, jnp.where(s["full"], TREE_FULL, BUDGET))))
    path = jnp.where(found, path, jnp.broadcast_to(start, path.shape))
    return SearchOut(path, jnp.where(found, Lc, 0), found, code.astype(i32), s["it"],
                     jnp.sum(s["n"]), s["it"] * (E * K + 2))


# ---- host validity: the same search, states checked by a Python function ------------------------

#: The Python validity function of the host search in progress (one at a time, under _HOST_LOCK):
#: the compiled loop calls it through :func:`_host_valid`, so the loop compiles once per options
#: and dimension, not once per function.
_HOST: dict = {}
_HOST_LOCK = threading.Lock()


def _host_call(qs):
    return np.asarray(_HOST["valid"](np.asarray(qs, np.float64)), dtype=bool).reshape(-1)


def _host_valid(params, qs):
    """``valid`` for :func:`rrt_connect_search` that asks the host (``jax.pure_callback``)."""
    return jax.pure_callback(_host_call, jax.ShapeDtypeStruct(qs.shape[:1], jnp.bool_), qs)


_host_search = jax.jit(rrt_connect_search, static_argnums=(0, 7))


def host_search(valid, start, goal, key, lower, upper, opts: SearchOptions) -> dict:
    """:func:`rrt_connect_search` -- the same jitted loop -- with states checked by a Python
    function ``valid(qs (B, nq) float64) -> (B,) bool`` (any checker: exact GJK, MuJoCo, a task's
    own contact test). ``lower``/``upper``: the finite sampling box (equal bounds hold a
    coordinate fixed). Returns ``found``, ``code``, ``path`` ((length, nq) float64, the exact
    ``start`` and ``goal`` at its ends; None when not found), ``iterations``, ``nodes``, ``states``."""
    opts = opts.validate()
    start = np.asarray(start, np.float64).reshape(-1)
    goal = np.asarray(goal, np.float64).reshape(-1)
    dt = jnp.zeros(()).dtype if not jax.config.jax_enable_x64 else jnp.float64
    args = [jnp.asarray(x, dt) for x in (lower, upper, start, goal)]
    with _HOST_LOCK:
        _HOST["valid"] = valid
        try:
            out = jax.device_get(_host_search(_host_valid, jnp.zeros((), dt), *args, _keys(key, None), opts))
        finally:
            _HOST.pop("valid", None)
    found = bool(out.found)
    path = None
    if found:
        path = np.asarray(out.path[:int(out.length)], np.float64)
        path[0], path[-1] = start, goal
    return {"found": found, "code": int(out.code), "path": path, "iterations": int(out.iterations),
            "nodes": int(out.nodes), "states": int(out.states)}


# ---- host front end: compiled per checker, NumPy in and out ---------------------------------------

_COMPILED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _box(checker, unbounded: float = np.pi):
    lo = np.where(np.isfinite(checker.lower), checker.lower, -unbounded)
    hi = np.where(np.isfinite(checker.upper), checker.upper, unbounded)
    return lo, hi


def compiled_solver(checker, opts: SearchOptions, smoothing=None, batched: bool = False):
    """The jitted ``solve(params, lower, upper, start, goal, key) -> (SearchOut, smoothed path,
    smoothed length, shortcut states)`` for ``checker`` (cached per checker object and options;
    ``params`` is an argument, so a new world of the same capacities never recompiles; its
    executables persist with the compile cache, :mod:`caliper_jax.planning.aot`).
    ``smoothing``: :class:`~caliper_jax.planning.vshortcut.ShortcutOptions` or None (no
    shortcutting: the smoothed outputs repeat the raw path). ``batched``: vmapped over
    ``start``, ``goal`` and ``key`` (leading axis)."""
    per = _COMPILED.setdefault(checker, {})
    k = (opts, smoothing, batched)
    if k in per:
        return per[k]
    valid = checker.valid

    def solve(params, lower, upper, start, goal, key):
        out = rrt_connect_search(valid, params, lower, upper, start, goal, key, opts)
        if smoothing is None:
            return out, out.path, out.length, jnp.int32(0)
        path, length, states = shortcut_search(valid, params, out.path, out.length,
                                               jax.random.fold_in(key, 1 << 30), smoothing)
        return out, path, length, states

    fn = jax.vmap(solve, in_axes=(None, None, None, 0, 0, 0)) if batched else solve
    per[k] = program("vrrt.solve", fn, lambda: (program_key(checker), opts, smoothing, batched))
    return per[k]


def _dtype(params):
    """The search dtype: the world's first floating leaf (float32 when none)."""
    for leaf in jax.tree_util.tree_leaves(params):
        if jnp.issubdtype(jnp.asarray(leaf).dtype, jnp.floating):
            return jnp.asarray(leaf).dtype
    return jnp.float32


def _put(xs, dt) -> list:
    """Host arrays converted to ``dt`` by NumPy, then placed on the device (no conversion
    program to trace and compile per shape on a fresh process's first call)."""
    return [jax.device_put(np.asarray(x, dtype=dt)) for x in xs]     # dt None: as they are


def _keys(seed_or_key, n: int | None):
    from caliper_jax.planning.sampling import as_key

    key = as_key(seed_or_key)
    return key if n is None else jax.random.split(key, n)


def flat_batched(valid):
    """``valid`` whose batching rule checks all problems' states in ONE call: under ``vmap`` over
    problems, ``qs`` (B, n, nq) is flattened to (B * n, nq) (the lane kernel's layout: every op
    runs over contiguous states) instead of a batched kernel per problem; a batched world falls
    back to the plain ``vmap``."""
    @jax.custom_batching.custom_vmap
    def flat(params, qs):
        return valid(params, qs)

    @flat.def_vmap
    def _rule(axis_size, in_batched, params, qs):
        p_batched, q_batched = in_batched
        if any(jax.tree_util.tree_leaves(p_batched)):
            return jax.vmap(valid, in_axes=(jax.tree_util.tree_map(lambda b: 0 if b else None, p_batched),
                                            0 if q_batched else None))(params, qs), True
        if not q_batched:
            return valid(params, qs), False
        B, n, nq = qs.shape
        return valid(params, qs.reshape(B * n, nq)).reshape(B, n), True

    return flat


def chunked_programs(checker, opts: SearchOptions, smoothing=None):
    """The three vmapped programs of a search advanced in chunks (cached per checker and
    options): ``init(starts, goals, keys) -> (states, seeds)``, ``steps(params, lower, upper,
    starts, goals, seeds, states, until) -> states`` and ``finish(params, states, starts, keys) ->
    (SearchOut, smoothed path, smoothed length, shortcut states)``; the same bytes per problem as
    :func:`compiled_solver` (same keys, same loop)."""
    per = _COMPILED.setdefault(checker, {})
    k = ("chunked", opts, smoothing)
    if k in per:
        return per[k]
    valid, flat = checker.valid, flat_batched(checker.valid)

    def init(start, goal, key):
        return search_init(start, goal, opts), jax.random.bits(key, (2,), jnp.uint32)

    def steps(params, lower, upper, start, goal, seed, state, until):
        return search_steps(flat, params, lower, upper, start, goal, seed, state, until, opts)

    def finish(params, state, start, key):
        out = search_result(state, start, opts)
        if smoothing is None:
            return out, out.path, out.length, jnp.int32(0)
        path, length, states = shortcut_search(valid, params, out.path, out.length,
                                               jax.random.fold_in(key, 1 << 30), smoothing)
        return out, path, length, states

    def key():
        return program_key(checker), opts, smoothing

    per[k] = (program("vrrt.init", jax.vmap(init), lambda: (opts,)),
              program("vrrt.steps", jax.vmap(steps, in_axes=(None, None, None, 0, 0, 0, 0, None)), key),
              program("vrrt.finish", jax.vmap(finish, in_axes=(None, 0, 0, 0)), key))
    return per[k]


def _bucket(n: int, most: int) -> int:
    """The batch size ``n`` active problems run at: ``most`` divided by 4 while that still holds
    them and is at least 4 (few sizes: each is one compile of the loop)."""
    size = most
    while size // 4 >= max(n, 4):
        size //= 4
    return size


def _solve_chunked(checker, params, lo, hi, starts, goals, keys, opts: SearchOptions, smoothing, chunk: int):
    """:func:`solve_many` in rounds of ``chunk`` iterations: after each round the problems that
    stopped leave the batch (host-side compaction, padded to :func:`_bucket` sizes), so a batch costs
    about the sum of its problems' iterations rather than B times the slowest one's."""
    init, steps, finish = chunked_programs(checker, opts, smoothing)
    dt = _dtype(params)
    B = starts.shape[0]
    S, G = _put((starts, goals), dt)
    lo_d, hi_d = _put((lo, hi), dt)
    state, seeds = jax.device_get(init(S, G, keys))
    state = {k: np.array(v) for k, v in state.items()}
    starts_t, goals_t = np.asarray(starts, dt), np.asarray(goals, dt)
    active, it = np.arange(B), 0
    while active.size and it < opts.max_iterations:
        it = min(it + chunk, opts.max_iterations)
        take = np.concatenate([active, np.repeat(active[-1:], _bucket(active.size, B) - active.size)])
        rows = _put((starts_t[take], goals_t[take], seeds[take]), None)
        sub = {k: jax.device_put(v[take]) for k, v in state.items()}
        sub = jax.device_get(steps(params, lo_d, hi_d, *rows, sub, jax.device_put(np.int32(it))))
        m = active.size
        for k in state:
            state[k][active] = sub[k][:m]
        active = active[~np.asarray(sub["stop"][:m])]
    return finish(params, {k: jax.device_put(v) for k, v in state.items()}, S, keys)


def solve_many(checker, starts, goals, key, opts: SearchOptions | None = None, smoothing=None,
               params=None, chunk: int | None = None) -> dict:
    """Plan ``starts[k] -> goals[k]`` (B, nq) in ONE vmapped call (problem k gets
    ``jax.random.split(key, B)[k]``). Returns NumPy: ``found`` (B,), ``code`` (B,), ``raw`` and
    ``path`` (B, P, nq) padded buffers with ``raw_length`` / ``length`` (B,), ``iterations``,
    ``nodes``, ``states`` (B,). ``params``: the checker's world (default ``checker.params``).
    ``chunk``: advance the batch ``chunk`` iterations at a time and drop the problems that
    stopped between rounds (:func:`_solve_chunked`; the same results per problem)."""
    opts = (opts or SearchOptions()).validate()
    starts = np.asarray(starts, np.float64)
    goals = np.asarray(goals, np.float64)
    if starts.ndim != 2 or starts.shape[1] != checker.nq or goals.shape != starts.shape:
        raise CaliperError(f"starts/goals: expected matching (B, {checker.nq}) arrays, got {starts.shape} "
                           f"and {goals.shape}")
    if not (np.all(np.isfinite(starts)) and np.all(np.isfinite(goals))):
        raise CaliperError("starts/goals: non-finite values")
    params = checker.params if params is None else params
    dt = _dtype(params)
    lo, hi = _box(checker)
    if chunk is not None:
        if int(chunk) < 1:
            raise CaliperError(f"chunk must be >= 1, got {chunk!r}")
        keys = _keys(key, starts.shape[0])
        out = _solve_chunked(checker, params, lo, hi, starts, goals, keys, opts, smoothing, int(chunk))
        return _numpy(*out)
    fn = compiled_solver(checker, opts, smoothing, batched=True)
    out, path, length, sc = fn(params, *_put((lo, hi, starts, goals), dt), _keys(key, starts.shape[0]))
    return _numpy(out, path, length, sc)


def solve_one(checker, start, goal, key, opts: SearchOptions | None = None, smoothing=None,
              params=None) -> dict:
    """One problem, not vmapped (the results of :func:`solve_many` for one row may differ: other keys)."""
    opts = (opts or SearchOptions()).validate()
    start = np.asarray(start, np.float64).reshape(-1)
    goal = np.asarray(goal, np.float64).reshape(-1)
    for name, x in (("start", start), ("goal", goal)):
        if x.shape != (checker.nq,) or not np.all(np.isfinite(x)):
            raise CaliperError(f"{name}: expected {checker.nq} finite joint values")
    params = checker.params if params is None else params
    dt = _dtype(params)
    lo, hi = _box(checker)
    fn = compiled_solver(checker, opts, smoothing, batched=False)
    out, path, length, sc = fn(params, *_put((lo, hi, start, goal), dt), _keys(key, None))
    return _numpy(out, path, length, sc)


def search_one(checker, start, goal, key, opts: SearchOptions | None = None, params=None) -> dict:
    """:func:`solve_one` without smoothing (the search alone; its ``path`` is the raw path)."""
    return solve_one(checker, start, goal, key, opts, None, params)


def shortcut_one(checker, found: dict, key, smoothing, params=None) -> dict:
    """Shortcut the raw path of a :func:`search_one` result ``found`` (same ``key``): ``path``
    (P, nq), ``length``, ``states`` -- the same bytes :func:`solve_one` with ``smoothing`` gives."""
    params = checker.params if params is None else params
    dt = _dtype(params)
    per = _COMPILED.setdefault(checker, {})
    k = ("shortcut", smoothing)
    if k not in per:
        valid = checker.valid

        def fn(params, path, length, key):
            return shortcut_search(valid, params, path, length, jax.random.fold_in(key, 1 << 30), smoothing)

        per[k] = program("vrrt.shortcut", fn, lambda: (program_key(checker), smoothing))
    raw, n = _put((found["raw"],), dt)[0], _put((found["raw_length"],), jnp.int32)[0]
    path, length, states = jax.device_get(per[k](params, raw, n, _keys(key, None)))
    return {"path": np.asarray(path, np.float64), "length": np.asarray(length), "states": np.asarray(states)}


def valid_padded(checker, qs, params=None, chunk: int = 256) -> np.ndarray:
    """``checker.valid_np`` in chunks of exactly ``chunk`` states, the last one padded (one
    compiled shape for every caller: fewer traced variants, a shorter first call)."""
    qs = np.asarray(qs, np.float64).reshape(-1, checker.nq)
    n = qs.shape[0]
    if n == 0:
        return np.zeros(0, bool)
    size = -(-n // chunk) * chunk
    padded = np.concatenate([qs, np.repeat(qs[-1:], size - n, axis=0)])
    params = checker.params if params is None else params
    step = min(size, chunk)
    return np.concatenate([np.asarray(checker.valid_np(padded[i:i + step], params))
                           for i in range(0, size, step)])[:n]


#: Escape radii (largest per-joint offset, rad or m) tried around an endpoint the sphere model rejects.
ESCAPE_RADII = (0.05, 0.1, 0.15, 0.2, 0.3, 0.45, 0.6)


def escape_endpoints(checker, exact, qs, key, *, params=None, per_radius: int = 32, tries: int = 4):
    """For each configuration of ``qs`` (m, nq) that the planning ``checker`` rejects (its sphere
    cover is conservative, so a state clear by a few cm of the exact geometry can still be
    rejected): a nearby state the checker accepts, joined to it by a straight edge that the
    ``exact`` :class:`~caliper_jax.planning.validity.Checker` validates at its resolution.

    Candidates: ``per_radius`` uniform offsets in each box of ``ESCAPE_RADII``, clipped to the
    limits, all checked in one planning-checker call; per configuration the ``tries`` nearest
    accepted ones have their edges checked exactly, nearest first (one batched call per rank, for
    every configuration still without an escape). Returns (``out`` (m, nq):
    the configuration itself when accepted, the escape state, or NaN when none was found;
    ``moved`` (m,) bool). Deterministic for ``key``."""
    qs = np.asarray(qs, np.float64).reshape(-1, checker.nq)
    params = checker.params if params is None else params
    ok0 = valid_padded(checker, qs, params)
    out = qs.copy()
    moved = ~ok0
    todo = np.flatnonzero(moved)
    if todo.size == 0:
        return out, moved
    lo, hi = _box(checker)
    R = len(ESCAPE_RADII)
    k = _keys(key, None)
    words = np.asarray(jax.random.key_data(k) if jnp.issubdtype(k.dtype, jax.dtypes.prng_key) else k)
    rng = np.random.default_rng([int(w) for w in words.reshape(-1)])     # host NumPy: no compile per shape
    u = rng.uniform(-1.0, 1.0, (todo.size, R, per_radius, checker.nq))
    radii = np.asarray(ESCAPE_RADII)[None, :, None, None]
    cand = np.clip(qs[todo][:, None, None] + radii * u, lo, hi).reshape(todo.size, R * per_radius, -1)
    good = valid_padded(checker, cand, params).reshape(todo.size, -1)
    dist = np.where(good, np.max(np.abs(cand - qs[todo][:, None]), axis=-1), np.inf)
    order = np.argsort(dist, axis=1, kind="stable")[:, :tries]
    out[todo] = np.nan
    pending = np.ones(todo.size, bool)
    for rank in range(order.shape[1]):          # nearest candidates first, one exact call per rank
        rows = [r for r in range(todo.size) if pending[r] and np.isfinite(dist[r, order[r, rank]])]
        if not rows:
            break
        ends = np.array([cand[r, order[r, rank]] for r in rows])
        ok = exact.edges_valid(qs[todo[rows]], ends)
        for r, e, good in zip(rows, ends, ok, strict=True):
            if good:
                out[todo[r]] = e
                pending[r] = False
    return out, moved


def _numpy(out: SearchOut, path, length, sc) -> dict:
    out, path, length, sc = jax.device_get((out, path, length, sc))
    return {"found": np.asarray(out.found), "code": np.asarray(out.code),
            "raw": np.asarray(out.path, np.float64), "raw_length": np.asarray(out.length),
            "path": np.asarray(path, np.float64), "length": np.asarray(length),
            "iterations": np.asarray(out.iterations), "nodes": np.asarray(out.nodes),
            "states": np.asarray(out.states) + np.asarray(sc)}


__all__ = ["BUDGET", "CODES", "ENDPOINT_INVALID", "FOUND", "PATH_TOO_LONG", "SearchOptions", "SearchOut",
           "TREE_FULL", "bisection_order", "chunked_programs", "compiled_solver", "escape_endpoints",
           "extension_fractions", "flat_batched", "host_search", "levels_for", "rrt_connect_search",
           "search_init", "search_one", "search_result", "search_steps", "shortcut_one", "solve_many",
           "solve_one", "valid_padded"]

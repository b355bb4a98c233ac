"""The pieces both engines of :mod:`tasks.env` share: the task -> built scene cache
(:func:`resolve_task`), the per-scene cache of jitted functions (:func:`_cached`), the randomisation
draw shapes and the check of explicit draws (:func:`check_draws`), the argument checks and the
:class:`EnvShapes` mixin. ``tasks.env`` (MuJoCo's C batch) and ``tasks.env_mjx`` (MJX) both import
this module, so neither imports the other at import time (``tasks.env`` reaches ``tasks.env_mjx``
only inside ``VecEnv(engine="mjx")``); ``tasks.env`` re-exports the public names.
"""
from __future__ import annotations

import os
import weakref
from collections import OrderedDict

import numpy as np

from caliper_jax.errors import CaliperError
from tasks import env_spec as S

#: Built scenes of the last few tasks (a Task is hashable), so that repeated calls with one task
#: name (``evaluate(policy, "lift-cube")`` in a loop) reuse the scene and its compiled functions.
_SCENES: OrderedDict = OrderedDict()
_SCENES_KEPT = 4


def resolve_task(task, *, mjx: bool = False):
    """A :class:`tasks.scene.TaskScene` from a TaskScene, a Task, a task file path or a zoo name.
    The last few built scenes are reused while the task, its robot file and the precision
    (``jax_enable_x64``) are unchanged. ``mjx``: the MJX engine's scene -- a registry arm gets its
    primitive collision model (a TaskScene built with mesh colliders is rebuilt)."""
    import jax

    from tasks.arms import arm_profile
    from tasks.scene import TaskScene, build_scene
    from tasks.schema import Task, find_task, load_task

    if isinstance(task, TaskScene):
        if not mjx or task.profile is None or task.colliders == "primitive":
            return task
        task = task.task
    if not isinstance(task, Task):
        task = load_task(find_task(task))
    colliders = "primitive" if mjx and arm_profile(task.robot) is not None else "mesh"
    try:
        st = os.stat(task.robot)
        key = (task, st.st_mtime_ns, st.st_size, bool(jax.config.jax_enable_x64), colliders)
        hash(key)
    except (OSError, TypeError):                 # unreadable robot (build_scene says why) or unhashable
        return build_scene(task, colliders=colliders)
    ts = _SCENES.get(key)
    if ts is None:
        ts = _SCENES[key] = build_scene(task, colliders=colliders)
        while len(_SCENES) > _SCENES_KEPT:
            _SCENES.popitem(last=False)
    _SCENES.move_to_end(key)
    return ts


#: Jitted functions per compiled scene (weakly keyed), so that envs of one built task share compiles.
_COMPILED: dict = {}


def _cached(scene, key, make):
    """``make()`` once per (compiled ``scene`` object, ``key``) while the scene lives."""
    sid = id(scene)
    entry = _COMPILED.get(sid)
    if entry is None or entry[0]() is not scene:
        entry = (weakref.ref(scene, lambda _: _COMPILED.pop(sid, None)), {})
        _COMPILED[sid] = entry
    fns = entry[1]
    if key not in fns:
        fns[key] = make()
    return fns[key]


def draw_shapes(L: S.EnvLayout, nu: int) -> dict:
    """{field: per-world shape} of every randomisation field of a task of layout ``L`` with ``nu``
    servos (the draws of W worlds are (W, *shape))."""
    P = L.nprop
    return {"prop_xy": (P, 2), "prop_yaw": (P,), "prop_mass": (P,), "prop_friction": (P,),
            "damping": (L.nv,), "gain": (nu,), "gravity": ()}



def episode_draws(task_scene, randomization, seed: int, worlds, episodes) -> dict:
    """{field: (n, ...) float32}: the draws of episode ``episodes[i]`` of world ``worlds[i]`` of an
    env of ``task_scene`` with ``randomization`` (the resolved spec, ``env.randomization``; None:
    {}) and ``seed`` -- what either engine draws for those episodes, without building an env."""
    import jax

    if randomization is None:
        return {}
    shapes = draw_shapes(S.make_layout(task_scene), task_scene.scene.mj.nu)
    base = jax.random.PRNGKey(int(seed))

    def one(world, episode):
        return S.draw(randomization, jax.random.fold_in(jax.random.fold_in(base, world), episode), shapes)

    w = np.asarray(worlds, np.int32).reshape(-1)
    e = np.asarray(episodes, np.int32).reshape(-1)
    return {k: np.asarray(v) for k, v in jax.vmap(one)(w, e).items()}

#: Relative slack of the range check on given draws: a float32 draw may round a few ulps past a bound.
_RANGE_SLACK = 8 * float(np.finfo(np.float32).eps)


def check_draws(draws, spec: S.EnvRandomization | None, shapes: dict, num_envs: int) -> dict:
    """Explicit draws for a reset, checked -> {field: read-only (W, *shape) float32 array}.

    ``draws``: {field: array-like (W, *shape)} with exactly the fields ``spec`` enables (an env
    without randomisation takes {}). Values are rounded to float32, the dtype of seeded draws, so a
    draw read back from JSON (float32 -> Python float) is the same draw bit for bit. Each error is a
    CaliperError naming the field: unknown or missing field, wrong shape, non-numeric, non-finite,
    outside the spec's range (offsets |x| <= a, factors in [lo, hi], a few float32 ulps of slack)."""
    if not isinstance(draws, dict):
        raise CaliperError(f"draws: expected a dict {{field: (W, ...) array}}, got {type(draws).__name__}")
    enabled = [f for f in S.RANDOM_FIELDS if spec is not None and getattr(spec, f) is not None]
    for k in draws:
        if k not in S.RANDOM_FIELDS:
            raise CaliperError(f"draws: unknown field {k!r} (fields: {', '.join(S.RANDOM_FIELDS)})")
        if k not in enabled:
            raise CaliperError(f"draws.{k}: this env does not randomise {k} (its randomization.{k} is None)")
    out = {}
    for k in enabled:
        if k not in draws:
            raise CaliperError(f"draws: missing field {k!r} (this env randomises {', '.join(enabled)})")
        try:
            a = np.asarray(draws[k])
        except (TypeError, ValueError) as exc:
            raise CaliperError(f"draws.{k}: not an array ({exc})") from None
        want = (num_envs, *shapes[k])
        if a.dtype.kind not in "iuf" or a.shape != want:
            raise CaliperError(f"draws.{k}: expected a numeric array of shape {want} (num_envs, ...), got "
                               f"{a.dtype} {a.shape}")
        a = a.astype(np.float32)
        bad = np.argwhere(~np.isfinite(a))
        if len(bad):
            raise CaliperError(f"draws.{k}: non-finite value at {tuple(int(i) for i in bad[0])}")
        value = getattr(spec, k)
        lo, hi = (-value, value) if k in ("prop_xy", "prop_yaw") else value
        slack = _RANGE_SLACK * max(abs(lo), abs(hi))
        out_of = np.argwhere((a < lo - slack) | (a > hi + slack))
        if len(out_of):
            i = tuple(int(j) for j in out_of[0])
            raise CaliperError(f"draws.{k}: value {float(a[i]):.9g} at {i} is outside the randomisation "
                               f"range [{lo:.9g}, {hi:.9g}]")
        a.flags.writeable = False
        out[k] = a
    return out


def _reset_draws(options, spec, shapes, num_envs):
    """The checked explicit draws of ``reset(options=...)`` (None: draw from the streams)."""
    if options is None:
        return None
    if not isinstance(options, dict) or set(options) - {"draws"}:
        raise CaliperError(f"reset(options=...): the only option is 'draws', got "
                           f"{sorted(options) if isinstance(options, dict) else type(options).__name__}")
    return check_draws(options["draws"], spec, shapes, num_envs) if "draws" in options else None


def _check_args(num_envs, randomization, nthread, seed) -> None:
    if not isinstance(num_envs, (int, np.integer)) or isinstance(num_envs, bool) or num_envs < 1:
        raise CaliperError(f"num_envs must be an integer >= 1, got {num_envs!r}")
    if randomization is not None and not isinstance(randomization, S.EnvRandomization):
        raise CaliperError(f"randomization: expected a tasks.env_spec.EnvRandomization or None, got "
                           f"{type(randomization).__name__}")
    if nthread is not None and (not isinstance(nthread, (int, np.integer)) or nthread < 1):
        raise CaliperError(f"nthread must be None or an integer >= 1, got {nthread!r}")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise CaliperError(f"seed must be an integer, got {seed!r}")


class EnvShapes:
    """Sizes and rates every engine reports, from its ``layout`` (:class:`tasks.env_spec.EnvLayout`)."""

    @property
    def obs_dim(self) -> int:
        return self.layout.obs_dim

    @property
    def action_dim(self) -> int:
        return self.layout.nq

    @property
    def horizon(self) -> int:
        """Control ticks per episode."""
        return self.layout.horizon

    @property
    def dt(self) -> float:
        """Control tick (s)."""
        return 1.0 / self.layout.fps

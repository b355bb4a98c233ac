"""Deploy: a trained policy driving W worlds tick by tick, exactly as it was trained.

The functional core is pure JAX (it jits and runs inside ``lax.scan``):

* :class:`DeployState` -- per world: the observation window, the frames seen this episode, the
  action queue, and the temporal-ensembling running sums;
* :func:`init_state` / :func:`reset_worlds` -- fresh worlds, or a new episode in some of them;
* :func:`step` -- push the current observation, run the network when needed, return one action.

Semantics (those of :mod:`learn.config` and the training batches of :mod:`learn.policies.base`):

* **History.** The window holds the real last ``n_obs_steps`` frames, oldest first, the current
  frame last. At an episode's start the frames before it repeat the episode's first frame and
  have ``obs_mask`` False -- the training padding.
* **Chunking.** The network runs when the queue is exhausted (the first tick of an episode, then
  every ``n_action_steps`` ticks); each tick pops the next action of the chunk.
* **Temporal ensembling** (``temporal_ensemble = k``, ``n_action_steps == 1``): the network runs
  every tick; the action of tick t is the average of every prediction made for tick t, weighted
  ``exp(-k * i)`` with i = 0 the *oldest* prediction (lerobot's ``ACTTemporalEnsembler``). It is
  kept online: per future offset a weighted sum, a weight sum and a count, O(chunk) per tick.
* **Cameras.** A policy trained on cameras (``features.cameras``) keeps a window of their frames
  beside the state window (the same padding), fed each tick from the environment's rendered
  ``info["images"]`` (both engines render every world's cameras in one call); the environment's
  cameras must match the trained ones in names, resolution and intrinsics.
* **Keys.** World w's key at a tick is ``fold_in(fold_in(fold_in(key, world_id), episode), tick)``
  (``tick`` the frame index in its episode): a stochastic policy is deterministic given ``key``,
  and a world's draws do not depend on the other worlds.

:class:`Deployer` is the host face over a :class:`tasks.env.VecEnv`: one jitted call per control
tick for all worlds, mapping the environment's observation to the policy's with
:func:`learn.features.env_observation` inside the jit. Deploying at an fps other than the
training fps is refused (the P005 failure class: chunks consumed at the wrong rate).
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.errors import CaliperError


@dataclass(frozen=True)
class DeploySpec:
    """The static numbers of deploy (hashable: a jit static argument)."""

    n_obs_steps: int
    chunk_size: int
    n_action_steps: int
    temporal_ensemble: float | None
    obs_dim: int
    action_dim: int
    image_shape: tuple | None = None   # (cameras, height, width) of a policy that sees, else None

    def __post_init__(self):
        for name in ("n_obs_steps", "chunk_size", "n_action_steps", "obs_dim", "action_dim"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise CaliperError(f"deploy: {name} must be an integer >= 1, got {v!r}")
        if self.n_action_steps > self.chunk_size:
            raise CaliperError(f"deploy: n_action_steps ({self.n_action_steps}) > chunk_size "
                               f"({self.chunk_size})")
        if self.temporal_ensemble is not None:
            if self.n_action_steps != 1:
                raise CaliperError(f"deploy: temporal_ensemble needs n_action_steps == 1, got "
                                   f"{self.n_action_steps}")
            if not self.temporal_ensemble >= 0:
                raise CaliperError(f"deploy: temporal_ensemble must be >= 0, got {self.temporal_ensemble!r}")

    @property
    def ensembling(self) -> bool:
        return self.temporal_ensemble is not None

    @staticmethod
    def of(policy) -> DeploySpec:
        """The spec of a :class:`learn.bundle.TrainedPolicy`."""
        c, f = policy.config, policy.features
        te = None if c.temporal_ensemble is None else float(c.temporal_ensemble)
        return DeploySpec(int(c.n_obs_steps), int(c.chunk_size), int(c.n_action_steps), te, int(f.obs_dim),
                          int(f.action_dim), f.image_shape)


class DeployState(NamedTuple):
    """Deploy state of W worlds (a pytree; every leaf has a leading world axis)."""

    obs: jax.Array          # (W, n_obs_steps, obs_dim) float32 window, oldest first, raw policy obs
    seen: jax.Array         # (W,) int32 frames seen this episode (the index of the next frame)
    queue: jax.Array        # (W, chunk_size, action_dim) float32 the last chunk (chunking mode)
    queue_pos: jax.Array    # (W,) int32 next queue entry to pop; >= n_action_steps: refill
    ens_sum: jax.Array      # (W, chunk_size, action_dim) float32 weighted sum of predictions for tick + j
    ens_weight: jax.Array   # (W, chunk_size) float32 sum of their weights
    ens_count: jax.Array    # (W, chunk_size) int32 number of predictions for tick + j
    world: jax.Array        # (W,) int32 world id (key stream)
    episode: jax.Array      # (W,) int32 episodes started before the current one (key stream)
    images: jax.Array | None = None  # (W, n_obs_steps, cameras, H, W, 3) uint8 camera window, or None


def init_state(spec: DeploySpec, num_worlds: int, world_ids=None) -> DeployState:
    """Fresh state of ``num_worlds`` worlds at the start of their first episode. ``world_ids``
    (W,) int: each world's key stream (default 0..W-1)."""
    W, n, C, D, A = int(num_worlds), spec.n_obs_steps, spec.chunk_size, spec.obs_dim, spec.action_dim
    world = jnp.arange(W, dtype=jnp.int32) if world_ids is None else jnp.asarray(world_ids, jnp.int32)
    if world.shape != (W,):
        raise CaliperError(f"deploy: world_ids must have shape ({W},), got {world.shape}")
    f32, i32 = jnp.float32, jnp.int32
    images = None if spec.image_shape is None else jnp.zeros((W, n, *spec.image_shape, 3), jnp.uint8)
    return DeployState(obs=jnp.zeros((W, n, D), f32), seen=jnp.zeros(W, i32), queue=jnp.zeros((W, C, A), f32),
                       queue_pos=jnp.full(W, spec.n_action_steps, i32), ens_sum=jnp.zeros((W, C, A), f32),
                       ens_weight=jnp.zeros((W, C), f32), ens_count=jnp.zeros((W, C), i32), world=world,
                       episode=jnp.zeros(W, i32), images=images)


def reset_worlds(state: DeployState, mask) -> DeployState:
    """A new episode in the worlds where ``mask`` (W,) is True: empty window, queue and ensemble.
    A world that has seen no frame yet is left as it is (resetting twice starts one episode)."""
    mask = jnp.asarray(mask, bool)
    C = state.queue.shape[1]

    def clear(x, fill=0):
        m = mask.reshape(mask.shape + (1,) * (x.ndim - 1))
        return jnp.where(m, jnp.asarray(fill, x.dtype), x)

    started = mask & (state.seen > 0)
    return state._replace(obs=clear(state.obs), seen=clear(state.seen), queue=clear(state.queue),
                          images=None if state.images is None else clear(state.images),
                          queue_pos=clear(state.queue_pos, C + 1), ens_sum=clear(state.ens_sum),
                          ens_weight=clear(state.ens_weight), ens_count=clear(state.ens_count),
                          episode=state.episode + started.astype(jnp.int32))


def _push(history, frame, first):
    """``history`` (W, n, ...) with ``frame`` (W, ...) appended (oldest dropped), or ``frame``
    repeated n times in the worlds where ``first`` (W,) is True."""
    first = first.reshape(first.shape + (1,) * (history.ndim - 1))
    rolled = jnp.concatenate([history[:, 1:], frame[:, None]], axis=1)
    return jnp.where(first, jnp.broadcast_to(frame[:, None], history.shape), rolled)


def window(state: DeployState, obs):
    """(window (W, n_obs, obs_dim), obs_mask (W, n_obs)) after pushing frame ``obs`` (W, obs_dim)."""
    obs = jnp.asarray(obs, jnp.float32)
    n = state.obs.shape[1]
    hist = _push(state.obs, obs, state.seen == 0)
    mask = jnp.arange(n)[None, :] >= (n - 1 - state.seen)[:, None]
    return hist, mask


def world_keys(state: DeployState, key):
    """(W,) keys of the current tick: fold_in(fold_in(fold_in(key, world), episode), tick)."""
    fold = jax.random.fold_in
    return jax.vmap(lambda w, e, t: fold(fold(fold(key, w), e), t))(state.world, state.episode, state.seen)


def step(spec: DeploySpec, chunk_fn, graphdef, params, state: DeployState, obs, key, images=None):
    """One control tick of every world -> (state, action (W, action_dim) raw float32, refilled (W,)
    bool: the network ran for that world). ``obs`` (W, obs_dim): the raw policy observation
    (:func:`learn.features.env_observation`); ``images`` (W, cameras, H, W, 3) uint8: the current
    frames of the policy's cameras (exactly when it has some); ``chunk_fn`` / ``graphdef`` /
    ``params``: from :meth:`learn.bundle.TrainedPolicy.chunk_fn`; ``key``: the base key (the same
    every tick)."""
    if (state.images is None) != (images is None):
        raise CaliperError("deploy: this policy sees cameras; pass their frames (images=)" if images is None
                           else "deploy: this policy has no cameras but images were given")
    hist, mask = window(state, obs)
    img_hist = None if images is None else _push(state.images, jnp.asarray(images, jnp.uint8),
                                                 state.seen == 0)
    W, C, A = state.queue.shape
    keys = world_keys(state, key)

    def run():
        if img_hist is None:
            def one(o, m, k):
                return chunk_fn(graphdef, params, o[None], m[None], k)[0]
            return jax.vmap(one)(hist, mask, keys).astype(jnp.float32).reshape(W, C, A)

        def one_img(o, m, k, im):
            return chunk_fn(graphdef, params, o[None], m[None], k, im[None])[0]
        return jax.vmap(one_img)(hist, mask, keys, img_hist).astype(jnp.float32).reshape(W, C, A)

    if spec.ensembling:
        chunk = run()
        weights = jnp.exp(-spec.temporal_ensemble * jnp.arange(C, dtype=jnp.float32))
        w_new = weights[jnp.minimum(state.ens_count, C - 1)]                     # (W, C)
        total = state.ens_sum + chunk * w_new[..., None]
        weight = state.ens_weight + w_new
        count = state.ens_count + 1
        action = total[:, 0] / weight[:, 0, None]

        def shift(x):
            return jnp.concatenate([x[:, 1:], jnp.zeros_like(x[:, :1])], axis=1)

        state = state._replace(ens_sum=shift(total), ens_weight=shift(weight), ens_count=shift(count))
        refilled = jnp.ones(W, bool)
    else:
        refilled = state.queue_pos >= spec.n_action_steps
        chunk = jax.lax.cond(jnp.any(refilled), run, lambda: jnp.zeros((W, C, A), jnp.float32))
        queue = jnp.where(refilled[:, None, None], chunk, state.queue)
        pos = jnp.where(refilled, 0, state.queue_pos)
        action = jnp.take_along_axis(queue, pos[:, None, None], axis=1)[:, 0]
        state = state._replace(queue=queue, queue_pos=pos + 1)
    return state._replace(obs=hist, seen=state.seen + 1, images=img_hist), action, refilled


# ---- host face -------------------------------------------------------------------------------------
_reset_jit = jax.jit(reset_worlds)   # one dispatch instead of ~20 eager ops per episode end

#: Jitted deploy ticks per (policy, model, normalizer, env layout), shared by Deployers of one policy.
_JITS: dict = {}


def _layout_key(env_layout) -> tuple:
    return (int(env_layout.nq), int(env_layout.nv), int(env_layout.nprop), len(env_layout.pair_props))


def check_cameras(policy, cameras) -> None:
    """Raise a one-line :class:`CaliperError` when the environment's ``cameras`` (PinholeCameras)
    are not the ones ``policy`` was trained on (names and order, resolution, intrinsics)."""
    from learn.features import CameraSpec, camera_mismatch

    trained = tuple(policy.features.cameras)
    given = tuple(CameraSpec.of(c) for c in cameras or ())
    if not trained and not given:
        return
    diff = camera_mismatch(trained, given)
    if diff is not None:
        raise CaliperError(f"camera configuration differs from training ({diff}; trained vs deploy): the "
                           f"policy would see images it was not trained on; render the trained cameras")


def check_compatible(policy, env_layout, *, allow_fps_mismatch: bool = False) -> None:
    """Raise a :class:`CaliperError` when ``policy`` cannot drive an environment of ``env_layout``:
    a different control rate (unless allowed), or observation / action widths that differ."""
    from learn.features import env_observation

    fl = policy.features
    if int(env_layout.fps) != int(fl.fps) and not allow_fps_mismatch:
        raise CaliperError(f"policy trained at {fl.fps} fps, env runs at {env_layout.fps} fps: action chunks "
                           f"would be consumed at the wrong rate (P005); record and train at the env's fps, "
                           f"or pass allow_fps_mismatch=True")
    probe = env_observation(fl, env_layout, np.zeros((1, env_layout.obs_dim), np.float32), np)
    if probe.shape[-1] != fl.obs_dim:
        raise CaliperError(f"the environment gives a {probe.shape[-1]}-wide policy observation "
                           f"({', '.join(fl.state_keys)}); the policy reads {fl.obs_dim}")
    if int(env_layout.nq) != int(fl.action_dim):
        raise CaliperError(f"the policy writes {fl.action_dim} actions; the environment takes "
                           f"{env_layout.nq} joint position targets")


def deploy_tick(policy, env_layout):
    """(jitted fn(params, state, env_obs (W, env obs_dim), key) -> (state, action, refilled), spec,
    params): one deploy tick of ``policy`` on raw environment observations, cached per policy and
    environment layout (a new Deployer of the same policy does not recompile)."""
    from learn.features import env_observation

    fn, graphdef, params = policy.chunk_fn()
    key = (id(policy), id(policy.model), id(policy.normalizer), repr(policy.config), repr(policy.features),
           _layout_key(env_layout))
    entry = _JITS.get(key)
    if entry is None or entry[0]() is not policy:
        spec, fl = DeploySpec.of(policy), policy.features

        def tick(params, state, env_obs, key, images=None):
            obs = env_observation(fl, env_layout, jnp.asarray(env_obs, jnp.float32), jnp)
            return step(spec, fn, graphdef, params, state, obs, key, images)

        pid = id(policy)
        ref = weakref.ref(policy, lambda _: [_JITS.pop(k, None) for k in list(_JITS) if k[0] == pid])
        entry = _JITS[key] = (ref, jax.jit(tick), spec)
    return entry[1], entry[2], params


class PolicyState(NamedTuple):
    """The state of a :class:`JaxPolicy` over W worlds (a pytree: it rides in a scan's carry)."""

    params: object          # the network's weights (nnx state)
    deploy: DeployState
    key: jax.Array          # the base key of stochastic policies


@dataclass(frozen=True, eq=False)
class JaxPolicy:
    """A stateful, pure-JAX policy on raw environment observations, for ``lax.scan`` (e.g.
    :meth:`tasks.env_mjx.MjxEnv.rollout`):

    * ``init(num_worlds, seed=0) -> PolicyState`` -- fresh worlds, the policy's current weights;
    * ``step(state, env_obs (W, env obs_dim), reset (W,) bool, images=None) -> (state, action
      (W, nq))`` -- ``reset`` marks the worlds whose ``env_obs`` is the first of a new episode (the
      env's ``terminated | truncated`` of the previous tick: the engines auto-reset), exactly as
      :class:`Deployer` drives them (history, chunks, temporal ensembling, per-world keys);
      ``images``: the env's rendered frames ``{camera: (W, H, W, 3)}`` (``info["images"]``), which a
      policy that sees needs.

    Hashable by identity (a jit static argument); :func:`jax_policy` returns the same object for
    the same policy and environment layout, so repeated rollouts do not recompile."""

    init: object
    step: object
    spec: DeploySpec


_JAX_POLICIES: dict = {}


def jax_policy(policy, env_layout, *, allow_fps_mismatch: bool = False) -> JaxPolicy:
    """The :class:`JaxPolicy` of ``policy`` (a :class:`learn.bundle.TrainedPolicy`) on an
    environment of ``env_layout`` (``env.layout``); refused as :class:`Deployer` refuses."""
    from learn.features import env_observation

    check_compatible(policy, env_layout, allow_fps_mismatch=allow_fps_mismatch)
    key = (id(policy), id(policy.model), id(policy.normalizer), repr(policy.config), repr(policy.features),
           _layout_key(env_layout), int(env_layout.fps))
    entry = _JAX_POLICIES.get(key)
    if entry is not None and entry[0]() is policy:
        return entry[1]
    fn, graphdef, _ = policy.chunk_fn()
    spec, fl = DeploySpec.of(policy), policy.features

    def init(num_worlds: int, seed: int = 0) -> PolicyState:
        params = policy.chunk_fn()[2]                 # the current weights (same structure)
        return PolicyState(params, init_state(spec, num_worlds), jax.random.PRNGKey(int(seed)))

    names = tuple(c.name for c in fl.cameras)

    def step_fn(state: PolicyState, env_obs, reset, images=None):
        ds = reset_worlds(state.deploy, reset)
        obs = env_observation(fl, env_layout, jnp.asarray(env_obs, jnp.float32), jnp)
        frames = stack_images(images, names, jnp)          # None for a policy without cameras
        ds, action, _ = step(spec, fn, graphdef, state.params, ds, obs, state.key, frames)
        return state._replace(deploy=ds), action

    jp = JaxPolicy(init, step_fn, spec)
    pid = id(policy)
    ref = weakref.ref(policy, lambda _: [_JAX_POLICIES.pop(k, None) for k in list(_JAX_POLICIES)
                                         if k[0] == pid])
    _JAX_POLICIES[key] = (ref, jp)
    return jp


class Deployer:
    """``policy`` (a :class:`learn.bundle.TrainedPolicy`) driving ``num_envs`` worlds of an
    environment of layout ``env_layout`` (:class:`tasks.env_spec.EnvLayout`, e.g. ``env.layout``).

    ``act(env_obs)`` once per control tick for all worlds -> (W, action_dim) NumPy joint targets;
    ``reset(mask)`` when episodes end (``terminated | truncated`` of the env step: the next ``act``
    sees the new episode's first observation). ``last_refilled`` (W,) bool: the worlds whose
    network ran on the last tick. ``seed``: the base key of stochastic policies.
    A policy that sees needs ``cameras`` (the environment's, ``env.cameras``; checked against the
    trained ones) and ``act(env_obs, images)`` with the rendered ``info["images"]``."""

    def __init__(self, policy, env_layout, num_envs: int, seed: int = 0, *, allow_fps_mismatch: bool = False,
                 cameras=()):
        check_compatible(policy, env_layout, allow_fps_mismatch=allow_fps_mismatch)
        check_cameras(policy, cameras)
        self.camera_names = tuple(c.name for c in policy.features.cameras)
        if not isinstance(num_envs, (int, np.integer)) or isinstance(num_envs, bool) or num_envs < 1:
            raise CaliperError(f"num_envs must be an integer >= 1, got {num_envs!r}")
        self.policy, self.env_layout, self.num_envs = policy, env_layout, int(num_envs)
        self._tick, self.spec, self._params = deploy_tick(policy, env_layout)
        self._key = jax.random.PRNGKey(int(seed))
        self.state = init_state(self.spec, self.num_envs)
        self.last_refilled = np.zeros(self.num_envs, bool)

    def reset(self, mask=None) -> None:
        """Start a new episode in every world (``mask`` None) or in those where ``mask`` is True."""
        mask = np.ones(self.num_envs, bool) if mask is None else np.asarray(mask, bool)
        if mask.shape != (self.num_envs,):
            raise CaliperError(f"reset: mask must have shape ({self.num_envs},), got {mask.shape}")
        if mask.any():
            self.state = _reset_jit(self.state, mask)

    def act(self, env_obs, images=None) -> np.ndarray:
        """(W, action_dim) joint targets for observations ``env_obs`` (W, env obs_dim) and, for a
        policy that sees, ``images`` {camera: (W, H, W, 3) uint8} (``info["images"]``)."""
        env_obs = np.asarray(env_obs, np.float32)
        if env_obs.shape != (self.num_envs, self.env_layout.obs_dim):
            raise CaliperError(f"act: expected observations ({self.num_envs}, {self.env_layout.obs_dim}), "
                               f"got {env_obs.shape}")
        frames = stack_images(images, self.camera_names)
        self.state, action, refilled = self._tick(self._params, self.state, env_obs, self._key, frames)
        self.last_refilled = np.asarray(refilled)
        return np.asarray(action)


def stack_images(images, names, xp=np):
    """(W, cameras, H, W, 3) uint8 of rendered ``images`` {camera: (W, H, W, 3)} in the order of
    ``names``, or None when ``names`` is empty."""
    if not names:
        return None
    missing = [n for n in names if images is None or n not in images]
    if missing:
        raise CaliperError(f"deploy: no rendered frames of camera(s) {', '.join(missing)} (create the "
                           f"environment with cameras={list(names)})")
    return xp.stack([xp.asarray(images[n]) for n in names], axis=1)


__all__ = ["DeploySpec", "DeployState", "Deployer", "JaxPolicy", "PolicyState", "check_cameras",
           "check_compatible", "deploy_tick", "init_state", "jax_policy", "reset_worlds", "stack_images",
           "step", "window", "world_keys"]

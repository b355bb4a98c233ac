"""learn.deploy: deploy mirrors training -- the observation window as recorded (first-frame padding,
masks), chunk refills every n_action_steps, lerobot's temporal ensembling, per-world resets, the fps
guard, and deterministic per-world keys. Hand-written policies whose chunk is a known function of
the window make every assertion exact."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from caliper_jax.errors import CaliperError
from learn.bundle import TrainedPolicy
from learn.config import BCConfig
from learn.deploy import Deployer, DeploySpec, init_state, reset_worlds, step
from learn.features import FeatureLayout
from learn.normalize import Normalizer
from tasks.env_spec import EnvLayout


class _Base(nnx.Module):
    def __init__(self, config, obs_dim, action_dim):
        self.config, self.obs_dim, self.action_dim = config, obs_dim, action_dim
        self.scale = nnx.Param(jnp.ones(()))

    def loss(self, batch, key):
        raise NotImplementedError


class Echo(_Base):
    """chunk[b, i] = (flattened window, mask as 0/1) + 1000 i: the policy reports what it saw."""

    def sample(self, obs, obs_mask, key):
        B, C = obs.shape[0], self.config.chunk_size
        flat = jnp.concatenate([obs.reshape(B, -1), obs_mask.astype(jnp.float32)], axis=-1) * self.scale
        return flat[:, None, :] + 1000.0 * jnp.arange(C, dtype=jnp.float32)[None, :, None]


class LastFrame(_Base):
    """chunk[b, i, a] = 10 * obs[b, -1, a] + i (action_dim <= obs_dim)."""

    def sample(self, obs, obs_mask, key):
        C, A = self.config.chunk_size, self.action_dim
        x = obs[:, -1, :A] * self.scale
        return 10.0 * x[:, None, :] + jnp.arange(C, dtype=jnp.float32)[None, :, None]


class Wavy(_Base):
    """chunk[b, i, a] = sin((i + 1) * (a + 1) * obs[b, -1, a]) + 0.1 i: distinct predictions per tick."""

    def sample(self, obs, obs_mask, key):
        C, A = self.config.chunk_size, self.action_dim
        x = obs[:, -1, :A] * self.scale
        i = jnp.arange(C, dtype=jnp.float32)[None, :, None]
        a = jnp.arange(A, dtype=jnp.float32)[None, None, :]
        return jnp.sin((i + 1) * (a + 1) * x[:, None, :]) + 0.1 * i


class Pick(_Base):
    """chunk[b, i] = obs[b, -1, idx] for every i (e.g. hold the measured joint positions)."""

    def __init__(self, config, obs_dim, action_dim, idx):
        super().__init__(config, obs_dim, action_dim)
        self.idx = tuple(idx)

    def sample(self, obs, obs_mask, key):
        x = obs[:, -1, np.array(self.idx)] * self.scale
        return jnp.broadcast_to(x[:, None, :], (x.shape[0], self.config.chunk_size, x.shape[-1]))


class Noisy(_Base):
    """chunk = last frame's first action_dim entries + N(0, 1) noise from the key."""

    def sample(self, obs, obs_mask, key):
        B, C, A = obs.shape[0], self.config.chunk_size, self.action_dim
        return obs[:, -1, None, :A] * self.scale + jax.random.normal(key, (B, C, A))


def trained(cls, obs_dim, action_dim, *, fps=50, dims=None, extra=(), **config):
    """A TrainedPolicy of module ``cls`` (identity normalisation, so chunks are exact)."""
    cfg = BCConfig(**config)
    model = cls(cfg, obs_dim, action_dim, *extra)
    dims = (obs_dim,) if dims is None else dims
    keys = ("observation.state", "observation.environment_state")[:len(dims)]
    fl = FeatureLayout(keys, dims, "action", action_dim, fps)
    norm = Normalizer(np.zeros(obs_dim, np.float32), np.ones(obs_dim, np.float32),
                      np.zeros(action_dim, np.float32), np.ones(action_dim, np.float32))
    return TrainedPolicy(model, cfg, fl, norm)


def core(policy):
    """(jitted step(state, obs, key), spec): the functional core of ``policy``."""
    fn, g, params = policy.chunk_fn()
    spec = DeploySpec.of(policy)
    return jax.jit(lambda state, obs, key: step(spec, fn, g, params, state, obs, key)), spec


def frame(t, W=1, D=2):
    """Frame t of world w: [t + 1 + 100 w, -(t + 1)] (distinct per tick and world)."""
    return np.array([[t + 1 + 100 * w, -(t + 1)] + [0.5 * t] * (D - 2) for w in range(W)], np.float32)


@pytest.mark.parametrize("n", [2, 3])
def test_window_holds_the_last_frames_with_first_frame_padding(n):
    D = 2
    pol = trained(Echo, D, n * D + n, n_obs_steps=n, chunk_size=1, n_action_steps=1)
    run, spec = core(pol)
    state, key = init_state(spec, 1), jax.random.PRNGKey(0)
    frames = [frame(t)[0] for t in range(4)]
    for t in range(4):
        state, action, refilled = run(state, frame(t), key)
        seen, mask = np.asarray(action[0, :n * D]).reshape(n, D), np.asarray(action[0, n * D:])
        want = np.stack([frames[max(0, t - (n - 1) + j)] for j in range(n)])   # padding = frame 0
        np.testing.assert_array_equal(seen, want)
        np.testing.assert_array_equal(mask, [float(j >= n - 1 - t) for j in range(n)])
        assert bool(refilled[0])
    assert int(state.seen[0]) == 4


def test_chunk_refills_every_n_action_steps_and_pops_in_order():
    pol = trained(LastFrame, 2, 2, chunk_size=4, n_action_steps=3)
    run, spec = core(pol)
    state, key = init_state(spec, 2), jax.random.PRNGKey(0)
    flags = []
    for t in range(8):
        state, action, refilled = run(state, frame(t, W=2), key)
        flags.append(bool(refilled[0]))
        assert bool(refilled[0]) == bool(refilled[1])
        r = 3 * (t // 3)                                   # the refill tick that made this chunk
        chunk = pol.predict_chunk(frame(r, W=2)[:, None])  # what the network returned then
        np.testing.assert_array_equal(np.asarray(action), chunk[:, t - r])
        np.testing.assert_array_equal(np.asarray(action), 10 * frame(r, W=2) + (t - r))
    assert flags == [True, False, False, True, False, False, True, False]


def _lerobot_ensembler(chunks, coeff):
    """Port of lerobot's ACTTemporalEnsembler.update over a sequence of chunks (C, A) -> actions."""
    C = chunks[0].shape[0]
    w = np.exp(-coeff * np.arange(C))
    wc = np.cumsum(w)
    ens, count, out = None, None, []
    for a in chunks:
        a = a.astype(np.float64)
        if ens is None:
            ens, count = a.copy(), np.ones(C, int)
        else:
            ens = ens * wc[count - 1][:, None]
            ens += a[:-1] * w[count][:, None]
            ens /= wc[count][:, None]
            count = np.minimum(count + 1, C)
            ens = np.concatenate([ens, a[-1:]])
            count = np.concatenate([count, [1]])
        out.append(ens[0])
        ens, count = ens[1:], count[1:]
    return np.array(out)


@pytest.mark.parametrize("coeff", [0.0, 0.3])
def test_temporal_ensembling_equals_brute_force_and_lerobot(coeff):
    C, A, T = 4, 2, 11
    pol = trained(Wavy, 2, A, chunk_size=C, n_action_steps=1, temporal_ensemble=coeff)
    run, spec = core(pol)
    state, key = init_state(spec, 2), jax.random.PRNGKey(0)
    frames = [frame(t, W=2) * 0.1 for t in range(T)]
    preds = [pol.predict_chunk(f[:, None]) for f in frames]          # (W, C, A) chunk made at tick s
    got = []
    for t in range(T):
        state, action, refilled = run(state, frames[t], key)
        assert np.asarray(refilled).all()
        got.append(np.asarray(action))
    got = np.array(got)                                              # (T, W, A)
    for t in range(T):
        first = max(0, t - C + 1)                                    # oldest prediction for tick t
        ws = np.array([np.exp(-coeff * i) for i in range(t - first + 1)])
        ps = np.array([preds[s][:, t - s] for s in range(first, t + 1)])   # (k, W, A), oldest first
        want = (ws[:, None, None] * ps).sum(0) / ws.sum()
        np.testing.assert_allclose(got[t], want, rtol=1e-5, atol=1e-6)
    for w in range(2):
        ref = _lerobot_ensembler([p[w] for p in preds], coeff)
        np.testing.assert_allclose(got[:, w], ref, rtol=1e-5, atol=1e-6)


def test_reset_of_some_worlds_only():
    n, D, C = 2, 2, 3
    pol = trained(Echo, D, n * D + n, n_obs_steps=n, chunk_size=C, n_action_steps=3)
    run, spec = core(pol)
    state, key = init_state(spec, 3), jax.random.PRNGKey(0)
    for t in range(2):
        state, _, _ = run(state, frame(t, W=3), key)
    state = reset_worlds(state, np.array([False, True, False]))
    assert np.asarray(state.seen).tolist() == [2, 0, 2]
    assert np.asarray(state.episode).tolist() == [0, 1, 0]
    state, action, refilled = run(state, frame(2, W=3), key)
    assert np.asarray(refilled).tolist() == [False, True, False]
    a = np.asarray(action)
    f0, f2 = frame(0, W=3), frame(2, W=3)
    # world 1 starts over: window [x2, x2], mask [F, T], first chunk entry
    np.testing.assert_array_equal(a[1], np.concatenate([f2[1], f2[1], [0.0, 1.0]]))
    # worlds 0 and 2 pop entry 2 of the chunk made at tick 0 (window [x0, x0], mask [F, T])
    for w in (0, 2):
        np.testing.assert_array_equal(a[w], np.concatenate([f0[w], f0[w], [0.0, 1.0]]) + 2000.0)
    # resetting a world that has seen no frame does not start another episode
    assert np.asarray(reset_worlds(reset_worlds(state, [True] * 3), [True] * 3).episode).tolist() == [1, 2, 1]


def test_reset_clears_the_temporal_ensemble():
    pol = trained(Wavy, 2, 2, chunk_size=4, n_action_steps=1, temporal_ensemble=0.1)
    run, spec = core(pol)
    key = jax.random.PRNGKey(0)
    state = init_state(spec, 2)
    for t in range(3):
        state, _, _ = run(state, frame(t, W=2) * 0.1, key)
    state = reset_worlds(state, np.array([True, False]))
    fresh = init_state(spec, 2)
    for t in range(3):
        fresh, _, _ = run(fresh, frame(t, W=2) * 0.1, key)
    x = frame(3, W=2) * 0.1
    state, a, _ = run(state, x, key)
    fresh, b, _ = run(fresh, x, key)
    np.testing.assert_allclose(np.asarray(a[0]), pol.predict_chunk(x[:, None])[0, 0], rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(a[1]), np.asarray(b[1]))


def _layout(fps=50):
    """A hand-made environment layout: 3 joints, 1 prop, no zones (obs_dim 3 + 3 + 2 + 13 = 21)."""
    return EnvLayout(nq=3, nv=3, prop_names=("cube",), pair_props=(), pair_centers=np.zeros((0, 3)),
                     gripper_q=2, gripper_open=0.04, gripper_closed=0.0, jaw_center=np.zeros(3),
                     jaw_half=np.full(3, 0.03), prop_reach=np.array([0.05]), fps=fps, substeps=10,
                     horizon=100)


def _pick_policy(idx, fps=50, **config):
    return trained(Pick, 10, 3, fps=fps, dims=(3, 7), extra=(idx,), **config)


def test_deployer_maps_env_observations_as_recorded():
    L = _layout()
    rng = np.random.default_rng(0)
    env_obs = rng.normal(size=(4, L.obs_dim)).astype(np.float32)
    # policy observation = [q (3), prop pos (3), prop quat (4)]; the prop block starts at nq + nv + 2
    hold = Deployer(_pick_policy([0, 1, 2]), L, 4)
    np.testing.assert_array_equal(hold.act(env_obs), env_obs[:, :3])
    pos = Deployer(_pick_policy([3, 4, 5]), L, 4)
    np.testing.assert_array_equal(pos.act(env_obs), env_obs[:, 8:11])
    quat = Deployer(_pick_policy([6, 7, 8]), L, 4)
    np.testing.assert_array_equal(quat.act(env_obs), env_obs[:, 11:14])
    assert hold.last_refilled.tolist() == [True] * 4


def test_deployer_equals_the_core_inside_lax_scan():
    L = _layout()
    pol = _pick_policy([0, 1, 2], n_obs_steps=2, chunk_size=4, n_action_steps=2)
    rng = np.random.default_rng(1)
    T, W = 7, 3
    env_obs = rng.normal(size=(T, W, L.obs_dim)).astype(np.float32)
    dep = Deployer(pol, L, W)
    host, flags = [], []
    for t in range(T):
        host.append(dep.act(env_obs[t]))
        flags.append(dep.last_refilled.copy())
    assert [f[0] for f in flags] == [True, False] * 3 + [True]

    from learn.features import env_observation

    fn, g, params = pol.chunk_fn()
    spec = DeploySpec.of(pol)

    def body(state, x):
        state, action, _ = step(spec, fn, g, params, state, env_observation(pol.features, L, x, jnp),
                                jax.random.PRNGKey(0))
        return state, action

    _, scanned = jax.jit(lambda xs: jax.lax.scan(body, init_state(spec, W), xs))(env_obs)
    np.testing.assert_array_equal(np.asarray(scanned), np.array(host))
    # a held chunk repeats the q of its refill tick
    np.testing.assert_array_equal(host[1], env_obs[0, :, :3])


def test_fps_mismatch_is_refused_unless_allowed():
    pol = _pick_policy([0, 1, 2])
    with pytest.raises(CaliperError, match="trained at 50 fps, env runs at 25 fps"):
        Deployer(pol, _layout(fps=25), 2)
    dep = Deployer(pol, _layout(fps=25), 2, allow_fps_mismatch=True)
    assert dep.act(np.zeros((2, 21), np.float32)).shape == (2, 3)


def test_shape_mismatches_are_refused():
    L = _layout()
    pol = trained(LastFrame, 12, 3, dims=(3, 9), chunk_size=1)      # reads 12, the env gives 10
    with pytest.raises(CaliperError, match="policy observation"):
        Deployer(pol, L, 1)
    with pytest.raises(CaliperError, match="expected observations"):
        Deployer(_pick_policy([0, 1, 2]), L, 2).act(np.zeros((3, 21)))


def test_stochastic_policy_is_deterministic_per_world_and_seed():
    L = _layout()
    pol = trained(Noisy, 10, 3, dims=(3, 7), chunk_size=2, n_action_steps=1)
    obs = np.zeros((3, L.obs_dim), np.float32)

    def run(seed, W=3, ticks=4):
        dep = Deployer(pol, L, W, seed=seed)
        return np.array([dep.act(obs[:W]) for _ in range(ticks)])

    a, b, c = run(0), run(0), run(1)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
    assert not np.allclose(a[:, 0], a[:, 1])              # each world its own key
    assert not np.allclose(a[0], a[1])                    # ... and each tick
    np.testing.assert_array_equal(run(0, W=1), a[:, :1])  # a world's draws do not depend on the others


def test_spec_validation():
    with pytest.raises(CaliperError, match="temporal_ensemble needs n_action_steps == 1"):
        DeploySpec(1, 4, 2, 0.1, 2, 2)
    with pytest.raises(CaliperError, match="n_action_steps"):
        DeploySpec(1, 2, 3, None, 2, 2)

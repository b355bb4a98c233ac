"""The policy modules of learn.policies: shapes, determinism, masking, that they learn a simple
map, and that ``sample`` runs jitted after nnx.split / nnx.merge (as deploy calls it).

Tiny configs throughout. Everything runs jitted through module-level functions with the graphdef
static (eager dispatch compiles every op on its own and is far slower); tests that share a config
share the compiled code, and training runs as one jitted ``lax.scan`` per kind.
"""
import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from caliper_jax.errors import CaliperError
from learn.config import ACTConfig, BCConfig, DiffusionConfig
from learn.policies import Batch, build_policy
from learn.policies.diffusion import beta_schedule, fill_padded

OBS_DIM, ACTION_DIM, B = 5, 3, 32


def tiny(kind: str, n_obs_steps: int = 2, **kw):
    if kind == "bc":
        kw = {"dropout": 0.1, **kw}
        return BCConfig(n_obs_steps=n_obs_steps, chunk_size=4, hidden=(32, 32), **kw)
    if kind.startswith("act"):  # "act_vae": with the CVAE and dropout
        kw = {"dropout": 0.1 if kind == "act_vae" else 0.0, **kw}
        return ACTConfig(n_obs_steps=n_obs_steps, chunk_size=4, dim_model=32, n_heads=2, dim_feedforward=64,
                         n_encoder_layers=1, n_decoder_layers=1, n_vae_encoder_layers=1, latent_dim=8,
                         use_vae=kind == "act_vae", **kw)
    if kind == "diff_mlp":
        return DiffusionConfig(n_obs_steps=n_obs_steps, chunk_size=4, n_action_steps=2, hidden=(64, 64),
                               time_embed_dim=16, train_timesteps=50, inference_steps=5, **kw)
    if kind == "diff_unet":  # chunk 5 with two levels: padded to 6 inside the U-Net
        return DiffusionConfig(n_obs_steps=n_obs_steps, chunk_size=5, n_action_steps=2, denoiser="unet",
                               unet_channels=(16, 32), kernel_size=3, time_embed_dim=16, train_timesteps=50,
                               inference_steps=5, **kw)
    raise ValueError(kind)


KINDS = ["bc", "act", "act_vae", "diff_mlp", "diff_unet"]


# LLVM -O0: halves the compile time of these small programs, which dominates this file's runtime.
jit = functools.partial(jax.jit, compiler_options={"xla_backend_optimization_level": 0})


@functools.partial(jit, static_argnums=0)
def _loss(graphdef, state, batch, key):
    return nnx.merge(graphdef, state).loss(batch, key)


@functools.partial(jit, static_argnums=0)
def _sample(graphdef, state, obs, obs_mask, key):
    return nnx.merge(graphdef, state).sample(obs, obs_mask, key)


def loss_of(model, batch, key):
    """``model.loss`` jitted after nnx.split (in the model's current train/eval mode)."""
    loss, metrics = _loss(*nnx.split(model), batch, key)
    return float(loss), metrics


def sample_of(model, obs, obs_mask, key):
    """``model.sample`` jitted after nnx.split / merged inside, as learn.bundle runs it."""
    return _sample(*nnx.split(model), obs, obs_mask, key)


def random_batch(config, seed=1, b=B, pad_from=None) -> Batch:
    """Random normalised data (NumPy: eager jax.random would compile per shape); sample 0's older
    frames are padding, and with ``pad_from`` samples 0 and 1 have padded actions from there on."""
    rng = np.random.default_rng(seed)
    obs = rng.standard_normal((b, config.n_obs_steps, OBS_DIM), np.float32)
    action = rng.standard_normal((b, config.chunk_size, ACTION_DIM), np.float32)
    obs_mask = np.ones((b, config.n_obs_steps), bool)
    obs_mask[0, :-1] = False
    action_mask = np.ones((b, config.chunk_size), bool)
    if pad_from is not None:
        action_mask[:2, pad_from:] = False
    return Batch(obs, obs_mask, action, action_mask)


@pytest.mark.parametrize("n_obs_steps", [1, 2])
@pytest.mark.parametrize("kind", KINDS)
def test_shapes(kind, n_obs_steps):
    config = tiny(kind, n_obs_steps)
    model = build_policy(config, OBS_DIM, ACTION_DIM, seed=0)
    assert (model.config, model.obs_dim, model.action_dim) == (config, OBS_DIM, ACTION_DIM)
    batch = random_batch(config)
    key = jax.random.PRNGKey(2)
    # n_obs_steps=1: shapes by abstract evaluation (no compile); n_obs_steps=2 runs for real (the
    # other tests share those compiled programs)
    run = (lambda f, *args: f.eval_shape(*args)) if n_obs_steps == 1 else (lambda f, *args: f(*args))
    loss, metrics = run(_loss, *nnx.split(model), batch, key)
    chex.assert_shape(loss, ())
    assert metrics
    for value in metrics.values():
        chex.assert_shape(value, ())
    model.eval()
    out = run(_sample, *nnx.split(model), batch.obs, batch.obs_mask, key)
    chex.assert_shape(out, (B, config.chunk_size, ACTION_DIM))
    if n_obs_steps == 2:
        chex.assert_tree_all_finite((loss, metrics, out))


def _params(model):
    return jax.tree.leaves(nnx.state(model, nnx.Param))


@pytest.mark.parametrize("kind", ["bc", "act_vae", "diff_unet"])
def test_determinism(kind):
    config = tiny(kind)
    a, b, c = (build_policy(config, OBS_DIM, ACTION_DIM, seed=s) for s in (0, 0, 1))
    for x, y in zip(_params(a), _params(b), strict=True):
        np.testing.assert_array_equal(x, y)
    assert any(not np.array_equal(x, y) for x, y in zip(_params(a), _params(c), strict=True))
    batch = random_batch(config)
    k1, k2 = jax.random.PRNGKey(5), jax.random.PRNGKey(6)
    # train mode: the key drives dropout / the CVAE latent / the diffusion noise, and only it
    assert loss_of(a, batch, k1)[0] == loss_of(a, batch, k1)[0] == loss_of(b, batch, k1)[0]
    assert loss_of(a, batch, k1)[0] != loss_of(a, batch, k2)[0]
    a.eval()
    np.testing.assert_array_equal(sample_of(a, batch.obs, batch.obs_mask, k1),
                                  sample_of(a, batch.obs, batch.obs_mask, k1))
    if kind.startswith("diff"):  # the key seeds DDIM's starting noise
        assert not np.allclose(sample_of(a, batch.obs, batch.obs_mask, k1),
                               sample_of(a, batch.obs, batch.obs_mask, k2))


def test_eval_mode_switches_dropout_off():
    config = tiny("bc")  # dropout 0.1
    model = build_policy(config, OBS_DIM, ACTION_DIM, seed=0)
    batch = random_batch(config)
    k1, k2 = jax.random.PRNGKey(5), jax.random.PRNGKey(6)
    assert loss_of(model, batch, k1)[0] != loss_of(model, batch, k2)[0]
    model.eval()
    assert loss_of(model, batch, k1)[0] == loss_of(model, batch, k2)[0]
    np.testing.assert_array_equal(sample_of(model, batch.obs, batch.obs_mask, k1),
                                  sample_of(model, batch.obs, batch.obs_mask, k2))


@pytest.mark.parametrize("kind", KINDS)
def test_padded_actions_do_not_change_the_loss(kind):
    config = tiny(kind)
    model = build_policy(config, OBS_DIM, ACTION_DIM, seed=0)
    batch = random_batch(config, pad_from=2)
    garbage = np.where(batch.action_mask[..., None], batch.action, np.float32(100.0))
    key = jax.random.PRNGKey(4)
    loss, _ = loss_of(model, batch, key)
    np.testing.assert_allclose(loss_of(model, batch._replace(action=garbage), key)[0], loss, rtol=1e-5)
    # ... while changing a valid action does
    changed = batch.action.copy()
    changed[0, 0] += 1.0
    assert abs(loss_of(model, batch._replace(action=changed), key)[0] - loss) > 1e-6


def test_act_ignores_padded_observations():
    config = tiny("act")
    model = build_policy(config, OBS_DIM, ACTION_DIM, seed=0)
    model.eval()
    batch = random_batch(config)  # sample 0's first frame is padded
    changed = batch.obs.copy()
    changed[0, 0] = 50.0
    key = jax.random.PRNGKey(0)
    np.testing.assert_allclose(sample_of(model, batch.obs, batch.obs_mask, key),
                               sample_of(model, changed, batch.obs_mask, key), atol=1e-5)


def test_fill_padded_and_schedules():
    a = jnp.arange(5.0)[None, :, None]
    filled = fill_padded(a, jnp.array([[0, 1, 1, 0, 0]], bool))
    np.testing.assert_array_equal(filled[0, :, 0], [1, 1, 2, 2, 2])
    for name in ("squaredcos_cap_v2", "linear"):
        betas = beta_schedule(name, 100)
        assert betas.shape == (100,) and np.all(betas > 0) and np.all(betas <= 0.999)
        assert np.all(np.diff(betas) >= 0)
        assert np.prod(1 - betas) < 1e-3  # ends near pure noise
    with pytest.raises(CaliperError, match="beta_schedule"):
        beta_schedule("quadratic", 10)
    with pytest.raises(CaliperError, match="denoiser"):
        build_policy(DiffusionConfig(denoiser="transformer"), OBS_DIM, ACTION_DIM)
    with pytest.raises(CaliperError, match="n_heads"):
        build_policy(ACTConfig(dim_model=30, n_heads=4), OBS_DIM, ACTION_DIM)


@pytest.mark.parametrize("schedule", ["squaredcos_cap_v2", "linear"])
def test_ddim_with_an_oracle_denoiser_recovers_the_chunk(schedule):
    """With the true noise as the prediction, deterministic DDIM lands on x0 whatever the spacing."""
    config = DiffusionConfig(n_obs_steps=1, chunk_size=4, n_action_steps=2, hidden=(8,), train_timesteps=100,
                             inference_steps=7, beta_schedule=schedule)
    model = build_policy(config, OBS_DIM, ACTION_DIM, seed=0)
    x0 = np.random.default_rng(0).uniform(-2, 2, (2, 4, ACTION_DIM)).astype(np.float32)
    abar = jnp.asarray(np.cumprod(1 - beta_schedule(schedule, 100)), jnp.float32)
    model._eps = lambda x, obs, t: ((x - jnp.sqrt(abar[t])[:, None, None] * x0)
                                    / jnp.sqrt(1 - abar[t])[:, None, None])
    out = model.sample(np.zeros((2, 1, OBS_DIM), np.float32), np.ones((2, 1), bool), jax.random.PRNGKey(0))
    np.testing.assert_allclose(out, x0, atol=1e-5)


# -- learning -----------------------------------------------------------------------------------

N_DATA, STEPS = 128, 300


def linear_dataset(config, seed=7):
    """obs ~ N(0, 1); action[:, j] = obs[:, -1] @ W[j] (a fixed linear map per chunk step)."""
    rng = np.random.default_rng(seed)
    obs = rng.standard_normal((N_DATA, config.n_obs_steps, OBS_DIM), np.float32)
    w = rng.standard_normal((config.chunk_size, OBS_DIM, ACTION_DIM), np.float32) / np.sqrt(OBS_DIM)
    action = np.einsum("bo,toa->bta", obs[:, -1], w).astype(np.float32)
    return Batch(obs, np.ones(obs.shape[:2], bool), action, np.ones(action.shape[:2], bool))


def train(model, data: Batch, steps: int = STEPS, lr: float = 3e-3, batch: int = 64, opt_level: int = 2):
    """Adam (cosine-decayed lr) on random minibatches, the whole run one jitted scan; returns the
    per-step losses. ``opt_level``: XLA's backend optimisation level (0 compiles faster, runs slower)."""
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    tx = optax.adam(optax.cosine_decay_schedule(lr, steps, alpha=0.05))

    def step(carry, xs):
        params, opt = carry
        idx, k_loss = xs
        mb = jax.tree.map(lambda x: x[idx], data)
        (loss, _), grads = jax.value_and_grad(lambda p: nnx.merge(graphdef, p, rest).loss(mb, k_loss),
                                              has_aux=True)(params)
        updates, opt = tx.update(grads, opt, params)
        return (optax.apply_updates(params, updates), opt), loss

    data = jax.tree.map(jnp.asarray, data)
    idx = np.random.default_rng(0).integers(0, N_DATA, (steps, batch))
    keys = jax.random.split(jax.random.PRNGKey(0), steps)
    run = jax.jit(lambda p, o, xs: jax.lax.scan(step, (p, o), xs),
                  compiler_options={"xla_backend_optimization_level": opt_level})
    (params, _), losses = run(params, tx.init(params), (idx, keys))
    nnx.update(model, params)
    return np.asarray(losses)


def deploy_chunks(model, obs, obs_mask, keys):
    """``sample`` as deploy runs it: eval mode, split, merged inside a jitted ``lax.scan``."""
    model.eval()
    graphdef, state = nnx.split(model)

    def fn(graphdef, state, obs, obs_mask, keys):
        def body(_, key):
            return None, nnx.merge(graphdef, state).sample(obs, obs_mask, key)
        return jax.lax.scan(body, None, keys)[1]

    return jit(fn, static_argnums=0)(graphdef, state, obs, obs_mask, keys)


# kind -> (config overrides, train() arguments). XLA -O0 compiles the ACT step in about half the time
# at a small cost in run time; the U-Net's convolutions need -O2 to run fast.
LEARN = {"bc": ({"dropout": 0.0}, {}), "act": ({}, {"opt_level": 0}), "diff_mlp": ({}, {"lr": 1e-2}),
         "diff_unet": ({}, {"lr": 1e-2, "steps": 500})}


# the U-Net's training step takes 5-10 s to compile on 2 cores: slow (the MLP denoiser covers the
# diffusion objective and DDIM sampling by default; the U-Net's shapes, masks and determinism too)
@pytest.mark.parametrize("kind", [k if k != "diff_unet" else pytest.param(k, marks=[pytest.mark.slow,
                                                                                   pytest.mark.claim])
                                  for k in LEARN])
def test_learns_a_linear_map(kind):
    overrides, train_args = LEARN[kind]
    config = tiny(kind, **overrides)
    data = linear_dataset(config)
    obs, mask, target = data.obs[:B], data.obs_mask[:B], data.action[:B]
    key = jax.random.PRNGKey(3)
    model = build_policy(config, OBS_DIM, ACTION_DIM, seed=0)
    model.eval()
    err_before = float(np.mean(np.square(sample_of(model, obs, mask, key) - target)))
    model.train()

    losses = train(model, data, **train_args)
    initial, final = losses[:10].mean(), losses[-30:].mean()
    assert final < 0.2 * initial, (initial, final)

    model.eval()
    err = float(np.mean(np.square(sample_of(model, obs, mask, key) - target)))
    if kind.startswith("diff"):
        assert err < 0.1 * err_before, (err_before, err)
    else:
        assert err < 0.05, (err_before, err)  # the targets have variance ~1


def test_sample_under_scan_matches():
    config = tiny("diff_mlp")
    model = build_policy(config, OBS_DIM, ACTION_DIM, seed=0)
    batch = random_batch(config)
    keys = jax.random.split(jax.random.PRNGKey(3), 2)
    chunks = deploy_chunks(model, batch.obs, batch.obs_mask, keys)
    chex.assert_shape(chunks, (2, B, config.chunk_size, ACTION_DIM))
    for chunk, key in zip(chunks, keys, strict=True):
        expected = sample_of(model, batch.obs, batch.obs_mask, key)
        np.testing.assert_allclose(chunk, expected, atol=1e-5, rtol=1e-5)
    assert not np.allclose(chunks[0], chunks[1])

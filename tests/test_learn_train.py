"""learn.train: schedule, clipping, EMA, the fit loop (loss falls, validation, progress), bit-identical
resume through an orbax checkpoint, 2-device data parallelism and input validation.

Most runs use a tiny policy of this file (one hidden layer, dropout) on a linear synthetic problem,
sampled on the host; one uses the real BC-MLP on a :class:`learn.data.WindowDataset` (the batch
gathered inside the jitted step).
"""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from caliper_jax.errors import CaliperError
from learn.checkpoint import load_checkpoint
from learn.config import BCConfig, TrainConfig
from learn.policies.base import Batch
from learn.train import FlatParams, ema_update, fit, make_optimizer, make_schedule

ROOT = Path(__file__).resolve().parents[1]
OBS, ACT = 4, 2


class TinyPolicy(nnx.Module):
    """obs (B, 1, OBS) -> tanh layer (dropout) -> action (B, 1, ACT); masked MSE."""

    def __init__(self, obs_dim=OBS, action_dim=ACT, hidden=16, dropout=0.1, seed=0):
        self.config = BCConfig(hidden=(hidden,), dropout=dropout)
        self.obs_dim, self.action_dim = obs_dim, action_dim
        rngs = nnx.Rngs(seed)
        self.l1 = nnx.Linear(obs_dim, hidden, rngs=rngs)
        self.l2 = nnx.Linear(hidden, action_dim, rngs=rngs)
        self.drop = nnx.Dropout(dropout)

    def _forward(self, obs, key):
        h = jnp.tanh(self.l1(obs[:, -1]))
        if key is not None and self.drop.rate > 0:
            h = self.drop(h, rngs=key)
        return self.l2(h)[:, None]

    def loss(self, batch, key):
        m = batch.action_mask[..., None].astype(jnp.float32)
        mse = jnp.sum(jnp.square(self._forward(batch.obs, key) - batch.action) * m) / (jnp.sum(m) * ACT)
        return mse, {"mse": mse}

    def sample(self, obs, obs_mask, key):
        return self._forward(obs, None)


class ArrayData:
    """Frames of a linear map obs -> action = tanh(obs @ W), windows of 1 frame, sampled on the host."""

    def __init__(self, n=512, seed=0, obs_dim=OBS):
        rng = np.random.default_rng(seed)
        self.obs = rng.normal(size=(n, obs_dim)).astype(np.float32)
        w = np.random.default_rng(99).normal(size=(obs_dim, ACT))
        self.action = np.tanh(self.obs @ w).astype(np.float32)
        data = (jnp.asarray(self.obs), jnp.asarray(self.action))

        @jax.jit
        def sample(key, data, size):
            idx = jax.random.randint(key, (size.shape[0],), 0, n)
            o, a = data[0][idx][:, None], data[1][idx][:, None]
            return Batch(o, jnp.ones(o.shape[:2], bool), a, jnp.ones(a.shape[:2], bool))

        self._sample = lambda key, b: sample(key, data, jnp.zeros((b,)))

    def __len__(self):
        return len(self.obs)

    def sample_batch(self, key, batch_size):
        return self._sample(key, batch_size)

    def iter_epoch(self, key=None, batch_size=256, drop_last=False):
        for s in range(0, len(self), batch_size):
            o, a = self.obs[s:s + batch_size, None], self.action[s:s + batch_size, None]
            yield Batch(o, np.ones(o.shape[:2], bool), a, np.ones(a.shape[:2], bool))


def _cfg(**kw):
    base = dict(steps=200, batch_size=32, lr=1e-2, warmup=10, eval_every=100, log_every=20, seed=3)
    return TrainConfig(**{**base, **kw})


def _leaves(model):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(nnx.state(model, nnx.Param))]


# -- optimizer pieces (no training) ----------------------------------------------------------------------
def test_schedule_warmup_and_cosine_ends():
    cfg = TrainConfig(steps=1000, lr=2e-3, warmup=100, final_lr_fraction=0.05)
    points = [0, 49, 99, 100, 550, 1000, 5000]
    lr = np.asarray(jax.jit(make_schedule(cfg))(jnp.asarray(points + list(range(100, 1001)))), np.float64)
    mid = 1e-4 + (2e-3 - 1e-4) * 0.5  # halfway through the cosine
    np.testing.assert_allclose(lr[:7], [2e-5, 1e-3, 2e-3, 2e-3, mid, 1e-4, 1e-4], rtol=1e-5)
    assert np.all(np.diff(lr[7:]) <= 1e-9)  # cosine decays monotonically
    const = make_schedule(TrainConfig(steps=1000, lr=1e-3, warmup=0, schedule="constant"))
    np.testing.assert_allclose(jax.jit(const)(jnp.asarray([0, 999, 2000])), 1e-3, rtol=1e-6)
    with pytest.raises(CaliperError, match="warmup"):
        make_schedule(TrainConfig(warmup=-1))


def test_clipping_bounds_what_adam_sees():
    params = {"w": jnp.ones((3, 4)), "b": jnp.zeros(4)}
    big = {"w": jnp.full((3, 4), 100.0), "b": jnp.full(4, -50.0)}  # global norm ~ 350
    small = jax.tree_util.tree_map(lambda g: g * 1e-4, big)          # ~ 0.035
    tx = make_optimizer(TrainConfig(lr=1e-3, warmup=0, clip_norm=0.5, weight_decay=0.0))
    update = jax.jit(tx.update)
    for grads, norm in ((big, 0.5), (small, float(optax.tree.norm(small)))):
        updates, state = update(grads, tx.init(params), params)
        mu = state[1][0].mu  # adamw's first moment after one step = (1 - b1) * clipped grads
        assert float(optax.tree.norm(mu)) == pytest.approx(0.1 * norm, rel=1e-5)
        chex.assert_trees_all_equal_shapes(updates, params)
    # below the threshold the gradient passes untouched
    chex.assert_trees_all_close(mu, jax.tree_util.tree_map(lambda g: 0.1 * g, small), rtol=1e-6)


def test_weight_decay_only_on_matrices_and_flat_params_roundtrip():
    leaves = [jnp.arange(6.0).reshape(2, 3), jnp.arange(3.0), jnp.ones((3, 1))]
    flat = FlatParams(leaves)
    vec = flat.ravel(leaves)
    assert flat.sizes == {"decay/float32": 9, "nodecay/float32": 3}
    assert flat.decay_mask == {"decay/float32": True, "nodecay/float32": False}
    for a, b in zip(flat.unravel(vec), leaves, strict=True):
        np.testing.assert_array_equal(a, b)
    tx = make_optimizer(TrainConfig(lr=0.1, warmup=0, schedule="constant", weight_decay=0.5), flat.decay_mask)
    zero = jax.tree_util.tree_map(jnp.zeros_like, vec)
    upd = jax.jit(tx.update)(zero, tx.init(vec), vec)[0]  # zero grads: the update is pure decoupled decay
    np.testing.assert_allclose(upd["decay/float32"], -0.1 * 0.5 * vec["decay/float32"], rtol=1e-6)
    np.testing.assert_array_equal(upd["nodecay/float32"], 0.0)


# -- fit ---------------------------------------------------------------------------------------------------
def test_loss_falls_with_validation_and_progress():
    rows = []
    res = fit(TinyPolicy(), ArrayData(), ArrayData(n=200, seed=1), _cfg(),
              progress=lambda step, row: rows.append((step, row)))
    steps = [r["step"] for r in res.history]
    assert steps == list(range(20, 201, 20))
    first, last = res.history[0], res.history[-1]
    assert last["loss"] < 0.2 * first["loss"], (first, last)
    assert {"loss", "lr", "grad_norm", "mse"} <= set(first)
    val = res.val_losses
    assert val[:, 0].tolist() == [100, 200] and val[-1, 1] < 0.05
    assert [s for s, _ in rows] == steps and rows[-1][1]["total"] == 200 and rows[-1][1]["steps_per_s"] > 0
    assert res.steps == 200 and res.steps_per_s > 0 and res.compile_times["train"] > 0
    assert "eval" in res.compile_times
    lr = make_schedule(_cfg())
    assert first["lr"] == pytest.approx(float(lr(19))) and last["lr"] == pytest.approx(float(lr(199)))
    # the returned model is the trained one, in eval mode
    assert res.model.drop.deterministic
    pred = res.model.sample(jnp.asarray(ArrayData(n=64, seed=2).obs[:, None]), None, None)
    chex.assert_shape(pred, (64, 1, ACT))


def test_resume_is_bit_identical_and_ema_follows_its_formula(tmp_path):
    cfg = _cfg(steps=60, ema_decay=0.9, eval_every=25, log_every=5)
    data, policy = ArrayData(), TinyPolicy()
    before = _leaves(policy)
    straight = fit(policy, data, None, cfg)
    for a, b in zip(_leaves(policy), before, strict=True):  # fit never mutates the policy
        np.testing.assert_array_equal(a, b)

    features, normalizer = _layout_and_stats()
    first = fit(TinyPolicy(), data, None, cfg, stop_at=35, checkpoint_dir=tmp_path, features=features,
                normalizer=normalizer)
    assert first.state.step == 35 and first.checkpoint.name == "step_00000035"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_00000025", "step_00000035"]
    resumed = fit(TinyPolicy(seed=7), data, None, cfg, resume=tmp_path, features=features,
                  normalizer=normalizer)
    assert resumed.state.step == 60 and resumed.history[0]["step"] == 40
    for name in ("params", "ema"):
        for g, v in getattr(straight.state, name).items():
            np.testing.assert_array_equal(np.asarray(getattr(resumed.state, name)[g]), np.asarray(v))
    for a, b in zip(_leaves(straight.model), _leaves(resumed.model), strict=True):
        np.testing.assert_array_equal(a, b)
    assert [r["loss"] for r in straight.history[7:]] == [r["loss"] for r in resumed.history]

    # EMA: differs from the raw weights and is decay * ema + (1 - decay) * params, one step at a time
    one_more = fit(TinyPolicy(), data, None, cfg, resume=first.state, stop_at=36)
    s0, s1 = first.state, one_more.state
    for g in s0.params:
        assert not np.allclose(s1.ema[g], s1.params[g], atol=1e-4)
        np.testing.assert_allclose(s1.ema[g], 0.9 * np.asarray(s0.ema[g]) + 0.1 * np.asarray(s1.params[g]),
                                   rtol=1e-6, atol=1e-7)
    chex.assert_trees_all_close(ema_update({"a": jnp.ones(2)}, {"a": jnp.zeros(2)}, 0.75),
                                {"a": 0.75 * jnp.ones(2)})
    # the deployed weights are the EMA ones, in the result and in the checkpoint
    flat = FlatParams(_leaves(straight.model))
    for a, b in zip(flat.unravel(straight.state.ema), _leaves(straight.model), strict=True):
        np.testing.assert_array_equal(np.asarray(a), b)
    saved = load_checkpoint(first.checkpoint, builder=lambda *_: TinyPolicy()).policy.model
    for a, b in zip(flat.unravel(first.state.ema), _leaves(saved), strict=True):
        np.testing.assert_array_equal(np.asarray(a), b)


def _layout_and_stats():
    from learn.features import FeatureLayout
    from learn.normalize import Normalizer

    layout = FeatureLayout(("observation.state",), (OBS,), "action", ACT, 10)
    return layout, Normalizer(np.zeros(OBS, np.float32), np.ones(OBS, np.float32), np.zeros(ACT, np.float32),
                              np.ones(ACT, np.float32))


def test_bc_mlp_on_window_dataset():
    """The real BC-MLP, the batch gathered inside the step (the 2-device test compares this path
    with host sampling); the result deploys as a TrainedPolicy."""
    from learn.data import Frames, prepare
    from learn.features import FeatureLayout
    from learn.policies import build_policy

    rng = np.random.default_rng(0)
    w = rng.normal(size=(6, 3))
    obs = [rng.normal(size=(60, 6)).astype(np.float32) for _ in range(6)]
    config = BCConfig(hidden=(32, 32), n_obs_steps=2, chunk_size=3, n_action_steps=2)
    split = prepare(Frames.from_episodes(obs, [o @ w for o in obs]), config, 0.2, 0)
    cfg = _cfg(steps=60, batch_size=16, eval_every=60, log_every=10)
    layout = FeatureLayout(("observation.state",), (6,), "action", 3, 10)
    res = fit(build_policy(config, 6, 3), split.train, split.val, cfg, features=layout)
    # the chunk's later actions follow unseen (random) observations: only the first is learnable
    assert res.history[-1]["loss"] < 0.8 * res.history[0]["loss"] and "val_loss" in res.history[-1]
    policy = res.trained_policy()
    assert policy.normalizer is split.normalizer
    chex.assert_shape(policy.predict_chunk(np.zeros((2, 2, 6), np.float32)), (2, 3, 3))


_TWO_DEVICES = textwrap.dedent("""
    import json, os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    os.environ["JAX_PLATFORMS"] = "cpu"
    sys.path.insert(0, sys.argv[1])
    import jax
    import numpy as np
    from learn.config import BCConfig, TrainConfig
    from learn.data import Frames, prepare
    from learn.policies import build_policy
    from learn.train import fit

    assert len(jax.devices()) == 2, jax.devices()
    rng = np.random.default_rng(0)
    w = rng.normal(size=(5, 2))
    obs = [rng.normal(size=(50, 5)).astype(np.float32) for _ in range(8)]
    config = BCConfig(hidden=(32,), dropout=0.1)
    split = prepare(Frames.from_episodes(obs, [o @ w for o in obs]), config, 0.25, 0)
    cfg = TrainConfig(steps=30, batch_size=16, lr=3e-3, warmup=5, eval_every=15, log_every=1, seed=1)

    class HostOnly:  # sampled on the host, the batch sharded by device_put
        sample_batch = staticmethod(split.train.sample_batch)

    out = {}
    for name, data, n in (("one", split.train, 1), ("two", split.train, 2), ("host_two", HostOnly(), 2)):
        val = split.val if name != "host_two" else None
        res = fit(build_policy(config, 5, 2), data, val, cfg, devices=jax.devices()[:n])
        out[name] = {"loss": [r["loss"] for r in res.history], "val": res.val_losses[:, 1].tolist(),
                     "devices": res.devices}
    print(json.dumps(out))
""")


@pytest.fixture(scope="module", autouse=True)
def two_device_run(request):
    """Starts the 2-device subprocess when the module starts (it then runs beside the other tests)
    if the 2-device test is selected; yields the Popen (or None)."""
    name = "test_two_device_data_parallel_matches_one_device"
    wanted = any(item.name == name for item in request.session.items)
    if not wanted:
        yield None
        return
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
    proc = subprocess.Popen([sys.executable, "-c", _TWO_DEVICES, str(ROOT)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


def test_two_device_data_parallel_matches_one_device(two_device_run):
    try:
        stdout, stderr = two_device_run.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        two_device_run.kill()
        raise
    assert two_device_run.returncode == 0, stderr[-3000:]
    out = json.loads(stdout.strip().splitlines()[-1])
    one = out["one"]
    assert len(one["loss"]) == 30 and len(one["val"]) == 2
    for two in (out["two"], out["host_two"]):  # in-step gather, and host batches sharded by device_put
        assert (one["devices"], two["devices"]) == (1, 2)
        np.testing.assert_allclose(two["loss"], one["loss"], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(out["two"]["val"], one["val"], rtol=1e-4, atol=1e-6)


# -- validation ----------------------------------------------------------------------------------------------
def test_bad_inputs_are_clear_errors(tmp_path):
    cpu = jax.devices()[0]
    with pytest.raises(CaliperError, match="batch_size 33 does not divide by the 2 devices"):
        fit(TinyPolicy(), ArrayData(), None, _cfg(batch_size=33), devices=[cpu, cpu])
    with pytest.raises(CaliperError, match=r"obs_dim 4 vs 3"):
        fit(TinyPolicy(), ArrayData(obs_dim=3), None, _cfg())
    empty = ArrayData()
    empty.obs = empty.obs[:0]
    with pytest.raises(CaliperError, match="training data is empty"):
        fit(TinyPolicy(), empty, None, _cfg())
    with pytest.raises(CaliperError, match="validation data is empty"):
        fit(TinyPolicy(), ArrayData(), empty, _cfg())
    with pytest.raises(CaliperError, match="no sample_batch"):
        fit(TinyPolicy(), object(), None, _cfg())
    with pytest.raises(CaliperError, match="needs a learn.config.TrainConfig"):
        fit(TinyPolicy(), ArrayData(), None, {"steps": 3})
    with pytest.raises(CaliperError, match="feature layout and normaliser"):
        fit(TinyPolicy(), ArrayData(), None, _cfg(), checkpoint_dir=tmp_path)
    with pytest.raises(CaliperError, match="no checkpoint there"):
        fit(TinyPolicy(), ArrayData(), None, _cfg(), resume=tmp_path)

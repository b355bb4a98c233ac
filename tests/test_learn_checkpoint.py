"""learn.checkpoint: exact round trips, refusals (dataset, layout, pickles, corruption), atomic
overwrite, safetensors export/import and the dataset fingerprint."""
import json
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from flax import nnx

from caliper_jax.dataset.synthetic import write_synthetic
from caliper_jax.errors import CaliperError
from learn.bundle import TrainedPolicy
from learn.checkpoint import (
    META_NAME,
    dataset_fingerprint,
    export_safetensors,
    flatten_tree,
    import_safetensors,
    load_checkpoint,
    load_safetensors_policy,
    model_params,
    read_checkpoint_meta,
    resolve_checkpoint,
    safetensors_metadata,
    save_checkpoint,
    save_run_checkpoint,
)
from learn.config import BCConfig, TrainConfig
from learn.features import FeatureLayout
from learn.normalize import Normalizer

LAYOUT = FeatureLayout(("observation.state", "observation.environment_state"), (3, 2), "action", 2, 20)
CONFIG = BCConfig(hidden=(16,), n_obs_steps=2, chunk_size=3)


class Tiny(nnx.Module):
    """A minimal policy meeting learn.policies.base.Policy (a list of layers: integer keys)."""

    def __init__(self, config, obs_dim, action_dim, *, rngs):
        self.config, self.obs_dim, self.action_dim = config, obs_dim, action_dim
        width = config.n_obs_steps * obs_dim
        self.layers = nnx.List([nnx.Linear(width, 8, rngs=rngs), nnx.Linear(8, config.chunk_size * action_dim,
                                                                            rngs=rngs)])
        self.scale = nnx.Param(jnp.ones(action_dim))

    def sample(self, obs, obs_mask, key):
        h = jnp.tanh(self.layers[0](obs.reshape(obs.shape[0], -1)))
        return self.layers[1](h).reshape(obs.shape[0], self.config.chunk_size, self.action_dim) * self.scale

    def loss(self, batch, key):
        err = jnp.mean(jnp.square(self.sample(batch.obs, batch.obs_mask, key) - batch.action))
        return err, {"l2": err}


def tiny(config, obs_dim, action_dim, seed=0):
    return Tiny(config, obs_dim, action_dim, rngs=nnx.Rngs(seed))


NORM = Normalizer(np.arange(5, dtype=np.float32) * 0.5, np.linspace(0.5, 2, 5).astype(np.float32),
                  np.array([-1.25, 3.0], np.float32), np.array([0.1, 7.5], np.float32))
FP = "ab" * 32


def _trained():
    """A model moved off its seed-0 init by one AdamW step, and that optimizer state."""
    model = tiny(CONFIG, LAYOUT.obs_dim, LAYOUT.action_dim, seed=1)
    params = model_params(model)
    opt = optax.adamw(1e-2)

    @jax.jit
    def step(params):
        state = opt.init(params)
        grads = jax.tree_util.tree_map(lambda p: jnp.sin(p) + 0.3, params)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    params, state = step(params)
    from learn.checkpoint import set_model_params

    return set_model_params(model, params), opt, state


def _save(path, model, state, **kw):
    args = dict(model=model, config=CONFIG, train_config=TrainConfig(steps=7, seed=3), features=LAYOUT,
                normalizer=NORM, fingerprint=FP, step=123, opt_state=state)
    return save_checkpoint(path, **{**args, **kw})


def _equal_trees(a, b):
    fa, fb = flatten_tree(a), flatten_tree(b)
    assert list(fa) == list(fb)
    for k in fa:
        x, y = np.asarray(fa[k]), np.asarray(fb[k])
        assert x.dtype == y.dtype and np.array_equal(x, y), k


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    model, opt, state = _trained()
    path = tmp_path_factory.mktemp("ck") / "run"
    ema = jax.tree_util.tree_map(lambda p: p * 0.5, model_params(model))
    _save(path, model, state, ema_state=ema, rng=jax.random.key(42), extra={"note": "hello", "loss": [1.5]})
    return path, model, opt, state, ema


def test_round_trip_is_exact(saved):
    path, model, opt, state, ema = saved
    fresh = model_params(tiny(CONFIG, LAYOUT.obs_dim, LAYOUT.action_dim))
    assert not np.array_equal(fresh["layers"][0]["kernel"], model_params(model)["layers"][0]["kernel"])
    ck = load_checkpoint(path, expect_fingerprint=FP, expect_features=LAYOUT, opt_template=opt.init(fresh),
                         ema_template=fresh, builder=tiny)
    _equal_trees(model_params(ck.policy.model), model_params(model))
    _equal_trees(ck.opt_state, state)
    assert jax.tree_util.tree_structure(ck.opt_state) == jax.tree_util.tree_structure(state)
    assert int(ck.opt_state[0].count) == 1
    _equal_trees(ck.ema_state, ema)
    assert ck.step == 123 and ck.fingerprint == FP and ck.extra == {"note": "hello", "loss": [1.5]}
    assert ck.train_config == TrainConfig(steps=7, seed=3)
    assert ck.policy.config == CONFIG and ck.policy.features == LAYOUT and ck.policy.fingerprint == FP
    for a, b in zip(ck.policy.normalizer[:4], NORM[:4], strict=True):
        assert a.dtype == np.float32 and np.array_equal(a, b)
    assert ck.policy.normalizer.img_mean is None      # no cameras: no image statistics
    assert jnp.issubdtype(ck.rng.dtype, jax.dtypes.prng_key)
    assert np.array_equal(jax.random.key_data(ck.rng), jax.random.key_data(jax.random.key(42)))
    obs = np.random.default_rng(0).normal(size=(4, 2, 5)).astype(np.float32)
    np.testing.assert_array_equal(ck.policy.predict_chunk(obs),
                                  TrainedPolicy(model, CONFIG, LAYOUT, NORM).predict_chunk(obs))
    raw = load_checkpoint(path, builder=tiny)   # no templates: plain nested containers, same arrays
    assert [np.asarray(x).tolist() for x in jax.tree_util.tree_leaves(raw.opt_state)] == \
        [np.asarray(x).tolist() for x in jax.tree_util.tree_leaves(state)]


def test_raw_rng_and_defaults(tmp_path):
    model, _, _ = _trained()
    _save(tmp_path / "c", model, None, rng=jax.random.PRNGKey(5), train_config=None, fingerprint=None)
    ck = load_checkpoint(tmp_path / "c", builder=tiny)
    assert ck.rng.dtype == jnp.uint32 and np.array_equal(ck.rng, jax.random.PRNGKey(5))
    assert ck.opt_state is None and ck.ema_state is None
    assert ck.train_config is None and ck.fingerprint is None
    with pytest.raises(CaliperError, match="trained on dataset unknown but this is abababab"):
        load_checkpoint(tmp_path / "c", expect_fingerprint=FP, builder=tiny)


def test_refuses_other_dataset_layout_and_templates(saved):
    path, model, opt, state, _ = saved
    with pytest.raises(CaliperError, match="trained on dataset abababab but this is 01234567"):
        load_checkpoint(path, expect_fingerprint="0123456789" * 6, builder=tiny)
    other = FeatureLayout(LAYOUT.state_keys, LAYOUT.state_dims, "action", 2, 50)
    with pytest.raises(CaliperError, match="fps 20 vs 50"):
        load_checkpoint(path, expect_features=other, builder=tiny)
    with pytest.raises(CaliperError, match="layers.0.kernel"):   # a model of another obs width
        load_checkpoint(path, builder=lambda c, o, a: tiny(c, o + 1, a))
    with pytest.raises(CaliperError, match="opt_state"):
        sgd = optax.sgd(0.1, momentum=0.9).init(model_params(model))
        load_checkpoint(path, opt_template=sgd, builder=tiny)


def _copy(saved, tmp_path):
    dst = tmp_path / "copy"
    shutil.copytree(saved[0], dst)
    return dst


def test_refuses_pickles_and_corrupt_files(saved, tmp_path):
    path = _copy(saved, tmp_path)
    (path / "params" / "weights.pkl").write_bytes(b"\x80\x04K\x01.")
    with pytest.raises(CaliperError, match=r"weights.pkl, a pickle-format file.*execute code"):
        load_checkpoint(path, builder=tiny)
    (path / "params" / "weights.pkl").unlink()
    (path / "model.PT").write_bytes(b"x")
    with pytest.raises(CaliperError, match="pickle"):
        load_checkpoint(path, builder=tiny)
    (path / "model.PT").unlink()

    meta = json.loads((path / META_NAME).read_text())
    (path / META_NAME).write_text(json.dumps({**meta, "format_version": 99}))
    with pytest.raises(CaliperError, match="unknown checkpoint format version 99"):
        load_checkpoint(path, builder=tiny)
    (path / META_NAME).write_text("{not json")
    with pytest.raises(CaliperError, match="corrupt checkpoint metadata"):
        load_checkpoint(path, builder=tiny)
    (path / META_NAME).unlink()
    with pytest.raises(CaliperError, match="not a caliper checkpoint"):
        load_checkpoint(path, builder=tiny)
    (path / META_NAME).write_text(json.dumps(meta))
    shutil.rmtree(path / "opt_state")
    with pytest.raises(CaliperError, match=r"opt_state/.* is missing \(corrupt checkpoint\)"):
        load_checkpoint(path, builder=tiny)
    shutil.rmtree(path)
    path = _copy(saved, tmp_path)
    for f in (path / "params").rglob("*"):
        if f.is_file() and f.parent.name == "d":
            f.write_bytes(b"garbage")
    with pytest.raises(CaliperError, match="checksum mismatch; corrupt checkpoint"):
        load_checkpoint(path, builder=tiny)
    with pytest.raises(CaliperError, match="no checkpoint folder"):
        load_checkpoint(tmp_path / "nowhere", builder=tiny)


def test_overwrite_is_explicit_and_atomic(tmp_path, monkeypatch):
    model, _, state = _trained()
    path = _save(tmp_path / "c", model, state, step=1)
    with pytest.raises(CaliperError, match="already exists"):
        _save(path, model, state, step=2)
    _save(path, model, state, step=2, overwrite=True)
    assert load_checkpoint(path, builder=tiny).step == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]      # no temporary or old siblings left

    import orbax.checkpoint as ocp

    def crash(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(ocp.StandardCheckpointer, "save", crash)
    with pytest.raises(OSError, match="disk full"):
        _save(path, model, state, step=3, overwrite=True)
    monkeypatch.undo()
    assert load_checkpoint(path, builder=tiny).step == 2              # the old checkpoint is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("mine")
    with pytest.raises(CaliperError, match="not a caliper checkpoint"):
        _save(tmp_path / "notes", model, state, overwrite=True)
    with pytest.raises(CaliperError, match="JSON"):
        _save(tmp_path / "x", model, state, extra={"bad": object()})
    assert not (tmp_path / "x").exists()


def test_run_checkpoints_rotate_through_orbax_and_skip_an_interrupted_save(tmp_path, monkeypatch):
    """A training run's step folders: orbax's CheckpointManager keeps the newest ``keep``; a step
    saved again replaces the old one; a folder orbax committed but whose caliper metadata (written
    last, with the checksums) is missing is passed over by resolve_checkpoint."""
    model, _, state = _trained()
    args = dict(model=model, config=CONFIG, train_config=None, features=LAYOUT, normalizer=NORM,
                fingerprint=FP, opt_state=state)
    for step in (5, 10, 15):
        save_run_checkpoint(tmp_path, step, keep=2, **args)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_00000010", "step_00000015"]
    assert resolve_checkpoint(tmp_path).name == "step_00000015"
    back = load_checkpoint(tmp_path / "step_00000015", builder=tiny, opt_template=state)
    assert back.step == 15
    _equal_trees(back.opt_state, state)
    _equal_trees(model_params(back.policy.model), model_params(model))
    save_run_checkpoint(tmp_path, 15, keep=2, extra={"again": True}, **args)     # a resumed run's re-save
    assert read_checkpoint_meta(tmp_path / "step_00000015")["extra"] == {"again": True}

    import learn.checkpoint as ck

    def crash(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(ck, "_seal", crash)
    with pytest.raises(OSError, match="disk full"):
        save_run_checkpoint(tmp_path, 20, keep=0, **args)
    monkeypatch.undo()
    assert (tmp_path / "step_00000020").is_dir() and not (tmp_path / "step_00000020" / META_NAME).exists()
    assert resolve_checkpoint(tmp_path).name == "step_00000015"
    with pytest.raises(CaliperError, match="interrupted save"):
        load_checkpoint(tmp_path / "step_00000020", builder=tiny)
    save_run_checkpoint(tmp_path, 25, keep=0, **args)                            # keep 0: all stay
    assert len(list(tmp_path.glob("step_*"))) == 4


def test_safetensors_round_trip_and_shape_error(tmp_path):
    model, _, _ = _trained()
    policy = TrainedPolicy(model, CONFIG, LAYOUT, NORM, FP)
    f = export_safetensors(policy, tmp_path / "w.safetensors", {"step": 9})
    head = f.read_bytes()
    assert head[8:9] == b"{"                                      # a JSON header, then raw tensors
    meta = safetensors_metadata(f)
    assert json.loads(meta["config"])["kind"] == "bc_mlp" and json.loads(meta["step"]) == 9
    assert json.loads(meta["features"]) == LAYOUT.to_dict()
    assert "layers.0.kernel" in pytest.importorskip("safetensors.numpy").load(head)
    fresh = import_safetensors(f, tiny(CONFIG, LAYOUT.obs_dim, LAYOUT.action_dim))
    _equal_trees(model_params(fresh), model_params(model))
    back = load_safetensors_policy(f, builder=tiny)
    _equal_trees(model_params(back.model), model_params(model))
    assert back.config == CONFIG and back.features == LAYOUT and back.fingerprint == FP
    assert all(np.array_equal(a, b) for a, b in zip(back.normalizer, NORM, strict=True))
    with pytest.raises(CaliperError, match=r"tensor 'layers.1.bias' is \(6,\) float32 but the model's"):
        import_safetensors(f, tiny(BCConfig(hidden=(16,), n_obs_steps=2, chunk_size=4), 5, 2))
    bare = export_safetensors(model, tmp_path / "bare.safetensors")
    _equal_trees(model_params(import_safetensors(bare, tiny(CONFIG, 5, 2))), model_params(model))
    with pytest.raises(CaliperError, match="not a caliper policy weights file"):
        load_safetensors_policy(bare, builder=tiny)


def test_build_policy_round_trip(tmp_path):
    from learn.policies import build_policy

    model = build_policy(CONFIG, LAYOUT.obs_dim, LAYOUT.action_dim, seed=4)
    save_checkpoint(tmp_path / "bc", model=model, config=CONFIG, train_config=None, features=LAYOUT,
                    normalizer=NORM, fingerprint=FP)
    ck = load_checkpoint(tmp_path / "bc", expect_fingerprint=FP)
    _equal_trees(model_params(ck.policy.model), model_params(model))


def test_fingerprint_stable_under_copy_and_changed_by_edits(tmp_path):
    root = tmp_path / "ds"
    write_synthetic(root, episodes=2, length=20, dim=2)
    fp = dataset_fingerprint(root)
    assert len(fp) == 64 and fp == dataset_fingerprint(root)
    shutil.copytree(root, tmp_path / "copy")
    assert dataset_fingerprint(tmp_path / "copy") == fp
    [data] = sorted((tmp_path / "copy" / "data").rglob("*.parquet"))
    table = pq.read_table(data)
    action = table.column("action").to_pylist()
    action[3][1] += 0.25
    i = table.schema.get_field_index("action")
    field = table.schema.field(i)
    pq.write_table(table.set_column(i, field, pa.array(action, field.type)), data)
    assert dataset_fingerprint(tmp_path / "copy") != fp
    info_path = root / "meta" / "info.json"
    info = json.loads(info_path.read_text())
    info_path.write_text(json.dumps({**info, "fps": info["fps"] + 1}))
    assert dataset_fingerprint(root) != fp


def test_load_checkpoint_takes_a_run_folder(tmp_path):
    """A training run's folder loads its newest step_* checkpoint, as every CLI verb takes it."""
    from learn.policies import build_policy

    run = tmp_path / "run"
    for step, seed in ((1, 1), (2, 2)):
        model = build_policy(CONFIG, LAYOUT.obs_dim, LAYOUT.action_dim, seed=seed)
        save_checkpoint(run / f"step_{step:08d}", model=model, config=CONFIG, train_config=None,
                        features=LAYOUT, normalizer=NORM, fingerprint=FP, step=step)
    ck = load_checkpoint(run)
    assert ck.step == 2
    _equal_trees(model_params(ck.policy.model), model_params(model))

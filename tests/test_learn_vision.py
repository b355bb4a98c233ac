"""Policies that see: observation sets, camera checks, augmentation, encoders, a train+eval round trip."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from caliper_jax.errors import CaliperError
from learn.config import ACTConfig, BCConfig, DiffusionConfig
from learn.features import CameraSpec, FeatureLayout, layout_from_info

CAMS = (CameraSpec("front", 32, 32, (38.627417, 38.627417, 16.0, 16.0)),
        CameraSpec("wrist", 32, 32, (38.627417, 38.627417, 16.0, 16.0)))
STATE = ("observation.state", "observation.environment_state")


def _info(cameras=("front", "wrist"), size=32):
    feats = {"observation.state": {"dtype": "float32", "shape": [3]},
             "observation.environment_state": {"dtype": "float32", "shape": [7]},
             "action": {"dtype": "float32", "shape": [3]}}
    for c in cameras:
        feats[f"observation.images.{c}"] = {"dtype": "video", "shape": [size, size, 3],
                                            "names": ["height", "width", "channels"]}
    return {"fps": 50, "features": feats}


# -- observation sets ---------------------------------------------------------------------------------
def test_proprio_images_layout_refuses_prop_poses_and_never_reads_them():
    """Planted bug caught: dropping the proprio+images key check (or defaulting its state keys to
    DEFAULT_STATE_KEYS) lets prop poses into a vision policy."""
    with pytest.raises(CaliperError, match="environment_state.*privileged") as err:
        FeatureLayout(STATE, (3, 7), "action", 3, 50, "proprio+images", CAMS)
    assert "\n" not in str(err.value)
    lay = layout_from_info(_info(), obs_set="proprio+images")
    assert lay.state_keys == ("observation.state",) and lay.obs_dim == 3
    assert [c.name for c in lay.cameras] == ["front", "wrist"] and lay.image_shape == (2, 32, 32)
    with pytest.raises(CaliperError, match="privileged"):
        layout_from_info(_info(), STATE, obs_set="proprio+images")
    priv = layout_from_info(_info(), obs_set="privileged")
    assert priv.state_keys == STATE and priv.image_shape == (2, 32, 32)
    assert layout_from_info(_info()).cameras == ()          # "state": today's layout, no cameras
    with pytest.raises(CaliperError, match="at least one camera"):
        layout_from_info(_info(cameras=()), obs_set="proprio+images")
    with pytest.raises(CaliperError, match="--obs"):
        layout_from_info(_info(), obs_set="pixels")
    # the set and cameras round-trip through the checkpoint dict, and a different set is a mismatch
    assert FeatureLayout.from_dict(json.loads(json.dumps(lay.to_dict()))) == lay
    assert "obs_set" in priv.mismatch(FeatureLayout(STATE, (3, 7), "action", 3, 50))


def test_changed_camera_configuration_is_refused_in_one_line():
    """Planted bug caught: comparing camera names only (not resolution / intrinsics)."""
    from caliper_jax.rays import PinholeCamera
    from learn.deploy import check_cameras

    class P:
        features = FeatureLayout(("observation.state",), (3,), "action", 3, 50, "proprio+images", CAMS)

    same = [PinholeCamera(width=32, height=32, fx=38.627417, fy=38.627417, cx=16.0, cy=16.0, name=n)
            for n in ("front", "wrist")]
    check_cameras(P, same)
    cases = {"64x64": [PinholeCamera(width=64, height=64, name="front"), same[1]],
             "intrinsics": [PinholeCamera(width=32, height=32, fovy=60.0, name="front"), same[1]],
             "cameras": [same[1], same[0]]}
    for what, cams in cases.items():
        with pytest.raises(CaliperError, match="camera configuration differs") as err:
            check_cameras(P, cams)
        assert what in str(err.value) and "\n" not in str(err.value)


# -- augmentation and encoders -----------------------------------------------------------------------
def test_random_shift_is_keyed_deterministic_and_a_shift():
    """Planted bug caught: drawing the offsets from a fixed key or wall clock; cropping the wrong
    window (the result must be an edge-padded translate of the input)."""
    from learn.policies.vision import random_shift

    x = jax.random.uniform(jax.random.PRNGKey(1), (3, 2, 16, 16, 3))
    a = np.asarray(random_shift(x, jax.random.PRNGKey(7), 4))
    b = np.asarray(random_shift(x, jax.random.PRNGKey(7), 4))
    c = np.asarray(random_shift(x, jax.random.PRNGKey(8), 4))
    assert a.tobytes() == b.tobytes() and a.shape == x.shape and not np.array_equal(a, c)
    assert np.array_equal(np.asarray(random_shift(x, jax.random.PRNGKey(7), 0)), np.asarray(x))
    pad = np.pad(np.asarray(x).reshape(6, 16, 16, 3), ((0, 0), (4, 4), (4, 4), (0, 0)), mode="edge")
    for img, p in zip(a.reshape(6, 16, 16, 3), pad, strict=True):   # each is one of the 81 crops
        assert any(np.array_equal(img, p[i:i + 16, j:j + 16]) for i in range(9) for j in range(9))


def test_encoder_output_shapes():
    """Planted bug caught: wrong strides / feature-map sizes, or image tokens not counted."""
    from learn.policies import build_policy
    from learn.policies.base import Batch
    from learn.policies.vision import ImageEncoder, sincos_2d

    conv = ImageEncoder(BCConfig(vision_width=8, image_feature_dim=16), (2, 32, 32), rngs=nnx.Rngs(0))
    assert conv.map_size == (4, 4) and conv.channels == 16
    assert nnx.eval_shape(lambda: conv.vectors(jnp.zeros((5, 1, 2, 32, 32, 3)))).shape == (5, 1, 32)
    res = ImageEncoder(ACTConfig(vision_backbone="resnet18", vision_width=8), (1, 96, 96), rngs=nnx.Rngs(0),
                       vectors=False)
    assert res.map_size == (3, 3)
    assert nnx.eval_shape(lambda: res.feature_map(jnp.zeros((2, 96, 96, 3)))).shape == (2, 3, 3, 64)
    pos = sincos_2d(4, 5, 16)
    assert pos.shape == (4, 5, 16) and len({p.tobytes() for p in pos.reshape(20, 16)}) == 20
    cfg = ACTConfig(dim_model=16, n_heads=2, dim_feedforward=32, chunk_size=4, vision_width=4)
    act = build_policy(cfg, 3, 3, image_shape=(2, 32, 32))
    tokens, tpos = nnx.eval_shape(lambda: act._image_tokens(jnp.zeros((5, 1, 2, 32, 32, 3)), None))
    assert tokens.shape == (5, 2 * 4 * 4, 16) and tpos.shape == (1, 32, 16)
    for c in (cfg, BCConfig(hidden=(16,), vision_width=4), DiffusionConfig(hidden=(16,), vision_width=4,
                                                                           inference_steps=2)):
        pol = build_policy(c, 3, 3, image_shape=(2, 32, 32))
        n = c.n_obs_steps
        batch = Batch(jnp.zeros((2, n, 3)), jnp.ones((2, n), bool), jnp.zeros((2, c.chunk_size, 3)),
                      jnp.ones((2, c.chunk_size), bool), jnp.zeros((2, n, 2, 32, 32, 3)))
        loss, _ = nnx.jit(lambda m, b: m.loss(b, jax.random.PRNGKey(0)))(pol, batch)
        assert np.isfinite(float(loss))
        pol.eval()
        out = nnx.jit(lambda m, b: m.sample(b.obs, b.obs_mask, jax.random.PRNGKey(0), b.images))(pol, batch)
        assert out.shape == (2, c.chunk_size, 3)
        with pytest.raises(CaliperError, match="no images"):
            jax.eval_shape(lambda b, p=pol: p.sample(b.obs, b.obs_mask, jax.random.PRNGKey(0)), batch)


# -- round trip ----------------------------------------------------------------------------------------
def _dataset(root):
    """2 episodes of 12 frames of gripper_arm's shapes with 32x32 front + wrist video features."""
    from caliper_jax.dataset.writer import LeRobotWriter

    info = _info()
    rng = np.random.default_rng(0)
    with LeRobotWriter(root, 50, info["features"]) as w:
        for _ in range(2):
            cols = {"observation.state": rng.normal(size=(12, 3)).astype(np.float32),
                    "observation.environment_state": rng.normal(size=(12, 7)).astype(np.float32),
                    "action": rng.normal(size=(12, 3)).astype(np.float32)}
            for c in ("front", "wrist"):
                cols[f"observation.images.{c}"] = rng.integers(0, 256, (12, 32, 32, 3), dtype=np.uint8)
            w.add_frames(cols)
            w.save_episode(task="t")
    return root


def test_train_eval_round_trip_with_images_on_the_cpu_engine(tmp_path):
    """Planted bugs caught: frames not decoded into the batches (images None), the checkpoint not
    recording the obs set / cameras, deploy not feeding rendered frames (eval raises), a camera
    override not refused."""
    pytest.importorskip("av")
    from learn.checkpoint import load_checkpoint, resolve_checkpoint
    from learn.data import load_frames, prepare
    from learn.evaluate import evaluate
    from learn.policies import build_policy
    from learn.train import fit

    root = _dataset(tmp_path / "ds")
    with pytest.raises(CaliperError, match="image budget"):
        load_frames(root, obs_set="proprio+images", image_budget_mb=0.01)
    frames = load_frames(root, obs_set="proprio+images")
    assert frames.images.shape == (24, 2, 32, 32, 3) and frames.obs.shape == (24, 3)
    from caliper_jax.dataset.reader import LeRobotReader

    decoded = LeRobotReader(root).video_frames(1, "observation.images.wrist")
    assert np.array_equal(frames.images[12:, 1], decoded)
    cfg = ACTConfig(dim_model=16, n_heads=2, dim_feedforward=32, chunk_size=4, vision_width=4,
                    n_encoder_layers=1)
    from learn.config import TrainConfig

    tcfg = TrainConfig(steps=4, batch_size=4, eval_every=4, log_every=2, warmup=1, val_fraction=0.5)
    split = prepare(frames, cfg, tcfg.val_fraction, 0)
    batch = split.train.sample_batch(jax.random.PRNGKey(0), 4)
    assert batch.images.shape == (4, 1, 2, 32, 32, 3) and abs(float(batch.images.mean())) < 0.5
    policy = build_policy(cfg, 3, 3, image_shape=frames.layout.image_shape)
    res = fit(policy, split.train, split.val, tcfg, checkpoint_dir=tmp_path / "run")
    ckpt = load_checkpoint(resolve_checkpoint(tmp_path / "run"))
    feats = ckpt.policy.features
    assert feats.obs_set == "proprio+images" and feats.cameras == frames.layout.cameras
    obs, images = frames.obs[None, :1], frames.images[None, :1]
    np.testing.assert_allclose(ckpt.policy.predict_chunk(obs, images=images),
                               res.trained_policy().predict_chunk(obs, images=images), atol=1e-5)
    out = evaluate(ckpt.policy, "lift-cube", episodes=1, seed=3)
    assert out.n == 1 and 0 < out.episodes[0].steps <= out.horizon
    with pytest.raises(CaliperError, match="camera configuration differs.*front is 32x32 vs 48x48"):
        evaluate(ckpt.policy, "lift-cube", episodes=1, cameras=["front:48x48", "wrist:32x32"])


@pytest.mark.slow
def test_mjx_eval_renders_cameras_inside_the_scan():
    """Planted bugs caught: the MJX scan not rendering the policy's cameras (stack_images raises),
    a camera override not refused on MJX. An untrained policy: only the wiring is under test."""
    from learn.bundle import TrainedPolicy
    from learn.evaluate import evaluate
    from learn.normalize import Normalizer
    from learn.policies import build_policy

    cams = tuple(CameraSpec(c.name, 32, 32) for c in CAMS)
    features = FeatureLayout(("observation.state",), (3,), "action", 3, 50, "proprio+images", cams)
    cfg = BCConfig(hidden=(16,), vision_width=4)
    norm = Normalizer(*(np.zeros(3, np.float32), np.ones(3, np.float32)) * 2, np.full(3, 0.5, np.float32),
                      np.full(3, 0.25, np.float32))
    policy = TrainedPolicy(build_policy(cfg, 3, 3, image_shape=features.image_shape), cfg, features, norm)
    res = evaluate(policy, "lift-cube", episodes=2, engine="mjx", seed=1)
    cpu = evaluate(policy, "lift-cube", episodes=2, engine="mujoco", seed=1)
    assert res.n == 2 and res.engine == "mjx" and cpu.n == 2
    with pytest.raises(CaliperError, match="camera configuration differs"):
        evaluate(policy, "lift-cube", episodes=2, engine="mjx", cameras=["front:32x32"])


# -- every verb gets camera frames (debug, profile, autopsy; Ray in tests/test_cluster_ray.py) -----------
class TinySeeing(nnx.Module):
    """Linear map of the last frame's state and a 4x4 pixel patch of each camera (normalised): every
    input visibly live, so a dead input is a planted one."""

    def __init__(self, obs_dim, action_dim, cameras, seed=0):
        self.action_dim = action_dim
        self.lin = nnx.Linear(obs_dim + cameras * 48, action_dim, rngs=nnx.Rngs(seed))

    def sample(self, obs, obs_mask, key, images=None):
        if images is None:
            raise CaliperError("this policy sees cameras but was given no images")
        patch = images[:, -1, :, :4, :4, :].reshape(obs.shape[0], -1)
        return self.lin(jnp.concatenate([obs[:, -1], patch], axis=-1))[:, None]


@pytest.fixture(scope="module")
def seeing_data(tmp_path_factory):
    """(dataset root, its proprio+images layout, the normaliser fitted on it)."""
    pytest.importorskip("av")
    from learn.data import fit_normalizer, load_frames

    root = _dataset(tmp_path_factory.mktemp("seeing") / "ds")
    frames = load_frames(root, obs_set="proprio+images")
    return root, frames.layout, fit_normalizer(frames)


def _seeing(data, dead_camera=None, layout=None):
    from learn.bundle import TrainedPolicy

    _, lay, norm = data
    lay = layout or lay
    model = TinySeeing(lay.obs_dim, lay.action_dim, len(lay.cameras))
    if dead_camera is not None:                         # zero the kernel rows of that camera's patch
        k = model.lin.kernel[...]
        start = lay.obs_dim + 48 * dead_camera
        model.lin.kernel[...] = k.at[start:start + 48].set(0.0)
    return TrainedPolicy(model, BCConfig(hidden=(8,)), lay, norm)


def test_debug_probes_a_seeing_policy_with_the_dataset_frames(seeing_data):
    """Planted bugs caught: probes without the dataset's frames (the policy raises), the camera
    half of P006 not swapping a camera's frames (the dead wrist goes unreported), a dataset whose
    cameras differ from the trained ones probed anyway."""
    from learn.debug import analyze_policy

    root = seeing_data[0]
    live = analyze_policy(_seeing(seeing_data), root, probes=8)
    assert "P006" not in [f.code for f in live] and "P007" not in [f.code for f in live]
    blind = analyze_policy(_seeing(seeing_data, dead_camera=1), root, probes=8)
    dead = [f for f in blind if f.code == "P006"]
    assert len(dead) == 1 and "camera observation.images.wrist is a dead input" in dead[0].message
    other = FeatureLayout(("observation.state",), (3,), "action", 3, 50, "proprio+images",
                          tuple(CameraSpec(c, 48, 48) for c in ("front", "wrist")))
    with pytest.raises(CaliperError, match="camera configuration differs.*front is 48x48 vs 32x32") as err:
        analyze_policy(_seeing(seeing_data, layout=other), root, probes=8)
    assert "\n" not in str(err.value)
    with pytest.raises(CaliperError, match="--dataset.*--task"):
        analyze_policy(_seeing(seeing_data), None, probes=8)


def test_debug_renders_the_probe_frames_of_a_task_as_eval_does(seeing_data):
    """Planted bug caught: the no-dataset probes rendering other cameras than the policy's (or none)."""
    from learn.debug import analyze_policy, rendered_windows
    from tasks.env import VecEnv

    policy = _seeing(seeing_data)
    win, mask, frames = rendered_windows(policy, "lift-cube", 1, 3, seed=4)
    assert win.shape == (3, 1, 3) and mask.all() and frames.shape == (3, 1, 2, 32, 32, 3)
    with VecEnv("lift-cube", 3, seed=4, cameras=["front:32x32", "wrist:32x32"]) as env:
        _, info = env.reset(seed=4)
    assert np.array_equal(frames[:, 0, 1], info["images"]["wrist"]) and frames[:, 0, 0].std() > 0
    out = analyze_policy(policy, None, probes=3, task="lift-cube")
    assert "P007" not in [f.code for f in out]


def test_profile_and_autopsy_render_the_policy_cameras(seeing_data):
    """Planted bugs caught: the profiler's environment not rendering the policy's cameras, or its
    deployer not fed the frames (Deployer.act raises); an environment with other cameras accepted."""
    import dataclasses

    from learn.autopsy import autopsy
    from learn.profile import profile_rollout
    from tasks.env import VecEnv
    from tasks.schema import find_task, load_task

    policy = _seeing(seeing_data)
    rep = profile_rollout(policy, "lift-cube", ticks=4, warmup=1)
    assert rep.ticks == 4 and np.isfinite(rep.inference_ns).all()
    with VecEnv("lift-cube", 1, cameras=["front:48x48", "wrist:48x48"]) as env:
        with pytest.raises(CaliperError, match="camera configuration differs") as err:
            profile_rollout(policy, env, ticks=4)
    assert "\n" not in str(err.value)
    task = dataclasses.replace(load_task(find_task("lift-cube")), horizon_s=0.2)
    r = autopsy(policy, seeing_data[0], task=task, episodes=1, profile_ticks=4, probes=8)
    assert set(r.findings) == {"D", "P", "E", "L"} and r.skipped == {}
    assert r.summaries["E"]["episodes"] == 1 and r.latency.ticks == 4


def test_resnet_trunk_norms():
    """Planted bugs caught: the frozen norm's scale/bias trained (they would be nnx.Params), the
    affine norm computing statistics (it would differ from the identity at init), vision_norm not
    reaching the trunk (every choice would be GroupNorm)."""
    from learn.policies.vision import BasicBlock, ChannelAffine, ImageEncoder

    x = jax.random.uniform(jax.random.PRNGKey(0), (2, 8, 8, 4))
    nets = {n: BasicBlock(4, 16, 2, rngs=nnx.Rngs(0), norm=n) for n in ("group", "affine", "frozen")}
    params = {n: sum(int(v.size) for v in jax.tree_util.tree_leaves(nnx.state(m, nnx.Param)))
              for n, m in nets.items()}
    assert params["group"] == params["affine"] == params["frozen"] + 2 * 3 * 16    # 3 norms of 16
    out = {n: np.asarray(nnx.jit(lambda m, x: m(x))(m, x)) for n, m in nets.items()}
    np.testing.assert_array_equal(out["affine"], out["frozen"])        # both the identity at init
    assert not np.allclose(out["group"], out["affine"])

    graphdef, p, rest = nnx.split(nets["affine"], nnx.Param, ...)
    grads = jax.jit(jax.grad(lambda p: jnp.mean(nnx.merge(graphdef, p, rest)(x) ** 2)))(p)
    assert float(jnp.abs(grads["norm1"]["scale"][...]).max()) > 0     # the affine one learns
    enc = ImageEncoder(ACTConfig(vision_backbone="resnet18", vision_width=4, vision_norm="frozen"),
                       (1, 32, 32), rngs=nnx.Rngs(0), vectors=False)
    assert isinstance(enc.backbone.stem_norm, ChannelAffine) and not isinstance(
        enc.backbone.stem_norm.scale, nnx.Param)


def test_stem_pool_equals_reduce_window():
    """Planted bugs caught: an off-by-one in the SAME padding or the slice strides of the sliced max
    pool (values or gradients would differ from reduce_window's on even and odd sizes)."""
    from learn.policies.vision import max_pool_3x3_s2

    def ref(x):
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")

    def both(x, w):         # values and gradients of each, one compiled call per shape
        va, ga = jax.value_and_grad(lambda x: jnp.sum(max_pool_3x3_s2(x) * w))(x)
        vb, gb = jax.value_and_grad(lambda x: jnp.sum(ref(x) * w))(x)
        return max_pool_3x3_s2(x), ref(x), ga, gb

    for shape in ((1, 12, 12, 2), (1, 11, 8, 2)):
        x = jax.random.normal(jax.random.PRNGKey(sum(shape)), shape)   # no ties: the gradients agree
        w = jax.random.normal(jax.random.PRNGKey(1), ref(x).shape)
        pa, pb, ga, gb = jax.jit(both)(x, w)
        np.testing.assert_array_equal(np.asarray(pa), np.asarray(pb))
        np.testing.assert_array_equal(np.asarray(ga), np.asarray(gb))

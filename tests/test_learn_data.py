"""learn.data: loading, the episode split, train-only normalisation and window/padding semantics."""
import jax
import numpy as np
import pytest

from caliper_jax.dataset.writer import LeRobotWriter
from caliper_jax.errors import CaliperError
from learn.config import BCConfig
from learn.data import Frames, Prefetcher, WindowDataset, fit_normalizer, load_frames, prepare, split_episodes
from learn.features import FeatureLayout
from learn.normalize import Normalizer

LENGTHS = (3, 5)


def _episode(ep: int, n: int):
    """Known values: state [100 ep + t, -(100 ep + t)], env [1000 ep + t], action [10 ep + t, t]."""
    t = np.arange(n, dtype=np.float32)
    state = np.stack([100 * ep + t, -(100 * ep + t)], 1)
    env = (1000 * ep + t)[:, None]
    action = np.stack([10 * ep + t, t], 1)
    return state, env, action


def _write(root, lengths=LENGTHS, state_dtype="float32", tweak=None):
    feats = {"observation.state": {"dtype": state_dtype, "shape": [2], "names": None},
             "observation.environment_state": {"dtype": "float32", "shape": [1], "names": None},
             "action": {"dtype": "float32", "shape": [2], "names": None}}
    with LeRobotWriter(root, 10, feats) as w:
        for ep, n in enumerate(lengths):
            state, env, action = _episode(ep, n)
            if tweak is not None:
                state = tweak(ep, state.astype(state_dtype))
            w.add_frames({"observation.state": state, "observation.environment_state": env, "action": action})
            w.save_episode(task="t")
    return root


@pytest.fixture(scope="module")
def ds_root(tmp_path_factory):
    return _write(tmp_path_factory.mktemp("two") / "ds")


IDENTITY = Normalizer(np.zeros(3, np.float32), np.ones(3, np.float32), np.zeros(2, np.float32),
                      np.ones(2, np.float32))


def test_load_frames_concatenates_state_keys_and_keeps_episodes(ds_root):
    fr = load_frames(ds_root)
    keys = ("observation.state", "observation.environment_state")
    assert fr.layout == FeatureLayout(keys, (2, 1), "action", 2, 10)
    assert fr.lengths.tolist() == [3, 5] and fr.starts.tolist() == [0, 3] and fr.num_frames == 8
    assert fr.obs.dtype == np.float32 and fr.action.dtype == np.float32
    for ep, n in enumerate(LENGTHS):
        state, env, action = _episode(ep, n)
        obs, act = fr.episode(ep)
        np.testing.assert_array_equal(obs, np.concatenate([state, env], 1))
        np.testing.assert_array_equal(act, action)
    only_state = load_frames(ds_root, FeatureLayout(("observation.state",), (2,), "action", 2, 10))
    assert only_state.obs.shape == (8, 2)


def _reference(fr: Frames, n_obs: int, chunk: int):
    """Per-sample loop reference of the Batch docstring's window semantics."""
    out = []
    for e in range(fr.num_episodes):
        obs, act = fr.episode(e)
        for t in range(len(obs)):
            oi = [t - n_obs + 1 + k for k in range(n_obs)]
            ai = [t + k for k in range(chunk)]
            out.append((obs[[max(i, 0) for i in oi]], np.array([i >= 0 for i in oi]),
                        act[[min(i, len(act) - 1) for i in ai]], np.array([i < len(act) for i in ai])))
    return [np.stack(x) for x in zip(*out, strict=True)]


def test_windows_pad_at_episode_edges_and_never_cross(ds_root):
    fr = load_frames(ds_root)
    ds = WindowDataset(fr, BCConfig(n_obs_steps=3, chunk_size=4), IDENTITY)
    b = ds.windows(np.arange(8))
    assert b.images is None                  # no cameras in this dataset
    for got, want in zip(b[:4], _reference(fr, 3, 4), strict=True):
        np.testing.assert_array_equal(got, want)
    # episode 0, t = 0: the first frame repeated, actions run off the 3-frame end
    np.testing.assert_array_equal(b.obs[0, :, 0], [0, 0, 0])
    assert b.obs_mask[0].tolist() == [False, False, True]
    np.testing.assert_array_equal(b.action[0, :, 0], [0, 1, 2, 2])
    assert b.action_mask[0].tolist() == [True, True, True, False]
    # episode 0, last frame: actions pad with its own last action, not episode 1's first
    np.testing.assert_array_equal(b.action[2, :, 0], [2, 2, 2, 2])
    assert b.action_mask[2].tolist() == [True, False, False, False]
    # episode 1, t = 0: padding repeats episode 1's first frame, not episode 0's last
    np.testing.assert_array_equal(b.obs[3, :, 0], [100, 100, 100])
    assert b.obs_mask[3].tolist() == [False, False, True]
    # episode 1, t = 4 (its last): a full observation window
    np.testing.assert_array_equal(b.obs[7, :, 0], [102, 103, 104])
    assert b.obs_mask[7].all() and b.action_mask[7].tolist() == [True, False, False, False]


def test_sampled_and_epoch_batches_match_the_reference(ds_root):
    fr = load_frames(ds_root)
    ds = WindowDataset(fr, BCConfig(n_obs_steps=2, chunk_size=3), IDENTITY)
    ref = _reference(fr, 2, 3)
    by_frame = {float(o[-1, 0]): i for i, o in enumerate(ref[0])}
    b = ds.sample_batch(jax.random.key(0), 64)
    assert b.obs.shape == (64, 2, 3) and b.action.shape == (64, 3, 2) and b.obs.dtype == np.float32
    rows = [by_frame[float(v)] for v in np.asarray(b.obs[:, -1, 0])]
    for got, want in zip(b[:4], ref, strict=True):
        np.testing.assert_array_equal(np.asarray(got), want[rows])
    assert len(set(rows)) > 4  # uniform over frames: 64 draws of 8 frames hit most of them
    ep_of = np.asarray(b.obs[..., 2]) // 1000  # env feature encodes the episode
    assert (ep_of == ep_of[:, :1]).all() and (np.asarray(b.action[..., 0]) // 10 == ep_of[:, :1]).all()
    np.testing.assert_array_equal(np.asarray(ds.sample_batch(jax.random.key(0), 64).obs), np.asarray(b.obs))
    epoch = ds.iter_epoch(jax.random.key(1), batch_size=3)
    seen = [float(v) for bb in epoch for v in np.asarray(bb.obs[:, -1, 0])]
    assert sorted(seen) == sorted(by_frame) and len(seen) == 8
    assert sum(bb.obs.shape[0] for bb in ds.iter_epoch(None, 3, drop_last=True)) == 6


def test_prefetch_is_deterministic_and_resumable(ds_root):
    ds = WindowDataset(load_frames(ds_root), BCConfig(n_obs_steps=2, chunk_size=2), IDENTITY)
    key = jax.random.key(7)
    with ds.prefetch(key, 4, 5, depth=2) as it:
        a = [np.asarray(b.obs) for b in it]
    assert len(a) == 5
    for i, obs in enumerate(a):
        np.testing.assert_array_equal(obs, np.asarray(ds.sample_batch(jax.random.fold_in(key, i), 4).obs))
    with ds.prefetch(key, 4, 2, start=3) as it:
        tail = [np.asarray(b.obs) for b in it]
    np.testing.assert_array_equal(np.stack(tail), np.stack(a[3:5]))
    endless = ds.prefetch(key, 4)
    next(endless)
    endless.close()

    def boom(i):
        if i == 1:
            raise RuntimeError("bad batch")
        return i

    it = Prefetcher(boom, 0, 3)
    assert next(it) == 0
    with pytest.raises(RuntimeError, match="bad batch"):
        next(it)


def test_split_deterministic_disjoint_and_covering():
    tr, va = split_episodes(40, 0.1, 0)
    tr2, va2 = split_episodes(40, 0.1, 0)
    np.testing.assert_array_equal(tr, tr2)
    np.testing.assert_array_equal(va, va2)
    assert len(va) == 4 and not set(tr) & set(va) and sorted(set(tr) | set(va)) == list(range(40))
    assert not np.array_equal(va, split_episodes(40, 0.1, 1)[1])
    k_tr, k_va = split_episodes(40, 0.1, jax.random.key(3))
    np.testing.assert_array_equal(k_va, split_episodes(40, 0.1, jax.random.key(3))[1])
    assert split_episodes(40, 0.1, jax.random.PRNGKey(3))[1].tolist() == k_va.tolist()
    tr, va = split_episodes(5, 0.0, 0)
    assert tr.tolist() == [0, 1, 2, 3, 4] and va.size == 0
    assert split_episodes(1, 0.5, 0)[0].tolist() == [0]          # at least one train episode
    assert len(split_episodes(3, 0.01, 0)[1]) == 1                # a val fraction > 0 gives >= 1 episode
    assert len(split_episodes(2, 0.9, 0)[0]) == 1
    with pytest.raises(CaliperError, match="empty"):
        split_episodes(0, 0.1, 0)
    with pytest.raises(CaliperError, match="val_fraction"):
        split_episodes(4, 1.0, 0)


def test_normalizer_from_train_split_only():
    rng = np.random.default_rng(0)
    obs = [rng.normal(ep, 1 + ep, (20 + ep, 3)) for ep in range(6)]
    act = [rng.normal(-ep, 2, (20 + ep, 2)) for ep in range(6)]
    fr = Frames.from_episodes(obs, act)
    tr, va = split_episodes(6, 0.34, 0)
    norm = fit_normalizer(fr, tr)
    want = Normalizer.fit(np.concatenate([obs[i] for i in tr]), np.concatenate([act[i] for i in tr]))
    for a, b in zip(norm, want, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.allclose(norm.obs_mean, 0) and not np.allclose(norm.obs_std, 1)
    wild = [o + 1e4 if i in va else o for i, o in enumerate(obs)]   # validation values change wildly
    norm2 = fit_normalizer(Frames.from_episodes(wild, act), tr)
    for a, b in zip(norm, norm2, strict=True):
        np.testing.assert_array_equal(a, b)
    sp = prepare(fr, BCConfig(), 0.34, 0)
    np.testing.assert_array_equal(sp.train_ids, tr)
    np.testing.assert_array_equal(sp.val_ids, va)
    np.testing.assert_array_equal(sp.normalizer.obs_std, norm.obs_std)
    assert len(sp.train) == sum(20 + i for i in tr) and len(sp.val) == sum(20 + i for i in va)
    x = sp.train.windows([0]).obs[0, -1]
    np.testing.assert_allclose(x, (obs[tr[0]][0] - norm.obs_mean) / norm.obs_std, rtol=1e-6)
    assert prepare(fr, BCConfig(), 0.0, 0).val is None


def test_bad_inputs_raise_clear_errors(ds_root, tmp_path):
    with pytest.raises(CaliperError, match="observation.missing"):
        load_frames(ds_root, FeatureLayout(("observation.missing",), (2,), "action", 2, 10))
    with pytest.raises(CaliperError, match="state_dims"):
        load_frames(ds_root, FeatureLayout(("observation.state",), (3,), "action", 2, 10))
    with pytest.raises(CaliperError, match="empty dataset"):
        Frames.from_episodes([], [])
    with pytest.raises(CaliperError, match="episode 1 has no frames"):
        Frames.from_episodes([np.zeros((2, 3)), np.zeros((0, 3))], [np.zeros((2, 1)), np.zeros((0, 1))])
    layout = FeatureLayout(("observation.state", "observation.environment_state"), (2, 1), "action", 1, 10)
    bad = np.zeros((4, 3))
    bad[2, 2] = np.nan
    with pytest.raises(CaliperError, match=r"episode 1: feature 'observation.environment_state' frame 2"):
        Frames.from_episodes([np.zeros((2, 3)), bad], [np.zeros((2, 1)), np.zeros((4, 1))], layout)
    # float64 beyond float32's range is finite on disk, inf once loaded: caught by name
    big = _write(tmp_path / "big", state_dtype="float64",
                 tweak=lambda ep, s: np.where((ep == 1) & (np.arange(len(s))[:, None] == 2), 1e39, s))
    with pytest.raises(CaliperError, match=r"episode 1: feature 'observation.state' frame 2 holds NaN/inf"):
        load_frames(big)
    with pytest.raises(CaliperError, match="normaliser"):
        WindowDataset(load_frames(ds_root), BCConfig(), Normalizer(*(np.zeros(2, np.float32),) * 4))
    with pytest.raises(CaliperError, match="empty selection"):
        WindowDataset(load_frames(ds_root), BCConfig(), IDENTITY, episode_ids=[])

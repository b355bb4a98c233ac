"""Edit operations: delete / split / merge / tags rewrite densely and recompute stats."""

from __future__ import annotations

import numpy as np
import pytest

from caliper_jax.dataset import (
    LeRobotReader,
    LeRobotWriter,
    delete_episodes,
    merge_episodes,
    split_episode,
    tag_episode,
)
from caliper_jax.dataset.synthetic import write_synthetic
from caliper_jax.errors import CaliperError
from doctors.dataset import diagnose


@pytest.fixture
def ds(tmp_path):
    root = tmp_path / "ds"
    write_synthetic(root, episodes=5, length=40, image=(8, 8))
    return root


def _episodes(root):
    r = LeRobotReader(root)
    return r, [r.episode(i) for i in range(r.num_episodes)]


def _assert_consistent(root):
    r, eps = _episodes(root)
    start = 0
    for i, e in enumerate(eps):
        n = len(e["index"])
        np.testing.assert_array_equal(e["index"], np.arange(start, start + n))
        np.testing.assert_array_equal(e["episode_index"], np.full(n, i))
        np.testing.assert_array_equal(e["timestamp"], (np.arange(n) / r.fps).astype(np.float32))
        start += n
    actions = np.concatenate([e["action"] for e in eps]).astype(float)
    np.testing.assert_allclose(r.stats["action"]["mean"], actions.mean(0), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(r.stats["action"]["std"], actions.std(0), rtol=1e-9, atol=1e-12)
    assert r.stats["action"]["count"].tolist() == [len(actions)]
    assert diagnose(root).codes() in ([], ["D009"])


def test_delete_renumbers_and_remaps_tasks(ds):
    _, before = _episodes(ds)
    tag_episode(ds, 3, add=["good"])
    result = delete_episodes(ds, [0, 2])
    assert result["episodes"] == 3 and result["deleted"] == [0, 2]
    r, after = _episodes(ds)
    for new, old in enumerate([1, 3, 4]):
        np.testing.assert_array_equal(after[new]["action"], before[old]["action"])
        np.testing.assert_array_equal(
            after[new]["observation.images.cam"], before[old]["observation.images.cam"]
        )
    assert r.tasks == ["push the cube", "reach the cube"]  # dense, in order of first use
    assert [r.tasks[int(e["task_index"][0])] for e in after] == ["push the cube"] * 2 + ["reach the cube"]
    assert r.tags == {1: ["good"]}
    _assert_consistent(ds)


def test_delete_refuses_all_and_bad_indices(ds):
    with pytest.raises(CaliperError, match="refusing to delete all 5"):
        delete_episodes(ds, range(5))
    with pytest.raises(CaliperError, match="out of range"):
        delete_episodes(ds, [7])
    assert LeRobotReader(ds).num_episodes == 5


def test_split_keeps_task_and_tags(ds):
    _, before = _episodes(ds)
    tag_episode(ds, 1, add=["retry"])
    split_episode(ds, 1, 15)
    r, after = _episodes(ds)
    assert r.num_episodes == 6
    np.testing.assert_array_equal(
        np.concatenate([after[1]["action"], after[2]["action"]]), before[1]["action"]
    )
    assert len(after[1]["index"]) == 15
    assert r.tags == {1: ["retry"], 2: ["retry"]}
    assert r.episodes[1]["tasks"] == r.episodes[2]["tasks"]
    with pytest.raises(CaliperError, match="frame must be in 1.."):
        split_episode(ds, 0, 0)
    _assert_consistent(ds)


def test_merge_unions_tags_and_continues_timestamps(ds):
    _, before = _episodes(ds)
    tag_episode(ds, 2, add=["a"])
    tag_episode(ds, 3, add=["b"])
    merge_episodes(ds, 2, 3)
    r, after = _episodes(ds)
    assert r.num_episodes == 4
    np.testing.assert_array_equal(
        after[2]["action"], np.concatenate([before[2]["action"], before[3]["action"]])
    )
    assert r.tags == {2: ["a", "b"]}
    assert sorted(r.episodes[2]["tasks"]) == ["push the cube", "reach the cube"]
    with pytest.raises(CaliperError, match="adjacent"):
        merge_episodes(ds, 0, 2)
    _assert_consistent(ds)


def test_tags_sidecar(ds):
    assert tag_episode(ds) == {}
    assert tag_episode(ds, 1, add=["good", "retry"]) == {1: ["good", "retry"]}
    assert tag_episode(ds, 1, remove=["retry"]) == {1: ["good"]}
    assert tag_episode(ds, 1, clear=True) == {}
    with pytest.raises(CaliperError, match="comma-free"):
        tag_episode(ds, 1, add=["a,b"])
    with pytest.raises(CaliperError, match="need --episode"):
        tag_episode(ds, None, add=["x"])


def test_edit_refuses_video_datasets(tmp_path):
    root = tmp_path / "v"
    pytest.importorskip("av", reason="PyAV encodes the video feature")
    feats = {"action": {"dtype": "float32", "shape": [2]}, "cam": {"dtype": "video", "shape": [32, 32, 3]}}
    with LeRobotWriter(root, 10, feats) as w:
        for ep in range(2):
            w.add_frames({"action": np.ones((3, 2)) * ep, "cam": np.zeros((3, 32, 32, 3), np.uint8)})
            w.save_episode(task="t")
    assert [p.name for p in (root / "videos/cam/chunk-000").iterdir()] == ["file-000.mp4"]
    with pytest.raises(CaliperError, match="video features is not supported"):
        delete_episodes(root, [0])

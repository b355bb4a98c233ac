"""Round trips with the real lerobot package (run by .ci/lerobot_compat.sh in .venv-lerobot).

Skipped, with the reason, wherever lerobot (and torch) are not importable: the main test venv.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

lerobot = pytest.importorskip("lerobot", reason="lerobot not installed; run .ci/lerobot_compat.sh")
torch = pytest.importorskip("torch", reason="torch not installed; run .ci/lerobot_compat.sh")
from lerobot.datasets.lerobot_dataset import LeRobotDataset  # noqa: E402

from caliper_jax.dataset import LeRobotReader, LeRobotWriter, delete_episodes, split_episode  # noqa: E402
from caliper_jax.dataset.synthetic import write_synthetic  # noqa: E402
from caliper_jax.dataset.video import have_pyav  # noqa: E402
from doctors.dataset import diagnose  # noqa: E402

FPS = 30
assert os.environ.get("HF_HUB_OFFLINE") == "1", "run offline: HF_HUB_OFFLINE=1"


def _ours(root, **options):
    write_synthetic(root, episodes=5, length=24, fps=FPS, image=(12, 10), **options)
    return LeRobotReader(root)


def _compare_all_frames(ours: LeRobotReader, theirs: LeRobotDataset) -> None:
    assert len(theirs) == ours.num_frames and theirs.meta.total_episodes == ours.num_episodes
    for ep in range(ours.num_episodes):
        arrays = ours.episode(ep)
        for k in range(len(arrays["index"])):
            item = theirs[int(arrays["index"][k])]
            for key in ("observation.state", "action"):
                np.testing.assert_array_equal(item[key].numpy(), arrays[key][k])
            assert item["timestamp"].item() == arrays["timestamp"][k]
            assert item["frame_index"].item() == k and item["episode_index"].item() == ep
            assert item["task"] == ours.tasks[int(arrays["task_index"][k])]
            pixels = arrays["observation.images.cam"][k].transpose(2, 0, 1) / 255.0
            np.testing.assert_allclose(item["observation.images.cam"].numpy(), pixels, atol=1e-7)


@pytest.mark.parametrize("size_mb", [100, 0.01])
def test_lerobot_loads_what_we_write(tmp_path, size_mb):
    ours = _ours(tmp_path / "ds", data_files_size_in_mb=size_mb, chunks_size=2)
    theirs = LeRobotDataset("caliper/test", root=tmp_path / "ds")
    _compare_all_frames(ours, theirs)
    assert set(theirs.meta.stats["action"]) >= {"mean", "std", "q01", "q99"}
    assert list(theirs.meta.tasks.index) == ours.tasks


def test_dataloader_with_delta_timestamps(tmp_path):
    ours = _ours(tmp_path / "ds")
    deltas = {"action": [0.0, 1 / FPS, 2 / FPS], "observation.state": [-1 / FPS, 0.0]}
    theirs = LeRobotDataset("caliper/test", root=tmp_path / "ds", delta_timestamps=deltas)
    loader = torch.utils.data.DataLoader(theirs, batch_size=16, shuffle=False)
    seen = 0
    for batch in loader:
        for b in range(len(batch["index"])):
            ep = int(batch["episode_index"][b])
            arrays = ours.episode(ep, ["action", "observation.state"])
            n, k = len(arrays["action"]), int(batch["frame_index"][b])
            for key, offsets in (("action", [0, 1, 2]), ("observation.state", [-1, 0])):
                want = arrays[key][np.clip([k + o for o in offsets], 0, n - 1)]
                np.testing.assert_array_equal(batch[key][b].numpy(), want)
                pad = [not 0 <= k + o < n for o in offsets]
                assert batch[f"{key}_is_pad"][b].tolist() == pad
            seen += 1
    assert seen == ours.num_frames


def test_lerobot_loads_edited_and_appended(tmp_path):
    root = tmp_path / "ds"
    _ours(root)
    delete_episodes(root, [1])
    split_episode(root, 0, 10)
    with LeRobotWriter(root) as w:
        w.add_frames(
            {
                k: v[:7]
                for k, v in LeRobotReader(root)
                .episode(2, ["observation.state", "action", "observation.images.cam"])
                .items()
            }
        )
        w.save_episode(task="appended")
    _compare_all_frames(LeRobotReader(root), LeRobotDataset("caliper/test", root=root))


def test_we_read_what_lerobot_writes(tmp_path):
    feats = {
        "observation.state": {"dtype": "float32", "shape": (4,), "names": ["a", "b", "c", "d"]},
        "action": {"dtype": "float32", "shape": (4,), "names": None},
        "observation.images.cam": {
            "dtype": "image",
            "shape": (12, 10, 3),
            "names": ["height", "width", "channels"],
        },
    }
    theirs = LeRobotDataset.create(
        "caliper/theirs", fps=FPS, features=feats, root=tmp_path / "ds", use_videos=False
    )
    rng = np.random.default_rng(0)
    fed = []
    for ep in range(4):
        frames = [
            {
                "observation.state": rng.random(4, dtype=np.float32),
                "action": rng.random(4, dtype=np.float32),
                "observation.images.cam": rng.integers(0, 256, (12, 10, 3), dtype=np.uint8),
                "task": f"task {ep % 3}",
            }
            for _ in range(9 + ep)
        ]
        fed.append([dict(f) for f in frames])
        for f in frames:
            theirs.add_frame(f)
        theirs.save_episode()
    theirs.finalize()
    ours = LeRobotReader(tmp_path / "ds")
    assert ours.num_episodes == 4 and ours.tasks == ["task 0", "task 1", "task 2"]
    for ep, frames in enumerate(fed):
        arrays = ours.episode(ep)
        for key in feats:
            np.testing.assert_array_equal(arrays[key], np.stack([f[key] for f in frames]))
        np.testing.assert_array_equal(arrays["timestamp"], (np.arange(len(frames)) / FPS).astype(np.float32))
        assert [ours.tasks[t] for t in arrays["task_index"]] == [f["task"] for f in frames]
    assert not [f for f in diagnose(tmp_path / "ds").findings if f.severity == "Error"]
    with LeRobotWriter(tmp_path / "ds") as w:  # append to a lerobot-written dataset
        w.add_frames({k: np.stack([f[k] for f in fed[0]]) for k in feats})
        w.save_episode(task="task 0")
    _check_len = LeRobotDataset("caliper/theirs", root=tmp_path / "ds")
    assert len(_check_len) == sum(len(f) for f in fed) + len(fed[0])


def _have_torchcodec() -> bool:
    try:
        from torchcodec.decoders import VideoDecoder  # noqa: F401
    except (ImportError, RuntimeError, OSError):   # no wheel, or no FFmpeg libraries to load
        return False
    return True


@pytest.mark.skipif(not have_pyav(), reason="PyAV not installed")
@pytest.mark.skipif(not _have_torchcodec(), reason="lerobot decodes video with torchcodec on FFmpeg: run "
                    ".ci/lerobot_compat.sh (it installs both)")
def test_video_features(tmp_path):
    feats = {"action": {"dtype": "float32", "shape": [2]}, "cam": {"dtype": "video", "shape": [32, 48, 3]}}
    t = np.linspace(0, 1, 20)
    frames = np.zeros((20, 32, 48, 3), np.uint8)
    for k in range(20):
        frames[k, :, : 2 * k + 4] = 200
    with LeRobotWriter(tmp_path / "v", FPS, feats) as w:
        for _ in range(2):
            w.add_frames({"action": np.stack([t, t**2], axis=1), "cam": frames})
            w.save_episode(task="t")
    ours = LeRobotReader(tmp_path / "v")
    decoded = ours.video_frames(1, "cam")
    assert decoded.shape == frames.shape and np.abs(decoded / 255.0 - frames / 255.0).mean() < 0.05
    assert ours.info["features"]["cam"]["info"]["video.codec"]
    theirs = LeRobotDataset("caliper/video", root=tmp_path / "v")
    assert len(theirs) == 40
    item = theirs[25]               # lerobot's own decode (torchcodec; the compat script installs it)
    np.testing.assert_allclose(item["cam"].numpy(), frames[5].transpose(2, 0, 1) / 255.0, atol=0.1)

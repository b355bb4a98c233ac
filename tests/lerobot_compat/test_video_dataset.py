"""Video datasets against the real lerobot 0.4.4 (run by .ci/lerobot_compat.sh in .venv-lerobot).

lerobot decodes video with torchcodec, which needs FFmpeg's shared libraries; the compat script
installs both (Debian's ffmpeg, PyPI's torchcodec). Without them these tests skip and say why
(torchvision 0.29 no longer has the VideoReader of lerobot's "pyav" backend).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

lerobot = pytest.importorskip("lerobot", reason="lerobot not installed; run .ci/lerobot_compat.sh")
torch = pytest.importorskip("torch", reason="torch not installed; run .ci/lerobot_compat.sh")
av = pytest.importorskip("av", reason="PyAV not installed")
try:
    from torchcodec.decoders import VideoDecoder  # noqa: F401
except (ImportError, RuntimeError, OSError) as exc:  # no wheel, or no FFmpeg libraries to load
    pytest.skip(f"lerobot cannot decode video here (torchcodec: {exc}); run .ci/lerobot_compat.sh",
                allow_module_level=True)
from lerobot.datasets.lerobot_dataset import LeRobotDataset  # noqa: E402

from caliper_jax.dataset import LeRobotReader, LeRobotWriter  # noqa: E402

FPS = 10
H, W = 32, 48
MAE = 8.0  # grey levels of 255: smooth frames through libsvtav1 crf 30 (measured 2-4)
assert os.environ.get("HF_HUB_OFFLINE") == "1", "run offline: HF_HUB_OFFLINE=1"


def _frames(ep: int, n: int) -> np.ndarray:
    y, x = np.mgrid[0:H, 0:W]
    red = [(x * 4 + 6 * k + 30 * ep) % 256 for k in range(n)]
    green = [(y * 6 + 4 * k) % 256 for k in range(n)]
    blue = [np.full_like(x, 40 * ep + k) for k in range(n)]
    return np.stack([np.stack(c, -1) for c in zip(red, green, blue, strict=True)]).astype(np.uint8)


def test_lerobot_loads_our_concatenated_videos(tmp_path):
    feats = {"action": {"dtype": "float32", "shape": [2]}, "cam": {"dtype": "video", "shape": [H, W, 3]}}
    lengths = [5, 7, 6, 8]
    src = []
    with LeRobotWriter(tmp_path / "v", FPS, feats) as w:
        for ep, n in enumerate(lengths):
            src.append(_frames(ep, n))
            w.add_frames({"action": np.full((n, 2), ep, np.float32), "cam": src[-1]})
            w.save_episode(task=f"task {ep}")
    ours = LeRobotReader(tmp_path / "v")
    theirs = LeRobotDataset("caliper/video", root=tmp_path / "v")
    assert len(theirs) == sum(lengths) and theirs.meta.total_episodes == len(lengths)
    last = len(lengths) - 1
    ep_meta = theirs.meta.episodes[last]
    assert ep_meta["videos/cam/from_timestamp"] == pytest.approx(sum(lengths[:-1]) / FPS)
    assert theirs.meta.get_video_file_path(last, "cam") == ours.video_path(last, "cam").relative_to(ours.root)
    decoded = ours.video_frames(last, "cam")
    start = sum(lengths[:-1])
    for k in range(lengths[last]):
        item = theirs[start + k]
        pixels = (item["cam"].numpy() * 255.0).round().transpose(1, 2, 0)
        assert item["episode_index"].item() == last and item["frame_index"].item() == k
        np.testing.assert_array_equal(pixels, decoded[k])  # same codec, same frame: identical pixels
        assert np.abs(pixels - src[last][k]).mean() < MAE


def test_we_read_videos_lerobot_wrote(tmp_path):
    feats = {
        "action": {"dtype": "float32", "shape": (2,), "names": None},
        "cam": {"dtype": "video", "shape": (H, W, 3), "names": ["height", "width", "channels"]},
    }
    theirs = LeRobotDataset.create("caliper/theirs", fps=FPS, features=feats, root=tmp_path / "v")
    src = []
    for ep, n in enumerate([4, 6, 5]):
        src.append(_frames(ep, n))
        for k in range(n):
            theirs.add_frame({"action": np.full(2, ep, np.float32), "cam": src[-1][k], "task": "t"})
        theirs.save_episode()
    theirs.finalize()
    ours = LeRobotReader(tmp_path / "v")
    froms = [ours.episodes[ep]["videos/cam/from_timestamp"] for ep in range(3)]
    assert froms == pytest.approx([0.0, 0.4, 1.0])  # lerobot concatenated them into one file
    assert {ours.video_path(ep, "cam") for ep in range(3)} == {ours.video_path(0, "cam")}
    assert ours.info["features"]["cam"]["info"]["video.codec"] == "av1"
    for ep, frames in enumerate(src):
        got = ours.video_frames(ep, "cam")
        assert got.shape == frames.shape and np.abs(got.astype(float) - frames).mean() < MAE
    with LeRobotWriter(tmp_path / "v") as w:  # append to it: our episodes go into the next file
        w.add_frames({"action": np.zeros((4, 2), np.float32), "cam": _frames(3, 4)})
        w.save_episode(task="t")
    ours = LeRobotReader(tmp_path / "v")
    assert ours.episodes[3]["videos/cam/file_index"] == 1
    assert len(LeRobotDataset("caliper/theirs", root=tmp_path / "v")) == 19


def test_concatenation_matches_lerobots_packet_for_packet(tmp_path):
    from lerobot.datasets.video_utils import concatenate_video_files

    feats = {"cam": {"dtype": "video", "shape": [H, W, 3]}}
    w = LeRobotWriter(tmp_path / "v", FPS, feats)
    for ep, n in enumerate([5, 6, 7]):
        w.add_frames({"cam": _frames(ep, n)})
        w.save_episode(task="t")
    per_episode = sorted((tmp_path / "v/videos/cam/chunk-000").glob("*.mp4"))
    theirs = tmp_path / "theirs.mp4"
    theirs.write_bytes(per_episode[0].read_bytes())
    for path in per_episode[1:]:  # lerobot appends each new episode to the latest file
        copy = tmp_path / path.name
        copy.write_bytes(path.read_bytes())
        concatenate_video_files([theirs, copy], theirs)
    w.close()

    def packets(path):
        with av.open(str(path)) as c:
            s = c.streams.video[0]
            rows = [(p.pts, p.dts, p.duration, p.is_keyframe, bytes(p)) for p in c.demux(s)]
            return s.time_base, s.duration, [r for r in rows if r[1] is not None]

    assert packets(tmp_path / "v/videos/cam/chunk-000/file-000.mp4") == packets(theirs)

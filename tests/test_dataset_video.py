"""Video features: lerobot's MP4 layout (episodes concatenated per file), seeking decode, crash safety.

Codec tolerance: the frames are a smooth synthetic gradient; after libsvtav1 at crf 30 / yuv420p the
mean absolute error of every decoded episode stays below ``MAE`` grey levels (measured 2-4 of 255).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from caliper_jax.dataset import LeRobotReader, LeRobotWriter, video
from caliper_jax.dataset import writer as writer_mod
from caliper_jax.errors import CaliperError

pytest.importorskip("av", reason="PyAV is in the test extra")

FPS = 10
H, W = 32, 48
MAE = 8.0
FEATS = {"action": {"dtype": "float32", "shape": [2]}, "cam": {"dtype": "video", "shape": [H, W, 3]}}


def _frames(ep: int, n: int) -> np.ndarray:
    y, x = np.mgrid[0:H, 0:W]
    red = [(x * 4 + 6 * k + 30 * ep) % 256 for k in range(n)]
    green = [(y * 6 + 4 * k) % 256 for k in range(n)]
    blue = [np.full_like(x, 40 * ep + k) for k in range(n)]
    return np.stack([np.stack(c, -1) for c in zip(red, green, blue, strict=True)]).astype(np.uint8)


def _save(w: LeRobotWriter, ep: int, n: int) -> np.ndarray:
    frames = _frames(ep, n)
    w.add_frames({"action": np.full((n, 2), ep, np.float32), "cam": frames})
    w.save_episode(task=f"task {ep % 2}")
    return frames


def _write(root, lengths, close=True, **options):
    w = LeRobotWriter(root, FPS, FEATS, **options)
    src = [_save(w, ep, n) for ep, n in enumerate(lengths)]
    if close:
        w.close()
    return src


def _video_cols(r: LeRobotReader, ep: int) -> tuple:
    m = r.episodes[ep]
    names = ("chunk_index", "file_index", "from_timestamp", "to_timestamp")
    return tuple(m[f"videos/cam/{c}"] for c in names)


def _check_all(r: LeRobotReader, src: list[np.ndarray]) -> None:
    assert r.num_episodes == len(src)
    for ep, frames in enumerate(src):
        got = r.episode(ep, ["cam", "action"])["cam"]
        assert got.shape == frames.shape and got.dtype == np.uint8
        assert np.abs(got.astype(float) - frames).mean() < MAE, ep


def test_round_trip_concatenated_like_lerobot(tmp_path):
    src = _write(tmp_path / "v", [5, 6, 7, 8])
    r = LeRobotReader(tmp_path / "v")
    _check_all(r, src)
    assert sorted(p.name for p in (tmp_path / "v/videos/cam").rglob("*.mp4")) == ["file-000.mp4"]
    end = 0.0
    for ep, frames in enumerate(src):
        chunk, file, lo, hi = _video_cols(r, ep)
        assert (chunk, file) == (0, 0) and lo == pytest.approx(end, abs=1e-12)
        assert hi - lo == pytest.approx(len(frames) / FPS, abs=1e-12)
        end = hi
    p = video.probe(r.video_path(0, "cam"))
    assert (p["frames"], p["codec"], p["pix_fmt"]) == (26, "av1", "yuv420p")
    assert p["duration_s"] == pytest.approx(end)
    assert r.info["features"]["cam"]["info"] == {
        "video.height": H,
        "video.width": W,
        "video.codec": "av1",
        "video.pix_fmt": "yuv420p",
        "video.is_depth_map": False,
        "video.fps": FPS,
        "video.channels": 3,
        "has_audio": False,
    }
    assert r.info["video_path"] == "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"


def test_size_limit_starts_new_files_and_chunks(tmp_path):
    # each episode MP4 is ~1-2 KB: a 2.5 KB limit puts one or two episodes per file, chunks of 2 files
    src = _write(tmp_path / "v", [4, 4, 4, 4, 4], video_files_size_in_mb=2.5 / 1024, chunks_size=2)
    r = LeRobotReader(tmp_path / "v")
    _check_all(r, src)
    cols = [_video_cols(r, ep) for ep in range(5)]
    files = sorted({(c, f) for c, f, _, _ in cols})
    assert len(files) >= 3 and files == [(i // 2, i % 2) for i in range(len(files))]
    for where in files:
        members = [(lo, hi) for c, f, lo, hi in cols if (c, f) == where]
        assert members[0][0] == 0.0
        assert all(a[1] == b[0] for a, b in zip(members[:-1], members[1:], strict=True))
        path = tmp_path / "v" / f"videos/cam/chunk-{where[0]:03d}/file-{where[1]:03d}.mp4"
        assert video.probe(path)["duration_s"] == pytest.approx(members[-1][1])
    on_disk = {p.relative_to(tmp_path / "v").as_posix() for p in (tmp_path / "v/videos").rglob("*")
               if p.is_file()}
    assert on_disk == {f"videos/cam/chunk-{c:03d}/file-{f:03d}.mp4" for c, f in files}


def test_reopen_appends_in_the_next_file(tmp_path):
    root = tmp_path / "v"
    src = _write(root, [5, 6])
    with LeRobotWriter(root) as w:
        src += [_save(w, 2, 4), _save(w, 3, 7)]
    r = LeRobotReader(root)
    _check_all(r, src)
    assert [_video_cols(r, ep)[:3] for ep in range(4)] == [(0, 0, 0.0), (0, 0, 0.5), (0, 1, 0.0), (0, 1, 0.4)]


def test_killed_session_leaves_every_saved_episode_loadable(tmp_path, monkeypatch):
    root = tmp_path / "v"
    src = _write(root, [5, 6, 4], close=False)  # a killed session: close() never runs
    r = LeRobotReader(root)
    _check_all(r, src)
    assert [_video_cols(r, ep) for ep in range(3)] == [(0, i, 0.0, n / FPS) for i, n in enumerate([5, 6, 4])]
    # killed again, this time inside close(): half-written concatenations must not become visible
    w = LeRobotWriter(root)
    src += [_save(w, 3, 5), _save(w, 4, 5)]

    def dies(paths, out):
        out.write_bytes(b"partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(writer_mod.video, "concatenate", dies)
    with pytest.raises(KeyboardInterrupt):
        w.close()
    monkeypatch.undo()
    _check_all(LeRobotReader(root), src)
    with LeRobotWriter(root) as w:  # reopening recovers and appends
        src.append(_save(w, 5, 3))
    _check_all(LeRobotReader(root), src)


def test_decode_seeks_to_the_episode_keyframe(tmp_path):
    lengths = [6] * 8
    src = _write(tmp_path / "v", lengths)
    r = LeRobotReader(tmp_path / "v")
    last = len(lengths) - 1
    _, _, lo, _ = _video_cols(r, last)
    trace: list[float] = []
    got = video.decode(r.video_path(last, "cam"), lo, lengths[last], FPS, trace=trace)
    assert np.abs(got.astype(float) - src[last]).mean() < MAE
    # only frames from the keyframe at or before from_timestamp (GOP 2) onwards were decoded
    assert min(trace) >= lo - (video.GOP - 1) / FPS - 1e-9
    assert len(trace) <= lengths[last] + video.GOP - 1
    full: list[float] = []
    video.decode(r.video_path(last, "cam"), 0.0, sum(lengths), FPS, trace=full)
    assert len(full) == sum(lengths) > 4 * len(trace)


def test_clear_errors(tmp_path, monkeypatch):
    small = {"cam": {"dtype": "video", "shape": [16, 16, 3]}}
    with LeRobotWriter(tmp_path / "small", FPS, small) as w:
        w.add_frames({"cam": np.zeros((3, 16, 16, 3), np.uint8)})
        with pytest.raises(CaliperError, match="16x16 px cannot be encoded with libsvtav1.*'image'"):
            w.save_episode(task="t")
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"\x00\x00\x00\x18ftypisom")
    good = tmp_path / "good.mp4"
    video.encode(list(_frames(0, 4)), good, FPS)
    with LeRobotWriter(tmp_path / "sup", FPS, FEATS) as w:
        w.add_frames({"action": np.zeros((3, 2)), "cam": _frames(0, 3)})
        with pytest.raises(CaliperError, match="junk.mp4: not a readable MP4"):
            w.save_episode(task="t", videos={"cam": junk})
        with pytest.raises(CaliperError, match="4 frames, the episode has 3"):
            w.save_episode(task="t", videos={"cam": good})
    with pytest.raises(CaliperError, match="off the 15 fps grid"):
        video.decode(good, 0.0, 4, 15)
    with pytest.raises(CaliperError, match="holds 0 of the 2 frames from 5.000000s"):
        video.decode(good, 5.0, 2, FPS)
    monkeypatch.setitem(sys.modules, "av", None)  # PyAV missing
    assert not video.have_pyav()
    with pytest.raises(CaliperError, match=r'pip install "caliper-jax\[video\]"'):
        video.decode(good, 0.0, 4, FPS)

"""Writer / reader round trips for caliper_jax.dataset (LeRobotDataset v3.0)."""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from caliper_jax.cli import data as data_cli
from caliper_jax.dataset import LeRobotReader, LeRobotWriter
from caliper_jax.dataset.png import decode_png, encode_png
from caliper_jax.dataset.synthetic import episode, features, write_synthetic
from caliper_jax.errors import CaliperError

FEATS = {
    "observation.state": {"dtype": "float32", "shape": [3], "names": ["a", "b", "c"]},
    "action": {"dtype": "float32", "shape": [3], "names": None},
    "observation.images.cam": {"dtype": "image", "shape": [6, 5, 3]},
}


def _frames(seed: int, n: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [
        {
            "observation.state": rng.normal(size=3).astype(np.float32),
            "action": rng.normal(size=3).astype(np.float32),
            "observation.images.cam": rng.integers(0, 256, (6, 5, 3), dtype=np.uint8),
        }
        for _ in range(n)
    ]


def _write(root: Path, lengths=(4, 7, 5), **options) -> list[list[dict]]:
    episodes = [_frames(i, n) for i, n in enumerate(lengths)]
    with LeRobotWriter(root, 15, FEATS, **options) as w:
        for i, frames in enumerate(episodes):
            for frame in frames:
                w.add_frame(frame)
            w.save_episode(task=f"task {i % 2}")
    return episodes


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_round_trip_values_and_timestamps(tmp_path):
    episodes = _write(tmp_path / "ds")
    r = LeRobotReader(tmp_path / "ds")
    assert (r.num_episodes, r.num_frames, r.tasks) == (3, 16, ["task 0", "task 1"])
    start = 0
    for ep, frames in enumerate(episodes):
        got = r.episode(ep)
        for key in FEATS:
            np.testing.assert_array_equal(got[key], np.stack([f[key] for f in frames]))
        n = len(frames)
        np.testing.assert_array_equal(got["timestamp"], (np.arange(n) / 15).astype(np.float32))
        np.testing.assert_array_equal(got["frame_index"], np.arange(n))
        np.testing.assert_array_equal(got["index"], np.arange(start, start + n))
        assert set(got["task_index"]) == {ep % 2}
        assert r.episode_meta(ep)["tasks"] == [f"task {ep % 2}"]
        start += n
    assert r.frame(5)["frame_index"] == 1 and r.frame(5)["episode_index"] == 1
    stats = r.stats
    state = np.concatenate([np.stack([f["observation.state"] for f in e]) for e in episodes]).astype(float)
    np.testing.assert_allclose(stats["observation.state"]["mean"], state.mean(0), rtol=1e-9)
    np.testing.assert_allclose(stats["observation.state"]["std"], state.std(0), rtol=1e-9)
    assert stats["observation.state"]["count"].tolist() == [16]
    assert stats["observation.images.cam"]["mean"].shape == (3, 1, 1)
    assert set(stats["action"]) == {"min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99"}


def test_metadata_layout_matches_lerobot(tmp_path):
    _write(tmp_path / "ds")
    root = tmp_path / "ds"
    info = json.loads((root / "meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["splits"] == {"train": "0:3"}
    assert list(info["features"])[-5:] == ["timestamp", "frame_index", "episode_index", "index", "task_index"]
    assert info["features"]["observation.images.cam"]["names"] == ["height", "width", "channels"]
    data = pq.read_schema(root / "data/chunk-000/file-000.parquet")
    assert str(data.field("observation.state").type) == "fixed_size_list<element: float>[3]"
    assert str(data.field("observation.images.cam").type) == "struct<bytes: binary, path: string>"
    assert pq.ParquetFile(root / "data/chunk-000/file-000.parquet").metadata.num_row_groups == 3
    eps = pq.read_schema(root / "meta/episodes/chunk-000/file-000.parquet")
    assert eps.names[:7] == [
        "episode_index",
        "tasks",
        "length",
        "data/chunk_index",
        "data/file_index",
        "dataset_from_index",
        "dataset_to_index",
    ]
    assert eps.names[-2:] == ["meta/episodes/chunk_index", "meta/episodes/file_index"]
    assert "stats/observation.images.cam/q99" in eps.names
    tasks = pq.read_table(root / "meta/tasks.parquet")
    pandas_meta = json.loads(tasks.schema.metadata[b"pandas"])
    assert pandas_meta["index_columns"] == ["__index_level_0__"]
    assert tasks.column("__index_level_0__").to_pylist() == ["task 0", "task 1"]


def test_chunk_and_file_roll_over(tmp_path):
    root = tmp_path / "ds"
    _write(root, lengths=(5, 5, 5, 5, 5), data_files_size_in_mb=0.004, chunks_size=2)
    r = LeRobotReader(root)
    where = [(m["data/chunk_index"], m["data/file_index"]) for m in r.episodes]
    assert where[0] == (0, 0) and len(set(where)) > 1
    for (c1, f1), (c2, f2) in zip(where, where[1:], strict=False):
        assert (c2, f2) in {(c1, f1), (c1, f1 + 1), (c1 + 1, 0)} and f2 < 2
    files = sorted(p.relative_to(root).as_posix() for p in (root / "data").glob("*/*.parquet"))
    assert files == sorted({f"data/chunk-{c:03d}/file-{f:03d}.parquet" for c, f in where})
    assert sum(pq.read_metadata(root / f).num_rows for f in files) == 25
    for ep in range(5):
        assert len(r.episode(ep)["index"]) == 5


def test_byte_identical_across_runs(tmp_path):
    _write(tmp_path / "a", data_files_size_in_mb=0.004)
    _write(tmp_path / "b", data_files_size_in_mb=0.004)
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    created_by = pq.read_metadata(tmp_path / "a/data/chunk-000/file-000.parquet").created_by
    assert created_by.startswith("parquet-cpp-arrow")  # a library version, never a time


def test_non_finite_rejected_at_add_frame(tmp_path):
    with LeRobotWriter(tmp_path / "ds", 10, FEATS) as w:
        frame = _frames(0, 1)[0]
        frame["action"] = np.array([0.0, np.nan, 1.0], np.float32)
        with pytest.raises(CaliperError, match="'action' frame 0 holds NaN/inf"):
            w.add_frame(frame)
        frame["action"] = np.array([0.0, 1e39, 1.0])  # overflows float32 to inf
        with pytest.raises(CaliperError, match="NaN/inf"):
            w.add_frame(frame)
        assert w.num_buffered_frames == 0
        w.add_frame(_frames(1, 1)[0])
        w.discard_episode()
        assert w.num_buffered_frames == 0


def test_float64_values_that_would_overflow_the_stats_are_rejected(tmp_path):
    spec = {"dtype": "float64", "shape": [2], "names": ["a", "b"]}
    with LeRobotWriter(tmp_path / "ds", 10, {"observation.state": spec, "action": spec}) as w:
        bad = r"'observation.state' frame 0 holds a value beyond \+-1e\+150"
        with pytest.raises(CaliperError, match=bad):
            w.add_frame({"observation.state": np.array([1e300, 0.0]), "action": np.zeros(2)})
        w.add_frame({"observation.state": np.array([1e100, 0.0]), "action": np.zeros(2)})
        w.save_episode(task="large but fine")


@pytest.mark.parametrize(
    "change, message",
    [
        ({"extra": 1}, "undeclared"),
        ({"action": [1.0, 2.0]}, "has 2 values"),
        ({"observation.images.cam": np.zeros((6, 5, 3), np.float32)}, "must be uint8"),
        ({"observation.images.cam": b"nope"}, "not a PNG"),
    ],
)
def test_bad_frames_rejected(tmp_path, change, message):
    with LeRobotWriter(tmp_path / "ds", 10, FEATS) as w:
        with pytest.raises(CaliperError, match=message):
            w.add_frame({**_frames(0, 1)[0], **change})


def test_bad_declarations(tmp_path):
    with pytest.raises(CaliperError, match="needs 'dtype' and 'shape'"):
        LeRobotWriter(tmp_path / "a", 10, {"x": {"dtype": "float32"}})
    with pytest.raises(CaliperError, match="without '/'"):
        LeRobotWriter(tmp_path / "b", 10, {"a/b": {"dtype": "float32", "shape": [1]}})
    with pytest.raises(CaliperError, match="fps"):
        LeRobotWriter(tmp_path / "c", 0, FEATS)
    with pytest.raises(CaliperError, match="no frames"):
        LeRobotWriter(tmp_path / "d", 10, FEATS).save_episode(task="t")
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "x.txt").write_text("x")
    with pytest.raises(CaliperError, match="not an empty dataset root"):
        LeRobotWriter(tmp_path / "e", 10, FEATS)


def test_append_on_reopen(tmp_path):
    root = tmp_path / "ds"
    first = _write(root, lengths=(4, 6))
    with LeRobotWriter(root) as w:
        for frame in _frames(9, 3):
            w.add_frame(frame)
        assert w.save_episode(task="task 2") == 2
    r = LeRobotReader(root)
    assert (r.num_episodes, r.num_frames, r.tasks) == (3, 13, ["task 0", "task 1", "task 2"])
    np.testing.assert_array_equal(r.episode(2)["index"], np.arange(10, 13))
    np.testing.assert_array_equal(r.episode(0)["action"], np.stack([f["action"] for f in first[0]]))
    assert (r.episodes[2]["data/chunk_index"], r.episodes[2]["data/file_index"]) == (0, 1)
    assert r.stats["action"]["count"].tolist() == [13]
    with pytest.raises(CaliperError, match="fps is 15"):
        LeRobotWriter(root, fps=30)


def test_png_codec_round_trip():
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (7, 9, 3), dtype=np.uint8)
    data = encode_png(img)
    assert data == encode_png(img)
    np.testing.assert_array_equal(decode_png(data), img)
    with pytest.raises(CaliperError):
        decode_png(data[:40])


def test_importing_dataset_code_does_not_import_jax():
    code = (
        "import sys, caliper_jax.dataset, caliper_jax.cli.data, doctors.dataset; "
        "assert 'jax' not in sys.modules, 'jax imported'; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="caliper")
    data_cli.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_cli_handlers(tmp_path, capsys):
    root = tmp_path / "ds"
    write_synthetic(root, episodes=4, length=40)
    args = _parse(["data", "info", str(root), "--json"])
    assert args.func(args) == 0
    assert json.loads(capsys.readouterr().out)["episodes"] == 4
    args = _parse(["data", "doctor", str(root), "--json"])
    assert args.func(args) == 0
    assert json.loads(capsys.readouterr().out)["clean"] is True
    args = _parse(["data", "doctor", str(root), "--markdown"])
    args.func(args)
    assert "## Dataset doctor" in capsys.readouterr().out
    for argv in (
        ["tag", str(root), "--episode", "1", "--add", "good,retry"],
        ["split", str(root), "--episode", "0", "--frame", "10"],
        ["merge", str(root), "--first", "0", "--second", "1"],
        ["delete", str(root), "--episodes", "3"],
        ["recover", str(root)],
    ):
        args = _parse(["data", *argv])
        assert args.func(args) == 0
    capsys.readouterr()
    args = _parse(["data", "tag", str(root), "--json"])
    args.func(args)
    assert json.loads(capsys.readouterr().out) == {"tags": {"1": ["good", "retry"]}}
    assert LeRobotReader(root).num_episodes == 3


def test_synthetic_episode_is_deterministic():
    a, b = episode(3, 1, 20, 30, image=(4, 4)), episode(3, 1, 20, 30, image=(4, 4))
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert set(features(image=(4, 4))) == set(a)

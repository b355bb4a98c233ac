"""Dataset doctor: a healthy dataset is clean; each planted defect raises exactly its code."""

from __future__ import annotations

import io
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from caliper_jax import progress
from caliper_jax.dataset import LeRobotWriter
from caliper_jax.dataset.synthetic import TASKS, episode, features, write_synthetic
from caliper_jax.dataset.video import have_pyav
from doctors.dataset import RULES, DatasetNotReady, DoctorOptions, diagnose, guard

FPS, LENGTH = 30, 60
IMAGE = (10, 10)


def build(root, mutate=None, episodes=8, image=None, lengths=None):
    """Synthetic episodes, each passed through ``mutate(ep, arrays)`` before writing."""
    with LeRobotWriter(root, FPS, features(6, image)) as w:
        for ep in range(episodes):
            n = lengths[ep] if lengths else LENGTH
            arrays = episode(0, ep, n, FPS, 6, image)
            if mutate:
                mutate(ep, arrays)
            w.add_frames(arrays)
            w.save_episode(task=TASKS[ep % 2])
    return root


def rewrite_data(root, key, ep, fn):
    """Replace column ``key`` of episode ``ep`` in place (planting what our writer refuses to write)."""
    path = root / "data/chunk-000/file-000.parquet"
    table = pq.read_table(path)
    col = table.column(key).combine_chunks()
    mask = table.column("episode_index").to_numpy() == ep
    if pa.types.is_fixed_size_list(col.type):
        values = col.flatten().to_numpy().reshape(len(col), -1).copy()
        values[mask] = fn(values[mask])
        new = pa.FixedSizeListArray.from_arrays(
            pa.array(values.reshape(-1), col.type.value_type), values.shape[1]
        )
    else:
        values = col.to_numpy().copy()
        values[mask] = fn(values[mask])
        new = pa.array(values, col.type)
    table = table.set_column(table.schema.get_field_index(key), table.schema.field(key), new)
    pq.write_table(table, path)


def edit_json(path, fn):
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data))


def _set(arrays, key, value):
    arrays[key] = value.astype(arrays[key].dtype)


def _contradict(arrays):
    """Episode 0's states (a hair apart, so not a duplicate) with the opposite actions."""
    base = episode(0, 0, LENGTH, FPS)
    _set(arrays, "observation.state", base["observation.state"] + 1e-4)
    _set(arrays, "action", -base["action"])


def _cluster(x):
    s = np.sin(x * 3.0)
    return np.sign(s) * (0.65 + 0.35 * np.abs(s))


PLANTS = {
    "D001": lambda root: build(root, lambda ep, a: a["observation.state"].__setitem__((slice(None), 2), 0.3)),
    "D002": lambda root: edit_json(
        build(root) / "meta/stats.json",
        lambda s: s["action"]["mean"].__setitem__(0, s["action"]["mean"][0] + 0.5),
    ),
    "D003": lambda root: build(
        root,
        lambda ep, a: _set(
            a,
            "action",
            np.concatenate(
                [a["action"][:, :1], np.minimum(a["action"][:, 1:2], -0.6), a["action"][:, 2:]], axis=1
            ),
        ),
    ),
    "D004": lambda root: build(
        root,
        lambda ep, a: _set(
            a,
            "action",
            a["observation.state"] + 1e-3 * np.sin(np.arange(a["action"].size).reshape(a["action"].shape)),
        ),
    ),
    "D005": lambda root: build(
        root, lambda ep, a: a["action"].__setitem__((slice(None), 0), a["action"][:, 0] * 1e-3)
    ),
    "D006": lambda root: build(root, lambda ep, a: _contradict(a) if ep == 1 else None),
    "D007": lambda root: build(
        root,
        lambda ep, a: [
            a[k].__setitem__(
                (slice(None), 0), _cluster(np.arange(len(a[k])) / FPS + 0.1 * (k == "action") + ep)
            )
            for k in ("observation.state", "action")
        ],
    ),
    "D008": lambda root: build(
        root,
        lambda ep, a: [
            a[k].__setitem__(slice(None), a[k][:, :1] * np.linspace(0.5, 1.5, 6) + np.arange(6) * 0.1)
            for k in ("observation.state", "action")
        ],
    ),
    "D009": lambda root: build(root, lengths=[LENGTH] * 7 + [10 * LENGTH]),
    "D010": lambda root: rewrite_data(
        build(root), "timestamp", 2, lambda t: t + (np.arange(len(t)) > 10) * 0.02
    ),
    "D011": lambda root: build(
        root,
        lambda ep, a: (
            [a[k].__setitem__(slice(-8, None), a[k][-9]) for k in ("observation.state", "action")]
            if ep == 2
            else None
        ),
    ),
    "D012": lambda root: build(
        root,
        lambda ep, a: a["observation.images.cam"].__setitem__(slice(None), 0) if ep == 3 else None,
        image=IMAGE,
    ),
    "D013": lambda root: build(
        root,
        lambda ep, a: (
            a["observation.images.cam"].__setitem__(slice(1, None, 2), a["observation.images.cam"][0:-1:2])
            if ep == 1
            else None
        ),
        image=IMAGE,
    ),
    "D014": lambda root: build(
        root,
        lambda ep, a: (
            _set(
                a,
                "observation.images.cam",
                (a["observation.images.cam"] * 0.3 + np.linspace(0, 180, LENGTH)[:, None, None, None]),
            )
            if ep == 2
            else None
        ),
        image=IMAGE,
    ),
    "D015": lambda root: build(root, lambda ep, a: a.update(episode(0, 0, LENGTH, FPS)) if ep == 3 else None),
    "D016": lambda root: rewrite_data(
        build(root), "action", 1, lambda v: np.where(np.arange(v.size).reshape(v.shape) == 13, np.nan, v)
    ),
    "D017": lambda root: build(
        root,
        lambda ep, a: [
            a["observation.state"].__setitem__(
                (slice(None), 0), np.angle(np.exp(1j * (2 * np.arange(LENGTH) / FPS + ep)))
            ),
            a["action"].__setitem__((slice(None), 0), 2 * (np.arange(LENGTH) / FPS + 0.1) + ep),
        ],
    ),
    "D018": lambda root: build(
        root, lambda ep, a: a["action"].__setitem__((slice(None), 3), np.degrees(a["action"][:, 3]))
    ),
    "D019": lambda root: edit_json(
        build(root) / "meta/info.json", lambda i: i.__setitem__("total_frames", i["total_frames"] + 1)
    ),
    "D020": lambda root: build(root),
}
OPTIONS = {"D020": DoctorOptions(policy_window=LENGTH + 10)}


def test_healthy_dataset_has_zero_findings(tmp_path):
    build(tmp_path / "plain")
    assert diagnose(tmp_path / "plain").findings == []
    write_synthetic(tmp_path / "cam", episodes=10, image=IMAGE)
    report = diagnose(tmp_path / "cam")
    assert report.clean, report.text()
    summary = report.summaries["observation.state"]
    assert (
        summary["dim"] == 6 and min(summary["bin_occupancy"]) >= 0.5 and set(summary["units"]) == {"radians"}
    )


@pytest.mark.parametrize("code", sorted(PLANTS))
def test_planted_defect_raises_exactly_its_code(tmp_path, code):
    root = tmp_path / code
    PLANTS[code](root)
    report = diagnose(root, OPTIONS.get(code))
    assert report.codes() == [code], report.text()
    for f in report.findings:
        assert f.severity == (RULES[code][0] if code != "D012" else "Warning")
        assert f.hint and "\n" not in f.message


def test_undecodable_image_is_an_error(tmp_path):
    root = build(tmp_path / "ds", image=IMAGE)
    path = root / "data/chunk-000/file-000.parquet"
    table = pq.read_table(path)
    col = table.column("observation.images.cam").combine_chunks()
    data = col.field("bytes").to_pylist()
    data[70] = data[70][:-20]
    new = pa.StructArray.from_arrays([pa.array(data, pa.binary()), col.field("path")], fields=list(col.type))
    pq.write_table(
        table.set_column(
            table.schema.get_field_index("observation.images.cam"),
            table.schema.field("observation.images.cam"),
            new,
        ),
        path,
    )
    report = diagnose(root)
    assert report.codes() == ["D012"]
    (f,) = report.findings
    assert (f.severity, f.episode, f.frame) == ("Error", 1, 10)


@pytest.mark.skipif(have_pyav(), reason="PyAV is installed here, so video features are checked, not skipped")
def test_video_without_pyav_is_disclosed(tmp_path):
    feats = {"action": {"dtype": "float32", "shape": [2]}, "cam": {"dtype": "video", "shape": [4, 4, 3]}}
    mp4 = tmp_path / "ep.mp4"
    mp4.write_bytes(b"\x00\x00\x00\x18ftypisom")
    with LeRobotWriter(tmp_path / "v", 10, feats) as w:
        t = np.linspace(0, 20, 200)
        action = np.stack([np.sin(t), np.cos(1.3 * t)], axis=1)
        w.add_frames({"action": action, "cam": np.zeros((200, 4, 4, 3), np.uint8)})
        w.save_episode(task="t", videos={"cam": mp4})
    assert diagnose(tmp_path / "v").codes() == ["D021"]


def test_report_is_deterministic_and_sorted(tmp_path):
    root = build(tmp_path / "ds", lambda ep, a: _contradict(a) if ep == 1 else None)
    rewrite_data(root, "timestamp", 0, lambda t: t * 1.5)
    first, second = diagnose(root).to_dict(), diagnose(root).to_dict()
    assert json.dumps(first) == json.dumps(second)
    severities = [f["severity"] for f in first["findings"]]
    assert severities == sorted(severities, key=["Error", "Warning", "Info"].index)
    d006 = [f for f in first["findings"] if f["code"] == "D006"]
    assert 1 <= len(d006) <= 3 and all(f["episode"] is not None for f in d006)


def test_guard_stops_training_on_errors(tmp_path):
    with guard(build(tmp_path / "ok")) as report:
        assert report.clean
    bad = tmp_path / "bad"
    PLANTS["D016"](bad)
    with pytest.raises(DatasetNotReady, match="D016") as err:
        with guard(bad):
            pytest.fail("the body must not run")
    assert err.value.report.codes() == ["D016"]
    with guard(bad, allow=["D016"]):
        pass


def test_markdown_report(tmp_path):
    root = tmp_path / "ds"
    PLANTS["D011"](root)
    md = diagnose(root).markdown()
    assert (
        md.startswith("## Dataset doctor")
        and "| D011 | Warning | 2 |" in md
        and "| observation.state | 6 |" in md
    )


def test_progress_bar_only_when_asked(monkeypatch):
    monkeypatch.delenv(progress.ENV, raising=False)
    out = io.StringIO()
    bar = progress.bar(4, "doctor", enabled=True, stream=out)
    for _ in range(4):
        bar.update()
    bar.close()
    assert "100%" in out.getvalue() and "4/4" in out.getvalue()
    quiet = io.StringIO()
    progress.bar(4, "doctor", stream=quiet).update()  # StringIO is not a TTY
    assert quiet.getvalue() == ""
    monkeypatch.setenv(progress.ENV, "1")  # forced on (what the CLI tests use)
    forced = io.StringIO()
    with progress.bar(4, "doctor", stream=forced) as bar:
        bar.update(4)
    assert "4/4" in forced.getvalue()

"""The guards of issue 35, in process (fast): path containment, nesting depth, declared .npz sizes,
library noise counted by kind, outputs probed before work, never a checkpoint of NaN weights.
The command-line behaviour of each is in the hostile corpus (tests/hostile/cases_verbs.py)."""
from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

from caliper_jax import limits, notices
from caliper_jax.errors import CaliperError

# ---- paths from files stay inside their folder ------------------------------------------------------

def test_inside_refuses_every_escape(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "away").mkdir()
    os.symlink(tmp_path / "away", root / "link")
    assert limits.inside(root, "a/b", "x") == (root / "a" / "b").resolve()
    assert limits.inside(root, "a/../b", "x") == (root / "b").resolve()
    assert limits.inside(root, str(root / "c"), "x") == (root / "c").resolve()
    for bad in ("../x", "a/../../x", "/etc/passwd", "link/x", "link", "a\0b"):
        with pytest.raises(limits.PathEscapeError, match="x: "):
            limits.inside(root, bad, "x")


def test_data_recover_never_touches_a_file_outside(tmp_path):
    """Planted bug caught: _apply following the log's paths blindly (deleted ../victim on main)."""
    from caliper_jax.dataset.atomic import TXN_NAME, recover
    from caliper_jax.dataset.synthetic import write_synthetic

    write_synthetic(tmp_path / "ds", episodes=2, length=8, dim=2)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (tmp_path / "ds" / TXN_NAME).write_text(json.dumps({"renames": [["x", "../moved"]], "deletes": []}))
    with pytest.raises(limits.PathEscapeError, match="outside"):
        recover(tmp_path / "ds")
    (tmp_path / "ds" / TXN_NAME).write_text(json.dumps({"renames": [], "deletes": ["../victim.txt"]}))
    with pytest.raises(limits.PathEscapeError):
        recover(tmp_path / "ds")
    assert victim.read_text() == "keep" and not (tmp_path / "moved").exists()


def test_graph_record_cannot_write_outside_out(tmp_path):
    """Planted bug caught: RunContext.resolve joining an absolute or '..' path (wrote ../../../x)."""
    from caliper_jax.graph import load_graph, validate
    from caliper_jax.graph.nodes import RunContext

    ctx = RunContext(tmp_path / "out")
    (tmp_path / "out").mkdir()
    os.symlink(tmp_path, tmp_path / "out" / "up")
    for bad in ("../x", "/tmp/x", "up/x"):
        with pytest.raises(limits.PathEscapeError):
            ctx.resolve(bad)
    doc = json.loads((Path(__file__).parent.parent / "caliper_jax/graph/examples/"
                      "record_doctor.caliper-graph.json").read_text())
    for node in doc["nodes"]:
        if node["type"] == "Record":
            node["params"]["out"] = "../../../x"
    codes = [f["code"] for f in validate(load_graph(doc))]
    assert codes == ["path_escape"]


# ---- nesting depth ------------------------------------------------------------------------------------

def test_json_depth_counts_brackets_outside_strings_only():
    assert limits.json_depth('{"a": "[[[[{{{{", "b": [1, [2, {"c": []}]]}') == 5
    assert limits.json_depth('"\\"[["') == 0
    assert limits.json_depth("[" * 100_000 + "]" * 100_000) == 100_000


def test_depth_is_refused_before_parsing(monkeypatch):
    """Planted bug caught: json.loads first (RecursionError, exit 3, on 100k levels)."""
    with pytest.raises(limits.BudgetError, match="100,000 levels deep, over the limit of 64"):
        limits.load_json("[" * 100_000 + "]" * 100_000, "deep.json")
    assert limits.load_json("[[[1]]]", "ok.json") == [[[1]]]
    monkeypatch.setenv("CALIPER_MAX_DEPTH", "2")
    with pytest.raises(limits.BudgetError, match="CALIPER_MAX_DEPTH"):
        limits.load_json("[[[1]]]", "x")


def test_task_file_depth_bounded(tmp_path):
    from tasks.schema import load_task

    path = tmp_path / "deep.caliper-task.json"
    path.write_text('{"name": ' + "[" * 5000 + "]" * 5000 + "}")
    with pytest.raises(CaliperError, match="levels deep"):
        load_task(path)


# ---- .npz by declared shapes ----------------------------------------------------------------------

def _bomb(path, shape):
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": shape})
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("qpos.npy", "w", force_zip64=True) as f:
            f.write(header.getvalue() + b"\0" * 4096)


def test_npz_refused_by_declared_shape_before_decompression(tmp_path):
    """Planted bug caught: np.load first (7 GB decompressed before any check)."""
    from caliper_jax.io.npz import declared_arrays, load_npz

    _bomb(tmp_path / "bomb.npz", (1000, 900_001, 1))
    with zipfile.ZipFile(tmp_path / "bomb.npz") as z:
        assert declared_arrays(z, "x")["qpos"][0] == (1000, 900_001, 1)
    with pytest.raises(limits.BudgetError, match="6,866 MiB"):
        load_npz(tmp_path / "bomb.npz")
    np.savez(tmp_path / "ok.npz", qpos=np.ones((2, 3)), other=np.zeros(4))
    got = load_npz(tmp_path / "ok.npz", keys=("qpos",))
    assert list(got) == ["qpos"] and got["qpos"].shape == (2, 3)
    np.savez(tmp_path / "obj.npz", qpos=np.array([{"a": 1}], dtype=object))
    with pytest.raises(CaliperError, match="not a numeric array"):
        load_npz(tmp_path / "obj.npz")


# ---- library noise -------------------------------------------------------------------------------------

def test_library_noise_is_one_line_per_kind(capfd):
    notices.clear()
    out = io.StringIO()
    stream = notices.FilteredStream(out)
    print("Failed to import warp:", "No module named 'warp'", file=stream)
    print("Failed to import mujoco_warp:", "No module named 'warp'", file=stream)
    print("our own line", file=stream)
    assert out.getvalue() == "our own line\n"
    with notices.native_stderr():
        for _ in range(25):
            os.write(2, b"Svt[info]: -------------------------------------------\n")
        os.write(2, b"something else\n")
    assert capfd.readouterr().err == "something else\n"
    kind = notices.mujoco_kind("Nan, Inf or huge value in QACC at DOF 3. The simulation is unstable. "
                               "Time = 0.1200.")
    assert kind == "MuJoCo: Nan, Inf or huge value in QACC. The simulation is unstable."
    lines = notices.drain()
    assert len(lines) == 2 and lines[0].endswith("(2 times)") and lines[1].endswith("(25 times)")
    assert notices.drain() == []


def test_mujoco_warnings_are_counted_not_printed(tmp_path, capfd, monkeypatch):
    import mujoco

    monkeypatch.chdir(tmp_path)
    saved = mujoco.get_mju_user_warning()
    notices.clear()
    try:
        assert notices.install_mujoco()
        m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><body><joint type="hinge"/><geom size="0.1"/>'
                                           "</body></worldbody></mujoco>")
        d = mujoco.MjData(m)
        d.qvel[:] = 1e300
        mujoco.mj_step(m, d)
    finally:
        mujoco.set_mju_user_warning(saved)
    assert "WARNING" not in capfd.readouterr().err and not (tmp_path / "MUJOCO_LOG.TXT").exists()
    assert any("unstable" in line for line in notices.drain())


# ---- outputs before work, never NaN weights ---------------------------------------------------------------

def test_outputs_probed_before_work(tmp_path):
    from caliper_jax.cli.common import output_dir, output_file

    assert output_dir(tmp_path / "a" / "b", "--out") == tmp_path / "a" / "b"
    assert not (tmp_path / "a").exists()             # probing creates nothing
    assert output_file(tmp_path / "x.png", "--png") == tmp_path / "x.png"
    for bad in ("/proc/x/y", "/proc/x"):
        with pytest.raises(CaliperError, match="--out: cannot write"):
            output_dir(bad, "--out")
    with pytest.raises(CaliperError, match="--plot: cannot write"):
        output_file("/proc/x.png", "--plot")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    with pytest.raises(CaliperError, match="not an empty directory"):
        output_dir(tmp_path / "full", "--out")


def test_training_that_diverges_saves_nothing():
    """Planted bug caught: the guard after the save (a checkpoint of NaN weights)."""
    from learn.train import _require_finite

    _require_finite({"step": 3, "loss": 0.5, "lr": 1e-3}, {"w": np.ones(3)}, 3, check_weights=True)
    with pytest.raises(CaliperError, match="diverged by step 3: loss"):
        _require_finite({"loss": float("nan"), "lr": 1e-3}, {"w": np.ones(3)}, 3, check_weights=False)
    with pytest.raises(CaliperError, match="weights not finite"):
        _require_finite({"loss": 0.5}, {"w": np.array([1.0, np.inf])}, 3, check_weights=True)


def test_budgets_of_a_policy_config():
    """Planted bug caught: chunk_size only type-checked (1e6 allocated gigabytes)."""
    from caliper_jax.cli.learn import _check_policy_sizes
    from learn.config import ACTConfig, BCConfig, TrainConfig

    _check_policy_sizes(ACTConfig(), TrainConfig())
    with pytest.raises(limits.BudgetError, match="chunk_size"):
        _check_policy_sizes(ACTConfig(chunk_size=1_000_000, n_action_steps=1), TrainConfig())
    with pytest.raises(limits.BudgetError, match="hidden"):
        _check_policy_sizes(BCConfig(hidden=(10**8,)), TrainConfig())
    with pytest.raises(limits.BudgetError, match="activations"):
        _check_policy_sizes(ACTConfig(chunk_size=60_000, n_action_steps=1), TrainConfig(batch_size=60_000))

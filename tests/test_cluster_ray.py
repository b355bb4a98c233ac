"""learn.cluster on a loopback Ray head (started here on 127.0.0.1 with 2 CPUs, one for the module,
shut down at its end): a sweep and an evaluation split over Ray equal the one-process runs byte for
byte, a SIGKILLed worker is retried to the same result, a cell failing twice is reported by name,
the CLI's --ray joins the head by address; and (no head) the hostile inputs: an address where no
head answers, a malformed address, Ray missing."""
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from caliper_jax.errors import CaliperError
from learn.evaluate import evaluate, sweep
from tasks.schema import find_task, load_task

ray = pytest.importorskip("ray")
from learn.cluster import CellsFailed, connect, ray_evaluate, ray_record_demos, ray_sweep  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def dumps(result) -> str:
    return json.dumps(result.to_dict(), sort_keys=True)


# ---- hostile input (before the head starts) ---------------------------------------------------
def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_and_malformed_addresses_are_one_line_errors(monkeypatch, tmp_path):
    if ray.is_initialized():
        pytest.skip("needs no Ray connection open in this process")
    port = _closed_port()
    t0 = time.perf_counter()
    with pytest.raises(CaliperError, match=rf"--ray 127.0.0.1:{port}: no Ray head answers there"), \
            connect(f"127.0.0.1:{port}"):
        pass
    assert time.perf_counter() - t0 < 10
    with pytest.raises(CaliperError, match="expected 'auto' or HOST:PORT"), connect("nohost"):
        pass
    assert not ray.is_initialized()
    from caliper_jax import cli

    code = cli.main(["learn", "sweep", "scripted", "--task", "lift-cube", "--ray", f"127.0.0.1:{port}",
                     "--json"])
    assert code == 2
    out = tmp_path / "demos"
    assert cli.main(["task", "demo", "lift-cube", "--out", str(out), "--ray", f"127.0.0.1:{port}",
                     "--json"]) == 2
    assert not out.exists() or not any(out.iterdir())          # nothing written
    assert cli.main(["task", "demo", "lift-cube", "--out", str(out), "--ray", "auto", "--engine", "mjx"]) == 2


def test_missing_ray_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(CaliperError, match=r'--ray needs Ray, which is not installed: pip install '
                                           r'"caliper-jax\[cluster\]"'), connect("auto"):
        pass


# ---- on the loopback head ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def short():
    """lift-cube with a 0.5 s horizon: short episodes, the randomisation still drawn."""
    return dataclasses.replace(load_task(find_task("lift-cube")), horizon_s=0.5)


@pytest.fixture(scope="module")
def head():
    if ray.is_initialized():
        pytest.skip("a Ray connection is already open in this process")
    ray.init(num_cpus=2, _node_ip_address="127.0.0.1", include_dashboard=False, log_to_driver=False,
             logging_level="ERROR")
    # the policies below live in this test module, which the workers cannot import: ship them by value
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
        ray.shutdown()


def hold(obs):
    """Command the measured joint positions (q: the first nq = 3 entries of the observation)."""
    return obs[:, :3]


def droop(obs):
    return obs[:, :3] - 0.05


class KillOnce:
    """``hold``, but the first call on any worker SIGKILLs that worker (the marker file records it)."""

    def __init__(self, marker: str):
        self.marker = marker

    def __call__(self, obs):
        if not os.path.exists(self.marker):
            Path(self.marker).write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return hold(obs)


class KillAlways:
    def __call__(self, obs):
        os.kill(os.getpid(), signal.SIGKILL)


def test_sweep_over_ray_equals_the_one_process_sweep(head, short):
    pol = {"hold": hold, "droop": droop}
    seen = []
    levels = {"default": "default"}
    got = ray_sweep(pol, short, randomization_levels=levels, seeds=[0, 7], episodes=3, num_envs=2,
                    progress=lambda n, total: seen.append((n, total)))
    want = sweep(pol, short, randomization_levels=levels, seeds=[0, 7], episodes=3, num_envs=2)
    assert [(r.policy, r.level, r.seed) for r in got.runs] == [(r.policy, r.level, r.seed) for r in want.runs]
    assert dumps(got) == dumps(want)
    assert seen == [(i, 4) for i in range(1, 5)]
    # the randomised cells really differ by seed (a dropped seed would make them equal)
    by = {(r.policy, r.level, r.seed): r.result.to_dict()["episodes"] for r in got.runs}
    assert by[("hold", "default", 0)] != by[("hold", "default", 7)]


def test_evaluation_split_in_blocks_of_worlds_equals_evaluate(head, short):
    got = ray_evaluate(droop, short, episodes=7, num_envs=4, seed=5, blocks=2)
    want = evaluate(droop, short, episodes=7, num_envs=4, seed=5)
    assert got.timing["blocks"] == 2
    order = [(w, e) for e in (0, 1) for w in range(4)][:7]      # (world episode, world) order
    assert [(e.world, e.world_episode) for e in got.episodes] == order
    assert dumps(got) == dumps(want)


def _seeing_checkpoint(folder: Path) -> Path:
    """An untrained BC policy that sees lift-cube's front and wrist cameras at 32x32, saved."""
    import numpy as np

    from learn.checkpoint import save_checkpoint
    from learn.config import BCConfig, TrainConfig
    from learn.features import CameraSpec, FeatureLayout
    from learn.normalize import Normalizer
    from learn.policies import build_policy

    cams = tuple(CameraSpec(c, 32, 32) for c in ("front", "wrist"))
    features = FeatureLayout(("observation.state",), (3,), "action", 3, 50, "proprio+images", cams)
    cfg = BCConfig(hidden=(16,), vision_width=4)
    norm = Normalizer(np.zeros(3, np.float32), np.ones(3, np.float32), np.zeros(3, np.float32),
                      np.ones(3, np.float32), np.full(3, 0.5, np.float32), np.full(3, 0.25, np.float32))
    model = build_policy(cfg, 3, 3, image_shape=features.image_shape)
    return save_checkpoint(folder, model=model, config=cfg, train_config=TrainConfig(), features=features,
                           normalizer=norm, fingerprint=None)


def test_evaluation_of_a_policy_that_sees_renders_its_cameras_in_every_block(head, short, tmp_path):
    """Planted bugs caught: the blocks' environments not rendering the policy's cameras (the deployer
    raises in every worker: CellsFailed), another camera configuration shipped to the workers instead
    of refused in one line on the driver."""
    from learn.checkpoint import load_checkpoint

    path = str(_seeing_checkpoint(tmp_path / "seeing"))
    got = ray_evaluate(path, short, episodes=3, num_envs=2, seed=5, blocks=2)
    want = evaluate(load_checkpoint(path).policy, short, episodes=3, num_envs=2, seed=5)
    assert got.timing["blocks"] == 2 and got.n == want.n == 3
    # the same episodes with the same outcomes; returns to float rounding only: XLA's CPU convolutions
    # are not bit-identical across batch sizes (~2e-8 on the actions), and a block steps 1 world, not 2
    for a, b in zip(got.episodes, want.episodes, strict=True):
        ident = [(e.world, e.world_episode, e.success, e.steps) for e in (a, b)]
        assert ident[0] == ident[1]
        assert a.ret == pytest.approx(b.ret, rel=1e-6)
    with pytest.raises(CaliperError, match="camera configuration differs.*front is 32x32 vs 48x48") as err:
        ray_evaluate(path, short, episodes=2, num_envs=2, cameras=["front:48x48", "wrist:48x48"])
    assert "\n" not in str(err.value)


def _tree_bytes(root: Path) -> dict:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_demos_recorded_in_blocks_of_worlds_equal_the_one_process_dataset(head, tmp_path):
    """`task demo --ray`: 5 scripted lift-cube episodes over 3 worlds in 2 Ray blocks -> the dataset
    of record_demos with the same seed, every file byte for byte (the merge is in canonical order:
    a block's episodes written in another order, or a world replayed from its local index's draws,
    would differ)."""
    from tasks.demo import record_demos

    got = ray_record_demos("lift-cube", 5, tmp_path / "ray", seed=4, num_envs=3, blocks=2)
    want = record_demos("lift-cube", 5, tmp_path / "one", seed=4, num_envs=3)
    assert (got.episodes, got.successes, got.frames) == (want.episodes, want.successes, want.frames)
    assert got.successes == 5
    a, b = _tree_bytes(got.root), _tree_bytes(want.root)
    assert sorted(a) == sorted(b) and [k for k in a if a[k] != b[k]] == []
    with pytest.raises(CaliperError, match="not an empty folder"):
        ray_record_demos("lift-cube", 1, tmp_path / "ray", num_envs=1)


def test_a_sigkilled_worker_is_retried_to_the_same_result(head, short, tmp_path):
    marker = tmp_path / "killed"
    got = ray_sweep({"hold": KillOnce(str(marker))}, short, randomization_levels={"default": "default"},
                    seeds=[3], episodes=2, num_envs=2)
    assert marker.exists()                                     # a worker really died ...
    pid = int(marker.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    want = sweep({"hold": hold}, short, randomization_levels={"default": "default"}, seeds=[3], episodes=2,
                 num_envs=2)
    assert dumps(got) == dumps(want)                           # ... and the retry gave the same run


def test_a_cell_failing_twice_is_reported_not_dropped(head, short):
    with pytest.raises(CellsFailed, match=r"1 Ray cell\(s\) failed 2 times: policy=doomed task=lift-cube "
                                          r"level=none seed=0") as info:
        ray_sweep({"doomed": KillAlways(), "hold": hold}, short, randomization_levels={"none": None},
                  seeds=[0], episodes=1, num_envs=1)
    assert "\n" not in str(info.value)
    assert [label for label, _ in info.value.failures] == ["policy=doomed task=lift-cube level=none seed=0"]


@pytest.mark.slow
def test_cli_sweep_joins_the_head_by_address(head):
    """`caliper learn sweep scripted --task lift-cube --ray HOST:PORT`: another driver process joins
    the head; its JSON equals the in-process sweep's."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "caliper_jax.cli", "learn", "sweep", "scripted", "--task", "lift-cube",
           "--levels", "none", "--episodes", "1", "--ray", head, "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout)
    assert report.pop("table")["rows"][0]["policy"] == "scripted"      # the protocol table (CLI only)
    want = sweep({"scripted": "scripted"}, "lift-cube", randomization_levels={"none": "none"}, episodes=1)
    assert json.dumps(report, sort_keys=True) == dumps(want)

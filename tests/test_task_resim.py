"""Re-simulating recorded demonstrations from their randomisation record (tasks.resim), bit for bit.

A tiny dataset is recorded once per module: lift-cube cut to a 0.5 s horizon (25 ticks), 3
episodes on 2 worlds, driven by an open-loop grasp-and-lift policy instead of the scripted expert
(whose planning takes tens of seconds; the record path is the same). Every episode then replays
in a 1-world env from its stored draws and recorded actions."""
from __future__ import annotations

import dataclasses
import json
import shutil

import numpy as np
import pytest

from caliper_jax.cli import main
from caliper_jax.errors import CaliperError
from tasks.demo import DEMOS_PATH, record_demos
from tasks.env import VecEnv, check_draws
from tasks.env_spec import EnvRandomization
from tasks.resim import Replayer, compare_columns, resimulate, resimulate_all
from tasks.scene import build_scene
from tasks.schema import find_task, load_task

W = 2


class LiftPolicy:
    """Close the gripper from tick 3, swing the arm up from tick 8 (per world, open loop)."""

    def __init__(self, env):
        self.q0, self.L = np.asarray(env.task_scene.q0, np.float64), env.layout

    def act(self, obs, info):
        ticks = np.asarray(info["episode"]["tick"])
        a = np.tile(self.q0, (len(ticks), 1))
        a[:, self.L.gripper_q] = np.where(ticks >= 3, self.L.gripper_closed, self.L.gripper_open)
        th = np.clip((ticks - 8) * 0.04, 0.0, 1.0)
        a[:, 0], a[:, 1] = th, -th
        return a


@pytest.fixture(scope="module")
def short_lift():
    """The built scene (built once: the envs of one scene share their compiled functions)."""
    return build_scene(dataclasses.replace(load_task(find_task("lift-cube")), horizon_s=0.5))


@pytest.fixture(scope="module")
def dataset(short_lift, tmp_path_factory):
    root = tmp_path_factory.mktemp("resim") / "ds"
    record_demos(short_lift, 3, root, seed=3, num_envs=W, policy=LiftPolicy)
    return root


def copy_with(dataset, tmp_path, edit):
    """A copy of the dataset whose sidecar went through ``edit(dict)``."""
    root = tmp_path / "ds"
    shutil.copytree(dataset, root)
    side = json.loads((root / DEMOS_PATH).read_text())
    edit(side)
    (root / DEMOS_PATH).write_text(json.dumps(side))
    return root


def test_the_record_holds_what_a_replay_needs(dataset):
    side = json.loads((dataset / DEMOS_PATH).read_text())
    assert side["format"] == 2 and side["precision"] == "float32" and side["num_envs"] == W
    assert side["task_spec"]["horizonS"] == 0.5 and side["task_spec"]["name"] == "lift-cube"
    spec = side["randomization_spec"]
    assert spec["prop_mass"] == [0.8, 1.2] and spec["gravity"] is None
    assert set(side["versions"]) == {"mujoco", "jax"}
    assert [(e["world"], e["world_episode"]) for e in side["episodes"]] == [(0, 0), (1, 0), (0, 1)]


def test_every_episode_replays_bit_for_bit(dataset):
    results = resimulate_all(dataset)
    assert len(results) == 3
    for r in results:
        assert r.identical, r.to_dict()
        assert r.state.dtype == np.float32 and r.state.shape == (r.length, 3)
        assert r.env_state.shape == (r.length, 7)
        assert all(c.max_abs_diff == 0.0 and c.first_diff_frame is None for c in r.compare.values())
        assert r.ended and r.success == r.recorded_success and not r.notes
    # the policy moves the cube: a replay that ignored the draws or the actions could not match
    assert np.ptp(results[0].env_state[:, 2]) > 1e-3


def test_a_tampered_draw_breaks_the_comparison(dataset, tmp_path):
    def nudge(side):
        e = side["episodes"][1]["randomization"]
        e["prop_xy"][0][0] = float(np.nextafter(np.float32(e["prop_xy"][0][0]), np.float32(1)))

    r = resimulate(copy_with(dataset, tmp_path, nudge), 1)
    assert not r.identical
    c = r.compare["observation.environment_state"]
    assert c.first_diff_frame == 0 and 0 < c.max_abs_diff < 1e-4


def test_bad_sidecar_fields_are_named(dataset, tmp_path):
    cases = [
        (lambda s: s["episodes"][0]["randomization"].pop("gain"), "missing field 'gain'"),
        (lambda s: s["episodes"][0]["randomization"].update(wind=[1.0]), "draws: unknown field 'wind'"),
        (lambda s: s["episodes"][0]["randomization"].update(damping=[1.0, 1.0]), "draws.damping: expected"),
        (lambda s: s["episodes"][0]["randomization"].update(prop_mass=[5.0]), "draws.prop_mass: value 5"),
        (lambda s: s["episodes"][0].update(length="x"), "episodes[0].length"),
        (lambda s: s.update(format=9), "format: unknown"),
        (lambda s: s["task_spec"]["scene"].update(grund=0.0), "task_spec"),
    ]
    for i, (edit, text) in enumerate(cases):
        root = copy_with(dataset, tmp_path / str(i), edit)
        with pytest.raises(CaliperError, match="caliper_demos.json") as exc:
            resimulate(root, 0)
        assert text in str(exc.value), (text, str(exc.value))


def test_an_older_record_without_the_new_fields_still_replays(dataset, short_lift, tmp_path):
    def old(side):
        for k in ("format", "task_spec", "randomization_spec", "precision", "versions"):
            side.pop(k)

    root = copy_with(dataset, tmp_path, old)
    with Replayer(root, task=short_lift.task) as rep:
        assert rep.spec.prop_xy is not None and rep.spec.gravity is None
        assert rep.episode(2).identical


def test_explicit_draws_reset_equals_the_seeded_reset(short_lift):
    with VecEnv(short_lift, W, seed=5) as a, VecEnv(short_lift, W, seed=11) as b:
        obs_a, info_a = a.reset()
        draws = {k: np.asarray(v).tolist() for k, v in info_a["randomization"].items()}   # JSON round trip
        obs_b, info_b = b.reset(options={"draws": draws})
        assert obs_a.tobytes() == obs_b.tobytes()
        for k, v in info_a["randomization"].items():
            assert v.dtype == np.float32 and info_b["randomization"][k].tobytes() == v.tobytes(), k
        act = LiftPolicy(a)
        for _ in range(12):
            obs_a = a.step(act.act(obs_a, info_a))[0]
            obs_b = b.step(act.act(obs_b, info_b))[0]
        assert obs_a.tobytes() == obs_b.tobytes()
        for name, m in (("body_mass", a.world_model(1)), ("dof_damping", a.world_model(1))):
            assert np.array_equal(getattr(m, name), getattr(b.world_model(1), name)), name


def test_check_draws_names_the_field():
    spec = EnvRandomization(prop_xy=0.02, prop_yaw=None, prop_mass=None, prop_friction=None, damping=None,
                            gain=None, gravity=(0.9, 1.1))
    shapes = {"prop_xy": (1, 2), "gravity": ()}
    good = {"prop_xy": np.zeros((1, 1, 2)), "gravity": np.ones(1)}
    assert check_draws(good, spec, shapes, 1)["gravity"].dtype == np.float32
    cases = (({**good, "prop_xy": [[[np.nan, 0.0]]]}, "draws.prop_xy: non-finite value at (0, 0, 0)"),
             ({**good, "gravity": np.full(1, 1.2)}, "draws.gravity: value 1.2"),
             ({**good, "prop_yaw": np.zeros((1, 1))}, "draws.prop_yaw: this env does not randomise"),
             ({**good, "gravity": np.array(["a"])}, "draws.gravity: expected a numeric array"),
             ({"prop_xy": good["prop_xy"]}, "missing field 'gravity'"),
             ([1], "draws: expected a dict"))
    for draws, text in cases:
        with pytest.raises(CaliperError) as exc:
            check_draws(draws, spec, shapes, 1)
        assert text in str(exc.value), str(exc.value)


def test_compare_columns_reports_the_first_differing_frame():
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    assert compare_columns(a, a.copy()).identical
    b = a.copy()
    b[2, 1] = np.nextafter(b[2, 1], np.float32(100))
    c = compare_columns(b, a)
    assert not c.identical and c.first_diff_frame == 2 and 0 < c.max_abs_diff < 1e-5
    short = compare_columns(a[:3], a)
    assert not short.identical and short.first_diff_frame == 3 and short.max_abs_diff == 0.0


def test_cli_resim(dataset, tmp_path, capsys):
    assert main(["task", "resim", str(dataset), "--all", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["identical"] and [e["identical"] for e in report["episodes"]] == [True] * 3

    def nudge(side):
        side["episodes"][0]["randomization"]["gain"][0] = 1.05

    bad = copy_with(dataset, tmp_path, nudge)
    assert main(["task", "resim", str(bad), "--episode", "0"]) == 1
    assert "DIFFERS" in capsys.readouterr().out
    assert main(["task", "resim", str(bad), "--episode", "7"]) == 2
    assert "episode 7 out of range" in capsys.readouterr().err


# ---- heavier checks (-m slow); test_every_episode_replays_bit_for_bit covers the MuJoCo engine ------

@pytest.mark.slow
def test_a_float64_recording_replays_bit_for_bit_and_needs_float64(short_lift, tmp_path):
    # ~25 s on 2 cores: the float64 scene and its compiles
    import jax

    with jax.enable_x64(True):
        task = short_lift.task
        record_demos(task, 2, tmp_path / "ds", seed=1, num_envs=2, policy=LiftPolicy)
    with Replayer(tmp_path / "ds") as rep:
        assert rep.side["precision"] == "float64" and rep.episode(1).identical
        rep.x64 = False
        rep.close()
        assert not rep.episode(1).identical


@pytest.mark.slow
def test_a_recording_on_many_worlds_replays_on_one(short_lift, tmp_path):
    # ~15 s: 72 worlds (the gate's gravity check takes the lane kernels from 64 worlds)
    record_demos(short_lift, 144, tmp_path / "ds", seed=2, num_envs=72, policy=LiftPolicy)
    with Replayer(tmp_path / "ds", nthread=1) as rep:
        for i in (0, 71, 72, 143):
            assert rep.episode(i).identical, i


@pytest.mark.slow
def test_mjx_replays_bit_for_bit_at_the_recorded_world_count(short_lift, tmp_path):
    # ~2.5 min on 2 cores: MJX compiles (recording, replay at 2 worlds, replay at 1 world)
    record_demos(short_lift, 4, tmp_path / "ds", seed=4, num_envs=2, engine="mjx", policy=LiftPolicy)
    results = resimulate_all(tmp_path / "ds", engine="mjx")
    assert [r.identical for r in results] == [True] * 4          # episodes 2, 3 started by the auto-reset
    one = resimulate(tmp_path / "ds", 0, engine="mjx", num_envs=1)
    c = one.compare["observation.environment_state"]
    assert not one.identical and c.first_diff_frame == 1         # another compiled program: last bits
    assert 0 < np.abs(one.env_state[1] - results[0].env_state[1]).max() < 1e-4

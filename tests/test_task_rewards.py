"""Dense reward terms (tasks.rewards, schema v2 "reward" block): the loader's one-line errors, each
kind's value against a hand computation, the NumPy and JAX twins agreeing, the CPU engine's reward
= success weight * success + sum of terms with info["reward_terms"], and a NaN term raising by name."""
from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from caliper_jax.errors import CaliperError
from tasks import rewards as R
from tasks.schema import find_task, load_task, parse_task, task_to_dict

ROOT = Path(__file__).resolve().parent.parent
BASE = {
    "version": 2, "name": "t", "robot": str(ROOT / "robots" / "gripper_arm.urdf"), "q0": [0.0, 0.0, 0.02],
    "scene": {"props": [{"name": "cube", "kind": "box", "halfExtents": [0.05, 0.05, 0.05],
                         "pos": [0, 0, 0.05]}],
              "zones": [{"name": "bin", "center": [-0.15, 0, 0.05], "half": [0.07, 0.07, 0.06]}]},
    "gripper": {"joint": "gripper", "closed": "lo"},
    "success": {"kind": "lifted", "prop": "cube", "height": 0.08},
    "reward": {"success": 10.0, "terms": [
        {"name": "reach", "kind": "reach", "weight": 1.0, "prop": "cube", "scale": 0.05},
        {"name": "grasp", "kind": "grasp", "weight": 0.5, "prop": "cube"},
        {"name": "lift", "kind": "lift", "weight": 2.0, "prop": "cube", "height": 0.10},
        {"name": "place", "kind": "to_zone", "weight": 2.0, "prop": "cube", "zone": "bin", "scale": 0.05},
        {"name": "smooth", "kind": "action_rate", "weight": 0.01}]},
}


def _parse(edit=None):
    data = copy.deepcopy(BASE)
    if edit is not None:
        edit(data)
    return parse_task(data, source="t.caliper-task.json")


def _term(i, **kw):
    return lambda d: d["reward"]["terms"][i].update(kw)


def test_block_loads_and_round_trips():
    task = _parse()
    assert task.reward.success == 10.0 and [t.name for t in task.reward.terms] == [
        "reach", "grasp", "lift", "place", "smooth"]
    assert task.reward.terms[3] == R.RewardTerm("place", "to_zone", 2.0, prop="cube", zone="bin", scale=0.05)
    again = parse_task(json.loads(json.dumps(task_to_dict(task))), source="t.caliper-task.json")
    assert again.reward == task.reward
    # a v1 file has no block and keeps the 0/1 reward; writing it back keeps version 1
    v1 = _parse(lambda d: (d.update(version=1), d.pop("reward")))
    assert v1.reward is None and task_to_dict(v1)["version"] == 1
    assert load_task(find_task("lift-cube")).reward is not None


BAD = [
    ("v1-with-reward", lambda d: d.update(version=1), "reward: needs \"version\": 2"),
    ("unknown-key", lambda d: d["reward"].update(sucess=1.0), "reward.sucess: unknown key (did you mean"),
    ("unknown-term-key", _term(0, scael=0.1), "reward.terms[0].scael: unknown key"),
    ("unknown-kind", _term(0, kind="reech"), "reward.terms[0].kind: 'reech' is not one of"),
    ("missing-prop", _term(0, prop="cub"), "reward.terms[0].prop: no prop 'cub' in scene.props"),
    ("missing-zone", _term(3, zone="bni"), "reward.terms[3].zone: no zone 'bni' in scene.zones"),
    ("negative-scale", _term(0, scale=-0.05), "reward.terms[0].scale: must be > 0, got -0.05"),
    ("zero-height", _term(2, height=0), "reward.terms[2].height: must be > 0"),
    ("duplicate-name", _term(1, name="reach"), "reward.terms[1].name: duplicate term name 'reach'"),
    ("nan-weight", _term(0, weight=float("nan")), "reward.terms[0].weight: expected a finite number"),
    ("field-of-another-kind", _term(1, scale=0.1), "reward.terms[1].scale: not used by a grasp term"),
    ("required-missing", lambda d: d["reward"]["terms"][0].pop("scale"), "reward.terms[0].scale: missing"),
    ("terms-not-list", lambda d: d["reward"].update(terms={}), "reward.terms: expected a list"),
]


@pytest.mark.parametrize("edit, fragment", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_block_is_one_line_naming_the_field(edit, fragment):
    with pytest.raises(CaliperError) as exc:
        _parse(edit)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("t.caliper-task.json: ") and fragment in msg, msg


def _ctx(xp, task, L):
    """Two worlds of a hand-made state: world 0 holds the cube 0.05 m up, 0.03 m from the grip point."""
    grip = np.array([[0.0, 0.0, 0.10], [0.3, 0.0, 0.2]])
    pos = np.array([[[0.0, 0.03, 0.10]], [[-0.15, 0.0, 0.05]]])
    pos0 = np.array([[[0.0, 0.0, 0.05]], [[0.0, 0.0, 0.05]]])
    held = np.array([0, -1])
    target = np.array([[0.1, 0.2, 0.0], [0.0, 0.0, 0.04]])
    prev = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.04]])
    c = R.RewardContext(grip, pos, pos0, held, target, prev, {"bin": np.array([-0.15, 0, 0.05])}, {"cube": 0})
    return c._replace(**{k: xp.asarray(getattr(c, k)) for k in ("grip", "pos", "pos0", "held", "target",
                                                                 "prev_target")})


def test_each_kind_against_a_hand_computation_and_the_jax_twin_agrees():
    import jax.numpy as jnp

    task = _parse()
    got = R.terms(task.reward, _ctx(np, task, None), np)
    d1 = np.linalg.norm([0.45, 0.0, 0.15])
    np.testing.assert_allclose(got["reach"], [1 - np.tanh(0.03 / 0.05), 1 - np.tanh(d1 / 0.05)], rtol=1e-5)
    np.testing.assert_array_equal(got["grasp"], [0.5, 0.0])
    np.testing.assert_allclose(got["lift"], [2.0 * 0.5, 0.0], rtol=1e-6)
    d0 = np.linalg.norm([0.15, 0.03, 0.05])
    np.testing.assert_allclose(got["place"], [2.0 * (1 - np.tanh(d0 / 0.05)), 2.0], rtol=1e-6)
    np.testing.assert_allclose(got["smooth"], [-0.01 * 0.05, 0.0], rtol=1e-6)
    total = R.total(task.reward, np.array([True, False]), got, np)
    want = [10.0 + sum(v[0] for v in got.values()), sum(v[1] for v in got.values())]
    np.testing.assert_allclose(total, want, rtol=1e-6)
    twin = R.terms(task.reward, _ctx(jnp, task, None), jnp)
    for k, v in got.items():
        np.testing.assert_allclose(np.asarray(twin[k]), v, rtol=1e-6, atol=1e-7, err_msg=k)
    # zero-weight terms are not computed at all
    zero = dataclasses.replace(task.reward, terms=tuple(dataclasses.replace(t, weight=0.0) if t.name == "lift"
                                                        else t for t in task.reward.terms))
    assert "lift" not in R.terms(zero, _ctx(np, task, None), np)


@pytest.fixture(scope="module")
def lift():
    from tasks.env import resolve_task

    return resolve_task("lift-cube")


def test_cpu_engine_reports_the_terms_and_the_reward_is_their_sum(lift):
    from tasks.env import VecEnv

    with VecEnv(lift, 2, randomization=None) as env:
        _, info = env.reset()
        assert set(info["reward_terms"]) == {"reach", "grasp", "lift", "smooth"}
        a = np.tile(lift.q0, (2, 1))
        a[1, 0] += 0.5                                  # world 1 moves: an action-rate penalty
        _, reward, _, _, info = env.step(a)
        t = info["reward_terms"]
        np.testing.assert_allclose(reward, sum(t.values()), rtol=1e-6)
        assert t["smooth"][0] > -1e-9 and t["smooth"][1] < -1e-4
        assert (t["reach"] > 0).all() and (t["reach"] < 1).all() and (t["lift"] == 0).all()


def test_nan_in_a_term_is_an_error_naming_it(lift, monkeypatch):
    from tasks.env import VecEnv

    monkeypatch.setitem(R.KINDS, "lift", lambda t, c, xp: c.pos[..., 0, 2] * np.nan)
    with VecEnv(lift, 2, randomization=None) as env:
        env.reset()
        with pytest.raises(CaliperError, match=r"reward term 'lift': non-finite value nan"):
            env.step(np.tile(lift.q0, (2, 1)))

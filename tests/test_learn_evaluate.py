"""learn.evaluate and learn.verdicts: E001-E003 on planted numbers, Wilson intervals, closed-loop
batched evaluation of lift-cube on the CPU engine (a hold-still baseline, a hand-written trained
policy through the deployer, the scripted expert), byte-identical results on rerun, the sweep's
ranking, and (slow) the MJX engine and the serial baseline."""
import dataclasses
import json

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from caliper_jax.errors import CaliperError
from learn.bundle import TrainedPolicy
from learn.config import BCConfig
from learn.evaluate import EpisodeResult, EvalResult, SweepRun, evaluate, rank, serial_eval, sweep
from learn.features import FeatureLayout
from learn.normalize import Normalizer
from learn.verdicts import WILSON_Z, eval_findings, wilson_interval
from tasks.env_spec import EnvRandomization
from tasks.scene import build_scene
from tasks.schema import find_task, load_task

W = 4   # one world count throughout: the VecEnv tick compiles once


# ---- verdicts -------------------------------------------------------------------------------------------
def codes(findings):
    return [f.code for f in findings]


def test_wilson_matches_the_facts():
    assert WILSON_Z == 1.959963984540054
    lo, hi = wilson_interval(3, 5)
    assert round(lo, 2) == 0.23 and round(hi, 2) == 0.88
    lo, hi = wilson_interval(2, 4)
    assert round(hi - lo, 2) == 0.70
    lo, hi = wilson_interval(50, 100)
    assert hi - lo < 0.5
    assert wilson_interval(0, 20)[0] == 0.0 and wilson_interval(20, 20)[1] == 1.0


def test_one_wilson_interval_in_the_tree():
    """`caliper task rollout` reports learn.verdicts' interval: no second implementation (issue 36)."""
    import ast
    from pathlib import Path

    def computes(fn):           # a function that takes a square root itself (not a property calling one)
        return any(isinstance(c, ast.Call) and "sqrt" in ast.unparse(c.func) for c in ast.walk(fn))

    root = Path(__file__).resolve().parent.parent
    defs = [str(p.relative_to(root)) for pkg in ("caliper_jax", "learn", "tasks", "doctors", "mjx_backend")
            for p in (root / pkg).rglob("*.py")
            if any(isinstance(n, ast.FunctionDef) and "wilson" in n.name.lower() and computes(n)
                   for n in ast.walk(ast.parse(p.read_text())))]
    assert defs == ["learn/verdicts.py"], defs


def test_e001_e003_fire_on_all_failed_zero_return_runs():
    f = eval_findings([False] * 20, [0.0] * 20)
    assert codes(f) == ["E001", "E003"]
    assert all(x.severity == "Warning" and x.hint for x in f)
    assert "0/20" in f[0].message
    assert codes(eval_findings(0, [0.0] * 5)) == ["E001", "E003"]          # a count works too


def test_e002_fires_on_a_seed_lottery_and_not_on_enough_episodes():
    f = eval_findings([True, True, False, False], [1.0, 1.0, 0.0, 0.0])
    assert codes(f) == ["E002"]
    assert "0.70" in f[0].message
    assert codes(eval_findings([True] * 50 + [False] * 50, [1.0] * 50 + [0.0] * 50)) == []
    assert codes(eval_findings([True] * 3 + [False] * 2, [1.0] * 3 + [0.0] * 2)) == ["E002"]


def test_e003_alone_when_successes_pay_nothing():
    assert codes(eval_findings([True, False] * 30, [0.0] * 60)) == ["E003"]


def test_healthy_runs_are_silent():
    assert eval_findings([True] * 20, [1.0] * 20) == []
    assert eval_findings([True] * 19 + [False], [1.0] * 19 + [0.0]) == []
    assert eval_findings([True] * 4, [0.5, 1.0, 1.0, 1.0]) == []
    assert eval_findings([], []) == []


def test_e003_needs_exactly_zero():
    assert codes(eval_findings([False] * 4, [0.0, 0.0, 0.0, 1e-9])) == ["E001"]


# ---- a tiny trained policy --------------------------------------------------------------------------------
class HoldQ(nnx.Module):
    """Every chunk entry = the current joint positions (obs[:, -1, :nq]): hold still."""

    def __init__(self, config, obs_dim, action_dim):
        self.config, self.obs_dim, self.action_dim = config, obs_dim, action_dim
        self.gain = nnx.Param(jnp.ones(()))

    def loss(self, batch, key):
        raise NotImplementedError

    def sample(self, obs, obs_mask, key):
        q = obs[:, -1, :self.action_dim] * self.gain
        return jnp.broadcast_to(q[:, None], (q.shape[0], self.config.chunk_size, self.action_dim))


def hold_policy(fps=50):
    cfg = BCConfig(n_obs_steps=2, chunk_size=4, n_action_steps=2)
    fl = FeatureLayout(("observation.state", "observation.environment_state"), (3, 7), "action", 3, fps)
    norm = Normalizer(np.zeros(10, np.float32), np.ones(10, np.float32), np.zeros(3, np.float32),
                      np.ones(3, np.float32))
    return TrainedPolicy(HoldQ(cfg, 10, 3), cfg, fl, norm)


def hold_q0(obs):
    """Baseline: command the measured joint positions (q is the first nq entries of the env obs)."""
    return obs[:, :3]


@pytest.fixture(scope="module")
def lift():
    """lift-cube with a 6 s horizon (the expert lifts by ~3.5 s, then holds 1 s: successDwellS):
    shorter failed episodes; its 0/1 success reward (no dense terms), so returns are the success counts."""
    return build_scene(dataclasses.replace(load_task(find_task("lift-cube")), horizon_s=6.0, reward=None))


def dumps(result):
    return json.dumps(result.to_dict(), sort_keys=True)


# ---- closed loop ------------------------------------------------------------------------------------------
def test_hold_still_baseline_fails_every_episode_and_reruns_byte_identical(lift):
    seen = []
    r = evaluate(hold_q0, lift, episodes=W, progress=lambda d, n: seen.append((d, n)))
    assert r.n == W and r.successes == 0 and r.num_envs == W
    assert codes(r.findings) == ["E001", "E003"]
    assert [e.steps for e in r.episodes] == [r.horizon] * W
    assert [(e.world, e.world_episode) for e in r.episodes] == [(w, 0) for w in range(W)]
    assert r.wilson == wilson_interval(0, W) and r.mean_return == 0.0
    assert seen[-1] == (W, W)
    d = r.to_dict()
    assert d["policy"] == "hold_q0" and d["steps_to_success"] == {"mean": None, "median": None}
    assert "timing" not in d and r.timing["wall_s"] > 0
    assert dumps(evaluate(hold_q0, lift, episodes=W)) == dumps(r)


def test_trained_policy_through_the_deployer_is_deterministic(lift):
    # more episodes than worlds: each world contributes its next episodes, in (episode, world) order
    pol = hold_policy()
    r = evaluate(pol, lift, episodes=6, num_envs=W, seed=3)
    assert r.policy == "bc_mlp" and r.successes == 0 and r.seed == 3
    want = [(0, 0), (1, 0), (2, 0), (3, 0), (0, 1), (1, 1)]
    assert [(e.world, e.world_episode) for e in r.episodes] == want
    assert [e.episode for e in r.episodes] == list(range(6)) and {e.seed for e in r.episodes} == {3}
    assert dumps(evaluate(pol, lift, episodes=6, num_envs=W, seed=3)) == dumps(r)


def test_fps_mismatch_is_refused(lift):
    with pytest.raises(CaliperError, match="trained at 30 fps, env runs at 50 fps"):
        evaluate(hold_policy(fps=30), lift, episodes=W)


#: The scripted expert on lift-cube as benchmarks/README.md states it (bench_expert.py, 100 randomised
#: episodes): its rate and Wilson 95% interval.
DOC_LIFT_RATE, DOC_LIFT_WILSON = 1.0, (0.96, 1.0)


def test_scripted_expert_lifts_the_cube(lift):
    # start poses fixed (planning stays cheap), physics randomised per world
    rnd = EnvRandomization(prop_xy=None, prop_yaw=None)
    r = evaluate("scripted", lift, episodes=W, randomization=rnd)
    # the documented rate: every episode (W of W; one failure gives Wilson [0.30, 0.95], which
    # excludes the documented interval)
    lo, hi = r.wilson
    assert r.successes == r.n == W, r.to_dict()
    assert lo <= DOC_LIFT_RATE <= hi and hi >= DOC_LIFT_WILSON[0] and r.wilson == wilson_interval(W, W)
    assert "E001" not in codes(r.findings) and "E003" not in codes(r.findings)
    sts = r.to_dict()["steps_to_success"]
    assert 0 < sts["median"] < r.horizon
    assert r.to_dict()["randomization"]["prop_xy"] is None
    assert all(e.ret == (1.0 if e.success else 0.0) for e in r.episodes)


def test_sweep_ranks_and_is_deterministic(lift):
    def hold_too(obs):
        return obs[:, :3]

    # the scripted expert succeeds, the two holds never do: the ranking must put the expert first
    # although its name sorts last, then break the holds' tie by name
    policies = {"b_hold": hold_q0, "a_hold": hold_too, "z_scripted": "scripted"}
    s = sweep(policies, lift, randomization_levels={"none": None}, seeds=[0], episodes=W)
    by_name = {r["name"]: r for r in s.ranking}
    assert by_name["z_scripted"]["success_rate"] > 0 == by_name["a_hold"]["success_rate"]
    assert [r["name"] for r in s.ranking] == ["z_scripted", "a_hold", "b_hold"]
    assert [r["rank"] for r in s.ranking] == [1, 2, 3]
    assert [(r.policy, r.level, r.seed) for r in s.runs] == [("a_hold", "none", 0), ("b_hold", "none", 0),
                                                             ("z_scripted", "none", 0)]
    assert s.runs[0].result.randomization is None
    again = sweep(policies, lift, randomization_levels={"none": None}, seeds=[0], episodes=W)
    assert json.dumps(again.to_dict(), sort_keys=True) == json.dumps(s.to_dict(), sort_keys=True)


def _fake(name, successes, returns):
    eps = tuple(EpisodeResult(i, 0, i, 0, s, 10, r) for i, (s, r) in enumerate(zip(successes, returns,
                                                                                  strict=True)))
    res = EvalResult("t", name, "mujoco", 0, len(eps), 50, 100, None, eps, [])
    return SweepRun(name, "t", "default", 0, res)


def test_ranking_order_rate_then_return_then_name():
    runs = [_fake("c", [True, False], [1.0, 0.0]), _fake("b", [True, False], [1.0, 0.5]),
            _fake("a", [False, False], [0.0, 0.9]), _fake("d", [True, True], [1.0, 1.0]),
            _fake("e", [True, False], [1.0, 0.5])]
    ranking = rank(runs)
    assert [r["name"] for r in ranking] == ["d", "b", "e", "c", "a"]
    assert [r["rank"] for r in ranking] == [1, 2, 3, 4, 5]
    assert ranking[0]["wilson95"] == list(wilson_interval(2, 2))


def test_bad_arguments():
    with pytest.raises(CaliperError, match="'scripted'"):
        evaluate("expert", "lift-cube")
    with pytest.raises(CaliperError, match="CPU engine only"):
        evaluate("scripted", "lift-cube", engine="mjx")
    with pytest.raises(CaliperError, match="engine="):
        evaluate(hold_q0, "lift-cube", engine="gpu")
    with pytest.raises(CaliperError, match="episodes"):
        evaluate(hold_q0, "lift-cube", episodes=0)
    with pytest.raises(CaliperError, match="policy"):
        evaluate(42, "lift-cube")


# ---- slow: the MJX engine and the serial baseline ------------------------------------------------------
@pytest.fixture(scope="module")
def tiny():
    return build_scene(dataclasses.replace(load_task(find_task("lift-cube")), horizon_s=0.1, reward=None))


@pytest.mark.slow
@pytest.mark.claim
def test_mjx_engine_matches_the_cpu_engine_on_a_tiny_case(tiny):
    pol = hold_policy()
    cpu = evaluate(pol, tiny, episodes=3, num_envs=2, randomization=None)
    mjx = evaluate(pol, tiny, episodes=3, num_envs=2, randomization=None, engine="mjx")
    assert mjx.engine == "mjx" and mjx.horizon == 5
    key = [(e.world, e.world_episode, e.success, e.steps, e.ret) for e in cpu.episodes]
    assert [(e.world, e.world_episode, e.success, e.steps, e.ret) for e in mjx.episodes] == key
    assert dumps(evaluate(pol, tiny, episodes=3, num_envs=2, randomization=None, engine="mjx")) == dumps(mjx)


@pytest.mark.slow          # another MJX compile (new policy, default world count): not in the claims set
def test_mjx_engine_verdicts_on_a_failing_policy(tiny):
    base = evaluate(lambda obs: obs[:, :3], tiny, episodes=2, engine="mjx")
    assert base.successes == 0 and codes(base.findings) == ["E001", "E003"]


def test_serial_eval_replays_the_batched_episodes_bit_for_bit(tiny):
    """Episode k of the serial baseline is episode k of the batched run (world k mod W, its episode
    k div W, from the same draws): the same observations, bit for bit, at every tick."""
    seen = []

    def hold(obs):
        seen.append(np.array(obs))
        return obs[:, :3]

    batched = evaluate(hold, tiny, episodes=4, num_envs=2, seed=5)
    rows = np.stack(seen)                                    # (ticks, 2 worlds, obs)
    seen.clear()
    serial = serial_eval(hold, tiny, episodes=4, num_envs=2, seed=5)
    T = batched.horizon
    assert [(e.world, e.world_episode) for e in serial.episodes] == [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert [(e.world, e.world_episode, e.steps) for e in serial.episodes] == \
        [(e.world, e.world_episode, e.steps) for e in batched.episodes]
    for k, e in enumerate(serial.episodes):
        mine = np.concatenate(seen[k * T:(k + 1) * T])
        np.testing.assert_array_equal(mine, rows[e.world_episode * T:(e.world_episode + 1) * T, e.world])
    assert serial.num_envs == 1 and codes(serial.findings) == ["E001", "E003"]

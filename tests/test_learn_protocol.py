"""learn.protocol and the honest interval: disjoint seed splits (train / val / test) as the tooling
uses them, the effective N of an evaluation (distinct initial conditions, not worlds), and MuJoCo's
instabilities reported per episode in the result instead of printed."""
import contextlib
import dataclasses
import inspect
import io
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from caliper_jax import notices
from caliper_jax.errors import CaliperError
from learn.bundle import TrainedPolicy
from learn.config import BCConfig
from learn.evaluate import evaluate, pooled, sweep
from learn.features import FeatureLayout
from learn.normalize import Normalizer
from learn.protocol import (
    SPLIT_NAMES,
    SPLITS,
    effective_count,
    resolve_seed,
    split_of,
    split_seeds,
)
from learn.verdicts import wilson_interval
from tasks.env_spec import EnvRandomization
from tasks.scene import build_scene
from tasks.schema import find_task, load_task
from tests.test_learn_evaluate import HoldQ

W = 3


# ---- the splits -----------------------------------------------------------------------------------------
def test_splits_are_disjoint_ordered_and_match_the_tooling_defaults():
    spans = [(s.start, s.stop) for s in SPLITS.values()]
    assert SPLIT_NAMES == ("train", "val", "test")
    # contiguous, no overlap
    assert spans[0][0] == 0 and all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert all(lo < hi for lo, hi in spans)
    for name in SPLIT_NAMES:
        seeds = split_seeds(name, 3)
        assert len(set(seeds)) == 3 and all(split_of(s) == name for s in seeds)
        assert all(s not in SPLITS[other] for s in seeds for other in SPLIT_NAMES if other != name)
    # the seeds the tooling uses by default sit in the split of their use
    from caliper_jax.cli import learn as cli_learn
    from tasks.demo import record_demos

    assert split_of(inspect.signature(record_demos).parameters["seed"].default) == "train"
    assert cli_learn.SPLIT_CHOICES == SPLIT_NAMES
    assert split_of(1_000_003) == "test"        # `caliper learn rl --eval-seed` default
    assert split_of(-1) is None and split_of(2_000_000) is None


def test_resolve_seed():
    assert resolve_seed(None, None) == 0 and resolve_seed(7, None) == 7
    assert resolve_seed(None, "test") == SPLITS["test"].start and resolve_seed(None, "val") == 1000
    assert resolve_seed(1_000_005, "test") == 1_000_005
    with pytest.raises(CaliperError, match="seed 1000 is not a test seed .* belongs to val"):
        resolve_seed(1000, "test")
    with pytest.raises(CaliperError, match="split 'holdout'"):
        resolve_seed(None, "holdout")
    with pytest.raises(CaliperError, match="number of seeds"):
        split_seeds("train", 1001)


def test_effective_count_groups_by_initial_conditions():
    assert effective_count([True, True, True], [b"a", b"a", b"a"]) == (1.0, 1)
    assert effective_count([True, False, True], [b"a", b"b", b"c"]) == (2.0, 3)
    assert effective_count([True, False], [b"a", b"a"]) == (0.5, 1)


def test_cli_split_errors_are_one_line():
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main("learn", "eval", "scripted", "--task", "lift-cube", "--split", "test", "--seed", "5")
    assert code == 2 and err.getvalue().strip().splitlines() == [
        "caliper: error: seed 5 is not a test seed (the test split is [1000000, 2000000); 5 belongs to "
        "train)"]


def cli_main(*argv):
    from caliper_jax import cli

    return cli.main(list(argv))


# ---- closed loop --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def short_lift():
    """lift-cube with a 0.5 s horizon: the episodes are short; nothing is lifted."""
    return build_scene(dataclasses.replace(load_task(find_task("lift-cube")), horizon_s=0.5, reward=None))


def hold(obs):
    return obs[:, :3]


def test_randomisation_off_counts_one_distinct_episode(short_lift):
    off = evaluate(hold, short_lift, episodes=W, randomization=None, split="test")
    assert off.n == W and off.n_effective == 1 and off.seed == SPLITS["test"].start
    assert off.wilson == wilson_interval(0, 1)            # not the (0, W) interval of W "independent" worlds
    d = json.loads(json.dumps(off.to_dict()))
    assert d["split"] == "test" and d["n_effective"] == 1 and d["n_episodes"] == W
    assert "effective N" in d["wilson_basis"] and "effective N" in off.summary()
    on = evaluate(hold, short_lift, episodes=W, split="test")
    assert on.n_effective == W and on.wilson == wilson_interval(0, W)
    assert on.to_dict()["wilson_basis"] == f"{W} distinct episodes" and on.split == "test"
    # pooled over two seeds: with randomisation off the second seed repeats the first seed's episode
    s = sweep({"hold": hold}, short_lift, randomization_levels={"none": None, "wide": "wide"},
              seeds=split_seeds("val", 2), episodes=W)
    none = pooled([r.result for r in s.runs if r.level == "none"])
    wide = pooled([r.result for r in s.runs if r.level == "wide"])
    assert (none["episodes"], none["n_effective"]) == (2 * W, 1)
    assert (wide["episodes"], wide["n_effective"]) == (2 * W, 2 * W)
    assert s.ranking[0]["n_effective"] == 1 + 2 * W


def test_unstable_episodes_are_in_the_result_not_printed(short_lift):
    """Servo gains x 1e4 and no damping: one world's simulation blows up (MuJoCo resets it)."""
    notices.install_mujoco()
    notices.clear()
    rnd = EnvRandomization(prop_xy=None, prop_yaw=None, gain=(1e4, 1e4), damping=(1e-6, 1e-6))
    r = evaluate(lambda obs: obs[:, :3] * 0 + 3.0, short_lift, episodes=2, randomization=rnd)
    unstable = [e for e in r.episodes if e.unstable]
    assert unstable and len(unstable) < r.n and all(e.steps < r.horizon for e in unstable)
    assert r.unstable_episodes == [e.episode for e in unstable]
    assert r.sim_warnings and all(k.startswith("MuJoCo:") and "unstable" in k for k in r.sim_warnings)
    assert not any(k.startswith("MuJoCo:") for k in notices.counts())    # taken out of the CLI's warning line
    d = r.to_dict()
    assert d["unstable_episodes"] == r.unstable_episodes and d["sim_warnings"] == r.sim_warnings
    assert [e["unstable"] for e in d["episodes"]] == [e.unstable for e in r.episodes]
    assert "ended unstable" in r.summary()


def test_recipes_are_the_cli_defaults():
    """`caliper learn train --policy KIND` and `caliper demo --full` start from the public recipes."""
    from caliper_jax.cli.learn import FULL_DEMO
    from learn.recipes import DEFAULT_RECIPE, RECIPES, recipe

    assert set(DEFAULT_RECIPE) == {"bc_mlp", "act", "diffusion"}
    for kind, name in DEFAULT_RECIPE.items():
        assert recipe(kind) is RECIPES[name] and RECIPES[name].policy.kind == kind
    assert RECIPES[FULL_DEMO["recipe"]].task == FULL_DEMO["task"]
    assert recipe("act").policy.temporal_ensemble is not None and recipe("diffusion").train.ema_decay
    assert recipe("bc_mlp").with_seed(2).train.seed == 2 and recipe("bc_mlp").train.seed == 0
    with pytest.raises(CaliperError, match="recipe 'nope'"):
        recipe("nope")


def _run(policy, successes, sigs, level="none"):
    from learn.evaluate import EpisodeResult, EvalResult, SweepRun

    eps = tuple(EpisodeResult(i, 0, i, 0, s, 10, float(s)) for i, s in enumerate(successes))
    res = EvalResult("t", policy, "mujoco", 0, len(eps), 50, 100, None, eps, [], signatures=tuple(sigs))
    return SweepRun(policy, "t", level, 0, res)


def test_protocol_table_mean_spread_and_wilson_on_distinct_episodes():
    from learn.evaluate import SweepResult
    from learn.sweep_table import protocol_table, table_text

    runs = [_run("a[0]", [True, True], [b"x", b"x"]), _run("a[1]", [False, False], [b"x", b"x"]),
            _run("a[2]", [True, False], [b"y", b"z"]), _run("b", [True, True], [b"x", b"y"])]
    table = protocol_table(SweepResult(runs, []), {"a": ["a[0]", "a[1]", "a[2]"], "b": ["b"]})
    a, b = table["rows"][1], table["rows"][0]              # b first: higher mean
    assert (a["policy"], b["policy"]) == ("a", "b")
    assert a["mean"] == pytest.approx(0.5) and a["std"] == pytest.approx(0.5)    # rates 1, 0, 0.5
    assert (a["min"], a["max"], a["training_runs"], a["episodes"]) == (0.0, 1.0, 3, 6)
    # per run: 1 + 1 + 2 distinct episodes; successes 1 + 0 + 1
    assert (a["n_effective"], a["successes_effective"]) == (4, 2.0)
    assert a["wilson95"] == list(wilson_interval(2, 4)) and b["std"] == 0.0
    assert len(table_text(table)) == 3
    with pytest.raises(CaliperError, match="belong to no group"):
        protocol_table(SweepResult(runs, []), {"a": ["a[0]"]})


# ---- a chunking policy inside MjxEnv.rollout's scan (slow: an MJX scan compiles) ------------------
class Probe(HoldQ):
    """Chunk entry i = q + 0.01 * (frames in the window) + 0.001 * i on joint 0: the action says
    which chunk entry was popped and how much history the deploy state held."""

    def sample(self, obs, obs_mask, key):
        A, C = self.action_dim, self.config.chunk_size
        q = obs[:, -1, :A] * self.gain
        bump = 0.01 * obs_mask.sum(axis=1, keepdims=True) + 0.001 * jnp.arange(C)[None, :]    # (B, C)
        return q[:, None, :] + bump[..., None] * (jnp.arange(A) == 0)


def probe_policy():
    cfg = BCConfig(n_obs_steps=2, chunk_size=4, n_action_steps=2)
    fl = FeatureLayout(("observation.state", "observation.environment_state"), (3, 7), "action", 3, 50)
    norm = Normalizer(np.zeros(10, np.float32), np.ones(10, np.float32), np.zeros(3, np.float32),
                      np.ones(3, np.float32))
    return TrainedPolicy(Probe(cfg, 10, 3), cfg, fl, norm)


@pytest.mark.slow
def test_mjx_rollout_runs_a_chunking_policy_inside_the_scan():
    """`MjxEnv.rollout(state, policy.jax_policy(env.layout), T)` plays exactly what the Deployer
    plays tick by tick, across an episode end (history and queue reset), without private imports."""
    from learn.deploy import Deployer
    from tasks.env_mjx import MjxEnv

    tiny = build_scene(dataclasses.replace(load_task(find_task("lift-cube")), horizon_s=0.1, reward=None))
    env = MjxEnv(tiny, 2, randomization=None)
    pol = probe_policy()
    jp = pol.jax_policy(env.layout)
    assert pol.jax_policy(env.layout) is jp                    # cached: a rollout does not recompile
    st = env.jit_reset(jax.random.PRNGKey(0))
    T = env.horizon + 3                                        # crosses the first episode's end
    final, tr, ps = env.rollout(st, jp, T)
    dep = Deployer(pol, env.layout, 2)
    obs, _ = env.reset(0)
    want = []
    for _ in range(T):
        a = dep.act(obs)
        want.append(a)
        obs, _, term, trunc, _ = env.step(a)
        dep.reset(term | trunc)
    np.testing.assert_allclose(np.asarray(tr.action), np.stack(want), rtol=0, atol=1e-6)
    act, q = np.asarray(tr.action)[:, 0, 0], np.asarray(tr.obs)[:, 0, 0]
    # entries 0, 1 of the chunk run at tick 0 (1 frame seen), entry 0 of the one run at tick 2 (2 frames)
    np.testing.assert_allclose([act[0] - q[0], act[1] - q[0], act[2] - q[2]], [0.01, 0.011, 0.02], atol=1e-5)
    H = env.horizon
    assert np.isclose(act[H] - q[H], 0.01, atol=1e-5)         # a new episode: fresh history and queue
    _, tr2, _ = env.rollout(final, jp, 2, ps)                         # continue from the policy state
    assert env.compile_counts()["rollout_stateful"] == 2              # T and 2 ticks: one compile each

"""learn.protocol and the honest interval: disjoint seed splits (train / val / test) as the tooling
uses them, the effective N of an evaluation (distinct initial conditions, not worlds), and MuJoCo's
instabilities reported per episode in the result instead of printed."""
import contextlib
import dataclasses
import inspect
import io
import json

import pytest

from caliper_jax import notices
from caliper_jax.errors import CaliperError
from learn.evaluate import evaluate, pooled, sweep
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

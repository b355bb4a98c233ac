"""learn.rl model selection and action frames: the val-seed selector keeps the best actor (not the
last) and writes it to ``best/``, counts only each world's first episode, refuses a test seed; the
"home" action frame centres the normalised action on the task's start configuration, also in the
exported BC-MLP; the task RL recipes parse into valid configs."""
from __future__ import annotations

import numpy as np
import pytest

from caliper_jax.errors import CaliperError
from learn.rl import ppo as P
from learn.rl.train import Selector, train_rl

TINY = dict(envs=4, rollout=8, epochs=2, minibatches=2, actor_hidden=(16, 16), critic_hidden=(16, 16))


@pytest.fixture(scope="module")
def lift():
    from tasks.env import resolve_task

    return resolve_task("lift-cube")


class _Env:
    """Two worlds: world 0 fails its first episode at tick 2, then succeeds at tick 3; world 1
    succeeds its first episode at tick 3."""

    num_envs = 2

    def reset(self, seed):
        self.t = 0
        return np.zeros((2, 1)), {}

    def step(self, action):
        self.t += 1
        term = np.array([self.t == 3, self.t == 3])
        trunc = np.array([self.t == 2, False])
        info = {"episode": {"final_success": term.copy()}}
        return np.zeros((2, 1)), np.zeros(2), term, trunc, info


def test_first_episodes_counts_only_each_worlds_first_episode():
    """Catches: a later episode of a world (world 0's success at tick 3) overwriting its first."""
    from learn.rl.collect import first_episodes

    got = first_episodes(_Env(), lambda obs: np.zeros((2, 1)), np.zeros(1), np.ones(1), 1000)
    np.testing.assert_array_equal(got, [False, True])


def test_selector_keeps_the_best_val_actor_not_the_last(lift, tmp_path, monkeypatch):
    """Scripted val rates 0.25, 0.75, 0.5 over three segments: the result is the actor of the
    second segment (update 4), saved in ``best/`` with its score; each judged row carries
    ``val_success``. Catches: returning the last actor, or keeping the first."""
    from learn.checkpoint import load_checkpoint, read_checkpoint_meta, resolve_checkpoint
    from learn.rl import collect

    rates = iter([0.25, 0.75, 0.5])
    monkeypatch.setattr(collect, "first_episodes",
                        lambda env, act, c, h, seed: np.arange(4) < 4 * next(rates))
    actors = {}
    cfg = P.PPOConfig(**TINY, steps=6 * 32)                  # 6 updates, segments of 2

    def grab(row):
        if "val_success" in row:
            actors[row["update"] + 1] = row["val_success"]

    res = train_rl(lift, "ppo", cfg, out=tmp_path, checkpoint_every=2, select_episodes=4, progress=grab)
    assert actors == {2: 0.25, 4: 0.75, 6: 0.5}
    assert res.selected == {"update": 4, "env_steps": 128, "val_success": 0.75, "val_seed": 1000,
                            "episodes": 4}
    best = resolve_checkpoint(tmp_path / "best")
    assert best.name == "step_00000004" and res.checkpoint == best
    assert read_checkpoint_meta(best)["extra"]["selected"]["val_success"] == 0.75
    last = load_checkpoint(resolve_checkpoint(tmp_path)).policy       # step_6: a different actor
    obs = np.random.default_rng(0).normal(size=(3, last.features.obs_dim)).astype(np.float32)
    mine = res.policy.predict_chunk(obs[:, None])[:, 0]
    saved = load_checkpoint(best).policy.predict_chunk(obs[:, None])[:, 0]
    np.testing.assert_allclose(saved, mine, atol=1e-6)
    assert not np.allclose(last.predict_chunk(obs[:, None])[:, 0], mine, atol=1e-6)


def test_selector_refuses_a_test_seed_and_bad_counts():
    with pytest.raises(CaliperError, match="val-split seed"):
        Selector(10, 1_000_003, 1)
    with pytest.raises(CaliperError, match="select_episodes must be an integer in 1..256"):
        Selector(0, 1000, 1)


def test_home_action_frame_centres_the_action_on_the_start_configuration(lift):
    """``u = 0`` is the task's q0 (clipped into the limits) with ``half`` scaled, in the trainer
    and in the exported BC-MLP's action normaliser. Catches: the frame applied in collection
    only (the exported policy would send the arm to the limits' middle)."""
    lo, hi = np.array([-1.0, 0.0, -2.0]), np.array([1.0, 2.0, 0.0])
    cfg = P.PPOConfig(action_centre="home", action_scale=0.5)
    centre, half = P.action_frame(cfg, lo, hi, [0.5, 3.0, -1.0])
    np.testing.assert_allclose(centre, [0.5, 2.0, -1.0])
    np.testing.assert_allclose(half, [0.5, 0.5, 0.5])
    centre, half = P.action_frame(P.PPOConfig(), lo, hi, [0.5, 3.0, -1.0])
    np.testing.assert_allclose(centre, [0.0, 1.0, -1.0])
    np.testing.assert_allclose(half, [1.0, 1.0, 1.0])
    with pytest.raises(CaliperError, match="action_centre must be one of limits, home"):
        P.PPOConfig(action_centre="q0")
    with pytest.raises(CaliperError, match="action_scale must be a number > 0"):
        P.PPOConfig(action_scale=0)
    res = train_rl(lift, "ppo", P.PPOConfig(**TINY, steps=32, action_centre="home", action_scale=0.25))
    norm = res.policy.normalizer
    q0 = np.clip(np.asarray(lift.task.q0), *(np.asarray(x) for x in _limits(lift)))
    np.testing.assert_allclose(np.asarray(norm.act_mean), q0, atol=1e-6)


def _limits(ts):
    from tasks.env import VecEnv

    env = VecEnv(ts, 1)
    try:
        return env.action_low, env.action_high
    finally:
        env.close()


def test_rl_recipes_build_valid_configs():
    from learn.recipes import RL_RECIPES, rl_recipe
    from learn.rl.train import ALGORITHMS
    from tasks.env import resolve_task

    assert rl_recipe("panda-reach", "ppo") is RL_RECIPES["panda-reach", "ppo"]
    assert rl_recipe("panda-reach", "sac") is None
    for (task, algo), rec in RL_RECIPES.items():
        resolve_task(task)
        Config = ALGORITHMS[algo].config
        Config.from_dict({**Config().to_dict(), **rec.config}, f"recipe {task}")
        Selector(rec.select_episodes, 1000, rec.select_every) if rec.select_episodes else None


def test_a_raising_run_closes_its_training_and_validation_worlds(lift, monkeypatch):
    """A run that raises (here the progress callback, after the first val judgement) still closes
    both VecEnvs it opened -- the training worlds and the Selector's validation worlds. Catches:
    ``Selector.close()`` / ``setup.env.close()`` reached only on a normal return."""
    from tasks import env as E

    opened = []
    init = E.VecEnv.__init__

    def spy(self, *a, **k):
        init(self, *a, **k)
        opened.append(self)

    monkeypatch.setattr(E.VecEnv, "__init__", spy)

    def boom(row):
        if "val_success" in row:
            raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        train_rl(lift, "ppo", P.PPOConfig(**TINY, steps=4 * 32), checkpoint_every=2, select_episodes=2,
                 progress=boom)
    assert len(opened) == 2 and [e.num_envs for e in opened] == [4, 2]
    assert all(e._closed for e in opened)

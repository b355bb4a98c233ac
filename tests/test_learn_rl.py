"""learn.rl: PPO's pieces against hand references (GAE, running statistics, the clipped update
moving probability towards positive advantages), the CPU-engine trainer deterministic and resumable
bit for bit, its exported actor loading through the BC checkpoint path into learn.evaluate, the
scalars/curve files, and the CLI's hostile inputs (``--envs 0``, ``--steps -1``, a NaN reward term)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from caliper_jax.errors import CaliperError
from learn.rl import ppo as P
from learn.rl.train import train_rl

ROOT = Path(__file__).resolve().parent.parent
TINY = dict(envs=4, rollout=8, epochs=2, minibatches=2, actor_hidden=(16, 16), critic_hidden=(16, 16))


def test_gae_matches_a_loop_reference():
    cfg = P.PPOConfig(gamma=0.9, gae_lambda=0.8)
    rng = np.random.default_rng(0)
    T, W = 7, 3
    v, vn, r = (rng.normal(size=(T, W)).astype(np.float32) for _ in range(3))
    term = np.zeros((T, W), np.float32)
    done = np.zeros((T, W), np.float32)
    term[2, 0] = done[2, 0] = 1.0          # success: no bootstrap
    done[4, 1] = 1.0                        # truncation: bootstrap from V(final_obs), no carry
    want = np.zeros((T, W))
    carry = np.zeros(W)
    for t in reversed(range(T)):
        delta = r[t] + 0.9 * (1 - term[t]) * vn[t] - v[t]
        carry = delta + 0.9 * 0.8 * (1 - done[t]) * carry
        want[t] = carry
    adv, ret = P.gae(cfg, *(jnp.asarray(x) for x in (v, vn, r, term, done)))
    np.testing.assert_allclose(adv, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ret, want + v, rtol=1e-5, atol=1e-6)


def test_running_stats_merge_equals_the_pooled_moments():
    rng = np.random.default_rng(1)
    a, b = rng.normal(2.0, 3.0, (50, 4)), rng.normal(-1.0, 0.5, (30, 4))
    s = P.RunningStats.init(4).update(jnp.asarray(a, jnp.float32)).update(jnp.asarray(b, jnp.float32))
    pooled = np.concatenate([a, b])
    assert float(s.count) == 80
    np.testing.assert_allclose(s.mean, pooled.mean(0), rtol=1e-5)
    np.testing.assert_allclose(s.var, pooled.var(0), rtol=1e-4)


def test_update_raises_the_probability_of_advantaged_actions():
    """One update on a batch where action +1 earned reward and -1 did not: the policy mean moves
    towards +1 (a sign error in the surrogate or the log-probability would move it away)."""
    cfg = P.PPOConfig(**{**TINY, "envs": 8, "rollout": 4, "epochs": 4}, lr=1e-2, reward_scale=1.0, gamma=0.0,
                      anneal_lr=False)
    nets, flat = P.build(cfg, 2, 2, 1)
    state = P.init_state(cfg, nets, flat, 2)
    T, W = cfg.rollout, cfg.envs
    obs = jnp.zeros((T, W, 2))
    u = jnp.tile(jnp.asarray([1.0, -1.0] * (W // 2))[None, :, None], (T, 1, 1))
    mean0 = P.actor_mean(nets, flat, jnp.zeros((1, 2)))[0, 0]
    logp = P.log_prob(mean0, nets.unravel(flat)["log_std"], u)
    reward = (u[..., 0] > 0).astype(jnp.float32)
    ro = P.Rollout(obs, u, logp, reward, jnp.zeros((T, W), bool), jnp.ones((T, W), bool), obs)
    update = P.make_update(cfg, nets, np.arange(2))
    new, m = update(state, ro)
    mean1 = P.actor_mean(nets, new.params, jnp.zeros((1, 2)))[0, 0]
    assert float(mean1) > float(mean0) + 1e-3, (mean0, mean1)
    assert int(new.update) == 1 and float(new.stats.count) == T * W
    assert all(np.isfinite(float(v)) for v in m.values())


def _interrupt_at(update):
    def progress(row):
        if row["update"] == update:
            raise KeyboardInterrupt
    return progress


@pytest.fixture(scope="module")
def lift():
    from tasks.env import resolve_task

    return resolve_task("lift-cube")


def test_trainer_is_deterministic_resumable_bit_for_bit_and_exports_an_eval_policy(lift, tmp_path):
    from learn.checkpoint import load_checkpoint, resolve_checkpoint
    from learn.evaluate import evaluate

    cfg = P.PPOConfig(**TINY, steps=4 * 8 * 4)                     # 4 updates, segments of 2
    full = train_rl(lift, "ppo", cfg, out=tmp_path / "a", checkpoint_every=2)
    assert full.updates == 4 and full.env_steps == 128
    with pytest.raises(KeyboardInterrupt):
        train_rl(lift, "ppo", cfg, out=tmp_path / "b", checkpoint_every=2, progress=_interrupt_at(2))
    assert sorted(p.name for p in (tmp_path / "b").glob("step_*")) == ["step_00000002"]
    resumed = train_rl(lift, "ppo", cfg, out=tmp_path / "b", resume=True, checkpoint_every=2)
    a = load_checkpoint(resolve_checkpoint(tmp_path / "a"))
    b = load_checkpoint(resolve_checkpoint(tmp_path / "b"))
    assert a.step == b.step == 4
    flat = jax.tree_util.tree_leaves
    for x, y in zip(flat(a.opt_state), flat(b.opt_state), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    rows = [json.loads(x) for x in (tmp_path / "b" / "scalars.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [0, 1, 2, 3]
    assert (tmp_path / "a" / "scalars.csv").read_text().splitlines()[0].startswith("update,env_steps")
    assert resumed.updates == 4
    # the checkpoint is a BC-MLP policy: it equals the trainer's deterministic actor, and evaluates
    pol = a.policy
    assert pol.config.kind == "bc_mlp" and pol.features.state_keys == ("observation.state",
                                                                        "observation.environment_state")
    obs = np.random.default_rng(0).normal(size=(5, pol.features.obs_dim)).astype(np.float32)
    mine = full.policy.predict_chunk(obs[:, None])[:, 0]
    np.testing.assert_allclose(pol.predict_chunk(obs[:, None])[:, 0], mine, rtol=1e-6, atol=1e-6)
    r = evaluate(pol, lift, episodes=2, num_envs=2, seed=1_000_003)
    assert r.n == 2 and r.policy == "bc_mlp"


def test_resume_with_other_settings_is_refused(lift, tmp_path):
    cfg = P.PPOConfig(**TINY, steps=64)
    train_rl(lift, "ppo", cfg, out=tmp_path, checkpoint_every=2)
    other = P.PPOConfig(**{**TINY, "lr": 1e-3}, steps=64)
    with pytest.raises(CaliperError, match="saved with config="):
        train_rl(lift, "ppo", other, out=tmp_path, resume=True, checkpoint_every=2)


def test_nan_reward_term_stops_training_naming_it(lift, monkeypatch):
    from tasks import rewards as R

    monkeypatch.setitem(R.KINDS, "reach", lambda t, c, xp: c.pos[..., 0, 0] * np.nan)
    with pytest.raises(CaliperError, match="reward term 'reach': non-finite"):
        train_rl(lift, "ppo", P.PPOConfig(**TINY, steps=32), checkpoint_every=1)


def _cli(*args):
    cmd = [sys.executable, "-m", "caliper_jax.cli", "learn", "rl", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)


@pytest.mark.parametrize("args, fragment", [
    (["--envs", "0"], "--envs must be an integer >= 1, got 0"),
    (["--steps", "-1"], "--steps must be an integer >= 1, got -1"),
    (["--config", '{"lrr": 1}'], "--config: unknown key(s) 'lrr'"),
    (["--config", '{"minibatches": 3}'], "must divide into 3 minibatches"),
    (["--target", "1.5"], "--target must be a success rate in [0, 1]"),
    (["--select-episodes", "-1"], "--select-episodes must be an integer >= 0, got -1"),
])
def test_cli_hostile_inputs_are_one_line_errors(tmp_path, args, fragment):
    p = _cli("lift-cube", "--out", str(tmp_path / "run"), *args)
    assert p.returncode == 2, p.stderr
    lines = [x for x in p.stderr.splitlines() if x.startswith("caliper: error:")]
    assert len(lines) == 1 and fragment in lines[0], p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "run").exists()


@pytest.mark.slow
def test_mjx_collector_trains_and_matches_the_cpu_collectors_first_batch(lift):
    """The MJX engine's one-scan collector through the same trainer: same shapes, and its first
    batch's observations match the CPU collector's (same seeds, same policy keys) to the engines'
    physics agreement."""
    cfg = P.PPOConfig(**{**TINY, "envs": 2, "rollout": 4}, steps=8)
    mjx = train_rl(lift, "ppo", cfg, engine="mjx", checkpoint_every=1)
    assert mjx.updates == 1 and mjx.engine == "mjx" and np.isfinite(mjx.history[0]["value_loss"])
    from learn.rl.train import ALGORITHMS, Setup, segment_seed

    got = {}
    for engine in ("mujoco", "mjx"):
        s = Setup(lift, ALGORITHMS["ppo"], cfg, engine)
        st = s.init_state(cfg)
        s.collector.restart(segment_seed(cfg.seed, 0))
        got[engine], _ = s.collector.collect(st.params, st.stats, jax.random.PRNGKey(5), cfg.rollout)
    np.testing.assert_allclose(got["mjx"].u[0], got["mujoco"].u[0], atol=1e-4)   # same obs, same key
    np.testing.assert_allclose(got["mjx"].obs, got["mujoco"].obs, atol=5e-3)
    np.testing.assert_allclose(got["mjx"].reward, got["mujoco"].reward, atol=5e-3)

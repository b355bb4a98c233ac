"""learn.rl.sac: the squashed log-density against the analytic one, the device ring buffer, the
update solving a one-step bandit (twin Q + actor + temperature), the trainer deterministic and
resumable bit for bit with its exported tanh actor, and SAC's hostile inputs."""
from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from caliper_jax.errors import CaliperError
from learn.rl import sac as S
from learn.rl.ppo import Rollout
from learn.rl.train import train_rl

TINY = dict(envs=4, rollout=4, buffer=256, batch_size=32, grad_steps=4, actor_hidden=(16, 16),
            critic_hidden=(16, 16))


@pytest.fixture(scope="module")
def lift():
    from tasks.env import resolve_task

    return resolve_task("lift-cube")


def test_squashed_log_prob_is_the_density_of_tanh_of_a_gaussian():
    """log pi(u) = log N(atanh u; mean, std) - log(1 - u^2) per dimension, summed. Planted bug
    caught: a sample without the tanh correction (too low a density near |u| = 1)."""
    cfg = S.SACConfig(actor_hidden=(8,), critic_hidden=(8,), init_log_std=-0.3)
    nets, flat = S.build(cfg, 3, 3, 2)
    feats = jax.random.normal(jax.random.PRNGKey(1), (500, 3))
    u, logp = S._sample(nets, flat, feats, jax.random.PRNGKey(2))
    mean = np.asarray(S.actor_mean(nets, flat, feats), np.float64)
    std = np.exp(-0.3)
    u64 = np.asarray(u, np.float64)
    pre = np.arctanh(np.clip(u64, -1 + 1e-12, 1 - 1e-12))
    ref = np.sum(-0.5 * ((pre - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)
                 - np.log(1 - u64 ** 2 + 1e-6), axis=-1)
    keep = np.all(np.abs(u64) < 0.999, axis=-1)        # float32 atanh loses digits at the edges
    assert keep.mean() > 0.9 and np.all(np.abs(u64) <= 1)
    np.testing.assert_allclose(np.asarray(logp)[keep], ref[keep], rtol=2e-4, atol=2e-3)


def test_ring_buffer_wraps_and_counts():
    buf = S.Buffer.init(5, 2, 1)
    for k in range(3):                                      # 3 rollouts of T=1, W=2: 6 > 5 slots
        x = jnp.full((1, 2, 2), float(k)) + jnp.arange(2.0)[None, :, None] / 10
        no = jnp.zeros((1, 2), bool)
        ro = Rollout(x, x[..., :1], jnp.zeros((1, 2)), x[..., 0], no, no, x + 100)
        buf = buf.add(ro)
    assert int(buf.count) == 5 and int(buf.ptr) == 1
    np.testing.assert_allclose(np.asarray(buf.obs[:, 0]), [2.1, 0.1, 1.0, 1.1, 2.0], atol=1e-6)
    np.testing.assert_allclose(np.asarray(buf.next_obs[:, 0]) - 100, np.asarray(buf.obs[:, 0]), atol=1e-5)


def test_update_solves_a_one_step_bandit():
    """Transitions ending at once (terminated) with reward -|u - u*|^2: after 400 gradient steps the
    deterministic action tanh(mean) is within 0.1 of u* and alpha has moved from its start.
    Planted bugs caught: the actor loss through unfrozen critics or the wrong sign, a target that
    bootstraps past a termination, a temperature without gradient."""
    cfg = S.SACConfig(envs=64, rollout=4, buffer=256, batch_size=128, grad_steps=400, lr=3e-3,
                      reward_scale=1.0, init_alpha=0.05, actor_hidden=(32,), critic_hidden=(64, 64))
    A, D = 2, 3
    nets, flat = S.build(cfg, D, D, A)
    state = S.init_state(cfg, nets, flat, D, A)
    update = S.make_update(cfg, nets, np.arange(D), A)
    k1, k2 = jax.random.split(jax.random.PRNGKey(3))
    target = jnp.array([0.3, -0.5])
    obs = jax.random.normal(k1, (4, 64, D))
    u = jax.random.uniform(k2, (4, 64, A), minval=-1, maxval=1)
    reward = -jnp.sum(jnp.square(u - target), -1)
    ro = Rollout(obs, u, jnp.zeros((4, 64)), reward, jnp.ones((4, 64), bool), jnp.ones((4, 64), bool), obs)
    state, m = update(state, ro)
    got = np.tanh(np.asarray(S.actor_mean(nets, state.params, jnp.zeros((1, D)))))[0]
    np.testing.assert_allclose(got, np.asarray(target), atol=0.1)
    assert abs(float(m["alpha"]) - 0.05) > 1e-3 and np.isfinite(float(m["q_loss"]))


def _interrupt_at(n):
    def progress(row):
        if row["update"] + 1 == n:
            raise KeyboardInterrupt
    return progress


def test_trainer_is_deterministic_resumable_bit_for_bit_and_exports_the_tanh_actor(lift, tmp_path):
    """Planted bugs caught: the replay buffer left out of the checkpoint (the resumed run samples
    an empty buffer), an export without the squash (predictions differ from tanh(mean))."""
    from learn.checkpoint import load_checkpoint, resolve_checkpoint
    from learn.evaluate import evaluate

    cfg = S.SACConfig(**TINY, steps=4 * 4 * 4)                       # 4 updates, segments of 2
    full = train_rl(lift, "sac", cfg, out=tmp_path / "a", checkpoint_every=2)
    with pytest.raises(KeyboardInterrupt):
        train_rl(lift, "sac", cfg, out=tmp_path / "b", checkpoint_every=2, progress=_interrupt_at(3))
    resumed = train_rl(lift, "sac", cfg, out=tmp_path / "b", resume=True, checkpoint_every=2)
    assert full.updates == resumed.updates == 4
    a = load_checkpoint(resolve_checkpoint(tmp_path / "a"))
    b = load_checkpoint(resolve_checkpoint(tmp_path / "b"))
    leaves = jax.tree_util.tree_leaves
    assert len(leaves(a.opt_state)) == len(leaves(b.opt_state)) > 8
    for x, y in zip(leaves(a.opt_state), leaves(b.opt_state), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert int(a.opt_state["buffer"]["count"]) == 64
    header = (tmp_path / "a" / "scalars.csv").read_text().splitlines()[0]
    assert "q_loss" in header and "alpha" in header and "value_loss" not in header
    rows = [json.loads(x) for x in (tmp_path / "b" / "scalars.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [0, 1, 2, 3]
    pol = a.policy
    assert pol.config.kind == "bc_mlp" and pol.config.squash
    obs = np.random.default_rng(0).normal(size=(5, pol.features.obs_dim)).astype(np.float32)
    got = pol.predict_chunk(obs[:, None])[:, 0]
    np.testing.assert_allclose(got, full.policy.predict_chunk(obs[:, None])[:, 0], rtol=1e-6, atol=1e-6)
    lo = pol.normalizer.act_mean - pol.normalizer.act_std
    hi = pol.normalizer.act_mean + pol.normalizer.act_std
    assert np.all(got >= lo - 1e-5) and np.all(got <= hi + 1e-5)        # tanh keeps it in the joint range
    r = evaluate(pol, lift, episodes=2, num_envs=2, seed=1_000_003)
    assert r.n == 2


def test_nan_reward_term_stops_sac_naming_it(lift, monkeypatch):
    from tasks import rewards as R

    monkeypatch.setitem(R.KINDS, "reach", lambda t, c, xp: c.pos[..., 0, 0] * np.nan)
    with pytest.raises(CaliperError, match="reward term 'reach': non-finite"):
        train_rl(lift, "sac", S.SACConfig(**TINY, steps=16), checkpoint_every=1)


def test_sac_config_is_checked():
    with pytest.raises(CaliperError, match="buffer .* must hold one collection"):
        S.SACConfig(envs=64, rollout=4, buffer=100)
    with pytest.raises(CaliperError, match="tau must be in"):
        S.SACConfig(tau=2.0)
    with pytest.raises(CaliperError, match="must be a SACConfig"):
        from learn.rl.ppo import PPOConfig

        train_rl("lift-cube", "sac", PPOConfig())


@pytest.mark.parametrize("task, args, fragment", [
    ("lift-cube", ["--envs", "0"], "--envs must be an integer >= 1, got 0"),
    ("lift-cube", ["--steps", "-1"], "--steps must be an integer >= 1, got -1"),
    ("lift-cube", ["--config", '{"epochs": 2}'], "--config: unknown key(s) 'epochs'"),
    ("precise-place", [], "task precise-place: no dense reward terms"),
])
def test_cli_sac_hostile_inputs_are_one_line_errors(tmp_path, capsys, task, args, fragment):
    """In process (the subprocess path is PPO's test): exit 2 and one ``caliper: error:`` line."""
    from caliper_jax.cli import main

    assert main(["learn", "rl", task, "--algo", "sac", "--out", str(tmp_path / "run"), *args]) == 2
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith("caliper: error:")]
    assert len(lines) == 1 and fragment in lines[0], err
    assert "Traceback" not in err and not (tmp_path / "run").exists()

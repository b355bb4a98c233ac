"""tasks.env.VecEnv on the CPU engine (MuJoCo's C batch) and the gymnasium adapter (tasks.gym).

One TaskScene of lift-cube is built per module and shared, so the jitted gate/grasp tick and the
randomisation draws compile once per world count; most tests use two worlds.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from caliper_jax.control import flags as F
from caliper_jax.errors import CaliperError
from tasks.env import VecEnv, resolve_task
from tasks.env_spec import RANDOM_FIELDS, EnvRandomization, observation_parts

W = 2


@pytest.fixture(scope="module")
def lift():
    return resolve_task("lift-cube")


def hold(env, gripper=None):
    """(W, nq) action holding the start pose, the gripper at ``gripper`` (default: open)."""
    a = np.tile(env.task_scene.q0, (env.num_envs, 1))
    a[:, env.layout.gripper_q] = env.layout.gripper_open if gripper is None else gripper
    return a


def lift_action(env, k: int, close: bool = True):
    """Open-loop lift: the jaw starts on the cube's top face; close from tick 5, then swing the
    arm up from tick 15 (j1 up, j2 down: the jaw rises on an arc, staying level)."""
    a = hold(env, env.layout.gripper_closed if close and k >= 5 else None)
    th = min(1.0, max(0, k - 15) * 0.03)
    a[:, 0], a[:, 1] = th, -th
    return a


def test_reset_step_shapes_and_dtypes(lift):
    with VecEnv(lift, W, seed=1) as env:
        L = env.layout
        obs, info = env.reset()
        assert obs.shape == (W, env.obs_dim) and obs.dtype == np.float32
        assert env.obs_dim == L.nq + L.nv + 2 + 13 * L.nprop + 3 * len(L.pair_props)
        assert set(info) >= {"success", "final_success", "held", "randomization", "episode", "gate_flags"}
        assert set(info["randomization"]) == {"prop_xy", "prop_yaw", "prop_mass", "prop_friction", "damping",
                                              "gain"}
        assert info["randomization"]["prop_xy"].shape == (W, 1, 2)
        assert info["randomization"]["gain"].shape == (W, 3)
        np.testing.assert_allclose(obs[:, :L.nq], np.tile(env.task_scene.q0, (W, 1)), atol=1e-7)
        obs, reward, terminated, truncated, info = env.step(hold(env))
        assert obs.shape == (W, env.obs_dim) and obs.dtype == np.float32
        assert reward.shape == (W,) and reward.dtype == np.float32
        assert terminated.dtype == bool and truncated.dtype == bool and terminated.shape == (W,)
        for key in ("success", "final_success", "held", "gate_flags", "unstable"):
            assert info[key].shape == (W,), key
        assert info["final_obs"].shape == (W, env.obs_dim)
        assert info["episode"]["tick"].tolist() == [1, 1]
        assert np.isfinite(obs).all()


def test_bad_inputs(lift):
    with pytest.raises(CaliperError, match="engine"):
        VecEnv(lift, W, engine="bullet")
    with pytest.raises(CaliperError, match="num_envs"):
        VecEnv(lift, 0)
    with pytest.raises(CaliperError, match="EnvRandomization"):
        VecEnv(lift, W, randomization={"prop_xy": 0.1})
    env = VecEnv(lift, W)
    with pytest.raises(CaliperError, match="reset"):
        env.step(hold(env))
    env.reset()
    with pytest.raises(CaliperError, match=r"expected a numeric array of shape \(2, 3\).*j1, j2, gripper"):
        env.step(np.zeros((W, 2)))
    env.close()
    with pytest.raises(CaliperError, match="closed"):
        env.reset()


def test_same_seed_same_bytes(lift):
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1.0, 1.0, (50, W, 3)) * np.array([1.5, 1.5, 0.04])
    runs = []
    for _ in range(2):
        with VecEnv(lift, W, seed=7) as env:
            frames = [env.reset()[0].tobytes()]
            frames += [env.step(a)[0].tobytes() for a in actions]
            runs.append(frames)
    assert runs[0] == runs[1]
    with VecEnv(lift, W, seed=8) as env:
        assert env.reset()[0].tobytes() != runs[0][0]


def test_disabling_a_field_keeps_the_other_draws(lift):
    full = VecEnv(lift, W, seed=3, randomization=EnvRandomization(gravity=(0.9, 1.1)))
    less = VecEnv(lift, W, seed=3, randomization=EnvRandomization(gravity=(0.9, 1.1), prop_mass=None))
    a, b = full.reset()[1]["randomization"], less.reset()[1]["randomization"]
    assert set(a) == set(RANDOM_FIELDS) and set(b) == set(RANDOM_FIELDS) - {"prop_mass"}
    for k in b:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    # the draws are applied to each world's model (nominal x factor) and start pose
    cube = lift.scene.layout.prop_body["cube"]
    nominal = lift.scene.mj
    for w in range(W):
        m = full.world_model(w)
        np.testing.assert_allclose(m.body_mass[cube], nominal.body_mass[cube] * a["prop_mass"][w, 0])
        np.testing.assert_allclose(m.actuator_gainprm[:, 0], nominal.actuator_gainprm[:, 0] * a["gain"][w])
        np.testing.assert_allclose(m.opt.gravity, nominal.opt.gravity * a["gravity"][w])
        assert less.world_model(w).body_mass[cube] == nominal.body_mass[cube]
    cube_xy = observation_parts(full.layout, full.reset(seed=3)[0])["prop_pos"][:, 0, :2]
    np.testing.assert_allclose(cube_xy, np.array(lift.task.props[0].pos[:2]) + a["prop_xy"][:, 0], atol=2e-4)
    # the next episode draws anew
    full.reset()
    c = full.reset()[1]["randomization"]
    assert not np.array_equal(a["prop_mass"], c["prop_mass"])
    full.close()
    less.close()


def test_scripted_lift_succeeds_through_the_weld(lift):
    """Closing on the cube welds it to the jaw; the lift then meets the task's success predicate.
    The same motion with the gripper open leaves the cube on the ground."""
    with VecEnv(lift, W, randomization=None) as env:
        env.reset()
        total = np.zeros(W)
        for k in range(120):
            obs, reward, terminated, truncated, info = env.step(lift_action(env, k))
            total += reward
            if k == 8:                    # the gated gripper target passes the close band at tick 6
                assert info["held"].tolist() == [0, 0]
            if terminated.any():
                break
        assert terminated.all() and not truncated.any()
        # the dense reward (tasks.rewards): success weight on the success tick plus the terms
        sparse = reward - sum(info["reward_terms"].values())
        np.testing.assert_allclose(sparse, [lift.task.reward.success] * W, rtol=1e-6)
        assert info["final_success"].all()
        np.testing.assert_allclose(info["episode"]["final_return"], total, rtol=1e-5)
        assert info["episode"]["final_length"].tolist() == [k + 1, k + 1]
        # same-step auto-reset: the returned obs starts episode 1, final_obs shows the lifted cube
        L, z0 = env.layout, lift.task.props[0].pos[2]
        assert (observation_parts(L, info["final_obs"])["prop_pos"][:, 0, 2] - z0 >= 0.08 - 1e-6).all()
        np.testing.assert_allclose(observation_parts(L, obs)["q"], np.tile(lift.q0, (W, 1)), atol=1e-7)
        assert info["episode"]["index"].tolist() == [1, 1] and info["episode"]["tick"].tolist() == [0, 0]
        assert info["held"].tolist() == [-1, -1] and not info["success"].any()

    with VecEnv(lift, W, randomization=None) as env:
        env.reset()
        for j in range(k + 20):
            obs, reward, terminated, truncated, info = env.step(lift_action(env, j, close=False))
            assert not terminated.any()
        assert info["held"].tolist() == [-1, -1]
        assert np.abs(observation_parts(L, obs)["prop_pos"][:, 0, 2] - z0).max() < 0.02


def test_auto_reset_only_finished_worlds(lift):
    with VecEnv(lift, W, randomization=None) as env:
        env.reset()
        for k in range(120):
            a = lift_action(env, k)
            a[1] = hold(env)[1]                        # world 1 just holds
            obs, reward, terminated, truncated, info = env.step(a)
            if terminated.any():
                break
        assert terminated.tolist() == [True, False] and info["final_success"].tolist() == [True, False]
        assert info["episode"]["index"].tolist() == [1, 0]
        assert info["episode"]["tick"].tolist() == [0, k + 1]
        np.testing.assert_array_equal(info["final_obs"][1], obs[1])
        assert not np.array_equal(info["final_obs"][0], obs[0])


def test_inactive_worlds_are_frozen_and_the_others_unchanged(lift):
    """step(action, active): frozen worlds keep their state, tick and gate bit for bit; active
    worlds give the bytes of a run without the mask."""
    runs = []
    for masked in (False, True):
        with VecEnv(lift, W, randomization=None) as env:
            env.reset()
            out = []
            for k in range(40):
                active = np.array([True, k < 20]) if masked else None
                obs, reward, term, trunc, info = env.step(lift_action(env, k), active)
                out.append((obs.copy(), info["episode"]["tick"].copy(), term.copy()))
            runs.append(out)
    for k, ((o_full, t_full, d_full), (o_mask, t_mask, d_mask)) in enumerate(zip(*runs, strict=True)):
        np.testing.assert_array_equal(o_mask[0], o_full[0])         # world 0 active throughout
        assert t_mask[0] == t_full[0] and d_mask[0] == d_full[0]
        if k < 20:
            np.testing.assert_array_equal(o_mask[1], o_full[1])
        else:                                                       # world 1 frozen from tick 20 on
            np.testing.assert_array_equal(o_mask[1], runs[1][19][0][1])
            assert t_mask[1] == 20 and not d_mask[1]
    with VecEnv(lift, W, randomization=None) as env:
        env.reset()
        with pytest.raises(CaliperError, match="active: expected a bool array of shape"):
            env.step(hold(env), np.array([1, 0]))


def test_truncation_at_the_horizon(lift):
    short = dataclasses.replace(lift, task=dataclasses.replace(lift.task, horizon_s=0.1))    # 5 ticks
    with VecEnv(short, W) as env:
        assert env.horizon == 5
        env.reset()
        for k in range(5):
            obs, reward, terminated, truncated, info = env.step(hold(env))
            assert truncated.tolist() == [k == 4] * W and not terminated.any()
        assert not info["final_success"].any()
        assert info["episode"]["final_length"].tolist() == [5, 5]
        assert info["episode"]["index"].tolist() == [1, 1]
        draws = info["randomization"]["prop_mass"]
        obs, *_, info = env.step(hold(env))
        assert info["episode"]["tick"].tolist() == [1, 1]
        assert not np.array_equal(draws, env.reset()[1]["randomization"]["prop_mass"])


def test_gate_clamps_an_out_of_limit_action(lift):
    with VecEnv(lift, W, randomization=None) as env:
        env.reset()
        a = hold(env)
        a[:, 0] = 10.0                                     # j1 limit is 1.5 rad
        for _ in range(40):
            obs, reward, terminated, truncated, info = env.step(a)
        assert (info["gate_flags"] & F.POSITION_CLAMP).all()
        assert (obs[:, 0] <= 1.5 + 0.02).all()
        a[:, 0] = np.nan                                   # non-finite: the last command stands
        obs, *_, info = env.step(a)
        assert (info["gate_flags"] & F.NONFINITE_TARGET).all() and np.isfinite(obs).all()


def test_unstable_world_is_truncated_and_reset(lift, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)                              # MuJoCo logs its warning to MUJOCO_LOG.TXT
    with VecEnv(lift, W, randomization=None) as env:
        env.reset()
        env._v["qvel"][0, 0] = np.nan                        # MuJoCo resets a non-finite state
        obs, reward, terminated, truncated, info = env.step(hold(env))
        assert info["unstable"].tolist() == [True, False] and truncated.tolist() == [True, False]
        assert np.isfinite(obs).all() and info["episode"]["index"].tolist() == [1, 0]


def test_gymnasium_vector_env(lift):
    gymnasium = pytest.importorskip("gymnasium")
    from tasks.gym import ENV_IDS, CaliperVectorEnv

    assert "caliper/lift-cube-v0" in ENV_IDS and len(ENV_IDS) == 5
    envs = gymnasium.make_vec("caliper/lift-cube-v0", num_envs=W)
    assert isinstance(envs.unwrapped, CaliperVectorEnv) and envs.num_envs == W
    assert envs.metadata["autoreset_mode"] == gymnasium.vector.AutoresetMode.SAME_STEP
    envs.close()

    envs = CaliperVectorEnv(lift, W)
    assert envs.single_action_space.shape == (3,) and envs.action_space.shape == (W, 3)
    np.testing.assert_allclose(envs.single_action_space.high, [1.5, 1.5, 0.04])
    obs, info = envs.reset(seed=5)
    assert envs.observation_space.contains(obs)
    assert np.array_equal(obs, envs.reset(seed=5)[0])                 # reset(seed) is deterministic
    envs.action_space.seed(0)
    last = None
    for _ in range(3):
        obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())
        assert envs.observation_space.contains(obs) and obs is not last
        assert reward.shape == terminated.shape == truncated.shape == (W,)
        assert "caliper_episode" in info and "episode" not in info
        assert ("final_obs" in info) == ("final_info" in info) == bool((terminated | truncated).any())
        last = obs
    with pytest.raises(CaliperError, match="expected 2 seeds"):
        envs.reset(seed=[1, 2, 3])
    with pytest.raises(CaliperError, match=r"seed\[1\] must be an integer"):
        envs.reset(seed=[1, "2"])
    stats = gymnasium.wrappers.vector.RecordEpisodeStatistics(envs)
    stats.reset(seed=0)
    stats.step(envs.action_space.sample())
    stats.close()
    assert envs.closed


def test_gym_seed_lists_and_final_keys_only_where_a_world_ended(lift):
    """gymnasium's vector rules: ``reset(seed=[...])`` takes one seed per world (equal seeds, equal
    starts; deterministic), and ``final_obs`` / ``final_info`` appear only on the steps where a
    world ended, masked to those worlds."""
    from tasks.gym import CaliperVectorEnv

    short = dataclasses.replace(lift.task, horizon_s=0.06)            # 3 ticks at 50 fps
    envs = CaliperVectorEnv(short, W)
    a, _ = envs.reset(seed=[4, 4])
    np.testing.assert_array_equal(a[0], a[1])                          # equal seeds, equal worlds
    b, info = envs.reset(seed=[4, 9])
    np.testing.assert_array_equal(b[0], a[0])
    assert not np.array_equal(b[1], a[1])
    np.testing.assert_array_equal(envs.reset(seed=[4, 9])[0], b)
    assert info["randomization"]["prop_xy"].shape == (W, 1, 2)
    hold_ = np.tile(lift.q0, (W, 1)).astype(np.float32)
    for t in range(3):
        obs, reward, terminated, truncated, info = envs.step(hold_)
        if t < 2:
            assert "final_obs" not in info and "final_info" not in info and "_final_obs" not in info
    assert truncated.all() and info["_final_obs"].tolist() == [True, True]
    assert info["final_obs"][0].shape == (envs.env.obs_dim,) and info["final_info"]["_success"].all()
    envs.close()


@pytest.mark.parametrize("name", ["place-cube", "hold-cube-high", "sort-blocks", "precise-place"])
def test_every_zoo_task_steps(name):
    with VecEnv(name, W, seed=0) as env:
        obs, info = env.reset()
        rng = np.random.default_rng(1)
        for _ in range(3):
            a = rng.uniform(env.action_low, env.action_high, (W, env.action_dim))
            obs, reward, terminated, truncated, info = env.step(a)
        assert obs.shape == (W, env.obs_dim) and np.isfinite(obs).all()
        parts = observation_parts(env.layout, obs)
        assert parts["prop_pos"].shape == (W, env.layout.nprop, 3)
        assert parts["zone_minus_prop"].shape == (W, len(env.layout.pair_props), 3)


def test_a_world_equals_a_plain_mj_step_loop(lift):
    """Warm starts, controls and contacts carry over from tick to tick: a world is bit for bit a
    sequential mj_step loop (which a per-tick mujoco.rollout call, restarting the solver from a
    zero warm start, is not)."""
    import mujoco

    ticks = 20
    with VecEnv(lift, W, randomization=None) as env:
        env.reset()
        action = np.tile(lift.q0, (W, 1))
        # gripper open (no grasp) and within one tick's rate limit: every tick's ctrl is the action
        action[:, env.layout.gripper_q] = 0.03
        for _ in range(ticks):
            env.step(action)
        got = env.world_data(1)
    mj, lay = lift.scene.mj, lift.scene.layout
    loops = []
    for keep_warmstart in (True, False):
        d = mujoco.MjData(mj)
        d.qpos[:] = lay.qpos_from_q(lift.q0[None], base=mj.qpos0)[0]
        d.ctrl[:] = action[0, lay.ctrl_to_q].astype(np.float32)
        for _ in range(ticks):
            if not keep_warmstart:
                d.qacc_warmstart[:] = 0.0
            mujoco.mj_step(mj, d, nstep=env.layout.substeps)
        loops.append(d)
    np.testing.assert_array_equal(got.qpos, loops[0].qpos)
    np.testing.assert_array_equal(got.qvel, loops[0].qvel)
    np.testing.assert_array_equal(got.qacc_warmstart, loops[0].qacc_warmstart)
    assert not np.array_equal(got.qvel, loops[1].qvel)

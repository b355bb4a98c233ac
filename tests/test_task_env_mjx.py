"""The MJX engine of the task VecEnv (tasks.env_mjx): pure jitted reset/step over vmapped worlds,
an episode as one lax.scan, and parity with the CPU engine (MuJoCo's C code) on lift-cube.

MJX compiles a control tick for ~35 s on this CPU, so the default run compiles it once (a module
fixture, randomisation off); the episode scan and the randomised engine compile anew and are
``slow``.

Parity tolerances (float32, the default precision), measured on the action script below, 2 worlds:

- ticks 0-9 (the gripper closes on the resting cube, the arm still): 3.5e-6 m apart. The contact
  sets agree; MuJoCo C places box-box contact points mid-penetration, MJX on a face, which moves
  the lever arms slightly. Tolerance 2e-5 m.
- ticks 10-24 (lift-off: the welded cube scrapes the ground and presses into the jaw box): a
  transient of up to 4.0e-3 m. Here the contact *sets* differ: for the tilted face-face jaw/cube
  pair MuJoCo C returns 2 contacts, MJX 4 (3 coincident) at points 1.5 mm away, so the constraint
  forces and the cube's acceleration differ by up to 30% for a few ticks. Tolerance 6e-3 m (1.5x the
  measured peak; this phase alone: the contact model, not the integration, sets it).
- ticks 25-99 (carried, set down, released): the weld pins the cube to the servo-driven jaw, so
  the trajectories re-converge: at most 1.4e-3 m (8.6e-4 while carried; 6.7e-4 at rest after
  the release). Tolerance 2e-3 m.

None of it is float32: under x64 the same phases measure 3.5e-6, 4.1e-3 and 1.4e-3 m. With a
start pose whose jaw does not overlap the cube (q0 = (0.1, -0.1, 0.02) instead of the zoo's 1 mm
overlap) ticks 0-9 agree to 1e-8 m and the carried cube settles back to 1e-8..3e-7 m between
contact events: the divergence is the collision detection of contact events, not the integration.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from caliper_jax.errors import CaliperError

TASK = "lift-cube"
W = 2
T = 100


@pytest.fixture(scope="module")
def task_scene():
    from tasks.env import resolve_task

    return resolve_task(TASK)


@pytest.fixture(scope="module")
def env(task_scene):
    """The MJX engine through the VecEnv front door, randomisation off (compiles on first use)."""
    from tasks.env import VecEnv

    return VecEnv(task_scene, W, engine="mjx", randomization=None)


def script(task_scene, layout, world: int):
    """(T, nq) joint targets. World 0: close, lift, carry two poses (no release). World 1: close,
    lift, carry, set the cube down, open."""
    out = np.zeros((T, layout.nq))
    for t in range(T):
        a = np.array(task_scene.q0, float)
        a[layout.gripper_q] = layout.gripper_closed
        if 10 <= t < 40:
            a[:2] = 0.45, -0.45
        elif world == 0 and t >= 40:
            a[:2] = (0.55, -0.3) if t < 70 else (0.3, -0.3)
        elif world == 1 and t >= 40:
            a[:2] = (0.55, -0.3) if t < 60 else (0.1, -0.1)
            if t >= 80:
                a[layout.gripper_q] = layout.gripper_open
        out[t] = a
    return out


def lift_policy(layout, q0):
    """Scripted pure-JAX policy (W = 2): close; once the held flag is up, world 0 swings to a pose
    that lifts the cube 0.13 m (success), world 1 to one that lifts it 0.05 m (never succeeds)."""
    c = layout.gripper_closed
    held = layout.nq + layout.nv + 1                         # observation index of the held flag
    lift = jnp.array([[0.9, -1.5, c], [0.45, -0.45, c]], jnp.float32)
    rest = jnp.asarray(q0, jnp.float32).at[layout.gripper_q].set(c)

    def policy(obs):
        return jnp.where(obs[:, held:held + 1] > 0.5, lift, rest)
    return policy


def prop_pos(layout, obs):
    """(W, 3) centre of prop 0 from observations (W, obs_dim)."""
    a = layout.nq + layout.nv + 2
    return np.asarray(obs)[:, a:a + 3].astype(np.float64)


# ---- the NumPy face, no compilation ------------------------------------------------------------------

def test_vecenv_delegates_and_checks_input(env):
    from tasks.env_mjx import MjxEnv

    assert isinstance(env, MjxEnv) and env.engine == "mjx"
    assert (env.obs_dim, env.action_dim, env.horizon) == (env.layout.obs_dim, 3, 400)
    fresh = MjxEnv(env.task_scene, W, randomization=None)
    assert fresh.jit_step is env.jit_step                     # same scene and config: one compilation
    with pytest.raises(CaliperError, match="before reset"):
        fresh.step(np.zeros((W, 3)))
    with pytest.raises(CaliperError, match="num_envs"):
        MjxEnv(env.task_scene, 0)
    with pytest.raises(CaliperError, match="randomization"):
        MjxEnv(env.task_scene, 1, randomization={"prop_xy": 0.1})


# ---- pure functions (one compilation of the tick) ----------------------------------------------------

def test_reset_and_step_are_pure_jitted_vmapped_and_deterministic(env):
    L = env.layout
    st = env.jit_reset(jax.random.PRNGKey(0))
    assert st.obs.shape == (W, L.obs_dim) and st.obs.dtype == jnp.float32
    assert st.data.qpos.shape == (W, env.task_scene.scene.mj.nq)
    np.testing.assert_array_equal(st.held, -1)
    np.testing.assert_array_equal(st.tick, 0)
    close = np.array(env.task_scene.q0, np.float32)
    close[L.gripper_q] = L.gripper_closed
    swing = np.array([0.3, -0.2, L.gripper_open], np.float32)
    a = jnp.asarray(np.stack([close, swing]))

    s1 = env.jit_step(st, a)
    s2 = env.jit_step(st, a)                                    # same input, same bytes
    for x, y in zip(jax.tree_util.tree_leaves(s1), jax.tree_util.tree_leaves(s2), strict=True):
        assert np.asarray(x).tobytes() == np.asarray(y).tobytes()
    assert s1.held.tolist() == [0, -1]                          # world 0 took the cube, world 1 did not
    np.testing.assert_array_equal(s1.tick, 1)
    assert not np.allclose(s1.data.qpos[0], s1.data.qpos[1])
    # worlds are independent lanes: world 0 does not see what world 1 is told
    s3 = env.jit_step(st, jnp.asarray(np.stack([close, close])))
    np.testing.assert_allclose(s3.data.qpos[0], s1.data.qpos[0], rtol=0, atol=1e-7)
    np.testing.assert_allclose(s3.obs[0], s1.obs[0], rtol=0, atol=1e-6)
    # a new key restarts the streams without retracing reset or step
    s4 = env.jit_step(env.jit_reset(jax.random.PRNGKey(1)), a)
    np.testing.assert_array_equal(s4.obs, s1.obs)               # randomisation off: keys change nothing
    assert env.compile_counts() == {"reset": 1, "step": 1, "rollout": 0, "replay": 0}


def test_parity_with_the_cpu_engine_first_100_ticks(env, task_scene):
    from tasks.env import VecEnv

    L = env.layout
    actions = np.stack([script(task_scene, L, w) for w in range(W)], axis=1)     # (T, W, nq)
    cpu = VecEnv(task_scene, W, randomization=None)
    oc, ic = cpu.reset()
    om, im = env.reset(seed=0)
    assert ic.keys() == im.keys() and ic["episode"].keys() == im["episode"].keys()
    np.testing.assert_allclose(om, oc, rtol=0, atol=1e-6)
    err = np.zeros((T, W))
    for t in range(T):
        oc, rc, tc, uc, ic = cpu.step(actions[t])
        om, rm, tm, um, im = env.step(actions[t])
        assert om.dtype == oc.dtype == np.float32 and rm.dtype == rc.dtype == np.float32
        assert ic.keys() == im.keys()
        np.testing.assert_array_equal(im["held"], ic["held"])
        np.testing.assert_array_equal(im["gate_flags"], ic["gate_flags"])
        assert not (tc.any() or uc.any() or tm.any() or um.any())
        err[t] = np.linalg.norm(prop_pos(L, im["final_obs"]) - prop_pos(L, ic["final_obs"]), axis=-1)
        # the dense reward terms (tasks.rewards): the JAX twin in the scan vs the NumPy twin, within
        # what the engines' prop position gap moves them (Lipschitz: weight / scale or height <= 25 /m)
        assert im["reward_terms"].keys() == ic["reward_terms"].keys() and ic["reward_terms"]
        tol = 1e-4 + 60.0 * err[t].max()
        for name, v in ic["reward_terms"].items():
            np.testing.assert_allclose(im["reward_terms"][name], v, rtol=0, atol=tol, err_msg=name)
        np.testing.assert_allclose(rm, sum(im["reward_terms"].values()), rtol=1e-6, atol=1e-7)
        held_mjx = (im["reward_terms"]["grasp"] > 0).astype(int) - 1
        np.testing.assert_array_equal(held_mjx, np.minimum(im["held"], 0))
    assert ic["held"].tolist() == [0, -1]                       # world 1 released its cube
    assert err[:10].max() < 2e-5, err[:10].max()                # same contact set: float32 rounding
    assert err[10:25].max() < 6e-3, err[10:25].max()            # lift-off: the contact sets differ
    assert err[25:].max() < 2e-3, err[25:].max()                # welded, carried, released
    cpu.close()


# ---- slow: more compilations -------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.claim
def test_episode_as_one_scan_and_success_verdicts_match_the_cpu_engine(env, task_scene):
    """Whole episodes with a pure-JAX policy inside one lax.scan (horizon 400 ticks): world 0
    lifts, holds the lift for the task's 1 s success dwell (50 ticks), succeeds and auto-resets,
    world 1 never succeeds and is truncated at the horizon; the CPU engine running the same
    policy agrees tick for tick."""
    from tasks.env import VecEnv

    L, H = env.layout, env.horizon
    policy = lift_policy(L, task_scene.q0)
    st, tr = env.rollout(env.jit_reset(jax.random.PRNGKey(0)), policy, H)
    assert tr.terminated.shape == (H, W) and tr.obs.shape == (H, W, L.obs_dim)
    cpu = VecEnv(task_scene, W, randomization=None)
    obs, _ = cpu.reset()
    term, trunc, final = (np.zeros((H, W), bool) for _ in range(3))
    for t in range(H):
        obs, _, term[t], trunc[t], info = cpu.step(np.asarray(policy(jnp.asarray(obs))))
        final[t] = info["final_success"]
    np.testing.assert_array_equal(np.asarray(tr.terminated), term)
    np.testing.assert_array_equal(np.asarray(tr.truncated), trunc)
    np.testing.assert_array_equal(np.asarray(tr.final_success), final)
    dwell = env._dwell
    assert dwell == 50 and term[:, 0].sum() >= H // (dwell + 30)  # a lift per dwell + reach in world 0
    assert not term[:, 1].any()                                 # none in world 1
    assert trunc[:, 1].tolist().index(True) == H - 1 and not final[:, 1].any()
    np.testing.assert_array_equal(np.asarray(st.episode), [term[:, 0].sum(), 1])
    np.testing.assert_array_equal(np.asarray(tr.reward).sum(0), term.sum(0))
    cpu.close()


@pytest.mark.slow
@pytest.mark.claim
def test_randomised_worlds_are_model_leaves_drawn_like_the_cpu_engine_without_retracing(task_scene):
    from tasks.env import VecEnv
    from tasks.env_mjx import MjxEnv

    env = MjxEnv(task_scene, W, seed=3)                        # the default EnvRandomization
    cpu = VecEnv(task_scene, W, seed=3)
    _, ic = cpu.reset()
    _, im = env.reset()
    assert ic["randomization"].keys() == im["randomization"].keys() and im["randomization"]
    for k, v in ic["randomization"].items():                    # the same streams, bit for bit
        np.testing.assert_array_equal(im["randomization"][k], v)
    st = env.state
    for name, rows in st.model.items():                         # per-world leaves = CPU model rows
        assert rows.shape[0] == W
        if name != "eq_data":
            np.testing.assert_allclose(np.asarray(rows), cpu._row(name), rtol=1e-6, atol=1e-9)
    assert not np.allclose(st.model["body_mass"][0], st.model["body_mass"][1])
    a = jnp.asarray(np.broadcast_to(np.asarray(task_scene.q0, np.float32), (W, 3)))
    s1 = env.jit_step(st, a)
    s2 = env.jit_step(env.jit_reset(jax.random.PRNGKey(11)), a)  # a new draw for every world
    assert not np.allclose(s2.model["body_mass"], s1.model["body_mass"])
    assert not np.allclose(s2.obs, s1.obs)
    env.reset()
    env.step(np.asarray(a))                                     # the NumPy face: next episodes
    assert env.state.episode.tolist() == [1, 1]
    assert env.compile_counts() == {"reset": 1, "step": 1, "rollout": 0, "replay": 0}
    cpu.close()

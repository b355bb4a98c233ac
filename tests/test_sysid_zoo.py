"""Planted-parameter recovery through contact on a zoo scene (issue 22, must-show 2).

Scene: the zoo task ``sort-blocks`` as built (gripper_arm, 2 ms steps, ``implicitfast``). The arm
swings its jaw into the rubber ``short_block`` (:func:`caliper_jax.sysid.scenes.zoo_push`): the
block is pushed and tipped by a few millimetres (box-box jaw contact, box-plane ground contacts).
Planted: the block's friction (1.2, rubber) and mass (0.06 kg), and a damping of 2 N m s/rad on
``j1`` (the zoo's arm has none). docs/sysid.md ("Zoo scene") gives the measured table.

The MJX fits compile for about a minute on a loaded CPU and run another one or two: they are
``slow``; the default test checks the identifiability claims on MuJoCo C alone."""
from __future__ import annotations

import jax
import numpy as np
import pytest

from caliper_jax import sysid
from caliper_jax.errors import CaliperError
from caliper_jax.sysid import scenes
from caliper_jax.sysid.identify import POS_FLOOR, VEL_FLOOR

pytestmark = pytest.mark.x64

TASK = "sort-blocks"
PARAMS = "friction:short_block,mass:short_block,damping:j1"
TRUTH = np.array([1.2, 0.06, 2.0])
START = TRUTH * np.array([1.3, 0.75, 1.5])
STEPS = 120         # 0.24 s per episode at 2 ms
CHUNK = 4


@pytest.fixture(scope="module")
def zoo():
    from tasks.env import resolve_task

    ts = resolve_task(TASK)
    mj = ts.scene.mj
    qpos0, ctrl = scenes.zoo_push(mj, ts.q0, STEPS)
    ps = sysid.param_set(mj, PARAMS)
    data = sysid.planted_dataset(mj, ps, TRUTH, qpos0=qpos0, ctrl=ctrl)
    return mj, ps, qpos0, ctrl, data


def _body_qpos(mj, name):
    import mujoco

    b = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_BODY, name)
    return int(mj.jnt_qposadr[mj.body_jntadr[b]])


def test_zoo_push_moves_the_short_block_and_only_it_identifiability_on_mujoco_c(zoo):
    """Which parameters these motions can identify, on MuJoCo C (no MJX): the jaw moves the short
    block in every episode and never reaches the tall one; the tall block's friction (wood 0.45)
    is hidden by the ground's 1.0 (MuJoCo takes the larger of two geoms' coefficients): a 1%
    change moves nothing; its mass only shifts its resting sink (measured 1.2e-5 at most in any
    state feature, 2e-5 of the short block's mass effect). The short block's friction (rubber 1.2
    > 1.0) and mass and the arm's damping all change the motion."""
    mj, ps, qpos0, ctrl, data = zoo
    s, t = _body_qpos(mj, "short_block"), _body_qpos(mj, "tall_block")
    moved = np.linalg.norm(data.qpos[:, :, s:s + 3] - data.qpos[:, :1, s:s + 3], axis=-1).max(axis=1)
    assert np.all(moved > 1e-3), moved                                   # measured 4-6 mm
    assert np.abs(data.qpos[:, :, t:t + 3] - data.qpos[:, :1, t:t + 3]).max() < 1e-8
    every = sysid.param_set(mj, "friction,mass,damping:j1")
    base = every.nominal.copy()
    base[every.names.index("damping:j1")] = TRUTH[2]
    ref = sysid.planted_dataset(mj, every, base, qpos0=qpos0, ctrl=ctrl)
    effect = {}
    for k, name in enumerate(every.names):
        v = base.copy()
        v[k] *= 1.01
        p = sysid.planted_dataset(mj, every, v, qpos0=qpos0, ctrl=ctrl)
        effect[name] = float(np.abs(np.concatenate([p.qpos - ref.qpos, p.qvel - ref.qvel], -1)).max())
    assert effect["friction:tall_block"] == 0.0, effect
    assert effect["mass:tall_block"] < 1e-3 * effect["mass:short_block"], effect     # measured 2e-5 x
    for name in ("friction:short_block", "mass:short_block", "damping:j1"):
        assert effect[name] > 1e-4, effect
    with pytest.raises(CaliperError, match="ctrl: expected shape"):
        sysid.planted_dataset(mj, ps, TRUTH, ctrl=np.zeros((2, 5, 2)))
    with pytest.raises(CaliperError, match="engine: expected"):
        sysid.planted_dataset(mj, ps, TRUTH, ctrl=ctrl, engine="warp")


@pytest.fixture(scope="module")
def evaluator(zoo):
    mj, ps, *_ = zoo
    with jax.enable_x64(True):
        return sysid.Evaluator(mj, ps, CHUNK, block=8)


def _fit(zoo, ev, data):
    mj, ps, *_ = zoo
    return sysid.identify(mj, data, ps, start=START, chunk=CHUNK, evaluator=ev, validation=0.25,
                          key=jax.random.PRNGKey(0), iterations=25)


# slow: MJX compiles the zoo scene's Jacobian for ~1 min and the fit runs ~1 min on a loaded CPU;
# test_zoo_push_moves_the_short_block_and_only_it_identifiability_on_mujoco_c covers the cheap part
@pytest.mark.slow
def test_zoo_planted_recovery_mjx_data_is_exact(zoo, evaluator):
    """Data from MJX itself (the fit's engine) at the planted values: through the jaw's box-box
    and the ground's box-plane contacts the three parameters come back to solver precision from
    30% / 25% / 50% off (measured: 1e-13 relative, 6 LM iterations, validation RMSE 5.0e-3 ->
    6.5e-16)."""
    mj, ps, qpos0, ctrl, _ = zoo
    data = sysid.planted_dataset(mj, ps, TRUTH, qpos0=qpos0, ctrl=ctrl, engine="mjx")
    res = _fit(zoo, evaluator, data)
    np.testing.assert_allclose(res.values, TRUTH, rtol=1e-6)
    s = res.summary()["rmse_all_features"]
    assert s["validation"]["after"] < 1e-6 * s["validation"]["before"]
    assert np.all(res.sensitivity > 0.1)


# slow: same compile as above (shared evaluator) plus a 25-iteration fit
@pytest.mark.slow
def test_zoo_planted_recovery_mujoco_c_data_limited_by_engine_mismatch(zoo, evaluator):
    """Data from MuJoCo C: MJX's box-box collision gives the jaw-block contact a different
    manifold than C's (four clipped points where C keeps one edge point, measured), which acts as
    a noise floor: the fit lands where MJX best explains C's data, not at the truth. The bias is
    the linearised least-squares response to the residual at the truth, d = -(J^T J)^-1 J^T r;
    the found values must sit within 2 d + 2% of the truth per parameter (measured ~ +11%, -9%,
    -14%), the cost there must be below the cost at the truth (it is the engine floor, not a
    stall), and the held-out episode's RMSE must still drop (measured 6.2e-3 -> 3.4e-3)."""
    mj, ps, _, _, data = zoo
    res = _fit(zoo, evaluator, data)
    train = sysid.make_chunks(data.take(res.train_episodes), CHUNK)
    states = np.concatenate([data.qpos[res.train_episodes], data.qvel[res.train_episodes]], -1)
    floor = np.r_[np.full(mj.nq, POS_FLOOR), np.full(mj.nv, VEL_FLOOR)]     # as identify() scales
    scale = np.maximum(states.reshape(-1, mj.nq + mj.nv).std(axis=0), floor)
    r, J = evaluator.residuals(TRUTH, train, scale, jacobian=True)
    bias = -np.linalg.lstsq(J, r, rcond=None)[0]
    found = res.values - TRUTH
    assert np.all(np.abs(found) <= 2 * np.abs(bias) + 0.02 * TRUTH), (found / TRUTH, bias / TRUTH)
    assert res.cost[-1] < 0.5 * float(r @ r)
    s = res.summary()["rmse_all_features"]
    assert s["validation"]["after"] < 0.7 * s["validation"]["before"]

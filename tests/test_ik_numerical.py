"""Numerical IK: FK o IK round trips on real arms, hard limits, locked joints, position-only and
weighted targets, determinism, float32. One compile per robot: every call on a robot uses the
same batch size N (the weights, masks, key and seeds are traced arguments)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from caliper_jax import api as core_api
from caliper_jax import kinematics
from caliper_jax.errors import CaliperError
from caliper_jax.ik import default_seed, ik, ik_position, numerical
from caliper_jax.ik.chain import frame_pose_jacobian
from caliper_jax.loading import load

ROBOTS = {"panda": "panda_hand_tcp", "ur5": "tool0", "so101": "gripper_frame_link", "xarm7": "link_eef"}
N = 256
EPS32 = float(np.finfo(np.float32).eps)
# float32, the user's precision: the solver stops at 100 eps (numerical.effective_tol, 1.2e-5 m /
# rad); the independent FK check adds its own rounding. Measured: successes at <= 100 eps on all
# four arms. (The float64 gates were 1e-6 m / 1e-5 rad.)
POS_TOL = ROT_TOL = 2 * numerical.effective_tol(numerical.IKOptions(), jnp.float32)


def random_qs(model, n, seed):
    """Uniform within the limits (+-pi where unbounded), drawn on the host."""
    lo, hi = np.asarray(model.qpos_lower), np.asarray(model.qpos_upper)
    lo, hi = np.where(np.isfinite(lo), lo, -np.pi), np.where(np.isfinite(hi), hi, np.pi)
    return np.random.default_rng(seed).uniform(lo, hi, (n, model.nq))


def fk_frame(model, qs, frame):
    return np.array(core_api.fk(model, qs)[..., model.frame_id(frame), :, :])


def pose_errors(model, qs, T, frame):
    """Independent check through the core FK: (position error, rotation angle) per target."""
    T_got = fk_frame(model, qs, frame)
    pos = np.linalg.norm(T_got[..., :3, 3] - T[..., :3, 3], axis=-1)
    R_err = np.swapaxes(T_got[..., :3, :3], -1, -2) @ T[..., :3, :3]
    cos = np.clip((np.trace(R_err, axis1=-2, axis2=-1) - 1) / 2, -1, 1)
    # accurate small angles: |R - R^T| / 2 = sin(angle)
    sin = np.linalg.norm(np.stack([R_err[..., 2, 1] - R_err[..., 1, 2], R_err[..., 0, 2] - R_err[..., 2, 0],
                                   R_err[..., 1, 0] - R_err[..., 0, 1]], -1), axis=-1) / 2
    return pos, np.arctan2(sin, cos)


@pytest.fixture(scope="module", params=list(ROBOTS))
def solved(request):
    name = request.param
    frame = ROBOTS[name]
    model = load(name, dtype=jnp.float32)
    qs = random_qs(model, N, 7)
    T = fk_frame(model, qs, frame)          # exactly what `caliper fk --json` prints: row-major
    res = ik(model, T, frame=frame, key=0)
    return model, frame, qs, T, res


def test_round_trip_success_rate(solved):
    model, frame, _, T, res = solved
    pos, rot = pose_errors(model, res.q, T, frame)
    ok = (pos <= POS_TOL) & (rot <= ROT_TOL)
    assert ok.mean() >= 0.995, f"{model.name}: {ok.mean():.4f} within {POS_TOL:.1e} m / rad"
    assert res.success.mean() >= 0.995
    # every target the solver calls a success really is one, at its own tolerance
    assert np.all(pos[res.success] <= POS_TOL) and np.all(rot[res.success] <= ROT_TOL)
    # the solver's residual is the independent check's, to float32 rounding (measured 1.5 eps)
    np.testing.assert_allclose(res.pos_residual, pos, atol=8 * EPS32)


def test_hard_limits_never_violated(solved):
    model, _, _, _, res = solved
    lo, hi = np.asarray(model.qpos_lower), np.asarray(model.qpos_upper)
    assert np.all(res.q >= lo) and np.all(res.q <= hi)


def test_locked_joints_never_move(solved):
    model, frame, _, _, _ = solved
    seed = default_seed(model)
    names = [model.joint_names[0], model.joint_names[3]]
    cols = [model.qfull_src[model.body_qadr[model.body_id(n)]] for n in names]
    qs = random_qs(model, N, 11)
    qs[:, cols] = seed[cols]                        # reachable with those joints at the seed
    T = fk_frame(model, qs, frame)
    res = ik(model, T, frame=frame, key=3, locked=names)
    held = np.asarray(seed[cols], model.dtype)                  # the seed as the float32 solve holds it
    assert np.array_equal(res.q[:, cols], np.broadcast_to(held, (N, len(cols))))
    lo, hi = np.asarray(model.qpos_lower), np.asarray(model.qpos_upper)
    assert np.all(res.q >= lo) and np.all(res.q <= hi)
    assert res.success.mean() >= 0.95, f"{model.name}: locked success {res.success.mean():.3f}"


def test_position_only(solved):
    model, frame, _, T, _ = solved
    res = ik_position(model, T[:, :3, 3], frame=frame, key=1)
    pos, _ = pose_errors(model, res.q, T, frame)
    assert (pos <= POS_TOL).mean() >= 0.995
    assert np.all(res.q >= np.asarray(model.qpos_lower)) and np.all(res.q <= np.asarray(model.qpos_upper))


def test_weighted_pose(solved):
    model, frame, _, T, _ = solved
    res = ik(model, T, frame=frame, key=2, pos_weight=1.0, rot_weight=0.2)
    pos, rot = pose_errors(model, res.q, T, frame)
    assert ((pos <= POS_TOL) & (rot <= ROT_TOL)).mean() >= 0.99


def test_unreachable_targets_fail_cleanly_and_batch_independent():
    model = load("ur5", dtype=jnp.float32)
    frame = ROBOTS["ur5"]
    qs = random_qs(model, N, 7)
    T = fk_frame(model, qs, frame)
    T[:4, :3, 3] = [[5.0, 0.0, 0.0], [0.0, 3.0, 1.0], [0.0, 0.0, -4.0], [2.0, 2.0, 2.0]]
    res = ik(model, T, frame=frame, key=0)
    assert not res.success[:4].any() and res.success[4:].mean() >= 0.995
    assert np.all(res.pos_residual[:4] > 0.5) and np.all(np.isfinite(res.q))
    # same key, same bytes; and a target's answer does not depend on its place in the batch
    again = ik(model, T, frame=frame, key=0)
    assert np.array_equal(again.q, res.q) and np.array_equal(again.iterations, res.iterations)
    flipped = ik(model, T[::-1], frame=frame, key=0)
    assert np.array_equal(flipped.q[::-1], res.q)


def test_float32_solve_jitted_directly():
    """The pure solver under a plain jit(vmap) (not the cached NumPy face), in float32 (tolerance
    floored at 100 eps)."""
    model = load("ur5", dtype=jnp.float32)
    f = model.frame_id("tool0")
    qs = random_qs(model, 64, 3)
    T = fk_frame(model, qs, "tool0")
    opts = numerical.IKOptions()
    assert 1e-6 < numerical.effective_tol(opts, jnp.float32) < 2e-5
    run = jax.jit(lambda m, T, s, k: numerical.solve_batch(m, T, s, k, frame=f, opts=opts))
    seeds = jnp.broadcast_to(jnp.asarray(default_seed(model), jnp.float32), (64, 6))
    res = run(model, jnp.asarray(T), seeds, jax.random.PRNGKey(0))
    assert res.q.dtype == jnp.float32 and res.q.shape == (64, 6)
    success = np.asarray(res.success)
    assert success.mean() >= 0.95
    pos, rot = pose_errors(model, np.asarray(res.q, np.float64), T.astype(np.float64), "tool0")
    assert np.all(pos[success] < POS_TOL) and np.all(rot[success] < ROT_TOL)        # was 1e-4


@pytest.mark.parametrize("name", ["panda"])      # the mimic-joint case; the others via test_singularity
def test_chain_pose_and_jacobian_match_core(name):
    model = load(name, dtype=jnp.float32)
    f = model.frame_id(ROBOTS[name])
    qs = jnp.asarray(random_qs(model, 16, 1))

    @jax.jit
    def both(qs):
        refs = ("local", "world")
        ours = [jax.vmap(lambda q, r=r: frame_pose_jacobian(model, q, f, r))(qs) for r in refs]
        core = [jax.vmap(lambda q, r=r: kinematics.frame_jacobian(model, q, f, r))(qs) for r in refs]
        return ours, core, jax.vmap(lambda q: kinematics.frame_pose(model, q, f))(qs)

    ours, core, T = both(qs)
    # two float32 computations of the same chain (~1 m of reach): measured 1 eps
    atol = 16 * EPS32
    for (R, p, J), Jc in zip(ours, core, strict=True):
        np.testing.assert_allclose(J, Jc, atol=atol)
        np.testing.assert_allclose(R, T[:, :3, :3], atol=atol)
        np.testing.assert_allclose(p, T[:, :3, 3], atol=atol)


def test_bad_inputs_name_the_field():
    model = load("ur5", dtype=jnp.float32)
    T = fk_frame(model, np.zeros(6), "tool0")
    with pytest.raises(CaliperError, match="transposed"):
        ik(model, T.T)
    with pytest.raises(CaliperError, match="no frame named"):
        ik(model, T, frame="nope")
    with pytest.raises(CaliperError, match="seed_q"):
        ik(model, T, seed_q=np.zeros(3))
    with pytest.raises(CaliperError, match="restarts"):
        ik(model, T, restarts=0)
    with pytest.raises(CaliperError, match="fixed to the world"):
        ik(model, T, frame="base_link")

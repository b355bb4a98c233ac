"""Kinematics and dynamics against Pinocchio on the fixture robots and on real robots from
example-robot-data: float64 (x64) to 1e-10 / 1e-8, and float32, the user's precision, to a few eps32:
poses and Jacobians 16 eps (measured <= 4 eps), torques, M and energies 64 eps relative (measured
<= 24 eps), forward dynamics cond(M) eps (measured <= 0.4 cond(M) eps; cond(M) reaches 3e4 on
solo12). The float32 gates were 2e-5 and 5e-3 (~170 and ~4e4 eps)."""
import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import robots
from caliper_jax import configuration, dynamics, kinematics
from caliper_jax.loading import load
from tests.pin_reference import PinPair

EPS32 = float(np.finfo(np.float32).eps)

NCONF = 12
# (registry name, floating base, honour mimic)
CASES = [
    ("pendulum2", False, True), ("collide_arm", False, True), ("gripper_arm", False, True),
    ("toy", False, True),
    ("panda", False, False), ("panda", False, True), ("ur5", False, True), ("so101", False, True),
    ("xarm7", False, True), ("z1", False, True), ("kinova", False, True), ("solo12", True, True),
    ("double_pendulum", False, True),
]


def _needs_erd(name):
    if name not in robots.FIXTURES and robots.example_robot_data_dir() is None:
        pytest.skip("example-robot-data is not installed")


def _batched_all(model):
    """One compiled function computing everything we compare, vmapped over configurations."""
    def one(q, v, a):
        T = kinematics.forward_kinematics(model, q)
        Jw = kinematics.frame_jacobians(model, q, "world")
        Jl = kinematics.frame_jacobians(model, q, "local")
        return dict(T=T, Jw=Jw, Jl=Jl, tau=dynamics.rnea(model, q, v, a), M=dynamics.crba(model, q),
                    qdd=dynamics.forward_dynamics_cholesky(model, q, v, a),
                    ke=dynamics.kinetic_energy(model, q, v), pe=dynamics.potential_energy(model, q))
    return jax.jit(jax.vmap(one))


@pytest.fixture(scope="module", params=CASES, ids=lambda c: f"{c[0]}{'-float' if c[1] else ''}"
                f"{'' if c[2] else '-nomimic'}")
def case(request):
    name, floating, mimic = request.param
    _needs_erd(name)
    with jax.enable_x64(True):      # shared by the float64 and float32 tests: built in float64
        return _case(name, floating, mimic)


def _case(name, floating, mimic):
    model = load(name, floating=floating, mimic=mimic, dtype=jnp.float64)
    pair = PinPair(model, robots.resolve(name), floating=floating, mimic=mimic)
    key = jax.random.PRNGKey(7)
    kq, kv, ka = jax.random.split(key, 3)
    qs = jax.vmap(lambda k: configuration.random_configuration(model, k))(jax.random.split(kq, NCONF))
    vs = jax.random.normal(kv, (NCONF, model.nv), jnp.float64)
    accs = jax.random.normal(ka, (NCONF, model.nv), jnp.float64)
    return name, model, pair, np.asarray(qs), np.asarray(vs), np.asarray(accs)


def _pin_frame(pm, name, kind):
    """Pinocchio frame id for one of our frames (links are BODY frames, joints JOINT/FIXED)."""
    types = [pin.FrameType.BODY] if kind == "link" else [pin.FrameType.JOINT, pin.FrameType.FIXED_JOINT]
    for t in types:
        if pm.existFrame(name, t):
            return pm.getFrameId(name, t)
    raise AssertionError(f"Pinocchio has no frame {name!r} of kind {kind}")


def _pin_results(pair, q, v, a):
    pm, pd = pair.pm, pair.pd
    qp, perm = pair.q(q), pair.v_perm()
    vp, ap = np.zeros(pm.nv), np.zeros(pm.nv)
    vp[perm], ap[perm] = v, a
    pin.computeJointJacobians(pm, pd, qp)
    pin.updateFramePlacements(pm, pd)
    out = {"T": {}, "Jw": {}, "Jl": {}}
    for name, kind in zip(pair.model.frame_names, pair.model.frame_kind, strict=True):
        fid = _pin_frame(pm, name, kind)
        out["T"][name] = pd.oMf[fid].homogeneous.copy()
        out["Jw"][name] = pin.getFrameJacobian(pm, pd, fid, pin.LOCAL_WORLD_ALIGNED)[:, perm]
        out["Jl"][name] = pin.getFrameJacobian(pm, pd, fid, pin.LOCAL)[:, perm]
    out["tau"] = pin.rnea(pm, pd, qp, vp, ap)[perm]
    M = pin.crba(pm, pd, qp)
    M = np.triu(M) + np.triu(M, 1).T
    out["M"] = M[np.ix_(perm, perm)]
    if pair.model.has_mimic:  # Pinocchio's ABA has no mimic support: solve with its CRBA + RNEA
        out["qdd"] = np.linalg.solve(out["M"], a - pin.rnea(pm, pd, qp, vp, 0 * ap)[perm])
    else:
        out["qdd"] = pin.aba(pm, pd, qp, vp, ap)[perm]
    if not pair.model.has_mimic:  # Pinocchio's energy routines reject mimic joints
        out["ke"] = pin.computeKineticEnergy(pm, pd, qp, vp)
        out["pe"] = pin.computePotentialEnergy(pm, pd, qp)
    return out


def _rel(a, b):
    return np.max(np.abs(a - b)) / max(1.0, np.max(np.abs(b)))


def _compare(model, pair, qs, vs, accs, ours, tol_pose, tol_dyn, tol_qdd=None):
    """``tol_qdd``: when given, qdd's relative gate is tol_qdd * cond(M) at each configuration."""
    for k in range(len(qs)):
        ref = _pin_results(pair, qs[k], vs[k], accs[k])
        for i, name in enumerate(model.frame_names):
            np.testing.assert_allclose(ours["T"][k, i], ref["T"][name], atol=tol_pose, err_msg=name)
            np.testing.assert_allclose(ours["Jw"][k, i], ref["Jw"][name], atol=tol_pose, err_msg=name)
            np.testing.assert_allclose(ours["Jl"][k, i], ref["Jl"][name], atol=tol_pose, err_msg=name)
        keys = ("tau", "M", "qdd", "ke", "pe") if np.asarray(model.body_mass).sum() > 0 else ("tau", "M")
        for key in (k for k in keys if k in ref):  # a massless robot (toy) has no forward dynamics
            tol = tol_qdd * np.linalg.cond(ref["M"]) if key == "qdd" and tol_qdd is not None else tol_dyn
            assert _rel(np.asarray(ours[key][k]), ref[key]) < tol, (key, k)


@pytest.mark.reference
@pytest.mark.x64
def test_float64_matches_pinocchio(case):
    name, model, pair, qs, vs, accs = case
    ours = jax.tree_util.tree_map(np.asarray, _batched_all(model)(qs, vs, accs))
    _compare(model, pair, qs, vs, accs, ours, tol_pose=1e-10, tol_dyn=1e-8)


@pytest.mark.reference
def test_float32_matches_pinocchio(case):
    name, model, pair, qs, vs, accs = case
    m32 = model.astype(jnp.float32)
    f32 = lambda x: jnp.asarray(x, jnp.float32)
    ours = _batched_all(m32)(f32(qs), f32(vs), f32(accs))
    assert ours["tau"].dtype == jnp.float32 and ours["T"].dtype == jnp.float32
    ours = jax.tree_util.tree_map(lambda x: np.asarray(x, np.float64), ours)
    _compare(model, pair, qs, vs, accs, ours, tol_pose=16 * EPS32, tol_dyn=64 * EPS32, tol_qdd=4 * EPS32)


ABA_CASES = [("pendulum2", False), ("panda", False), ("solo12", True), ("ur5", False)]


@pytest.mark.reference
@pytest.mark.x64
@pytest.mark.parametrize("name,floating", ABA_CASES, ids=[c[0] for c in ABA_CASES])
def test_aba_matches_pinocchio(name, floating):
    _needs_erd(name)
    model = load(name, floating=floating, mimic=False, dtype=jnp.float64)
    pair = PinPair(model, robots.resolve(name), floating=floating)
    keys = jax.random.split(jax.random.PRNGKey(3), 3)
    qs = jax.vmap(lambda k: configuration.random_configuration(model, k))(jax.random.split(keys[0], 6))
    vs = jax.random.normal(keys[1], (6, model.nv), jnp.float64)
    taus = jax.random.normal(keys[2], (6, model.nv), jnp.float64)
    ours = np.asarray(jax.jit(jax.vmap(dynamics.aba, in_axes=(None, 0, 0, 0)))(model, qs, vs, taus))
    perm = pair.v_perm()
    for k in range(6):
        vp, tp = np.zeros(model.nv), np.zeros(model.nv)
        vp[perm], tp[perm] = np.asarray(vs[k]), np.asarray(taus[k])
        ref = pin.aba(pair.pm, pair.pd, pair.q(np.asarray(qs[k])), vp, tp)[perm]
        assert _rel(ours[k], ref) < 1e-8


MOTION_CASES = [("panda", False), ("solo12", True), ("pendulum2", False)]


@pytest.mark.reference
@pytest.mark.x64
@pytest.mark.parametrize("name,floating", MOTION_CASES, ids=[c[0] for c in MOTION_CASES])
def test_frame_motion_and_external_forces_match_pinocchio(name, floating):
    _needs_erd(name)
    model = load(name, floating=floating, mimic=False, dtype=jnp.float64)
    pair = PinPair(model, robots.resolve(name), floating=floating)
    pm, pd, perm = pair.pm, pair.pd, pair.v_perm()
    rng = np.random.default_rng(11)
    q = np.asarray(configuration.random_configuration(model, jax.random.PRNGKey(2)))
    v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
    vp, ap = np.zeros(pm.nv), np.zeros(pm.nv)
    vp[perm], ap[perm] = v, a
    qp = pair.q(q)
    pin.forwardKinematics(pm, pd, qp, vp, ap)
    pin.updateFramePlacements(pm, pd)
    frame = model.nframe - 1
    fid = _pin_frame(pm, model.frame_names[frame], model.frame_kind[frame])
    for ref, pref in (("world", pin.LOCAL_WORLD_ALIGNED), ("local", pin.LOCAL)):
        vel = kinematics.frame_velocity(model, q, v, frame, ref)
        np.testing.assert_allclose(vel, pin.getFrameVelocity(pm, pd, fid, pref).vector, atol=1e-10)
        acc = kinematics.frame_acceleration(model, q, v, a, frame, ref)
        np.testing.assert_allclose(acc, pin.getFrameAcceleration(pm, pd, fid, pref).vector, atol=1e-10)
        cls = kinematics.frame_acceleration(model, q, v, a, frame, ref, classical=True)
        np.testing.assert_allclose(cls, pin.getFrameClassicalAcceleration(pm, pd, fid, pref).vector,
                                   atol=1e-10)
    # external forces per body, body frame, [f; n]
    f_ext = rng.normal(size=(model.nbody, 6))
    fext_pin = [pin.Force.Zero() for _ in range(pm.njoints)]
    for body, jid in pair.joint_ids:
        fext_pin[jid] = pin.Force(f_ext[body])
    tau = dynamics.rnea(model, q, v, a, f_ext=jnp.asarray(f_ext))
    np.testing.assert_allclose(tau, pin.rnea(pm, pd, qp, vp, ap, fext_pin)[perm], rtol=1e-9, atol=1e-9)
    qdd = dynamics.aba(model, q, v, tau, f_ext=jnp.asarray(f_ext))
    np.testing.assert_allclose(qdd, a, rtol=1e-8, atol=1e-8)
    # potential energy for another gravity vector
    g = np.array([1.0, -2.0, -3.0])
    pm.gravity.linear = g
    ref = pin.computePotentialEnergy(pm, pd, qp)
    pm.gravity.linear = np.array([0.0, 0.0, -9.81])
    np.testing.assert_allclose(dynamics.potential_energy(model, q, gravity=g), ref, rtol=1e-10, atol=1e-10)

"""The lane kernels behind ``jax.vmap`` of ``kinematics.frame_jacobian`` / ``frame_jacobians`` and
``dynamics.aba``: the lane path is taken, it matches the reference implementation (float64 to
round-off) and Pinocchio (``computeFrameJacobian``, ``aba``), and derivatives are the reference's.

Robots: gripper_arm (a prismatic joint), ur5 (frames on the world and on fixed joints), panda (mimic
fingers, prismatic; Pinocchio without mimic). Measured lane-vs-reference gaps: Jacobians <= 1.2e-15
absolute (float64), ABA <= 4e-14 of the largest |qdd| (float64, panda's light fingers)."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import robots
from caliper_jax import configuration, dynamics, kinematics
from caliper_jax.loading import load

BATCH = 96          # >= lanes.MIN_BATCH: the lane path
X64 = pytest.mark.x64
F32 = jnp.float32
EPS32 = float(np.finfo(np.float32).eps)
HAVE_ERD = robots.example_robot_data_dir() is not None
needs_erd = pytest.mark.skipif(not HAVE_ERD, reason="example-robot-data is not installed")


def _draws(model, n, seed=0):
    kq, kv, ka = jax.random.split(jax.random.PRNGKey(seed), 3)
    qs = jax.vmap(lambda k: configuration.random_configuration(model, k))(jax.random.split(kq, n))
    shape = (n, model.nv)
    return qs, jax.random.normal(kv, shape, model.dtype), jax.random.normal(ka, shape, model.dtype)


def _primitives(jaxpr):
    """Names of the primitives in a closed jaxpr (its text form, sub-jaxprs included)."""
    return set(re.findall(r"= ([a-z_]+)\[?", str(jaxpr))) | set(re.findall(r"\b([a-z_]+)\[", str(jaxpr)))


def _jacobians(model, frame):
    """Every Jacobian flavour, vmapped (lane path) and reference, in one compiled function."""
    def fast(q):
        return {r: (kinematics.frame_jacobian(model, q, frame, r), kinematics.frame_jacobians(model, q, r))
                for r in kinematics.REFERENCES}

    def ref(q):
        return {r: (kinematics._frame_jacobian_reference(model, q, frame, r),
                    kinematics._frame_jacobians_reference(model, q, r)) for r in kinematics.REFERENCES}

    return jax.jit(lambda qs: (jax.vmap(fast)(qs), jax.vmap(ref)(qs)))


# ---- frame Jacobian ------------------------------------------------------------------------------

# slow: ur5 and the mimic panda add frames on fixed joints and folded mimic columns to what
# gripper_arm (prismatic, a frame on the world) shows; the default float32 panda test covers the fold
JAC_CASES = [pytest.param("gripper_arm", True, id="gripper_arm")]
if HAVE_ERD:
    JAC_CASES += [pytest.param("ur5", True, id="ur5", marks=pytest.mark.slow),
                  pytest.param("panda", True, id="panda-mimic", marks=pytest.mark.slow)]


@X64
@pytest.mark.parametrize("name, mimic", JAC_CASES)
def test_vmapped_jacobians_take_the_lane_path_and_match_the_reference(name, mimic):
    model = load(name, dtype=jnp.float64, mimic=mimic)
    frame = max(f for f in range(model.nframe) if model.frame_body[f] >= 0)   # ur5's last is on the world
    qs, _, _ = _draws(model, 150)                     # 150: blocks of 128 lanes plus padding
    one = jax.vmap(lambda q: kinematics.frame_jacobian(model, q, frame))
    assert "div" in _primitives(jax.make_jaxpr(one)(qs))      # the lane kernel's fusion boundary
    fast, ref = _jacobians(model, frame)(qs)
    for r in kinematics.REFERENCES:
        assert fast[r][0].shape == (150, 6, model.nv)
        assert fast[r][1].shape == (150, model.nframe, 6, model.nv)
        np.testing.assert_allclose(fast[r][0], ref[r][0], rtol=0, atol=4e-15, err_msg=r)
        np.testing.assert_allclose(fast[r][1], ref[r][1], rtol=0, atol=4e-15, err_msg=r)
    on_world = np.array(model.frame_body) < 0         # frames on the world: zero Jacobians
    assert on_world.any() and not np.asarray(fast["world"][1])[:, on_world].any()


@needs_erd
def test_float32_jacobian_on_the_mimic_panda():
    model = load("panda", dtype=F32)                   # mimic fingers: folded columns
    assert model.has_mimic and model.frame_body[-1] == model.nbody - 1   # a finger frame
    qs, _, _ = _draws(model, BATCH, seed=1)
    frame = model.nframe - 1
    fast, ref = jax.jit(lambda qs: (
        jax.vmap(lambda q: kinematics.frame_jacobian(model, q, frame, "local"))(qs),
        jax.vmap(lambda q: kinematics._frame_jacobian_reference(model, q, frame, "local"))(qs)))(qs)
    assert fast.dtype == F32
    np.testing.assert_allclose(fast, ref, rtol=0, atol=16 * EPS32)   # ~1 m of reach


@needs_erd
@X64
@pytest.mark.reference
@pytest.mark.parametrize("name", ["panda", pytest.param("ur5", marks=pytest.mark.slow)])  # slow: as panda
def test_vmapped_jacobian_matches_pinocchio(name):
    import pinocchio as pin

    from tests.pin_reference import PinPair
    model = load(name, dtype=jnp.float64, mimic=False)
    pair = PinPair(model, robots.resolve(name))
    pm, pd, perm = pair.pm, pair.pd, pair.v_perm()
    qs, _, _ = _draws(model, BATCH, seed=2)
    frames = [f for f in range(model.nframe) if model.frame_body[f] >= 0][-3:]
    fast = jax.jit(jax.vmap(lambda q: [[kinematics.frame_jacobian(model, q, f, r) for f in frames]
                                       for r in kinematics.REFERENCES]))(qs)
    kinds = {"world": pin.LOCAL_WORLD_ALIGNED, "local": pin.LOCAL}
    for k in range(0, BATCH, 7):
        qp = pair.q(np.asarray(qs[k]))
        for r, per_frame in zip(kinematics.REFERENCES, fast, strict=True):
            for f, J in zip(frames, per_frame, strict=True):
                kind = model.frame_kind[f]
                types = ([pin.FrameType.BODY] if kind == "link"
                         else [pin.FrameType.JOINT, pin.FrameType.FIXED_JOINT])
                fid = next(pm.getFrameId(model.frame_names[f], t) for t in types
                           if pm.existFrame(model.frame_names[f], t))
                want = pin.computeFrameJacobian(pm, pd, qp, fid, kinds[r])[:, perm]
                np.testing.assert_allclose(J[k], want, rtol=0, atol=1e-12, err_msg=f"{r} {f}")


def test_jacobian_derivatives_are_the_references():
    model = load("gripper_arm", dtype=F32)
    qs, _, _ = _draws(model, BATCH, seed=3)
    frame = model.nframe - 1

    def loss(jac, qs):
        return jnp.sum(jax.vmap(lambda q: jac(model, q, frame, "local"))(qs) ** 2)

    g_fast = jax.jit(jax.grad(lambda qs: loss(kinematics.frame_jacobian, qs)))(qs)
    g_ref = jax.jit(jax.grad(lambda qs: loss(kinematics._frame_jacobian_reference, qs)))(qs)
    np.testing.assert_array_equal(g_fast, g_ref)          # custom_jvp: the reference's derivative
    with pytest.raises(ValueError, match="reference must be one of"):
        kinematics.frame_jacobian(model, qs[0], frame, "body")


# ---- ABA -----------------------------------------------------------------------------------------

# slow: ur5 (six revolute joints) adds nothing over panda's revolute + prismatic mix
ABA_CASES = ["gripper_arm"] + (["panda", pytest.param("ur5", marks=pytest.mark.slow)] if HAVE_ERD else [])


def _aba_both(model):
    fast = jax.vmap(dynamics.aba, in_axes=(None, 0, 0, 0))
    ref = jax.vmap(lambda m, q, v, t: dynamics._aba_reference(m, q, v, t), in_axes=(None, 0, 0, 0))
    return jax.jit(lambda *x: (fast(model, *x), ref(model, *x)))


@X64
@pytest.mark.reference
@pytest.mark.parametrize("name", ABA_CASES)
def test_vmapped_aba_takes_the_lane_path_and_matches_reference_and_pinocchio(name):
    model = load(name, dtype=jnp.float64, mimic=False)
    qs, vs, taus = _draws(model, 150, seed=4)
    prims = _primitives(jax.make_jaxpr(jax.vmap(dynamics.aba, in_axes=(None, 0, 0, 0)))(model, qs, vs, taus))
    assert "triangular_solve" not in prims and "div" in prims   # no 1x1 inverses: the lane kernel
    fast, ref = _aba_both(model)(qs, vs, taus)
    fast, ref = np.asarray(fast), np.asarray(ref)
    np.testing.assert_allclose(fast, ref, rtol=0, atol=1e-12 * np.abs(ref).max())
    if name in robots.FIXTURES:
        return
    import pinocchio as pin

    from tests.pin_reference import PinPair
    pair = PinPair(model, robots.resolve(name))
    perm = pair.v_perm()
    for k in range(0, 150, 11):
        vp, tp = np.zeros(model.nv), np.zeros(model.nv)
        vp[perm], tp[perm] = np.asarray(vs[k]), np.asarray(taus[k])
        want = pin.aba(pair.pm, pair.pd, pair.q(np.asarray(qs[k])), vp, tp)[perm]
        np.testing.assert_allclose(fast[k], want, rtol=0, atol=1e-10 * max(1.0, np.abs(want).max()))


def test_float32_aba_and_gravity():
    model = load("gripper_arm", dtype=F32)
    qs, vs, taus = _draws(model, BATCH, seed=5)
    g = jnp.array([0.5, -1.0, -9.0], F32)
    fast, fd, ref = jax.jit(lambda *x: (
        jax.vmap(lambda q, v, t: dynamics.aba(model, q, v, t, gravity=g))(*x),
        jax.vmap(lambda q, v, t: dynamics.forward_dynamics(model, q, v, t, gravity=g))(*x),
        jax.vmap(lambda q, v, t: dynamics._aba_reference(model, q, v, t, None, g))(*x)))(qs, vs, taus)
    assert fast.dtype == F32
    # two float32 solves, each good to cond(M) eps32 relative; cond(M) ~1e2 on the gripper arm
    np.testing.assert_allclose(fast, ref, rtol=0, atol=4e2 * EPS32 * np.abs(ref).max())
    np.testing.assert_array_equal(fd, fast)           # vmapped forward dynamics: the ABA lane kernel
    one = jax.jit(lambda q, v, t: dynamics.forward_dynamics(model, q, v, t, gravity=g))
    chol = jax.jit(lambda q, v, t: dynamics.forward_dynamics_cholesky(model, q, v, t, gravity=g))
    np.testing.assert_array_equal(one(qs[0], vs[0], taus[0]), chol(qs[0], vs[0], taus[0]))  # one: CRBA


def test_aba_derivatives_are_the_references():
    model = load("pendulum2", dtype=F32)
    qs, vs, taus = _draws(model, BATCH, seed=7)

    def loss(aba, qs):
        return jnp.sum(jax.vmap(lambda q, v, t: aba(model, q, v, t))(qs, vs, taus) ** 2)

    g_fast = jax.jit(jax.grad(lambda qs: loss(dynamics.aba, qs)))(qs)
    g_ref = jax.jit(jax.grad(lambda qs: loss(lambda m, q, v, t: dynamics._aba_reference(m, q, v, t), qs)))(qs)
    np.testing.assert_array_equal(g_fast, g_ref)          # custom_jvp: the reference's derivative


def test_aba_external_forces_use_the_reference():
    model = load("pendulum2", dtype=F32)
    qs, vs, taus = _draws(model, BATCH, seed=6)
    f_ext = jnp.ones((model.nbody, 6), F32)
    out = jax.jit(jax.vmap(lambda q, v, t: dynamics.aba(model, q, v, t, f_ext=f_ext)))(qs, vs, taus)
    one = jax.jit(lambda q, v, t: dynamics._aba_reference(model, q, v, t, f_ext))
    np.testing.assert_allclose(out[7], one(qs[7], vs[7], taus[7]), rtol=1e-6, atol=1e-6)

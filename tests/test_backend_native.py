"""The native JAX backend honours the contract: step(dt) only in whole timesteps, reset restores the
full state, e-stop latches with zero effort, atomic state copies, independent batched worlds, and
the tick-by-tick ControlLoop over it reproduces the scan rollout."""
import numpy as np
import pytest

from caliper_jax import control
from caliper_jax.backend import Backend, ControlMode
from caliper_jax.backend.native import NativeBackend
from caliper_jax.errors import CaliperError
from caliper_jax.motion import MotionLimits

H = 1e-3
Q0 = [[0.3, -0.2], [-0.5, 0.4]]   # two worlds everywhere: one compiled step per (mode, n)


@pytest.fixture(scope="module")
def pend(fixture_models):
    return fixture_models["pendulum2"]


@pytest.fixture
def backend(pend):
    return NativeBackend(pend, nworld=2, q0=Q0)


def test_contract_surface_and_initial_state(backend):
    assert isinstance(backend, Backend)
    assert (backend.nworld, backend.nq, backend.nv, backend.timestep) == (2, 2, 2, H)
    assert backend.joint_names == ("j1", "j2")
    st = backend.state()
    assert st.tick == 0 and st.time == 0.0 and not st.enabled and not st.estopped
    assert st.mode is ControlMode.POSITION
    np.testing.assert_array_equal(st.q, np.float32(Q0))        # Q0 as the float32 model holds it
    assert np.all(st.v == 0) and np.all(st.effort == 0)


def test_step_accepts_only_whole_timesteps(backend):
    for bad in (1.5e-3, 0.5e-3, 0.0, -1e-3, float("nan")):
        with pytest.raises(CaliperError, match="step"):
            backend.step(bad)
    st = backend.step(10 * H)
    assert st.tick == 10 and np.isclose(st.time, 10 * H)


def test_disabled_backend_applies_no_effort_and_enabled_servo_holds(backend, pend):
    st = backend.step(10 * H)                               # disabled: falls under gravity
    assert np.all(st.effort == 0) and np.all(np.abs(st.q - Q0) > 0)
    backend.reset()
    backend.enable()
    for _ in range(20):
        st = backend.step(10 * H)
    np.testing.assert_allclose(st.q, Q0, atol=1e-9)        # the position servo holds q0
    from caliper_jax import api
    np.testing.assert_allclose(st.effort, api.gravity_torques(pend, np.array(Q0)), atol=1e-6)


def test_reset_restores_the_full_state_and_replays_identically(backend):
    def drive():
        backend.enable()
        backend.set_mode("torque")
        out = []
        for k in range(4):
            backend.command([[1.0 * k, -2.0], [0.5, 25.0]])   # 25 N m saturates at 20
            out.append(backend.step(H))
        return out

    first = drive()
    assert np.all(np.abs(first[-1].effort) <= 20.0) and first[-1].effort[1, 1] == 20.0
    st = backend.reset()
    assert st.tick == 0 and not st.enabled and st.mode is ControlMode.POSITION
    np.testing.assert_array_equal(st.q, np.float32(Q0))
    assert np.all(st.v == 0) and np.all(st.effort == 0)
    again = drive()
    for a, b in zip(first, again, strict=True):
        assert np.array_equal(a.q, b.q) and np.array_equal(a.v, b.v) and np.array_equal(a.effort, b.effort)
    backend.reset(q=[0.1, 0.1], v=[[0.0, 1.0], [0.0, 0.0]])
    np.testing.assert_array_equal(backend.state().q, np.float32([[0.1, 0.1]] * 2))
    assert backend.state().v[0, 1] == 1.0


def test_estop_latches_zero_effort_until_cleared(backend):
    backend.enable()
    backend.step(10 * H)
    assert np.any(backend.state().effort != 0)
    backend.estop()
    st = backend.state()
    assert st.estopped and not st.enabled and np.all(st.effort == 0)
    with pytest.raises(CaliperError, match="e-stop"):
        backend.enable()
    with pytest.raises(CaliperError, match="e-stop"):
        backend.command([0.0, 0.0])
    st = backend.step(10 * H)
    assert np.all(st.effort == 0) and st.estopped
    backend.reset()
    assert backend.state().estopped                        # reset does not clear the latch
    backend.clear_estop()
    assert not backend.state().estopped and not backend.state().enabled
    backend.enable()
    assert backend.state().enabled


def test_state_is_an_atomic_copy(backend):
    st = backend.state()
    st.q[:] = 99.0
    assert np.all(backend.state().q != 99.0)
    before = backend.state()
    backend.step(10 * H)
    np.testing.assert_array_equal(before.q, np.float32(Q0))


def test_batched_worlds_are_independent(backend):
    backend.enable()
    backend.set_mode(ControlMode.TORQUE)

    def run(cmd_world1):
        backend.reset()
        backend.enable()
        backend.set_mode(ControlMode.TORQUE)
        for _ in range(3):
            backend.command([[0.5, 0.0], cmd_world1])
            st = backend.step(H)
        return st

    a, b = run([0.0, 0.0]), run([5.0, -5.0])
    assert np.array_equal(a.q[0], b.q[0]) and np.array_equal(a.effort[0], b.effort[0])
    assert not np.array_equal(a.q[1], b.q[1])


def test_commands_are_validated(backend):
    with pytest.raises(CaliperError, match="non-finite"):
        backend.command([np.nan, 0.0])
    with pytest.raises(CaliperError, match="expected"):
        backend.command([0.0, 0.0, 0.0])
    with pytest.raises(CaliperError, match="mode"):
        backend.set_mode("impedance")
    with pytest.raises(CaliperError, match="timestep"):
        NativeBackend(backend.model, timestep=0.0)


def test_velocity_mode_tracks_a_velocity(backend):
    backend.enable()
    backend.set_mode(ControlMode.VELOCITY)
    backend.command([0.5, -0.25])
    for _ in range(60):
        st = backend.step(10 * H)                           # first-order servo, time constant 1/kd
    np.testing.assert_allclose(st.v, [[0.5, -0.25]] * 2, atol=1e-5)


def test_control_loop_over_the_backend_matches_the_scan_rollout(pend, tmp_path):
    q0, goal = np.zeros(2), np.array([0.5, -0.4])
    src = control.goal_source(q0, goal, MotionLimits.from_model(pend))
    ref = control.simulate(pend, src, q0, 2000)                        # cached by tests/test_control.py
    backend = NativeBackend(pend, nworld=2, q0=q0)
    loop = control.ControlLoop(backend, pend)
    with control.Recorder(tmp_path / "ds", pend.joint_names, fps=100, nworld=2) as rec:
        results = loop.run(src, 300, recorder=rec)
        assert rec.frames == 30
        rec.save("reach")
    q = np.array([r.state.q for r in results])                          # (300, 2 worlds, 2)
    np.testing.assert_allclose(q[:, 0], ref.q[1:301], rtol=0, atol=1e-12)   # ABA vs Cholesky rounding
    np.testing.assert_array_equal(q[:, 0], q[:, 1])
    assert loop.tick == 300 and backend.state().tick == 300
    from caliper_jax.dataset import LeRobotReader
    reader = LeRobotReader(tmp_path / "ds")
    assert reader.num_episodes == 2
    ep = reader.episode(1)
    np.testing.assert_allclose(ep["observation.state"], ref.q[0:300:10].astype(np.float32), atol=1e-6)
    np.testing.assert_allclose(ep["action"], ref.command[0:300:10].astype(np.float32), atol=1e-6)

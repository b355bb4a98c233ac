"""The CPU MuJoCo backend behind the contract: physics checks, determinism, the threaded
rollout path, e-stop semantics, control sources, and domain randomisation."""
import warnings

import jax
import mujoco
import numpy as np
import pytest

from caliper_jax import api, control, dynamics
from caliper_jax.backend import ControlMode
from caliper_jax.errors import CaliperError
from caliper_jax.io import Geom
from caliper_jax.loading import load
from mjx_backend.cpu import MujocoBackend
from mjx_backend.layout import compile_scene
from mjx_backend.randomize import RandomizationSpec, sample
from mjx_backend.scene import Prop

EYE = tuple(map(tuple, np.eye(3)))


def sphere_pendulum(model):
    """pendulum2 with a 5 cm sphere at the tip of l2 and a little joint damping."""
    tip = Geom("l2", 1, "collision", "sphere", EYE, (0.0, 0.0, 0.3), (0.05,))
    return model.replace(geoms=(tip,), dof_damping=np.full(model.nv, 0.2))


def cube_scene(model, **kw):
    cube = Prop.box("cube", (0.05, 0.05, 0.05), (0.3, 0.0, 0.05), mass=0.1, material="wood")
    return compile_scene(model, ground=0.0, props=[cube], **kw)


def test_gravity_sag_with_zero_torque(fixture_models):
    m = fixture_models["pendulum2"]
    q0 = np.array([0.4, -0.3])
    b = MujocoBackend(m, q0=q0, options=dict(timestep=1e-4))
    b.enable()
    b.command(np.zeros(2))
    s = b.step(0.02)
    M = np.asarray(dynamics.crba(m, q0))
    qdd0 = np.linalg.solve(M, -np.asarray(dynamics.bias_forces(m, q0, np.zeros(2))))
    sag = s.q[0] - q0
    np.testing.assert_array_equal(np.sign(sag), np.sign(qdd0))        # falls the way gravity pulls
    np.testing.assert_allclose(sag, 0.5 * qdd0 * 0.02 ** 2, rtol=0.05)
    np.testing.assert_array_equal(s.effort, 0.0)


@pytest.mark.x64
def test_native_simulator_agrees_with_mujoco_on_pendulum2():
    """Contact-free 2-link pendulum, 0.3 s at h = 1e-4, float64: both take the same semi-implicit
    Euler steps, so they agree to rounding (measured 2.2e-16 after 3000 steps; the gate was 2e-2).
    The gate, 3000 steps x eps64 x |q| (~1.3e-12), allows rounding to accumulate at every step."""
    m = load("pendulum2", dtype=jax.numpy.float64)
    q0 = np.array([0.5, -0.4])
    _, qs, _, _ = api.simulate_passive(m, q0, None, duration=0.3, dt=1e-4, integrator="euler")
    b = MujocoBackend(m, q0=q0, actuators="none", options=dict(timestep=1e-4, contact=False))
    s = b.step(0.3)
    assert s.tick == 3000
    moved = np.abs(qs[-1] - q0).max()
    assert moved > 0.1                                              # it really swung
    assert np.abs(s.q[0] - qs[-1]).max() < 3000 * np.finfo(np.float64).eps * 2.0


def test_sphere_tipped_pendulum_settles_on_the_ground(fixture_models):
    b = MujocoBackend(sphere_pendulum(fixture_models["pendulum2"]), ground=-0.3, q0=[1.5, 0.0])
    s = b.step(2.0)
    assert np.abs(s.v).max() < 0.05                                  # settled
    contacts = b.contacts()
    assert contacts, "resting on the ground needs contacts"
    for c in contacts:
        assert {c.geom1, c.geom2} == {"ground", "l2_collision0"}
        np.testing.assert_allclose(c.normal, [0.0, 0.0, 1.0], atol=1e-9)
        assert c.depth > 0.0 and c.normal_force > 0.0


def _drive(b, commands, probe=False):
    out = []
    for cmd in commands:
        b.command(cmd)
        s = b.step(0.01)
        if probe:
            b.contacts()
            b.state()
        out.append(np.concatenate([s.q.ravel(), s.v.ravel(), b.qpos().ravel()]))
    return np.array(out)


@pytest.mark.parametrize("nworld", [1, 3])
def test_reset_gives_bitwise_identical_runs(fixture_models, nworld):
    scene = cube_scene(fixture_models["gripper_arm"], actuators="position",
                       options=dict(integrator="implicitfast"))
    b = MujocoBackend(scene, nworld, nthread=2)
    b.enable()
    commands = [[0.2, -0.1, 0.01], [0.4, 0.3, 0.03], [-0.2, 0.1, 0.0]] * 4
    first = _drive(b, commands)
    b.reset()
    second = _drive(b, commands, probe=True)                          # reading back changes nothing
    assert first.tobytes() == second.tobytes()
    b.close()


def test_rollout_equals_sequential_mj_step_per_world(fixture_models):
    """The threaded rollout path equals plain mj_step loops per world, bit for bit, with each
    step(dt) call starting the solver from a zero warmstart."""
    scene = cube_scene(fixture_models["gripper_arm"], actuators="motor")
    q0 = np.array([[0.1, 0.0, 0.0], [0.3, -0.2, 0.02], [-0.2, 0.4, 0.01]])
    b = MujocoBackend(scene, 3, q0=q0, nthread=2)
    assert b.use_rollout
    b.enable()
    taus = [np.array([[1.0, -0.5, 0.0], [2.0, 0.5, 1.0], [-1.0, 0.0, -1.0]]), np.array([0.5, 0.2, 0.1])]
    for tau in taus:
        b.command(tau)
        s = b.step(0.006)
    L = scene.layout
    for w in range(3):
        d = mujoco.MjData(scene.mj)
        d.qpos[:] = L.qpos_from_q(q0[w])[0]
        for tau in taus:
            d.ctrl[:] = np.broadcast_to(tau, (3, 3))[w][L.ctrl_to_v]
            d.qacc_warmstart[:] = 0.0
            mujoco.mj_step(scene.mj, d, nstep=3)
        assert d.qpos.tobytes() == b.qpos()[w].tobytes()
        np.testing.assert_array_equal(L.q_from_qpos(d.qpos)[0], s.q[w])
    assert s.tick == 6 and s.time == pytest.approx(0.012)


def test_step_accepts_only_multiples_of_the_timestep(fixture_models):
    b = MujocoBackend(fixture_models["pendulum2"])
    with pytest.raises(CaliperError, match="integer multiple"):
        b.step(0.003)
    with pytest.raises(CaliperError, match="positive"):
        b.step(0.0)
    s = b.step(0.006)
    assert (s.tick, s.time) == (3, pytest.approx(0.006))


def test_modes_follow_the_actuators_built(fixture_models):
    m = fixture_models["gripper_arm"]
    motor = MujocoBackend(m, actuators="motor")
    assert motor.mode is ControlMode.TORQUE
    with pytest.raises(CaliperError, match="chosen at build time"):
        motor.set_mode(ControlMode.POSITION)
    servo = MujocoBackend(m, actuators="position", options=dict(integrator="implicitfast"))
    assert servo.mode is ControlMode.POSITION
    with pytest.raises(CaliperError, match="cannot coexist"):
        servo.set_mode("torque")
    with pytest.raises(CaliperError, match="non-finite"):
        servo.command([0.0, np.nan, 0.0])
    # a new backend is disabled: commands apply no force
    motor.command([5.0, 5.0, 5.0])
    s = motor.step(0.01)
    np.testing.assert_array_equal(s.effort, 0.0)
    motor.enable()
    s = motor.step(0.002)
    np.testing.assert_allclose(s.effort, [[5.0, 5.0, 5.0]])


def test_effort_is_clamped_and_raw_ctrl_passes_through(fixture_models):
    b = MujocoBackend(fixture_models["gripper_arm"], actuators="motor")
    b.enable()
    b.command([500.0, -500.0, 0.0])
    s = b.step(0.002)
    np.testing.assert_allclose(s.effort, [[200.0, -100.0, 0.0]])      # ctrlrange = effort limit
    b.command_ctrl([1.0, 2.0, 3.0])
    assert b.ctrl_source == "ctrl"
    s = b.step(0.002)
    np.testing.assert_allclose(b.world_data().ctrl, [1.0, 2.0, 3.0])
    np.testing.assert_allclose(s.effort, [[1.0, 2.0, 3.0]])
    b.command([0.0, 0.0, 0.0])
    assert b.ctrl_source == "targets"


def test_torque_without_actuators_goes_through_qfrc_applied(fixture_models):
    b = MujocoBackend(fixture_models["pendulum2"], actuators="none", options=dict(contact=False))
    b.enable()
    b.command([3.0, -1.0])
    s = b.step(0.002)
    np.testing.assert_allclose(b.world_data().qfrc_applied, [3.0, -1.0])
    np.testing.assert_allclose(s.effort, [[3.0, -1.0]])
    b.estop()
    s = b.step(0.002)
    np.testing.assert_array_equal(b.world_data().qfrc_applied, 0.0)
    np.testing.assert_array_equal(s.effort, 0.0)


def test_estop_zeroes_torque_and_latches(fixture_models):
    b = MujocoBackend(fixture_models["gripper_arm"], actuators="motor")
    b.enable()
    b.command([10.0, 5.0, 1.0])
    b.step(0.01)
    b.estop()
    s = b.step(0.01)
    assert s.estopped and not s.enabled
    np.testing.assert_array_equal(s.effort, 0.0)
    with pytest.raises(CaliperError, match="latched"):
        b.command([0.0, 0.0, 0.0])
    with pytest.raises(CaliperError, match="latched"):
        b.enable()
    b.clear_estop()
    b.enable()
    b.command([1.0, 0.0, 0.0])
    assert b.step(0.002).effort[0, 0] == pytest.approx(1.0)


def test_estop_freezes_a_servo_at_the_current_position(fixture_models):
    m = fixture_models["gripper_arm"]
    opts = dict(integrator="implicitfast")
    b = MujocoBackend(m, actuators="position", kp=400.0, kv=20.0, options=opts)
    b.enable()
    b.command([1.0, -1.0, 0.03])
    q_stop = b.step(0.1).q[0]                                         # mid-motion
    b.estop()
    b.step(0.002)
    np.testing.assert_allclose(b.world_data().ctrl, q_stop[scene_ctrl(b)])   # frozen, not zero
    s = b.step(1.0)
    assert np.abs(s.q[0] - q_stop).max() < 0.15                        # holds near the stop pose
    assert np.abs(s.v).max() < 0.05
    # a disabled (de-energised) servo arm falls instead
    b2 = MujocoBackend(m, actuators="position", kp=400.0, kv=20.0, options=opts, q0=q_stop)
    s2 = b2.step(1.0)
    assert np.abs(s2.q[0] - q_stop).max() > 0.3


def scene_ctrl(b):
    return b.layout.ctrl_to_q


def test_control_loop_converges_through_mujoco(fixture_models):
    """caliper's ControlLoop (computed torque, kp=100, kd=20, dt=1 ms) drives the MuJoCo arm to
    a target through the backend contract."""
    m = fixture_models["gripper_arm"]
    target = np.array([0.5, -0.4, 0.02])
    b = MujocoBackend(m, actuators="motor", options=dict(timestep=0.001))
    loop = control.ControlLoop(b, m)
    for _ in range(1200):
        r = loop.step_with_target(control.setpoint(target))
    assert np.abs(r.state.q[0] - target).max() < 1e-3
    assert r.state.tick == 1200


def test_randomised_worlds_differ_and_reproduce(fixture_models):
    scene = cube_scene(fixture_models["gripper_arm"], actuators="motor")
    spec = RandomizationSpec(mass=(0.5, 1.5), friction=(0.5, 1.5))
    p1 = sample(scene, jax.random.PRNGKey(7), 4, spec)
    p2 = sample(scene, jax.random.PRNGKey(7), 4, spec)
    p3 = sample(scene, jax.random.PRNGKey(8), 4, spec)
    assert set(p1) == {"body_mass", "body_inertia", "dof_damping", "dof_frictionloss", "geom_friction",
                       "actuator_gainprm", "actuator_biasprm"}
    for k in p1:
        assert p1[k].tobytes() == p2[k].tobytes()
    assert not np.array_equal(p1["body_mass"], p3["body_mass"])
    assert len({p1["body_mass"][w, 1] for w in range(4)}) == 4         # every world its own draw
    ratio = p1["body_inertia"][:, 1] / scene.mj.body_inertia[1]
    np.testing.assert_allclose(ratio, np.repeat(p1["body_mass"][:, 1:2] / scene.mj.body_mass[1], 3, 1))

    def run(params):
        b = MujocoBackend(scene, 4, nthread=2, params=params, q0=[0.3, 0.0, 0.0])
        b.enable()
        b.command([0.0, 0.0, 0.0])
        q = b.step(0.1).q
        b.close()
        return q

    qa, qb = run(p1), run(p2)
    assert qa.tobytes() == qb.tobytes()
    assert len({round(float(x), 12) for x in qa[:, 0]}) == 4          # the worlds swing differently


def test_servo_damping_that_would_diverge_is_reported(fixture_models):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scene = compile_scene(fixture_models["gripper_arm"], actuators="position", kv=10.0)
    assert any("implicitfast" in str(w.message) for w in caught)
    assert any("'j2'" in n for n in scene.notes)

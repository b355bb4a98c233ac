"""The SafetyMonitor gate: NaN/inf targets, out-of-limit targets, over-speed steps, the latched
e-stop, the watchdog, the static-gravity e-stop and pluggable checks -- one tick at a time, then
inside closed-loop rollouts (where nothing non-finite may ever reach the plant or a backend)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from caliper_jax import control
from caliper_jax.backend.native import NativeBackend
from caliper_jax.control import flags as F

TICKS = 2000        # the same scan length as tests/test_control.py: one compile for both files
DT = 1e-3
STEP = 10.0 * DT    # pendulum2: vmax 10 rad/s
EPS32 = float(np.finfo(np.float32).eps)   # pendulum2 is the float32 fixture: commands are float32


@pytest.fixture(scope="module")
def pend(fixture_models):
    return fixture_models["pendulum2"]


@pytest.fixture(scope="module")
def gate(pend):
    fn = jax.jit(control.gate, static_argnames="mode")
    return lambda params, state, target, q=None, mode="position": fn(params, state, target, q, mode=mode)


def _state(q):
    return control.init_safety(jnp.asarray(q, jnp.float32))       # pendulum2 is float32 here


def test_non_finite_targets_never_pass(pend, gate):
    params, s = control.safety_params(pend, DT), _state([0.1, 0.2])
    for bad in ([np.nan, 0.3], [0.1, np.inf], [-np.inf, np.nan]):
        cmd, new, warn = gate(params, s, control.setpoint(jnp.array(bad)), jnp.array([0.1, 0.2]))
        np.testing.assert_array_equal(cmd.q, np.float32([0.1, 0.2]))            # the last command instead
        assert np.all(np.isfinite(cmd.qd)) and np.all(np.isfinite(cmd.qdd))
        assert int(warn.flags) & F.NONFINITE_TARGET and int(new.idle) == 1
    cmd, _, warn = gate(params, s, control.setpoint(jnp.array([0.1, 0.2]), qd=jnp.array([np.nan, 0.0])))
    np.testing.assert_array_equal(cmd.q, np.float32([0.1, 0.2]))
    assert int(warn.flags) == F.NONFINITE_TARGET and np.all(cmd.qd == 0)


def test_out_of_limit_targets_are_clamped(pend, gate):
    params = control.safety_params(pend, DT, vmax=np.inf)
    cmd, _, warn = gate(params, _state([0.0, 0.0]), control.setpoint(jnp.array([5.0, -1.0])))
    np.testing.assert_array_equal(cmd.q, np.float32([3.14, -1.0]))
    assert int(warn.flags) == F.POSITION_CLAMP and list(np.asarray(warn.joints)) == [True, False]
    assert float(cmd.qd[0]) == 0.0                       # no feed-forward on a modified joint


def test_over_speed_steps_are_rate_limited(pend, gate):
    params, s = control.safety_params(pend, DT), _state([0.0, 0.0])
    target = control.setpoint(jnp.array([0.5, -0.003]), qd=jnp.array([1.0, -3.0]))
    cmds = []
    for _ in range(60):
        cmd, s, warn = gate(params, s, target)
        cmds.append(np.asarray(cmd.q))
    cmds = np.array(cmds)
    assert np.isclose(cmds[0, 0], STEP * (1 + 1e-6)) and cmds[0, 1] == np.float32(-0.003)   # j2's small step
    # float32 commands near 0.5 rad: each step also carries the rounding of both ends
    assert np.all(np.diff(cmds[:, 0]) <= STEP * (1 + 1e-6) + 2 * EPS32 * np.abs(cmds).max())
    np.testing.assert_allclose(cmds[-1], [0.5, -0.003])    # it gets there, at vmax
    cmd, _, warn = gate(params, _state([0.0, 0.0]), target)
    assert int(warn.flags) == F.RATE_LIMIT and np.asarray(cmd.qd).tolist() == [0.0, -3.0]


def test_estop_latches_until_cleared(pend, gate):
    params, s = control.safety_params(pend, DT), _state([0.1, 0.1])
    cmd, s, warn = gate(params, s, control.setpoint(jnp.array([0.105, 0.1]), estop=True))
    assert int(warn.flags) == F.ESTOP | F.ESTOP_REQUEST and bool(s.estop)
    np.testing.assert_array_equal(cmd.q, np.float32([0.1, 0.1]))       # frozen at the last command
    for q in ([0.105, 0.1], [0.0, 0.0]):                    # a normal target does not release it
        cmd, s, warn = gate(params, s, control.setpoint(jnp.array(q)))
        assert int(warn.flags) == F.ESTOP and np.array_equal(cmd.q, np.float32([0.1, 0.1]))
    s = control.clear_estop(s, jnp.array([0.05, 0.12]))   # the robot sagged meanwhile
    cmd, s, warn = gate(params, s, control.setpoint(jnp.array([0.05, 0.12])))
    assert int(warn.flags) == 0 and not bool(s.estop)
    np.testing.assert_array_equal(cmd.q, np.float32([0.05, 0.12]))     # restarts from where the robot is
    assert bool(control.request_estop(s).estop)


def test_watchdog_holds_or_estops_after_idle_ticks(pend, gate):
    stale = control.setpoint(jnp.array([0.3, 0.3]), fresh=False)
    here = jnp.array([0.21, 0.19])
    for action, flag in (("hold", F.WATCHDOG_HOLD), ("estop", F.WATCHDOG_ESTOP | F.ESTOP)):
        params, s = control.safety_params(pend, DT, watchdog_ticks=5, watchdog=action), _state([0.2, 0.2])
        seen = []
        for _ in range(7):
            cmd, s, warn = gate(params, s, stale, here)
            seen.append(int(warn.flags))
        assert seen[:4] == [0] * 4 and seen[4:] == [flag] * 3
        if action == "hold":
            np.testing.assert_array_equal(cmd.q, here)       # holds where the robot is
            cmd, s, warn = gate(params, s, control.setpoint(jnp.array([0.21, 0.2])), here)
            assert int(warn.flags) == 0 and not bool(s.holding)   # a fresh target releases the hold
        else:
            assert bool(s.estop)
    off = control.safety_params(pend, DT)                     # 0 ticks: no watchdog
    s = _state([0.2, 0.2])
    for _ in range(10):
        _, s, warn = gate(off, s, stale, here)
    assert int(warn.flags) == 0


def test_static_gravity_above_the_effort_cap_estops(pend, gate):
    weak = pend.replace(dof_effort_limit=jnp.array([3.0, 3.0]))   # holds |g1| <= 3 N m: |q1| < ~0.53
    params = control.safety_params(weak, DT, vmax=np.inf)
    _, s, warn = gate(params, _state([0.0, 0.0]), control.setpoint(jnp.array([0.4, 0.0])))
    assert int(warn.flags) == 0
    cmd, s, warn = gate(params, _state([0.0, 0.0]), control.setpoint(jnp.array([1.0, 0.0])))
    assert int(warn.flags) == F.GRAVITY_OVERLOAD | F.ESTOP and bool(s.estop)
    np.testing.assert_array_equal(cmd.q, np.float32([0.0, 0.0]))
    params = control.safety_params(weak, DT, vmax=np.inf, gravity_check=False)
    _, s, warn = gate(params, _state([0.0, 0.0]), control.setpoint(jnp.array([1.0, 0.0])))
    assert int(warn.flags) == 0


def test_pluggable_checks_reject_commands(pend):
    keep_out = lambda q: q[0] < 0.5          # a stand-in for a collision check
    params = control.safety_params(pend, DT, vmax=np.inf, checks=(keep_out,), gravity_check=False)
    s = _state([0.2, 0.0])
    cmd, s, warn = control.gate(params, s, control.setpoint(jnp.array([0.3, 0.1])))
    assert int(warn.flags) == 0 and np.array_equal(cmd.q, np.float32([0.3, 0.1]))
    cmd, s, warn = control.gate(params, s, control.setpoint(jnp.array([0.6, 0.1])))
    assert int(warn.flags) == F.CHECK_REJECT and np.array_equal(cmd.q, np.float32([0.3, 0.1]))
    with pytest.raises(ValueError, match="not callable"):
        control.safety_params(pend, DT, checks=(1,))


def test_velocity_mode_clamps_speed_and_guards_limits(pend):
    params = control.safety_params(pend, DT, gravity_check=False)
    s = _state([0.0, 3.14])
    target = control.setpoint(jnp.zeros(2), qd=jnp.array([-25.0, 2.0]))
    cmd, _, warn = control.gate(params, s, target, jnp.array([0.0, 3.14]), mode="velocity")
    assert np.asarray(cmd.qd).tolist() == [-10.0, 0.0]       # clamped to vmax; j2 is at its upper limit
    assert int(warn.flags) == F.VELOCITY_CLAMP | F.POSITION_CLAMP


def test_non_finite_measurement_latches_estop_with_zero_effort(pend):
    from caliper_jax.control.runner import _loop_fns  # the ControlLoop's compiled tick (2 worlds)

    tick = _loop_fns(False)[0]
    params, safety = control.control_params(pend), control.safety_params(pend, DT)
    states = jax.vmap(control.init_safety)(jnp.full((2, 2), 0.1))
    q = jnp.array([[np.nan, 0.1], [0.1, 0.1]])
    tau, cmd, s, warn = tick(pend, params, safety, states, control.setpoint(jnp.array([0.1, 0.1])), q,
                             jnp.zeros((2, 2)))
    assert np.asarray(tau[0]).tolist() == [0.0, 0.0] and np.asarray(s.estop).tolist() == [True, False]
    assert int(warn.flags[0]) & F.NONFINITE_STATE and int(warn.flags[1]) == 0
    assert np.all(np.isfinite(cmd.q)) and np.all(np.isfinite(tau))


# ---- inside closed-loop rollouts ------------------------------------------------------------------

def _stream():
    k = np.arange(TICKS)
    q = np.stack([0.3 * np.sin(2 * np.pi * k / TICKS), -0.2 * np.sin(2 * np.pi * k / TICKS)], axis=1)
    return q, np.gradient(q, DT, axis=0)


@pytest.fixture(scope="module")
def faulty_run(pend):
    q, v = _stream()
    q[100:110, 0] = np.nan
    v[120, 1] = np.inf
    q[300:400, 0] = 5.0                     # out of limits (and far: rate limited)
    q[600:700, 1] += 0.8                    # an over-speed step inside the limits
    estop = np.zeros(TICKS, bool)
    estop[1500] = True                      # one press of the button
    src = control.teleop_source(q, v, estop=estop)
    return q, control.simulate(pend, src, np.zeros(2), TICKS)


def test_rollout_never_lets_non_finite_values_through(pend, faulty_run):
    _, r = faulty_run
    assert np.all(np.isfinite(r.tau)) and np.all(np.isfinite(r.command)) and np.all(np.isfinite(r.q))
    assert np.all(np.abs(r.tau) <= 20.0)
    assert np.all((r.command >= -3.14) & (r.command <= 3.14))
    steps = np.abs(np.diff(np.vstack([np.zeros(2), r.command]), axis=0))
    # rate limit at every tick, to the float32 rounding of commands up to the 3.14 rad limit
    assert np.all(steps <= STEP * (1 + 1e-6) + 2 * EPS32 * 3.14)
    nonfinite = (r.flags & F.NONFINITE_TARGET) != 0
    assert np.flatnonzero(nonfinite).tolist() == list(range(100, 110)) + [120]
    np.testing.assert_array_equal(r.command[100:110], np.repeat(r.command[99:100], 10, axis=0))
    clamp = np.flatnonzero(r.flags & F.POSITION_CLAMP)
    assert clamp.min() == 300 and clamp.max() == 399
    rate = np.flatnonzero(r.flags & F.RATE_LIMIT)
    assert {300, 400, 600, 700} <= set(rate.tolist())


def test_rollout_estop_latches_zero_effort(faulty_run):
    _, r = faulty_run
    es = (r.flags & F.ESTOP) != 0
    assert not es[:1500].any() and es[1500:].all() and bool(r.estopped)
    assert np.flatnonzero(r.flags & F.ESTOP_REQUEST).tolist() == [1500]
    assert np.all(r.tau[1500:] == 0.0)
    assert np.all(r.command[1500:] == r.command[1499])
    w = r.warnings()
    assert w["estop"] == {"count": 500, "first_tick": 1500}
    assert w["nonfinite_target"]["first_tick"] == 100


@pytest.mark.parametrize("action", ["hold", "estop"])
def test_rollout_watchdog(pend, action):
    q, v = _stream()
    valid = np.arange(TICKS) < 800
    src = control.teleop_source(q, v, valid=valid)
    safety = control.safety_params(pend, DT, watchdog_ticks=50, watchdog=action)
    r = control.simulate(pend, src, np.zeros(2), TICKS, safety=safety)
    flag = F.WATCHDOG_HOLD if action == "hold" else F.ESTOP
    hit = (r.flags & flag) != 0
    assert not hit[:849].any() and hit[849:].all()
    if action == "hold":
        np.testing.assert_array_equal(r.command[849:], np.repeat(r.q[849:850], TICKS - 849, axis=0))
        assert np.max(np.abs(r.v_final)) < 1e-3 and not r.estopped     # settled where it stood
        np.testing.assert_allclose(r.q_final, r.q[849], atol=1e-4)
    else:
        assert np.all(r.tau[849:] == 0.0) and bool(r.estopped)


def test_rollout_gravity_overload_estops(pend):
    weak = pend.replace(dof_effort_limit=jnp.array([3.0, 3.0]))
    ramp = np.stack([np.linspace(0.0, 1.2, TICKS), np.zeros(TICKS)], axis=1)
    src = control.teleop_source(ramp, np.gradient(ramp, DT, axis=0))
    r = control.simulate(weak, src, np.zeros(2), TICKS)
    first = r.warnings()["gravity_overload"]["first_tick"]
    g1 = 9.81 * (0.15 + 0.45) * np.sin(r.command[first - 1, 0])            # the last accepted command
    assert g1 <= 3.0 < 9.81 * 0.6 * np.sin(ramp[first, 0])
    assert np.all(r.tau[first:] == 0.0) and bool(r.estopped)
    assert np.all(np.abs(r.tau) <= 3.0)


def test_control_loop_never_sends_non_finite_values_to_a_backend(pend):
    backend = NativeBackend(pend, nworld=2, q0=[0.1, 0.0])
    loop = control.ControlLoop(backend, pend)      # the backend itself rejects NaN commands
    for target in ([np.nan, 0.0], [0.1, np.inf], [0.1, 0.0]):
        res = loop.step_with_target(control.setpoint(jnp.array(target)))
        assert np.all(np.isfinite(res.tau)) and np.all(np.isfinite(res.state.q))
    assert (loop.last_warn == 0).all()
    loop.step_with_target(control.setpoint(jnp.array([0.1, 0.0]), estop=True))
    assert backend.state().estopped and np.all(backend.state().effort == 0)
    with pytest.raises(ValueError, match="e-stop"):
        backend.enable()
    loop.clear_estop()
    res = loop.step_with_target(control.setpoint(jnp.array([0.1, 0.0])))
    assert not res.state.estopped and res.flags.tolist() == [0, 0]

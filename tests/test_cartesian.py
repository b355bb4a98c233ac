"""MOVE_L / MOVE_C: the tool tracks the line / arc at the IK samples, passes the via, respects the
Cartesian caps and joint speed limits (velocity stretch), reports IK failures and jumps, and
rejects degenerate input with clear errors. Panda (7 dof, full pose) and pendulum2 (planar
fixture, position only)."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from caliper_jax import api
from caliper_jax.errors import CaliperError
from caliper_jax.ik.api import jit_model
from caliper_jax.ik.chain import frame_pose
from caliper_jax.loading import load
from caliper_jax.motion import (
    CartesianLimits,
    MotionLimits,
    arc_path,
    cartesian_time_law,
    line_path,
    move_c,
    move_l,
    path_pose,
    sample_at,
    scurve_sample,
)

EPS32 = float(np.finfo(np.float32).eps)
# m and rad, at the IK samples: float32 IK stops at 100 eps (ik.numerical.effective_tol, 1.2e-5),
# and the check's own float32 FK adds rounding; measured up to 1.14e-5 (was 1e-6 in float64)
TOL = 200 * EPS32
Q_PANDA = np.array([0.0, -0.4, 0.0, -2.0, 0.0, 1.6, 0.8, 0.02])
Q_PEND = np.array([0.6, 1.4])


@pytest.fixture(scope="module")
def panda():
    model = load("panda", dtype=jnp.float32)
    frame = model.frame_id("panda_hand_tcp")
    return model, frame, api.fk(model, Q_PANDA)[frame]


@pytest.fixture(scope="module")
def pendulum(fixture_models):
    model = fixture_models["pendulum2"]
    frame = model.frame_id("tip")
    return model, frame, api.fk(model, Q_PEND)[frame]


def _rot(axis, angle):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


@functools.lru_cache(maxsize=None)
def _fk_fn(frame):
    return jax.jit(jax.vmap(lambda m, q: frame_pose(m, q, frame), in_axes=(None, 0)))


def _tool(model, frame, q):
    """T_world_tool (..., 4, 4) at q (..., nq); batches padded to a power of two (few compiles)."""
    q = np.asarray(q, np.float64)
    flat = q.reshape(-1, q.shape[-1])
    n = flat.shape[0]
    size = max(256, 1 << max(n - 1, 1).bit_length())
    R, p = _fk_fn(frame)(jit_model(model), np.concatenate([flat, np.repeat(flat[-1:], size - n, 0)]))
    T = np.tile(np.eye(4), (n, 1, 1))
    T[:, :3, :3], T[:, :3, 3] = np.asarray(R)[:n], np.asarray(p)[:n]
    return T.reshape(q.shape[:-1] + (4, 4))


_law = jax.jit(scurve_sample)
_pose = jax.jit(path_pose)
_time_law = jax.jit(cartesian_time_law)


def _rot_err(Ra, Rb):
    """Angle of Ra^T Rb from its skew part (accurate for the small angles compared here)."""
    M = np.swapaxes(Ra, -1, -2) @ Rb
    v = np.stack([M[..., 2, 1] - M[..., 1, 2], M[..., 0, 2] - M[..., 2, 0], M[..., 1, 0] - M[..., 0, 1]], -1)
    return np.arcsin(np.clip(np.linalg.norm(v, axis=-1) / 2.0, 0.0, 1.0))


@pytest.fixture(scope="module")
def line_move(panda):
    model, frame, T0 = panda
    T1 = T0.copy()
    T1[:3, 3] += [0.12, 0.15, -0.08]
    T1[:3, :3] = _rot([0.3, -0.5, 1.0], 0.4) @ T0[:3, :3]
    return T1, move_l(model, Q_PANDA, T1, frame="panda_hand_tcp")


def test_move_l_tracks_the_line_to_1e_6(panda, line_move):
    model, frame, T0 = panda
    T1, mv = line_move
    rep = mv.report
    assert rep.ok and rep.kind == "MOVE_L" and rep.frame == "panda_hand_tcp" and rep.stretch == 1.0
    T = _tool(model, frame, mv.q)
    p0, p1 = T0[:3, 3], T1[:3, 3]
    d = (p1 - p0) / np.linalg.norm(p1 - p0)
    rel = T[:, :3, 3] - p0
    off_line = np.linalg.norm(rel - (rel @ d)[:, None] * d, axis=1)
    assert off_line.max() < TOL                                        # on the line
    assert np.abs(T[:, :3, 3] - mv.poses[:, :3, 3]).max() < TOL        # at the timed point of it
    assert _rot_err(T[:, :3, :3], mv.poses[:, :3, :3]).max() < TOL     # slerped orientation
    np.testing.assert_allclose(T[-1], T1, atol=TOL)
    np.testing.assert_allclose(mv.q[0], Q_PANDA, atol=EPS32 * np.abs(Q_PANDA).max())   # float32 rounding
    # progress along the line is monotone; the orientation follows the same parameter (slerp)
    assert np.all(np.diff(rel @ d) >= -TOL)
    R_mid, _ = _pose(mv.path, 0.5)
    half = _rot([0.3, -0.5, 1.0], 0.2) @ T0[:3, :3]
    assert _rot_err(np.asarray(R_mid), half) < 16 * EPS32
    # between the samples too: the joint spline stays on the line (dense 5 ms rows)
    rows = mv.rows(0.005)
    rel = _tool(model, frame, rows.q)[:, :3, 3] - p0
    assert np.linalg.norm(rel - (rel @ d)[:, None] * d, axis=1).max() < TOL


def test_move_l_time_law_respects_the_cartesian_caps(line_move):
    _, mv = line_move
    rep, law = mv.report, mv.law
    lim = CartesianLimits()
    t = np.linspace(0.0, float(law.duration), 4001)
    st = _law(law, t)
    v, a, j = (np.abs(np.asarray(x)) for x in (st.v, st.a, st.j))
    for scale, caps in ((rep.path_length, lim[:3]), (rep.path_angle, lim[3:])):
        assert v.max() * scale <= caps[0] * (1 + 1e-9)
        assert a.max() * scale <= caps[1] * (1 + 1e-9)
        assert j.max() * scale <= caps[2] * (1 + 1e-9)
    # time-optimal for the binding cap: 0.2 m at 0.25 m/s cruises at exactly 0.25 m/s
    assert v.max() * rep.path_length == pytest.approx(0.25, rel=1e-9)
    assert rep.duration == pytest.approx(float(law.duration)) and rep.n_samples == len(mv.times)
    assert np.allclose(np.diff(mv.times), np.diff(mv.times)[0]) and np.diff(mv.times)[0] <= 0.01 + 1e-12
    # the trajectory starts and ends at rest
    ends = sample_at(mv.trajectory, [0.0, rep.duration])
    assert np.abs(ends.qd).max() < 1e-12


def test_move_l_screw_follows_the_constant_twist(panda):
    model, frame, T0 = panda
    T1 = T0.copy()
    T1[:3, :3] = _rot([0.0, 0.0, 1.0], 0.6) @ T0[:3, :3]
    T1[:3, 3] += [0.05, 0.1, 0.05]
    mv = move_l(model, Q_PANDA, T1, screw=True)
    assert mv.report.ok and mv.report.kind == "MOVE_L (screw)"
    T = _tool(model, frame, mv.q)
    assert np.abs(T[:, :3, 3] - mv.poses[:, :3, 3]).max() < TOL
    assert _rot_err(T[:, :3, :3], mv.poses[:, :3, :3]).max() < TOL
    np.testing.assert_allclose(T[-1], T1, atol=TOL)
    # T(u) = T0 exp(u xi): the origin moves at the constant speed |v| per unit u (a helix), so the
    # path is not the straight line
    u = np.linspace(0.0, 1.0, 2001)
    _, p = _pose(mv.path, u)
    p = np.asarray(p, np.float64)
    speed = np.linalg.norm(np.diff(p, axis=0), axis=1) / np.diff(u)
    # chord vs arc (1e-5) plus the float32 positions' rounding amplified by 1/du (measured 8e-5 abs)
    noise = 2 * EPS32 * np.abs(p).max() / np.diff(u).min()
    np.testing.assert_allclose(speed, mv.report.path_length, rtol=1e-5, atol=noise)
    chord = np.linalg.norm(T1[:3, 3] - T0[:3, 3])
    assert mv.report.path_length > chord * 1.001


def test_move_c_passes_through_the_via(panda):
    model, frame, T0 = panda
    p0 = T0[:3, 3]
    T1 = T0.copy()
    T1[:3, 3] = p0 + [0.1, 0.2, 0.0]
    T1[:3, :3] = _rot([1.0, 0.0, 0.0], 0.3) @ T0[:3, :3]
    via = p0 + [0.12, 0.05, 0.06]
    mv = move_c(model, Q_PANDA, via, T1)
    rep = mv.report
    assert rep.ok and rep.kind == "MOVE_C" and 0.0 < float(mv.path.via_u) < 1.0
    T = _tool(model, frame, mv.q)
    assert np.abs(T[:, :3, 3] - mv.poses[:, :3, 3]).max() < TOL
    center = np.asarray(mv.path.center)
    radius = np.linalg.norm(p0 - center)
    assert np.abs(np.linalg.norm(T[:, :3, 3] - center, axis=1) - radius).max() < TOL
    np.testing.assert_allclose(T[-1], T1, atol=TOL)
    # the geometric path hits the via exactly; the trajectory passes it at report.via_time
    _, pv = _pose(mv.path, float(mv.path.via_u))
    assert np.linalg.norm(np.asarray(pv) - via) < 4 * EPS32 * np.abs(via).max()   # float32 rounding
    q_via = sample_at(mv.trajectory, [rep.via_time]).q[0]
    assert np.linalg.norm(_tool(model, frame, q_via)[:3, 3] - via) < TOL
    assert 0.0 < rep.via_time < rep.duration


def test_move_c_sweeps_the_long_way_when_the_via_is_there(pendulum):
    """Regression: the arc goes through the via even when that is more than half the circle."""
    model, frame, T0 = pendulum
    p0 = T0[:3, 3]
    center = p0 + np.array([0.0, 0.0, 0.05])
    # start at angle 0 (below the centre), end 90 deg one way, via 90 deg the other way:
    # the arc through the via sweeps 270 deg
    p1 = center + np.array([0.05, 0.0, 0.0])
    via = center + np.array([-0.05, 0.0, 0.0])
    path = arc_path(T0, via, np.c_[np.r_[np.eye(3), [[0, 0, 0]]], np.r_[p1, 1]])
    assert float(path.sweep) == pytest.approx(1.5 * np.pi)
    assert float(path.via_u) == pytest.approx(1.0 / 3.0)
    mv = move_c(model, Q_PEND, via, p1, position_only=True)
    T = _tool(model, frame, mv.q)
    assert mv.report.ok and np.abs(T[:, :3, 3] - mv.poses[:, :3, 3]).max() < TOL
    q_via = sample_at(mv.trajectory, [mv.report.via_time]).q[0]
    assert np.linalg.norm(_tool(model, frame, q_via)[:3, 3] - via) < TOL
    # halfway it is on the far side of the centre from the end point
    mid = T[len(T) // 2, :3, 3]
    assert (mid - center) @ (p1 - center) < 0


def test_fixture_robot_move_l_position_only(pendulum):
    model, frame, T0 = pendulum
    p0 = T0[:3, 3]
    p1 = p0 + np.array([-0.15, 0.0, -0.1])
    mv = move_l(model, Q_PEND, p1, position_only=True)
    assert mv.report.ok and mv.report.path_angle == 0.0
    P = _tool(model, frame, mv.q)[:, :3, 3]
    d = (p1 - p0) / np.linalg.norm(p1 - p0)
    rel = P - p0
    assert np.linalg.norm(rel - (rel @ d)[:, None] * d, axis=1).max() < TOL
    assert np.abs(P - mv.poses[:, :3, 3]).max() < TOL
    assert np.linalg.norm(P[-1] - p1) < TOL


def test_velocity_stretch_by_the_worst_ratio(pendulum):
    model, frame, T0 = pendulum
    p1 = T0[:3, 3] + np.array([-0.15, 0.0, -0.1])
    slow = MotionLimits.from_arrays(model.qpos_lower, model.qpos_upper, [0.2, 0.3])
    fast = move_l(model, Q_PEND, p1, position_only=True)
    mv = move_l(model, Q_PEND, p1, position_only=True, limits=slow)
    rep = mv.report
    assert rep.stretch > 1.0 and rep.stretch == rep.velocity_ratio and rep.stretch_joint in (0, 1)
    assert rep.duration == pytest.approx(rep.nominal_duration * rep.stretch, rel=1e-12)
    assert rep.nominal_duration == pytest.approx(fast.report.duration)
    np.testing.assert_allclose(mv.q, fast.q, atol=1e-12)         # same IK samples, slower clock
    rows = mv.rows(0.001)
    ratio = np.abs(rows.qd).max(axis=0) / slow.vmax
    assert ratio.max() <= 1.0 + 1e-3 and ratio.max() > 0.99


def test_ik_failure_and_jumps_are_reported_or_raised(pendulum):
    model, frame, T0 = pendulum
    out_of_reach = np.array([0.9, 0.0, 0.1])                     # the arm is 0.6 m long
    with pytest.raises(CaliperError, match="IK did not converge"):
        move_l(model, Q_PEND, out_of_reach, position_only=True)
    mv = move_l(model, Q_PEND, out_of_reach, position_only=True, strict=False)
    assert not mv.report.ok and mv.report.ik_failures and mv.report.ik_failures[-1] == mv.report.n_samples - 1
    p1 = T0[:3, 3] + np.array([-0.15, 0.0, -0.1])
    with pytest.raises(CaliperError, match="jumps"):
        move_l(model, Q_PEND, p1, position_only=True, max_jump=1e-3)
    mv = move_l(model, Q_PEND, p1, position_only=True, max_jump=1e-3, strict=False)
    d = mv.report.discontinuities
    assert d and all(x.jump > 1e-3 and x.joint in (0, 1) for x in d) and not mv.report.ok
    assert mv.report.to_dict()["discontinuities"][0]["sample"] == d[0].sample


def test_degenerate_and_bad_input_errors(panda):
    model, frame, T0 = panda
    p0, p1 = T0[:3, 3], T0[:3, 3] + [0.1, 0.0, 0.0]
    cases = [
        (lambda: move_l(model, Q_PANDA, T0), "zero-length"),
        (lambda: move_l(model, Q_PANDA, p0), "zero-length"),
        (lambda: move_c(model, Q_PANDA, 0.5 * (p0 + p1), p1), "collinear"),
        (lambda: move_c(model, Q_PANDA, p0, p1), "coincide"),
        (lambda: move_c(model, Q_PANDA, p1 + [0, 0.1, 0], p0), "coincide"),
        (lambda: move_l(model, Q_PANDA, [np.nan, 0.0, 0.0]), "non-finite"),
        (lambda: move_c(model, Q_PANDA, [0.1, 0.2], p1), "via"),
        (lambda: move_l(model, Q_PANDA, p1, dt=0.0), "dt"),
        (lambda: move_l(model, Q_PANDA, p1, max_jump=-1.0), "max_jump"),
        (lambda: move_l(model, Q_PANDA, p1, cartesian=CartesianLimits(0.0)), "linear_velocity"),
        (lambda: move_l(model, Q_PANDA, p1, cartesian=CartesianLimits(angular_jerk=np.inf)), "angular_jerk"),
        (lambda: move_l(model, np.zeros(8), p1), "outside its limits"),
        (lambda: move_l(model, Q_PANDA[:7], p1), "q_start"),
        (lambda: move_l(model, Q_PANDA, np.eye(4)[:3]), "target"),
        (lambda: move_l(model, Q_PANDA, p1, frame="no_such_frame"), "no_such_frame"),
    ]
    for call, needle in cases:
        with pytest.raises(CaliperError, match=needle):
            call()


def test_time_law_pure_rotation_and_builders():
    lim = CartesianLimits()
    law = _time_law(0.0, 1.0, lim)                 # rotation only: angular caps rule
    st = _law(law, np.linspace(0.0, float(law.duration), 4001))
    assert np.abs(np.asarray(st.v)).max() == pytest.approx(1.0, rel=1e-9)
    T0 = np.eye(4)
    T1 = np.eye(4)
    T1[:3, :3] = _rot([0, 0, 1], 0.5)
    path = line_path(T0, T1)
    assert float(path.length) == 0.0 and float(path.angle) == pytest.approx(0.5)
    with pytest.raises(CaliperError, match="zero-length"):
        line_path(T0, T1, ignore_rotation=True)

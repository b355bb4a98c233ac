"""Real arms grasp by friction (issue 31, must-show 3): the Panda pinches a cube between its rubber
finger pads and lifts it; a frictionless cube and a cube too heavy for the pinch force stay on the
table. A weld grasp would lift all three, so each case fails if the grasp were a weld.

Also: ``grasp: "weld"`` stays an explicit, labelled option on a real arm, ``"friction"`` on a robot
without pads is a one-line error, and the generated scene carries what the arm profile says
(gravity compensation, pad condim, the stiff finger coupling, no weld)."""
from __future__ import annotations

import numpy as np
import pytest

from caliper_jax.errors import CaliperError
from tasks.scene import build_scene
from tasks.schema import parse_task

mujoco = pytest.importorskip("mujoco")

CUBE_POS = (0.5, 0.0, 0.02)
HOME = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785, 0.04]


def _task(friction=1.0, mass=0.1, grasp=None, robot="panda"):
    d = {"version": 2, "name": "pinch", "robot": robot,
         "scene": {"props": [{"name": "cube", "kind": "box", "halfExtents": [0.02, 0.02, 0.02],
                              "pos": list(CUBE_POS), "mass": mass,
                              "material": {"solref": [0.005, 1.0], "solimp": [0.9, 0.95, 0.002],
                                           "friction": [friction, 0.005, 0.0001]}}]}}
    if robot == "panda":
        d["q0"] = HOME
    if grasp is not None:
        d["grasp"] = grasp
    return parse_task(d, base_dir=".")


@pytest.fixture(scope="module")
def grasp_poses():
    """(3, nq) joint poses: above the cube, TCP at the cube centre (fingers about its y faces), lifted
    0.23 m; top-down (the hand's z along world -z), by the project's IK."""
    from caliper_jax.ik import ik

    ts = build_scene(_task())

    def T(z):
        out = np.eye(4)
        out[:3, :3] = np.diag([1.0, -1.0, -1.0])
        out[:3, 3] = (CUBE_POS[0], CUBE_POS[1], z)
        return out

    sol = ik(ts.model, np.stack([T(0.12), T(0.02), T(0.25)]), frame="panda_hand_tcp",
             seed_q=np.tile(ts.q0, (3, 1)), locked=("panda_finger_joint1",))
    assert sol.success.all()
    return np.asarray(sol.q, np.float64)


def _pinch_and_lift(ts, poses):
    """Approach open, close 0.6 s, lift 1.5 s, hold 0.5 s (smoothstep joint moves at 50 Hz, position
    servos) -> (final cube position (3,), final finger opening, peak pinch force N)."""
    mj, L = ts.scene.mj, ts.scene.layout
    d = mujoco.MjData(mj)
    d.qpos[:] = ts.qpos(ts.q0)
    mujoco.mj_forward(mj, d)
    substeps = round(1.0 / (50 * mj.opt.timestep))
    finger = ts.gripper.q_index
    act = int(np.flatnonzero(L.ctrl_to_q == finger)[0])
    peak = 0.0

    def move(qa, qb, seconds, opening):
        nonlocal peak
        n = int(seconds * 50)
        for i in range(n):
            s = (i + 1) / n
            q = qa + (qb - qa) * (s * s * (3 - 2 * s))
            q[finger] = opening
            d.ctrl[:] = q[L.ctrl_to_q]
            for _ in range(substeps):
                mujoco.mj_step(mj, d)
            peak = max(peak, abs(float(d.actuator_force[act])))

    q0 = np.asarray(ts.q0, np.float64)
    prof = ts.profile
    opened = ts.gripper.open if prof is None or prof.open_q is None else prof.open_q
    closed = ts.gripper.closed
    move(q0, poses[0], 1.5, opened)
    move(poses[0], poses[1], 1.0, opened)
    move(poses[1], poses[1], 0.6, closed)
    move(poses[1], poses[2], 1.5, closed)
    move(poses[2], poses[2], 0.5, closed)
    a = L.prop_qposadr["cube"]
    return d.qpos[a:a + 3].copy(), float(d.qpos[L.q_to_qpos[finger]]), peak


def test_panda_lifts_a_cube_by_friction(grasp_poses):
    ts = build_scene(_task())
    assert ts.grasp == "friction" and not ts.scene.layout.weld_eq
    pos, opening, force = _pinch_and_lift(ts, grasp_poses)
    assert pos[2] > 0.2, pos                                 # lifted 0.18 m or more
    assert np.linalg.norm(pos[:2] - CUBE_POS[:2]) < 0.01
    assert 0.018 < opening < 0.021                           # the fingers rest on the cube's faces
    assert 10.0 < force < 40.0                               # a pinch, bounded by kp * travel


def test_frictionless_cube_cannot_be_lifted(grasp_poses):
    """Planted bug caught: a weld (or the max-combined pad friction) would lift it."""
    pos, opening, _ = _pinch_and_lift(build_scene(_task(friction=0.0)), grasp_poses)
    assert pos[2] < 0.03 and opening < 0.005                 # it squeezed out; the fingers closed


def test_heavy_cube_slips(grasp_poses):
    """5 kg needs ~49 N of friction; two pads at mu 1 and the steady ~19 N pinch (finger kp 1000 N/m
    x 19 mm) hold ~38 N. Planted bug caught: a weld lifts any mass."""
    pos, _, _ = _pinch_and_lift(build_scene(_task(mass=5.0)), grasp_poses)
    assert pos[2] < 0.03


def test_scene_carries_the_arm_profile():
    ts = build_scene(_task())
    xml = ts.scene.mjcf.xml
    assert 'gravcomp="1"' in xml and 'condim="4"' in xml and "grasp_cube" not in xml
    assert 'name="mimic_panda_finger_joint2"' in xml and 'solref="0.005 1.0"' in xml
    mj = ts.scene.mj
    pads = [mj.geom(g).name for g in range(mj.ngeom) if "_pad" in mj.geom(g).name]
    assert len(pads) == 8 and all(mj.geom(p).condim == 4 for p in pads)
    assert mj.geom("cube").priority == 1
    assert mj.nu == 8                                        # 7 arm servos + one for both fingers


def test_weld_is_an_explicit_labelled_option():
    ts = build_scene(_task(grasp="weld"))
    assert ts.grasp == "weld" and "cube" in ts.scene.layout.weld_eq


def test_friction_grasp_needs_pads():
    task = parse_task({"version": 2, "name": "w", "robot": "gripper_arm", "grasp": "friction",
                       "scene": {"props": []}}, base_dir=".")
    with pytest.raises(CaliperError, match=r"^task w: grasp: 'friction' needs a registry arm") as exc:
        build_scene(task)
    assert "\n" not in str(exc.value)


# ---- the SO-101: a revolute jaw, box pads fitted to the jaws ------------------------------------

SO_CUBE = (0.22, 0.0, 0.0125)


def _so_task(friction=1.0, mass=0.02):
    from tasks.arms import PROFILES

    return parse_task({"version": 2, "name": "so-pinch", "robot": "so101", "q0": list(PROFILES["so101"].home),
                       "scene": {"props": [{"name": "cube", "kind": "box", "halfExtents": [0.0125] * 3,
                                            "pos": list(SO_CUBE), "mass": mass,
                                            "material": {"solref": [0.005, 1.0], "solimp": [0.9, 0.95, 0.002],
                                                         "friction": [friction, 0.005, 0.0001]}}]},
                       "gripper": {"joint": "gripper", "closed": "lo"}}, base_dir=".")


@pytest.fixture(scope="module")
def so_poses():
    """(3, nq) SO-101 poses: 6 cm above the cube, the profile's grasp point at its centre, lifted
    8 cm; top-down, the hand yawed along the arm (5 joints reach these poses exactly)."""
    from caliper_jax.ik import ik
    from tasks.arms import PROFILES

    prof = PROFILES["so101"]
    ts = build_scene(_so_task())

    def T(z):
        out = np.eye(4)
        out[:3, :3] = np.diag([-1.0, 1.0, -1.0])             # hand x along world -x, approach down
        out[:3, 3] = np.array([SO_CUBE[0], SO_CUBE[1], z]) - out[:3, :3] @ np.asarray(prof.grasp_offset)
        return out

    sol = ik(ts.model, np.stack([T(0.0725), T(0.0125), T(0.0925)]), frame=prof.tcp,
             seed_q=np.tile(ts.q0, (3, 1)), locked=("gripper",))
    assert sol.success.all(), (sol.pos_residual, sol.rot_residual)
    q = np.asarray(sol.q, np.float64)
    q[:, ts.gripper.q_index] = prof.open_q
    return q


def test_so101_lifts_a_cube_by_friction(so_poses):
    """The SO-101's box pads pinch a 2.5 cm cube and lift it 8 cm; the scene has no weld and no robot
    self-contacts (its whole-part meshes overlap at rest). Planted bug caught: the URDF's mesh hulls
    as pads (the fixed jaw's hull fills the gap between the jaws: the cube is shoved away)."""
    ts = build_scene(_so_task())
    assert ts.grasp == "friction" and not ts.scene.layout.weld_eq
    mj = ts.scene.mj
    pads = [g for g in range(mj.ngeom) if "_pad" in mj.geom(g).name]
    assert len(pads) == 2 and all(mj.geom_type[g] == mujoco.mjtGeom.mjGEOM_BOX for g in pads)
    pos, opening, torque = _pinch_and_lift(ts, so_poses)
    assert pos[2] > 0.07, pos
    assert np.linalg.norm(pos[:2] - SO_CUBE[:2]) < 0.015
    assert -0.05 < opening < 0.2 and 1.0 < torque < 4.0        # on the cube's faces, a servo-sized pinch


def test_so101_frictionless_cube_cannot_be_lifted(so_poses):
    """Planted bug caught: a weld (or the pads' friction taking over) would lift it."""
    pos, _, _ = _pinch_and_lift(build_scene(_so_task(friction=0.0)), so_poses)
    assert pos[2] < 0.02

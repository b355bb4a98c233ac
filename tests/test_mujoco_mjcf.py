"""MJCF generation, materials, versions, and the round trip through MuJoCo's compiler: our FK,
mass matrix, bias forces and forward dynamics against MuJoCo's on the generated model."""
import xml.etree.ElementTree as ET

import jax
import mujoco
import numpy as np
import pytest

import robots
from caliper_jax import dynamics, kinematics
from caliper_jax.configuration import random_configuration
from caliper_jax.errors import CaliperError
from caliper_jax.loading import load
from mjx_backend import versions
from mjx_backend.layout import compile_scene
from mjx_backend.materials import PRESETS, resolve_material, validate_material
from mjx_backend.mjcf import model_to_mjcf, save_mjcf
from mjx_backend.options import SimOptions
from mjx_backend.scene import Prop

HAS_ERD = robots.example_robot_data_dir() is not None
TOL = 1e-9


def test_installed_pair_is_the_pinned_release():
    assert versions.PINNED == "3.17.0"
    assert versions.check_pinned() == {"mujoco": "3.17.0", "mujoco-mjx": "3.17.0"}
    assert mujoco.__version__ == versions.PINNED


# ---- materials -------------------------------------------------------------------------------

def test_material_presets_carry_the_reference_values():
    assert set(PRESETS) == {"rigid", "steel", "rubber", "foam", "wood"}
    assert PRESETS["rubber"].solref == (0.01, 1.0)
    assert PRESETS["foam"].solimp == (0.5, 0.8, 0.01)
    assert PRESETS["steel"].friction == (0.4, 0.005, 0.0001)
    assert resolve_material("Wood") is PRESETS["wood"]
    assert resolve_material(None) is None


@pytest.mark.parametrize("solref, solimp, match", [
    ((0.0, 1.0), (0.9, 0.95, 0.001), "timeconst"),
    ((0.02, -1.0), (0.9, 0.95, 0.001), "dampratio"),
    ((0.02, 1.0), (0.0, 0.95, 0.001), "dmin"),
    ((0.02, 1.0), (0.9, 1.0, 0.001), "dmax"),
    ((0.02, 1.0), (0.96, 0.95, 0.001), "must not exceed"),
    ((0.02,), (0.9, 0.95, 0.001), "2 numbers"),
    ((0.02, float("nan")), (0.9, 0.95, 0.001), "non-finite"),
])
def test_custom_material_validation(solref, solimp, match):
    with pytest.raises(CaliperError, match=match):
        validate_material(solref, solimp, (1.0, 0.005, 0.0001))


def test_material_names_and_keys_are_checked():
    with pytest.raises(CaliperError, match="did you mean 'rubber'"):
        resolve_material("rubbr")
    with pytest.raises(CaliperError, match="unknown key"):
        resolve_material({"solref": (0.02, 1), "solimp": (0.9, 0.95, 0.001), "friction": (1, 0, 0), "mu": 1})
    custom = resolve_material({"solref": (0.02, 1), "solimp": (0.9, 0.95, 0.001), "friction": (1, 0, 0)})
    assert custom.solref == (0.02, 1.0)


# ---- generation (host-side) ----------------------------------------------------------------------

def _tree(doc):
    return ET.fromstring(doc.xml)


def _numbers(text):
    """An attribute's numbers (a float32 model writes "200", a float64 one "200.0")."""
    return [float(x) for x in text.split()]


def test_actuators_are_chosen_at_build_time(fixture_models):
    m = fixture_models["gripper_arm"]
    motor = _tree(model_to_mjcf(m, actuators="motor"))
    assert [a.tag for a in motor.find("actuator")] == ["motor"] * 3
    assert _numbers(motor.find("actuator/motor[@joint='j1']").get("ctrlrange")) == [-200.0, 200.0]
    servo = _tree(model_to_mjcf(m, actuators="position", kp={"j1": 300.0}, kv=5.0))
    tags = {a.tag for a in servo.find("actuator")}
    assert tags == {"position"}
    assert _numbers(servo.find("actuator/position[@joint='j1']").get("kp")) == [300.0]
    assert _numbers(servo.find("actuator/position[@joint='j2']").get("kp")) == [0.0]
    assert _tree(model_to_mjcf(m, actuators="none")).find("actuator") is None
    with pytest.raises(CaliperError, match="actuators="):
        model_to_mjcf(m, actuators="both")
    with pytest.raises(CaliperError, match="unknown joint"):
        model_to_mjcf(m, actuators="position", kp={"nope": 1.0})


def test_scene_elements_and_options(fixture_models):
    m = fixture_models["gripper_arm"]
    cube = Prop.box("cube", (0.05, 0.05, 0.05), (0.3, 0.0, 0.05), mass=0.2, material="wood")
    doc = model_to_mjcf(m, ground=0.1, props=[cube], material="rubber", weld_body="auto",
                        options=SimOptions(integrator="implicitfast", cone="elliptic", contact=False,
                                           njmax=50))
    root = _tree(doc)
    ground = root.find("worldbody/geom[@name='ground']")
    assert ground.get("type") == "plane" and ground.get("pos") == "0 0 0.1"
    assert ground.get("solref") == "0.01 1.0"                      # robot material by default
    body = root.find("worldbody/body[@name='cube']")
    assert body.find("freejoint") is not None and body.find("inertial").get("mass") == "0.2"
    assert body.find("geom").get("friction") == "0.45 0.005 0.0001"
    weld = root.find("equality/weld")
    assert (weld.get("body1"), weld.get("body2"), weld.get("active")) == ("jaw", "cube", "false")
    opt = root.find("option")
    assert (opt.get("integrator"), opt.get("cone")) == ("implicitfast", "elliptic")
    assert opt.find("flag").get("contact") == "disable"
    assert root.find("size").get("njmax") == "50"
    with pytest.raises(CaliperError, match="collides"):
        model_to_mjcf(m, props=[Prop.sphere("jaw", 0.02, (0, 0, 1))])


def test_float32_models_write_their_own_digits():
    m32 = load("pendulum2", dtype=jax.numpy.float32)
    xml = model_to_mjcf(m32).xml
    assert 'pos="0 0 0.3"' in xml and "0.30000001" not in xml


@pytest.mark.skipif(not HAS_ERD, reason="example-robot-data not installed")
def test_mesh_colliders_are_exported_as_assets():
    m = load("panda")
    doc = model_to_mjcf(m)
    meshes = _tree(doc).findall("asset/mesh")
    collision = {g.mesh for g in m.geoms if g.role == "collision" and g.kind == "mesh"}
    assert len(meshes) == len(collision) and not doc.notes
    assert all(mesh.get("file", "").endswith(".stl") for mesh in meshes)
    mj = compile_scene(m).mj
    assert mj.nmesh == len(collision)
    assert int(np.sum(mj.geom_type == mujoco.mjtGeom.mjGEOM_MESH)) == sum(
        g.role == "collision" and g.kind == "mesh" for g in m.geoms)


def test_unresolvable_meshes_are_noted_not_dropped_silently(fixture_models):
    from caliper_jax.io import Geom

    m = fixture_models["pendulum2"]
    ghost = Geom("l1", 0, "collision", "mesh", tuple(map(tuple, np.eye(3))), (0, 0, 0), (1, 1, 1), None,
                 "package://nowhere/l1.stl")
    doc = model_to_mjcf(m.replace(geoms=(ghost,)))
    assert len(doc.notes) == 1 and "could not be resolved" in doc.notes[0]


def test_robot_without_inertials_gets_a_clear_error(fixture_models):
    with pytest.raises(CaliperError, match="lacks inertials"):
        compile_scene(fixture_models["toy"])


# ---- round trip through MuJoCo -----------------------------------------------------------------

def _floating_pendulum():
    """pendulum2 on a free-floating base with mass (a small floating-base case)."""
    from caliper_jax.io.description import Body
    from caliper_jax.loading import read_description
    from caliper_jax.model import build_model

    desc = read_description("pendulum2", floating=True)
    base = desc.bodies[0]
    assert base.type == "free"
    base.add_inertia(2.0, np.array([0.01, -0.02, 0.03]), np.diag([0.02, 0.03, 0.04]))
    assert isinstance(base, Body)
    return build_model(desc, dtype=jax.numpy.float64)


_ERD = pytest.mark.skipif(not HAS_ERD, reason="example-robot-data not installed")
ROBOTS = [("pendulum2", True), ("gripper_arm", True), ("collide_arm", True),
          pytest.param("panda", True, marks=_ERD), pytest.param("panda", False, marks=_ERD),
          ("floating_pendulum", True)]


@pytest.mark.x64
@pytest.mark.parametrize("name, mimic", ROBOTS)
def test_fk_mass_matrix_and_dynamics_round_trip(name, mimic):
    """Our FK / CRBA / bias forces / forward dynamics vs MuJoCo's on the generated model, at a
    random state, to 1e-9. floating_pendulum has a free joint (its conventions differ); panda's
    second finger mimics the first (a joint equality in MuJoCo, so forward dynamics is compared
    without the coupling: MuJoCo enforces it as a soft constraint)."""
    f64 = jax.numpy.float64                          # a MuJoCo (float64) reference at 1e-9
    m = _floating_pendulum() if name == "floating_pendulum" else load(name, mimic=mimic, dtype=f64)
    m = m.replace(dof_friction=np.zeros(m.nv))       # Coulomb friction is a constraint in MuJoCo
    scene = compile_scene(m, actuators="none")
    mj, L = scene.mj, scene.layout
    d = mujoco.MjData(mj)
    q = random_configuration(m, jax.random.PRNGKey(3))
    rng = np.random.default_rng(0)
    v, tau = rng.normal(size=m.nv), rng.normal(size=m.nv)
    d.qpos[:] = L.qpos_from_q(np.asarray(q))[0]
    d.qvel[:] = L.qvel_from_v(v, d.qpos)[0]
    d.qfrc_applied[:] = L.qfrc_from_tau(tau, d.qpos)[0]
    mujoco.mj_forward(mj, d)
    Rb, pb = (np.asarray(x) for x in kinematics.body_poses(m, q))
    # frames from the body poses on the host (frame_R/p are placements in the carrying body)
    fb = np.array(m.frame_body)
    Rc = np.concatenate([Rb, np.eye(3)[None]])[fb]
    pc = np.concatenate([pb, np.zeros((1, 3))])[fb]
    Rf = Rc @ np.asarray(m.frame_R)
    pf = pc + np.einsum("fij,fj->fi", Rc, np.asarray(m.frame_p))
    M_ours, bias_ours = np.asarray(dynamics.crba(m, q)), np.asarray(dynamics.bias_forces(m, q, v))
    # coordinates map back exactly
    np.testing.assert_allclose(L.q_from_qpos(d.qpos)[0], q, atol=1e-15)
    np.testing.assert_allclose(L.v_from_qvel(d.qvel, d.qpos)[0], v, atol=1e-15)
    # bodies and frames (sites)
    np.testing.assert_allclose(d.xpos[L.body_id], pb, atol=TOL)
    np.testing.assert_allclose(d.xmat[L.body_id].reshape(-1, 3, 3), Rb, atol=TOL)
    for k, fname in enumerate(m.frame_names):
        if m.frame_kind[k] != "joint":
            s = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_SITE, fname)
            np.testing.assert_allclose(d.site_xpos[s], pf[k], atol=TOL)
            np.testing.assert_allclose(d.site_xmat[s].reshape(3, 3), Rf[k], atol=TOL)
    # mass matrix, reduced to our coordinates: M_ours = S^T M_mj S with qvel = S v
    M = np.zeros((mj.nv, mj.nv))
    mujoco.mj_fullM(mj, d, M)
    S = L.velocity_map(d.qpos)
    np.testing.assert_allclose(S.T @ M @ S, M_ours, atol=TOL)
    # bias forces; a free joint's qvel map depends on the state, so dS/dt v enters
    dS_v = np.zeros(mj.nv)
    for fj in L.free:
        R = L._free_rotations(d.qpos, fj.qposadr)[0]
        dS_v[fj.dofadr:fj.dofadr + 3] = R @ np.cross(v[fj.v + 3:fj.v + 6], v[fj.v:fj.v + 3])
    np.testing.assert_allclose(S.T @ (d.qfrc_bias + M @ dS_v), bias_ours, atol=1e-8)
    if m.has_mimic:
        return
    # forward dynamics with damping and applied forces (MuJoCo's qacc, mapped to our coordinates)
    qdd = np.linalg.solve(M_ours, tau - bias_ours - np.asarray(m.dof_damping) * v)
    qacc_ours = np.linalg.lstsq(S, d.qacc - dS_v, rcond=None)[0]
    np.testing.assert_allclose(qacc_ours, qdd, atol=1e-8)


@pytest.mark.parametrize("name", ["pendulum2", "gripper_arm", "collide_arm"])
def test_save_then_read_back_gives_the_same_model(name, tmp_path, fixture_models):
    m = fixture_models[name]
    save_mjcf(m, tmp_path / f"{name}.xml")
    back = load(str(tmp_path / f"{name}.xml"))
    assert back.body_names == m.body_names and back.jnt_type == m.jnt_type
    for leaf in ("jnt_R", "jnt_p", "jnt_axis", "body_mass", "body_com", "body_inertia", "qpos_lower",
                 "qpos_upper", "dof_effort_limit", "gravity"):
        np.testing.assert_allclose(getattr(back, leaf), getattr(m, leaf), atol=1e-12, err_msg=leaf)


def test_joint_addressing_is_by_name_not_order(fixture_models):
    m = fixture_models["gripper_arm"]
    scene = compile_scene(m, actuators="motor")
    mj, L = scene.mj, scene.layout
    for i, name in enumerate(m.body_names):
        j = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_JOINT, name)
        assert L.jnt_id[i] == j and L.q_to_qpos[i] == mj.jnt_qposadr[j]
        a = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_ACTUATOR, name)
        assert L.v_to_ctrl[i] == a and L.ctrl_to_v[a] == i
    assert np.array_equal(L.dof_to_v[L.v_to_dof], np.arange(m.nv))

"""Model building: URDF features, clear errors on bad input, mesh search reports, MJCF via MuJoCo,
the robot registry (source tree and wheel)."""
import subprocess
import sys
import zipfile

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import robots
from caliper_jax import configuration, dynamics, kinematics
from caliper_jax.errors import CaliperError, ModelError
from caliper_jax.io import read_urdf, read_urdf_string
from caliper_jax.io.mjcf import read_mjcf
from caliper_jax.loading import load
from caliper_jax.model import build_model

GOOD = """<robot name="r">
  <link name="a"/><link name="b"><inertial><mass value="1"/>
  <inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="j" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/>
  <limit lower="-1" upper="1" effort="3" velocity="2"/>{extra}</joint>
</robot>"""


@pytest.mark.parametrize("text,needle", [
    ("<robot name='r'><link name='a'/><link name='a'/></robot>", "duplicate link name 'a'"),
    (GOOD.replace('<parent link="a"/>', '<parent link="zz"/>'), "parent link 'zz' is not defined"),
    (GOOD.replace('type="revolute"', 'type="planar"'), "unsupported type 'planar'"),
    (GOOD.replace('<axis xyz="0 0 1"/>', '<axis xyz="0 nan 1"/>'), "non-finite"),
    (GOOD.replace('<axis xyz="0 0 1"/>', '<axis xyz="0 0 0"/>'), "zero length"),
    (GOOD.replace('<axis xyz="0 0 1"/>', '<axis xyz="0 0"/>'), "expected 3 numbers"),
    (GOOD.replace('<mass value="1"/>', '<mass value="abc"/>'), "mass"),
    ("<robot name='r'><link name='a'/><link name='b'/>"
     "<joint name='j1' type='fixed'><parent link='a'/><child link='b'/></joint>"
     "<joint name='j2' type='fixed'><parent link='b'/><child link='a'/></joint></robot>", "cycle"),
    ("<robot name='r'><link name='a'/><link name='b'/></robot>", "more than one root"),
    ("<robot><link name='a'/>", "not well-formed"),
    ("<model/>", "expected <robot>"),
    (GOOD.format(extra="<mimic joint='nope'/>"), "unknown joint 'nope'"),
])
def test_bad_urdf_gives_one_clear_error(text, needle):
    with pytest.raises(ModelError) as info:
        read_urdf_string(text.replace("{extra}", ""), source="bad.urdf")
    assert needle in str(info.value) and "bad.urdf" in str(info.value)
    assert "\n" not in str(info.value)


def test_dynamics_tags_limits_and_continuous_joints():
    desc = read_urdf_string(GOOD.format(extra='<dynamics damping="0.4" friction="0.2"/>'))
    model = build_model(desc, dtype=jnp.float32)
    assert model.nq == model.nv == 1
    np.testing.assert_allclose(model.dof_damping, [0.4])
    np.testing.assert_allclose(model.dof_friction, [0.2])
    np.testing.assert_allclose([model.qpos_lower[0], model.qpos_upper[0]], [-1, 1])
    np.testing.assert_allclose([model.dof_velocity_limit[0], model.dof_effort_limit[0]], [2, 3])
    cont = build_model(read_urdf_string(GOOD.format(extra="").replace('"revolute"', '"continuous"')))
    assert np.isinf(cont.qpos_lower[0]) and np.isinf(cont.qpos_upper[0])


def test_missing_mesh_reports_every_search_path(tmp_path):
    pkg = tmp_path / "my_robot" / "urdf"
    pkg.mkdir(parents=True)
    text = GOOD.format(extra="").replace(
        "</inertial></link>",
        "</inertial><collision><geometry><mesh filename='package://my_robot/meshes/b.stl'/>"
        "</geometry></collision></link>")
    (pkg / "r.urdf").write_text(text)
    desc = read_urdf(pkg / "r.urdf")
    assert len(desc.warnings) == 1
    assert str(tmp_path / "my_robot" / "meshes" / "b.stl") in desc.warnings[0]
    assert desc.geoms[0].mesh is None and len(desc.geoms[0].tried) >= 3
    (tmp_path / "my_robot" / "meshes").mkdir()
    (tmp_path / "my_robot" / "meshes" / "b.stl").write_bytes(b"solid b\nendsolid b\n")
    desc = read_urdf(pkg / "r.urdf")
    assert desc.warnings == [] and desc.geoms[0].mesh.endswith("b.stl")


def test_mimic_joint_follows_its_source():
    text = """<robot name="m"><link name="a"/>
      <link name="b"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/>
      </inertial></link><link name="c"><inertial><origin xyz="0.1 0 0"/><mass value="1"/>
      <inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
      <joint name="j1" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/>
      <limit lower="-2" upper="2" effort="1" velocity="1"/></joint>
      <joint name="j2" type="revolute"><parent link="b"/><child link="c"/><origin xyz="0.3 0 0"/>
      <axis xyz="0 0 1"/><limit lower="-2" upper="2" effort="1" velocity="1"/>
      <mimic joint="j1" multiplier="-2" offset="0.1"/></joint></robot>"""
    mim = build_model(read_urdf_string(text), dtype=jnp.float32)
    free = build_model(read_urdf_string(text, mimic=False), dtype=jnp.float32)
    tol = 16 * float(jnp.finfo(jnp.float32).eps)          # float32, entries of order 1
    assert (mim.nq, free.nq) == (1, 2)
    q = jnp.array([0.7])
    qf = jnp.array([0.7, -2 * 0.7 + 0.1])
    np.testing.assert_allclose(kinematics.forward_kinematics(mim, q), kinematics.forward_kinematics(free, qf),
                               atol=tol)
    G = jnp.array([[1.0], [-2.0]])  # d q_full / d q
    np.testing.assert_allclose(dynamics.crba(mim, q), G.T @ dynamics.crba(free, qf) @ G, atol=tol)
    v, a = jnp.array([0.3]), jnp.array([-0.4])
    np.testing.assert_allclose(dynamics.rnea(mim, q, v, a), G.T @ dynamics.rnea(free, qf, G @ v, G @ a),
                               atol=tol)


MJCF = """<mujoco model="m"><option gravity="0 0 -9.81"/><worldbody>
  <body name="b1" pos="0.1 0 0.2" quat="0.9 0.1 0.3 0.2">
    <joint name="hinge" type="hinge" axis="0.3 1 0" pos="0.05 0 0" damping="0.2" armature="0.01"/>
    <geom type="capsule" size="0.03 0.1" mass="1.3"/>
    <body name="b2" pos="0 0.2 0">
      <joint name="slide" type="slide" axis="0 0 1" range="-0.1 0.1"/>
      <joint name="hinge2" type="hinge" axis="1 0 0" pos="0 0.02 0.03"/>
      <geom type="box" size="0.05 0.04 0.03" mass="0.7" pos="0.02 0 0"/>
      <site name="tip" pos="0 0.1 0"/>
      <body name="b3" pos="0 0.15 0"><joint name="ball" type="ball"/>
        <geom type="sphere" size="0.04" mass="0.4" pos="0 0.05 0"/></body>
    </body></body></worldbody></mujoco>"""


@pytest.mark.x64           # against MuJoCo (float64) at 1e-9
def test_mjcf_matches_mujoco(tmp_path):
    path = tmp_path / "m.xml"
    path.write_text(MJCF)
    model = build_model(read_mjcf(path), dtype=jnp.float64)
    mj = mujoco.MjModel.from_xml_path(str(path))
    data = mujoco.MjData(mj)
    assert (model.nq, model.nv) == (mj.nq, mj.nv)
    rng = np.random.default_rng(0)
    for _ in range(5):
        q = np.asarray(configuration.random_configuration(model, jax.random.PRNGKey(int(rng.integers(1e6)))))
        v = rng.normal(size=mj.nv)
        data.qpos[:], data.qvel[:] = q, v
        mujoco.mj_forward(mj, data)
        T = np.asarray(kinematics.forward_kinematics(model, jnp.asarray(q)))
        for name in ("b1", "b2", "b3", "tip"):
            T_f = T[model.frame_id(name)]
            if name == "tip":
                sid = mj.site(name).id
                ref_p, ref_R = data.site_xpos[sid], data.site_xmat[sid].reshape(3, 3)
            else:
                bid = mj.body(name).id
                ref_p, ref_R = data.xpos[bid], data.xmat[bid].reshape(3, 3)
            np.testing.assert_allclose(T_f[:3, 3], ref_p, atol=1e-9)
            np.testing.assert_allclose(T_f[:3, :3], ref_R, atol=1e-9)
        M = np.zeros((mj.nv, mj.nv))
        mujoco.mj_fullM(mj, data, M)
        np.testing.assert_allclose(np.asarray(dynamics.crba(model, jnp.asarray(q))), M, atol=1e-9)
        np.testing.assert_allclose(np.asarray(dynamics.bias_forces(model, jnp.asarray(q), jnp.asarray(v))),
                                   data.qfrc_bias, atol=1e-9)


def test_registry_resolves_fixtures_and_reports_unknown():
    for name in robots.FIXTURES:
        assert robots.resolve(name).is_file()
        assert load(name).nq >= 2
    with pytest.raises(CaliperError, match="unknown robot 'no_such_bot'"):
        robots.resolve("no_such_bot")


def test_registry_without_example_robot_data(monkeypatch):
    monkeypatch.setattr(robots, "example_robot_data_dir", lambda: None)
    with pytest.raises(CaliperError, match="example-robot-data, which is not installed"):
        robots.resolve("panda")


def test_wheel_ships_the_robot_files(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                          "-w", str(tmp_path), "."], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    wheel = next(tmp_path.glob("caliper_jax-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for fixture in robots.FIXTURES:
        assert f"robots/{fixture}.urdf" in names
    assert "robots/__init__.py" in names

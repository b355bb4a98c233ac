"""Mimic joints survive the MJCF round trip: the generator writes a URDF ``<mimic>`` as a joint
equality with ``polycoef="offset multiplier 0 0 0"``, and the MJCF reader turns such an equality
back into a mimic joint (so `caliper mjcf panda --out p.xml; caliper load p.xml` keeps nq 8)."""
from pathlib import Path

import jax
import mujoco
import numpy as np
import pytest

import robots
from caliper_jax import kinematics
from caliper_jax.configuration import random_configuration
from caliper_jax.errors import CaliperError
from caliper_jax.io.mjcf import read_mjcf
from caliper_jax.loading import load
from mjx_backend.mjcf import model_to_mjcf, save_mjcf

HAS_ERD = robots.example_robot_data_dir() is not None

_LINK = ('<link name="{n}"><inertial><mass value="{m}"/>'
         '<inertia ixx="1e-3" ixy="0" ixz="0" iyy="1e-3" iyz="0" izz="1e-3"/></inertial>'
         '<collision><geometry><box size="0.02 0.02 0.02"/></geometry></collision></link>')
TWO_FINGERS = "<robot name=\"two_fingers\">" + "".join(_LINK.format(n=n, m=m) for n, m in (
    ("base", 1.0), ("arm", 0.5), ("left", 0.1), ("right", 0.1))) + """
  <joint name="j1" type="revolute"><parent link="base"/><child link="arm"/>
    <origin xyz="0 0 0.3"/><axis xyz="0 1 0"/><limit lower="-2" upper="2" effort="10" velocity="3"/></joint>
  <joint name="finger" type="prismatic"><parent link="arm"/><child link="left"/>
    <origin xyz="0 0.02 0.2"/><axis xyz="0 1 0"/>
    <limit lower="0" upper="0.04" effort="5" velocity="1"/></joint>
  <joint name="finger_mirror" type="prismatic"><parent link="arm"/><child link="right"/>
    <origin xyz="0 -0.02 0.2" rpy="0 0 0.3"/><axis xyz="0 1 0"/>
    <limit lower="-0.04" upper="0" effort="5" velocity="1"/>
    <mimic joint="finger" multiplier="-1.5" offset="0.01"/></joint>
</robot>"""


def _same_model(m, back):
    assert (back.nq, back.nv, back.nq_full, back.nv_full) == (m.nq, m.nv, m.nq_full, m.nv_full)
    assert back.body_names == m.body_names and back.jnt_type == m.jnt_type
    assert back.joint_names == m.joint_names
    assert (back.qfull_src, back.vfull_src, back.vfull_mimic) == (m.qfull_src, m.vfull_src, m.vfull_mimic)
    np.testing.assert_allclose(back.mimic_multiplier, m.mimic_multiplier, atol=1e-12)
    np.testing.assert_allclose(back.mimic_offset, m.mimic_offset, atol=1e-12)
    np.testing.assert_allclose(back.qpos_lower, m.qpos_lower, atol=1e-12)
    np.testing.assert_allclose(back.qpos_upper, m.qpos_upper, atol=1e-12)
    for seed in range(3):
        q = random_configuration(m, jax.random.PRNGKey(seed))
        for a, b in zip(kinematics.body_poses(m, q), kinematics.body_poses(back, q), strict=True):
            np.testing.assert_allclose(np.asarray(b), np.asarray(a), atol=1e-9)
        T, T_back = np.asarray(kinematics.forward_kinematics(m, q)), np.asarray(
            kinematics.forward_kinematics(back, q))
        shared = [n for n in m.frame_names if n in back.frame_names]
        assert set(m.body_names) <= set(shared)
        for name in shared:
            np.testing.assert_allclose(T_back[back.frame_names.index(name)], T[m.frame_names.index(name)],
                                       atol=1e-9, err_msg=name)


@pytest.mark.x64
def test_urdf_mimic_round_trips_through_mjcf(tmp_path):
    urdf = tmp_path / "two_fingers.urdf"
    urdf.write_text(TWO_FINGERS)
    m = load(urdf)
    assert (m.nq, m.nbody, m.has_mimic) == (2, 3, True)
    doc = save_mjcf(m, tmp_path / "two_fingers.xml")
    assert 'joint1="finger_mirror" joint2="finger" polycoef="0.01 -1.5 0 0 0"' in doc.xml
    back = load(tmp_path / "two_fingers.xml")
    _same_model(m, back)
    # one frame per name (a generated site marking a body's frame is not a second frame), so the
    # read-back model generates MJCF again
    assert len(set(back.frame_names)) == back.nframe
    again = mujoco.MjModel.from_xml_string(model_to_mjcf(back).xml)
    assert (again.nq, again.neq) == (3, 1)


@pytest.mark.x64
@pytest.mark.skipif(not HAS_ERD, reason="example-robot-data not installed")
def test_panda_round_trip_keeps_the_finger_mimic(tmp_path):
    m = load("panda")
    save_mjcf(m, tmp_path / "p.xml")
    back = load(tmp_path / "p.xml")
    assert (back.nq, back.nv) == (8, 8) and back.has_mimic
    _same_model(m, back)
    assert len(set(back.frame_names)) == back.nframe


def _mjcf(tmp_path: Path, equality: str) -> Path:
    body = '<body name="b{i}" pos="0 0 0.1"><joint name="j{i}" type="hinge" axis="0 1 0"/>' \
           '<geom type="sphere" size="0.02" mass="0.1"/>'
    xml = ("<mujoco><worldbody>" + "".join(body.format(i=i) for i in range(4)) + "</body>" * 4
           + f"</worldbody><equality>{equality}</equality></mujoco>")
    path = tmp_path / "eq.xml"
    path.write_text(xml)
    return path


def test_mimic_chains_are_composed_onto_the_independent_joint(tmp_path):
    path = _mjcf(tmp_path, '<joint joint1="j2" joint2="j1" polycoef="0.1 2 0 0 0"/>'
                           '<joint joint1="j3" joint2="j2" polycoef="0.3 -0.5 0 0 0"/>')
    desc = read_mjcf(path)
    mimic = {b.name: b.mimic for b in desc.bodies}
    assert mimic["j0"] is None and mimic["j1"] is None
    assert mimic["j2"] == ("j1", 2.0, pytest.approx(0.1))
    name, mult, off = mimic["j3"]  # j3 = 0.3 - 0.5 (0.1 + 2 j1)
    assert name == "j1" and mult == pytest.approx(-1.0) and off == pytest.approx(0.25)
    assert load(path).nq == 2


def test_other_joint_equalities_are_not_mimics_and_say_so(tmp_path):
    path = _mjcf(tmp_path, '<joint name="quad" joint1="j1" joint2="j0" polycoef="0 1 0.5 0 0"/>'
                           '<joint name="lock" joint1="j2" polycoef="0.2 0 0 0 0"/>'
                           '<joint name="off" joint1="j3" joint2="j0" active="false"/>')
    desc = read_mjcf(path)
    assert all(b.mimic is None for b in desc.bodies)
    text = " | ".join(desc.warnings)
    assert "'quad' not read as a mimic: non-linear polycoef" in text
    assert "'lock' not read as a mimic: no joint2" in text and "'off' not read as a mimic: inactive" in text


def test_cyclic_joint_equalities_are_refused(tmp_path):
    path = _mjcf(tmp_path, '<joint joint1="j1" joint2="j2" polycoef="0 1 0 0 0"/>'
                           '<joint joint1="j2" joint2="j1" polycoef="0 1 0 0 0"/>')
    with pytest.raises(CaliperError, match="cycle"):
        read_mjcf(path)

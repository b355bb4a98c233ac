"""Asset doctor inertials: primitives vs closed forms, meshes vs trimesh, frames and combination."""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from doctors.asset import diagnose, repair
from doctors.asset.inertia import (
    MassProperties,
    box,
    closed_mesh,
    combine,
    cylinder,
    is_closed,
    placed,
    rpy_matrix,
    sphere,
)
from doctors.asset.meshes import read_triangles

DATA = Path(__file__).parent / "data" / "asset"
BASE = ('<link name="base"><inertial><mass value="1"/>'
        '<inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial></link>')


INERTIA_ENTRIES = {"ixx": (0, 0), "ixy": (0, 1), "ixz": (0, 2), "iyy": (1, 1), "iyz": (1, 2), "izz": (2, 2)}


def written_inertial(path: Path, link: str) -> dict:
    """The numbers of the <inertial> written into ``link`` (mass, origin xyz, tensor entries)."""
    inertial = ET.parse(path).getroot().find(f"link[@name='{link}']/inertial")
    values = {"mass value": float(inertial.find("mass").get("value")),
              "xyz": inertial.find("origin").get("xyz")}
    values.update({k: float(v) for k, v in inertial.find("inertia").attrib.items()})
    return values


def assert_props(actual: MassProperties, mass: float, com, inertia, rtol: float = 1e-9) -> None:
    scale = max(abs(mass), float(np.abs(inertia).max()))
    assert actual.mass == pytest.approx(mass, rel=rtol)
    np.testing.assert_allclose(actual.com, com, rtol=rtol, atol=rtol * 1e-3)
    np.testing.assert_allclose(actual.inertia, inertia, rtol=rtol, atol=rtol * scale)


def test_box_closed_form():
    props = box((1.0, 2.0, 3.0), 2.0)  # m = 12
    assert_props(props, 12.0, np.zeros(3), np.diag([13.0, 10.0, 5.0]))


def test_cylinder_closed_form():
    r, h, rho = 0.1, 0.4, 7800.0
    m = rho * math.pi * r**2 * h
    side = m * (3 * r**2 + h**2) / 12
    assert_props(cylinder(r, h, rho), m, np.zeros(3), np.diag([side, side, m * r**2 / 2]))


def test_sphere_closed_form():
    r, rho = 0.25, 1000.0
    m = rho * 4 / 3 * math.pi * r**3
    assert_props(sphere(r, rho), m, np.zeros(3), np.eye(3) * 2 / 5 * m * r**2)


@pytest.mark.parametrize("size", [(0.0, 1.0, 1.0), (-1.0, 1.0, 1.0)])
def test_degenerate_primitives_raise(size):
    with pytest.raises(ValueError):
        box(size, 1000.0)


def test_mesh_box_matches_closed_form_and_winding_does_not_matter():
    tris = read_triangles(DATA / "meshes" / "cube.stl")
    expected = box((0.1, 0.1, 0.1), 1000.0)
    assert_props(closed_mesh(tris, 1000.0), expected.mass, np.zeros(3), expected.inertia)
    assert_props(closed_mesh(tris[:, ::-1], 1000.0), expected.mass, np.zeros(3), expected.inertia)
    quads = read_triangles(DATA / "meshes" / "cube.obj")  # quads fanned into triangles
    assert_props(closed_mesh(quads, 1000.0), expected.mass, np.zeros(3), expected.inertia)


def test_open_mesh_is_refused():
    tris = read_triangles(DATA / "meshes" / "cube.stl")[:-1]
    assert not is_closed(tris)
    with pytest.raises(ValueError, match="not a closed surface"):
        closed_mesh(tris, 1000.0)


def test_placed_and_combined():
    half = box((0.5, 1.0, 1.0), 1.0)
    left = placed(half, (-0.25, 0.0, 0.0), (0.0, 0.0, 0.0))
    right = placed(half, (0.25, 0.0, 0.0), (0.0, 0.0, 0.0))
    whole = box((1.0, 1.0, 1.0), 1.0)
    assert_props(combine([left, right]), whole.mass, np.zeros(3), whole.inertia)
    turned = placed(box((1.0, 2.0, 3.0), 1.0), (1.0, 2.0, 3.0), (0.0, 0.0, math.pi / 2))  # x <-> y
    assert_props(turned, 6.0, (1.0, 2.0, 3.0), box((2.0, 1.0, 3.0), 1.0).inertia)


def test_rpy_is_fixed_axis_xyz():
    roll, pitch, yaw = 0.3, -0.7, 1.1
    rx = np.array([[1, 0, 0], [0, math.cos(roll), -math.sin(roll)], [0, math.sin(roll), math.cos(roll)]])
    ry = np.array([[math.cos(pitch), 0, math.sin(pitch)], [0, 1, 0], [-math.sin(pitch), 0, math.cos(pitch)]])
    rz = np.array([[math.cos(yaw), -math.sin(yaw), 0], [math.sin(yaw), math.cos(yaw), 0], [0, 0, 1]])
    np.testing.assert_allclose(rpy_matrix((roll, pitch, yaw)), rz @ ry @ rx, atol=1e-15)


def test_repair_combines_rotated_offset_geometries(tmp_path):
    """Two collision geometries, one rotated and offset: the written inertial is the analytic sum."""
    urdf = f"""<robot name="r">{BASE}
  <joint name="j" type="continuous"><parent link="base"/><child link="arm"/><axis xyz="0 0 1"/></joint>
  <link name="arm">
    <collision><origin xyz="0.1 0 0" rpy="0 1.5707963267948966 0"/>
      <geometry><cylinder radius="0.02" length="0.2"/></geometry></collision>
    <collision><origin xyz="0.2 0 0.05"/><geometry><sphere radius="0.03"/></geometry></collision>
  </link>
</robot>"""
    path = tmp_path / "r.urdf"
    path.write_text(urdf)
    result = repair(path, density=500.0)
    assert result.after.clean
    got = written_inertial(Path(result.out), "arm")
    rod = placed(cylinder(0.02, 0.2, 500.0), (0.1, 0, 0), (0, math.pi / 2, 0))
    ball = placed(sphere(0.03, 500.0), (0.2, 0, 0.05), (0, 0, 0))
    expected = combine([rod, ball])
    assert got["mass value"] == pytest.approx(expected.mass, rel=1e-11)
    for key, (r, c) in INERTIA_ENTRIES.items():
        assert got[key] == pytest.approx(expected.inertia[r, c], rel=1e-9, abs=1e-15)
    rod_alone = cylinder(0.02, 0.2, 500.0).inertia
    assert expected.inertia[0, 0] < expected.inertia[2, 2]  # the rod lies along x: small ixx
    assert rod.inertia[0, 0] == pytest.approx(rod_alone[2, 2])


# ---------------------------------------------------------------- against trimesh


@pytest.fixture(scope="module")
def trimesh():
    import trimesh  # a dependency (the mesh loader)

    return trimesh


def trimesh_shapes(trimesh):
    rng = np.random.default_rng(7)
    transform = trimesh.transformations.random_rotation_matrix(rng.random(3))
    transform[:3, 3] = [0.3, -0.2, 0.1]
    sphere_mesh = trimesh.creation.icosphere(subdivisions=3, radius=0.07)
    sphere_mesh.apply_transform(transform)
    capsule = trimesh.creation.capsule(height=0.2, radius=0.03)
    capsule.apply_transform(transform)
    annulus = trimesh.creation.annulus(r_min=0.02, r_max=0.05, height=0.03)  # genus 1
    lumpy = trimesh.convex.convex_hull(rng.normal(size=(200, 3)) * [0.1, 0.05, 0.02])
    return {"icosphere": sphere_mesh, "capsule": capsule, "annulus": annulus, "hull": lumpy}


@pytest.mark.parametrize("name", ["icosphere", "capsule", "annulus", "hull"])
@pytest.mark.parametrize("fmt", ["memory", "stl", "obj"])
def test_mesh_inertia_matches_trimesh(trimesh, tmp_path, name, fmt):
    mesh = trimesh_shapes(trimesh)[name]
    mesh.density = 2700.0
    if fmt == "memory":
        tris = np.asarray(mesh.triangles)
    else:
        path = tmp_path / f"{name}.{fmt}"
        mesh.export(path)
        tris = read_triangles(path)
        mesh = trimesh.load(path, force="mesh")
        mesh.density = 2700.0
    reference = mesh.mass_properties
    ours = closed_mesh(tris, 2700.0)
    assert ours.mass == pytest.approx(reference["mass"], rel=1e-6)
    np.testing.assert_allclose(ours.com, reference["center_mass"], rtol=1e-6, atol=1e-9)
    scale = float(np.abs(reference["inertia"]).max())
    np.testing.assert_allclose(ours.inertia, reference["inertia"], rtol=1e-6, atol=1e-6 * scale)


def test_mesh_link_repair_matches_trimesh(trimesh, tmp_path):
    mesh = trimesh.creation.icosphere(subdivisions=2, radius=0.05)
    mesh.export(tmp_path / "ball.stl")
    urdf = f"""<robot name="r">{BASE}
  <joint name="j" type="fixed"><parent link="base"/><child link="ball"/></joint>
  <link name="ball"><collision><origin xyz="0.1 0 0"/>
    <geometry><mesh filename="ball.stl" scale="2 1 1"/></geometry></collision></link>
</robot>"""
    (tmp_path / "r.urdf").write_text(urdf)
    result = repair(tmp_path / "r.urdf")
    assert result.after.clean and not diagnose(result.out).findings
    scaled = trimesh.load(tmp_path / "ball.stl", force="mesh")
    scaled.apply_scale([2.0, 1.0, 1.0])
    scaled.apply_translation([0.1, 0.0, 0.0])
    scaled.density = 1000.0
    reference = scaled.mass_properties
    got = written_inertial(Path(result.out), "ball")
    assert got["mass value"] == pytest.approx(reference["mass"], rel=1e-6)
    com = [float(v) for v in got["xyz"].split()]
    assert com == pytest.approx(reference["center_mass"], rel=1e-6, abs=1e-12)
    for key, (r, c) in INERTIA_ENTRIES.items():
        assert got[key] == pytest.approx(reference["inertia"][r, c], rel=1e-6, abs=1e-12)

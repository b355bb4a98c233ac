"""Contact-stability lint C001-C003 (planted cases and thresholds), weld grasping, ray-cast
sensors, and the CLI faces."""
import json
import warnings

import mujoco
import numpy as np
import pytest

from caliper_jax import cli
from caliper_jax.errors import CaliperError
from mjx_backend.cpu import MujocoBackend
from mjx_backend.grasp import WeldGrasp, detect_gripper
from mjx_backend.lint import SettleRecord, contact_lint, lint_record
from mjx_backend.scene import Prop
from mjx_backend.sensors import DepthCamera, Lidar

SOFT = dict(solref=(0.3, 1.0), solimp=(0.1, 0.2, 0.01), friction=(1.0, 0.005, 0.0001))


def box(pos=(0.3, 0.0, 0.05), **kw):
    return Prop.box("box", (0.05, 0.05, 0.05), pos, **kw)


# ---- lint ----------------------------------------------------------------------------------------

def test_clean_scene_passes(fixture_models):
    assert contact_lint(fixture_models["gripper_arm"], ground=0.0, props=[box(material="wood")]) == []


def test_c001_explosion_is_detected(fixture_models):
    launched = box(pos=(0.3, 0.0, 0.5), velocity=(0.0, 0.0, 300.0, 0.0, 0.0, 0.0))
    findings = contact_lint(fixture_models["gripper_arm"], ground=0.0, props=[launched])
    assert [f.code for f in findings] == ["C001"]
    assert findings[0].severity == "error" and findings[0].value > 100 and "timestep" in findings[0].fix


def test_c002_penetration_is_detected(fixture_models):
    findings = contact_lint(fixture_models["gripper_arm"], ground=0.0, props=[box(material=SOFT)])
    assert [f.code for f in findings] == ["C002"]
    assert findings[0].value >= 0.8 and "solref" in findings[0].fix


def test_c003_jitter_is_detected(fixture_models):
    """A position servo whose explicit damping diverges (kv with the Euler integrator) chatters
    while it presses the jaw into a box: the normal force swings."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        findings = contact_lint(fixture_models["gripper_arm"], ground=0.0, actuators="position", kv=10.0,
                                props=[box(pos=(0.0, 0.0, 0.05), mass=0.5)])
    assert [f.code for f in findings] == ["C003"]
    assert findings[0].value > 0.5 and "kv" in findings[0].fix


def _record(force=None, depth=None, qvel=None, n=250):
    return SettleRecord(0.002, np.zeros((n, 3)) if qvel is None else qvel,
                        np.zeros(n) if depth is None else depth, np.zeros(n) if force is None else force)


def test_lint_thresholds():
    n = 250
    t = np.arange(n)
    assert lint_record(_record(force=10.0 + 2.4 * np.sin(t))) == []                      # p2p 4.8 < 5
    assert [f.code for f in lint_record(_record(force=10.0 + 2.6 * np.sin(t)))] == ["C003"]
    assert lint_record(_record(force=0.4 + 0.3 * np.sin(t))) == []                       # mean < 0.5 N
    depth = np.where(t < int(0.79 * n), 0.006, 0.0)
    assert lint_record(_record(depth=depth)) == []                                       # 79% < 80%
    assert [f.code for f in lint_record(_record(depth=np.full(n, 0.006)))] == ["C002"]
    grow = np.zeros((n, 3))
    grow[n // 2:, 0] = 1.0                                                               # E: 0 -> 0.5
    assert [f.code for f in lint_record(_record(qvel=grow, depth=np.full(n, 0.01)))] == ["C001"]  # suppresses
    small = grow * 0.4                                                                   # E = 0.08 < 0.1
    assert lint_record(_record(qvel=small)) == []
    unstable = SettleRecord(0.002, np.zeros((0, 3)), np.zeros(0), np.zeros(0), finite=False, unstable_at=0.3)
    assert [f.code for f in lint_record(unstable)] == ["C001"]


# ---- grasp ---------------------------------------------------------------------------------------

def test_gripper_detection(fixture_models):
    g = detect_gripper(fixture_models["gripper_arm"])
    assert g.joint == "gripper"
    assert (g.open, g.closed) == (pytest.approx(0.0392), pytest.approx(0.0008))
    assert detect_gripper(fixture_models["gripper_arm"], closed="hi").closed == pytest.approx(0.0392)
    with pytest.raises(CaliperError, match="found no gripper joint"):
        detect_gripper(fixture_models["pendulum2"])


def test_weld_grasp_lifts_and_releases_a_prop(fixture_models):
    m = fixture_models["gripper_arm"]
    g = detect_gripper(m)
    cube = box(pos=(0.0, 0.0, 0.05), mass=0.05, material="wood")      # top touches the jaw
    other = Prop.sphere("ball", 0.04, (0.4, 0.3, 0.04), mass=0.05)
    b = MujocoBackend(m, ground=0.0, props=[cube, other], actuators="position", kp=200.0, weld_body="auto",
                      options=dict(integrator="implicitfast"))
    grasp = WeldGrasp(b)
    b.enable()
    b.command([0.0, 0.0, g.open])
    b.step(0.1)
    assert grasp.touching() == ["box"] and grasp.held() is None
    assert grasp.update(closed=True) == "box"
    b.reset()
    assert grasp.held() is None                                         # reset releases
    b.command([0.0, 0.0, g.open])
    b.step(0.1)
    before = b.prop_poses()["box"][0].copy()
    assert grasp.update(closed=True) == "box"
    b.step(0.002)
    assert np.linalg.norm(b.prop_poses()["box"][0][:3] - before[:3]) < 1e-3   # snap-free
    b.command([-0.6, 0.0, g.closed])
    b.step(1.0)
    assert b.prop_poses()["box"][0][2] > 0.1                           # carried up
    assert grasp.update(closed=True) == "box"                          # one prop at a time
    assert grasp.update(closed=False) is None
    b.step(1.0)
    assert b.prop_poses()["box"][0][2] == pytest.approx(0.05, abs=2e-3)   # fell back to the ground


# ---- ray-cast sensors ------------------------------------------------------------------------------

def test_depth_camera_and_lidar_against_a_plane(fixture_models):
    b = MujocoBackend(fixture_models["gripper_arm"], ground=0.0)
    d = b.world_data()
    cam = DepthCamera(width=16, height=12, fovy=70.0)
    depth = cam.render(b.mj, d, pos=(2.0, 0.0, 1.5), R=np.eye(3))     # looking straight down
    np.testing.assert_allclose(depth, 1.5, atol=1e-9)                  # z-depth of a plane is constant
    up = np.diag([1.0, -1.0, -1.0])                                    # looking up: nothing there
    assert np.isnan(cam.render(b.mj, d, pos=(2.0, 0.0, 1.5), R=up)).all()
    lidar = Lidar(n_azimuth=12, elevations=(-30.0, 10.0))
    ranges, points = lidar.scan(b.mj, d, pos=(3.0, 0.0, 0.5), R=np.eye(3))
    np.testing.assert_allclose(ranges[0], 1.0, atol=1e-9)              # h / sin(30 deg)
    np.testing.assert_allclose(points[0, :, 2], 0.0, atol=1e-9)
    assert np.isnan(ranges[1]).all()
    # the robot is seen: straight down from z = 1 the ray meets the upper link's top face (z = 0.5)
    above = DepthCamera(width=1, height=1, fovy=10.0).render(b.mj, d, pos=(0.0, 0.0, 1.0), R=np.eye(3))
    assert above[0, 0] == pytest.approx(0.5, abs=1e-9)


# ---- CLI -------------------------------------------------------------------------------------------

def _cli(argv, capsys):
    rc = cli.main(argv)
    return rc, capsys.readouterr()


def test_cli_mjcf_and_contact_commands(tmp_path, capsys, monkeypatch):
    out = tmp_path / "arm.xml"
    rc, res = _cli(["mjcf", "gripper_arm", "--ground", "0",
                    "--prop", "box:0.05,0.05,0.05@0.3,0,0.05:0.1:wood",
                    "--out", str(out), "--check"], capsys)
    assert rc == 0 and out.is_file() and "wrote" in res.out
    assert mujoco.MjModel.from_xml_path(str(out)).nbody == 5
    rc, res = _cli(["contact-sim", "gripper_arm", "--ground", "0", "--integrator", "implicitfast",
                    "--prop", '{"kind": "sphere", "radius": 0.04, "pos": [0.3, 0, 0.04]}',
                    "--duration", "0.2",
                    "--json"], capsys)
    report = json.loads(res.out)
    assert rc == 0 and report["contacts"] >= 1 and report["ticks"] == 100
    rc, res = _cli(["contact-lint", "gripper_arm", "--ground", "0", "--prop", "box:0.05,0.05,0.05@0.3,0,0.05",
                    "--integrator", "implicitfast", "--json"], capsys)
    assert rc == 0 and json.loads(res.out)["findings"] == []
    rc, res = _cli(["contact-lint", "gripper_arm", "--prop", "blob:1@0,0,0"], capsys)
    assert rc == 2 and "kind 'blob'" in res.err

"""Task scenes, witnesses and checks on the real zoo (tasks/zoo) in CPU MuJoCo: every task builds
with its props where the file put them; every verdict is false at t = 0 and true at its witness
after a settled simulation; the witness poses agree with caliper's own FK; check_task finds no
error in the zoo and names the prop / zone / field of every broken variant."""
from __future__ import annotations

import dataclasses
import warnings

import mujoco
import numpy as np
import pytest

from caliper_jax.api import fk
from caliper_jax.errors import CaliperError
from mjx_backend.scene import Prop
from tasks.check import check_task
from tasks.predicates import evaluate_np, geometric
from tasks.scene import DEFAULT_KP, DEFAULT_KV, build_scene
from tasks.schema import Zone, load_task, zoo_files
from tasks.witness import (
    GRASP_TOL,
    PRESS_TOL,
    SIDE_TOL,
    _Kin,
    _pressed,
    _takes,
    jaw_face,
    top_face_center,
    verify_witness,
    witness,
)

ZOO = {t.name: t for t in (load_task(f) for f in zoo_files())}
NAMES = sorted(ZOO)


@pytest.fixture(scope="module")
def scenes():
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # no servo-stability note from compile_scene
        return {name: build_scene(task) for name, task in ZOO.items()}


@pytest.fixture(scope="module")
def witnesses(scenes):
    return {name: witness(ts) for name, ts in scenes.items()}


def _far_zone(task):
    """``task`` (a placed_in_zone task) with its zone moved out of the arm's reach."""
    zone = Zone(task.success.zone.name, (1.0, 0.0, 0.05), (0.07, 0.07, 0.06))
    return dataclasses.replace(task, zones=(zone,), success=dataclasses.replace(task.success, zone=zone))


def _moved_cube(task, pos):
    return dataclasses.replace(task, props=(dataclasses.replace(task.props[0], pos=pos),))


def test_zoo_builds_with_props_where_the_file_put_them(scenes):
    assert len(scenes) == 5
    for name, ts in scenes.items():
        assert ts.gripper.joint == "gripper" and ts.gripper.closed == pytest.approx(0.0008)
        np.testing.assert_allclose(ts.q0, [0.0, 0.0, 0.02])
        mj = ts.scene.mj
        assert mj.nu == ts.model.nq and set(ts.scene.layout.weld_eq) == set(ts.prop_names)
        np.testing.assert_allclose(mj.actuator_gainprm[:, 0], DEFAULT_KP)
        np.testing.assert_allclose(-mj.actuator_biasprm[:, 2], DEFAULT_KV)
        d = mujoco.MjData(mj)
        d.qpos[:] = ts.qpos(ts.q0)
        mujoco.mj_forward(mj, d)
        for prop in ts.task.props:
            body = ts.scene.layout.prop_body[prop.name]
            np.testing.assert_allclose(d.xpos[body], prop.pos, atol=1e-12, err_msg=f"{name}: {prop.name}")
            np.testing.assert_allclose(d.xquat[body], prop.quat, atol=1e-12)
            assert mj.body_mass[body] == pytest.approx(prop.mass)


@pytest.mark.parametrize("name", NAMES)
def test_witness_is_false_at_start_and_true_when_settled(name, scenes, witnesses):
    ts, w = scenes[name], witnesses[name]
    names, pos0 = ts.prop_names, ts.pos0
    i = names.index(w.prop)
    nobody = np.zeros(len(names), bool)
    assert not evaluate_np(ts.task.success, names, pos0, pos0, ts.vel0, nobody, nobody)
    # the grasp and the carry, re-derived through caliper's FK (the witness measured them in MuJoCo)
    model = ts.model
    jaw = model.frame_id("jaw")
    T_grasp, T_carry = fk(model, w.q_grasp)[jaw], fk(model, w.q_carry)[jaw]
    face, _ = jaw_face(ts)
    top = top_face_center(ts.task.props[i])
    if np.linalg.norm(T_grasp[:3, :3] @ face + T_grasp[:3, 3] - top) <= GRASP_TOL:
        assert w.grasp_error <= GRASP_TOL
    else:               # a side grasp (every top grasp presses into the prop): the env's rule takes it
        assert name == "sort-blocks" and w.grasp_error <= SIDE_TOL
        kin = _Kin(ts)
        kin.set(w.q_grasp)
        assert _takes(ts, kin, ts.task.props[i]) and _pressed(kin, w.prop) <= PRESS_TOL
    np.testing.assert_allclose(T_carry[:3, :3] @ w.relpose[:3] + T_carry[:3, 3], w.pos_carry[i], atol=1e-5)
    assert evaluate_np(geometric(ts.task.success), names, w.pos_carry, pos0, np.zeros_like(pos0))
    lo, hi = np.asarray(model.qpos_lower), np.asarray(model.qpos_upper)
    assert np.all((w.path >= lo - 1e-9) & (w.path <= hi + 1e-9))
    assert w.path_clear
    v = verify_witness(ts, w)
    assert not v.at_start
    assert v.success, f"{name}: settled at {v.pos[i]} moving {np.linalg.norm(v.vel[i])} m/s"
    assert v and v.settle_s is not None and v.drift < 0.01


def test_witness_of_any_of_skips_a_term_whose_carry_must_push_through_a_prop(witnesses):
    # the arm is planar: the tall block cannot pass the short block standing between it and the dock
    assert witnesses["sort-blocks"].prop == "short_block"
    assert [w.prop for w in witnesses.values()].count("cube") == 4


@pytest.mark.parametrize("name", NAMES)
def test_check_task_finds_no_error_in_the_zoo(name):
    findings = check_task(ZOO[name], baselines=0)     # K011 (random policies): test_task_baselines.py
    assert [f for f in findings if f.severity == "Error"] == [], findings


def test_check_task_names_the_prop_inside_the_robot():
    findings = check_task(_moved_cube(ZOO["lift-cube"], (0.0, 0.0, 0.3)), simulate=False)
    k002 = [f for f in findings if f.code == "K002"]
    assert len(k002) == 1 and k002[0].severity == "Error"
    assert "prop 'cube'" in k002[0].message and k002[0].link == "upper" and k002[0].hint
    assert k002[0].message.startswith("task lift-cube:")


def test_check_task_flags_a_prop_below_the_ground():
    findings = check_task(_moved_cube(ZOO["lift-cube"], (0.0, 0.0, 0.02)), simulate=False)
    k003 = [f for f in findings if f.code == "K003"]
    assert len(k003) == 1 and "prop 'cube'" in k003[0].message and "30.0 mm" in k003[0].message


def test_check_task_flags_a_zone_out_of_reach():
    task = _far_zone(ZOO["place-cube"])
    findings = check_task(task, baselines=0)
    k005 = [f for f in findings if f.code == "K005"]
    assert len(k005) == 1 and k005[0].severity == "Error"
    assert "task place-cube" in k005[0].message and "placed_in_zone(cube, bin, released)" in k005[0].message
    with pytest.raises(CaliperError, match=r"task place-cube: success placed_in_zone\(cube, bin, released\)"):
        witness(build_scene(task))


def test_weld_witness_refuses_a_pushed_term(scenes):
    """A weld witness carries its prop to the goal, which ``"pushed": true`` forbids: it says so in
    one line naming the term instead of simulating a carry that must fail (a friction push task's
    K005 witness is its push expert). Planted bug caught: ``goals`` treating a pushed term as a
    plain placement (then K005 reports a misleading failed settled simulation)."""
    task = ZOO["place-cube"]
    pushed = dataclasses.replace(task, success=dataclasses.replace(task.success, released=False, pushed=True))
    ts = dataclasses.replace(scenes["place-cube"], task=pushed)
    want = r"^task place-cube: placed_in_zone\(cube, bin, pushed\): the weld witness carries the prop"
    with pytest.raises(CaliperError, match=want + " to its goal, which a pushed term forbids"):
        witness(ts)


def test_check_task_flags_a_verdict_true_at_start():
    task = ZOO["place-cube"]
    zone = dataclasses.replace(task.success.zone, center=(0.0, 0.0, 0.05))
    moved = dataclasses.replace(task.success, zone=zone)
    pushed = dataclasses.replace(task, zones=(zone,), success=geometric(moved))    # the v1 predicate
    assert "K001" in [f.code for f in check_task(pushed, simulate=False)]
    # released: the cube was never carried at t = 0, so the tightened predicate is false there
    placed = dataclasses.replace(task, zones=(zone,), success=moved)
    assert "K001" not in [f.code for f in check_task(placed, simulate=False)]


def test_build_errors_name_the_task_and_field():
    lift = ZOO["lift-cube"]
    with pytest.raises(CaliperError, match=r"task lift-cube: q0: joint 'j2' = 2 is outside"):
        build_scene(dataclasses.replace(lift, q0=(0.0, 2.0, 0.02)))
    with pytest.raises(CaliperError, match=r"task lift-cube: q0: 2 values"):
        build_scene(dataclasses.replace(lift, q0=(0.0, 0.0)))
    jaw = Prop.box("jaw", (0.05,) * 3, (0.3, 0.0, 0.05))
    with pytest.raises(CaliperError, match=r"task lift-cube: prop 'jaw': the name is taken"):
        build_scene(dataclasses.replace(lift, props=lift.props + (jaw,)))
    with pytest.raises(CaliperError, match=r"task lift-cube: gripper: .*no 1-dof joint named 'claw'"):
        build_scene(dataclasses.replace(lift, gripper=dataclasses.replace(lift.gripper, joint="claw")))
    [k000] = check_task(dataclasses.replace(lift, q0=(0.0, 2.0, 0.02)), baselines=0)
    assert k000.code == "K000" and "q0" in k000.message

"""The studio without a browser: the live session's pacing / pause / reset / errors / recording,
and the server state after each panel's actions (tests/browser drives the same through Chromium)."""

import json

import numpy as np
import pytest

from caliper_jax.errors import CaliperError

pytest.importorskip("mujoco")


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


@pytest.fixture(scope="module")
def session():
    from caliper_jax.studio.live import LiveSession

    s = LiveSession("lift-cube", clock=FakeClock())
    yield s
    s.stop()


def _fresh(session):
    session.stop()
    session.error = None
    session.clock = FakeClock()
    session.paused = False
    session.reset()
    session.max_debt_s = session.dropped_s = 0.0
    return session


def test_live_session_is_a_1ms_scene_of_the_task(session):
    s = _fresh(session)
    assert s.dt == 1e-3 and s.mj.opt.timestep == 1e-3
    assert s.control_every == 20 and s.record_fps == 50  # 50 fps task on the 1 kHz loop
    snap = s.snapshot()
    assert snap["tick"] == 0 and snap["q"] == pytest.approx(list(s.ts.q0), abs=1e-12)
    assert set(snap["props"]) == {"cube"} and snap["success"] is False


def test_reset_is_deterministic_bit_for_bit(session):
    s = _fresh(session)
    s.set_target([0.3, -0.2, 0.0])
    s.advance(300)
    first = (s.data.qpos.copy(), s.data.qvel.copy(), s.data.qacc_warmstart.copy())
    s.reset()
    assert s.tick == 0 and s.time == 0.0
    s.set_target([0.3, -0.2, 0.0])
    s.advance(300)
    assert np.array_equal(first[0], s.data.qpos) and np.array_equal(first[1], s.data.qvel)
    assert np.array_equal(first[2], s.data.qacc_warmstart)


def test_accumulator_turns_clock_time_into_whole_steps_with_a_debt_cap(session):
    s = _fresh(session)
    clock = s.clock
    assert s.pump() == 0  # the first pump only starts the clock
    clock.t += 0.0105
    assert s.pump() == 10  # 10.5 ms -> 10 steps, 0.5 ms carried
    clock.t += 0.0005
    assert s.pump() == 1
    clock.t += 2.0  # a 2 s stall: capped at 0.25 s, the rest dropped
    assert s.pump() == 250
    assert s.dropped_s == pytest.approx(1.75, abs=1e-6)
    assert s.max_debt_s == pytest.approx(0.25, abs=1e-9)
    assert s.tick == 261


def test_pause_freezes_without_de_energising(session):
    s = _fresh(session)
    s.set_target([0.4, 0.3, 0.0])
    s.pump()
    s.clock.t += 0.5
    s.pump()  # 0.25 s (capped): the arm moves towards the target
    s.pause()
    q_paused, tick = s.data.qpos.copy(), s.tick
    s.clock.t += 5.0
    assert s.pump() == 0 and s.tick == tick and np.array_equal(s.data.qpos, q_paused)
    assert s.target.tolist() == pytest.approx([0.4, 0.3, 0.0])  # servo target untouched
    s.resume()
    s.pump()
    s.clock.t += 0.01
    assert s.pump() == 10  # no catch-up for the paused time
    arm = s._lay.q_to_qpos[:2]
    assert np.max(np.abs(s.data.qpos[arm] - q_paused[arm])) < 0.05  # still held: it did not fall


def test_errors_end_the_session_loudly(session, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MuJoCo writes its warning to MUJOCO_LOG.TXT in the working directory
    s = _fresh(session)
    with pytest.raises(CaliperError, match="target: expected 3 finite"):
        s.set_target([np.nan, 0, 0])
    s.data.qvel[0] = np.nan
    with pytest.raises(CaliperError, match="live session of lift-cube ended: unstable"):
        s.advance(5)
    assert s.snapshot()["error"].startswith("unstable")
    with pytest.raises(CaliperError, match="ended"):
        s.advance(1)
    with pytest.raises(CaliperError, match="ended"):
        s.start()
    s.error = None
    s.reset()


def test_weld_grasp_takes_and_releases_the_prop(session):
    s = _fresh(session)
    cube0 = np.asarray(s.snapshot()["props"]["cube"][:3])  # the start pose has the cube between the jaws
    s.set_gripper(True)
    s.advance(1)  # the grasp rule runs at the control tick (tick 0 here)
    snap = s.snapshot()
    assert snap["held"] == "cube" and snap["target"][2] == pytest.approx(s.layout.gripper_closed)
    assert np.linalg.norm(np.asarray(snap["props"]["cube"][:3]) - cube0) < 1e-3  # no snap across the weld
    s.advance(2 * s.control_every - 1)
    assert s.snapshot()["held"] == "cube"
    s.set_gripper(False)
    s.advance(s.control_every)
    assert s.snapshot()["held"] is None
    s.set_gripper(True)
    s.advance(s.control_every)
    s.reset()  # reset releases
    assert s.held == -1 and not s.data.eq_active.any()


# ~12 s (the Panda's IK compiles once)
def test_panda_task_grasps_by_friction_live_and_makes_no_weld():
    """Close gripper + lift on panda-lift-cube: the pads' friction holds the cube up (the task's
    grasp model, as VecEnv runs it), the rule reports it held, and no equality of the scene (the
    Panda's finger coupling) is touched."""
    import types

    from caliper_jax.studio.live import LiveSession
    from tasks.arm_expert import ArmExpert

    s = LiveSession("panda-lift-cube", clock=FakeClock())
    eq_active, eq_data = s.data.eq_active.copy(), s.mj.eq_data.copy()
    assert s.grasp == "friction" and s.snapshot()["grasp"] == "friction"
    # the expert's own kinematics give the grasp poses (top-down, yaw matched to the cube)
    ex = ArmExpert(types.SimpleNamespace(task_scene=s.ts, layout=s.layout, num_envs=1))
    cube = np.asarray(s.snapshot()["props"]["cube"])
    yaw = ex._prop_yaw(cube[3:], cube[:3])
    pre = ex._ik(cube[:3] + [0.0, 0.0, ex.pre_m], yaw, s.target)
    pre[ex.finger] = ex.open
    grasp = ex._ik(cube[:3], yaw, pre)
    grasp[ex.finger] = ex.open
    for q, steps in ((pre, 1500), (grasp, 1000)):
        s.set_target(q)
        s.advance(steps)
    assert s.snapshot()["held"] is None  # open jaws around the cube: nothing held
    s.set_gripper(True)  # what "Close gripper" does
    s.advance(600)
    assert s.snapshot()["held"] == "cube"
    s.set_arm_target(ex._ik(cube[:3] + [0.0, 0.0, ex.lift_m], yaw, grasp))
    s.advance(1500)
    snap = s.snapshot()
    lifted = np.asarray(snap["props"]["cube"][:3])
    assert snap["held"] == "cube" and snap["gripper_closed"] and snap["success"] is True
    assert lifted[2] - cube[2] > 0.8 * ex.lift_m  # carried up by the pads
    np.testing.assert_array_equal(s.data.eq_active, eq_active)  # no weld made
    np.testing.assert_array_equal(s.mj.eq_data, eq_data)
    s.set_gripper(False)  # opening drops it: physics, not a weld, held it
    s.advance(800)
    snap = s.snapshot()
    assert snap["held"] is None and snap["props"]["cube"][2] < cube[2] + 0.01


# ~25 s (the expert's IK and motion planning); the default test above covers the grasp
@pytest.mark.slow
def test_expert_plan_driven_live_lifts_the_cube(session):
    from tasks.expert import plan_demo

    s = _fresh(session)
    demo = plan_demo(s.ts, s.layout.fps)
    for q in demo.targets:  # one servo target per control tick, as a teleoperator would send them
        s.set_target(q)
        s.advance(s.control_every)
    s.advance(300)
    snap = s.snapshot()
    assert snap["held"] == "cube" and snap["success"] is True


def test_background_thread_steps_in_real_time_without_a_browser(session):
    import time

    s = _fresh(session)
    s.clock = time.perf_counter
    s.start()
    time.sleep(0.4)
    s.stop()
    assert not s.running and s.error is None
    assert 150 < s.tick <= 450  # about 400 steps of 1 ms (a loaded host may drop some)


def test_recording_at_exact_tick_decimation(session, tmp_path):
    from caliper_jax.dataset import LeRobotReader

    s = _fresh(session)
    root = tmp_path / "teleop"
    s.start_take(root, "wave")
    s.advance(7)
    s.set_target([0.2, 0.1, 0.0])
    s.advance(93)  # 100 steps = frames at ticks 0, 20, 40, 60, 80
    s.pause()  # pausing mid-take: no ticks, no frames, no gap
    s.clock.t += 1.0
    s.pump()
    s.resume()
    s.advance(20)
    assert s.stop_take(save=True) == 0
    s.start_take(root)
    s.advance(40)
    s.reset()  # a reset discards the take and says so
    assert s.snapshot()["recording"] is False and "discarded" in s.notes[-1]
    with pytest.raises(CaliperError, match="no take"):
        s.stop_take()
    with pytest.raises(CaliperError, match="must divide the physics rate"):
        s.start_take(root, fps=30)
    s.finish_dataset()
    r = LeRobotReader(root)
    assert r.num_episodes == 1 and r.fps == 50
    ep = r.episode(0)
    assert len(ep["timestamp"]) == 6
    assert np.allclose(ep["timestamp"], np.arange(6) / 50.0)
    assert ep["action"][0].tolist() == pytest.approx([0.0, 0.0, 0.02])  # target at tick 0
    assert ep["action"][1].tolist() == pytest.approx([0.2, 0.1, 0.0])  # target at tick 20
    assert r.episodes[0]["tasks"] == ["wave"]


# ---- the server (no browser) ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def app():
    pytest.importorskip("viser")
    from caliper_jax.studio import StudioApp

    a = StudioApp("gripper_arm", port=0)
    yield a
    a.close()


def test_app_state_and_sliders_move_the_drawn_robot(app):
    s = app.state()
    assert s["model"] == "gripper_arm" and s["nq"] == 3 and s["jog"]["joint_names"] == ["j1", "j2", "gripper"]
    assert s["jog"]["limits"][2] == pytest.approx([0.0, 0.04])
    before = np.asarray(s["body_positions"])
    app.jog.set_joint("j1", 0.7)
    s = app.state()
    assert s["q"][0] == pytest.approx(0.7) and s["drawn_q"][0] == pytest.approx(0.7)
    assert s["jog"]["sliders"][0] == pytest.approx(0.7)
    assert np.max(np.abs(np.asarray(s["body_positions"]) - before)) > 0.01
    from caliper_jax import api

    wrist = api.fk(app.model, s["q"])[app.model.frame_id("wrist")][:3, 3]
    assert s["jog"]["gizmo"]["position"] == pytest.approx(wrist.tolist(), abs=1e-6)
    hud = s["jog"]["hud"]
    assert set(hud) >= {"sigma_min", "manipulability", "condition_number", "escape_direction"}
    app.jog.set_joint("j1", 99.0)  # clipped into the limits
    assert app.q[0] == pytest.approx(1.5)


def test_bad_input_is_named(app):
    with pytest.raises(CaliperError, match="q: expected 3 finite"):
        app.jog.set_q([0.0, 0.0])
    with pytest.raises(CaliperError, match="locked: unknown joint"):
        app.jog.set_locked(["elbow"])
    with pytest.raises(CaliperError, match="no such directory"):
        app.data.open("/nonexistent/dataset")
    with pytest.raises(CaliperError, match="move kind"):
        app.motion.plan("MOVE_X")
    with pytest.raises(CaliperError, match="no live session"):
        app.simulate.pause()


def test_ik_gizmo_target_is_reached_with_locks(app):
    from caliper_jax import api

    goal = np.array([0.4, -0.5, 0.02])
    T = api.fk(app.model, goal)[app.model.frame_id("wrist")]
    app.jog.set_q([0.0, 0.2, 0.02])
    app.jog.set_locked(["gripper"])
    r = app.jog.solve_target(T)
    app.jog.set_locked([])
    assert r["success"] and r["pos_residual"] < 1e-4 and r["locked"] == ["gripper"]
    reached = api.fk(app.model, app.q)[app.model.frame_id("wrist")][:3, 3]
    assert np.linalg.norm(reached - T[:3, 3]) < 1e-4
    assert app.q[2] == pytest.approx(0.02)  # the locked gripper kept its value
    assert app.state()["jog"]["ik"]["success"] is True


def test_gizmo_burst_is_coalesced_and_the_newest_move_is_drawn(app):
    """Pointer moves go to the drag worker: a burst never queues (superseded moves are dropped)
    and the arm ends at the newest target, not at an older one solved last."""
    from caliper_jax import api

    jog = app.jog
    app.jog.set_q([0.0, 0.2, 0.02])
    wrist = app.model.frame_id("wrist")
    goals = [np.array([0.4 + 0.02 * k, -0.5, 0.02]) for k in range(20)]
    solved0, dropped0 = jog.drag.done, jog.drag.dropped
    for g in goals:  # faster than IK: one solve runs while the next moves arrive
        T = api.fk(app.model, g)[wrist]
        jog.gizmo.position, jog.gizmo.wxyz = T[:3, 3], _wxyz_of(T)
        jog._gizmo_cb(None)
    assert jog.drag.wait(60.0) and jog.drag.error is None
    solved = jog.drag.done - solved0
    assert jog.drag.dropped - dropped0 > 0 and solved < len(goals)
    assert solved + jog.drag.dropped - dropped0 == len(goals)  # each move solved or superseded
    last = np.asarray(api.fk(app.model, goals[-1])[wrist])[:3, 3]
    assert np.asarray(jog.last_ik["target"])[:3, 3] == pytest.approx(last)
    assert np.linalg.norm(np.asarray(api.fk(app.model, app.q)[wrist])[:3, 3] - last) < 1e-3
    assert app.state()["drawn_q"] == pytest.approx(app.q.tolist())
    s, st, f = jog.drag.history[-1]
    assert s <= st <= f


def _wxyz_of(T):
    from caliper_jax.studio.scene import wxyz

    return wxyz(np.asarray(T)[:3, :3])


def test_simulate_panel_runs_live_and_jog_edits_the_servo_target(app):
    import time

    app.simulate.start("lift-cube")
    try:
        s = app.simulate.session
        deadline = time.monotonic() + 10
        while s.tick < 50 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert app.live() and app.state()["simulate"]["running"]
        app.jog.set_joint("j1", 0.3)  # edits the servo target while live
        assert s.target[0] == pytest.approx(0.3)
        time.sleep(0.5)
        assert app.state()["simulate"]["q"][0] > 0.1  # the servo moved the simulated arm
        app.simulate.pause()
        tick = s.tick
        time.sleep(0.1)
        assert s.tick == tick and app.state()["simulate"]["paused"]
        app.simulate.reset()
        assert s.tick == 0 and app.state()["simulate"]["q"][0] == pytest.approx(0.0, abs=1e-9)
    finally:
        app.simulate.stop()
    assert not app.live() and app.state()["simulate"]["error"] is None


def _wait(cond, timeout=15.0):
    import time

    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.01)
    return cond()


def test_close_gripper_then_slider_edit_keeps_the_prop_held(app):
    """The gripper is its own control: an arm slider edit while live (which sends the whole slider
    vector, the open gripper slider included) must not open it and drop the held cube."""
    app.jog.set_q([0.0, 0.0, 0.04])  # the Jog gripper slider wide open
    app.simulate.start("lift-cube")
    try:
        s = app.simulate.session
        app.simulate.gripper(True)
        assert _wait(lambda: s.snapshot()["held"] == "cube"), "the closed gripper did not take the cube"
        app.jog.set_joint("j2", -0.3)  # an arm slider edit: j2 moves, the gripper stays closed
        tick = s.tick
        assert _wait(lambda: s.tick > tick + 3 * s.control_every)
        snap = s.snapshot()
        assert snap["target"][1] == pytest.approx(-0.3) and snap["gripper_closed"]
        assert snap["target"][2] == pytest.approx(s.layout.gripper_closed)
        assert snap["held"] == "cube" and "gripper closed" in app.simulate.status.content
        app.simulate.gripper(False)
        assert _wait(lambda: s.snapshot()["held"] is None)  # the gripper's own control opens it
    finally:
        app.simulate.stop()


def test_task_fixtures_are_drawn_at_their_pose_and_cleared(app):
    """A task's scene.fixtures (panda-insert-peg's hole walls) are drawn as boxes at their world
    pose, size and colour next to its props and zones, and clearing the Simulate scene removes
    them (without the fixtures the browser shows a peg going into a hole that is not there)."""
    from caliper_jax.studio.simulate import draw_task_objects
    from tasks.schema import find_task, load_task

    task = load_task(find_task("panda-insert-peg"))
    assert len(task.fixtures) == 4
    props, statics = draw_task_objects(app.server.scene, task, "/fixture_test")
    assert set(props) == {p.name for p in task.props}
    drawn = {h.name: h for h in statics}
    assert len(statics) == len(task.zones) + len(task.fixtures)
    for f in task.fixtures:
        h = drawn[f"/fixture_test/fixtures/{f.name}"]
        assert np.asarray(h.position) == pytest.approx(f.pos)
        assert np.asarray(h.wxyz) == pytest.approx(f.quat)
        assert np.asarray(h.dimensions) == pytest.approx(2.0 * np.asarray(f.size))
        assert tuple(h.color) == tuple(int(255 * c) for c in f.rgba[:3])
    app.simulate._props, app.simulate._statics = props, statics
    app.simulate.clear_scene()
    assert all(h._impl.removed for h in statics) and app.simulate._statics == []


def test_simulate_offers_every_zoo_task_and_runs_the_task_robot(app):
    """Panda tasks are listed; starting a task of another robot loads that robot, the Robot box
    names it, and the old robot's and the old session's scene nodes are removed."""
    from caliper_jax.studio.simulate import task_for_robot, zoo_names

    names = zoo_names()
    assert {"lift-cube", "panda-lift-cube"} <= set(names)
    assert task_for_robot(names, "panda") == "panda-lift-cube"
    assert task_for_robot(names, "gripper_arm", "place-cube") == "place-cube"
    assert app.simulate.task.value in names and app.robot_text.value == "gripper_arm"
    app.simulate.start("lift-cube")  # same robot: no reload
    old_props = list(app.simulate._props.values())
    old_robot = app.drawing
    app.simulate.start("place-cube")
    try:
        assert app.drawing is old_robot and all(h._impl.removed for h in old_props)
        assert set(app.simulate._props) == set(app.simulate.session.prop_names)
        assert len(app.simulate._statics) == len(app.simulate.session.task.zones) >= 1
    finally:
        app.simulate.stop()
    zones = list(app.simulate._statics)
    app.load_robot("pendulum2")  # another robot: the session's props and zones go
    try:
        assert all(h._impl.removed for h in zones) and app.simulate._props == {}
        assert app.robot_text.value == "pendulum2" and app.state()["model"] == "pendulum2"
        pend = app.drawing
        app.simulate.start("lift-cube")  # a gripper_arm task: its robot comes back, named
        assert all(h._impl.removed for h in pend.frames) and pend.skeleton._impl.removed
        assert app.state()["model"] == "gripper_arm" and app.robot_text.value == "gripper_arm"
        assert app.simulate.state()["robot"] == "gripper_arm"
        assert app.state()["nq"] == 3 and len(app.jog.sliders) == 3
    finally:
        app.simulate.stop()
        if app.model.name != "gripper_arm":
            app.load_robot("gripper_arm")


def test_jog_collision_status_against_a_scene(app):
    from caliper_jax.collision import build_collision_model
    from caliper_jax.collision.api import check
    from caliper_jax.collision.geometry import box, ground
    from caliper_jax.studio.scene import COLLIDING, OBSTACLE

    app.jog.set_q([0.0, 0.0, 0.02])
    c = app.state()["jog"]["collision"]  # default scene: the ground plane
    assert c["obstacles"] == ["ground"] and c["in_collision"] is False and c["min_distance"] > 0
    jaw_box = "0,0.02,0.12,0.03,0.03,0.03"  # around the jaw at q = 0
    try:
        c = app.jog.set_scene(boxes=jaw_box)
        cm = build_collision_model(app.model, [ground(0.0), box([0, 0.02, 0.12], [0.03, 0.03, 0.03])])
        direct = check(app.model, cm, app.q)
        assert c["in_collision"] and c["min_distance"] == pytest.approx(direct["min_distance"], abs=1e-9)
        assert c["hit_obstacles"] == ["box0"]
        assert {"jaw", "box0"} in [{p["a"], p["b"]} for p in c["colliding"]]
        jaw_body = app.jog.cm.body[app.jog.cm.names.index("jaw")]
        assert jaw_body in c["bodies"] and app.drawing.highlighted == (jaw_body,)
        assert tuple(app.jog.obstacle_drawing.handles["box0"][0].color) == COLLIDING
        assert "IN COLLISION" in app.jog.collision_md.content
        app.jog.set_joint("j1", 1.0)  # every slider change is checked: swung clear of the box
        c = app.state()["jog"]["collision"]
        assert not c["in_collision"] and c["hit_obstacles"] == [] and app.drawing.highlighted == ()
        assert tuple(app.jog.obstacle_drawing.handles["box0"][0].color) == OBSTACLE
        with pytest.raises(CaliperError, match="boxes field, box 1"):
            app.jog.set_scene(boxes=jaw_box + ";1,2,3")
        # padded capacity: new, moved and removed boxes reuse the compiled check (no recompile)
        from caliper_jax.collision.api import _stage1

        compiled = _stage1._cache_size()
        app.jog.set_q([0.0, 0.0, 0.02])  # the jaw back inside the jaw box
        c = app.jog.set_scene(boxes="0.3,0.3,0.1,0.02,0.02,0.02;0,0.02,0.12,0.03,0.03,0.03")
        assert c["obstacles"] == ["ground", "box0", "box1"] and c["hit_obstacles"] == ["box1"]
        c = app.jog.set_scene(boxes="0.3,0.3,0.1,0.02,0.02,0.02", ground=False)
        assert c["obstacles"] == ["box0"] and not c["in_collision"]
        assert all("box1" not in (p["a"], p["b"]) for p in c["colliding"])  # parked slots left out
        assert _stage1._cache_size() == compiled and app.state()["jog"]["scene_capacity"] == 8
    finally:
        app.jog.set_scene(boxes="", ground=True)
    assert app.state()["jog"]["collision"]["obstacles"] == ["ground"]


def test_padded_scene_grows_past_its_capacity(app):
    from caliper_jax.collision.geometry import box
    from caliper_jax.studio.obstacles import FAR, PaddedScene

    sc = PaddedScene(app.model, capacity=2)
    cm = sc.place(False, [box([0.1 * k, 0, 0.1], [0.01] * 3) for k in range(3)])
    assert sc.capacity == 4 and sc.notes and sc.active == ("box0", "box1", "box2")
    p = np.asarray(cm.p)
    assert p[sc.row["box2"]][0] == pytest.approx(0.2) and p[sc.row["box3"]][0] == pytest.approx(FAR)
    assert p[sc.row["ground"]][2] == pytest.approx(-FAR)  # the ground off: parked below


def test_player_moves_by_the_clock_and_stops_at_the_end():
    import threading
    import time

    from caliper_jax.studio.motion import Player

    clock, seen, lock = FakeClock(), [], threading.Lock()

    def seek(t):
        with lock:
            seen.append(t)

    def wait_for(cond):
        deadline = time.monotonic() + 10
        while not cond() and time.monotonic() < deadline:
            time.sleep(0.005)
        assert cond()

    p = Player(seek, period=0.005, clock=clock)
    p.play(0.2, 1.0, speed=2.0)
    wait_for(lambda: seen and seen[-1] == pytest.approx(0.2))
    clock.t = 0.25  # 2x speed: 0.2 + 0.5
    wait_for(lambda: seen[-1] == pytest.approx(0.7))
    assert p.playing
    p.pause()
    n = len(seen)
    clock.t = 0.3
    time.sleep(0.03)
    assert not p.playing and len(seen) == n  # paused: no more seeks
    p.play(1.0, 1.0)  # at the end: plays again from the start
    wait_for(lambda: seen[-1] == pytest.approx(0.0))
    clock.t += 5.0
    wait_for(lambda: not p.playing)
    assert seen[-1] == 1.0  # the last seek is the end itself
    with pytest.raises(CaliperError, match="playback speed"):
        p.play(0.0, 1.0, speed=0.0)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """4 episodes of a 3-joint wave; episode 3 repeats episode 1 (doctor D015 names episode 3)."""
    from tests.studio_data import write_wave_dataset

    return write_wave_dataset(tmp_path_factory.mktemp("studio") / "wave")


def test_data_cameras_follow_the_replay_in_their_shared_mp4(app, tmp_path, monkeypatch):
    """Each video feature gets a labelled <video> of its MP4 (sent once per file), seeked to the
    middle of the replayed frame inside the episode's segment (from_timestamp / to_timestamp).
    tests/browser checks the frames the browser then shows."""
    import base64

    pytest.importorskip("av")
    from caliper_jax.dataset import LeRobotReader
    from tests.studio_data import CAMERA_KEY, write_camera_dataset

    root = write_camera_dataset(tmp_path / "cams")
    reader = LeRobotReader(root)
    try:
        app.data.open(root)
        cams = app.state()["data"]["cameras"]
        assert [c["key"] for c in cams] == [CAMERA_KEY] and cams[0]["time"] == pytest.approx(0.05)
        views = app.data.cameras
        page = views._videos[0].content
        mp4 = reader.video_path(1, CAMERA_KEY).read_bytes()
        assert base64.b64encode(mp4).decode() in page and f'aria-label="{CAMERA_KEY}"' in page
        app.data.select(episode=1, frame=3)
        c = app.state()["data"]["cameras"][0]
        meta = reader.episode_meta(1)
        lo, hi = (meta[f"videos/{CAMERA_KEY}/{k}"] for k in ("from_timestamp", "to_timestamp"))
        assert (c["from_timestamp"], c["to_timestamp"]) == (lo, hi) and lo > 0  # not the file's start
        assert c["time"] == pytest.approx(lo + 3.5 / reader.fps) and lo <= c["time"] < hi
        assert f"{c['time']:.6f}" in views._sync.content
        assert views._videos[0].content == page  # the same file: not sent again
        app.data.step(9)  # the last frame stays inside the segment
        assert app.state()["data"]["cameras"][0]["time"] == pytest.approx(lo + 9.5 / reader.fps)
        views._files[0] = None  # a file over the cap is named, not embedded
        monkeypatch.setattr("caliper_jax.studio.cameras.MAX_VIDEO_BYTES", 100)
        app.data.step(0)
        assert "over the" in app.state()["data"]["cameras"][0]["error"]
        assert "base64" not in views._videos[0].content
    finally:
        app.data.cameras.clear()


def test_data_doctor_finding_jumps_to_its_episode(app, dataset):
    from caliper_jax.dataset import LeRobotReader

    st = app.data.open(dataset)
    assert st["episodes"] == 4 and st["feature"] == "observation.state" and st["episode"] == 0
    report = app.data.run_doctor()
    codes = [f["code"] for f in report["findings"]]
    i = codes.index("D015")
    f = report["findings"][i]  # its button shows code, severity, where and the message
    label = app.data._buttons[i].label
    assert label.startswith(f"D015 {f['severity']} ep 3") and f["message"][:40] in label
    assert app.data.plot.scales["x"]["time"] is False  # the x axis is seconds, not dates
    t = np.asarray(app.data.plot.data[0])
    assert t[0] == 0.0 and t[1] == pytest.approx(1 / 50)
    jumped = app.data.jump(i)
    s = app.state()["data"]
    assert jumped["episode"] == 3 and s["episode"] == 3 and s["frame"] == 0
    state = LeRobotReader(dataset).episode(3)["observation.state"]
    assert s["replayed"] == pytest.approx(state[0].tolist())  # the frame replays on the robot
    assert app.q.tolist() == pytest.approx(state[0].tolist(), abs=1e-6)
    app.data.select(frame=12, dim=1)
    assert app.state()["data"]["frame"] == 12 and app.state()["data"]["dim"] == 1
    with pytest.raises(CaliperError, match="frame 40: episode 3 has 40 frames"):
        app.data.select(frame=40)


def test_data_replay_draws_the_task_props_at_their_recorded_poses(app, session, tmp_path):
    from caliper_jax.dataset import LeRobotReader

    s = _fresh(session)
    s.set_gripper(True)  # the cube is taken and carried while j2 moves
    s.set_target([0.0, -0.3, s.layout.gripper_closed])
    s.start_take(tmp_path / "take", "lift-cube")
    s.advance(200)  # 10 frames at 50 fps
    s.stop_take(save=True)
    s.finish_dataset()
    env = LeRobotReader(tmp_path / "take").episode(0)["observation.environment_state"]
    try:
        app.data.open(tmp_path / "take")
        app.data.select(frame=7)
        poses = app.state()["data"]["props"]
        assert set(poses) == {"cube"} and poses["cube"] == pytest.approx(env[7].tolist())
        assert np.asarray(app.data.props["cube"].position) == pytest.approx(env[7][:3], abs=1e-6)
        assert np.linalg.norm(env[7][:3] - env[0][:3]) > 1e-3  # the replayed cube moved
    finally:
        app.data.close()


def test_data_episode_plays_on_the_robot_at_the_dataset_fps(app, dataset):
    import time

    from caliper_jax.dataset import LeRobotReader

    if not app.state()["data"]["open"] or app.state()["data"]["root"] != str(dataset):
        app.data.open(dataset)
    app.data.select(episode=2, frame=0)
    state = LeRobotReader(dataset).episode(2)["observation.state"]
    clock = FakeClock()
    real = app.data.player.clock
    app.data.player.clock = clock
    try:
        app.data.play()
        clock.t = 0.1  # 50 fps: frame 5
        deadline = time.monotonic() + 10
        while app.data.frame != 5 and time.monotonic() < deadline:
            time.sleep(0.005)
        s = app.state()["data"]
        assert s["frame"] == 5 and s["playing"] and s["replayed"] == pytest.approx(state[5].tolist())
        assert app.q.tolist() == pytest.approx(state[5].tolist(), abs=1e-6)
        clock.t = 100.0
        deadline = time.monotonic() + 10
        while app.data.playing and time.monotonic() < deadline:
            time.sleep(0.005)
        assert app.data.frame == 39 and not app.state()["data"]["playing"]
    finally:
        app.data.pause()
        app.data.player.clock = real
    t0 = time.monotonic()  # real time: 40 frames at 50 fps take at least 0.78 s
    app.data.play()  # at the last frame: from frame 0 again
    while app.data.playing and time.monotonic() - t0 < 10:
        time.sleep(0.01)
    assert time.monotonic() - t0 >= 39 / 50 - 0.02 and app.data.frame == 39
    app.data.play()
    time.sleep(0.2)
    app.data.pause()
    frame = app.data.frame
    time.sleep(0.1)
    assert 0 <= frame < 39 and app.data.frame == frame and not app.data.playing


# ~12 s of compiles on a loaded host (move_j, the lint's Jacobians); the engine calls are covered by the
# default tests/test_cli_motion.py and tests/test_motion_path_metrics.py, the scrub glue only here
@pytest.mark.slow
def test_motion_preview_lints_and_scrubs(app):
    from caliper_jax.motion import MotionLimits, move_j
    from caliper_jax.motion.trajectory import sample_at

    q0 = np.array([0.0, 0.0, 0.02])
    r = app.motion.plan("MOVE_J", q_start=q0, q_goal=[1.2, -0.8, 0.02], dt=0.01)
    traj = move_j(q0, np.array([1.2, -0.8, 0.02]), MotionLimits.from_model(app.model))
    assert r["duration"] == pytest.approx(float(traj.duration))
    assert r["q_end"] == pytest.approx([1.2, -0.8, 0.02], abs=1e-6)
    t = 0.5 * r["duration"]
    q = app.motion.scrub(t)
    direct = sample_at(traj, [app.motion.time])[1][0]
    assert q.tolist() == pytest.approx(direct.tolist(), abs=1e-9)
    assert app.state()["q"] == pytest.approx(q.tolist())
    for i, f in enumerate(r["findings"][:2]):
        assert app.motion.jump(i) == pytest.approx(f["time"], abs=0.006)


# ~25 s on a loaded host (the planner's compiles, the S-curve retime, the lint); the playback clock
# is covered by the default test_player_moves_by_the_clock_and_stops_at_the_end and
# test_data_episode_plays_on_the_robot_at_the_dataset_fps, the collision scene by
# test_jog_collision_status_against_a_scene
@pytest.mark.slow
def test_motion_plans_among_the_jog_scene_and_plays_at_real_time(app):
    import time

    from caliper_jax.planning import plan, plan_trajectory

    q0, goal = np.array([0.0, 0.0, 0.02]), np.array([1.2, -0.3, 0.02])
    app.jog.set_scene(boxes="0.18,0.02,0.17,0.03,0.03,0.03")  # around the jaw at j1 = -0.5
    try:
        r = app.motion.plan_path(goal, q_start=q0)
        direct = plan(app.model, app.jog.cm, goal, q0, planner="auto", seed=0)
        assert r["plan"]["status"] == "reachable" and r["kind"].startswith("PLAN")
        assert np.array_equal(np.asarray(r["plan"]["waypoints"]), direct.waypoints)
        traj = plan_trajectory(app.model, direct.waypoints)
        assert r["duration"] == pytest.approx(float(traj.duration))
        assert r["q_end"] == pytest.approx(goal.tolist(), abs=1e-6)
        assert app.motion.ghost is not None and app.state()["motion"]["planned"]
        with pytest.raises(CaliperError, match="plan blocked"):  # a goal inside the box
            app.motion.plan_path([-0.5, 0.0, 0.02], q_start=q0)
    finally:
        app.jog.set_scene(boxes="")
    t0 = time.monotonic()
    app.motion.scrub(0.0)
    app.motion.play()
    assert app.state()["motion"]["playing"]
    while app.motion.playing and time.monotonic() - t0 < 30:
        time.sleep(0.01)
    s = app.state()["motion"]
    assert time.monotonic() - t0 >= r["duration"] - 0.02 and not s["playing"]
    assert s["time"] == pytest.approx(r["duration"], abs=0.006) and s["play_error"] is None
    assert app.q.tolist() == pytest.approx(r["q_end"], abs=1e-6)


# ~16 s of compiles (fk_drop run twice); the graph's own parity tests are tests/test_graph.py
@pytest.mark.slow
def test_graph_runs_from_the_panel_like_a_direct_call(app):
    import caliper_jax.graph as g
    st = app.graph.load("fk_drop")
    assert st["loaded"] and "robot" in st["nodes"] and st["findings"] == []
    out = app.graph.run()
    assert out == json.loads(json.dumps(g.run_graph("fk_drop").to_dict()))
    assert app.state()["graph"]["result"]["order"] == out["order"]
    app.graph.load("fk_movej")  # a trajectory output: plotted, and its tool path drawn in 3-D
    app.graph.run()
    st = app.state()["graph"]
    assert st["plots"] >= 1 and list(st["paths"].values()) == [100] * len(st["paths"]) and st["paths"]


def test_graph_diagram_is_readable_and_outputs_are_tables():
    """The diagram fits a ~320 px panel with >= 12 px text (layers of at most two nodes), zoom
    scales it, and a run's outputs become one table per node (no JSON dump)."""
    import re

    import caliper_jax.graph as g
    from caliper_jax.studio.graph import FONT, graph_svg, outputs_markdown

    for name in g.examples():
        svg = graph_svg(g.load_graph(name))
        w = float(re.search(r'viewBox="0 0 ([0-9.]+) ', svg).group(1))
        assert FONT * 320.0 / w >= 12.0, (name, w)  # on-screen text size at "fit"
        assert svg.count('class="graph-node"') == len(g.load_graph(name).nodes)
    assert 'width="200%"' in graph_svg(g.load_graph("fk_movej"), 200)
    md = outputs_markdown({"fk": {"pose": [1.0, 2.5], "stats": {"n": 3, "mean": 0.25}},
                           "big": {"q": {"shape": [500, 2], "dtype": "float64", "min": -1.0, "max": 2.0}}})
    assert "**fk**" in md and "| pose | [1, 2.5] |" in md and "| stats.mean | 0.25 |" in md
    assert "| q | array [500, 2] float64, min -1, max 2 |" in md and "{" not in md


def test_cli_studio_prints_the_url(capsys):
    pytest.importorskip("viser")
    from caliper_jax import cli

    assert cli.main(["studio", "pendulum2", "--port", "0", "--json", "--once"]) == 0
    line = capsys.readouterr().out.strip().splitlines()
    assert len(line) == 1
    info = json.loads(line[0])
    assert info["url"].startswith("http://127.0.0.1:") and info["robot"] == "pendulum2"

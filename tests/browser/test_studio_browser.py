"""The studio in a real headless Chromium (Playwright): the page loads without console errors, a
slider moves the robot (server state and a screenshot diff), the IK gizmo reaches its target, a
dataset doctor finding jumps to its episode, a graph runs from the page. Screenshots are saved in
the artifacts folder (see conftest.py)."""

import io
import time

import numpy as np
import pytest

SETTLE_S = 1.5  # a software-rendered frame after a scene update


def wait_for(cond, timeout=30.0, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def shot(page, path):
    """Screenshot of the 3-D view (left of the control panel) as an (H, W, 3) array; saved at path."""
    from PIL import Image

    data = page.screenshot(path=str(path), clip={"x": 0, "y": 0, "width": 900, "height": 800})
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), dtype=np.int16)


def changed_fraction(a, b) -> float:
    return float(np.mean(np.any(np.abs(a - b) > 24, axis=-1)))


def test_page_loads_without_console_errors(page, studio, artifacts):
    page.get_by_text("Singularity HUD").first.wait_for(timeout=30_000)
    wait_for(lambda: studio.state()["clients"] >= 1, what="the page's websocket client")
    time.sleep(SETTLE_S)
    page.screenshot(path=str(artifacts / "01_loaded.png"))  # the first software-rendered shot is slow
    assert page.locator("canvas").count() >= 1
    assert page.problems == []


def test_slider_moves_the_robot(page, studio, artifacts):
    page.get_by_role("tab", name="Jog").click()
    studio.jog.set_q([0.0, 0.0, 0.02])
    time.sleep(SETTLE_S)
    before = shot(page, artifacts / "02_slider_before.png")
    positions = np.asarray(studio.state()["body_positions"])
    box = page.locator("input.mantine-NumberInput-input:visible").first  # the j1 slider's number box
    box.fill("1.2")
    box.press("Enter")
    wait_for(lambda: abs(studio.q[0] - 1.2) < 1e-3, what="j1 = 1.2 on the server")
    time.sleep(SETTLE_S)
    after = shot(page, artifacts / "02_slider_after.png")
    s = studio.state()
    assert s["drawn_q"][0] == pytest.approx(1.2, abs=1e-3)
    assert np.max(np.abs(np.asarray(s["body_positions"]) - positions)) > 0.05
    assert changed_fraction(before, after) > 0.001, "the rendered robot did not change"
    assert page.problems == []


def test_doctor_finding_shows_its_message_and_jumps_to_its_episode(page, studio, artifacts):
    page.get_by_role("tab", name="Data").click()
    page.get_by_role("button", name="Run dataset doctor").click()
    finding = page.get_by_role("button", name="D015 Warning ep 3")
    finding.wait_for(timeout=60_000)
    f = next(f for f in studio.state()["data"]["findings"] if f["code"] == "D015")
    assert f["message"][:40] in finding.inner_text()  # the page shows the message, not a bare code
    assert studio.state()["data"]["episode"] == 0
    finding.click()
    wait_for(lambda: studio.state()["data"]["episode"] == 3, what="episode 3 selected")
    page.get_by_text("selected: 3").first.wait_for(timeout=10_000)
    page.screenshot(path=str(artifacts / "03_doctor_jump.png"))
    assert studio.state()["data"]["jumped"]["code"] == "D015"
    assert page.problems == []


def test_data_plot_time_axis_is_in_seconds(page, studio, artifacts):
    page.get_by_role("tab", name="Data").click()
    studio.data.select(episode=1, frame=0, feature="observation.state", dim=0)
    time.sleep(SETTLE_S)  # the new plot replaces the old one in the page
    over = page.locator(".u-over:visible").first  # uPlot's cursor layer over the plot
    over.wait_for(timeout=30_000)
    over.scroll_into_view_if_needed()  # the plot sits below the fold of the control panel
    time.sleep(SETTLE_S)
    box = over.bounding_box()
    page.mouse.move(box["x"] + 0.5 * box["width"], box["y"] + 0.5 * box["height"])
    value = page.locator(".u-legend .u-series").first.locator(".u-value")
    wait_for(lambda: value.inner_text().strip() not in ("", "--"), what="the cursor's x value")
    text = value.inner_text().strip()
    page.screenshot(path=str(artifacts / "06_data_seconds.png"))
    t = float(text)  # seconds from the episode start ("0.4"), not a date ("1/1/70 12:00am")
    assert 0.1 < t < 0.7, text  # episode 1: 40 frames at 50 fps, cursor near the middle
    assert page.problems == []


def test_close_gripper_then_slider_edit_keeps_the_prop_held(page, studio, artifacts):
    page.get_by_role("tab", name="Jog").click()
    studio.jog.set_q([0.0, 0.0, 0.04])  # the Jog gripper slider open
    page.get_by_role("tab", name="Simulate").click()
    studio.simulate.task.value = "lift-cube"
    page.get_by_role("button", name="Start live").click()
    try:
        wait_for(lambda: studio.live(), what="the live session")
        page.get_by_role("button", name="Close gripper").click()
        s = studio.simulate.session
        wait_for(lambda: s.snapshot()["held"] == "cube", what="the cube taken")
        page.get_by_role("tab", name="Jog").click()
        box = page.locator("input.mantine-NumberInput-input:visible").nth(1)  # the j2 slider's box
        box.fill("-0.3")
        box.press("Enter")
        wait_for(lambda: abs(s.target[1] + 0.3) < 1e-3, what="j2 target -0.3 from the page")
        tick = s.tick
        wait_for(lambda: s.tick > tick + 200, what="0.2 s of physics")
        snap = s.snapshot()
        page.get_by_role("tab", name="Simulate").click()
        page.get_by_text("gripper closed").first.wait_for(timeout=10_000)
        page.screenshot(path=str(artifacts / "07_gripper_held.png"))
        assert snap["held"] == "cube" and snap["gripper_closed"]
        assert snap["target"][2] == pytest.approx(s.layout.gripper_closed)
    finally:
        studio.simulate.stop()
    assert page.problems == []


def test_every_text_input_has_an_accessible_label(page, studio):
    """Each tab's text inputs (only the open tab is in the page) are found by their label. The
    GUI's inputs are viser's size-xs text fields; viser's own size-sm field with an icon (its
    control panel's, not the studio's) is not checked."""
    unnamed_js = (
        "Array.from(document.querySelectorAll('.mantine-TextInput-root[data-size=\"xs\"] input, "
        ".mantine-Textarea-root[data-size=\"xs\"] textarea'))"
        ".filter(i => !i.getAttribute('aria-label') && !(i.id && document.querySelector("
        "'label[for=\"' + i.id + '\"]'))).map(i => i.parentElement.parentElement.outerHTML"
        ".slice(0, 300))"
    )
    for tab, labels in (("Jog", ("Robot (name or file)", "Boxes")),
                        ("Simulate", ("Task file (optional)",)),
                        ("Data", ("Dataset folder",)),
                        ("Graph", ("Graph file (optional)",))):
        page.get_by_role("tab", name=tab).click()
        for label in labels:
            wait_for(lambda label=label: page.get_by_label(label, exact=True).count() >= 1,
                     what=f"an input labelled {label!r} in {tab}")
        assert page.evaluate(unnamed_js) == [], f"an unlabelled text input in {tab}"


# IK compile (~15 s on a loaded host); the default test
# tests/test_studio.py::test_ik_gizmo_target_is_reached_with_locks covers the same panel call
@pytest.mark.slow
def test_ik_gizmo_reaches_its_target(page, studio, artifacts):
    from caliper_jax import api

    page.get_by_role("tab", name="Jog").click()
    studio.jog.set_q([0.0, 0.3, 0.02])
    time.sleep(SETTLE_S)
    before = shot(page, artifacts / "04_ik_before.png")
    T = api.fk(studio.model, np.array([-0.9, 0.6, 0.02]))[studio.model.frame_id(studio.tool_frame)]
    r = studio.jog.solve_target(T)  # what a gizmo drag does (the gizmo's callback calls it)
    assert r["success"] and r["pos_residual"] < 1e-4
    page.get_by_text("IK reached").first.wait_for(timeout=10_000)
    time.sleep(SETTLE_S)
    after = shot(page, artifacts / "04_ik_after.png")
    reached = api.fk(studio.model, studio.q)[studio.model.frame_id(studio.tool_frame)][:3, 3]
    assert np.linalg.norm(reached - T[:3, 3]) < 1e-4
    assert studio.state()["jog"]["gizmo"]["position"] == pytest.approx(T[:3, 3].tolist(), abs=1e-6)
    assert changed_fraction(before, after) > 0.001
    assert page.problems == []


# runs fk_drop (~15 s of compiles); tests/test_studio.py::test_graph_runs_from_the_panel_like_a_direct_call
# covers the same panel call
@pytest.mark.slow
def test_graph_runs_from_the_page(page, studio, artifacts):
    pytest.importorskip("caliper_jax.graph")
    page.get_by_role("tab", name="Graph").click()
    page.locator("svg .graph-node").first.wait_for(timeout=10_000)  # nodes and edges drawn
    page.get_by_role("button", name="Run graph").click()
    page.get_by_text(" ran: ").first.wait_for(timeout=120_000)
    page.screenshot(path=str(artifacts / "05_graph_ran.png"))
    result = studio.state()["graph"]["result"]
    assert result is not None and result["order"][0] == "robot"
    assert page.problems == []


def _halves(img) -> np.ndarray:
    """(6,) mean RGB of the middle of the left and of the right half of an (H, W, 3) image."""
    h, w = img.shape[:2]
    rows = slice(h // 4, 3 * h // 4)
    left, right = img[rows, w // 8: 3 * w // 8], img[rows, 5 * w // 8: 7 * w // 8]
    return np.concatenate([left.mean((0, 1)), right.mean((0, 1))])


def test_data_camera_video_shows_the_replayed_episode_frame(page, studio, artifacts, tmp_path):
    """A video feature's <video> (found by its camera's name) shows, for the replayed episode and
    frame, what LeRobotReader.video_frames decodes for them: its currentTime lies in the episode's
    segment of the shared MP4, and its pixels match the decoded frame."""
    pytest.importorskip("av")
    from PIL import Image

    from caliper_jax.dataset import LeRobotReader
    from tests.studio_data import CAMERA_KEY, write_camera_dataset

    root = write_camera_dataset(tmp_path / "cams")
    reader = LeRobotReader(root)
    before = studio.data.reader.root  # the wave dataset of the other tests, reopened at the end
    page.get_by_role("tab", name="Data").click()
    try:
        studio.data.open(root)
        decoded = {(e, k): _halves(f.astype(np.float64)) for e in range(reader.num_episodes)
                   for k, f in enumerate(reader.video_frames(e, CAMERA_KEY))}
        video = page.get_by_label(CAMERA_KEY, exact=True)
        video.wait_for(timeout=30_000)
        for episode, frame in ((1, 3), (2, 7)):
            studio.data.select(episode=episode, frame=frame)
            lo, hi = (float(reader.episode_meta(episode)[f"videos/{CAMERA_KEY}/{k}"])
                      for k in ("from_timestamp", "to_timestamp"))
            want = lo + (frame + 0.5) / reader.fps
            wait_for(lambda want=want: abs(video.evaluate("v => v.currentTime") - want) < 1e-3
                     and video.evaluate("v => v.readyState >= 2 && !v.seeking"),
                     what=f"the video at episode {episode} frame {frame}")
            assert lo <= video.evaluate("v => v.currentTime") < hi
            video.scroll_into_view_if_needed()
            png = video.screenshot(path=str(artifacts / f"08_camera_ep{episode}_f{frame}.png"))
            got = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), np.float64)
            seen = _halves(got)
            # the browser's YUV -> RGB differs from PyAV's by a few levels: the shown frame must be
            # the decoded frame nearest to it among every frame of every episode
            dist = {k: np.abs(seen - v).sum() for k, v in decoded.items()}
            assert min(dist, key=dist.get) == (episode, frame), (episode, frame, seen)
            assert dist[(episode, frame)] < 60, dist[(episode, frame)]  # frames differ by 120
        assert studio.state()["data"]["cameras"][0]["key"] == CAMERA_KEY
        assert page.problems == []
    finally:
        studio.data.open(before)

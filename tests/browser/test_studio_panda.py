"""The studio with the Panda in headless Chromium: the link meshes are drawn (a pixel test on the
silhouette: meshes shown against meshes hidden), a gizmo drag is handled within the 50 ms budget
(measured on the server, not timed in the browser) and moves the drawn arm, and a screenshot of
each panel with the Panda and with a Panda task running is saved (``panda_*.png`` in the
artifacts folder; docs/img/studio holds a committed set, see docs/studio.md). The Panda's start-up
compile makes this module minutes long: its mesh and gizmo tests run in CI's claims step."""

import time

import numpy as np
import pytest

from tests.browser.test_studio_browser import SETTLE_S, changed_fraction, shot, wait_for

BUDGET_S = 0.050  # a pointer move's server handling (IK -> servo target -> draw -> HUD)


@pytest.mark.slow
@pytest.mark.claim
def test_panda_link_meshes_are_drawn(ppage, panda, artifacts):
    wait_for(lambda: panda.state()["clients"] >= 1, what="the page's websocket client")
    d = panda.drawing
    visual = [g for g in panda.model.geoms if g.role == "visual"]
    assert d.mesh_errors == [] and d.ngeom == len(visual) == 11  # every link's DAE mesh
    time.sleep(3 * SETTLE_S)  # the meshes arrive as GLB and are decoded in the page
    with_meshes = shot(ppage, artifacts / "panda_jog.png")
    for hs in d.body_geoms.values():
        for h in hs:
            h.visible = False
    try:
        time.sleep(SETTLE_S)
        sticks = shot(ppage, artifacts / "panda_sticks.png")
    finally:
        for hs in d.body_geoms.values():
            for h in hs:
                h.visible = True
    # the silhouette: the skeleton alone covers well under 1% of the view, the meshes several %
    assert changed_fraction(with_meshes, sticks) > 0.02
    region = np.any(np.abs(with_meshes - sticks) > 24, axis=-1)
    assert with_meshes[region].mean() > 90  # light link colours from the DAE materials, not black lines
    assert ppage.problems == []


@pytest.mark.slow
@pytest.mark.claim
def test_panda_gizmo_drag_is_handled_within_the_budget(ppage, panda, artifacts):
    jog = panda.jog
    assert jog.warm_s is not None  # the IK was compiled when the robot loaded
    T0 = jog.tool_pose()
    before = shot(ppage, artifacts / "panda_gizmo_before.png")
    wall, cpu = [], []
    for k in range(25):  # pointer moves along a 6 cm arc, as the gizmo's callback sees them
        a = np.pi * k / 24
        jog.gizmo.position = T0[:3, 3] + 0.06 * np.array([np.cos(a) - 1.0, np.sin(a), 0.0])
        t, c = time.perf_counter(), time.process_time()
        jog._gizmo_cb(None)  # hands the move to the drag worker
        assert jog.drag.wait(60.0)  # ... which solves and draws it
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - t)
        assert jog.worker.wait(60.0)  # the collision report follows, outside the measured handling
    assert jog.last_ik["success"] and jog.worker.error is None and jog.drag.error is None
    # the server's own handling cost: this process's CPU time per move, which the host's other
    # load (and the software-rendering browser) does not inflate; the wall time is printed too
    median = float(np.median(cpu))
    print(f"panda gizmo handling: CPU median {1e3 * median:.1f} ms; wall median "
          f"{1e3 * float(np.median(wall)):.1f} ms, max {1e3 * max(wall):.1f} ms")
    assert median < BUDGET_S, f"median {1e3 * median:.1f} ms of CPU per pointer move"
    time.sleep(SETTLE_S)
    after = shot(ppage, artifacts / "panda_gizmo_after.png")
    assert changed_fraction(before, after) > 0.002
    assert ppage.problems == []


# ~70 s under load (five software-rendered panels, a Panda live session); the claims tests above
# cover the Panda's meshes and gizmo, tests/test_studio.py the task switch; docs/img/studio is
# regenerated from this one
@pytest.mark.slow
def test_panda_panels_and_a_panda_task(ppage, panda, artifacts):
    """A screenshot of each panel with the Panda, then Simulate running a Panda task."""
    panda.graph.load("fk_drop")
    for tab in ("Motion", "Data", "Graph", "Simulate"):
        ppage.get_by_role("tab", name=tab).click()
        time.sleep(SETTLE_S)
        ppage.screenshot(path=str(artifacts / f"panda_{tab.lower()}.png"))
    assert panda.simulate.task.value == "panda-lift-cube"  # the loaded robot's task is preselected
    ppage.get_by_role("button", name="Start live").click()
    try:
        wait_for(lambda: panda.live(), what="the Panda task's live session")
        ppage.get_by_text("panda-lift-cube").first.wait_for(timeout=10_000)
        assert panda.state()["model"] == "panda" and panda.robot_text.value == "panda"
        assert panda.simulate.state()["robot"] == "panda"
        time.sleep(2 * SETTLE_S)
        ppage.screenshot(path=str(artifacts / "panda_simulate_task.png"))
    finally:
        panda.simulate.stop()
    assert ppage.problems == []

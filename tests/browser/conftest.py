"""Fixtures for the browser tests: a headless Chromium driven by Playwright, a studio server and a
folder for screenshots (``$CALIPER_TEST_ARTIFACTS/studio`` when set, else a pytest temp folder).

The tests skip (not fail) when Playwright, viser or the browser is missing. The browser is
Debian's ``chromium`` at ``/usr/bin/chromium`` (``$CALIPER_CHROMIUM`` overrides), run with
``--no-sandbox`` and SwiftShader WebGL (no GPU needed).
"""

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

CHROMIUM = os.environ.get("CALIPER_CHROMIUM", "/usr/bin/chromium")


@pytest.fixture(scope="session")
def chromium():
    pytest.importorskip("viser", reason="the studio needs viser (pip install 'caliper-jax[studio]')")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="browser tests need playwright (pip install playwright)"
    )
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set CALIPER_CHROMIUM)")
    pw = sync_api.sync_playwright().start()
    try:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", "--enable-unsafe-swiftshader", "--use-angle=swiftshader"],
        )
    except Exception as exc:  # a browser that cannot start here is an environment problem
        pw.stop()
        pytest.skip(f"Chromium at {CHROMIUM} did not start: {exc}")
    yield browser
    browser.close()
    pw.stop()


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory):
    root = os.environ.get("CALIPER_TEST_ARTIFACTS")
    path = Path(root) / "studio" if root else tmp_path_factory.mktemp("studio-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_wave_dataset(root):
    """4 episodes of a 3-joint wave for gripper_arm; episode 3 repeats episode 1 (doctor D015)."""
    from caliper_jax.dataset import LeRobotWriter

    rng = np.random.default_rng(0)
    names = ["j1", "j2", "gripper"]
    feats = {
        "observation.state": {"dtype": "float32", "shape": [3], "names": names},
        "action": {"dtype": "float32", "shape": [3], "names": names},
    }
    with LeRobotWriter(root, 50, feats, robot_type="gripper_arm") as w:
        eps = []
        for e in range(4):
            t = np.linspace(0, 1, 40)[:, None]
            q = np.array([0.5, -0.4, 0.02]) * np.sin(2 * np.pi * (t + 0.1 * e))
            q = (q + 0.01 * rng.standard_normal(q.shape)).astype(np.float32)
            q[:, 2] = np.clip(q[:, 2], 0, 0.04)
            q = eps[1] if e == 3 else q
            eps.append(q)
            w.add_frames({"observation.state": q, "action": np.roll(q, -1, axis=0)})
            w.save_episode(task="wave")
    return root


@pytest.fixture(scope="module")
def studio(chromium, tmp_path_factory):
    from caliper_jax.studio import StudioApp

    dataset = write_wave_dataset(tmp_path_factory.mktemp("studio-data") / "wave")
    app = StudioApp("gripper_arm", dataset=dataset, port=0)
    yield app
    app.close()


@pytest.fixture(scope="module")
def page(chromium, studio):
    """The studio page, loaded; ``page.problems`` collects console errors and page errors."""
    pg = chromium.new_page(viewport={"width": 1280, "height": 800})
    pg.problems = []
    pg.on(
        "console", lambda m: pg.problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None
    )
    pg.on("pageerror", lambda e: pg.problems.append(f"page error: {e}"))
    pg.goto(studio.url)
    pg.get_by_role("tab", name="Jog").wait_for(timeout=60_000)
    yield pg
    pg.close()

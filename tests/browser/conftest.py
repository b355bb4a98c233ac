"""Fixtures for the browser tests: a headless Chromium driven by Playwright, a studio server and a
folder for screenshots (``$CALIPER_TEST_ARTIFACTS/studio`` when set, else a pytest temp folder).

The tests skip (not fail) when Playwright, viser or the browser is missing. The browser is
Debian's ``chromium`` at ``/usr/bin/chromium`` (``$CALIPER_CHROMIUM`` overrides), run with
``--no-sandbox`` and SwiftShader WebGL (no GPU needed).
"""

import os
import shutil
from pathlib import Path

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


def _served(tmp_path_factory, robot: str):
    """A StudioApp of ``robot`` with the wave dataset open in the Data tab (closed afterwards)."""
    from caliper_jax.studio import StudioApp
    from tests.studio_data import write_wave_dataset

    dataset = write_wave_dataset(tmp_path_factory.mktemp(f"studio-{robot}") / "wave")
    app = StudioApp(robot, dataset=dataset, port=0)
    yield app
    app.close()


def _paged(chromium, app):
    """The studio page, loaded; ``page.problems`` collects console errors and page errors."""
    pg = chromium.new_page(viewport={"width": 1280, "height": 800})
    pg.set_default_timeout(120_000)  # software WebGL on a loaded host: a screenshot can take long
    pg.problems = []
    pg.on(
        "console", lambda m: pg.problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None
    )
    pg.on("pageerror", lambda e: pg.problems.append(f"page error: {e}"))
    pg.goto(app.url)
    pg.get_by_role("tab", name="Jog").wait_for(timeout=60_000)
    yield pg
    pg.close()


@pytest.fixture(scope="module")
def studio(chromium, tmp_path_factory):
    yield from _served(tmp_path_factory, "gripper_arm")


@pytest.fixture(scope="module")
def page(chromium, studio):
    yield from _paged(chromium, studio)


@pytest.fixture(scope="module")
def panda(chromium, tmp_path_factory):
    """The studio with the Panda (tests/browser/test_studio_panda.py)."""
    yield from _served(tmp_path_factory, "panda")


@pytest.fixture(scope="module")
def ppage(chromium, panda):
    yield from _paged(chromium, panda)

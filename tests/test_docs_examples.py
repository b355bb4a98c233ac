"""The examples in README.md and docs/*.md run, so they cannot rot.

* Every ```python block runs. The blocks of one file share a namespace and run in order, in a
  scratch working directory (files the examples write land there; ``robot.urdf`` and
  ``arm.urdf.xacro`` are there to be read), at the default precision (restored afterwards if a
  block turns float64 on).
* Every line of a ```bash / ```sh block that starts with ``caliper `` runs in-process through
  ``caliper_jax.cli.main`` and must exit 0. Placeholders are rewritten from ``SUBSTITUTIONS``
  (``robot.urdf`` is a copy of a fixture, ``DATASET`` a small dataset, ...); a line that still
  holds one (a synopsis) is skipped with the reason. Synopses belong in plain ``` blocks, which
  are not run.
* A block is skipped only when the line before its opening fence is ``<!-- no-test -->`` (for
  examples that need what a test machine lacks: a GPU, the network). Use it sparingly.
* Blocks loading a registry robot from example-robot-data (``panda``, ``ur5``, ...) are skipped
  when that optional package is not installed.
"""
from __future__ import annotations

import contextlib
import io
import re
import shlex
import shutil
import traceback
from pathlib import Path
from typing import NamedTuple

import jax
import pytest

import robots

ROOT = Path(__file__).resolve().parent.parent
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FIXTURES = {"pendulum2", "collide_arm", "gripper_arm", "toy"}
HAVE_ERD = robots.example_robot_data_dir() is not None
ERD_NAMES = set(robots.ALIASES)
SKIP_MARK = "<!-- no-test -->"
SHELL = {"bash", "sh", "shell", "console"}


class Block(NamedTuple):
    path: Path
    line: int           # line of the opening fence (1-based)
    lang: str
    text: str
    skip: bool


def blocks(path: Path) -> list[Block]:
    out, lines = [], path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)```\s*([\w+-]*)", lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start = m.group(1), m.group(2).lower(), i
        previous = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        i += 1
        body = []
        while i < len(lines) and not lines[i].strip().startswith("```"):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        out.append(Block(path, start + 1, lang, "\n".join(body) + "\n", previous == SKIP_MARK))
        i += 1
    return out


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _needs_erd(text: str) -> bool:
    names = re.findall(r"""load\(\s*["']([\w.-]+)["']""", text)
    return any(n in ERD_NAMES for n in names)


@contextlib.contextmanager
def _precision_restored():
    x64 = jax.config.jax_enable_x64
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", x64)


# ---- python blocks --------------------------------------------------------------------------------

PY_FILES = [p for p in FILES if any(b.lang == "python" for b in blocks(p))]


@pytest.mark.parametrize("path", PY_FILES, ids=_rel)
def test_python_examples_run(path, tmp_path, monkeypatch):
    py = [b for b in blocks(path) if b.lang == "python" and not b.skip]
    if not HAVE_ERD and any(_needs_erd(b.text) for b in py):
        pytest.skip("the examples load robots from example-robot-data (not installed)")
    monkeypatch.chdir(tmp_path)
    _prepare(tmp_path, [])
    namespace = {"__name__": f"docs_{path.stem}"}
    with _precision_restored():
        for b in py:
            code = compile(b.text, f"{_rel(path)}:{b.line}", "exec")
            try:
                exec(code, namespace)
            except Exception:
                pytest.fail(f"the example at {_rel(path)}:{b.line} failed:\n{traceback.format_exc()}",
                            pytrace=False)


# ---- shell blocks ---------------------------------------------------------------------------------

# placeholder token -> what it becomes (files are prepared in the scratch directory)
SUBSTITUTIONS = {
    "ROBOT": "pendulum2",
    "DATASET": "dataset",
    "robot.urdf": "robot.urdf",          # a copy of robots/gripper_arm.urdf
    "~/ws/src": "meshes",
}
# ALLCAPS words, "...", "|", "<name>", and synopsis brackets ("[--frame", "NAME]"; not JSON arrays)
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*$|\.\.\.|^\|$|^<.*>$|^\[[-A-Za-z]|[-A-Za-z]\]$")


class Command(NamedTuple):
    path: Path
    line: int
    text: str


def commands() -> list[Command]:
    out = []
    for path in FILES:
        for b in blocks(path):
            if b.lang not in SHELL or b.skip:
                continue
            for k, line in enumerate(b.text.splitlines()):
                line = line.strip().removeprefix("$ ")
                if line.startswith("caliper "):
                    out.append(Command(path, b.line + 1 + k, line))
    return out


XACRO = """<?xml version="1.0"?>
<robot name="arm" xmlns:xacro="http://www.ros.org/wiki/xacro">
  <xacro:property name="len" value="0.3"/>
  <xacro:macro name="arm_link" params="name">
    <link name="${name}">
      <inertial>
        <mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>
      </inertial>
      <collision><geometry><box size="0.05 0.05 ${len}"/></geometry></collision>
    </link>
  </xacro:macro>
  <link name="base"/>
  <xacro:arm_link name="l1"/>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="10" velocity="1"/></joint>
</robot>
"""


def _prepare(tmp: Path, argv: list[str]) -> None:
    """The files a command line names: robot.urdf, arm.urdf.xacro, meshes/, dataset/, obs.npz."""
    shutil.copy(ROOT / "robots" / "gripper_arm.urdf", tmp / "robot.urdf")
    (tmp / "arm.urdf.xacro").write_text(XACRO)
    (tmp / "meshes").mkdir()
    if "dataset" in argv:
        from caliper_jax.dataset.synthetic import write_synthetic

        write_synthetic(tmp / "dataset", episodes=6, length=200)
    if "obs.npz" in argv:               # poses of the robot's tool frame at random configurations
        import numpy as np

        from caliper_jax import api
        from caliper_jax.ik import default_frame
        from caliper_jax.loading import load

        with jax.enable_x64(True):
            model = load(argv[1])
            rng = np.random.default_rng(0)
            q = rng.uniform(np.asarray(model.qpos_lower), np.asarray(model.qpos_upper), (20, model.nq))
            frame = default_frame(model)
            np.savez(tmp / "obs.npz", q=q, T=np.asarray(api.fk(model, q))[:, model.frame_id(frame)],
                     frame=frame)


def argv_of(command: str) -> tuple[list[str] | None, str]:
    """(argv after ``caliper``, "") or (None, why it is skipped)."""
    tokens = shlex.split(command, comments=True)[1:]
    tokens = [SUBSTITUTIONS.get(t, t) for t in tokens]
    left = [t for t in tokens if PLACEHOLDER.search(t)]
    if left:
        return None, f"synopsis, not an example (placeholder {left[0]!r})"
    if not HAVE_ERD and ERD_NAMES & set(tokens):
        return None, "needs example-robot-data (not installed)"
    return tokens, ""


@pytest.mark.parametrize("cmd", commands(), ids=lambda c: f"{_rel(c.path)}:{c.line}")
def test_shell_examples_exit_0(cmd, tmp_path, monkeypatch):
    argv, why = argv_of(cmd.text)
    if argv is None:
        pytest.skip(why)
    from caliper_jax import cli

    monkeypatch.chdir(tmp_path)
    _prepare(tmp_path, argv)
    out, err = io.StringIO(), io.StringIO()
    with _precision_restored(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    assert code == 0, f"{_rel(cmd.path)}:{cmd.line}: `{cmd.text}` exited {code}\n{err.getvalue()[-3000:]}"


def test_the_extractor_sees_the_examples():
    readme = blocks(ROOT / "README.md")
    assert any(b.lang == "python" for b in readme) and any(b.lang == "bash" for b in readme)
    assert any(c.text.startswith("caliper demo") or "caliper " in c.text for c in commands())
    assert argv_of("caliper ik ROBOT --target POSE")[0] is None
    assert argv_of("caliper analyze ur5 [--frame tool0]")[0] is None
    assert argv_of('caliper ik ur5 --target "[[1, 0], [0, 1]]"')[0][-1] == "[[1, 0], [0, 1]]"
    assert argv_of("caliper fk pendulum2 --json   # a comment")[0] == ["fk", "pendulum2", "--json"]

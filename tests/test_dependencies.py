"""Every third-party import of the runtime packages is a declared dependency (tools/check_deps.py)."""
from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import robots

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "check_deps.py"


def _run(*args):
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=300)


def test_every_runtime_import_is_declared():
    result = _run()
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_packages_tests_skip_without_are_installed():
    """A skip must never hide a failure (issue 36): every package a test of this suite skips without
    (``pytest.importorskip``, the example-robot-data guards) is a declared dependency, so it must
    import here; if it does not, the install is broken and this fails instead of the suite
    quietly skipping. (tests/lerobot_compat runs in its own venv.)"""
    names = set()
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and ast.unparse(node.func).endswith("importorskip") and node.args
                    and isinstance(node.args[0], ast.Constant)):
                names.add(node.args[0].value)
    assert {"av", "viser", "matplotlib", "gymnasium"} <= names        # the scan sees the guards
    # skips allowed where an extra outside `test` is absent: (import name -> the extra that brings it)
    outside_test = {"torch": "rl", "stable_baselines3": "rl"}       # SB3 pulls ~3 GB of CUDA torch
    pyproject = (ROOT / "pyproject.toml").read_text()
    rl_extra = re.search(r"^rl = \[(.*?)\]", pyproject, re.M | re.S).group(1)
    test_extra = re.search(r"^test = \[(.*?)\]", pyproject, re.M | re.S).group(1)
    assert '"stable-baselines3' in rl_extra
    assert "stable-baselines3" not in test_extra and "torch" not in test_extra
    missing = []
    for name in sorted(names - set(outside_test)):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            missing.append(f"{name} ({exc})")
    assert not missing, f"tests skip without these, but they are dependencies: {missing}"
    first_party = ("caliper_jax", "learn", "tasks", "doctors", "mjx_backend", "robots")
    assert not any(name.split(".")[0] in first_party for name in names), \
        "a first-party module must not be importorskip'ed: its ImportError is a bug"
    assert robots.example_robot_data_dir() is not None, "example-robot-data (a runtime dependency) is missing"


def _project(tmp_path, body, deps='"numpy"', extras=""):
    (tmp_path / "pyproject.toml").write_text(
        f'[project]\nname = "demo-pkg"\nversion = "0"\ndependencies = [{deps}]\n'
        f"[project.optional-dependencies]\ntest = [\"pytest\", \"trimesh\"]\n{extras}"
        '[tool.setuptools.packages.find]\ninclude = ["demo*"]\n')
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "__init__.py").write_text(body)
    return tmp_path


def test_check_catches_undeclared_test_only_and_eager_extra_imports(tmp_path):
    body = ("import os\nimport numpy\nfrom demo import x\n\n"
            "def f():\n    import trimesh\n    import yaml\n\n"
            "import PIL\n")
    root = _project(tmp_path, body, extras='img = ["pillow"]\n')
    result = _run("--root", str(root))
    assert result.returncode == 1
    out = result.stdout
    assert "trimesh is imported by the runtime" in out and "only in the extra(s) test" in out
    assert "pyyaml" in out and "not declared" in out
    assert "at module level" in out and "never names the extra" in out
    assert "numpy" not in out.split("problem(s):")[1]


def test_check_accepts_lazy_extra_import_that_names_the_extra(tmp_path):
    body = ('def f():\n    try:\n        import PIL\n    except ImportError:\n'
            '        raise ValueError(\'pip install "demo-pkg[img]"\') from None\n')
    root = _project(tmp_path, body, extras='img = ["pillow"]\n')
    result = _run("--root", str(root))
    assert result.returncode == 0, result.stdout
    assert "extra      pillow [img]" in result.stdout

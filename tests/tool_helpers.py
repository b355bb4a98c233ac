"""Helpers of the tests of the repository tools (tools/check_*.py): load a tool as a module and
write a planted tree of files."""
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_tool(name: str):
    """tools/<name>.py as a module (registered in sys.modules under ``name``)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


def write_tree(root: Path, files: dict):
    """{relative path: text} written under ``root`` (folders made)."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

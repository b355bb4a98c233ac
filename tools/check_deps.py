#!/usr/bin/env python3
"""Check that every third-party import of the runtime packages is a declared dependency.

Walks every ``.py`` file of the runtime packages (the ``[tool.setuptools.packages.find]`` include
list of pyproject.toml) with ``ast`` and collects the modules of all imports, function-local and
``try``-guarded ones included. Standard-library modules (``sys.stdlib_module_names``) and the
first-party packages are dropped; the rest are mapped to distributions with
``importlib.metadata.packages_distributions()`` (a sub-package such as ``mujoco.mjx`` goes to the
distribution that ships it) and looked up in pyproject.toml:

* a ``[project] dependencies`` entry: fine;
* only an optional extra (not a test/dev extra): reported as optional, and fine when every import
  of it is lazy (inside a function or a ``try``) and the importing file names the extra
  (``caliper-jax[EXTRA]``) so a missing package gives a one-line message saying what to install;
* otherwise (undeclared, or declared only for tests): a failure.

Exit status 0 when everything is declared, 1 with the list of problems otherwise.
``--json`` prints the whole table.
"""
from __future__ import annotations

import argparse
import ast
import importlib.metadata as md
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
# Extras that exist for the developers, not for users: declaring a runtime import only there is
# exactly the bug this check exists for.
DEV_EXTRAS = {"test", "tests", "dev", "lint", "docs"}
# Import names whose distribution is named differently, for packages not installed here.
KNOWN = {"PIL": "pillow", "av": "av", "yaml": "pyyaml", "cv2": "opencv-python", "sklearn": "scikit-learn",
         "skimage": "scikit-image", "pinocchio": "pin", "google": "protobuf"}


def normalize(name: str) -> str:
    """PEP 503 normalised distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(spec: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
    if not match:
        raise SystemExit(f"check_deps: cannot read requirement {spec!r}")
    return normalize(match.group(1))


@dataclass
class Use:
    module: str                      # full dotted name as imported
    file: str
    line: int
    lazy: bool                       # inside a function / class body or a try block


@dataclass
class Dist:
    name: str
    uses: list[Use] = field(default_factory=list)
    status: str = ""                 # runtime | extra | test-only | undeclared
    extras: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    guessed: bool = False            # not installed here: the name is a guess


def read_pyproject(root: Path):
    data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    project = data["project"]
    runtime = {requirement_name(s) for s in project.get("dependencies", [])}
    extras = {extra: {requirement_name(s) for s in specs}
              for extra, specs in project.get("optional-dependencies", {}).items()}
    find = data.get("tool", {}).get("setuptools", {}).get("packages", {}).get("find", {})
    include = find.get("include", [])
    packages = sorted({pattern.rstrip("*").rstrip(".") for pattern in include})
    return normalize(project["name"]), runtime, extras, packages


def imports(path: Path) -> list[Use]:
    """Every absolute import in ``path`` with its laziness."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[Use] = []

    def visit(node, lazy):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend(Use(a.name, str(path), child.lineno, lazy) for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                # ``from mujoco import mjx`` may name a sub-package of another distribution
                found.extend(Use(child.module if a.name == "*" else f"{child.module}.{a.name}", str(path),
                                 child.lineno, lazy) for a in child.names)
            elif isinstance(child, ast.Call) and _metadata_lookup(child):
                # importlib.metadata.distribution("example-robot-data"): a data-only dependency
                found.append(Use("dist:" + child.args[0].value, str(path), child.lineno, True))
            inner = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                               ast.ClassDef, ast.Try))
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                inner = True
            visit(child, inner)

    visit(tree, False)
    return found


def _metadata_lookup(call: ast.Call) -> bool:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return (name in ("distribution", "version", "files", "metadata") and len(call.args) == 1
            and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)
            and isinstance(func, ast.Attribute) and "metadata" in ast.unparse(func.value))


def _is_type_checking(test) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def distribution_of(module: str, mapping: dict) -> tuple[str, bool]:
    """(distribution name, guessed?) for an imported module."""
    if module.startswith("dist:"):
        return normalize(module[len("dist:"):]), False
    top = module.split(".")[0]
    candidates = mapping.get(top, [])
    if not candidates:
        return normalize(KNOWN.get(top, top)), True
    if len(candidates) == 1:
        return normalize(candidates[0]), False
    # Several distributions share the top-level name (mujoco / mujoco-mjx): the one whose files
    # hold the longest prefix of the dotted module wins.
    parts = module.split(".")
    best, best_len = candidates[0], -1
    for dist in candidates:
        files = {str(f).replace("\\", "/") for f in (md.distribution(dist).files or ())}
        for n in range(len(parts), 0, -1):
            stem = "/".join(parts[:n])
            if f"{stem}/__init__.py" in files or f"{stem}.py" in files or any(
                    f.startswith(stem + "/") and n > 1 for f in files):
                if n > best_len:
                    best, best_len = dist, n
                break
    return normalize(best), False


def check(root: Path = ROOT) -> tuple[dict[str, Dist], list[str]]:
    project, runtime, extras, packages = read_pyproject(root)
    first_party = set(packages) | {project.replace("-", "_")}
    mapping = md.packages_distributions()
    dists: dict[str, Dist] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            for use in imports(path):
                top = use.module.split(".")[0]
                if top.startswith("dist:") and normalize(top[len("dist:"):]) == project:
                    continue
                if top in sys.stdlib_module_names or top in first_party or top == "__future__":
                    continue
                name, guessed = distribution_of(use.module, mapping)
                dist = dists.setdefault(name, Dist(name))
                dist.guessed = dist.guessed or guessed
                use.file = str(Path(use.file).relative_to(root))
                dist.uses.append(use)
    problems: list[str] = []
    for name, dist in sorted(dists.items()):
        user_extras = sorted(e for e, names in extras.items() if name in names and e not in DEV_EXTRAS)
        dev_extras = sorted(e for e, names in extras.items() if name in names and e in DEV_EXTRAS)
        spots = list(dict.fromkeys(f"{u.file}:{u.line}" for u in dist.uses))
        where = ", ".join(spots[:4]) + (" ..." if len(spots) > 4 else "")
        if name in runtime:
            dist.status = "runtime"
            continue
        if user_extras:
            dist.status, dist.extras = "extra", user_extras
            for use in dist.uses:
                if not use.lazy:
                    dist.problems.append(f"{use.file}:{use.line} imports {use.module} at module level, "
                                         f"but {name} is only in the extra(s) {', '.join(user_extras)}")
                text = (root / use.file).read_text(encoding="utf-8")
                if not any(f"{project}[{e}]" in text for e in user_extras):
                    hint = f"pip install \"{project}[{user_extras[0]}]\""
                    dist.problems.append(f"{use.file} imports {use.module} (extra {user_extras[0]}) but "
                                         f"never names the extra: say '{hint}'")
        elif dev_extras:
            dist.status = "test-only"
            dist.problems.append(f"{name} is imported by the runtime ({where}) but declared only in the "
                                 f"extra(s) {', '.join(dev_extras)}")
        else:
            dist.status = "undeclared"
            guess = " (not installed here; distribution name guessed)" if dist.guessed else ""
            dist.problems.append(f"{name}{guess} is imported by the runtime ({where}) but not declared in "
                                 "pyproject.toml")
        problems += list(dict.fromkeys(dist.problems))
    return dists, problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="project root (holds pyproject.toml)")
    parser.add_argument("--json", action="store_true", help="print the whole table as JSON")
    args = parser.parse_args(argv)
    dists, problems = check(args.root.resolve())
    if args.json:
        print(json.dumps({"distributions": {n: {"status": d.status, "extras": d.extras,
                                                "imports": sorted({u.module for u in d.uses}),
                                                "files": sorted({u.file for u in d.uses})}
                                            for n, d in sorted(dists.items())},
                          "problems": problems}, indent=2))
    else:
        for name, dist in sorted(dists.items()):
            extra = f" [{', '.join(dist.extras)}]" if dist.extras else ""
            files = sorted({u.file for u in dist.uses})
            print(f"{dist.status:10} {name}{extra}: {len(files)} file(s)")
        if problems:
            print(f"\n{len(problems)} problem(s):")
            for problem in problems:
                print(f"  - {problem}")
        else:
            print("\nevery third-party import is declared")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

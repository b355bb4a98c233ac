#!/usr/bin/env python3
"""Import-graph check of the first-party packages: cycles and layering rules.

    python tools/check_imports.py [--json] [--verbose] [ROOT]

Walks every module of ``caliper_jax``, ``mjx_backend``, ``doctors``, ``robots``, ``tasks`` and
``learn`` with :mod:`ast` (nothing is imported) and records each import of a first-party module
or of JAX, with its kind: ``module`` (executed at import time: the module body, a class body, an
``if``/``try`` at module level) or ``local`` (inside a function, executed when it is called).
``importlib.import_module("a.b")`` with a constant name counts as ``local`` as well.

Checks (each violation is listed; the exit code is 1 when there is any, else 0):

* **cycles**: strongly connected components of the import-time (``module``) graph between modules.
  Importing ``a.b`` also runs ``a/__init__.py``; those implicit parent edges are not part of the
  cycle graph (a package importing its own submodules is not a cycle). A cycle that closes only
  through function-local imports is a violation as well (``local cycle``): a function-local import
  hides a circle, it does not remove it -- the shared pieces belong in a module both import. The
  exceptions would be listed in ``ALLOWED_LOCAL_CYCLES`` (reported as ``allowed``; none today).
* **cli**: nothing outside ``caliper_jax/cli`` imports ``caliper_jax.cli`` (any kind).
* **no-jax**: ``doctors``, ``caliper_jax.dataset`` (and the other JAX-free zones of
  docs/architecture.md: ``caliper_jax.io``, ``caliper_jax.errors``, ``robots``) import no
  ``jax``/``jaxlib`` (any kind), and reach no module that does through import-time imports
  (parent packages included).

The graph is resolved like the interpreter does it: ``from a.b import c`` is an edge to module
``a.b.c`` when that module exists, else to ``a.b`` (``c`` is a name defined there).
"""
from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("caliper_jax", "mjx_backend", "doctors", "robots", "tasks", "learn")
JAX_ROOTS = ("jax", "jaxlib")
# the JAX-free zones of docs/architecture.md
NO_JAX = ("doctors", "caliper_jax.dataset", "caliper_jax.io", "caliper_jax.errors", "robots")
CLI = "caliper_jax.cli"
# Cycles through function-local imports that are tolerated for now (each: its sorted modules).
ALLOWED_LOCAL_CYCLES: tuple = ()


@dataclass(frozen=True)
class Import:
    source: str          # importing module
    target: str          # imported module (first-party) or "jax"/"jaxlib..." (external)
    kind: str            # "module" | "local"
    line: int


def discover(root: Path) -> dict[str, Path]:
    """module name -> file for every first-party module under root."""
    modules = {}
    for package in PACKAGES:
        base = root / package
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*.py")):
            rel = path.relative_to(root)
            if "__pycache__" in rel.parts or any(p.startswith(".") for p in rel.parts):
                continue
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _is_package(modules: dict[str, Path], name: str) -> bool:
    return modules[name].name == "__init__.py"


def _resolve_relative(modules, source: str, module: str | None, level: int) -> str:
    base = source if _is_package(modules, source) else source.rpartition(".")[0]
    for _ in range(level - 1):
        base = base.rpartition(".")[0]
    return f"{base}.{module}" if module else base


def _first_party(modules, name: str) -> str | None:
    """The longest prefix of a dotted name that is a first-party module."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        candidate = ".".join(parts[:n])
        if candidate in modules:
            return candidate
    return None


class _Visitor(ast.NodeVisitor):
    def __init__(self, modules, source):
        self.modules, self.source, self.depth, self.found = modules, source, 0, []

    def _add(self, name: str, line: int, kind: str | None = None):
        kind = kind or ("local" if self.depth else "module")
        root = name.split(".")[0]
        if root in JAX_ROOTS:
            self.found.append(Import(self.source, name, kind, line))
            return
        if root not in PACKAGES:
            return
        target = _first_party(self.modules, name)
        if target is not None and target != self.source:
            self.found.append(Import(self.source, target, kind, line))

    def _function(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_Import(self, node):
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node):
        base = (_resolve_relative(self.modules, self.source, node.module, node.level) if node.level
                else node.module or "")
        for alias in node.names:
            full = f"{base}.{alias.name}"
            self._add(full if full in self.modules else base, node.lineno)

    def visit_Call(self, node):
        func = node.func
        name = (func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name)
                else None)
        if (name == "import_module" and node.args and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str) and not node.args[0].value.startswith(".")):
            self._add(node.args[0].value, node.lineno, "local")
        self.generic_visit(node)


def scan(root: Path) -> tuple[dict[str, Path], list[Import]]:
    """(modules, imports): one Import per (source, target, kind), at its first line."""
    modules = discover(root)
    first: dict[tuple[str, str, str], Import] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        visitor = _Visitor(modules, name)
        visitor.visit(tree)
        for i in visitor.found:
            key = (i.source, i.target, i.kind)
            if key not in first or i.line < first[key].line:
                first[key] = i
    return modules, sorted(first.values(), key=lambda i: (i.source, i.line, i.target))


def strongly_connected(nodes, edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm (iterative); components with more than one module, sorted."""
    index, low, on_stack, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return sorted(out)


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:n]) for n in range(1, len(parts))]


def check(root: Path) -> dict:
    modules, imports = scan(root)
    internal = [i for i in imports if i.target in modules]
    graph_module: dict[str, set[str]] = {}
    graph_all: dict[str, set[str]] = {}
    for i in internal:
        graph_all.setdefault(i.source, set()).add(i.target)
        if i.kind == "module":
            graph_module.setdefault(i.source, set()).add(i.target)

    def edges_within(component, kinds):
        members = set(component)
        return [{"from": i.source, "to": i.target, "kind": i.kind, "line": i.line} for i in internal
                if i.source in members and i.target in members and i.kind in kinds]

    cycles = [{"modules": c, "imports": edges_within(c, ("module",))}
              for c in strongly_connected(modules, graph_module)]
    in_cycles = {frozenset(c["modules"]) for c in cycles}
    local_cycles = [{"modules": c, "imports": edges_within(c, ("module", "local")),
                     "allowed": tuple(c) in ALLOWED_LOCAL_CYCLES}
                    for c in strongly_connected(modules, graph_all) if frozenset(c) not in in_cycles]

    cli_violations = [{"from": i.source, "to": i.target, "kind": i.kind, "line": i.line} for i in internal
                      if (i.target == CLI or i.target.startswith(CLI + "."))
                      and not (i.source == CLI or i.source.startswith(CLI + "."))]

    # import-time closure: module-level edges plus the parent packages every import runs
    jax_direct = {}
    for i in imports:
        if i.target.split(".")[0] in JAX_ROOTS:
            jax_direct.setdefault(i.source, []).append(i)

    def closure(start):
        seen, todo, via = {start}, [start], {start: None}
        while todo:
            node = todo.pop()
            nexts = set(graph_module.get(node, ())) | set(_parents(node))
            for target in sorted(nexts):
                if target in modules and target not in seen:
                    seen.add(target)
                    via[target] = node
                    todo.append(target)
        return seen, via

    def chain(via, end):
        path = [end]
        while via[path[-1]] is not None:
            path.append(via[path[-1]])
        return path[::-1]

    jax_violations = []
    for name in sorted(modules):
        if not any(name == z or name.startswith(z + ".") for z in NO_JAX):
            continue
        for i in jax_direct.get(name, ()):
            jax_violations.append({"module": name, "kind": i.kind, "line": i.line, "via": [name, i.target]})
        seen, via = closure(name)
        for other in sorted(seen - {name}):
            module_level = [i for i in jax_direct.get(other, ()) if i.kind == "module"]
            if module_level:
                jax_violations.append({"module": name, "kind": "transitive", "line": module_level[0].line,
                                       "via": chain(via, other) + [module_level[0].target]})
                break
    return {
        "modules": len(modules),
        "imports": {"module": sum(i.kind == "module" for i in internal),
                    "local": sum(i.kind == "local" for i in internal)},
        "cycles": cycles,
        "local_cycles": local_cycles,
        "cli_violations": cli_violations,
        "jax_violations": jax_violations,
        "ok": not (cycles or cli_violations or jax_violations
                   or any(not c["allowed"] for c in local_cycles)),
    }


def format_text(report: dict, verbose: bool = False) -> str:
    lines = [f"import graph: {report['modules']} modules, {report['imports']['module']} import-time and "
             f"{report['imports']['local']} function-local first-party imports"]
    for c in report["cycles"]:
        lines.append(f"CYCLE ({len(c['modules'])} modules): {', '.join(c['modules'])}")
        lines += [f"    {e['from']}:{e['line']} -> {e['to']} ({e['kind']})" for e in c["imports"]]
    for v in report["cli_violations"]:
        lines.append(f"LAYER: {v['from']}:{v['line']} imports {v['to']} ({v['kind']}); only caliper_jax.cli "
                     "may import the CLI")
    for v in report["jax_violations"]:
        lines.append(f"NO-JAX: {v['module']} imports JAX ({v['kind']}, line {v['line']}): "
                     + " -> ".join(v["via"]))
    for c in report["local_cycles"]:
        if c["allowed"] and not verbose:
            lines.append(f"note: allowed local cycle (ALLOWED_LOCAL_CYCLES): {', '.join(c['modules'])}")
            continue
        head = "note: allowed local cycle" if c["allowed"] else "LOCAL CYCLE"
        lines.append(f"{head} ({len(c['modules'])} modules, closes through function-local imports): "
                     f"{', '.join(c['modules'])}")
        lines += [f"    {e['from']}:{e['line']} -> {e['to']} ({e['kind']})" for e in c["imports"]]
    lines.append("ok" if report["ok"] else "FAILED")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", default=str(Path(__file__).resolve().parent.parent),
                        help="repository root (default: this checkout)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--verbose", action="store_true", help="list allowed local cycles in full")
    args = parser.parse_args(argv)
    report = check(Path(args.root))
    print(json.dumps(report, indent=2) if args.json else format_text(report, args.verbose))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

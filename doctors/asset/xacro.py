"""Minimal, bounded in-process xacro expansion.

Supported: ``property`` (value, default, block body, scope=parent|global), ``arg``, ``macro``
(params with defaults, ``^`` forwarding, ``*block`` and ``**block``), macro calls (``xacro:NAME``
and ``xacro:call``), ``insert_block``, ``if``/``unless``, ``include`` (relative, ``package://``,
``$(find ...)``), ``${...}`` expressions (see :mod:`expr`) and ``$(find|arg|env|optenv|dirname|eval)``.
Anything else, and input that nests too deeply or grows too large, raises CaliperError.
Scoping follows xacro: a macro body sees its parameters, then the caller's scope.
"""
from __future__ import annotations

import copy
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from caliper_jax.errors import CaliperError
from caliper_jax.io import meshpath as paths
from doctors.asset.expr import MAX_LENGTH, evaluate
from doctors.asset.urdf_xml import is_element, parse_number, parse_xml, read_bytes

MAX_DEPTH = 48
MAX_RESOLVE_DEPTH = 32
MAX_ELEMENTS = 200_000
_INTEGER = re.compile(r"[+-]?\d+")


def xacro_name(tag: object) -> str | None:
    """The local name of an element or attribute in a xacro namespace, else None."""
    if isinstance(tag, str) and tag.startswith("{"):
        uri, _, local = tag[1:].partition("}")
        if "xacro" in uri:
            return local
    return None


@dataclass
class _Lazy:
    """A property's text, evaluated on first use in the scope that defined it."""

    text: str
    scope: _Scope
    here: Path
    value: object = None
    state: str = "new"  # new | busy | done


@dataclass
class _Block:
    nodes: list[ET.Element]
    scope: _Scope
    here: Path


@dataclass
class _Macro:
    params: list[tuple[str, str, str | None]]  # (kind "", "*" or "**", name, default)
    body: ET.Element
    here: Path


@dataclass
class _Scope:
    parent: _Scope | None = None
    props: dict[str, object] = field(default_factory=dict)
    macros: dict[str, _Macro] = field(default_factory=dict)

    def find(self, name: str, table: str = "props") -> object:
        scope: _Scope | None = self
        while scope is not None:
            entries = getattr(scope, table)
            if name in entries:
                return entries[name]
            scope = scope.parent
        raise KeyError(name)


def literal(value: object) -> object:
    """xacro's reading of a text value: quoted string, int, float, boolean, else the text."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1]
    if _INTEGER.fullmatch(text) and len(text) < 300:
        return int(text)
    number = parse_number(text)
    if number is not None:
        return number
    return {"true": True, "false": False}.get(text.lower(), value)


def _parse_params(text: str) -> list[tuple[str, str, str | None]]:
    params = []
    for token in text.split():
        kind = "**" if token.startswith("**") else "*" if token.startswith("*") else ""
        name, sep, default = token[len(kind):].partition(":=")
        params.append((kind, name, default if sep else None))
    return params


class _Expander:
    def __init__(self, label: str, roots: Sequence[Path]):
        self.label = label
        self.roots = roots
        self.args: dict[str, str] = {}
        self.globals = _Scope()
        self.elements = 0
        self.includes: list[Path] = []
        self.resolving = 0

    def fail(self, why: str) -> CaliperError:
        return CaliperError(f"{self.label}: xacro: {why}")

    def boolean(self, value: object, where: str) -> bool:
        value = literal(value)
        if isinstance(value, (bool, int, float)):
            return bool(value)
        raise self.fail(f"{where}: `{value}` is not a boolean")

    # ------------------------------------------------------------ text and values

    def value(self, name: str, scope: _Scope) -> object:
        entry = scope.find(name)
        if isinstance(entry, _Block):
            raise self.fail(f"block `{name}` used as a value")
        if isinstance(entry, _Lazy):
            if entry.state == "busy":
                raise self.fail(f"property `{name}` is defined in terms of itself")
            if entry.state == "new":
                if self.resolving >= MAX_RESOLVE_DEPTH:
                    raise self.fail(f"property chain deeper than {MAX_RESOLVE_DEPTH} at `{name}`")
                entry.state, self.resolving = "busy", self.resolving + 1
                try:
                    entry.value = self.evaluate_text(entry.text, entry.scope, entry.here)
                    entry.state = "done"
                finally:
                    self.resolving -= 1
                    if entry.state == "busy":
                        entry.state = "new"
            return literal(entry.value)
        return literal(entry)

    def evaluate_text(self, text: str, scope: _Scope, here: Path) -> object:
        """The text with substitutions; a lone ``${...}`` keeps its value's type."""
        pieces = list(self._split(text))
        if len(pieces) == 1 and pieces[0][0] == "${":
            return self._expression(pieces[0][1], scope)
        out = []
        for kind, body in pieces:
            if kind == "${":
                out.append(str(self._expression(body, scope)))
            elif kind == "$(":
                out.append(self._command(body, scope, here))
            else:
                out.append(body)
        result = "".join(out)
        if len(result) > MAX_LENGTH:
            raise self.fail("substituted text too long")
        return result

    def text(self, text: str | None, scope: _Scope, here: Path) -> str | None:
        if text is None or "$" not in text:
            return text
        return str(self.evaluate_text(text, scope, here))

    def _expression(self, source: str, scope: _Scope) -> object:
        try:
            return evaluate(source, lambda name: self.value(name, scope))
        except CaliperError as exc:
            raise exc if str(exc).startswith(self.label) else self.fail(str(exc)) from None

    def _split(self, text: str) -> Iterable[tuple[str, str]]:
        i, literal_start = 0, 0
        while True:
            i = text.find("$", i)
            if i < 0:
                break
            if text.startswith("$${", i) or text.startswith("$$(", i):
                yield "", text[literal_start:i] + text[i + 1:i + 3]
                i = literal_start = i + 3
                continue
            opener = text[i:i + 2]
            if opener not in ("${", "$("):
                i += 1
                continue
            end = _matching(text, i + 1)
            if end < 0:
                raise self.fail(f"unterminated `{opener}` in `{text[:60]}`")
            if i > literal_start:
                yield "", text[literal_start:i]
            yield opener, text[i + 2:end]
            i = literal_start = end + 1
        if literal_start < len(text):
            yield "", text[literal_start:]

    def _command(self, body: str, scope: _Scope, here: Path) -> str:
        verb, _, rest = body.strip().partition(" ")
        words = rest.split()
        if verb == "find" and len(words) == 1:
            found = paths.find_package(words[0], here, self.roots)
            if found is None:
                raise self.fail(f"$(find {words[0]}): package not found beside {here} or in the mesh roots")
            return str(found)
        if verb == "arg" and len(words) == 1:
            if words[0] not in self.args:
                raise self.fail(f"$(arg {words[0]}): argument not declared")
            return self.args[words[0]]
        if verb in ("env", "optenv") and words:
            found = os.environ.get(words[0])
            if found is None and verb == "env":
                raise self.fail(f"$(env {words[0]}): variable not set")
            return found if found is not None else " ".join(words[1:])
        if verb == "dirname" and not words:
            return str(here)
        if verb == "eval":
            return str(self._expression(rest, scope))
        raise self.fail(f"unsupported substitution `$({body.strip()[:40]})`")

    # ------------------------------------------------------------ elements

    def run(self, root: ET.Element, here: Path) -> ET.Element:
        out = ET.Element(root.tag, self._attributes(root, self.globals, here))
        out.text = root.text
        self.nodes(list(root), out, self.globals, here, 1)
        return out

    def _attributes(self, node: ET.Element, scope: _Scope, here: Path) -> dict[str, str]:
        return {k: self.text(v, scope, here) for k, v in node.attrib.items() if xacro_name(k) is None}

    def nodes(self, nodes: list[ET.Element], out: ET.Element, scope: _Scope, here: Path, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise self.fail(f"nesting deeper than {MAX_DEPTH} levels (recursive macro or include?)")
        for node in nodes:
            if not is_element(node):
                out.append(copy.copy(node))
                continue
            name = xacro_name(node.tag)
            if name is None:
                self._element(node, out, scope, here, depth)
            else:
                self._directive(name, node, out, scope, here, depth)

    def _element(self, node: ET.Element, out: ET.Element, scope: _Scope, here: Path, depth: int) -> None:
        self.elements += 1
        if self.elements > MAX_ELEMENTS:
            raise self.fail(f"expansion produces more than {MAX_ELEMENTS} elements")
        elem = ET.SubElement(out, node.tag, self._attributes(node, scope, here))
        elem.text = self.text(node.text, scope, here)
        elem.tail = self.text(node.tail, scope, here)
        self.nodes(list(node), elem, scope, here, depth + 1)

    def _directive(self, name: str, node: ET.Element, out: ET.Element, scope: _Scope, here: Path,
                   depth: int) -> None:
        if name == "property":
            self._property(node, scope, here)
        elif name == "arg":
            default = node.get("default")
            if default is not None:
                self.args.setdefault(self._required(node, "name"), str(self.text(default, scope, here)))
        elif name == "macro":
            params = _parse_params(node.get("params", ""))
            scope.macros[self._required(node, "name")] = _Macro(params, node, here)
        elif name == "include":
            self._include(node, out, scope, here, depth)
        elif name in ("if", "unless"):
            condition = self.evaluate_text(self._required(node, "value"), scope, here)
            if self.boolean(condition, f"<xacro:{name} value=...>") == (name == "if"):
                self.nodes(list(node), out, scope, here, depth + 1)
        elif name == "insert_block":
            try:
                block = scope.find(str(self.text(self._required(node, "name"), scope, here)))
            except KeyError:
                block = None
            if not isinstance(block, _Block):
                raise self.fail(f"insert_block `{node.get('name')}` is not a block")
            self.nodes(block.nodes, out, block.scope, block.here, depth + 1)
        elif name == "call":
            macro = str(self.text(self._required(node, "macro"), scope, here))
            self._call(macro, node, out, scope, here, depth, skip="macro")
        else:
            self._call(name, node, out, scope, here, depth)

    def _required(self, node: ET.Element, attr: str) -> str:
        value = node.get(attr)
        if value is None:
            raise self.fail(f"<{xacro_name(node.tag)}> without {attr}=")
        return value

    def _property(self, node: ET.Element, scope: _Scope, here: Path) -> None:
        name = self._required(node, "name")
        target = {"global": self.globals, "parent": scope.parent or scope}.get(node.get("scope", ""), scope)
        if "value" in node.attrib:
            target.props[name] = _Lazy(node.get("value", ""), scope, here)
        elif "default" in node.attrib:
            try:
                target.find(name)
            except KeyError:
                target.props[name] = _Lazy(node.get("default", ""), scope, here)
        else:
            target.props[name] = _Block(list(node), scope, here)

    def _include(self, node: ET.Element, out: ET.Element, scope: _Scope, here: Path, depth: int) -> None:
        url = str(self.text(self._required(node, "filename"), scope, here))
        found, tried = paths.resolve(url, here, self.roots)
        if found is None:
            raise self.fail(f"include `{url}` not found (tried {', '.join(map(str, tried)) or 'nothing'})")
        if found in self.includes:
            raise self.fail(f"include cycle through {found}")
        root = parse_xml(read_bytes(found), str(found))
        self.includes.append(found)
        try:
            self.nodes(list(root), out, scope, found.parent, depth + 1)
        finally:
            self.includes.pop()

    def _call(self, name: str, node: ET.Element, out: ET.Element, scope: _Scope, here: Path, depth: int,
              skip: str = "") -> None:
        try:
            macro = scope.find(name, "macros")
        except KeyError:
            raise self.fail(f"unknown macro or unsupported tag <xacro:{name}>") from None
        given = {k: v for k, v in node.attrib.items() if k != skip and xacro_name(k) is None}
        blocks = [child for child in node if is_element(child)]
        inner = _Scope(parent=scope)
        for kind, param, default in macro.params:
            if kind:
                if not blocks:
                    raise self.fail(f"macro `{name}` needs block parameter `{param}`")
                block = blocks.pop(0)
                inner.props[param] = _Block([block] if kind == "*" else list(block), scope, here)
            elif param in given:
                inner.props[param] = self.evaluate_text(given.pop(param), scope, here)
            elif default is not None and default.startswith("^"):
                try:
                    inner.props[param] = scope.find(param)
                except KeyError:
                    if not default.startswith("^|"):
                        raise self.fail(f"macro `{name}`: `{param}` not given and not in scope") from None
                    inner.props[param] = _Lazy(default[2:], inner, macro.here)
            elif default is not None:
                inner.props[param] = _Lazy(default, inner, macro.here)
            else:
                raise self.fail(f"macro `{name}` called without parameter `{param}`")
        if given:
            raise self.fail(f"macro `{name}` has no parameter `{sorted(given)[0]}`")
        self.nodes(list(macro.body), out, inner, macro.here, depth + 1)


def _matching(text: str, open_index: int) -> int:
    """Index of the bracket closing the one at ``open_index``, else -1."""
    close = {"{": "}", "(": ")"}[text[open_index]]
    level = 0
    for i in range(open_index, len(text)):
        if text[i] == text[open_index]:
            level += 1
        elif text[i] == close:
            level -= 1
            if level == 0:
                return i
    return -1


def expand(root: ET.Element, path: Path, roots: Sequence[Path] = ()) -> ET.Element:
    """The expanded copy of ``root`` (parsed from ``path``); CaliperError on anything unsupported."""
    try:
        return _Expander(str(path), roots).run(root, path.parent)
    except RecursionError:
        raise CaliperError(f"{path}: xacro: expansion nested too deeply") from None

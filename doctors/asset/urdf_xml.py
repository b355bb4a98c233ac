"""Guarded XML reading and a lenient, positional view of a URDF document.

The view keeps every ``<link>``/``<joint>`` element in document order (duplicates included) and
leaves attribute values as raw text: checks decide what is malformed, repair edits the elements.
"""
from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from caliper_jax import limits
from caliper_jax.errors import CaliperError

MAX_DEPTH = 128
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def read_bytes(path: Path) -> bytes:
    """The file's bytes; CaliperError when it is missing, unreadable, empty or too large."""
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise CaliperError(f"{path}: not a regular file")
        cap = limits.limit("file_mb") * 2**20       # the one file-size budget (caliper_jax.limits)
        if size > cap:
            raise CaliperError(f"{path}: file is {size} bytes, over the {cap // 2**20} MiB limit "
                               f"(set {limits.env_name('file_mb')}=N to raise it)")
        data = path.read_bytes()
    except OSError as exc:
        raise CaliperError(f"{path}: cannot read file ({exc.strerror or exc})") from None
    if not data.strip():
        raise CaliperError(f"{path}: file is empty")
    return data


def parse_xml(data: bytes, label: str) -> ET.Element:
    """Parse ``data`` (comments kept); refuse entity declarations and absurd nesting."""
    if b"<!ENTITY" in data:
        raise CaliperError(f"{label}: XML entity declarations are not accepted (entity-expansion risk)")
    parser = ET.XMLParser(target=ET.TreeBuilder(insert_comments=True))
    try:
        parser.feed(data)
        root = parser.close()
    except (ET.ParseError, LookupError, ValueError) as exc:  # LookupError/ValueError: unusable encoding
        raise CaliperError(f"{label}: not well-formed XML ({exc})") from None
    _check_depth(root, label)
    return root


def _check_depth(root: ET.Element, label: str) -> None:
    stack = [(root, 1)]
    while stack:
        elem, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise CaliperError(f"{label}: XML nested deeper than {MAX_DEPTH} levels")
        stack.extend((child, depth + 1) for child in elem)


def is_element(node: ET.Element) -> bool:
    """True for elements, False for comments and processing instructions."""
    return isinstance(node.tag, str)


# ---------------------------------------------------------------- numbers


def parse_number(text: str | None) -> float | None:
    """A finite float from strict decimal text, else None."""
    if text is None or not _NUMBER.fullmatch(text.strip()):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def parse_vector(text: str | None, n: int = 3) -> tuple[float, ...] | None:
    """``n`` finite whitespace-separated numbers, else None."""
    parts = (text or "").split()
    values = tuple(parse_number(p) for p in parts)
    return values if len(values) == n and None not in values else None  # type: ignore[return-value]


def origin_of(elem: ET.Element) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """(xyz, rpy) of ``elem``'s ``<origin>`` (zeros when absent); None when unparseable."""
    origin = elem.find("origin")
    if origin is None:
        return (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)
    xyz = parse_vector(origin.get("xyz", "0 0 0"))
    rpy = parse_vector(origin.get("rpy", "0 0 0"))
    return None if xyz is None or rpy is None else (xyz, rpy)


# ---------------------------------------------------------------- URDF view


@dataclass
class Geometry:
    """One ``<visual>`` or ``<collision>`` of a link."""

    role: str  # "visual" | "collision"
    elem: ET.Element
    link: str

    @property
    def shape(self) -> ET.Element | None:
        geometry = self.elem.find("geometry")
        if geometry is None:
            return None
        return next((c for c in geometry if is_element(c)), None)


@dataclass
class Link:
    index: int
    name: str
    elem: ET.Element
    visuals: list[Geometry] = field(default_factory=list)
    collisions: list[Geometry] = field(default_factory=list)

    @property
    def inertial(self) -> ET.Element | None:
        return self.elem.find("inertial")


@dataclass
class Joint:
    index: int
    name: str
    elem: ET.Element
    type: str
    parent: str
    child: str

    @property
    def limit(self) -> ET.Element | None:
        return self.elem.find("limit")


@dataclass
class Robot:
    """Links and joints in document order, and the links no joint has as child."""

    root: ET.Element
    links: list[Link]
    joints: list[Joint]
    roots: list[Link]

    @property
    def geometries(self) -> list[Geometry]:
        return [g for link in self.links for g in (*link.visuals, *link.collisions)]


def _named(elem: ET.Element, kind: str, index: int, label: str) -> str:
    name = elem.get("name")
    if not name:
        raise CaliperError(f"{label}: {kind} #{index + 1} has no name")
    return name


def _reference(joint: ET.Element, tag: str, name: str, label: str) -> str:
    ref = joint.find(tag)
    link = None if ref is None else ref.get("link")
    if not link:
        raise CaliperError(f"{label}: joint `{name}` has no <{tag} link=...>")
    return link


def build_robot(root: ET.Element, label: str) -> Robot:
    """The positional view; CaliperError when the links do not form a forest."""
    if root.tag != "robot":
        raise CaliperError(f"{label}: root element is <{root.tag}>, expected <robot>")
    links = []
    for i, elem in enumerate(root.findall("link")):
        link = Link(i, _named(elem, "link", i, label), elem)
        link.visuals = [Geometry("visual", e, link.name) for e in elem.findall("visual")]
        link.collisions = [Geometry("collision", e, link.name) for e in elem.findall("collision")]
        links.append(link)
    joints = []
    for i, elem in enumerate(root.findall("joint")):
        name = _named(elem, "joint", i, label)
        joints.append(Joint(i, name, elem, elem.get("type", ""), _reference(elem, "parent", name, label),
                            _reference(elem, "child", name, label)))
    parent_of = _parent_map(links, joints, label)
    return Robot(root, links, joints, [link for link in links if link.name not in parent_of])


def _parent_map(links: list[Link], joints: list[Joint], label: str) -> dict[str, str]:
    counts = Counter(link.name for link in links)
    parent_of: dict[str, str] = {}
    for joint in joints:
        for ref in (joint.parent, joint.child):
            if ref not in counts:
                raise CaliperError(f"{label}: joint `{joint.name}` names link `{ref}`, which is not defined")
        if joint.child in parent_of and counts[joint.child] == 1:
            raise CaliperError(f"{label}: link `{joint.child}` is the child of more than one joint")
        parent_of.setdefault(joint.child, joint.parent)
    done: set[str] = set()
    for start in parent_of:
        path: list[str] = []
        on_path: set[str] = set()
        name = start
        while name in parent_of and name not in done and name not in on_path:
            path.append(name)
            on_path.add(name)
            name = parent_of[name]
        if name in on_path:
            loop = path[path.index(name):] + [name]
            raise CaliperError(f"{label}: kinematic loop through links {' -> '.join(loop)}")
        done.update(path)
    return parent_of

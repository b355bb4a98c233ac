"""Read a robot description into one ``<robot>`` element, expanding xacro in-process.

A ``.xacro`` file is always expanded (failure makes it uninspectable). A plain URDF is parsed
as is; xacro leftovers in it are recorded (A013) and expanded only when the file declares the
xacro namespace and the expansion succeeds.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from caliper_jax.errors import CaliperError
from doctors.asset.urdf_xml import is_element, parse_xml, read_bytes
from doctors.asset.xacro import expand, xacro_name

XACRO_NS = "http://www.ros.org/wiki/xacro"


@dataclass
class Document:
    path: Path
    root: ET.Element
    leftovers: list[str]  # xacro constructs found in a plain URDF
    expansion_error: str | None  # why the leftovers were not expanded; None when expanded or none

    @property
    def base_dir(self) -> Path:
        return self.path.parent


def is_xacro_file(path: Path) -> bool:
    return path.suffix.lower() == ".xacro"


def load_document(path: Path, roots: Sequence[Path] = ()) -> Document:
    """Load ``path``; CaliperError when it cannot be read, parsed or (for .xacro) expanded."""
    data = read_bytes(path)
    label = str(path)
    if is_xacro_file(path):
        return Document(path, expand(parse_xml(data, label), path, roots), [], None)
    root = _parse_urdf(data, label)
    leftovers = find_leftovers(root)
    error = None
    if leftovers and re.search(rb"xmlns:xacro\s*=", data) is None:
        error = "the file does not declare xmlns:xacro"
    elif leftovers:
        try:
            root = expand(root, path, roots)
        except CaliperError as exc:
            error = str(exc)
    return Document(path, root, leftovers, error)


def _parse_urdf(data: bytes, label: str) -> ET.Element:
    """Parse a URDF, tolerating an undeclared ``xacro:`` prefix (a leftover, reported as A013)."""
    try:
        return parse_xml(data, label)
    except CaliperError as exc:
        if "unbound prefix" not in str(exc) or b"xacro:" not in data:
            raise
    patched = re.sub(rb"<robot\b", b'<robot xmlns:xacro="' + XACRO_NS.encode() + b'"', data, count=1)
    return parse_xml(patched, label)


def find_leftovers(root: ET.Element) -> list[str]:
    """xacro tags and ``${...}``/``$(...)`` substitutions in attributes or text (comments ignored)."""
    found = []
    for elem in root.iter():
        if not is_element(elem):
            continue
        local = xacro_name(elem.tag)
        if local is not None:
            found.append(f"<xacro:{local}>")
            continue
        texts = [f'{key}="{value}"' for key, value in elem.attrib.items()]
        texts += [elem.text.strip()] if elem.text else []
        found += [t for t in texts if "${" in t or "$(" in t]
    return found

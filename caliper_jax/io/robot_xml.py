"""Read and parse a ``<robot>`` XML file (URDF, SRDF) with the checks both readers share."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from caliper_jax.errors import CaliperError


def parse_robot_xml(text: str, source: str, what: str = "", error: type = CaliperError) -> ET.Element:
    """The root ``<robot>`` element of ``text``; ``error(...)`` naming ``source`` when the text
    declares entities, is not well-formed XML or has another root (``what`` names the expected
    kind of file in that message, e.g. " (an SRDF)")."""
    if "<!ENTITY" in text:
        raise error(f"{source}: XML entity declarations are not accepted")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise error(f"{source}: not well-formed XML ({exc})") from None
    if root.tag != "robot":
        raise error(f"{source}: root element is <{root.tag}>, expected <robot>{what}")
    return root


def read_text(path: Path, kind: str = "file", error: type = CaliperError) -> str:
    """The UTF-8 text of ``path``; ``error(...)`` naming it (as a ``kind``) when missing or unreadable."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{path}: no such {kind}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read ({exc})") from None

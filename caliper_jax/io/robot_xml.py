"""Read and parse a ``<robot>`` XML file (URDF, SRDF) with the checks both readers share."""
from __future__ import annotations

import codecs
import re
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


_DECLARED = re.compile(rb"""\s*<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9._-]+)["']""")


def decode_xml(data: bytes) -> str:
    """XML bytes -> text as an XML parser reads them: a UTF-16 or UTF-8 byte-order mark, else UTF-8,
    else the encoding the XML declaration names (UnicodeDecodeError / LookupError when that fails)."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        declared = _DECLARED.match(data)
        if declared is None:
            raise
        return data.decode(declared.group(1).decode("ascii"))


def read_text(path: Path, kind: str = "file", error: type = CaliperError) -> str:
    """The text of ``path`` (see :func:`decode_xml`); ``error(...)`` naming it (as a ``kind``) when
    missing, unreadable, not a regular file or over the file-size budget (``caliper_jax.limits``)."""
    from caliper_jax import limits

    try:
        data = limits.read_bytes(path, kind)   # a regular file within CALIPER_MAX_FILE_MB, or an error
    except CaliperError as exc:
        raise error(str(exc)) from None
    try:
        return decode_xml(data)
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not text in a known encoding (a binary file? byte {exc.start} is "
                    f"0x{data[exc.start]:02x})") from None
    except LookupError as exc:
        raise error(f"{path}: cannot read ({exc})") from None

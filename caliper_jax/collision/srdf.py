"""Read the link pairs an SRDF disables for self-collision (``<disable_collisions>``). Host side."""
from __future__ import annotations

from pathlib import Path

from caliper_jax.errors import CaliperError
from caliper_jax.io.robot_xml import parse_robot_xml, read_text


def disabled_pairs_from_string(text: str, source: str = "<string>") -> list[tuple[str, str]]:
    """Every ``<disable_collisions link1= link2=>`` pair, in file order."""
    root = parse_robot_xml(text, source, " (an SRDF)")
    pairs = []
    for el in root.iter("disable_collisions"):
        a, b = el.get("link1"), el.get("link2")
        if not a or not b:
            raise CaliperError(f"{source}: <disable_collisions> needs link1= and link2=")
        pairs.append((a, b))
    return pairs


def read_disabled_pairs(path) -> list[tuple[str, str]]:
    path = Path(path)
    return disabled_pairs_from_string(read_text(path, "SRDF file"), str(path))

"""Episode tags sidecar ``meta/caliper_tags.json`` (a caliper extension lerobot ignores).

Layout: ``{"episodes": {"<episode_index>": ["tag", ...]}}`` with sorted, unique tags and no empty
lists; written atomically.
"""

from __future__ import annotations

from pathlib import Path

from caliper_jax.dataset import format as fmt
from caliper_jax.dataset.atomic import write_atomic
from caliper_jax.errors import CaliperError


def read_tags(root: Path) -> dict[int, list[str]]:
    path = Path(root) / fmt.TAGS_PATH
    if not path.exists():
        return {}
    data = fmt.read_json(path, "tags")
    episodes = data.get("episodes") if isinstance(data, dict) else None
    if not isinstance(episodes, dict):
        raise CaliperError(f'{path}: expected {{"episodes": {{index: [tags]}}}}')
    try:
        return {int(k): sorted(set(map(str, v))) for k, v in episodes.items() if v}
    except (TypeError, ValueError):
        raise CaliperError(f"{path}: episode keys must be integers and values lists of tags") from None


def tags_bytes(tags: dict[int, list[str]]) -> bytes:
    clean = {str(k): sorted(set(v)) for k, v in sorted(tags.items()) if v}
    return fmt.dumps_json({"episodes": clean})


def write_tags(root: Path, tags: dict[int, list[str]]) -> None:
    write_atomic(Path(root) / fmt.TAGS_PATH, tags_bytes(tags))


def validate_tags(names) -> list[str]:
    out = [str(t).strip() for t in names]
    bad = [t for t in out if not t or "," in t]
    if bad:
        raise CaliperError(f"tags must be non-empty and comma-free, got {bad}")
    return out

"""The pinned simulator pair. Bitwise reproducibility holds per MuJoCo release only, so mujoco
and mujoco-mjx are pinned to one matching release (a plain install pairs MJX 3.17 with MuJoCo
4.0); :func:`check_pinned` says whether the installed pair is that one."""
from __future__ import annotations

import importlib.metadata

from caliper_jax.errors import CaliperError

PINNED = "3.17.0"
PACKAGES = ("mujoco", "mujoco-mjx")


def installed_versions() -> dict:
    """{distribution: version or None when not installed}."""
    out = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def check_pinned() -> dict:
    """The installed versions, or a CaliperError naming the mismatch and the fix."""
    found = installed_versions()
    wrong = {k: v for k, v in found.items() if v != PINNED}
    if wrong:
        listed = ", ".join(f"{k} {v or 'missing'}" for k, v in wrong.items())
        raise CaliperError(f"simulator pair is not the pinned {PINNED}: {listed} "
                           f"(pip install mujoco=={PINNED} mujoco-mjx=={PINNED})")
    return found


__all__ = ["PINNED", "PACKAGES", "check_pinned", "installed_versions"]


def import_mjx():
    """``mujoco.mjx``, imported with the notes it prints on stdout when the optional warp backend
    is missing counted by :mod:`caliper_jax.notices` (one ``caliper: warning:`` line at the end of a
    command, none after an error); anything else it prints goes to stderr (never into ``--json``)."""
    import contextlib
    import sys

    from caliper_jax.notices import FilteredStream

    if "mujoco.mjx" not in sys.modules:
        with contextlib.redirect_stdout(FilteredStream(sys.stderr)):
            import mujoco.mjx  # noqa: F401
    return sys.modules["mujoco.mjx"]

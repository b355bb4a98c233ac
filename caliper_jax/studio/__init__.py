"""Caliper Studio: a local browser app (viser) over the engine -- Jog, Motion, Simulate, Data, Graph.

Thin by design: every number shown comes from an engine function. ``StudioApp`` (``app.py``) is the
server and its inspectable state; ``LiveSession`` (``live.py``) the real-time MuJoCo session the
Simulate panel drives. Needs ``pip install 'caliper-jax[studio]'`` (viser).
"""

from __future__ import annotations

from caliper_jax.lazy import LazyExports

_lazy = LazyExports(__name__, globals())
_lazy.add(".app", "StudioApp")
_lazy.add(".live", "LiveSession")
__all__, __getattr__, __dir__ = _lazy.all(), _lazy.getattr, _lazy.dir

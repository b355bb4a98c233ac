"""caliper_jax.terrain: the terrain perception harness (docs/terrain.md) -- procedural terrains with
closed-form surfaces (``scenes``), the ray-cast ground truth on the map's lattice (``truth``), depth
camera and LiDAR captures (``sensors``), body trajectories (``trajectories``), the JAX elevation map
(``mapper``), accuracy metrics (``metrics``) and the harness (``run``: call ``terrain.run.run``; the
function is not exported here, where its name is the module's). Names load lazily; importing the
package imports no JAX."""
from __future__ import annotations

from caliper_jax.lazy import LazyExports

_lazy = LazyExports(__name__, globals())
_export = _lazy.add

_export(".scenes", "SCENES", "TerrainScene", "load_scene")
_export(".truth", "lattice", "ground_truth")
_export(".sensors", "PATTERNS", "Capture", "DepthSensor", "LidarSensor", "capture")
_export(".trajectories", "TRAJECTORIES", "BodyMotion", "trajectory")
_export(".mapper", "ElevationMap", "MapParams", "TraversabilityParams", "init_map", "fuse", "fuse_sequence",
        "shift", "traversability", "cell_centers")
_export(".metrics", "score", "triptych", "step_recovery", "slope_recovery")
_export(".run", "RunResult", "run_all")

__all__, __getattr__, __dir__ = _lazy.all(), _lazy.getattr, _lazy.dir

"""``caliper terrain``: the terrain perception harness -- ``run`` maps scenes with a depth camera or
a LiDAR and scores the elevation map against ground truth (caliper_jax.terrain.run)."""
from __future__ import annotations

import json
from pathlib import Path

from caliper_jax.cli import runtime
from caliper_jax.cli.common import at_least, budget, emit, memory_budget, output_dir, positive, seed
from caliper_jax.errors import CaliperError

SCENE_NAMES = ("flat", "slope", "rough", "steps", "boxes", "gap", "wall", "mixed")
TRAJECTORY_NAMES = ("static", "spin", "line", "circle", "figure8", "walk")
REPORT = "terrain_report.json"


def register(subparsers) -> None:
    terrain = subparsers.add_parser("terrain", help="terrain perception harness: scenes, sensors, an "
                                                    "elevation map and its accuracy")
    sub = terrain.add_subparsers(dest="terrain_command", metavar="ACTION")
    sub.required = True
    p = sub.add_parser("run", help="map scenes with a depth camera or LiDAR and score the map "
                                   "(coverage, RMSE, MAE, bias, p95) against ground truth")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--scene", choices=SCENE_NAMES, default=None, help="one scene (default: flat)")
    which.add_argument("--all", action="store_true", help="every scene")
    p.add_argument("--sensor", choices=("camera", "lidar"), default="camera",
                   help="camera: 160x120 depth camera (default); lidar: 32-ring spinning LiDAR, 20 deg tilt")
    p.add_argument("--trajectory", choices=TRAJECTORY_NAMES, default="spin",
                   help="body path (default spin: a stationary 360-degree sweep)")
    p.add_argument("--frames", type=int, default=24, help="frames captured along the path (default 24)")
    p.add_argument("--resolution", type=float, default=0.04, help="cell size in metres (default 0.04)")
    p.add_argument("--map-size", type=float, default=None,
                   help="map edge in metres (default 8 for the camera, 10 for the LiDAR)")
    p.add_argument("--radius", type=float, default=2.5, help="scoring radius in metres (default 2.5)")
    p.add_argument("--seed", type=int, default=0, help="sensor-noise seed (default 0)")
    p.add_argument("--out", required=True, metavar="DIR",
                   help=f"folder for {REPORT} and one triptych PNG (truth, estimate, error) per scene")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_run)


def cmd_run(args) -> int:
    from caliper_jax import progress

    frames = at_least(args.frames, "--frames")
    budget(frames, "--frames")
    resolution = positive(args.resolution, "--resolution")
    radius = positive(args.radius, "--radius")
    map_size = None if args.map_size is None else positive(args.map_size, "--map-size")
    size = map_size if map_size is not None else (10.0 if args.sensor == "lidar" else 8.0)
    if radius > size / 2:
        raise CaliperError(f"--radius {radius:g} m: the scoring disc does not fit in the {size:g} m map "
                           f"(at most {size / 2:g} m; see --map-size)")
    cells = (size / resolution) ** 2
    memory_budget(cells * 96, "--map-size / --resolution (map layers and fusion buffers)")
    rng_seed = seed(args.seed)
    scenes = list(SCENE_NAMES) if args.all else [args.scene or "flat"]
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CaliperError(f"--out {out}: exists and is not a folder")
    output_dir(out, "--out", empty=False)        # writable: checked before the scenes are mapped

    from caliper_jax.terrain.run import run, table

    results = []
    with runtime.partial_output(out):
        bar = progress.bar(len(scenes), f"terrain {args.sensor}", unit="scene")
        with bar:
            for name in scenes:
                bar.set_postfix_str(name)
                results.append(run(name, sensor=args.sensor, trajectory=args.trajectory, frames=frames,
                                   resolution=resolution, map_size=map_size, radius=radius, seed=rng_seed,
                                   out=out))
                bar.update(1)
        report = {
            "sensor": args.sensor, "trajectory": args.trajectory, "frames": frames,
            "resolution": resolution, "map_size": results[0].map_size, "radius": radius, "seed": rng_seed,
            "scenes": [r.to_dict() for r in results],
            "report": str(out / REPORT),
        }
        with runtime.writing():
            out.mkdir(parents=True, exist_ok=True)
            (out / REPORT).write_text(json.dumps(report, indent=2, allow_nan=False) + "\n")
    text = table(results, title=f"{args.sensor}, {args.trajectory} x{frames}, {resolution:g} m cells, "
                                f"{results[0].map_size:g} m map, scored within {radius:g} m")
    emit(args, report, text + f"\nreport: {out / REPORT}")
    return 0

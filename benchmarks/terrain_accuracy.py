"""Terrain-mapping accuracy on the seed's protocol, next to the seed's published tables.

Every scene with the depth camera (8 m map) and a 32-ring LiDAR (VLP-32 pattern, 20 degrees of
tilt, 10 m map): a 24-frame stationary 360-degree sweep, 0.04 m cells, scored within 2.5 m. Prints
one table per sensor with the seed's figures alongside and whether coverage and RMSE are at least
as good; ``--json`` prints every run's report instead. Too slow for a default test (compiles one
sweep per scene); ``tests/test_terrain_mapper.py`` runs a tiny sweep on the flat scene.

    python benchmarks/terrain_accuracy.py [--sensor camera|lidar|both] [--scenes flat,steps]
                                          [--frames 24] [--seed 0] [--out DIR] [--json]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# The seed's published results (Jetson Orin; its own mapper): coverage, rmse, mae, bias, p95 (m).
SEED_CAMERA = {
    "flat": (0.975, 0.0027, 0.0019, 0.0019, 0.0052),
    "slope": (0.926, 0.0027, 0.0020, 0.0019, 0.0051),
    "rough": (0.975, 0.0027, 0.0019, 0.0019, 0.0050),
    "steps": (0.902, 0.0097, 0.0034, 0.0008, 0.0069),
    "boxes": (0.908, 0.0150, 0.0034, 0.0029, 0.0067),
    "gap": (0.702, 0.0298, 0.0052, 0.0051, 0.0080),
    "wall": (0.911, 0.0896, 0.0097, -0.0057, 0.0054),
    "mixed": (0.962, 0.0072, 0.0031, 0.0016, 0.0072),
}
SEED_LIDAR = {     # + valid returns per frame
    "flat": (0.889, 0.0047, 0.0033, 0.0033, 0.0101, 44505),
    "slope": (0.894, 0.0041, 0.0029, 0.0026, 0.0089, 51970),
    "rough": (0.886, 0.0049, 0.0034, 0.0033, 0.0106, 43628),
    "steps": (0.873, 0.0098, 0.0044, 0.0024, 0.0136, 46779),
    "boxes": (0.814, 0.0285, 0.0061, 0.0055, 0.0123, 44883),
    "gap": (0.836, 0.0339, 0.0053, 0.0052, 0.0051, 45036),
    "wall": (0.825, 0.0120, 0.0040, 0.0029, 0.0110, 55787),
    "mixed": (0.883, 0.0088, 0.0045, 0.0029, 0.0150, 44817),
}
SEED = {"camera": SEED_CAMERA, "lidar": SEED_LIDAR}


def compare(result) -> dict:
    """Ours against the seed's row: coverage and RMSE at least as good."""
    seed = SEED[result.sensor].get(result.scene)
    m = result.metrics
    if seed is None:
        return {}
    return {"seed_coverage": seed[0], "seed_rmse": seed[1], "seed_mae": seed[2], "seed_bias": seed[3],
            "seed_p95": seed[4], "coverage_ok": m["coverage"] >= seed[0], "rmse_ok": m["rmse"] <= seed[1]}


def table(results, sensor: str) -> str:
    head = (f"{'scene':<7} | {'cover':>6} {'seen':>6} {'rmse':>7} {'mae':>7} {'bias':>8} {'p95':>7} "
            f"{'pts/fr':>7} | {'seed cov':>8} {'rmse':>7} {'mae':>7} {'bias':>8} {'p95':>7} | "
            f"{'cov':>3} {'rmse':>4} | {'compile':>7} {'run':>6}")
    lines = [head, "-" * len(head)]
    for r in results:
        m, c = r.metrics, compare(r)
        seed = SEED[sensor].get(r.scene)
        ours = (f"{m['coverage']:>6.1%} {m.get('observed_coverage', float('nan')):>6.1%} {m['rmse']:>7.4f} "
                f"{m['mae']:>7.4f} {m['bias']:>+8.4f} {m['p95']:>7.4f} {r.points_per_frame:>7.0f}")
        theirs = (f"{seed[0]:>8.1%} {seed[1]:>7.4f} {seed[2]:>7.4f} {seed[3]:>+8.4f} {seed[4]:>7.4f}"
                  if seed else " " * 41)
        ok = (f"{'yes' if c.get('coverage_ok') else 'NO':>3} {'yes' if c.get('rmse_ok') else 'NO':>4}"
              if c else " " * 8)
        lines.append(f"{r.scene:<7} | {ours} | {theirs} | {ok} | {r.timings['compile_s']:>6.1f}s "
                     f"{r.timings['run_s']:>5.2f}s")
    lines.append("(seen: cells any return fell in -- the sensor's share of the coverage)")
    return "\n".join(lines)


def extras(results) -> list[str]:
    out = []
    for r in results:
        if r.metrics.get("ambiguous_cells"):
            out.append(f"  {r.scene}: {r.metrics['ambiguous_cells']} known cells have their centre on a "
                       f"vertical face (no single true height); RMSE without them "
                       f"{r.metrics['rmse_unambiguous']:.4f}")
        if "steps" in r.metrics:
            s = r.metrics["steps"]
            out.append(f"  {r.scene}: steps true {[round(x, 4) for x in s['true_steps']]} m, estimated "
                       f"{[round(x, 4) for x in s['estimated_steps']]} m, "
                       f"max error {s['max_step_error']:.4f} m")
        if "slope" in r.metrics:
            s = r.metrics["slope"]
            out.append(f"  {r.scene}: slope true {s['true_deg']:.3f} deg, "
                       f"estimated {s['estimated_deg']:.3f} deg (error {s['error_deg']:+.3f})")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sensor", choices=("camera", "lidar", "both"), default="both")
    ap.add_argument("--scenes", default=None, help="comma-separated scenes (default: all eight)")
    ap.add_argument("--frames", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--noise", default=None, metavar="SIGMA,REL",
                    help="range noise on both sensors: std SIGMA + REL * range (m); default: none")
    ap.add_argument("--out", default=None, help="a folder for the triptych PNGs")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    import dataclasses

    from caliper_jax.terrain.run import make_sensor, run
    from caliper_jax.terrain.scenes import SCENES

    noise = None
    if args.noise:
        sigma, rel = (float(v) for v in args.noise.split(","))
        noise = {"noise_sigma": sigma, "noise_rel": rel}

    scenes = SCENES if args.scenes is None else tuple(s.strip() for s in args.scenes.split(",") if s.strip())
    sensors = ("camera", "lidar") if args.sensor == "both" else (args.sensor,)
    report, t0 = {"protocol": {"trajectory": "spin", "frames": args.frames, "resolution": 0.04,
                               "radius": 2.5, "seed": args.seed, "map_size": {"camera": 8.0, "lidar": 10.0},
                               "noise": noise},
                  "runs": []}, time.perf_counter()
    texts = []
    for sensor in sensors:
        results = []
        for name in scenes:
            rig = sensor if noise is None else dataclasses.replace(make_sensor(sensor), **noise)
            r = run(name, sensor=rig, trajectory="spin", frames=args.frames, resolution=0.04, radius=2.5,
                    seed=args.seed, out=args.out)
            results.append(r)
            report["runs"].append({**r.to_dict(), "seed_comparison": compare(r)})
            if not args.json:
                print(f"  {sensor} {name}: coverage {r.metrics['coverage']:.1%} rmse {r.metrics['rmse']:.4f} "
                      f"({r.timings['compile_s']:.1f} s compile, {r.timings['run_s']:.2f} s run)",
                      file=sys.stderr, flush=True)
        title = ("depth camera, 160x120, 8 m map" if sensor == "camera"
                 else "LiDAR VLP-32 pattern, 120,000 rays, 20 deg tilt, 10 m map")
        if noise is not None:
            title += f", range noise {noise['noise_sigma']:g} m + {noise['noise_rel']:g} x range"
        texts.append(f"\n{title} ({args.frames}-frame spin, 0.04 m cells, r <= 2.5 m)\n"
                     + table(results, sensor) + "\n" + "\n".join(extras(results)))
    report["total_s"] = time.perf_counter() - t0
    ok = all(c.get("coverage_ok", True) and c.get("rmse_ok", True)
             for c in (run_["seed_comparison"] for run_ in report["runs"]))
    report["all_at_least_as_good"] = ok
    if args.json:
        print(json.dumps(report, indent=2, allow_nan=False, default=lambda o: None))
    else:
        print("\n".join(texts))
        print(f"\ncoverage and RMSE at least as good as the seed on every row: {'yes' if ok else 'NO'} "
              f"({report['total_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

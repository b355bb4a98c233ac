"""Start-up of the ``caliper`` command line: cold (empty persistent compilation cache) vs warm (the
cache filled by the cold run) vs off (``--no-compile-cache``), each a fresh subprocess.

    python benchmarks/bench_cli_start.py [--reps 3] [--json]

Wall time is what a user waits; CPU time (user + system of the child) is also printed because the
shared 2-core host's load changes wall times from minute to minute while CPU time barely moves.
Each cold run gets its own empty cache folder; the warm runs reuse the last cold run's folder.
Figures are medians over ``--reps`` runs, interleaved (cold, warm, off, cold, warm, off, ...).
Target: warm >= 5x faster than cold for ``caliper check collide_arm``. The ``floor`` column (a
process that imports the CLI and jax and runs one op) shows what no cache can remove.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

COMMANDS = {
    "check collide_arm": ["check", "collide_arm"],
    "plan collide_arm": ["plan", "collide_arm", "--goal", "1 0.5 0.5", "--box", "0.5,0,0.5,0.1,0.1,0.1"],
}


def run_once(argv: list[str], cache: Path | None) -> tuple[float, float]:
    """(wall s, child CPU s) of one ``python -m caliper_jax.cli`` run."""
    env = {k: v for k, v in os.environ.items() if k not in ("CALIPER_NO_COMPILE_CACHE", "CALIPER_PROGRESS")}
    if cache is None:
        argv = ["--no-compile-cache", *argv]
    else:
        env["CALIPER_CACHE_DIR"] = str(cache)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "caliper_jax.cli", *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"caliper {' '.join(argv)} failed ({proc.returncode}): {proc.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


FLOOR = "import caliper_jax.cli, jax.numpy as jnp; jnp.zeros(1).block_until_ready()"


def floor_once() -> tuple[float, float]:
    """(wall s, child CPU s) of a process that only imports the CLI and jax and runs one op: the
    part of every start that no cache can remove."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", FLOOR], cwd=ROOT, check=True, capture_output=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def bench(name: str, argv: list[str], reps: int, scratch: Path) -> dict:
    rows = {"cold": [], "warm": [], "off": [], "floor": []}
    entries = size = 0
    for r in range(reps):
        cache = scratch / f"{name.replace(' ', '_')}-{r}"
        rows["cold"].append(run_once(argv, cache))
        files = [p for p in cache.iterdir() if p.is_file()]
        entries, size = len(files), sum(p.stat().st_size for p in files)
        rows["warm"].append(run_once(argv, cache))
        rows["off"].append(run_once(argv, None))
        rows["floor"].append(floor_once())
    out = {"command": f"caliper {' '.join(argv)}", "cache_entries": entries, "cache_bytes": size}
    for kind, values in rows.items():
        out[f"{kind}_wall_s"] = statistics.median(w for w, _ in values)
        out[f"{kind}_cpu_s"] = statistics.median(c for _, c in values)
    out["speedup_wall"] = out["cold_wall_s"] / out["warm_wall_s"]
    out["speedup_cpu"] = out["cold_cpu_s"] / out["warm_cpu_s"]
    # what the cache can act on: the time above the import floor
    out["speedup_above_floor_wall"] = (out["cold_wall_s"] - out["floor_wall_s"]) / \
        max(out["warm_wall_s"] - out["floor_wall_s"], 1e-3)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--only", choices=sorted(COMMANDS), action="append")
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="caliper-bench-cache-"))
    try:
        results = [bench(name, COMMANDS[name], args.reps, scratch)
                   for name in (args.only or list(COMMANDS))]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    if args.json:
        print(json.dumps({"load_average_1min": load, "reps": args.reps, "results": results}, indent=2))
        return 0
    print(f"median of {args.reps} runs each; 1-min load average at the end {load:.1f} "
          f"on {os.cpu_count()} cores")
    kinds = ("cold", "warm", "off", "floor")
    print(f"{'command':<22} " + " ".join(f"{k:>14}" for k in kinds)
          + f" {'cold/warm':>12} {'above floor':>12}  cache")
    for r in results:
        name = r["command"].split(" --")[0].replace("caliper ", "")
        cells = [f"{r[f'{k}_wall_s']:5.2f} ({r[f'{k}_cpu_s']:5.2f})" for k in kinds]
        print(f"{name:<22} " + " ".join(f"{c:>14}" for c in cells) +
              f" {r['speedup_wall']:5.1f}x ({r['speedup_cpu']:.1f}x) {r['speedup_above_floor_wall']:11.1f}x  "
              f"{r['cache_entries']} entries, {r['cache_bytes'] / 1024:.0f} KiB")
    print("figures: wall s (child CPU s); cold = empty cache, warm = filled, off = --no-compile-cache,\n"
          "floor = importing the CLI and jax and running one op (no cache can remove it);\n"
          "above floor = (cold - floor) / (warm - floor)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

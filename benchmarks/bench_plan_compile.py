"""The first ``plan()`` call of a process (issue 34, "compile once"): cold persistent compile cache
vs warm cache vs a warm call, per stage, each process fresh.

    python benchmarks/bench_plan_compile.py [--reps 1] [--json out.json]

Two fresh subprocesses per rep: the first with an empty cache folder (cold), the second reusing it
(warm cache). Each loads the panda, builds the pillar scene (``panda_pillar_problems``' obstacles,
a fixed start and goal drawn from that set), calls ``plan()`` twice (the second call is the warm
call) and reports ``PlanResult.times`` of both, plus what jax's own compile log says the first
call spent on tracing, lowering to MLIR and compiling / loading from the cache, and how many
programs it traced. Target: warm-cache first call <= warm call + 3 s.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGES = ("setup", "classify", "escape", "search", "shortcut", "exact", "retime", "total")
START = [-0.7185, 0.1246, -0.2901, -1.612, 0.2477, 2.3066, 1.0295, 0.02]
GOAL = [0.5349, 0.4262, 0.261, -1.6105, -0.2984, 2.5574, 0.3336, 0.02]


def child(cache: str) -> dict:
    """Runs in the subprocess: JSON of the two calls' splits and the compile-log totals."""
    import logging
    import re

    t0 = time.perf_counter()
    import caliper_jax

    caliper_jax.enable_compile_cache(cache)
    import jax

    log = {"trace": 0.0, "lower": 0.0, "compile": 0.0, "traced": 0, "hits": 0, "misses": 0,
           "programs": []}
    pat = {"trace": re.compile(r"Finished tracing (\S+) for jit in ([0-9.e-]+) sec"),
           "lower": re.compile(r"Finished jaxpr to MLIR module conversion (\S+) in ([0-9.e-]+) sec"),
           "compile": re.compile(r"Finished XLA compilation of (\S+) in ([0-9.e-]+) sec")}
    active = [False]

    class Tally(logging.Handler):
        def emit(self, record):
            if not active[0]:
                return
            msg = record.getMessage()
            for k, p in pat.items():
                m = p.search(msg)
                if m:
                    log[k] += float(m.group(2))
                    log["traced"] += k == "trace"
                    log["programs"].append([k, m.group(1), float(m.group(2))])
            log["hits"] += "Persistent compilation cache hit" in msg
            log["misses"] += "PERSISTENT COMPILATION CACHE MISS" in msg

    jax.config.update("jax_log_compiles", True)
    for name in ("jax", "jax._src"):
        lg = logging.getLogger(name)
        lg.addHandler(Tally())
        lg.setLevel(logging.DEBUG)
        lg.propagate = False
    import numpy as np

    import robots
    from caliper_jax.collision.geometry import box, ground
    from caliper_jax.collision.scene import build_collision_model
    from caliper_jax.loading import load
    from caliper_jax.planning import plan

    t_import = time.perf_counter() - t0
    t0 = time.perf_counter()
    model = load("panda")
    srdf = robots.example_robot_data_dir() / "panda_description/srdf/panda.srdf"
    obstacles = [box([0.5, 0.0, 0.45], [0.06, 0.06, 0.45], name="pillar"),
                 box([-0.3, 0.35, 0.15], [0.2, 0.03, 0.15], name="wall"), ground(-0.01)]
    cm = build_collision_model(model, obstacles, srdf=srdf)
    t_scene = time.perf_counter() - t0
    runs = []
    for k in range(2):
        active[0] = k == 0
        r = plan(model, cm, np.array(GOAL), np.array(START), seed=0, resolution=0.005)
        active[0] = False
        if not r.success:
            raise SystemExit(f"plan failed: {r.reason}")
        runs.append({s: r.times.get(s, 0.0) for s in STAGES})
    return {"import_s": t_import, "scene_s": t_scene, "first": runs[0], "warm": runs[1], "log": log}


def run_child(cache: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("CALIPER_NO_COMPILE_CACHE",)}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, __file__, "--child", str(cache)], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"child failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1, help="cold + warm-cache pairs (medians printed)")
    ap.add_argument("--json", help="write the raw figures here")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    rows = {"cold": [], "warm_cache": []}
    for _ in range(args.reps):
        cache = Path(tempfile.mkdtemp(prefix="caliper_plan_cache_"))
        try:
            rows["cold"].append(run_child(cache))
            rows["warm_cache"].append(run_child(cache))
        finally:
            shutil.rmtree(cache, ignore_errors=True)

    def med(kind, *path):
        vals = []
        for r in rows[kind]:
            v = r
            for p in path:
                v = v[p]
            vals.append(v)
        return statistics.median(vals)

    print(f"panda past a pillar, plan() in a fresh process, medians of {args.reps} rep(s); seconds")
    print(f"{'stage':<10} {'cold':>8} {'warm cache':>11} {'warm call':>10}")
    for s in STAGES:
        print(f"{s:<10} {med('cold', 'first', s):8.3f} {med('warm_cache', 'first', s):11.3f} "
              f"{med('warm_cache', 'warm', s):10.3f}")
    for kind in rows:
        print(f"{kind}: import {med(kind, 'import_s'):.2f} s, load + scene {med(kind, 'scene_s'):.2f} s; "
              f"first call's jax log: {med(kind, 'log', 'traced'):.0f} programs traced, tracing "
              f"{med(kind, 'log', 'trace'):.2f} s, lowering {med(kind, 'log', 'lower'):.2f} s, compile/load "
              f"{med(kind, 'log', 'compile'):.2f} s, cache hits {med(kind, 'log', 'hits'):.0f}, "
              f"misses {med(kind, 'log', 'misses'):.0f}")
    extra = med("warm_cache", "first", "total") - med("warm_cache", "warm", "total")
    print(f"warm-cache first call - warm call = {extra:.2f} s (target <= 3 s)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

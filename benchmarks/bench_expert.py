"""Scripted-expert success rates: N randomised episodes per zoo task on the CPU VecEnv.

    python benchmarks/bench_expert.py [--episodes 100] [--worlds 4] [--seed 0] [--only TASK] [--json]

Each episode starts from the task's randomisation (prop pose, mass, friction, damping, gains:
tasks.env_spec.EnvRandomization defaults); the expert plans from the props' real start poses
(tasks.expert) and the episode runs closed loop with contact until the verdict fires or the
horizon. Targets (issue 16): lift-cube and place-cube >= 95%, the other three >= 80%; (issue 31)
the Panda's friction-grasp tasks >= 95%, the SO-101's >= 90% (tasks.arm_expert; their declared
randomisation). The
rate is printed with its Wilson 95% interval; planning time (IK, witness, retiming) and simulation
time (the env's step calls) are reported separately, and ``sim_s_simulated`` is the simulated time
the episodes cover (wall time below it: faster than real time); ``world_steps_per_s`` is physics
steps of the counted episodes per second of step time.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np

TARGETS = {"lift-cube": 0.95, "place-cube": 0.95, "hold-cube-high": 0.80, "sort-blocks": 0.80,
           "precise-place": 0.80, "panda-lift-cube": 0.95, "panda-pick-place": 0.95,
           "panda-push-cube": 0.95, "so101-lift-cube": 0.90, "so101-pick-place": 0.90,
           "panda-stack": 0.90, "panda-insert-peg": 0.80, "so101-reach": 0.90, "so101-push-cube": 0.90,
           "panda-reach": 1.00}


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)


def run_task(name: str, episodes: int, worlds: int, seed: int) -> dict:
    from tasks.arm_expert import expert_for
    from tasks.env import VecEnv

    env = VecEnv(name, worlds, seed=seed)
    expert = expert_for(env)
    t_plan = t_sim = 0.0
    obs, info = env.reset()
    outcomes, lengths = [], []
    while len(outcomes) < episodes:
        t0 = time.perf_counter()
        action = expert.act(obs, info)
        t1 = time.perf_counter()
        obs, _, term, trunc, info = env.step(action)
        t_plan, t_sim = t_plan + t1 - t0, t_sim + time.perf_counter() - t1
        for w in np.flatnonzero(term | trunc):
            if len(outcomes) < episodes:
                outcomes.append(bool(info["final_success"][w]))
                lengths.append(int(info["episode"]["final_length"][w]))
    env.close()
    k = sum(outcomes)
    lo, hi = wilson(k, len(outcomes))
    return {"task": name, "episodes": len(outcomes), "successes": k, "rate": k / len(outcomes),
            "wilson95": [lo, hi], "target": TARGETS.get(name), "failed_plans": len(expert.failed_plans),
            "mean_length_s": float(np.mean(lengths)) / env.layout.fps, "plan_s": t_plan, "sim_s": t_sim,
            "sim_s_simulated": float(np.sum(lengths)) / env.layout.fps,
            # physics steps of the counted episodes per second of env.step wall time (a lower bound:
            # worlds still running uncounted episodes at the end step too)
            "world_steps_per_s": float(np.sum(lengths)) * env.layout.substeps / max(t_sim, 1e-9)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--worlds", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", action="append")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    names = args.only or list(TARGETS)
    rows = [run_task(n, args.episodes, args.worlds, args.seed) for n in names]
    if args.json:
        print(json.dumps({"results": rows}, indent=2))
        return 0
    print(f"{'task':<16} {'success':>9} {'wilson 95%':>15} {'target':>7} {'plans failed':>13} "
          f"{'plan s':>8} {'sim s':>8} {'steps/s':>9}")
    for r in rows:
        ok = "" if r["target"] is None else ("  ok" if r["rate"] >= r["target"] else "  BELOW")
        lo, hi = r["wilson95"]
        print(f"{r['task']:<16} {r['successes']:>4}/{r['episodes']:<4} [{lo:.2f}, {hi:.2f}]"
              f" {r['target'] or 0:>7.2f} {r['failed_plans']:>13} {r['plan_s']:>8.1f} {r['sim_s']:>8.1f}"
              f" {r['world_steps_per_s']:>9.0f}{ok}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Robustness of an RL recipe over training seeds: ``caliper learn rl``'s trainer (PPO or SAC, CPU
engine) on one task for each seed, then the deterministic actor on the test seed.

Printed per seed: env steps, wall time of the run and its compile part (the first update),
collection env steps/s, the training episodes' success over the last 10% of updates, and the
test-seed success with its Wilson 95% interval (``learn.evaluate``, ``--episodes`` episodes of
seed 1000003, never seen in training); then the seeds reaching ``--target``.

    python benchmarks/bench_rl_seeds.py panda-reach --algo ppo --seeds 0 1 2 --steps 400000 \\
        --config '{"envs": 32, "init_log_std": -2.5}'
"""
from __future__ import annotations

import argparse
import json


def run(task, algo, config, seed, episodes):
    from learn.evaluate import evaluate
    from learn.rl.train import ALGORITHMS, train_rl

    Config = ALGORITHMS[algo].config
    cfg = Config.from_dict({**Config().to_dict(), **config, "seed": seed})
    res = train_rl(task, algo, cfg)
    tail = res.history[-max(1, len(res.history) // 10):]
    n = sum(r["episodes"] for r in tail)
    train_success = sum(r["success"] * r["episodes"] for r in tail if r["episodes"]) / max(n, 1)
    collect = sum(r["collect_s"] for r in res.history[1:])
    ev = evaluate(res.policy, task, episodes=episodes, seed=1_000_003)
    return {"seed": seed, "env_steps": res.env_steps, "wall_s": round(res.wall_s, 1),
            "compile_s": round(res.compile_s, 1),
            "collect_steps_per_s": round(cfg.batch * (len(res.history) - 1) / max(collect, 1e-9)),
            "train_success_last10pct": round(train_success, 3), "test_success": ev.success_rate,
            "wilson95": [round(x, 3) for x in ev.wilson]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task")
    ap.add_argument("--algo", choices=("ppo", "sac"), default="ppo")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=400_000)
    ap.add_argument("--config", default="{}", help="config overrides as JSON (the algorithm's keys)")
    ap.add_argument("--episodes", type=int, default=50)
    ap.add_argument("--target", type=float, default=0.95)
    args = ap.parse_args(argv)
    config = {**json.loads(args.config), "steps": args.steps}
    rows = []
    for seed in args.seeds:
        row = run(args.task, args.algo, config, seed, args.episodes)
        rows.append(row)
        print(json.dumps(row), flush=True)
    ok = [r["seed"] for r in rows if r["test_success"] >= args.target]
    print(f"{args.algo} on {args.task}: {len(ok)}/{len(rows)} seeds reach {args.target:.0%} on the test seed "
          f"(seeds {ok})")


if __name__ == "__main__":
    main()

"""Robustness of an RL recipe over training seeds: ``caliper learn rl``'s trainer (PPO or SAC, CPU
engine) on one task for each seed, then the deterministic actor on the test seed.

Each seed starts from the task's RL recipe (``learn.recipes.RL_RECIPES``; ``--no-recipe``: the
algorithm's defaults), with its model selection on the val seed; ``--config`` overrides fields.
Printed per seed: env steps, wall time of the run and its compile part (the first update),
collection env steps/s, the training episodes' success over the last 10% of updates, and the
test-seed success with its Wilson 95% interval (``learn.evaluate``, ``--episodes`` episodes of
seed 1000003, never seen in training); then the seeds reaching ``--target``.

    python benchmarks/bench_rl_seeds.py panda-reach --algo ppo --seeds 0 1 2
"""
from __future__ import annotations

import argparse
import json


def run(task, algo, config, seed, episodes, use_recipe=True):
    from learn.evaluate import evaluate
    from learn.recipes import rl_recipe
    from learn.rl.train import ALGORITHMS, train_rl

    rec = rl_recipe(task, algo) if use_recipe else None
    Config = ALGORITHMS[algo].config
    cfg = Config.from_dict({**Config().to_dict(), **(rec.config if rec else {}), **config, "seed": seed})
    res = train_rl(task, algo, cfg, select_episodes=rec.select_episodes if rec else 0,
                   select_every=rec.select_every if rec else 1)
    tail = res.history[-max(1, len(res.history) // 10):]
    n = sum(r["episodes"] for r in tail)
    train_success = sum(r["success"] * r["episodes"] for r in tail if r["episodes"]) / max(n, 1)
    collect = sum(r["collect_s"] for r in res.history[1:])
    ev = evaluate(res.policy, task, episodes=episodes, seed=1_000_003)
    return {"seed": seed, "env_steps": res.env_steps, "wall_s": round(res.wall_s, 1),
            "compile_s": round(res.compile_s, 1),
            "collect_steps_per_s": round(cfg.batch * (len(res.history) - 1) / max(collect, 1e-9)),
            "train_success_last10pct": round(train_success, 3), "selected": res.selected,
            "test_success": ev.success_rate,
            "wilson95": [round(x, 3) for x in ev.wilson]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task")
    ap.add_argument("--algo", choices=("ppo", "sac"), default="ppo")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=None, help="env steps (default: the recipe's)")
    ap.add_argument("--no-recipe", dest="recipe", action="store_false")
    ap.add_argument("--config", default="{}", help="config overrides as JSON (the algorithm's keys)")
    ap.add_argument("--episodes", type=int, default=50)
    ap.add_argument("--target", type=float, default=0.95)
    args = ap.parse_args(argv)
    config = {**json.loads(args.config), **({} if args.steps is None else {"steps": args.steps})}
    rows = []
    for seed in args.seeds:
        row = run(args.task, args.algo, config, seed, args.episodes, args.recipe)
        rows.append(row)
        print(json.dumps(row), flush=True)
    ok = [r["seed"] for r in rows if r["test_success"] >= args.target]
    print(f"{args.algo} on {args.task}: {len(ok)}/{len(rows)} seeds reach {args.target:.0%} on the test seed "
          f"(seeds {ok})")


if __name__ == "__main__":
    main()

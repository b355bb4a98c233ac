"""Learning benchmarks, side by side with their references.

    python benchmarks/bench_learn.py [--part speed|eval|success|all] [--json]
        [--batch 64] [--chunk 20] [--steps 50] [--rounds 3]  # speed: ACT train steps/s vs lerobot
        [--eval-episodes 64]                              # eval: batched vs serial episodes/s
        [--demos 100] [--budget-s 600] [--episodes 100]   # success: train + held-out closed loop
        [--policies bc_mlp act diffusion]

Parts:
- ``speed``: training steps/s of our ACT against lerobot's own ACT (torch on the CPU, run in the
  lerobot venv that ``.ci/lerobot_compat.sh`` builds) at the same model size, batch, chunk length
  and inputs (joint state + prop poses -> action chunk, no images), with the same number of
  threads, alternating ``--rounds`` times (medians reported, with every run). Compile (ours) /
  warm-up (theirs) is reported apart from the timed steps. Target >= 2x.
- ``eval``: closed-loop evaluation episodes/s of a trained BC policy on lift-cube, 64 worlds in
  one batched rollout (one batched policy call per control tick) against the same number of
  episodes run one world at a time. Target >= 20x.
- ``success``: record ``--demos`` scripted lift-cube demonstrations (seed 0), train each policy for
  at most ``--budget-s`` seconds of wall time on this machine (steps fixed per kind below, so the
  run is deterministic; the wall time is printed), and evaluate it closed loop with contact on
  ``--episodes`` held-out episodes (the first test seed of learn.protocol, never tuned on). Targets:
  BC-MLP >= 80%, ACT >= 90%, diffusion >= 80%, each within 10 minutes of training on 2 CPU cores.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
LEROBOT_PY = ROOT / ".venv-lerobot" / "bin" / "python"

#: The policy kinds of the success benchmark; each trains with its recipe (learn.recipes.recipe(kind)).
RECIPES = ("bc_mlp", "act", "diffusion")


def _threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


# ---- speed: ACT vs lerobot ACT ---------------------------------------------------------------------
def _lerobot_act(args, vae: bool, state_dim: int, env_dim: int, action_dim: int) -> dict:
    """One timed run of lerobot's ACT (its own venv) -> its JSON report or {"error": ...}."""
    cmd = [str(LEROBOT_PY), str(ROOT / "benchmarks" / "lerobot" / "act_train_speed.py"),
           "--state-dim", str(state_dim), "--env-dim", str(env_dim), "--action-dim", str(action_dim),
           "--chunk", str(args.chunk), "--batch", str(args.batch), "--dim-model", "128",
           "--heads", "4", "--ff", "512", "--enc", "2", "--dec", "1",
           "--steps", str(min(args.steps, 30)), "--threads", str(_threads())]
    cmd += ["--vae"] if vae else []
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode == 0:
        return json.loads(run.stdout.strip().splitlines()[-1])
    return {"error": run.stderr.strip().splitlines()[-1] if run.stderr.strip() else "failed"}


def act_speed(args) -> dict:
    import jax

    from learn.config import ACTConfig, TrainConfig
    from learn.policies import build_policy
    from learn.policies.base import Batch
    from learn.train import fit

    state_dim, env_dim, action_dim = 3, 7, 3
    size = {"dim_model": 128, "n_heads": 4, "dim_feedforward": 512, "n_encoder_layers": 2,
            "n_decoder_layers": 1}
    out = {"batch": args.batch, "chunk": args.chunk, **size, "threads": _threads()}
    for vae in (False, True):
        cfg = ACTConfig(chunk_size=args.chunk, use_vae=vae, **size)
        policy = build_policy(cfg, state_dim + env_dim, action_dim)
        rng = np.random.default_rng(0)
        fixed = Batch(rng.standard_normal((args.batch, 1, state_dim + env_dim)).astype(np.float32),
                      np.ones((args.batch, 1), bool),
                      rng.standard_normal((args.batch, args.chunk, action_dim)).astype(np.float32),
                      np.ones((args.batch, args.chunk), bool))

        class Random:
            """The same random batch every step (as the lerobot side does)."""

            def __init__(self, batch):
                self.batch = batch

            def sample_batch(self, key, batch_size):
                return self.batch

        ours_runs, their_runs = [], []
        for _ in range(args.rounds):                 # alternate, so both sides see the same load
            res = fit(policy, Random(fixed), None, TrainConfig(steps=args.steps, batch_size=args.batch,
                                                          warmup=1, eval_every=args.steps,
                                                          log_every=args.steps))
            ours_runs.append({"steps_per_s": res.steps_per_s, "compile_s": res.compile_s})
            if LEROBOT_PY.exists():
                their_runs.append(_lerobot_act(args, vae, state_dim, env_dim, action_dim))
        ours = {"steps_per_s": float(np.median([r["steps_per_s"] for r in ours_runs])),
                "compile_s": ours_runs[0]["compile_s"], "runs": [r["steps_per_s"] for r in ours_runs]}
        ok = [r for r in their_runs if "steps_per_s" in r]
        theirs = (None if not their_runs else their_runs[-1] if not ok else
                  {**ok[-1], "steps_per_s": float(np.median([r["steps_per_s"] for r in ok])),
                   "runs": [r["steps_per_s"] for r in ok]})
        out["vae" if vae else "no_vae"] = {"ours": ours, "lerobot": theirs,
                                           "ratio": (ours["steps_per_s"] / theirs["steps_per_s"]
                                                     if theirs and "steps_per_s" in theirs else None)}
    out["jax"] = jax.__version__
    return out


# ---- demos and training -----------------------------------------------------------------------------
def demos(n: int, root: Path) -> Path:
    from tasks.demo import record_demos

    out = root / f"lift_demos_{n}"
    if not out.exists():
        t0 = time.perf_counter()
        res = record_demos("lift-cube", n, out, seed=0, num_envs=8)
        print(f"# recorded {n} demos ({res.successes} successful) in {time.perf_counter() - t0:.0f} s",
              file=sys.stderr)
    return out


def train(kind: str, dataset: Path, budget_s: float, steps: int | None = None):
    import dataclasses

    from learn.checkpoint import dataset_fingerprint
    from learn.data import load_frames, prepare
    from learn.policies import build_policy
    from learn.recipes import recipe
    from learn.train import fit

    rec = recipe(kind)
    n = steps or rec.train.steps
    pcfg, tcfg = rec.policy, dataclasses.replace(rec.train, steps=n, eval_every=n, log_every=100)
    frames = load_frames(dataset)
    split = prepare(frames, pcfg, tcfg.val_fraction, tcfg.seed)
    t0 = time.perf_counter()
    policy = build_policy(pcfg, frames.layout.obs_dim, frames.layout.action_dim, seed=tcfg.seed)
    res = fit(policy, split.train, split.val, tcfg, fingerprint=dataset_fingerprint(dataset))
    wall = time.perf_counter() - t0
    return res, wall


def eval_speed(args, root: Path) -> dict:
    from learn.evaluate import evaluate, serial_eval

    ds = demos(40, root)
    res, _ = train("bc_mlp", ds, 600, steps=1000)
    policy = res.trained_policy()
    n = args.eval_episodes
    # the same world count first: the jitted gate, draws and deploy tick compile per world count
    evaluate(policy, "lift-cube", episodes=n, num_envs=min(n, 64), seed=0)
    t0 = time.perf_counter()
    batched = evaluate(policy, "lift-cube", episodes=n, num_envs=min(n, 64), seed=1000)
    t_batched = time.perf_counter() - t0
    serial_n = max(8, n // 4)                       # the serial loop is slow: time fewer, report per episode
    serial_eval(policy, "lift-cube", episodes=1, seed=0)
    t0 = time.perf_counter()
    serial = serial_eval(policy, "lift-cube", episodes=serial_n, seed=1000)
    t_serial = time.perf_counter() - t0
    eb, es = n / t_batched, serial_n / t_serial
    return {"episodes": n, "batched_worlds": min(n, 64), "batched_episodes_per_s": eb,
            "batched_ticks": batched.timing["ticks"], "batched_mean_steps": float(np.mean(
                [e.steps for e in batched.episodes])), "serial_ticks": serial.timing["ticks"],
            "serial_ms_per_tick": 1e3 * t_serial / serial.timing["ticks"],
            "batched_success": batched.success_rate, "serial_episodes": serial_n,
            "serial_episodes_per_s": es, "serial_success": serial.success_rate, "speedup": eb / es}


def success(args, root: Path) -> dict:
    from learn.evaluate import evaluate

    ds = demos(args.demos, root)
    out = {"demos": args.demos, "episodes": args.episodes}
    for kind in args.policies:
        res, wall = train(kind, ds, args.budget_s)
        t0 = time.perf_counter()
        ev = evaluate(res.trained_policy(), "lift-cube", episodes=args.episodes, split="test")
        out[kind] = {"train_wall_s": wall, "steps": res.steps, "steps_per_s": res.steps_per_s,
                     "compile_s": res.compile_s, "final_loss": res.history[-1]["loss"],
                     "success_rate": ev.success_rate, "wilson95": list(ev.wilson),
                     "eval_s": time.perf_counter() - t0, "within_budget": wall <= args.budget_s}
        print(f"# {kind}: {ev.successes}/{ev.n} ({ev.success_rate:.0%}) after {res.steps} steps in "
              f"{wall:.0f} s", file=sys.stderr)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("speed", "eval", "success", "all"), default="all")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--chunk", type=int, default=20)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3, help="speed: alternating ours/lerobot rounds (median)")
    ap.add_argument("--eval-episodes", type=int, default=64)
    ap.add_argument("--demos", type=int, default=100)
    ap.add_argument("--budget-s", type=float, default=600.0)
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--policies", nargs="+", choices=tuple(RECIPES), default=list(RECIPES))
    ap.add_argument("--workdir", default=None, help="keep demos here between runs (default: a temp folder)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    root = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="bench-learn-"))
    root.mkdir(parents=True, exist_ok=True)
    report = {}
    if args.part in ("speed", "all"):
        report["speed"] = act_speed(args)
    if args.part in ("eval", "all"):
        report["eval"] = eval_speed(args, root)
    if args.part in ("success", "all"):
        report["success"] = success(args, root)
    if args.json:
        print(json.dumps(report, indent=1))
        return
    if "speed" in report:
        s = report["speed"]
        print(f"ACT train steps/s, batch {s['batch']}, chunk {s['chunk']}, dim {s['dim_model']}, "
              f"{s['threads']} threads")
        print("| variant | ours | compile | lerobot (torch) | warm-up | ratio |")
        print("|---|---|---|---|---|---|")
        for name in ("no_vae", "vae"):
            r = s[name]
            lr = r["lerobot"] or {}
            print(f"| {name} | {r['ours']['steps_per_s']:.1f} | {r['ours']['compile_s']:.1f} s | "
                  f"{lr.get('steps_per_s', float('nan')):.1f} | {lr.get('warmup_s', float('nan')):.1f} s | "
                  f"{r['ratio'] or float('nan'):.2f}x |")
    if "eval" in report:
        e = report["eval"]
        print(f"\neval lift-cube: batched {e['batched_worlds']} worlds {e['batched_episodes_per_s']:.2f} "
              f"episodes/s (success {e['batched_success']:.0%}), serial {e['serial_episodes_per_s']:.3f} "
              f"episodes/s (success {e['serial_success']:.0%}): {e['speedup']:.1f}x")
    if "success" in report:
        r = report["success"]
        print(f"\nlift-cube, {r['demos']} demos, {r['episodes']} held-out episodes")
        print("| policy | steps | train wall | compile | final loss | success | Wilson 95% |")
        print("|---|---|---|---|---|---|---|")
        for kind in RECIPES:
            if kind in r:
                k = r[kind]
                lo, hi = k["wilson95"]
                print(f"| {kind} | {k['steps']} | {k['train_wall_s']:.0f} s | {k['compile_s']:.1f} s | "
                      f"{k['final_loss']:.4f} | {k['success_rate']:.0%} | [{lo:.2f}, {hi:.2f}] |")


if __name__ == "__main__":
    main()

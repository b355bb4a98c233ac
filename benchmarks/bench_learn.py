"""Learning benchmarks, side by side with their references.

    python benchmarks/bench_learn.py [--part speed|eval|success|all] [--json]
        [--batch 64] [--steps 50] [--rounds 3] [--rows ...] [--images] [--image-steps 3]  # speed
        [--eval-episodes 64]                              # eval: batched vs serial episodes/s
        [--demos 100] [--budget-s 600] [--episodes 100]   # success: train + held-out closed loop
        [--policies bc_mlp act diffusion]

Parts:
- ``speed``: training steps/s of our ACT (with and without the CVAE) and diffusion policy (UNet)
  against lerobot's own (torch on the CPU, run in the lerobot venv that ``.ci/lerobot_compat.sh``
  builds), like for like: lerobot's config is derived from ours (``benchmarks/lerobot/like_for_like.py``:
  every size read from our config objects, every remaining difference listed and printed with both
  full configurations), the same batch, inputs (joint state + prop pose -> action chunk) and thread
  count, alternating ``--rounds`` times with the order swapped each round (medians reported, with
  every run). lerobot runs with ``OMP_WAIT_POLICY=PASSIVE`` unless set: torch's spinning OpenMP
  threads collapse on a loaded machine (0.07 vs 12 steps/s measured), which would flatter us.
  Compile (ours) / warm-up (theirs) is reported apart from the timed steps. ``--images``
  adds the ResNet-18 rows (96x96 front + wrist cameras, same batch); our side of them is skipped,
  with the reason printed, while our image encoders are missing. Target >= 2x on every row.
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
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
#: lerobot's venv (.ci/lerobot_compat.sh builds it); ``--lerobot-python`` overrides.
LEROBOT_PY = ROOT / ".venv-lerobot" / "bin" / "python"

#: The policy kinds of the success benchmark; each trains with its recipe (learn.recipes.recipe(kind)).
RECIPES = ("bc_mlp", "act", "diffusion")


def _threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


# ---- speed: ACT and diffusion vs lerobot's ----------------------------------------------------------
#: The speed rows: (policy kind, CVAE, cameras). Our configs come from RECIPES (what the success part
#: trains); diffusion with the UNet denoiser, lerobot's only one. lerobot's side is derived from them.
SPEED_ROWS = {"act": ("act", False, False), "act_vae": ("act", True, False),
              "diffusion": ("diffusion", False, False), "act_images": ("act", False, True),
              "diffusion_images": ("diffusion", False, True)}


def speed_configs(row: str, batch: int, vision_norm: str | None = None):
    """(our policy config, our train config) of a speed row, from RECIPES; the image rows with the
    ResNet-18 at its own width where our configs have image encoders (its norm ``vision_norm``
    when given, else the recipe's)."""
    from dataclasses import replace

    from benchmarks.lerobot.like_for_like import with_resnet18
    from learn.recipes import recipe

    kind, vae, images = SPEED_ROWS[row]
    r = recipe(kind)
    pcfg = replace(r.policy, **({"use_vae": vae} if kind == "act" else {"denoiser": "unet"}))
    if images and vision_norm is not None:
        pcfg = replace(pcfg, vision_norm=vision_norm)
    return with_resnet18(pcfg) if images else pcfg, replace(r.train, batch_size=batch)


def _our_images_missing() -> str | None:
    """Why our side of the image rows cannot run here (None when learn/policies/vision.py exists)."""
    import importlib.util

    if importlib.util.find_spec("learn.policies.vision") is None:
        return ("our image encoders are not on this branch (no learn/policies/vision.py; they are "
                "written on branch `vision`)")
    return None


def _lerobot_run(spec: dict, steps: int, warmup: int, timeout_s: float) -> dict:
    """One timed run of lerobot's training step (its own venv) -> its JSON report or {"error": ...}."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
    cmd = [str(LEROBOT_PY), "-W", "ignore", str(ROOT / "benchmarks" / "lerobot" / "train_speed.py"),
           "--spec", f.name, "--steps", str(steps), "--warmup", str(warmup), "--threads", str(_threads())]
    # torch's OpenMP threads spin while waiting; on a loaded machine that collapses its step (measured
    # 0.07 steps/s spinning vs 12 passive, ACT at batch 64 under load 16 on 2 cores), so they yield.
    env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"lerobot's run took over {timeout_s:.0f} s"}
    finally:
        os.unlink(f.name)
    if run.returncode == 0:
        return {**json.loads(run.stdout.strip().splitlines()[-1]), "omp_wait_policy": env["OMP_WAIT_POLICY"]}
    return {"error": run.stderr.strip().splitlines()[-1] if run.stderr.strip() else "failed"}


class _FixedBatch:
    """The same random batch every step (as the lerobot side does)."""

    def __init__(self, batch):
        self.batch = batch

    def sample_batch(self, key, batch_size):
        return self.batch


def _ours_run(pcfg, tcfg, steps: int, spec: dict) -> dict:
    """One timed run of our training step (fit on a fixed random batch) on the spec's inputs: the
    observation is its vector features concatenated, its cameras our ``images`` (channels last)."""
    import dataclasses as dc

    from learn.policies import build_policy
    from learn.policies.base import Batch
    from learn.train import fit

    feats = spec["features"]
    obs_dim = sum(shape[0] for kind, shape in feats.values() if kind in ("STATE", "ENV"))
    action_dim = feats["action"][1][0]
    cams = [shape for kind, shape in feats.values() if kind == "VISUAL"]
    rng = np.random.default_rng(0)
    b, n_obs, chunk = tcfg.batch_size, pcfg.n_obs_steps, pcfg.chunk_size
    extra = {}
    if cams:
        _, h, w = cams[0]
        extra = {"image_shape": (len(cams), h, w)}
        images = rng.standard_normal((b, n_obs, len(cams), h, w, 3)).astype(np.float32)
    policy = build_policy(pcfg, obs_dim, action_dim, seed=tcfg.seed, **extra)
    fixed = Batch(rng.standard_normal((b, n_obs, obs_dim)).astype(np.float32), np.ones((b, n_obs), bool),
                  rng.standard_normal((b, chunk, action_dim)).astype(np.float32), np.ones((b, chunk), bool),
                  **({"images": images} if cams else {}))
    res = fit(policy, _FixedBatch(fixed), None,
              dc.replace(tcfg, steps=steps, eval_every=steps, log_every=steps))
    import jax
    from flax import nnx

    params = sum(int(x.size) for x in jax.tree_util.tree_leaves(nnx.state(policy, nnx.Param)))
    return {"steps_per_s": res.steps_per_s, "compile_s": res.compile_s, "steps": steps, "params": params}


def _median_of(runs: list[dict]) -> dict | None:
    ok = [r for r in runs if "steps_per_s" in r]
    if not ok:
        return runs[-1] if runs else None
    return {**ok[0], "steps_per_s": float(np.median([r["steps_per_s"] for r in ok])),
            "runs": [r["steps_per_s"] for r in ok]}


def _round_ratios(ours_runs: list[dict], their_runs: list[dict]) -> list[float]:
    """ours / lerobot per alternating round (the pair that saw the same load), rounds where both ran."""
    return [o["steps_per_s"] / t["steps_per_s"] for o, t in zip(ours_runs, their_runs, strict=False)
            if "steps_per_s" in o and "steps_per_s" in t]


def train_speed(args) -> dict:
    """Training steps/s, ours vs lerobot's, per row of ``args.rows`` (alternating rounds, medians)."""
    import jax

    from benchmarks.lerobot.like_for_like import CAMERAS, differences, spec_for
    from learn.config import config_to_dict

    out = {"batch": args.batch, "threads": _threads(), "rounds": args.rounds, "jax": jax.__version__,
           "lerobot_python": str(LEROBOT_PY) if LEROBOT_PY.exists() else None}
    for row in args.rows:
        kind, _, images = SPEED_ROWS[row]
        pcfg, tcfg = speed_configs(row, args.batch, args.vision_norm)
        cams = CAMERAS if images else ()
        spec = spec_for(pcfg, tcfg, images=cams)
        steps, their_steps = ((args.image_steps, args.image_steps) if images else
                              (args.steps, min(args.steps, 30)))
        skip = _our_images_missing() if images else None
        ours_runs, their_runs = [], []
        for r in range(args.rounds):               # alternate (and swap the order), so both see the same load
            sides = ["ours", "lerobot"] if r % 2 == 0 else ["lerobot", "ours"]
            for side in sides:
                if side == "ours" and skip is None:
                    ours_runs.append(_ours_run(pcfg, tcfg, steps, spec))
                elif side == "lerobot" and LEROBOT_PY.exists():
                    their_runs.append(_lerobot_run(spec, their_steps, 1 if images else 3,
                                                   args.lerobot_timeout))
            print(f"# {row} round {r + 1}: ours {ours_runs[-1]['steps_per_s'] if ours_runs else skip}, "
                  f"lerobot {their_runs[-1].get('steps_per_s', their_runs[-1]) if their_runs else None}",
                  file=sys.stderr)
        ours = _median_of(ours_runs)
        if ours is not None:
            ours["compile_s"] = ours_runs[0]["compile_s"]  # the later rounds reuse the compiled step
        theirs = _median_of(their_runs)
        lerobot_config = (theirs or {}).pop("config", None)
        ratio = (ours["steps_per_s"] / theirs["steps_per_s"]
                 if ours and theirs and "steps_per_s" in theirs else None)
        out[row] = {"ours": ours or {"skipped": skip}, "lerobot": theirs, "ratio": ratio,
                    "round_ratios": _round_ratios(ours_runs, their_runs),
                    "ours_config": config_to_dict(pcfg), "ours_train": dataclasses.asdict(tcfg),
                    "lerobot_spec": spec, "lerobot_config": lerobot_config,
                    "differences": differences(pcfg, tcfg, cams)}
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


def print_speed(s: dict) -> None:
    """Both configurations and the differences per row, then the table."""
    for row in s:
        if isinstance(s[row], dict) and "ours_config" in s[row]:
            r = s[row]
            print(f"## {row}")
            print(f"ours: {json.dumps(r['ours_config'], sort_keys=True)}")
            print(f"ours (train): {json.dumps(r['ours_train'], sort_keys=True)}")
            print(f"lerobot spec: {json.dumps(r['lerobot_spec'], sort_keys=True)}")
            print(f"lerobot as built: {json.dumps(r['lerobot_config'], sort_keys=True)}")
            print("remaining differences:")
            print("\n".join(f"  - {d}" for d in r["differences"]))
    print(f"\ntrain steps/s, batch {s['batch']}, {s['threads']} threads, {s['rounds']} alternating rounds "
          "(median; every run in brackets)")
    print("| row | params ours / lerobot | ours | compile | lerobot (torch) | warm-up | ratio of medians | "
          "per round |")
    print("|---|---|---|---|---|---|---|---|")
    nan = float("nan")

    def runs(side):
        return ", ".join(f"{x:.3g}" for x in side.get("runs", []))

    for row in s:
        if not (isinstance(s[row], dict) and "ours_config" in s[row]):
            continue
        r = s[row]
        o, lr = r["ours"] or {}, r["lerobot"] or {}
        ours = (f"{o['steps_per_s']:.3g} ({runs(o)})" if "steps_per_s" in o else
                f"skipped: {o.get('skipped')}")
        theirs = (f"{lr['steps_per_s']:.3g} ({runs(lr)})" if "steps_per_s" in lr else
                  f"not run: {lr.get('error', 'no lerobot venv')}")
        print(f"| {row} | {o.get('params', '-')} / {lr.get('params', '-')} | {ours} | "
              f"{o.get('compile_s', nan):.1f} s | {theirs} | "
              f"{lr.get('warmup_s', nan):.1f} s | {r['ratio'] or nan:.2f}x | "
              f"{', '.join(f'{x:.2f}x' for x in r.get('round_ratios', []))} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("speed", "eval", "success", "all"), default="all")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=50, help="speed: timed steps of ours (lerobot: at most 30)")
    ap.add_argument("--rounds", type=int, default=3, help="speed: alternating ours/lerobot rounds (median)")
    ap.add_argument("--rows", nargs="+", choices=tuple(SPEED_ROWS), default=None,
                    help="speed: the rows to run (default: act act_vae diffusion, + the image rows with "
                    "--images)")
    ap.add_argument("--images", action="store_true", help="speed: add the ResNet-18 96x96 image rows")
    ap.add_argument("--image-steps", type=int, default=3, help="speed: timed steps per image run (each side)")
    ap.add_argument("--vision-norm", choices=("group", "affine", "frozen"), default=None,
                    help="speed: our ResNet-18 trunk's norm in the image rows (default: the recipe's)")
    ap.add_argument("--lerobot-python", default=None, help=f"speed: lerobot's python (default {LEROBOT_PY})")
    ap.add_argument("--lerobot-timeout", type=float, default=1200.0, help="speed: seconds per lerobot run")
    ap.add_argument("--eval-episodes", type=int, default=64)
    ap.add_argument("--demos", type=int, default=100)
    ap.add_argument("--budget-s", type=float, default=600.0)
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--policies", nargs="+", choices=tuple(RECIPES), default=list(RECIPES))
    ap.add_argument("--workdir", default=None, help="keep demos here between runs (default: a temp folder)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.lerobot_python:
        globals()["LEROBOT_PY"] = Path(args.lerobot_python)
    if args.rows is None:
        args.rows = [r for r, (_, _, img) in SPEED_ROWS.items() if args.images or not img]

    root = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="bench-learn-"))
    root.mkdir(parents=True, exist_ok=True)
    report = {}
    if args.part in ("speed", "all"):
        report["speed"] = train_speed(args)
    if args.part in ("eval", "all"):
        report["eval"] = eval_speed(args, root)
    if args.part in ("success", "all"):
        report["success"] = success(args, root)
    if args.json:
        print(json.dumps(report, indent=1))
        return
    if "speed" in report:
        print_speed(report["speed"])
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

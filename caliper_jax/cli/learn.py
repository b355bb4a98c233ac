"""``caliper learn``: train policies on LeRobot datasets, evaluate them closed loop on the task zoo,
and judge them (eval E-codes, latency L-codes, debugger P-codes, the autopsy).

Exit codes: 0, or 1 when a report holds an Error-severity finding (the verdict commands gate, so CI
can call them); bad input is the usual one-line error with exit 2.
"""
from __future__ import annotations

import argparse
from contextlib import nullcontext

from caliper_jax.cli import runtime
from caliper_jax.cli.common import (
    at_least,
    budget,
    emit,
    int_fields_within,
    memory_budget,
    output_dir,
    output_file,
    positive,
    ray_arg,
    ray_ready,
    seed,
)
from learn.features import IMAGE_BUDGET_MB, OBS_SETS

POLICY_KINDS = ("bc_mlp", "act", "diffusion")
SPLIT_CHOICES = ("train", "val", "test")       # learn.protocol.SPLIT_NAMES (not imported: no JAX at parse)
RL_ALGOS = ("ppo", "sac")


def register(subparsers) -> None:
    learn = subparsers.add_parser("learn", help="policies: train, eval, sweep, profile, debug, autopsy")
    sub = learn.add_subparsers(dest="learn_command", metavar="ACTION")
    sub.required = True

    def add(name: str, handler, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--json", action="store_true", help="print the report as JSON")
        p.set_defaults(func=handler)
        return p

    p = add("train", cmd_train, "train a policy on a LeRobot v3 dataset (orbax checkpoints in --out)")
    p.add_argument("dataset", metavar="DATASET", help="a LeRobot v3 dataset folder")
    p.add_argument("--policy", choices=POLICY_KINDS, default=None,
                   help="policy kind (default bc_mlp, or the --recipe's); its defaults are the kind's recipe")
    p.add_argument("--recipe", default=None, metavar="NAME",
                   help="start from a named recipe of learn.recipes (bc-lift-cube, act-lift-cube, "
                        "diffusion-lift-cube, demo-full); default: the --policy kind's")
    p.add_argument("--out", required=True, metavar="DIR", help="a new folder for the run's checkpoints")
    p.add_argument("--steps", type=int, default=None, help="optimiser updates (default: the train config's)")
    p.add_argument("--batch-size", type=int, default=None, help="batch size (default 64)")
    p.add_argument("--lr", type=float, default=None, help="peak learning rate")
    p.add_argument("--config", metavar="JSON", default=None,
                   help='policy config overrides as JSON, e.g. \'{"chunk_size": 10, "n_action_steps": 5}\'')
    p.add_argument("--train-config", metavar="JSON", default=None,
                   help='train config overrides as JSON, e.g. \'{"warmup": 50, "ema_decay": 0.995}\'')
    p.add_argument("--val-fraction", type=float, default=None, help="episodes held out for validation")
    p.add_argument("--seed", type=int, default=0, help="weights, split and batches (default 0)")
    p.add_argument("--obs", choices=OBS_SETS, default="state",
                   help="observation set: state (joint state + prop poses), proprio+images (joint state "
                        "+ the dataset's cameras), privileged (both) (default state)")
    p.add_argument("--image-budget-mb", type=float, default=IMAGE_BUDGET_MB, metavar="MIB",
                   help=f"memory for decoded camera frames (default {IMAGE_BUDGET_MB})")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --out from its newest checkpoint")
    p.add_argument("--png", metavar="FILE.png", help="plot the loss curves (needs matplotlib)")
    d = p.add_argument_group("several processes / hosts (jax.distributed; docs/cluster.md)")
    d.add_argument("--distributed", action="store_true",
                   help="train over the global mesh of every process's devices (checkpoints written by "
                        "process 0)")
    d.add_argument("--coordinator", metavar="HOST:PORT", default=None,
                   help="process 0's address (default: $JAX_COORDINATOR_ADDRESS)")
    d.add_argument("--num-processes", type=int, default=None,
                   help="processes in the run ($JAX_NUM_PROCESSES)")
    d.add_argument("--process-id", type=int, default=None, help="this process, 0..N-1 ($JAX_PROCESS_ID)")
    d.add_argument("--coordinator-timeout", type=int, default=60, metavar="S",
                   help="seconds to wait for every process to join (default 60)")

    def episodes_args(p, default: int = 20) -> None:
        p.add_argument("--episodes", type=int, default=default, help=f"episodes (default {default})")
        p.add_argument("--worlds", type=int, default=None, help="parallel worlds (default min(episodes, 64))")
        p.add_argument("--engine", choices=("mujoco", "mjx"), default="mujoco",
                       help="mujoco: MuJoCo's C code on threads (default); mjx: MJX (an accelerator)")
        p.add_argument("--seed", type=int, default=0, help="randomisation seed (default 0)")

    p = add("rl", cmd_rl, "train a policy by reinforcement learning on a task (PPO or SAC), then a verdict")
    p.add_argument("task", metavar="TASK", help="a zoo task or a task file (with a dense 'reward' block)")
    p.add_argument("--algo", choices=RL_ALGOS, default="ppo", help="algorithm (default ppo)")
    p.add_argument("--engine", choices=("mujoco", "mjx"), default="mujoco",
                   help="mujoco: MuJoCo's C batch + one jitted policy call per tick (default); mjx: "
                        "the whole batch as one lax.scan (an accelerator)")
    p.add_argument("--envs", type=int, default=None, help="parallel worlds (default: ppo 64, sac 32)")
    p.add_argument("--steps", type=int, default=None,
                   help="environment steps of the run (default: ppo 1000000, sac 200000)")
    p.add_argument("--out", required=True, metavar="DIR", help="run folder: checkpoints, scalars, curve.png")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--config", metavar="JSON", default=None,
                   help='algorithm config overrides as JSON, e.g. \'{"lr": 1e-3, "rollout": 64}\'')
    p.add_argument("--seed", type=int, default=0, help="weights, exploration and training worlds (default 0)")
    p.add_argument("--select-episodes", type=int, default=None, metavar="N",
                   help="keep the best deterministic actor by success on N episodes of val seed 1000, "
                        "judged at segment ends (default: the task's RL recipe, else 0: the last actor)")
    p.add_argument("--no-recipe", dest="recipe", action="store_false",
                   help="start from the algorithm's defaults, not the task's RL recipe (learn.recipes)")
    p.add_argument("--stop-success", type=float, default=None, metavar="RATE",
                   help="stop at the end of a segment whose training episodes succeed this often")
    p.add_argument("--eval-episodes", type=int, default=50,
                   help="test-seed episodes of the verdict (default 50; 0: no verdict)")
    p.add_argument("--eval-seed", type=int, default=1_000_003,
                   help="test seed (default 1000003, unseen in training)")
    p.add_argument("--target", type=float, default=None,
                   help="success rate the verdict asks for (default: the task's RL recipe, else 0.8)")

    p = add("eval", cmd_eval, "closed-loop success of a policy on a task: Wilson 95%% interval, E001-E003")
    p.add_argument("policy", metavar="CHECKPOINT", help="a checkpoint or run folder, or 'scripted'")
    p.add_argument("--task", required=True, help="a zoo task name or a task file")
    episodes_args(p)
    p.set_defaults(seed=None)
    p.add_argument("--split", choices=SPLIT_CHOICES, default=None,
                   help="protocol seed split (docs/learn.md): test = reported success, val = tuning; "
                        "--seed, if given, must lie in it (default: --seed, else seed 0, a train seed)")
    p.add_argument("--no-randomize", dest="randomize", action="store_false",
                   help="every episode starts from the task file's nominal scene")
    ray_arg(p, "blocks of worlds")

    p = add("sweep", cmd_sweep, "the protocol: policies (x training seeds) x tasks x randomisation levels x "
                                "eval seeds, ranked, with a table of mean +- spread and Wilson intervals")
    p.add_argument("policies", metavar="CHECKPOINT", nargs="+",
                   help="checkpoints / run folders / 'scripted'; NAME=RUN1,RUN2,RUN3 groups the runs of one "
                        "recipe trained with different seeds (the table's mean +- spread)")
    p.add_argument("--task", dest="tasks", action="append", required=True, help="a task (repeatable)")
    p.add_argument("--levels", nargs="+", choices=("none", "default", "wide"), default=["none", "default"],
                   help="randomisation levels (default: none default)")
    p.add_argument("--seeds", nargs="+", type=int, default=None,
                   help="evaluation seeds (default: the --split's first, else 0)")
    p.add_argument("--split", choices=SPLIT_CHOICES, default=None,
                   help="protocol seed split of the evaluation seeds (test: the reported figures)")
    p.add_argument("--table", metavar="FILE.json", default=None,
                   help="write the protocol table (per policy x task x level: mean +- spread over training "
                        "runs, Wilson 95%% on distinct episodes) as JSON")
    p.add_argument("--episodes", type=int, default=20, help="episodes per run (default 20)")
    p.add_argument("--worlds", type=int, default=None, help="parallel worlds")
    p.add_argument("--png", metavar="FILE.png", help="plot success per randomisation level")
    ray_arg(p, "cells")

    p = add("profile", cmd_profile, "deploy-loop latency per tick: L001-L003")
    p.add_argument("policy", metavar="CHECKPOINT")
    p.add_argument("--task", required=True)
    p.add_argument("--ticks", type=int, default=200, help="control ticks timed (default 200)")
    p.add_argument("--worlds", type=int, default=1, help="worlds stepped together (default 1)")
    p.add_argument("--seed", type=int, default=0)

    p = add("debug", cmd_debug, "why a policy does nothing: P001-P008")
    p.add_argument("policy", metavar="CHECKPOINT", help="a checkpoint, run folder or .safetensors export")
    p.add_argument("--dataset", default=None, help="the dataset it was trained on (enables P002, P004, P005)")
    p.add_argument("--task", default=None,
                   help="a task whose robot's joint limits enable P003 (and, without --dataset, that renders "
                        "the camera frames of a policy that sees)")
    p.add_argument("--probes", type=int, default=32, help="probe observations (default 32)")
    p.add_argument("--seed", type=int, default=0)

    p = add("autopsy", cmd_autopsy, "dataset doctor + debugger + eval + latency: one verdict")
    p.add_argument("policy", metavar="CHECKPOINT")
    p.add_argument("dataset", metavar="DATASET")
    p.add_argument("--task", default=None, help="a task to evaluate and profile on (enables E and L)")
    p.add_argument("--episodes", type=int, default=20, help="eval episodes (default 20)")
    p.add_argument("--seed", type=int, default=0)


# ---- shared -----------------------------------------------------------------------------------------
def _json_arg(text, flag: str) -> dict:
    import json

    from caliper_jax.errors import CaliperError

    if text is None:
        return {}
    from caliper_jax import limits

    limits.check_depth(text, flag)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CaliperError(f"{flag}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(value, dict):
        raise CaliperError(f"{flag}: expected a JSON object, got {type(value).__name__}")
    return value


def load_policy(name: str):
    """'scripted' or the TrainedPolicy of a checkpoint / run folder."""
    if name == "scripted":
        return "scripted"
    from learn.checkpoint import load_checkpoint, resolve_checkpoint

    path = resolve_checkpoint(name)
    policy = load_checkpoint(path).policy
    require_finite_weights(policy, path)
    return policy


def require_finite_weights(policy, path) -> None:
    """A checkpoint whose weights hold NaN or inf is refused (it would "run" and score garbage)."""
    import numpy as np

    from caliper_jax.errors import CaliperError
    from learn.checkpoint import flatten_tree, model_params

    model = getattr(policy, "model", policy)
    for key, leaf in flatten_tree(model_params(model)).items():
        a = np.asarray(leaf)
        if a.dtype.kind in "fc" and not np.all(np.isfinite(a)):
            raise CaliperError(f"{path}: weight {key} holds NaN or inf (a diverged training run?); refusing "
                               "to use this checkpoint")


def _bar(total: int, desc: str, unit: str):
    from caliper_jax import progress

    bar = progress.bar(total, desc, unit=unit)
    return bar, (lambda n, *_: bar.update(n - bar.n))


def _findings_text(findings) -> str:
    return "".join(f"\n  [{f.code}] ({f.severity.lower()}) {f.message}\n         fix: {f.hint}"
                   for f in findings)


def _gate(findings) -> int:
    return 1 if any(f.severity == "Error" for f in findings) else 0


# ---- train ------------------------------------------------------------------------------------------
def cmd_train(args) -> int:
    from pathlib import Path

    from caliper_jax.errors import CaliperError
    from learn.config import config_from_dict, config_to_dict, train_config_from_dict
    from learn.data import load_frames, prepare
    from learn.policies import build_policy
    from learn.recipes import recipe
    from learn.train import fit

    rec = recipe(args.recipe or args.policy or "bc_mlp")
    if args.recipe and args.policy and rec.policy.kind != args.policy:
        raise CaliperError(f"--recipe {args.recipe} trains a {rec.policy.kind} policy, not --policy "
                           f"{args.policy}")
    args.policy = rec.policy.kind

    out = Path(args.out)
    if out.exists() and any(out.iterdir()) and not args.resume:
        raise CaliperError(f"--out {out}: already exists and is not empty (use --resume to continue that "
                           f"run)")
    output_dir(out, "--out", empty=not args.resume)          # writable: checked before any work
    if args.png:
        output_file(args.png, "--png")
    policy_cfg = config_from_dict({**config_to_dict(rec.policy),
                                   **_json_arg(args.config, "--config"), "kind": args.policy}, "--config")
    overrides = _json_arg(args.train_config, "--train-config")
    if args.lr is not None:
        positive(args.lr, "--lr")
        if args.lr > 3.0e38:     # the weights are float32: a larger rate is inf before the first step
            raise CaliperError(f"--lr {args.lr:g} is not finite in float32 (at most 3e38)")
    for flag, key in (("steps", "steps"), ("batch_size", "batch_size"), ("lr", "lr"),
                      ("val_fraction", "val_fraction")):
        if getattr(args, flag) is not None:
            overrides[key] = getattr(args, flag)
    overrides.setdefault("seed", seed(args.seed))
    train_cfg = train_config_from_dict({**config_to_dict(rec.train), **overrides}, "--train-config")
    budget(train_cfg.steps, "--steps (optimiser updates)")
    budget(train_cfg.batch_size, "--batch-size", "batch")
    _check_policy_sizes(policy_cfg, train_cfg)
    rank = _join_run(args)
    from learn.checkpoint import dataset_fingerprint

    frames = load_frames(args.dataset, obs_set=args.obs, image_budget_mb=positive(args.image_budget_mb,
                                                                                  "--image-budget-mb"))
    split = prepare(frames, policy_cfg, train_cfg.val_fraction, train_cfg.seed)
    policy = build_policy(policy_cfg, frames.layout.obs_dim, frames.layout.action_dim, seed=train_cfg.seed,
                          image_shape=frames.layout.image_shape)
    from caliper_jax import progress

    bar = progress.bar(train_cfg.steps, f"train {args.policy}", unit="step")

    def tick(step, row):
        bar.update(step - bar.n)
        bar.set_postfix(loss=f"{row['loss']:.4f}", steps_s=f"{row.get('steps_per_s', 0):.0f}")

    # a run that fails (diverges, is interrupted) leaves no new --out behind; --resume keeps its folder
    with bar, runtime.writing(), runtime.partial_output(out) if not args.resume else nullcontext():
        res = fit(policy, split.train, split.val, train_cfg, progress=tick, checkpoint_dir=out,
                  resume=out if args.resume else None, fingerprint=dataset_fingerprint(args.dataset))
    if rank is not None:
        from learn.distributed import barrier

        barrier("caliper-train-end")        # process 0 has written the last checkpoint
    hist = res.history
    report = {"dataset": str(args.dataset), "recipe": rec.name, "policy": config_to_dict(policy_cfg),
              "train": config_to_dict(train_cfg),
              "out": str(out), "checkpoint": str(res.checkpoint), "steps": res.steps,
              "train_episodes": len(split.train_ids), "val_episodes": len(split.val_ids),
              "frames": frames.num_frames, "obs_dim": frames.layout.obs_dim, "obs_set": frames.layout.obs_set,
              "cameras": [c.to_dict() for c in frames.layout.cameras],
              "action_dim": frames.layout.action_dim, "fps": frames.layout.fps,
              "final_loss": hist[-1]["loss"] if hist else None,
              "final_val_loss": next((r["val_loss"] for r in reversed(hist) if "val_loss" in r), None),
              "history": hist, "timing": {"compile_s": res.compile_s, "run_s": res.run_s,
                                          "steps_per_s": res.steps_per_s}, "devices": res.devices}
    if rank is not None:
        import jax

        report["process"] = {"id": rank, "count": jax.process_count()}
    note = None
    if args.png:
        with runtime.writing(), runtime.partial_output(args.png):
            note = _plot_losses(args.png, res, args.policy)
        report["png"] = None if note else str(args.png)
    val = report["final_val_loss"]
    text = (f"{args.policy} on {args.dataset}: {res.steps} steps, loss {report['final_loss']:.4f}"
            + (f", val loss {val:.4f}" if val is not None else "")
            + f"\n  {res.steps_per_s:.1f} steps/s (compile {res.compile_s:.1f} s) on {res.devices} device(s)"
            + f"\n  checkpoint: {res.checkpoint}"
            + (f"\n  {note}" if note else (f"\n  plot: {args.png}" if args.png else "")))
    emit(args, report, text)
    return 0


#: activations held per (batch row x chunk step x width) in a forward and backward pass, roughly
ACTIVATION_FACTOR = 16


def _check_policy_sizes(policy_cfg, train_cfg) -> None:
    """Every size in the policy config (chunk_size, widths, layers) within the batch budget, and
    the activations of one step (batch x chunk x widest layer x 4 bytes x ACTIVATION_FACTOR)
    within the memory budget -- before the dataset is read or anything is compiled."""
    import dataclasses

    int_fields_within(policy_cfg, "--config")
    widths = [1]
    for f in dataclasses.fields(policy_cfg):
        value = getattr(policy_cfg, f.name)
        for v in value if isinstance(value, tuple) else (value,):
            if isinstance(v, int) and not isinstance(v, bool) and f.name not in ("seed",):
                widths.append(v)
    chunk = max(int(getattr(policy_cfg, "chunk_size", 1) or 1), 1)
    memory_budget(float(train_cfg.batch_size) * chunk * max(widths) * 4 * ACTIVATION_FACTOR,
                  f"--batch-size {train_cfg.batch_size} x --config chunk_size {chunk} x widest layer "
                  f"{max(widths)} (activations of one step)")
def _join_run(args):
    """This process's id in a --distributed run (joined here, before any device is used), or None."""
    if not args.distributed:
        for flag in ("coordinator", "num_processes", "process_id"):
            if getattr(args, flag) is not None:
                from caliper_jax.errors import CaliperError

                raise CaliperError(f"--{flag.replace('_', '-')} is for --distributed training; add "
                                   f"--distributed")
        return None
    import os
    import sys

    from learn.distributed import initialize

    # the collectives' native library (gloo) prints on fd 1: send that to stderr, keep stdout for the report
    sys.stdout.flush()
    report_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = os.fdopen(report_fd, "w", buffering=1)
    return initialize(args.coordinator, args.num_processes, args.process_id,
                      timeout_s=args.coordinator_timeout)[0]


def _plot_losses(path, res, kind: str):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return 'matplotlib is not installed (pip install "caliper-jax[plot]"); no plot written'
    fig, ax = plt.subplots(figsize=(7, 4))
    tr, va = res.losses, res.val_losses
    ax.plot(tr[:, 0], tr[:, 1], label="train")
    if len(va):
        ax.plot(va[:, 0], va[:, 1], "o-", label="validation")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title(f"{kind} training loss")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return None


# ---- eval and sweep ---------------------------------------------------------------------------------
def cmd_eval(args) -> int:
    from learn.evaluate import evaluate
    from tasks.schema import find_task, load_task

    args.seed = _eval_seed(args)             # --seed / --split first: that error is the cheapest
    task = load_task(find_task(args.task))
    episodes = budget(at_least(args.episodes, "--episodes"), "--episodes", "batch")
    worlds = None if args.worlds is None else budget(at_least(args.worlds, "--worlds"), "--worlds", "batch")
    policy = load_policy(args.policy)        # a missing checkpoint first: that error is cheap
    from caliper_jax.cli.task import require_runnable

    require_runnable(task)
    if args.ray is not None:
        return _eval_ray(args, task, episodes, worlds, policy)
    bar, tick = _bar(episodes, f"eval {task.name}", "episode")
    with bar:
        res = evaluate(policy, task, episodes=episodes, num_envs=worlds, seed=args.seed,
                       engine=args.engine, randomization="default" if args.randomize else None, progress=tick)
    report = res.to_dict()
    report["timing"] = dict(res.timing) if getattr(res, "timing", None) else {}
    emit(args, report, res.summary() + _findings_text(res.findings))
    return _gate(res.findings)


def _eval_seed(args) -> int:
    """--seed / --split -> the randomisation seed (learn.protocol.resolve_seed; one-line errors)."""
    from learn.protocol import resolve_seed

    value = None if args.seed is None else seed(args.seed)
    return resolve_seed(value, args.split)


def _eval_ray(args, task, episodes, worlds, policy) -> int:
    from learn.cluster import ray_evaluate

    ray_ready(args.engine)
    bar, tick = _bar(1, f"eval {task.name} on Ray", "block")
    with bar:
        res = ray_evaluate(args.policy, task, address=args.ray,
                           episodes=episodes, num_envs=worlds, seed=args.seed,
                           randomization="default" if args.randomize else None,
                           progress=lambda n, total: (setattr(bar, "total", total), bar.update(n - bar.n)))
    report = res.to_dict()
    report["timing"] = dict(res.timing)
    emit(args, report, res.summary() + _findings_text(res.findings))
    return _gate(res.findings)
def cmd_rl(args) -> int:
    from pathlib import Path

    from caliper_jax.errors import CaliperError
    from learn.rl.train import ALGORITHMS, train_rl

    overrides = _json_arg(args.config, "--config")
    if args.envs is not None:
        overrides["envs"] = budget(at_least(args.envs, "--envs"), "--envs", "batch")
    if args.steps is not None:
        overrides["steps"] = budget(at_least(args.steps, "--steps"), "--steps (environment steps)")
    overrides.setdefault("seed", seed(args.seed))
    from learn.recipes import rl_recipe

    episodes = at_least(args.eval_episodes, "--eval-episodes", 0)
    rec = rl_recipe(args.task, args.algo) if args.recipe else None
    if args.target is None:
        args.target = rec.target if rec else 0.8
    if not 0.0 <= args.target <= 1.0:
        raise CaliperError(f"--target must be a success rate in [0, 1], got {args.target}")
    if args.stop_success is not None and not 0.0 < args.stop_success <= 1.0:
        raise CaliperError(f"--stop-success must be in (0, 1], got {args.stop_success}")
    select = (rec.select_episodes if rec else 0) if args.select_episodes is None else \
        at_least(args.select_episodes, "--select-episodes", 0)
    Config = ALGORITHMS[args.algo].config
    cfg = Config.from_dict({**Config().to_dict(), **(rec.config if rec else {}), **overrides}, "--config")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CaliperError(f"--out {out}: exists and is not a folder")
    if out.exists() and any(out.iterdir()) and not args.resume:
        raise CaliperError(f"--out {out}: already exists and is not empty (use --resume to continue it)")
    from caliper_jax import progress

    bar = progress.bar(cfg.updates, f"rl {args.algo} {args.task}", unit="update")

    def tick(row):
        bar.update(row["update"] + 1 - bar.n)
        if row["return"] is not None:
            bar.set_postfix(ret=f"{row['return']:.1f}", success=f"{row['success']:.0%}",
                            steps_s=f"{row['steps_per_s']:.0f}")

    with bar, runtime.writing():
        res = train_rl(args.task, args.algo, cfg, engine=args.engine, out=out, resume=args.resume,
                       progress=tick, stop_success=args.stop_success, select_episodes=select,
                       select_every=rec.select_every if rec else 1)
    report = res.to_dict()
    report["recipe"] = rec.to_dict() if rec else None
    text = (f"{args.algo} on {res.task} ({res.engine}): {res.updates} updates, {res.env_steps} env steps in "
            f"{res.wall_s:.0f} s (compile {res.compile_s:.0f} s); checkpoint {res.checkpoint}")
    if rec is not None:
        text = f"recipe: learn.recipes RL_RECIPES[{args.task!r}, {args.algo!r}]\n" + text
    if res.selected:
        s = res.selected
        text += (f"\nselected: the actor of update {s['update']} ({s['env_steps']} env steps), "
                 f"{s['val_success']:.0%} on {s['episodes']} episodes of val seed {s['val_seed']}")
    gate = 0
    if episodes:
        from learn.evaluate import evaluate

        ev = evaluate(res.policy, res.task, episodes=episodes, seed=seed(args.eval_seed, "--eval-seed"))
        ok = ev.success_rate >= args.target
        gate = 0 if ok else 1
        report["verdict"] = {"success_rate": ev.success_rate, "successes": ev.successes, "episodes": ev.n,
                             "wilson95": list(ev.wilson), "eval_seed": args.eval_seed, "target": args.target,
                             "reached": ok}
        text += (f"\n{ev.summary()}\nverdict: {'REACHED' if ok else 'BELOW'} the target "
                 f"{args.target:.0%} on test seed {args.eval_seed}")
    if (out / "curve.png").is_file():
        report["curve"] = str(out / "curve.png")
        text += f"\nlearning curve: {out / 'curve.png'}"
    emit(args, report, text)
    return gate


def _policy_groups(specs) -> dict:
    """``CHECKPOINT`` / ``NAME=RUN1,RUN2`` arguments -> {name: [(sweep key, path)]}."""
    from caliper_jax.errors import CaliperError

    groups: dict = {}
    for spec in specs:
        name, sep, paths = spec.partition("=")
        paths = [p for p in paths.split(",")] if sep else [spec]
        if not name or any(not p for p in paths):
            raise CaliperError(f"policy {spec!r}: expected CHECKPOINT or NAME=RUN1,RUN2,...")
        if name in groups:
            raise CaliperError(f"policy {name!r} given twice")
        groups[name] = [(name if len(paths) == 1 else f"{name}[{i}]", p) for i, p in enumerate(paths)]
    return groups


def _sweep_seeds(args) -> list[int]:
    from learn.protocol import resolve_seed

    if args.seeds is None:
        return [resolve_seed(None, args.split)]
    return [resolve_seed(seed(s, "--seeds"), args.split) for s in args.seeds]


def cmd_sweep(args) -> int:
    import json

    from learn.evaluate import sweep
    from learn.sweep_table import plot_table, protocol_table, table_text

    episodes = budget(at_least(args.episodes, "--episodes"), "--episodes", "batch")
    if args.worlds is not None:
        budget(at_least(args.worlds, "--worlds"), "--worlds", "batch")
    groups = _policy_groups(args.policies)
    seeds = _sweep_seeds(args)
    n_runs = sum(len(v) for v in groups.values())
    runs = n_runs * len(args.tasks) * len(args.levels) * len(seeds)
    budget(float(runs) * episodes, "policies x --task x --levels x --seeds x --episodes (episodes)", "batch")
    for flag, path in (("--png", args.png), ("--table", args.table)):
        if path:
            output_file(path, flag)
    names = {key: load_policy(path) for members in groups.values() for key, path in members}
    levels = {name: name for name in args.levels}     # tasks.env_spec.randomization_preset names
    bar, tick = _bar(runs, "sweep", "run")
    if args.ray is not None:        # one Ray task per cell; checkpoints load on the workers, same paths
        from functools import partial

        from learn.cluster import ray_sweep, require_ray

        require_ray()
        sweep = partial(ray_sweep, address=args.ray)
        names = {key: path for members in groups.values() for key, path in members}
    with bar:
        res = sweep(names, args.tasks, randomization_levels=levels, seeds=tuple(seeds),
                    episodes=episodes, num_envs=args.worlds, progress=tick)
    table = protocol_table(res, {name: [k for k, _ in members] for name, members in groups.items()})
    from learn.protocol import split_of

    table["eval_seeds"], table["split"] = seeds, sorted({str(split_of(s)) for s in seeds})
    report = {**res.to_dict(), "table": table}
    lines = ["rank  policy                          success   wilson95        mean return"]
    for i, row in enumerate(res.ranking, 1):
        lo, hi = row["wilson95"]
        lines.append(f"{i:>4}  {row['name']:<30}  {row['successes']:>3}/{row['episodes']:<4} "
                     f"[{lo:.2f}, {hi:.2f}]   {row['mean_return']:.3f}")
    lines += ["", f"evaluation seeds {seeds} (split {', '.join(table['split'])}); Wilson on distinct "
                  f"episodes (N_eff)", *table_text(table)]
    if args.table:
        from pathlib import Path

        from caliper_jax.dataset.atomic import write_atomic

        with runtime.writing():
            write_atomic(Path(args.table), (json.dumps(table, indent=1, sort_keys=True) + "\n").encode())
        report["table_file"] = str(args.table)
        lines.append(f"table: {args.table}")
    note = None
    if args.png:
        with runtime.writing(), runtime.partial_output(args.png):
            note = plot_table(args.png, table)
        report["png"] = None if note else str(args.png)
    if note or args.png:
        lines.append(note or f"plot: {args.png}")
    emit(args, report, "\n".join(lines))
    return 0


# ---- verdicts ---------------------------------------------------------------------------------------
def cmd_profile(args) -> int:
    from learn.profile import profile_rollout

    ticks, worlds = at_least(args.ticks, "--ticks", 10), at_least(args.worlds, "--worlds")
    budget(worlds, "--worlds", "batch")
    budget(float(ticks) * worlds, f"--ticks {ticks} x --worlds {worlds}")
    rep = profile_rollout(load_policy(args.policy), args.task, ticks=ticks, num_envs=worlds,
                          seed=seed(args.seed))
    emit(args, rep.to_dict(), rep.render_text())
    return _gate(rep.findings)


def cmd_debug(args) -> int:
    from learn.checkpoint import resolve_checkpoint
    from learn.debug import analyze_policy

    probes = budget(at_least(args.probes, "--probes", 2), "--probes", "batch")
    limits = task = None
    if args.task is not None:
        from tasks.env import resolve_task
        from tasks.schema import find_task, load_task

        task = resolve_task(load_task(find_task(args.task)))
        limits = (task.model.qpos_lower, task.model.qpos_upper)
    target = args.policy if str(args.policy).endswith(".safetensors") else resolve_checkpoint(args.policy)
    findings = analyze_policy(target, args.dataset, robot_limits=limits,
                              probes=probes, seed=seed(args.seed), task=task)
    report = {"policy": str(target), "dataset": args.dataset, "findings": [f.to_dict() for f in findings]}
    text = f"policy debugger: {target}" + (_findings_text(findings) if findings else
                                           "\n  no findings: every reachable check passed")
    emit(args, report, text)
    return _gate(findings)


def cmd_autopsy(args) -> int:
    from learn.autopsy import autopsy
    from learn.checkpoint import resolve_checkpoint

    episodes = budget(at_least(args.episodes, "--episodes"), "--episodes", "batch")
    rep = autopsy(resolve_checkpoint(args.policy), args.dataset, task=args.task, episodes=episodes,
                  seed=seed(args.seed))
    emit(args, rep.to_dict(), rep.render_text())
    return rep.exit_code


# ---- caliper demo --full ----------------------------------------------------------------------------
#: ``caliper demo --full``: the learn.recipes recipe it trains (its task: ``task``), and the eval
FULL_DEMO = {"recipe": "demo-full", "task": "lift-cube", "worlds": 8, "eval_episodes": 32,
             "eval_split": "test"}


def full_demo(args) -> int:
    """load -> asset doctor -> scripted demonstrations -> dataset doctor -> train a small policy ->
    batched closed-loop eval on held-out seeds; one progress line per stage and a final verdict.
    Everything goes under ``--out`` (default: a temporary folder, removed at the end)."""
    import shutil
    import tempfile
    from pathlib import Path

    from caliper_jax import progress
    from caliper_jax.errors import CaliperError
    from learn.protocol import split_seeds
    from learn.recipes import recipe

    rec = recipe(FULL_DEMO["recipe"])
    cfg = {**FULL_DEMO, "demos": rec.demos, "eval_seed": split_seeds(FULL_DEMO["eval_split"])[0]}
    keep = args.out is not None
    if keep and Path(args.out).exists() and Path(args.out).is_dir() and any(Path(args.out).iterdir()):
        raise CaliperError(f"--out {args.out}: already exists and is not empty")
    if keep:
        output_dir(args.out, "--out")            # writable: checked before minutes of work
    root = Path(args.out) if keep else Path(tempfile.mkdtemp(prefix="caliper-demo-"))
    report, lines = {"task": cfg["task"], "out": str(root) if keep else None, "stages": {}}, []
    stages = report["stages"]
    try:
        with progress.stage("1/6 load and asset doctor"):
            from doctors.asset import diagnose
            from tasks.schema import find_task, load_task

            task = load_task(find_task(cfg["task"]))
            asset = diagnose(task.robot)
        stages["asset_doctor"] = {"robot": str(task.robot),
                                  "findings": [f.to_dict() for f in asset.findings]}
        lines.append(f"1 asset doctor   {task.robot.name}: {len(asset.findings)} finding(s) "
                     f"({', '.join(f.code for f in asset.findings) or 'none'})")

        from tasks.demo import record_demos

        ds = root / "demos"
        bar, tick = _bar(cfg["demos"], "2/6 scripted demos", "episode")
        with bar, runtime.writing():
            demo = record_demos(task, cfg["demos"], ds, seed=0, num_envs=cfg["worlds"], progress=tick)
        stages["demos"] = {"episodes": demo.episodes, "successes": demo.successes, "frames": demo.frames,
                           "dataset": str(ds) if keep else None}
        lines.append(f"2 scripted demos {demo.successes}/{demo.episodes} succeeded, {demo.frames} frames")

        with progress.stage("3/6 dataset doctor"):
            from doctors.dataset.doctor import diagnose as data_doctor

            data_rep = data_doctor(ds, progress=False)
        errors = [f for f in data_rep.findings if f.severity == "Error"]
        stages["dataset_doctor"] = {"findings": [f.to_dict() for f in data_rep.findings]}
        lines.append(f"3 dataset doctor {len(errors)} error(s), {len(data_rep.findings) - len(errors)} other "
                     f"finding(s) ({', '.join(sorted({f.code for f in data_rep.findings})) or 'none'})")
        if errors:
            raise CaliperError(f"the dataset doctor found errors ({', '.join(f.code for f in errors)}): "
                               f"not training on it")

        from learn.checkpoint import dataset_fingerprint
        from learn.data import load_frames, prepare
        from learn.policies import build_policy
        from learn.train import fit

        pcfg, tcfg = rec.policy, rec.train
        frames = load_frames(ds)
        split = prepare(frames, pcfg, tcfg.val_fraction, tcfg.seed)
        policy = build_policy(pcfg, frames.layout.obs_dim, frames.layout.action_dim, seed=tcfg.seed)
        bar = progress.bar(tcfg.steps, "4/6 train bc_mlp", unit="step")
        with bar, runtime.writing():
            res = fit(policy, split.train, split.val, tcfg,
                      progress=lambda step, row: (bar.update(step - bar.n),
                                                  bar.set_postfix(loss=f"{row['loss']:.4f}")),
                      checkpoint_dir=root / "policy" if keep else None, fingerprint=dataset_fingerprint(ds))
        final = res.history[-1]
        stages["train"] = {"steps": res.steps, "loss": final["loss"], "val_loss": final.get("val_loss"),
                           "steps_per_s": res.steps_per_s, "compile_s": res.compile_s,
                           "checkpoint": str(res.checkpoint) if keep else None}
        lines.append(f"4 train          bc_mlp, {res.steps} steps at {res.steps_per_s:.0f} steps/s, loss "
                     f"{final['loss']:.4f}"
                     + (f", val {final['val_loss']:.4f}" if "val_loss" in final else ""))

        from learn.evaluate import evaluate

        n = cfg["eval_episodes"]
        bar, tick = _bar(n, "5/6 closed-loop eval", "episode")
        with bar:
            ev = evaluate(res.trained_policy(), task, episodes=n, seed=cfg["eval_seed"], progress=tick)
        stages["eval"] = ev.to_dict()
        lo, hi = ev.wilson
        lines.append(f"5 eval           {ev.successes}/{ev.n} held-out episodes succeeded (Wilson 95% "
                     f"[{lo:.2f}, {hi:.2f}])" + "".join(f"; {f.code}" for f in ev.findings))
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    scripted = demo.successes / demo.episodes
    verdict = (f"6 verdict        the trained policy solves {cfg['task']} in {ev.success_rate:.0%} of "
               f"held-out episodes (the scripted expert it learned from: {scripted:.0%})")
    report["verdict"] = {"success_rate": ev.success_rate, "wilson95": [lo, hi],
                         "expert_success_rate": scripted}
    lines.append(verdict)
    emit(args, report, "\n".join(lines))
    return 0

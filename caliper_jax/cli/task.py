"""``caliper task``: the task artifact and its zoo -- list, show, check, witness, rollout, demo, resim."""
from __future__ import annotations

import argparse
from functools import partial

import numpy as np

from caliper_jax.cli import runtime
from caliper_jax.cli.common import at_least, budget, emit, output_dir, output_file, ray_arg, ray_ready, seed
from caliper_jax.errors import CaliperError


def register(subparsers) -> None:
    task = subparsers.add_parser("task", help="manipulation tasks: the zoo, checks, witnesses, rollouts")
    sub = task.add_subparsers(dest="task_command", metavar="ACTION")
    sub.required = True

    def add(name: str, handler, help_text: str, *, target: bool = True) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text)
        if target:
            p.add_argument("task", metavar="TASK", help="a zoo task name (caliper task list) or a task file")
        p.add_argument("--json", action="store_true", help="print the report as JSON")
        p.set_defaults(func=handler)
        return p

    add("list", cmd_list, "the task zoo", target=False)
    add("show", cmd_show, "a task's robot, props, zones and success predicate")
    p = add("check", cmd_check, "what a schema cannot see: overlaps, start verdict, reachability, "
                                "baseline policies (K000-K011)")
    p.add_argument("--no-sim", dest="simulate", action="store_false",
                   help="skip the rules that need a MuJoCo simulation (K005, K008-K011)")
    p.add_argument("--baselines", type=int, default=None, metavar="N",
                   help="K011: episodes per baseline policy (uniform random, sticky random, do-nothing; "
                        "default 100, 0 skips K011)")
    for name, handler, text in (("demo", cmd_demo, "record scripted demonstrations as a LeRobot v3 dataset"),
                                ("rollout", cmd_rollout, "run a policy on N worlds; success rate with its "
                                                         "Wilson 95%% interval")):
        p = add(name, handler, text)
        if name == "demo":
            p.add_argument("--out", required=True, metavar="DATASET", help="a new dataset folder")
            p.add_argument("--camera", action="append", default=[], metavar="NAME[:WxH]",
                           help="record a camera (front, side, top, wrist; size default 96x96, at least "
                                "32x32) as the video feature observation.images.NAME (repeatable)")
            ray_arg(p, "worlds (in blocks, CPU engine; the dataset is the one-machine run's, byte for byte)")
        else:
            p.add_argument("--policy", choices=("scripted",), default="scripted",
                           help="the policy (scripted: the task's scripted expert)")
            p.add_argument("--png", metavar="FILE.png", help="write a plot of the scored props' paths "
                                                            "and the zones (needs matplotlib)")
        p.add_argument("--episodes", type=int, default=10 if name == "demo" else None,
                       help="episodes to run (default: 10 for demo, one per world for rollout)")
        p.add_argument("--worlds", type=int, default=4, help="parallel worlds (default 4)")
        p.add_argument("--engine", choices=("mujoco", "mjx"), default="mujoco",
                       help="mujoco: MuJoCo's C code on threads (default); mjx: MJX (an accelerator)")
        p.add_argument("--seed", type=int, default=0, help="randomisation seed (default 0)")
        p.add_argument("--no-randomize", dest="randomize", action="store_false",
                       help="every episode starts from the task file's nominal scene")
    add("witness", cmd_witness, "a grasp and carry pose proving the success verdict reachable, verified "
                                "in a settled MuJoCo simulation")
    p = add("resim", cmd_resim, "re-simulate recorded demos from their stored draws and compare the states "
                                "bit for bit", target=False)
    p.add_argument("dataset", metavar="DATASET", help="a dataset written by caliper task demo")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--episode", type=int, default=0, help="the episode to replay (default 0)")
    which.add_argument("--all", action="store_true", help="replay every episode")
    p.add_argument("--engine", choices=("mujoco", "mjx"), default="mujoco",
                   help="engine of the replay (default mujoco; bit for bit needs the recording's engine)")
    p.add_argument("--task", metavar="TASK", help="the task file, when the recorded one is not in the zoo")


def _load(name_or_path: str):
    from tasks.schema import find_task, load_task

    return load_task(find_task(name_or_path))


def require_runnable(task) -> None:
    """Refuse to run (demo, rollout, eval) a task that ``caliper task check --no-sim`` marks as an
    Error (a prop in the ground, a start that already succeeds...): its episodes would be garbage."""
    from tasks.check import check_task

    errors = [f for f in check_task(task, simulate=False) if f.severity == "Error"]
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        where = task.source if task.source is not None else task.name
        raise CaliperError(f"{errors[0].code}: {errors[0].message}{more}; not running it (see caliper task "
                           f"check {where})")


def cmd_list(args) -> int:
    from tasks.arms import arm_profile
    from tasks.predicates import describe
    from tasks.schema import load_task, zoo_files

    rows = []
    for path in zoo_files(arms=True):
        t = load_task(path)
        rows.append({"name": t.name, "file": path.name, "robot": t.robot_name or t.robot.stem,
                     "grasp": t.grasp or ("friction" if arm_profile(t.robot) is not None else "weld"),
                     "props": [p.name for p in t.props],
                     "horizon_s": t.horizon_s, "fps": t.fps,
                     "success": describe(t.success) if t.success is not None else None})
    width = max((len(r["name"]) for r in rows), default=4)
    lines = [f"{r['name']:<{width}}  {r['robot']:<11} {r['grasp']:<8} {', '.join(r['props']) or '-':<24} "
             f"{r['horizon_s'] or '-':>5} s  "
             f"{r['success'] or 'no success predicate'}" for r in rows]
    emit(args, {"tasks": rows}, "\n".join(lines))
    return 0


def task_report(t) -> dict:
    """The JSON form of ``caliper task show`` (the task as written, plus what it resolves to)."""
    from tasks.predicates import describe
    from tasks.schema import task_to_dict

    out = task_to_dict(t)
    out["robot_path"] = str(t.robot)
    out["source"] = None if t.source is None else str(t.source)
    out["success_text"] = describe(t.success) if t.success is not None else None
    return out


def cmd_show(args) -> int:
    t = _load(args.task)
    report = task_report(t)
    lines = [f"task {t.name}  ({t.source})", f"  robot    {t.robot}",
             f"  q0       {list(t.q0) if t.q0 is not None else 'zeros'}",
             f"  ground   {t.ground if t.ground is not None else 'none'}",
             f"  horizon  {t.horizon_s} s at {t.fps} fps"]
    for p in t.props:
        mat = p.material.name if p.material is not None else "default"
        lines.append(f"  prop     {p.name}: {p.kind} {list(p.size)} at {list(p.pos)}, {p.mass} kg, {mat}")
    for z in t.zones:
        lines.append(f"  zone     {z.name}: centre {list(z.center)}, half {list(z.half)} (evaluator only)")
    if t.gripper is not None:
        lines.append(f"  gripper  {t.gripper.joint or 'detected'} (closed at {t.gripper.closed})")
    lines.append(f"  success  {report['success_text'] or 'none'}")
    emit(args, report, "\n".join(lines))
    return 0


def cmd_check(args) -> int:
    """Exit 1 when there is an Error finding (the task is not usable as it is)."""
    from tasks.check import BASELINE_EPISODES, check_task

    n = BASELINE_EPISODES if args.baselines is None else args.baselines
    if n < 0:
        raise CaliperError(f"--baselines: expected episodes >= 0, got {n}")
    t = _load(args.task)
    findings = check_task(t, simulate=args.simulate, baselines=n)
    errors = sum(f.severity == "Error" for f in findings)
    report = {"task": t.name, "file": str(t.source), "ok": errors == 0,
              "findings": [f.to_dict() for f in findings]}
    lines = [f"task {t.name}: " + (f"{errors} error(s), {len(findings) - errors} other finding(s)" if findings
                                   else "no findings")]
    lines += [f"  [{f.severity.upper()}] {f.code}: {f.message}\n      fix: {f.hint}" for f in findings]
    emit(args, report, "\n".join(lines))
    return 1 if errors else 0


def cmd_witness(args) -> int:
    """Exit 1 when the witness does not hold in simulation."""
    from tasks.scene import build_scene
    from tasks.witness import term_label, verify_witness, witness

    ts = build_scene(_load(args.task))
    w = witness(ts)
    v = verify_witness(ts, w)
    ok = bool(v)
    report = {"task": ts.name, "prop": w.prop, "term": term_label(w.term), "q_grasp": w.q_grasp.tolist(),
              "q_carry": w.q_carry.tolist(), "path": np.asarray(w.path).tolist(),
              "path_clear": bool(w.path_clear),
              "grasp_error_m": float(w.grasp_error), "carry_offset_m": float(w.carry_offset),
              "verdict_at_start": bool(v.at_start), "verdict_settled": bool(v.success),
              "settle_s": v.settle_s, "drift_m": float(v.drift), "ok": ok}
    names = ", ".join(ts.model.joint_names)
    lines = [f"task {ts.name}: witness for {term_label(w.term)} carrying {w.prop} ({names})",
             f"  grasp  q = {np.round(w.q_grasp, 4).tolist()}  (jaw face "
             f"{w.grasp_error * 1e3:.1f} mm from its aim on the prop)",
             f"  carry  q = {np.round(w.q_carry, 4).tolist()}  via {len(w.path)} waypoints"
             + ("" if w.path_clear else " (path NOT collision-free)"),
             f"  verdict at t=0: {v.at_start}; after the settled simulation: {v.success} "
             f"(settled {'never' if v.settle_s is None else f'after {v.settle_s:.2f} s'}, "
             f"prop {v.drift * 1e3:.1f} mm from the kinematic prediction)",
             "  ok" if ok else "  NOT a witness"]
    emit(args, report, "\n".join(lines))
    return 0 if ok else 1


def _episodes_args(args, task) -> tuple[int, int, int]:
    """(episodes, worlds, seed), checked against the work budgets before anything is built."""
    from tasks.env_spec import DEFAULT_FPS, DEFAULT_HORIZON_S

    worlds = budget(at_least(args.worlds, "--worlds"), "--worlds", "batch")
    episodes = at_least(worlds if args.episodes is None else args.episodes, "--episodes")
    ticks = round((task.horizon_s or DEFAULT_HORIZON_S) * (task.fps or DEFAULT_FPS))
    budget(-(-episodes // worlds) * worlds * ticks,
           f"--episodes rounded up to whole rounds of --worlds x {ticks} ticks per episode (at most)")
    return episodes, worlds, seed(args.seed)


def _demo_cameras(args, task, episodes: int, worlds: int) -> list[tuple[str, int, int]]:
    """The ``--camera`` flags -> [(name, width, height)], checked (names, sizes, repeats, PyAV and
    the memory of the frames held until the dataset is written) before anything is built."""
    from caliper_jax.cli.common import memory_budget
    from caliper_jax.dataset.video import MAX_SIDE, MIN_SIDE, have_pyav
    from tasks.cameras import NAMES, parse_camera
    from tasks.env_spec import DEFAULT_FPS, DEFAULT_HORIZON_S

    cams = [parse_camera(text, NAMES) for text in args.camera]
    for (n, w, h), text in zip(cams, args.camera, strict=True):
        if not (MIN_SIDE <= w <= MAX_SIDE and MIN_SIDE <= h <= MAX_SIDE):
            raise CaliperError(f"--camera {text!r}: cameras are recorded as video (libsvtav1, lerobot's "
                               f"codec), which needs {MIN_SIDE}..{MAX_SIDE} px a side")
        if [c[0] for c in cams].count(n) > 1:
            raise CaliperError(f"--camera {text!r}: camera {n!r} is given twice")
    if cams and not have_pyav():
        raise CaliperError('--camera: recording video needs PyAV: pip install "caliper-jax[video]"')
    ticks = round((task.horizon_s or DEFAULT_HORIZON_S) * (task.fps or DEFAULT_FPS))
    memory_budget(-(-episodes // worlds) * worlds * ticks * sum(w * h * 3 for _, w, h in cams),
                  "--camera frames held until the dataset is written (episodes x ticks x pixels x 3)")
    return cams


def _progress_bar(total: int, desc: str):
    from caliper_jax import progress

    bar = progress.bar(total, desc, unit="episode")
    return bar, (lambda n: bar.update(n - bar.n))


def cmd_demo(args) -> int:
    """Exit 1 when an episode failed (the dataset is still written; failures are tagged)."""
    from caliper_jax.dataset import recover
    from tasks.demo import record_demos

    t = _load(args.task)
    episodes, worlds, s = _episodes_args(args, t)
    output_dir(args.out, "--out", empty=False)       # writable, before any work
    cameras = _demo_cameras(args, t, episodes, worlds)
    require_runnable(t)
    randomization = "default" if args.randomize else None
    camera_names = [f"{n}:{w}x{h}" for n, w, h in cameras]
    if args.ray is not None:
        from learn.cluster import ray_record_demos

        ray_ready(args.engine)
        bar = _progress_bar(1, f"demo {t.name} on Ray")[0]
        bar.unit = "block"
        record, tick = partial(ray_record_demos, address=args.ray), (
            lambda n, total: (setattr(bar, "total", total), bar.update(n - bar.n)))
    else:
        bar, tick = _progress_bar(episodes, f"demo {t.name}")
        record = partial(record_demos, engine=args.engine)
    with bar, runtime.partial_output(args.out, cleanup=lambda: recover(args.out)):
        res = record(t, episodes, args.out, seed=s, num_envs=worlds, randomization=randomization,
                     progress=tick, cameras=camera_names)
    report = {"task": t.name, "out": str(res.root), "episodes": res.episodes, "successes": res.successes,
              "success_rate": res.success_rate, "frames": res.frames, "failed_plans": res.failed_plans,
              "seed": s, "worlds": worlds, "engine": args.engine,
              "cameras": [{"name": n, "width": w, "height": h, "feature": f"observation.images.{n}"}
                          for n, w, h in cameras]}
    emit(args, report, f"{t.name}: recorded {res.episodes} scripted episode(s), {res.frames} frames, into "
                       f"{res.root}\n  success {res.successes}/{res.episodes}"
                       + (f"; {res.failed_plans} episode(s) had no plan" if res.failed_plans else "")
                       + "".join(f"\n  camera {n} {w}x{h}: video feature observation.images.{n}"
                                 for n, w, h in cameras))
    return 0 if res.successes == res.episodes else 1


def cmd_resim(args) -> int:
    """Exit 1 when any replayed episode differs from its recording."""
    from tasks.resim import Replayer

    with Replayer(args.dataset, engine=args.engine, task=args.task) as r:
        ids = list(range(len(r.side["episodes"]))) if args.all else [args.episode]
        if args.all:
            bar, tick = _progress_bar(len(ids), f"resim {r.task.name}")
            with bar:
                results = []
                for i in ids:
                    results.append(r.episode(i))
                    tick(len(results))
        else:
            results = [r.episode(args.episode)]
        name = r.task.name
    same = all(x.identical for x in results)
    report = {"dataset": str(args.dataset), "task": name, "engine": args.engine, "identical": same,
              "episodes": [x.to_dict() for x in results]}
    lines = [f"{name}: {sum(x.identical for x in results)}/{len(results)} episode(s) re-simulated bit for "
             f"bit ({args.engine})"]
    for x in results:
        worst = max(c.max_abs_diff for c in x.compare.values())
        firsts = [c.first_diff_frame for c in x.compare.values() if c.first_diff_frame is not None]
        lines.append(f"  episode {x.episode} (world {x.world}, #{x.world_episode}): {x.length} frames, "
                     + ("identical" if x.identical else
                        f"DIFFERS: max |diff| {worst:.3g}, first at frame {min(firsts, default=x.length)}"
                        + ("" if x.ended else ", ended at another tick")
                        + ("" if x.success == x.recorded_success else ", another outcome")))
    lines += [f"  note: {n}" for n in (results[0].notes if results else ())]
    emit(args, report, "\n".join(lines))
    return 0 if same else 1


def cmd_rollout(args) -> int:
    """Exit 0 whatever the success rate (it is the measurement, not a failure)."""
    from learn.verdicts import wilson_interval
    from tasks.demo import run_episodes
    from tasks.env import VecEnv

    t = _load(args.task)
    episodes, worlds, s = _episodes_args(args, t)
    if args.png:
        output_file(args.png, "--png")
    require_runnable(t)
    bar, tick = _progress_bar(episodes, f"rollout {t.name}")
    kwargs = {} if args.randomize else {"randomization": None}
    with bar, VecEnv(t, worlds, engine=args.engine, seed=s, **kwargs) as env:
        eps, expert = run_episodes(env, episodes, progress=tick)
        fps = env.layout.fps
    k = sum(ep.success for ep in eps)
    lo, hi = wilson_interval(k, len(eps))
    lengths = np.array([len(ep.state) for ep in eps]) / fps
    report = {"task": t.name, "policy": args.policy, "engine": args.engine, "episodes": len(eps),
              "successes": k,
              "success_rate": k / len(eps), "wilson95": [lo, hi], "mean_episode_s": float(lengths.mean()),
              "failed_plans": len(expert.failed_plans), "seed": s, "worlds": worlds,
              "per_episode": [{"world": ep.world, "index": ep.index, "success": ep.success,
                               "length_s": float(len(ep.state) / fps)} for ep in eps]}
    note = None
    if args.png:
        with runtime.writing(), runtime.partial_output(args.png):
            note = _plot_paths(args.png, t, eps)
        report["png"] = None if note else str(args.png)
    failed = len(expert.failed_plans)
    text = (f"{t.name}: {args.policy} policy, {k}/{len(eps)} episodes succeeded "
            f"(Wilson 95% [{lo:.2f}, {hi:.2f}]); mean episode {lengths.mean():.2f} s on {worlds} "
            f"{args.engine} world(s)" + (f"\n  {failed} episode(s) had no plan" if failed else "")
            + (f"\n  {note}" if note else (f"\n  plot: {args.png}" if args.png else "")))
    emit(args, report, text)
    return 0


def _plot_paths(path, task, eps):
    """x-z paths of every prop over each episode (green: success, red: failure) and the zones."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Rectangle
    except ImportError:
        return 'matplotlib is not installed (pip install "caliper-jax[plot]"); no plot written'
    fig, ax = plt.subplots(figsize=(7, 5))
    for z in task.zones:
        corner = (z.center[0] - z.half[0], z.center[2] - z.half[2])
        ax.add_patch(Rectangle(corner, 2 * z.half[0], 2 * z.half[2],
                               color=z.rgba[:3], alpha=0.3, label=f"zone {z.name}"))
    for ep in eps:
        pos = ep.env_state.reshape(len(ep.env_state), -1, 7)
        for i in range(pos.shape[1]):
            ax.plot(pos[:, i, 0], pos[:, i, 2], color="tab:green" if ep.success else "tab:red",
                    alpha=0.6, linewidth=1)
            ax.plot(pos[-1, i, 0], pos[-1, i, 2], "o", color="tab:green" if ep.success else "tab:red",
                    markersize=3)
    if task.ground is not None:
        ax.axhline(task.ground, color="0.4", linewidth=1)
    ax.set_xlabel("x [m]")
    ax.set_ylabel("z [m]")
    ax.set_aspect("equal")
    ax.set_title(f"{task.name}: prop centres, x-z (green: success, red: failure)")
    if task.zones:
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return None

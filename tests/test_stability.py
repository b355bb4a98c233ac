"""The ``--json`` contract (docs/stability.md): within a major version a command's JSON report only
grows. Every command runs once, in-process, on the smallest robot that exercises it; its report's
key paths must include every path recorded in ``tests/data/json_keys.json``. New keys are fine;
a removed or renamed key fails here.

Key paths: ``a.b`` for nested objects, ``a[].b`` for the objects of a list (the union over its
elements), ``a.*`` for an object keyed by names (frames, joints, features, ...: listed per command
in ``CASES``), so ``fk`` records ``frames`` and ``frames.*``, not the frame names.

After an intended change (a key added that should be guarded, or a major version that removes
one) regenerate the snapshot and review its diff:

    CALIPER_UPDATE_SNAPSHOT=1 .venv/bin/python -m pytest -q tests/test_stability.py
    .venv/bin/python tests/test_stability.py --update        # the same
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import sys
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np
import pytest

from caliper_jax import cli

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = Path(__file__).resolve().parent / "data" / "json_keys.json"
UPDATE = os.environ.get("CALIPER_UPDATE_SNAPSHOT", "") not in ("", "0")


def key_paths(value, dynamic=frozenset(), prefix: str = "") -> set[str]:
    """Every key path of a JSON value (see the module docstring)."""
    paths: set[str] = set()
    if isinstance(value, dict):
        if prefix in dynamic:
            star = f"{prefix}.*" if prefix else "*"
            paths.add(star)
            for v in value.values():
                paths |= key_paths(v, dynamic, star)
        else:
            for k, v in value.items():
                path = f"{prefix}.{k}" if prefix else str(k)
                paths.add(path)
                paths |= key_paths(v, dynamic, path)
    elif isinstance(value, list):
        for v in value:
            if isinstance(v, (dict, list)):
                paths |= key_paths(v, dynamic, f"{prefix}[]")
    return paths


class Case(NamedTuple):
    argv: tuple            # "{tmp}" is the case's scratch folder; "{ds}" a fresh small dataset in it
    dynamic: tuple = ()    # paths of objects keyed by names
    rc: tuple = (0,)       # accepted exit codes (the report is printed either way)


GOAL = "0.5,-0.4"
# caliper identify: parameters by name, prediction errors by feature name
IDENTIFY_KEYED = ("parameters",) + tuple(f"rmse.{split}.{when}" for split in ("train", "validation")
                                          for when in ("before", "after"))
SCENE = ("--ground", "-0.1", "--box", "0,0,0.8,0.06,0.3,0.06")

# One entry per command (and per variant whose report has other keys). Small arguments: compile
# time dominates, so the robots are the fixtures and the horizons short.
CASES: dict[str, Case] = {
    "info": Case(("info",)),
    "demo": Case(("demo", "--duration", "0.05"), ("frames",)),
    "load": Case(("load", "gripper_arm")),
    "fk": Case(("fk", "pendulum2", "--joints", "0.3,0.2"), ("frames",)),
    "sim": Case(("sim", "pendulum2", "--duration", "0.05")),
    "sim --contact": Case(("sim", "gripper_arm", "--contact", "--ground", "0", "--duration", "0.05",
                           "--prop", "box:0.03,0.03,0.03@0.3,0,0.03"), ("props",)),
    "ik": Case(("ik", "pendulum2", "--position", "0.1,0,-0.3")),
    "analyze": Case(("analyze", "pendulum2", "--joints", "0.3,0.2")),
    "calibrate": Case(("calibrate", "pendulum2", "--data", "{tmp}/poses.npz"), ("joints",)),
    "calibrate --mode kinematic": Case(("calibrate", "pendulum2", "--data", "{tmp}/poses.npz",
                                        "--mode", "kinematic")),
    "calibrate --mode dynamic": Case(("calibrate", "pendulum2", "--data", "{tmp}/torques.npz",
                                      "--mode", "dynamic")),
    "move": Case(("move", "pendulum2", "--goal", "1,0.5", "--out", "{tmp}/rows.json")),
    "move --linear": Case(("move", "pendulum2", "--q0", "0.6,1.4", "--target", "0.05,0,-0.35", "--linear",
                           "--position-only")),
    "report": Case(("report", "pendulum2", "--q0", "3.13,0", "--goal", "3.12,0.5",   # near a limit: T004
                    "--samples", "20")),
    "check": Case(("check", "collide_arm", "--joints", "0,3.14159265,3.14159265", "--margin", "0.05",
                   *SCENE)),
    "plan": Case(("plan", "collide_arm", "--start=-1,0,0", "--goal=1,0,0", "--seed", "2", "--batch", "64",
                  "--retime", "scurve", "--clearance", "0.5", *SCENE)),
    "trajopt": Case(("trajopt", "collide_arm", "--start=-1,0,0", "--goal=1,0,0", "--waypoints", "8",
                     "--iterations", "5", "--inits", "1", *SCENE), rc=(0, 1)),
    "control": Case(("control", "pendulum2", "--goal", "5,-0.4", "--ticks", "40"), ("warnings",),
                    rc=(0, 1)),    # 40 ticks do not reach the goal: exit 1 with the report
    "record": Case(("record", "pendulum2", "--goal", "5,-0.4", "--ticks", "40", "--worlds", "2",
                    "--out", "{tmp}/recorded"), ("warnings",)),
    "mjcf": Case(("mjcf", "gripper_arm", "--ground", "0", "--prop", "box:0.03,0.03,0.03@0.3,0,0.03")),
    "contact-sim": Case(("contact-sim", "gripper_arm", "--ground", "0", "--duration", "0.05",
                         "--prop", "box:0.03,0.03,0.03@0.3,0,0.03"), ("props",)),
    "contact-lint": Case(("contact-lint", "gripper_arm", "--ground", "0",
                          "--prop", "box:0.03,0.03,0.03@0.3,0,0.03")),
    "doctor": Case(("doctor", "{tmp}/toy.urdf")),
    "doctor --repair": Case(("doctor", "{tmp}/toy.urdf", "--repair", "--out", "{tmp}/fixed.urdf")),
    "data info": Case(("data", "info", "{ds}"), ("features", "tags")),
    "data doctor": Case(("data", "doctor", "{ds}", "--window", "500"), ("summaries",)),
    "data delete": Case(("data", "delete", "{ds}", "--episodes", "1")),
    "data split": Case(("data", "split", "{ds}", "--episode", "0", "--frame", "5")),
    "data merge": Case(("data", "merge", "{ds}", "--first", "0", "--second", "1")),
    "data tag": Case(("data", "tag", "{ds}", "--episode", "1", "--add", "good,retry"), ("tags",)),
    "data recover": Case(("data", "recover", "{ds}")),
    "data coverage": Case(("data", "coverage", "{tmp}/narrow", "--out", "{tmp}/cov", "--episodes", "1",
                           "--no-collision"), ("findings_before", "findings_after")),
    "task list": Case(("task", "list")),
    "task show": Case(("task", "show", "sort-blocks")),
    "task check": Case(("task", "check", "lift-cube", "--no-sim")),
    "task witness": Case(("task", "witness", "lift-cube")),
    "task demo": Case(("task", "demo", "lift-cube", "--episodes", "1", "--worlds", "1",
                       "--out", "{tmp}/demos")),
    "task demo --camera": Case(("task", "demo", "lift-cube", "--episodes", "1", "--worlds", "1",
                                "--camera", "front:32x32", "--out", "{tmp}/demos")),
    "task resim": Case(("task", "resim", "{demos}", "--episode", "1")),
    "task rollout": Case(("task", "rollout", "lift-cube", "--episodes", "1", "--worlds", "1")),
    "render": Case(("render", "lift-cube", "--camera", "front:48x48", "--out", "{tmp}/r.png", "--depth",
                    "{tmp}/d.png", "--segmentation", "{tmp}/s.png")),
    # "{demos}": two scripted lift-cube demos; "{ckpt}": a tiny policy trained on them (built once)
    "learn train": Case(("learn", "train", "{demos}", "--out", "{tmp}/run", "--steps", "5",
                         "--train-config", '{"eval_every": 5, "log_every": 5, "warmup": 1}',
                         "--config", '{"hidden": [8]}')),
    "learn eval": Case(("learn", "eval", "{ckpt}", "--task", "lift-cube", "--episodes", "2")),
    "learn rl": Case(("learn", "rl", "lift-cube", "--out", "{tmp}/rl", "--envs", "2", "--steps", "32",
                      "--config", '{"rollout": 16, "minibatches": 2, "actor_hidden": [8], '
                                  '"critic_hidden": [8]}',
                      "--eval-episodes", "1"), rc=(0, 1)),
    "learn sweep": Case(("learn", "sweep", "{ckpt}", "--task", "lift-cube", "--episodes", "1", "--levels",
                         "none")),
    "learn profile": Case(("learn", "profile", "{ckpt}", "--task", "lift-cube", "--ticks", "10")),
    "learn debug": Case(("learn", "debug", "{ckpt}", "--dataset", "{demos}", "--probes", "4"), rc=(0, 1)),
    "learn autopsy": Case(("learn", "autopsy", "{ckpt}", "{demos}", "--task", "lift-cube", "--episodes", "1"),
                          rc=(0, 1)),
    "terrain run": Case(("terrain", "run", "--scene", "flat", "--frames", "2", "--out", "{tmp}/terrain")),
    "graph check": Case(("graph", "check", "fk_movej")),
    "graph run": Case(("graph", "run", "fk_movej", "--out", "{tmp}/g"), ("outputs", "outputs.*")),
    "graph list": Case(("graph", "list"), ("examples", "node_types", "node_types.*.inputs",
                                            "node_types.*.outputs", "node_types.*.params")),
    "studio": Case(("studio", "gripper_arm", "--once")),
    "identify --mode inertial": Case(("identify", "{tmp}/torques.npz", "--mode", "inertial", "--robot",
                                      "pendulum2"), IDENTIFY_KEYED),
    "identify": Case(("identify", "{tmp}/swing.npz", "--task", "sysid:swing", "--params", "damping:j1",
                      "--chunk", "10", "--iterations", "2"), IDENTIFY_KEYED),
    # bad input under --json: the error report (skipped while errors are plain text)
    "error": Case(("fk", "nosuchbot"), rc=(2,)),
}


def _prepare(label: str, tmp: Path) -> None:
    """Input files of one case."""
    if label == "identify":
        import jax as _jax

        from caliper_jax import sysid
        from caliper_jax.sysid import scenes

        mj = scenes.scene("swing")
        ps = sysid.param_set(mj, "damping:j1")
        data = sysid.planted_dataset(mj, ps, ps.nominal, episodes=2, steps=20, key=_jax.random.PRNGKey(2))
        np.savez(tmp / "swing.npz", qpos=data.qpos, qvel=data.qvel, ctrl=data.ctrl)
    if "calibrate" in label or label == "identify --mode inertial":
        from caliper_jax import api
        from caliper_jax.loading import load

        model = load("pendulum2")
        q = np.random.default_rng(0).uniform(-1.0, 1.0, (8, model.nq))
        T = np.asarray(api.fk(model, q))[:, model.frame_id("tip")]
        np.savez(tmp / "poses.npz", q=q, T=T, frame="tip")
        qd, qdd = np.zeros_like(q), np.ones_like(q)
        tau = np.asarray(api.inverse_dynamics(model, q, qd, qdd))
        np.savez(tmp / "torques.npz", q=q, qd=qd, qdd=qdd, tau=tau)
    if label.startswith("doctor"):
        shutil.copy(ROOT / "robots" / "toy.urdf", tmp / "toy.urdf")     # no inertials: findings
    if label.startswith("data"):
        from caliper_jax.dataset.synthetic import write_synthetic

        write_synthetic(tmp / "ds", episodes=4, length=20)
    if label == "data coverage":                       # a gripper_arm dataset: a real registry robot
        from caliper_jax.dataset import LeRobotWriter

        spec = {"dtype": "float32", "shape": [3], "names": ["j1", "j2", "gripper"]}
        q = np.linspace([-0.3, -0.2, 0.01], [0.3, 0.25, 0.018], 21, dtype=np.float32)
        with LeRobotWriter(tmp / "narrow", 30, {"observation.state": spec, "action": spec},
                           robot_type="gripper_arm") as w:
            w.add_frames({"observation.state": q[:-1], "action": q[1:]})
            w.save_episode(task="narrow")


_LEARN_ASSETS: list = []


def _learn_assets() -> tuple[Path, Path]:
    """(a 2-episode lift-cube demo dataset, a 5-step BC checkpoint trained on it), built once."""
    if not _LEARN_ASSETS:
        import tempfile

        from learn.config import BCConfig, TrainConfig
        from learn.data import load_frames, prepare
        from learn.policies import build_policy
        from learn.train import fit
        from tasks.demo import record_demos

        root = Path(tempfile.mkdtemp(prefix="caliper-learn-cases-"))
        demos = root / "demos"
        record_demos("lift-cube", 2, demos, num_envs=2)
        frames = load_frames(demos)
        pcfg, tcfg = BCConfig(hidden=(8,)), TrainConfig(steps=5, warmup=1, eval_every=5, log_every=5)
        split = prepare(frames, pcfg, 0.0, 0)
        policy = build_policy(pcfg, frames.layout.obs_dim, frames.layout.action_dim)
        res = fit(policy, split.train, None, tcfg, checkpoint_dir=root / "run")
        _LEARN_ASSETS.extend([demos, res.checkpoint])
    return _LEARN_ASSETS[0], _LEARN_ASSETS[1]


def run_case(label: str, tmp: Path):
    """(exit code, stdout, stderr) of one case, run in-process; the precision is restored."""
    case = CASES[label]
    tmp.mkdir(parents=True, exist_ok=True)
    argv = [a.replace("{tmp}", str(tmp)).replace("{ds}", str(tmp / "ds")) for a in case.argv] + ["--json"]
    if any("{demos}" in a or "{ckpt}" in a for a in argv):
        demos, ckpt = _learn_assets()
        argv = [a.replace("{demos}", str(demos)).replace("{ckpt}", str(ckpt)) for a in argv]
    out, err = io.StringIO(), io.StringIO()
    x64 = jax.config.jax_enable_x64
    try:
        with jax.enable_x64(True):        # the CLI's precision, for the inputs too
            _prepare(label, tmp)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(argv)
    finally:
        jax.config.update("jax_enable_x64", x64)
    return code, out.getvalue(), err.getvalue()


def current_paths(label: str, tmp: Path) -> set[str]:
    """The key paths of a case's report (errors included: under --json they are JSON objects)."""
    case = CASES[label]
    code, out, err = run_case(label, tmp)
    assert code in case.rc, f"{label}: exit {code} (expected {case.rc})\n{err}"
    for text in (out, err):
        try:
            report = json.loads(text)
        except ValueError:
            continue
        if isinstance(report, dict):
            return key_paths(report, frozenset(case.dynamic))
    raise AssertionError(f"{label}: stdout is not a JSON object:\n{out[:2000]}\n{err[:2000]}")


def load_snapshot() -> dict[str, list[str]]:
    return json.loads(SNAPSHOT.read_text()) if SNAPSHOT.is_file() else {}


_SEEN: dict[str, list[str]] = {}


@pytest.fixture(scope="module", autouse=True)
def _write_snapshot_on_update():
    yield
    if UPDATE and _SEEN:
        old = load_snapshot()
        new = {k: v for k, v in old.items() if k in CASES}
        new.update(_SEEN)
        SNAPSHOT.parent.mkdir(parents=True, exist_ok=True)
        SNAPSHOT.write_text(json.dumps(dict(sorted(new.items())), indent=1) + "\n")


@pytest.mark.parametrize("label", list(CASES))
def test_json_keys_only_grow(label, tmp_path):
    paths = current_paths(label, tmp_path)
    recorded = load_snapshot().get(label)
    if UPDATE:
        _SEEN[label] = sorted(paths)
        return
    assert recorded is not None, (f"{label}: not in {SNAPSHOT.name}; record it with "
                                  "CALIPER_UPDATE_SNAPSHOT=1 (see this module's docstring)")
    missing = sorted(set(recorded) - paths)
    assert not missing, (f"`caliper {label} --json` lost key(s) {missing}: the --json contract lets "
                         "reports grow only within a major version (docs/stability.md)")


def _verbs(parser: argparse.ArgumentParser, prefix: str = "") -> list[str]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                nested = _verbs(sub, f"{prefix}{name} ")
                out += nested or [f"{prefix}{name}"]
    return out


def test_every_command_has_a_snapshot_case():
    verbs = _verbs(cli.build_parser())
    assert "fk" in verbs and "data info" in verbs
    labels = {label.split(" --")[0] for label in CASES}
    assert not sorted(set(verbs) - labels), "add a CASES entry (and a snapshot) for every new command"
    assert set(load_snapshot()) <= set(CASES)


@pytest.mark.parametrize("first", ["import caliper_jax as cj; cj.ik", "import caliper_jax.ik",
                                   "from caliper_jax import ik"])
def test_cj_ik_is_the_callable_subpackage_whatever_the_import_order(first):
    """docs/stability.md: ``cj.ik`` is the package ``caliper_jax.ik`` and calling it calls
    ``caliper_jax.ik.ik``, however the names were first imported."""
    import subprocess

    code = (f"{first}\nimport types, caliper_jax as cj, caliper_jax.ik as m\nfrom caliper_jax import ik\n"
            "from caliper_jax.ik.api import ik as fn\n"
            "assert cj.ik is m is ik and isinstance(ik, types.ModuleType) and callable(ik)\n"
            "assert ik.ik is fn and ik.analyze is m.api.analyze and 'ik' in dir(cj)\n"
            "print('ok')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_key_paths():
    report = {"a": 1, "frames": {"tip": [[1.0]], "base": [[0.0]]},
              "joints": [{"name": "j1", "type": "revolute"}, {"name": "j2", "limit": {"lo": 0}}],
              "rows": [[1, 2]], "nested": [[{"x": 1}]]}
    assert key_paths(report, frozenset({"frames"})) == {
        "a", "frames", "frames.*", "joints", "joints[].name", "joints[].type", "joints[].limit",
        "joints[].limit.lo", "rows", "nested", "nested[][].x"}


if __name__ == "__main__":
    if "--update" in sys.argv[1:]:
        os.environ["CALIPER_UPDATE_SNAPSHOT"] = "1"
    sys.exit(pytest.main(["-q", __file__]))

"""``caliper learn``: train -> eval -> debug -> profile -> autopsy at toy sizes through the CLI,
one-line errors on bad input, and ``caliper demo --full`` (slow)."""
from __future__ import annotations

import contextlib
import io
import json

import pytest

from caliper_jax import cli


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    from tasks.demo import record_demos

    root = tmp_path_factory.mktemp("learn_cli") / "demos"
    record_demos("lift-cube", 2, root, num_envs=2)
    return root


@pytest.fixture(scope="module")
def run_dir(demos):
    out = demos.parent / "run"
    code, text, err = run("learn", "train", demos, "--out", out, "--steps", "6", "--json",
                          "--config",
                          '{"hidden": [8], "chunk_size": 4, "n_action_steps": 2, "temporal_ensemble": null}',
                          "--train-config", '{"warmup": 1, "eval_every": 3, "log_every": 3}',
                          "--val-fraction", "0.5")
    assert code == 0, err
    report = json.loads(text)
    assert report["steps"] == 6 and report["train_episodes"] == 1 and report["val_episodes"] == 1
    assert report["policy"]["chunk_size"] == 4 and report["policy"]["hidden"] == [8]
    assert [r["step"] for r in report["history"]] == [3, 6]
    assert all("val_loss" in r for r in report["history"])
    assert report["timing"]["compile_s"] > 0
    return out


def test_train_writes_a_resumable_run(run_dir, demos):
    assert sorted(p.name for p in run_dir.iterdir()) == ["step_00000003", "step_00000006"]
    # a second train into the same folder is refused unless it resumes
    code, _, err = run("learn", "train", demos, "--out", run_dir, "--steps", "6")
    assert code == 2 and "--resume" in err and err.count("\n") == 1


def test_eval_debug_profile_autopsy_on_the_trained_run(run_dir, demos):
    code, text, err = run("learn", "eval", run_dir, "--task", "lift-cube", "--episodes", "2", "--json")
    assert code == 0, err
    ev = json.loads(text)
    assert ev["n_episodes"] == 2 and len(ev["episodes"]) == 2 and ev["policy"]
    assert 0.0 <= ev["wilson95"][0] <= ev["wilson95"][1] <= 1.0

    code, text, err = run("learn", "debug", run_dir, "--dataset", demos, "--task", "lift-cube",
                          "--probes", "4", "--json")
    assert code in (0, 1), err
    codes = [f["code"] for f in json.loads(text)["findings"]]
    assert all(c.startswith("P") for c in codes)
    assert code == (1 if any(f["severity"] == "error" for f in json.loads(text)["findings"]) else 0)

    code, text, err = run("learn", "profile", run_dir, "--task", "lift-cube", "--ticks", "10", "--json")
    assert code in (0, 1), err
    assert "achievable_hz" in json.dumps(json.loads(text))

    code, text, err = run("learn", "autopsy", run_dir, demos, "--task", "lift-cube", "--episodes", "1",
                          "--json")
    assert code in (0, 1), err
    report = json.loads(text)
    assert "verdict" in json.dumps(report)


def test_a_five_step_policy_is_judged_worse_than_the_expert(run_dir):
    """Exit codes gate: E-codes are warnings (exit 0); the scripted baseline on the same seeds succeeds."""
    code, text, _ = run("learn", "eval", "scripted", "--task", "lift-cube", "--episodes", "2", "--json")
    assert code == 0
    assert json.loads(text)["successes"] == 2


@pytest.mark.parametrize("argv, needle", [
    (("learn", "train", "{demos}", "--out", "{tmp}/r", "--config", "{not json"), "--config: not valid JSON"),
    (("learn", "train", "{demos}", "--out", "{tmp}/r", "--config", '{"hiden": [8]}'),
     "unknown key(s) 'hiden'"),
    (("learn", "train", "{demos}", "--out", "{tmp}/r", "--config",
      '{"chunk_size": 2, "n_action_steps": 5}'),
     "n_action_steps (5) > chunk_size (2)"),
    (("learn", "train", "{tmp}/nowhere", "--out", "{tmp}/r"), "nowhere"),
    (("learn", "train", "{demos}", "--out", "{tmp}/r", "--steps", "1000000000"), "over the limit"),
    (("learn", "eval", "scripted", "--task", "lift-cube", "--episodes", "100000000"), "over the limit"),
    (("learn", "eval", "{tmp}/nowhere", "--task", "lift-cube"), "nowhere"),
    (("learn", "eval", "scripted", "--task", "lift-cub"), "lift-cub"),
])
def test_bad_input_is_one_line(argv, needle, demos, tmp_path):
    argv = [a.replace("{demos}", str(demos)).replace("{tmp}", str(tmp_path)) for a in argv]
    code, _, err = run(*argv)
    assert code == 2, err
    assert needle in err and err.strip().count("\n") == 0 and "Traceback" not in err


@pytest.mark.slow
def test_demo_full_learns_lift_cube(tmp_path):
    code, text, err = run("demo", "--full", "--out", tmp_path / "full", "--json")
    assert code == 0, err
    report = json.loads(text)
    assert report["stages"]["demos"]["successes"] == 40
    assert report["verdict"]["success_rate"] >= 0.7
    assert (tmp_path / "full" / "demos" / "meta" / "info.json").is_file()


def test_sweep_runs_the_protocol_with_training_seed_groups(run_dir, tmp_path):
    """`learn sweep NAME=RUN1,RUN2 --split test --table --png`: one row per policy x task x level with
    the runs' mean +- spread and a Wilson interval on distinct episodes (level none: 1 per run)."""
    table, png = tmp_path / "table.json", tmp_path / "sweep.png"
    code, text, err = run("learn", "sweep", f"bc={run_dir},{run_dir}", "--task", "lift-cube", "--levels",
                          "none", "default", "--split", "test", "--episodes", "2", "--table", table,
                          "--png", png, "--json")
    assert code == 0, err
    report = json.loads(text)
    rows = {r["level"]: r for r in report["table"]["rows"]}
    assert report["table"]["eval_seeds"] == [1_000_000] and report["table"]["split"] == ["test"]
    assert [r["run"] for r in rows["none"]["per_run"]] == ["bc[0]", "bc[1]"]
    assert rows["none"]["training_runs"] == 2 and rows["none"]["std"] == 0.0     # the same run twice
    assert (rows["none"]["episodes"], rows["none"]["n_effective"]) == (4, 2)
    assert (rows["default"]["episodes"], rows["default"]["n_effective"]) == (4, 4)
    assert json.loads(table.read_text()) == report["table"] and png.stat().st_size > 0
    code, _, err = run("learn", "sweep", f"bc={run_dir}", "--task", "lift-cube", "--split", "test", "--seeds",
                       "7")
    assert code == 2 and "seed 7 is not a test seed" in err

"""``caliper task``: the zoo listing, a task's summary, the task check and the witness, in-process."""
import json

import pytest

from caliper_jax.cli import main
from tasks.schema import zoo_names


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_task_list_names_every_zoo_task(capsys):
    code, out, _ = run(capsys, "task", "list", "--json")
    assert code == 0
    rows = json.loads(out)["tasks"]
    assert [r["name"] for r in rows] == zoo_names(arms=True) and len(rows) > 5
    assert [r["name"] for r in rows][:5] == zoo_names()
    grasp = {r["name"]: r["grasp"] for r in rows}
    assert grasp["lift-cube"] == "weld" and grasp["panda-pick-place"] == "friction"
    assert all(r["success"] for r in rows)


def test_task_show_reports_the_resolved_task(capsys):
    code, out, _ = run(capsys, "task", "show", "place-cube", "--json")
    report = json.loads(out)
    assert code == 0 and report["name"] == "place-cube"
    assert report["success"]["zone"] == "bin" and report["robot_path"].endswith("gripper_arm.urdf")
    code, out, _ = run(capsys, "task", "show", "sort-blocks")
    assert code == 0 and "tall_block" in out and "short_block" in out and "dock" in out


def test_task_unknown_name_is_one_line_with_suggestion(capsys):
    code, out, err = run(capsys, "task", "show", "lift-cub")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "did you mean 'lift-cube'" in err


def test_task_check_flags_a_prop_inside_the_robot(capsys, tmp_path):
    from tasks.schema import find_task

    data = json.loads(find_task("lift-cube").read_text())
    data["robot"] = str(find_task("lift-cube").parent.joinpath(data["robot"]).resolve())
    data["scene"]["props"][0]["pos"] = [0.0, 0.0, 0.14]          # through the jaw
    bad = tmp_path / "bad.caliper-task.json"
    bad.write_text(json.dumps(data))
    code, out, _ = run(capsys, "task", "check", str(bad), "--no-sim", "--json")
    report = json.loads(out)
    assert code == 1 and not report["ok"]
    assert any(f["code"] == "K002" and "cube" in f["message"] for f in report["findings"])
    code, out, _ = run(capsys, "task", "check", "lift-cube", "--no-sim", "--json")
    assert code == 0 and json.loads(out)["ok"]
    code, out, err = run(capsys, "task", "check", "lift-cube", "--baselines", "-1")
    assert code == 2 and out == "" and "--baselines: expected episodes >= 0, got -1" in err


@pytest.mark.parametrize("name", ["lift-cube"])
def test_task_witness_holds_in_simulation(capsys, name):
    code, out, _ = run(capsys, "task", "witness", name, "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"] and not report["verdict_at_start"] and report["verdict_settled"]

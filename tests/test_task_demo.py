"""``caliper task demo``: scripted demonstrations as a LeRobot v3 dataset -- byte-identical for the
same seed, passing the dataset doctor, with per-episode outcomes and randomisation draws."""
import hashlib
import json
from pathlib import Path

import pytest

from caliper_jax.cli import main
from caliper_jax.dataset import LeRobotReader
from caliper_jax.dataset.tags import read_tags
from doctors.dataset import diagnose
from tasks.demo import DEMOS_PATH


def digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    roots = []
    for name in ("a", "b"):
        root = tmp_path_factory.mktemp("demo") / name
        code = main(["task", "demo", "lift-cube", "--episodes", "3", "--worlds", "2", "--seed", "7",
                     "--out", str(root), "--json"])
        assert code == 0
        roots.append(root)
    return roots


def test_same_seed_gives_a_byte_identical_dataset(demos):
    assert digest(demos[0]) == digest(demos[1])


def test_demo_dataset_passes_the_doctor_and_holds_the_episodes(demos):
    root = demos[0]
    report = diagnose(root)
    assert not [f for f in report.findings if f.severity.lower() == "error"], report.findings
    reader = LeRobotReader(root)
    assert reader.num_episodes == 3
    assert set(reader.features) >= {"observation.state", "action", "observation.environment_state"}
    assert reader.features["observation.environment_state"]["shape"] == [7]
    assert reader.tasks[0].startswith("lift-cube: cube lifted")
    side = json.loads((root / DEMOS_PATH).read_text())
    assert side["task"] == "lift-cube" and side["seed"] == 7 and len(side["episodes"]) == 3
    assert [(e["world_episode"], e["world"]) for e in side["episodes"]] == [(0, 0), (0, 1), (1, 0)]
    for e in side["episodes"]:
        assert e["success"] and set(e["randomization"]) >= {"prop_xy", "prop_mass", "gain"}
    assert read_tags(root) == {0: ["success"], 1: ["success"], 2: ["success"]}
    first = reader.episode(0)
    assert len(first["action"]) == side["episodes"][0]["length"]


def test_demo_refuses_a_non_empty_output(tmp_path, capsys):
    out = tmp_path / "ds"
    out.mkdir()
    (out / "keep").write_text("x")
    code = main(["task", "demo", "lift-cube", "--episodes", "1", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "not an empty folder" in err and (out / "keep").exists()

"""Real lerobot loads a dataset recorded by ``caliper task demo`` (run by .ci/lerobot_compat.sh).

The demos are recorded by the main venv's ``caliper`` (the lerobot venv installs caliper_jax
without its simulation dependencies); skipped with the reason where that venv is missing."""
from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("lerobot", reason="lerobot not installed; run .ci/lerobot_compat.sh")
from lerobot.datasets.lerobot_dataset import LeRobotDataset  # noqa: E402

from caliper_jax.dataset import LeRobotReader  # noqa: E402

CALIPER = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "caliper"


def test_lerobot_loads_scripted_demos(tmp_path):
    if not CALIPER.exists():
        pytest.skip(f"{CALIPER} not found (the main venv records the demos)")
    root = tmp_path / "demos"
    subprocess.run([str(CALIPER), "task", "demo", "place-cube", "--episodes", "2", "--worlds", "2",
                    "--out", str(root)], check=True, capture_output=True, text=True, timeout=900)
    ours = LeRobotReader(root)
    theirs = LeRobotDataset("caliper/demos", root=root)
    assert len(theirs) == ours.num_frames and theirs.meta.total_episodes == 2
    for ep in range(2):
        arrays = ours.episode(ep)
        for k in (0, len(arrays["index"]) - 1):
            item = theirs[int(arrays["index"][k])]
            for key in ("observation.state", "action", "observation.environment_state"):
                np.testing.assert_array_equal(item[key].numpy(), arrays[key][k])
            assert item["task"].startswith("place-cube: ")

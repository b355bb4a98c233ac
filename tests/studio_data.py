"""A small LeRobot v3 dataset for the studio tests (tests/test_studio.py, tests/browser)."""

import numpy as np


def write_wave_dataset(root):
    """4 episodes of a 3-joint wave for gripper_arm; episode 3 repeats episode 1 (doctor D015)."""
    from caliper_jax.dataset import LeRobotWriter

    rng = np.random.default_rng(0)
    names = ["j1", "j2", "gripper"]
    feats = {
        "observation.state": {"dtype": "float32", "shape": [3], "names": names},
        "action": {"dtype": "float32", "shape": [3], "names": names},
    }
    with LeRobotWriter(root, 50, feats, robot_type="gripper_arm") as w:
        eps = []
        for e in range(4):
            t = np.linspace(0, 1, 40)[:, None]
            q = np.array([0.5, -0.4, 0.02]) * np.sin(2 * np.pi * (t + 0.1 * e))
            q = (q + 0.01 * rng.standard_normal(q.shape)).astype(np.float32)
            q[:, 2] = np.clip(q[:, 2], 0, 0.04)
            q = eps[1] if e == 3 else q
            eps.append(q)
            w.add_frames({"observation.state": q, "action": np.roll(q, -1, axis=0)})
            w.save_episode(task="wave")
    return root

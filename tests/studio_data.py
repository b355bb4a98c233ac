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


CAMERA_KEY = "observation.images.front"
CAMERA_HW = (48, 64)


def camera_frame(episode: int, frame: int) -> np.ndarray:
    """(H, W, 3) uint8 frame of the camera dataset: the left half in the episode's colour, the
    right half a grey level that climbs by 20 per frame (so a wrong episode or frame shows)."""
    h, w = CAMERA_HW
    img = np.empty((h, w, 3), np.uint8)
    img[:, : w // 2] = ((220, 30, 30), (30, 200, 30), (30, 60, 220))[episode % 3]
    img[:, w // 2 :] = min(20 + 20 * frame, 255)
    return img


def write_camera_dataset(root, episodes: int = 3, length: int = 10):
    """``episodes`` episodes of ``length`` frames at 10 fps for gripper_arm with one video feature
    (``CAMERA_KEY``, frames from :func:`camera_frame`); the episodes share one MP4 file."""
    from caliper_jax.dataset import LeRobotWriter

    names = ["j1", "j2", "gripper"]
    feats = {
        "observation.state": {"dtype": "float32", "shape": [3], "names": names},
        CAMERA_KEY: {"dtype": "video", "shape": [*CAMERA_HW, 3]},
    }
    with LeRobotWriter(root, 10, feats, robot_type="gripper_arm") as w:
        for e in range(episodes):
            t = np.arange(length)[:, None] / length
            q = (np.array([0.5, -0.4, 0.02]) * np.sin(2 * np.pi * (t + 0.2 * e))).astype(np.float32)
            q[:, 2] = np.clip(q[:, 2], 0, 0.04)
            frames = np.stack([camera_frame(e, k) for k in range(length)])
            w.add_frames({"observation.state": q, CAMERA_KEY: frames})
            w.save_episode(task="wave")
    return root

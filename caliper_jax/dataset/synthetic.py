"""A healthy synthetic teleop-like dataset: smooth joint motion, leading action labels, noisy camera.

Deterministic for a seed. Used by the tests (zero doctor findings), the benchmark and demos.
"""

from __future__ import annotations

import numpy as np

from caliper_jax.dataset.writer import LeRobotWriter

TASKS = ("reach the cube", "push the cube")


def features(dim: int = 6, image: tuple[int, int] | None = None) -> dict:
    names = [f"joint{j}" for j in range(dim)]
    out = {
        "observation.state": {"dtype": "float32", "shape": [dim], "names": names},
        "action": {"dtype": "float32", "shape": [dim], "names": names},
    }
    if image:
        out["observation.images.cam"] = {"dtype": "image", "shape": [image[0], image[1], 3]}
    return out


def episode(
    seed: int, ep: int, length: int, fps: int, dim: int = 6, image: tuple[int, int] | None = None
) -> dict:
    """Arrays of one episode: joints follow sines with random frequency/phase; action leads by 0.1 s."""
    rng = np.random.default_rng([seed, ep])
    amp = rng.uniform(0.6, 1.4, dim)
    omega = rng.uniform(1.5, 3.0, dim)
    phase = rng.uniform(0, 2 * np.pi, dim)
    offset = rng.uniform(-0.5, 0.5, dim)
    t = np.arange(length)[:, None] / fps
    state = amp * np.sin(omega * t + phase) + offset
    action = amp * np.sin(omega * (t + 0.1) + phase) + offset
    out = {"observation.state": state.astype(np.float32), "action": action.astype(np.float32)}
    if image:
        h, w = image
        frames = rng.integers(40, 200, size=(length, h, w, 3), dtype=np.uint8)
        for k in range(length):
            y, x = (k * 2) % h, (k * 3) % w
            frames[k, y : y + 3, x : x + 3] = 250
        out["observation.images.cam"] = frames
    return out


def write_synthetic(
    root,
    episodes: int = 12,
    length: int = 90,
    fps: int = 30,
    seed: int = 0,
    dim: int = 6,
    image: tuple[int, int] | None = None,
    **writer_options,
) -> LeRobotWriter:
    """Write a healthy dataset at ``root`` (lengths vary by up to +-10%); return the closed writer."""
    rng = np.random.default_rng(seed)
    with LeRobotWriter(
        root, fps, features(dim, image), robot_type="synthetic_arm", **writer_options
    ) as writer:
        for ep in range(episodes):
            n = int(length * rng.uniform(0.9, 1.1))
            writer.add_frames(episode(seed, ep, n, fps, dim, image))
            writer.save_episode(task=TASKS[ep % len(TASKS)])
    return writer

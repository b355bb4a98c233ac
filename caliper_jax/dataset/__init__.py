"""LeRobotDataset v3.0 read / write / edit on NumPy + pyarrow (no JAX import anywhere here).

- ``LeRobotWriter``: streaming writer (add_frame -> save_episode -> close), crash-safe, appending.
- ``LeRobotReader``: episodes and frames as NumPy, metadata, tasks, stats, tags.
- ``delete_episodes`` / ``split_episode`` / ``merge_episodes`` / ``tag_episode``: offline edits.
- ``recover``: finish or discard an interrupted write.
"""

from caliper_jax.dataset.atomic import recover
from caliper_jax.dataset.edit import delete_episodes, merge_episodes, split_episode, tag_episode
from caliper_jax.dataset.reader import LeRobotReader
from caliper_jax.dataset.writer import LeRobotWriter

__all__ = [
    "LeRobotReader",
    "LeRobotWriter",
    "delete_episodes",
    "merge_episodes",
    "recover",
    "split_episode",
    "tag_episode",
]

"""Video read benchmark: decode the last episode of a 100-episode MP4 vs a 1-episode MP4.

    .venv/bin/python benchmarks/bench_video.py            # 96x96, 50 frames/episode, 100 episodes
    .venv/bin/python benchmarks/bench_video.py --json     # one JSON object

Both datasets are written by ``LeRobotWriter`` (libsvtav1, episodes concatenated per file at
``close()``); the read goes through ``LeRobotReader.video_frames``, which seeks to the keyframe at
or before the episode's ``from_timestamp``. The target is about the same time for both files.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from caliper_jax.dataset import LeRobotReader, LeRobotWriter, video  # noqa: E402

FPS = 30


def frames(ep: int, n: int, size: int) -> np.ndarray:
    """Smooth moving gradients, uint8 (n, size, size, 3)."""
    y, x = np.mgrid[0:size, 0:size]
    out = np.empty((n, size, size, 3), np.uint8)
    for k in range(n):
        out[k, ..., 0] = (2 * x + 3 * k + 7 * ep) % 256
        out[k, ..., 1] = (2 * y + k) % 256
        out[k, ..., 2] = (x + y + 5 * ep) % 256
    return out


def write(root: Path, episodes: int, length: int, size: int) -> float:
    feats = {"cam": {"dtype": "video", "shape": [size, size, 3]}}
    start = time.perf_counter()
    with LeRobotWriter(root, FPS, feats) as w:
        for ep in range(episodes):
            w.add_frames({"cam": frames(ep, length, size)})
            w.save_episode(task="bench")
    return time.perf_counter() - start


def time_read(root: Path, repeats: int) -> dict:
    reader = LeRobotReader(root)
    last = reader.num_episodes - 1
    meta = reader.episodes[last]
    trace: list[float] = []
    video.decode(reader.video_path(last, "cam"), meta["videos/cam/from_timestamp"], meta["length"], FPS,
                 trace=trace)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        reader.video_frames(last, "cam")
        times.append(time.perf_counter() - start)
    return {
        "episodes_in_file": reader.num_episodes,
        "read_last_episode_ms": 1e3 * statistics.median(times),
        "frames_decoded": len(trace),
        "file_mb": reader.video_path(last, "cam").stat().st_size / 2**20,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--length", type=int, default=50, help="frames per episode")
    ap.add_argument("--size", type=int, default=96, help="square frame side, px (>= 32)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        many, one = Path(tmp) / "many", Path(tmp) / "one"
        write_s = write(many, args.episodes, args.length, args.size)
        write(one, 1, args.length, args.size)
        res_many, res_one = time_read(many, args.repeats), time_read(one, args.repeats)
    report = {
        "frame": [args.size, args.size],
        "frames_per_episode": args.length,
        "write_many_s": write_s,
        "many": res_many,
        "one": res_one,
        "ratio_many_over_one": res_many["read_last_episode_ms"] / res_one["read_last_episode_ms"],
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"read the last episode ({args.length} frames of {args.size}x{args.size}):")
    for name in ("many", "one"):
        r = report[name]
        print(f"  {r['episodes_in_file']:4d}-episode file ({r['file_mb']:.2f} MB): "
              f"{r['read_last_episode_ms']:7.2f} ms, {r['frames_decoded']} frames decoded")
    print(f"  ratio {report['ratio_many_over_one']:.2f} (target ~1); writing {args.episodes} episodes "
          f"took {write_s:.1f} s")


if __name__ == "__main__":
    main()

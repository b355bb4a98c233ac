"""Record closed-loop episodes as a LeRobot v3 dataset (``observation.state`` = measured q,
``action`` = the gated command) with exact tick decimation: a frame every ``1 / (fps dt)``
ticks, so timestamps are exactly k / fps. ``fps`` must divide the tick rate ``1 / dt``.

- :class:`Recorder` captures frames tick by tick (e.g. from :class:`ControlLoop.run`), one
  episode per world.
- :func:`record` runs batched rollouts (one jitted scan per chunk of ticks, decimated inside the
  scan) and writes one episode per world. Same inputs, same bytes.
"""
from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np

from caliper_jax import progress as progress_bar
from caliper_jax.control.controller import ControlParams, control_params
from caliper_jax.control.runner import check_dt, initial_states, run_chunk
from caliper_jax.control.safety import SafetyParams, safety_params
from caliper_jax.dataset import LeRobotWriter
from caliper_jax.dataset.format import INFO_PATH
from caliper_jax.errors import CaliperError
from caliper_jax.model import Model

#: Ticks simulated per jitted call of :func:`record` (the progress bar advances per call).
CHUNK_TICKS = 5000


def decimation(dt: float, fps: int) -> int:
    """Ticks per recorded frame, ``1 / (fps dt)``; an error unless it is a whole number."""
    if int(fps) != fps or fps < 1:
        raise CaliperError(f"fps must be a positive integer, got {fps}")
    if not (np.isfinite(dt) and dt > 0):
        raise CaliperError(f"dt must be a positive number of seconds, got {dt}")
    rate = 1.0 / dt
    every = round(rate / fps)
    if every < 1 or abs(every * fps * dt - 1.0) > 1e-6:       # 1e-6: a float32 dt still divides
        top = min(int(round(rate)), 100_000)      # a tiny dt must not make the hint loop forever
        divisors = [f for f in range(1, top + 1) if abs(rate / f - round(rate / f)) < 1e-9]
        hint = ", ".join(str(f) for f in divisors[:12]) + (", ..." if len(divisors) > 12 else "")
        raise CaliperError(f"fps {fps} does not divide the tick rate {rate:g} Hz (1/dt); "
                           f"frames must fall on whole ticks, so use one of: {hint}")
    return int(every)


def check_root(root) -> None:
    """Fail before simulating when the writer would refuse the directory."""
    root = Path(root)
    if root.exists() and (not root.is_dir() or (any(root.iterdir()) and not (root / INFO_PATH).exists())):
        raise CaliperError(f"{root}: exists and is not a dataset root (choose a new or empty directory)")


def features(joint_names) -> dict:
    names = list(joint_names)
    spec = {"dtype": "float32", "shape": [len(names)], "names": names}
    return {"observation.state": dict(spec), "action": dict(spec)}


class Recorder:
    """Tick-by-tick capture into a LeRobot v3 dataset, one episode per world.

    ``capture(tick, q, action)`` keeps the frame only when ``tick`` falls on the decimation grid
    (every ``1 / (fps dt)`` ticks, counted from the first captured tick of the episode);
    ``save(task)`` writes the buffered worlds as episodes; ``discard()`` drops them."""

    def __init__(self, root, joint_names, fps: int = 50, dt: float = 1e-3, *, nworld: int = 1,
                 robot_type: str | None = None):
        self.every = decimation(dt, fps)
        self.fps, self.dt, self.nworld = int(fps), float(dt), int(nworld)
        self.nq = len(joint_names)
        self.writer = LeRobotWriter(root, self.fps, features(joint_names), robot_type=robot_type)
        self._start = None
        self._q: list[np.ndarray] = []
        self._a: list[np.ndarray] = []

    @property
    def frames(self) -> int:
        return sum(x.shape[0] for x in self._q)

    def _rows(self, x, what) -> np.ndarray:
        arr = np.asarray(x, dtype=np.float64)
        arr = arr.reshape((1,) * (3 - arr.ndim) + arr.shape) if arr.ndim < 3 else arr
        if arr.shape[1:] != (self.nworld, self.nq):
            raise CaliperError(f"{what}: expected (..., {self.nworld}, {self.nq}) values, got {np.shape(x)}")
        return arr

    def capture(self, tick: int, q, action) -> bool:
        """Buffer (q, action) of every world (each (nworld, nq) or (nq,)) if ``tick`` is on the grid."""
        if self._start is None:
            self._start = int(tick)
        if (int(tick) - self._start) % self.every:
            return False
        self.add_frames(np.asarray(q)[None], np.asarray(action)[None])
        return True

    def add_frames(self, q, action) -> None:
        """Buffer already-decimated frames: (nframe, nworld, nq) each."""
        q, a = self._rows(q, "q"), self._rows(action, "action")
        if q.shape != a.shape:
            raise CaliperError(f"q {q.shape} and action {a.shape} differ in shape")
        self._q.append(q)
        self._a.append(a)

    def save(self, task: str = "reach the goal") -> list[int]:
        """Write each world's buffered frames as one episode; return the episode indices."""
        if not self._q:
            raise CaliperError("Recorder.save: no frames captured")
        q, a = np.concatenate(self._q), np.concatenate(self._a)
        out = []
        for w in range(self.nworld):
            self.writer.add_frames({"observation.state": q[:, w].astype(np.float32),
                                    "action": a[:, w].astype(np.float32)})
            out.append(self.writer.save_episode(task=task))
        self.discard()
        return out

    def discard(self) -> None:
        self._q, self._a, self._start = [], [], None

    def close(self) -> None:
        self.writer.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class RecordResult(NamedTuple):
    root: str
    episodes: list
    frames_per_episode: int
    every: int                 # ticks per frame
    ticks: int
    q_final: np.ndarray        # (nworld, nq) state after the simulated ticks
    estopped: np.ndarray       # (nworld,)
    warn_count: np.ndarray     # (nworld, NFLAGS)
    warn_first: np.ndarray     # (nworld, NFLAGS)
    max_abs_tau: np.ndarray    # (nworld, nv)


def record(root, model: Model, source, q0, ticks: int, fps: int = 50, *, params: ControlParams | None = None,
           safety: SafetyParams | None = None, task: str = "reach the goal", seed: int = 0, v0=None,
           source_batched: bool = False, randomized=(), progress: bool | None = None,
           chunk_ticks: int = CHUNK_TICKS, write_guard=nullcontext) -> RecordResult:
    """Roll out every world of ``q0`` ((nq,) or (nworld, nq)) for ``ticks`` ticks and record one
    episode per world at ``fps``: frames at ticks 0, n, 2n, ... < ticks (n = 1 / (fps dt)).

    The rollout runs in jitted chunks of whole frames (~``chunk_ticks`` ticks); the last chunk is
    padded to the chunk size, and its extra ticks are simulated but not recorded. ``progress``:
    a bar with an ETA on stderr (None: see :func:`caliper_jax.progress.enabled`).
    ``write_guard()`` is entered around the dataset write (the CLI's interrupt guard): nothing is
    written before the rollout has finished."""
    params = params or control_params(model)
    safety = safety or safety_params(model, float(params.dt))
    dt = check_dt(params, safety)
    every = decimation(dt, fps)
    ticks = int(ticks)
    if ticks < 1:
        raise CaliperError(f"ticks must be >= 1, got {ticks}")
    check_root(root)
    frames = -(-ticks // every)
    per_chunk = min(frames, max(1, int(chunk_ticks) // every))
    q0 = np.asarray(q0, dtype=np.float64)
    q0b = q0[None] if q0.ndim == 1 else q0
    state, _ = initial_states(model, q0b, v0, seed)
    nworld = q0b.shape[0]
    names = list(model.joint_names)
    q_rows, a_rows = [], []
    with progress_bar.bar(frames * every, "record", unit="tick", enabled=progress) as bar:
        done = 0
        while done < frames:
            state, rows = run_chunk(model, params, safety, source, state, per_chunk * every, every, True,
                                    tuple(randomized), source_batched)
            take = min(per_chunk, frames - done)
            q_rows.append(np.asarray(rows.q)[:, :take])        # (nworld, frames, nq)
            a_rows.append(np.asarray(rows.command)[:, :take])
            done += take
            bar.update(take * every)
    q_all = np.concatenate(q_rows, axis=1).transpose(1, 0, 2)
    a_all = np.concatenate(a_rows, axis=1).transpose(1, 0, 2)
    with write_guard(), Recorder(root, names, fps, dt, nworld=nworld, robot_type=model.name) as rec:
        rec.add_frames(q_all, a_all)
        episodes = rec.save(task)
    final = jax.tree_util.tree_map(np.asarray, state)
    return RecordResult(str(root), episodes, frames, every, ticks, final.q, final.safety.estop,
                        final.stats.count, final.stats.first, final.stats.max_abs_tau)


__all__ = ["CHUNK_TICKS", "RecordResult", "Recorder", "check_root", "decimation", "features", "record"]

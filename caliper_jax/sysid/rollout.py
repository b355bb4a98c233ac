"""Differentiable MJX rollouts from recorded states and controls (chunked multiple shooting).

Trajectories are ``qpos`` (E, T+1, nq), ``qvel`` (E, T+1, nv) (MuJoCo's coordinates of the
whole scene, props included) and ``ctrl`` (E, T, nu), one row per ``mj.opt.timestep``: row t+1
is the state after one ``mj_step`` from row t under ``ctrl[t]``.

Multiple shooting: the horizon is cut into chunks of K steps; every chunk restarts from the
*recorded* state at its start and is simulated K steps with the recorded controls. Errors then
cannot compound past one chunk (a long horizon stays well conditioned and its gradient does not
blow up through chaotic contact), and all chunks of all episodes are one ``vmap``.

Everything here is a pure function (no jit); :mod:`caliper_jax.sysid.identify` jits the loss.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from caliper_jax.errors import CaliperError


class Chunks(NamedTuple):
    """Shooting segments, S = episodes x chunks. ``qpos0`` (S, nq), ``qvel0`` (S, nv): recorded
    start states; ``ctrl`` (S, K, nu); ``qpos`` (S, K, nq), ``qvel`` (S, K, nv): recorded states
    after each of the K steps."""

    qpos0: np.ndarray
    qvel0: np.ndarray
    ctrl: np.ndarray
    qpos: np.ndarray
    qvel: np.ndarray


class Trajectories(NamedTuple):
    """Recorded episodes: qpos (E, T+1, nq), qvel (E, T+1, nv), ctrl (E, T, nu)."""

    qpos: np.ndarray
    qvel: np.ndarray
    ctrl: np.ndarray

    @property
    def episodes(self) -> int:
        return self.qpos.shape[0]

    @property
    def steps(self) -> int:
        return self.ctrl.shape[1]

    def take(self, idx) -> Trajectories:
        idx = np.asarray(idx, dtype=np.int64)
        return Trajectories(self.qpos[idx], self.qvel[idx], self.ctrl[idx])


def check_trajectories(mj, qpos, qvel, ctrl, what: str = "data") -> Trajectories:
    """Validated float64 :class:`Trajectories` for the MjModel ``mj``; errors name the array."""
    mj = getattr(mj, "mj", mj)
    arrs = {}
    for name, arr, n, extra in (("qpos", qpos, mj.nq, 1), ("qvel", qvel, mj.nv, 1), ("ctrl", ctrl, mj.nu, 0)):
        if arr is None:
            raise CaliperError(f"{what}: missing array {name!r}")
        a = np.asarray(arr, dtype=np.float64)
        if a.ndim == 2:
            a = a[None]
        if a.ndim != 3 or a.shape[2] != n:
            rows = "steps + 1" if extra else "steps"
            raise CaliperError(f"{what}.{name}: expected shape (episodes, {rows}, {n}), got {np.shape(arr)}")
        if not np.all(np.isfinite(a)):
            raise CaliperError(f"{what}.{name}: non-finite values")
        arrs[name] = a
    E, T = arrs["ctrl"].shape[:2]
    for name in ("qpos", "qvel"):
        if arrs[name].shape[:2] != (E, T + 1):
            raise CaliperError(f"{what}.{name}: expected {E} episodes of {T + 1} rows (ctrl has {E} x {T}), "
                               f"got {arrs[name].shape[0]} x {arrs[name].shape[1]}")
    if T < 1:
        raise CaliperError(f"{what}: need at least one step")
    return Trajectories(arrs["qpos"], arrs["qvel"], arrs["ctrl"])


def make_chunks(traj: Trajectories, chunk: int) -> Chunks:
    """Cut every episode into ``T // chunk`` segments of ``chunk`` steps (a remainder is dropped)."""
    chunk = int(chunk)
    T = traj.steps
    if chunk < 1 or chunk > T:
        raise CaliperError(f"--chunk: need 1 <= chunk <= steps per episode ({T}), got {chunk}")
    C = T // chunk
    starts = np.arange(C) * chunk
    E = traj.episodes
    q0 = traj.qpos[:, starts].reshape(E * C, -1)
    v0 = traj.qvel[:, starts].reshape(E * C, -1)
    steps = starts[:, None] + np.arange(chunk)[None]            # (C, K) control rows
    ctrl = traj.ctrl[:, steps].reshape(E * C, chunk, -1)
    qpos = traj.qpos[:, steps + 1].reshape(E * C, chunk, -1)
    qvel = traj.qvel[:, steps + 1].reshape(E * C, chunk, -1)
    return Chunks(q0, v0, ctrl, qpos, qvel)


def rollout(mx, data0, qpos0, qvel0, ctrl):
    """One segment: (qpos (K, nq), qvel (K, nv)) after each of the K ``mjx.step`` s from
    (qpos0, qvel0) under ctrl (K, nu). ``data0``: an ``mjx.Data`` template (``mjx.make_data``)."""
    import jax

    from mjx_backend.versions import import_mjx

    mjx = import_mjx()
    d = data0.replace(qpos=qpos0, qvel=qvel0)

    def step(d, c):
        d = mjx.step(mx, d.replace(ctrl=c))
        return d, (d.qpos, d.qvel)

    _, (qp, qv) = jax.lax.scan(step, d, ctrl)
    return qp, qv


def rollout_chunks(mx, data0, chunks: Chunks):
    """All segments at once (vmap): (qpos (S, K, nq), qvel (S, K, nv))."""
    import jax

    return jax.vmap(lambda q, v, c: rollout(mx, data0, q, v, c))(chunks.qpos0, chunks.qvel0, chunks.ctrl)


def residuals(mx, data0, chunks: Chunks, scale):
    """(S * K * (nq + nv),) prediction errors of all segments, each feature divided by its
    ``scale`` (nq + nv,) (so qpos in m or rad and qvel in m/s or rad/s weigh alike)."""
    import jax.numpy as jnp

    qp, qv = rollout_chunks(mx, data0, chunks)
    err = jnp.concatenate([qp - chunks.qpos, qv - chunks.qvel], axis=-1)
    return (err / scale).reshape(-1)


def simulate(mj, qpos0, qvel0, ctrl):
    """MuJoCo C reference rollout of one episode: (qpos (T+1, nq), qvel (T+1, nv)) from the start
    state under ctrl (T, nu), one ``mj_step`` per row."""
    import mujoco

    mj = getattr(mj, "mj", mj)
    d = mujoco.MjData(mj)
    d.qpos[:], d.qvel[:] = qpos0, qvel0
    mujoco.mj_forward(mj, d)
    T = len(ctrl)
    qp, qv = np.zeros((T + 1, mj.nq)), np.zeros((T + 1, mj.nv))
    qp[0], qv[0] = d.qpos, d.qvel
    for t in range(T):
        d.ctrl[:] = ctrl[t]
        mujoco.mj_step(mj, d)
        qp[t + 1], qv[t + 1] = d.qpos, d.qvel
    return qp, qv


__all__ = ["Chunks", "Trajectories", "check_trajectories", "make_chunks", "residuals", "rollout",
           "rollout_chunks", "simulate"]

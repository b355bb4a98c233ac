"""CPU MuJoCo behind the backend contract.

One world steps its own ``MjData`` with ``mj_step`` (the solver warmstart carries over from step
to step, exactly as in a plain MuJoCo loop). Several worlds go through MuJoCo's native threaded
``mujoco.rollout`` (C, one thread per core by default): the backend keeps every world's full
physics state (``mjSTATE_FULLPHYSICS``) as one array and hands it to a persistent thread pool
with the controls, applied forces and active equalities of the tick. Every ``step(dt)`` is one
rollout call of dt/timestep steps that starts the solver from a zero warmstart (the rollout API
takes a warmstart in but does not give one back); within a call each world equals a sequential
``mj_step`` loop bit for bit, and a whole run is reproducible bit for bit after ``reset()``.

Per-world model parameters (domain randomisation, a weld pose captured in one world) use one
``MjModel`` copy per world, which the rollout accepts as a list.
"""
from __future__ import annotations

import copy
import math
import os
from typing import NamedTuple

import numpy as np

from caliper_jax.errors import CaliperError
from mjx_backend.base import SimBackend, as_scene


class Contact(NamedTuple):
    geom1: str
    geom2: str
    pos: np.ndarray        # (3,) world
    normal: np.ndarray     # (3,) world, from geom1 to geom2
    depth: float           # penetration, > 0 when the geoms overlap
    normal_force: float    # N, >= 0


def _geom_name(mj, g: int) -> str:
    import mujoco

    return mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_GEOM, g) or f"geom{g}"


def read_contacts(mj, d) -> list[Contact]:
    """The contacts of ``d``'s last forward pass, with their normal forces."""
    import mujoco

    out = []
    force = np.zeros(6)
    for i in range(d.ncon):
        c = d.contact[i]
        mujoco.mj_contactForce(mj, d, i, force)
        out.append(Contact(_geom_name(mj, int(c.geom1)), _geom_name(mj, int(c.geom2)), np.array(c.pos),
                           np.array(c.frame[:3]), float(-c.dist), float(force[0])))
    return out


class MujocoBackend(SimBackend):
    """CPU MuJoCo. ``scene``: a :class:`~mjx_backend.layout.CompiledScene` or a Model (then the
    keywords of :func:`~mjx_backend.mjcf.model_to_mjcf` build the scene). ``rollout``: force the
    ``mujoco.rollout`` path (default: when nworld > 1). ``nthread``: rollout threads (default
    ``os.cpu_count()``). ``params``: per-world parameters from :func:`mjx_backend.randomize.sample`
    (or ``models``: one MjModel per world)."""

    def __init__(self, scene, nworld: int = 1, *, q0=None, v0=None, rollout: bool | None = None,
                 nthread: int | None = None, models=None, params=None, **scene_kwargs):
        import mujoco
        import mujoco.rollout

        scene = as_scene(scene, **scene_kwargs)
        super().__init__(scene, nworld, q0, v0)
        self.mj = copy.copy(scene.mj)          # this backend's own (flags and weld poses change)
        self._models = None
        if params is not None:
            if models is not None:
                raise CaliperError("give models= or params=, not both")
            from mjx_backend.randomize import mjmodels

            models = mjmodels(self.mj, params, self.nworld)
        if models is not None:
            models = list(models)
            if len(models) != self.nworld:
                raise CaliperError(f"models: expected {self.nworld} MjModels (one per world), "
                                   f"got {len(models)}")
            self._models = models
        self.use_rollout = self.nworld > 1 if rollout is None else bool(rollout)
        if not self.use_rollout and self.nworld != 1:
            raise CaliperError("rollout=False needs nworld == 1 (several worlds step through mujoco.rollout)")
        if self.use_rollout:
            self.nthread = (os.cpu_count() or 1) if nthread is None else int(nthread)
            self._pool = mujoco.rollout.Rollout(nthread=self.nthread)
            self._thread_data = [mujoco.MjData(self.mj) for _ in range(max(1, self.nthread))]
            S = mujoco.mjtState
            self._spec = int(S.mjSTATE_CTRL | S.mjSTATE_QFRC_APPLIED | S.mjSTATE_EQ_ACTIVE)
            self._nstate = mujoco.mj_stateSize(self.mj, int(S.mjSTATE_FULLPHYSICS))
            self._ncontrol = mujoco.mj_stateSize(self.mj, self._spec)
            self._buffers = {}
            self._scratch = mujoco.MjData(self.mj)
        else:
            self._data = mujoco.MjData(self._model(0))
        self._mj_step = mujoco.mj_step
        self.reset()

    # ---- models ----------------------------------------------------------------------------------
    def _model(self, world: int):
        return self.mj if self._models is None else self._models[world]

    def _all_models(self) -> list:
        return [self.mj] * self.nworld if self._models is None else self._models

    def _per_world_models(self) -> list:
        if self._models is None:
            self._models = [self.mj] if self.nworld == 1 else [copy.copy(self.mj) for _ in range(self.nworld)]
        return self._models

    def _set_actuation(self, energized: bool) -> None:
        import mujoco

        if energized == getattr(self, "_actuation_on", None):
            return
        bit = int(mujoco.mjtDisableBit.mjDSBL_ACTUATION)
        for m in ({id(m): m for m in self._all_models()}).values():
            m.opt.disableflags = (m.opt.disableflags & ~bit) if energized else (m.opt.disableflags | bit)
        self._actuation_on = energized

    def _set_eq_data(self, world: int, eq: int, data) -> None:
        if self._models is None:
            self._actuation_on = None          # new model copies: re-apply the actuation flag
        self._per_world_models()[world].eq_data[eq] = data

    # ---- primitives ------------------------------------------------------------------------------
    def _read(self):
        if not self.use_rollout:
            return self._data.qpos[None], self._data.qvel[None]
        nq, nv = self.mj.nq, self.mj.nv
        return self._state[:, 1:1 + nq], self._state[:, 1 + nq:1 + nq + nv]

    def _write_initial(self, qpos, qvel) -> None:
        import mujoco

        if not self.use_rollout:
            d, m = self._data, self._model(0)
            mujoco.mj_resetData(m, d)
            d.qpos[:] = qpos[0]
            d.qvel[:] = qvel[0]
            mujoco.mj_forward(m, d)
            return
        d = self._scratch
        mujoco.mj_resetData(self.mj, d)
        template = np.empty(self._nstate)
        mujoco.mj_getState(self.mj, d, template, int(mujoco.mjtState.mjSTATE_FULLPHYSICS))
        self._state = np.array(np.broadcast_to(template, (self.nworld, self._nstate)))
        nq, nv = self.mj.nq, self.mj.nv
        self._state[:, 1:1 + nq] = qpos
        self._state[:, 1 + nq:1 + nq + nv] = qvel
        self._warmstart = np.zeros((self.nworld, nv))

    def _unstable(self, worlds, n: int):
        raise CaliperError(
            f"world(s) {', '.join(map(str, worlds[:8]))} went unstable during ticks {self._tick}.."
            f"{self._tick + n} (MuJoCo reset them): reduce the timestep, stiffen or damp the contacts "
            "(solref), or add joint damping")

    def _advance(self, nstep, ctrl, qfrc, eq_active, energized):
        self._set_actuation(energized)
        L = self.layout
        if not self.use_rollout:
            d, m = self._data, self._model(0)
            d.ctrl[:] = ctrl[0]
            d.qfrc_applied[:] = qfrc[0]
            d.eq_active[:] = eq_active[0]
            t0 = d.time
            if nstep == 1:
                self._mj_step(m, d)
            else:
                self._mj_step(m, d, nstep=nstep)
            # MuJoCo resets a world whose state diverged (time restarts at 0)
            if d.time < t0 + (nstep - 0.5) * self.timestep or not math.isfinite(d.qvel.sum()):
                self._unstable([0], nstep)
            return d.sensordata[L.effort_sensor][None]
        W = self.nworld
        key = nstep
        if key not in self._buffers:
            self._buffers = {key: (np.empty((W, nstep, self._ncontrol)), np.empty((W, nstep, self._nstate)),
                                   np.empty((W, nstep, self.mj.nsensordata)))}
        control, state, sensordata = self._buffers[key]
        nu, nv = self.mj.nu, self.mj.nv
        control[:, :, :nu] = ctrl[:, None]
        control[:, :, nu:nu + nv] = qfrc[:, None]
        control[:, :, nu + nv:] = eq_active[:, None]
        t0 = self._state[:, 0].copy()
        self._pool.rollout(self._all_models(), self._thread_data, self._state, control,
                           control_spec=self._spec, skip_checks=True, nstep=nstep,
                           initial_warmstart=self._warmstart, state=state, sensordata=sensordata)
        self._state = state[:, -1].copy()
        bad = ~np.isfinite(self._state).all(axis=1) | (self._state[:, 0] < t0 + (nstep - 0.5) * self.timestep)
        if bad.any():
            self._unstable(np.flatnonzero(bad).tolist(), nstep)
        return sensordata[:, -1][:, L.effort_sensor]

    # ---- scene access ----------------------------------------------------------------------------
    def world_data(self, world: int = 0):
        """An MjData holding world ``world``'s current state after ``mj_forward`` (positions,
        contacts and forces of the current state). One world: the live data; several: a scratch."""
        import mujoco

        if not 0 <= world < self.nworld:
            raise CaliperError(f"world {world} out of range (nworld={self.nworld})")
        m = self._model(world)
        if not self.use_rollout:
            mujoco.mj_forward(m, self._data)
            return self._data
        d = self._scratch
        mujoco.mj_setState(m, d, self._state[world], int(mujoco.mjtState.mjSTATE_FULLPHYSICS))
        d.eq_active[:] = self._eq_active[world]
        mujoco.mj_forward(m, d)
        return d

    def contacts(self, world: int = 0) -> list[Contact]:
        """Contacts of world ``world`` at its current state."""
        return read_contacts(self._model(world), self.world_data(world))

    def close(self) -> None:
        pool = getattr(self, "_pool", None)
        if pool is not None and pool.rollout_ is not None:
            pool.close()


__all__ = ["Contact", "MujocoBackend", "read_contacts"]

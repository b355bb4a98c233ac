"""MJX behind the backend contract: many worlds as one ``jit(vmap(mjx.step))``, the accelerator path.

The compiled scene is put on the device once (``mjx.put_model``); the worlds are one batched
``mjx.Data``. A tick runs ``dt/timestep`` steps inside one jitted call (``lax.fori_loop``), with
``ctrl``, ``qfrc_applied`` and ``eq_active`` per world and an energise factor that scales the
actuator gains (0 = de-energised) -- a traced value, so enabling or disabling never recompiles.
Model parameters drawn per world (domain randomisation, a captured weld pose) are leaves of a
batched ``mjx.Model`` with a matching ``in_axes``; a new draw of the same fields reuses the
compiled function. One compilation per distinct number of steps per tick.

On a CPU MJX is orders of magnitude slower than ``mujoco.rollout`` and compiles for tens of
seconds even for a two-link arm; use :class:`~mjx_backend.cpu.MujocoBackend` there.
"""
from __future__ import annotations

import numpy as np

from caliper_jax.errors import CaliperError
from mjx_backend.base import SimBackend, as_scene
from mjx_backend.cpu import read_contacts


class MjxBackend(SimBackend):
    """``scene``: a CompiledScene or a Model (+ scene keywords). ``impl``: MJX implementation
    (default: the scene's ``options.mjx_impl``, else MJX's choice for the device). ``params``:
    per-world model parameters from :func:`mjx_backend.randomize.sample`."""

    def __init__(self, scene, nworld: int = 1, *, q0=None, v0=None, impl: str | None = None, params=None,
                 **scene_kwargs):
        import jax

        from mjx_backend.versions import import_mjx

        mjx = import_mjx()
        scene = as_scene(scene, **scene_kwargs)
        super().__init__(scene, nworld, q0, v0)
        opts = scene.mjcf.options
        self.impl = impl or opts.mjx_impl
        try:
            base = mjx.put_model(scene.mj, impl=self.impl)
        except NotImplementedError as exc:
            raise CaliperError(f"MJX ({self.impl or 'default'} impl) cannot run this scene: {exc}") from None
        sizes = {}
        if opts.nconmax is not None:
            sizes["naconmax"] = opts.nconmax * self.nworld
        if opts.njmax is not None:
            sizes["njmax"] = opts.njmax
        self._data0 = jax.tree_util.tree_map(_as_jax, mjx.make_data(base, impl=self.impl, **sizes))
        batched = dict(params or {})
        self._randomized = set(batched)
        if scene.layout.weld_eq and "eq_data" not in batched:
            batched["eq_data"] = np.broadcast_to(scene.mj.eq_data, (self.nworld,) + scene.mj.eq_data.shape)
        from mjx_backend.randomize import batch_mjx_model

        self._mx, self._in_axes = batch_mjx_model(base, batched, self.nworld)
        self._compiled = {}
        self.reset()

    def set_params(self, params: dict) -> None:
        """Swap in a new draw of the same randomised fields (same shapes): the compiled step is
        reused, nothing is retraced."""
        from mjx_backend.randomize import batch_mjx_model

        if set(params) != self._randomized:
            built = ", ".join(sorted(self._randomized)) or "none"
            raise CaliperError(f"set_params: expected exactly the fields this backend was built with "
                               f"({built}), got {', '.join(sorted(params))}")
        self._mx, _ = batch_mjx_model(self._mx, params, self.nworld)

    # ---- compiled step ---------------------------------------------------------------------------
    def _step_fn(self, nstep: int):
        if nstep not in self._compiled:
            import jax

            from mjx_backend.versions import import_mjx

            mjx = import_mjx()

            def one_world(m, d, ctrl, qfrc, eq, scale):
                m = m.replace(actuator_gainprm=m.actuator_gainprm * scale,
                              actuator_biasprm=m.actuator_biasprm * scale)
                d = d.replace(ctrl=ctrl, qfrc_applied=qfrc, eq_active=eq)
                return jax.lax.fori_loop(0, nstep, lambda _, x: mjx.step(m, x), d)

            self._compiled[nstep] = jax.jit(jax.vmap(one_world, in_axes=(self._in_axes, 0, 0, 0, 0, None)))
        return self._compiled[nstep]

    # ---- primitives ------------------------------------------------------------------------------
    def _read(self):
        return self._host

    def _sync(self) -> None:
        self._host = (np.asarray(self._data.qpos, dtype=np.float64),
                      np.asarray(self._data.qvel, dtype=np.float64))

    def _write_initial(self, qpos, qvel) -> None:
        import jax
        import jax.numpy as jnp

        dtype = self._data0.qpos.dtype
        d0 = self._data0
        data = jax.vmap(lambda qp, qv: d0.replace(qpos=qp, qvel=qv))(jnp.asarray(qpos, dtype),
                                                                     jnp.asarray(qvel, dtype))
        # committed like the jitted step's outputs, so the first and later ticks share one compilation
        self._data = jax.device_put(data, jax.tree_util.tree_leaves(self._mx)[0].devices().pop())
        self._sync()

    def _advance(self, nstep, ctrl, qfrc, eq_active, energized):
        import jax.numpy as jnp

        dtype = self._data0.qpos.dtype
        fn = self._step_fn(nstep)
        self._data = fn(self._mx, self._data, jnp.asarray(ctrl, dtype), jnp.asarray(qfrc, dtype),
                        jnp.asarray(eq_active, self._data0.eq_active.dtype),
                        jnp.asarray(1.0 if energized else 0.0, dtype))
        self._sync()
        qpos, qvel = self._host
        bad = ~(np.isfinite(qpos).all(axis=1) & np.isfinite(qvel).all(axis=1))
        if bad.any():
            raise CaliperError(f"MJX world(s) {np.flatnonzero(bad)[:8].tolist()} went non-finite during "
                               f"ticks {self._tick}..{self._tick + nstep}: reduce the timestep or soften "
                               "the contacts")
        return np.asarray(self._data.sensordata, dtype=np.float64)[:, self.layout.effort_sensor]

    def _set_eq_data(self, world: int, eq: int, data) -> None:
        if self._in_axes.eq_data is None:
            raise CaliperError("this MJX scene has no per-world equality data "
                               "(build it with props and weld_body)")
        self._mx = self._mx.replace(eq_data=self._mx.eq_data.at[world, eq].set(data))

    # ---- inspection --------------------------------------------------------------------------------
    def world_data(self, world: int = 0):
        """A CPU MjData with world ``world``'s positions and velocities after ``mj_forward`` (for
        contacts, ray casts and inspection; the solver warmstart is not carried over)."""
        import mujoco

        if not 0 <= world < self.nworld:
            raise CaliperError(f"world {world} out of range (nworld={self.nworld})")
        d = mujoco.MjData(self.mj)
        qpos, qvel = self._host
        d.qpos[:], d.qvel[:] = qpos[world], qvel[world]
        d.eq_active[:] = self._eq_active[world]
        mujoco.mj_forward(self.mj, d)
        return d

    def contacts(self, world: int = 0):
        return read_contacts(self.mj, self.world_data(world))

    def data(self):
        """The batched ``mjx.Data`` (device arrays) for code that stays on the device."""
        return self._data


def _as_jax(x):
    import jax.numpy as jnp

    return jnp.asarray(x) if isinstance(x, np.ndarray) else x


__all__ = ["MjxBackend"]

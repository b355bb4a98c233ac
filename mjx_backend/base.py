"""What the CPU and MJX simulators share: the backend contract on top of a compiled scene.

The lifecycle, modes, commands, e-stop and the mapping of joint commands onto MuJoCo's
``ctrl`` / ``qfrc_applied`` live here once; a simulator only provides four primitives
(read the MuJoCo state, write an initial state, advance n steps, write a weld pose).

Control sources. ``command(values)`` sets joint targets in the units of the active mode
(torques, positions or velocities, our (nworld, nv) coordinates) and they are mapped onto the
generated actuators; ``command_ctrl(ctrl)`` passes MuJoCo's ``ctrl`` (nworld, nu) straight
through. The most recent of the two is in force (``ctrl_source``).

Modes follow the actuators chosen when the scene was built: ``motor`` -> torque (ctrl clamped to
the effort limit), ``none`` -> torque injected through ``qfrc_applied``, ``position`` servos ->
position, ``velocity`` servos -> velocity. Torques on dofs without an actuator (free and ball
joints) always go through ``qfrc_applied``.

Energy. A disabled backend applies no actuator force (MuJoCo's actuation is switched off) and no
``qfrc_applied``. ``estop()`` latches: torque backends de-energise completely; position servos
freeze their target at the current position (a zero target would drive the arm to q = 0) and
velocity servos get a zero target -- both keep holding, as a de-energised arm would fall.
"""
from __future__ import annotations

import abc

import numpy as np

from caliper_jax.backend import Backend, BackendState, ControlMode, check_step_dt
from caliper_jax.errors import CaliperError
from mjx_backend.layout import CompiledScene, compile_scene

_MODE_OF = {"motor": ControlMode.TORQUE, "none": ControlMode.TORQUE, "position": ControlMode.POSITION,
            "velocity": ControlMode.VELOCITY}


def as_scene(scene_or_model, **scene_kwargs) -> CompiledScene:
    if isinstance(scene_or_model, CompiledScene):
        if scene_kwargs:
            raise CaliperError("scene options apply when building from a Model, not to a CompiledScene")
        return scene_or_model
    return compile_scene(scene_or_model, **scene_kwargs)


class SimBackend(Backend, abc.ABC):
    """Shared implementation of :class:`caliper_jax.backend.Backend` over a compiled scene."""

    def __init__(self, scene: CompiledScene, nworld: int, q0=None, v0=None):
        if not isinstance(nworld, (int, np.integer)) or nworld < 1:
            raise CaliperError(f"nworld must be an integer >= 1, got {nworld!r}")
        self.scene = scene
        self.layout = L = scene.layout
        self.mj = scene.mj
        self.nworld = int(nworld)
        self.nq, self.nv, self.nu = L.nq, L.nv, L.nu
        self.timestep = scene.timestep
        self.joint_names = scene.model.joint_names
        self.actuators = scene.mjcf.actuators
        self._mode = _MODE_OF[self.actuators]
        q_default = L.q_from_qpos(L.qpos0)[0]
        self._q0 = self._rows(q_default if q0 is None else q0, self.nq, "q0")
        self._v0 = self._rows(np.zeros(self.nv) if v0 is None else v0, self.nv, "v0")
        self._eq_active0 = np.array(self.mj.eq_active0, dtype=np.uint8)
        self._effort_limit = np.asarray(scene.model.dof_effort_limit, dtype=np.float64)
        self._enabled = False
        self._estopped = False
        self.ctrl_source = "targets"
        self._unactuated = L.v_to_ctrl < 0                 # dofs whose torque needs qfrc_applied
        self._any_unactuated = bool(self._unactuated.any())
        self._zero_qfrc = np.zeros((self.nworld, L.mj_nv))
        self._zero_tau = np.zeros((self.nworld, self.nv))
        self._dt_steps = {}

    # ---- primitives a simulator provides ---------------------------------------------------------
    @abc.abstractmethod
    def _read(self) -> tuple[np.ndarray, np.ndarray]:
        """(qpos (W, mj nq), qvel (W, mj nv)) of the current state."""

    @abc.abstractmethod
    def _write_initial(self, qpos: np.ndarray, qvel: np.ndarray) -> None:
        """Reset every world's full state (time 0, warmstart, eq_active0) to these qpos/qvel."""

    @abc.abstractmethod
    def _advance(self, nstep: int, ctrl, qfrc, eq_active, energized: bool) -> np.ndarray:
        """Step every world ``nstep`` times with controls held; return the actuator efforts
        (W, nu) applied in the last step; raise on instability."""

    @abc.abstractmethod
    def _set_eq_data(self, world: int, eq: int, data: np.ndarray) -> None:
        """Write one equality's ``eq_data`` row for one world."""

    # ---- helpers ---------------------------------------------------------------------------------
    def _rows(self, values, n: int, what: str) -> np.ndarray:
        arr = np.asarray(values, dtype=np.float64)
        if arr.ndim == 1:
            arr = np.broadcast_to(arr, (self.nworld, arr.shape[0]))
        if arr.shape != (self.nworld, n):
            raise CaliperError(f"{what}: expected shape ({n},) or ({self.nworld}, {n}), "
                               f"got {np.shape(values)}")
        if not np.all(np.isfinite(arr)):
            raise CaliperError(f"{what}: non-finite value")
        return np.array(arr)

    def _servo_hold(self) -> bool:
        return self._estopped and self.actuators in ("position", "velocity")

    def _energized(self) -> bool:
        return (self._enabled and not self._estopped) or self._servo_hold()

    def _controls(self, qpos):
        """(ctrl (W, nu), qfrc_applied (W, mj nv), injected torque (W, nv)); read-only arrays."""
        L = self.layout
        zq, zt = self._zero_qfrc, self._zero_tau
        if self._servo_hold():
            return self._frozen, zq, zt
        if not self._energized():
            return np.zeros((self.nworld, self.nu)), zq, zt
        if self.ctrl_source == "ctrl":
            return self._ctrl_raw, zq, zt
        ctrl = self._targets[:, L.ctrl_to_v]
        if self._mode is not ControlMode.TORQUE or not self._any_unactuated:
            return ctrl, zq, zt
        tau = np.where(self._unactuated, np.clip(self._targets, -self._effort_limit, self._effort_limit), 0.0)
        return ctrl, L.qfrc_from_tau(tau, qpos), tau

    # ---- lifecycle and safety --------------------------------------------------------------------
    def enable(self) -> None:
        if self._estopped:
            raise CaliperError("enable(): the e-stop is latched; clear_estop() first")
        self._enabled = True

    def disable(self) -> None:
        self._enabled = False

    def estop(self) -> None:
        if not self._estopped:
            q = self._q_now()
            if self.actuators == "position":
                self._frozen = q[:, self.layout.ctrl_to_q]
            else:
                self._frozen = np.zeros((self.nworld, self.nu))
        self._estopped = True
        self._enabled = False

    def clear_estop(self) -> None:
        self._estopped = False

    def reset(self, q=None, v=None) -> BackendState:
        L = self.layout
        q = self._q0 if q is None else self._rows(q, self.nq, "reset q")
        v = self._v0 if v is None else self._rows(v, self.nv, "reset v")
        qpos = L.qpos_from_q(q)
        qvel = L.qvel_from_v(v, qpos, base=self._prop_qvel0())
        self._write_initial(qpos, qvel)
        self._tick = 0
        self._eq_active = np.broadcast_to(self._eq_active0, (self.nworld, len(self._eq_active0))).copy()
        self._ctrl_raw = np.zeros((self.nworld, self.nu))
        self._targets = np.zeros((self.nworld, self.nv))
        if self._mode is ControlMode.POSITION:
            self._targets[:, L.ctrl_to_v] = q[:, L.ctrl_to_q]
        self._frozen = q[:, L.ctrl_to_q] if self.actuators == "position" else np.zeros((self.nworld, self.nu))
        self._effort = np.zeros((self.nworld, self.nv))
        return self.state()

    def _prop_qvel0(self) -> np.ndarray:
        base = np.zeros(self.layout.mj_nv)
        for prop in self.scene.mjcf.props:
            a = self.layout.prop_dofadr[prop.name]
            base[a:a + 6] = prop.velocity
        return base

    # ---- commands and time -----------------------------------------------------------------------
    @property
    def mode(self) -> ControlMode:
        return self._mode

    def set_mode(self, mode) -> None:
        mode = ControlMode(mode)
        if mode is not _MODE_OF[self.actuators]:
            raise CaliperError(
                f"set_mode({mode.value}): this scene was built with actuators={self.actuators!r}, which "
                f"serve {_MODE_OF[self.actuators].value} mode only; actuators are chosen at build time "
                "(a servo applies force on every step and cannot coexist with torque injection)")
        self._mode = mode

    def command(self, values) -> None:
        if self._estopped:
            raise CaliperError("command(): the e-stop is latched; clear_estop() first")
        self._targets = self._rows(values, self.nv, "command")
        self.ctrl_source = "targets"

    def command_ctrl(self, ctrl) -> None:
        """Raw MuJoCo ``ctrl`` (nworld, nu) or (nu,), in actuator order (``layout.ctrl_to_v``)."""
        if self._estopped:
            raise CaliperError("command_ctrl(): the e-stop is latched; clear_estop() first")
        self._ctrl_raw = self._rows(ctrl, self.nu, "ctrl")
        self.ctrl_source = "ctrl"

    def step(self, dt: float) -> BackendState:
        n = self._dt_steps.get(dt)
        if n is None:
            n = self._dt_steps.setdefault(dt, check_step_dt(dt, self.timestep))
        qpos, _ = self._read()
        ctrl, qfrc, tau = self._controls(qpos)
        act = self._advance(n, ctrl, qfrc, self._eq_active, self._energized())
        effort = tau.copy()
        effort[:, self.layout.ctrl_to_v] += act
        self._effort = effort
        self._tick += n
        return self.state()

    def _q_now(self) -> np.ndarray:
        qpos, _ = self._read()
        return self.layout.q_from_qpos(qpos)

    def state(self) -> BackendState:
        qpos, qvel = self._read()
        L = self.layout
        return BackendState(q=L.q_from_qpos(qpos), v=L.v_from_qvel(qvel, qpos), effort=self._effort.copy(),
                            tick=self._tick, time=self._tick * self.timestep, enabled=self._enabled,
                            estopped=self._estopped, mode=self._mode)

    # ---- scene access ----------------------------------------------------------------------------
    @property
    def tick(self) -> int:
        return self._tick

    def qpos(self) -> np.ndarray:
        """MuJoCo positions of the whole scene (W, mj nq), a copy."""
        return self._read()[0].copy()

    def prop_poses(self) -> dict:
        """{prop: (W, 7) world pose [x, y, z, qw, qx, qy, qz]}."""
        qpos = self._read()[0]
        return {name: qpos[:, a:a + 7].copy() for name, a in self.layout.prop_qposadr.items()}

    def set_weld(self, world: int, prop: str, active: bool, relpose=None) -> None:
        """Activate or release the grasp weld of ``prop`` in one world; ``relpose`` (7,) is the
        prop's pose in the weld body's frame [pos, quat] (see :mod:`mjx_backend.grasp`)."""
        if prop not in self.layout.weld_eq:
            raise CaliperError(f"no grasp weld for prop {prop!r} (build the scene with weld_body=...)")
        eq = self.layout.weld_eq[prop]
        if active and relpose is not None:
            data = np.array(self.mj.eq_data[eq], dtype=np.float64)
            data[:3] = 0.0                    # anchor at the prop origin
            data[3:10] = np.asarray(relpose, dtype=np.float64)
            self._set_eq_data(world, eq, data)
        self._eq_active[world, eq] = 1 if active else 0

    def weld_active(self, world: int = 0) -> dict:
        return {prop: bool(self._eq_active[world, eq]) for prop, eq in self.layout.weld_eq.items()}

    def close(self) -> None:
        """Release threads or devices (no-op by default)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


__all__ = ["SimBackend", "as_scene"]

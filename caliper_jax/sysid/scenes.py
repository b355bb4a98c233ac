"""Small MJCF scenes for tests, docs and the benchmark (fast MJX compiles on a CPU).

- ``"swing"``: a two-link arm under position servos, no contact (free arm swing);
- ``"push"``: a slider pusher and a capsule prop on a table (resting / pushed contact, friction);
- ``"grip"``: two slide fingers closing on a capsule prop resting on the table.

:func:`zoo_push` gives episodes for a zoo scene instead: ``gripper_arm`` (``sort-blocks``) swinging
its jaw into the rubber ``short_block`` (docs/sysid.md, "Zoo scene").

MuJoCo combines the friction of two touching geoms by their maximum, so the table and the
fingers are given low friction: the prop's own coefficient then governs its contacts and is
identifiable. The pusher touches the prop through an explicit frictionless pair (``condim=1``),
so the prop's friction acts at the table only (a push is then a clean slide).

:func:`scene` returns a compiled ``mujoco.MjModel``; :func:`excite` draws smooth servo targets.
"""
from __future__ import annotations

import numpy as np

from caliper_jax.errors import CaliperError

_SWING = """
<mujoco model="swing">
  <option timestep="0.004" integrator="implicitfast"/>
  <worldbody>
    <body name="upper" pos="0 0 1">
      <joint name="j1" type="hinge" axis="0 1 0" damping="0.3" armature="0.01"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="1.0" contype="0" conaffinity="0"/>
      <body name="lower" pos="0.3 0 0">
        <joint name="j2" type="hinge" axis="0 1 0" damping="0.2" armature="0.005"/>
        <geom type="capsule" fromto="0 0 0 0.25 0 0" size="0.025" mass="0.5" contype="0" conaffinity="0"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position joint="j1" kp="30" kv="1"/>
    <position joint="j2" kp="20" kv="0.5"/>
  </actuator>
</mujoco>
"""

_PUSH = """
<mujoco model="push">
  <option timestep="0.004" integrator="implicitfast" cone="pyramidal"/>
  <worldbody>
    <geom name="table" type="plane" size="2 2 0.1" friction="0.1 0.005 0.0001"/>
    <body name="pusher" pos="-0.15 0 0.03">
      <joint name="slide" type="slide" axis="1 0 0" damping="2"/>
      <geom name="pusher" type="sphere" size="0.03" mass="0.5" contype="0" conaffinity="0"/>
    </body>
    <body name="cube" pos="0 0 0.03">
      <freejoint name="cube_free"/>
      <geom name="cube" type="capsule" fromto="-0.05 0 0 0.05 0 0" size="0.03" mass="0.2"
            friction="0.5 0.005 0.0001" solref="0.02 1"/>
    </body>
  </worldbody>
  <contact>
    <pair geom1="pusher" geom2="cube" condim="1"/>
  </contact>
  <actuator>
    <position joint="slide" kp="200" kv="20"/>
  </actuator>
</mujoco>
"""

_GRIP = """
<mujoco model="grip">
  <option timestep="0.004" integrator="implicitfast" cone="pyramidal"/>
  <worldbody>
    <geom name="table" type="plane" size="2 2 0.1" friction="0.1 0.005 0.0001"/>
    <body name="left" pos="0 0.12 0.05">
      <joint name="fl" type="slide" axis="0 -1 0" damping="1" range="0 0.1"/>
      <geom type="sphere" size="0.03" mass="0.2" friction="0.3 0.005 0.0001" contype="2" conaffinity="2"/>
    </body>
    <body name="right" pos="0 -0.12 0.05">
      <joint name="fr" type="slide" axis="0 1 0" damping="1" range="0 0.1"/>
      <geom type="sphere" size="0.03" mass="0.2" friction="0.3 0.005 0.0001" contype="2" conaffinity="2"/>
    </body>
    <body name="cube" pos="0 0 0.04">
      <freejoint name="cube_free"/>
      <geom name="cube" type="capsule" fromto="-0.05 0 0 0.05 0 0" size="0.04" mass="0.1"
            friction="0.8 0.005 0.0001" contype="3" conaffinity="3"/>
    </body>
  </worldbody>
  <actuator>
    <position joint="fl" kp="100" kv="5"/>
    <position joint="fr" kp="100" kv="5"/>
  </actuator>
</mujoco>
"""

SCENES = {"swing": _SWING, "push": _PUSH, "grip": _GRIP}


def scene(name: str):
    """The compiled MjModel of a named scene."""
    import mujoco

    if name not in SCENES:
        raise CaliperError(f"unknown sysid scene {name!r} (scenes: {', '.join(SCENES)})")
    return mujoco.MjModel.from_xml_string(SCENES[name])


def excite(key, mj, steps: int, *, knots: int = 4, amplitude: float = 1.0, offset=None) -> np.ndarray:
    """(steps, nu) servo targets: a random piecewise-linear path through ``knots`` points per
    actuator, uniform in ``offset +- amplitude`` (clipped to the actuator's ctrlrange if limited),
    drawn from the JAX PRNG ``key``."""
    import jax

    mj = getattr(mj, "mj", mj)
    off = np.zeros(mj.nu) if offset is None else np.broadcast_to(np.asarray(offset, np.float64), (mj.nu,))
    u = np.asarray(jax.random.uniform(key, (knots, mj.nu), minval=-1.0, maxval=1.0), np.float64)
    pts = off + amplitude * u
    t = np.linspace(0.0, 1.0, knots)
    s = np.linspace(0.0, 1.0, steps)
    out = np.stack([np.interp(s, t, pts[:, i]) for i in range(mj.nu)], axis=-1)
    lim = mj.actuator_ctrllimited.astype(bool)
    if lim.any():
        out[:, lim] = np.clip(out[:, lim], mj.actuator_ctrlrange[lim, 0], mj.actuator_ctrlrange[lim, 1])
    return out


#: ``zoo_push`` episodes: (j1 start, j1 end, ramp s, hold s, j1 back), rad and s. On ``sort-blocks``
#: the jaw (j2 = -j1 keeps it upright) meets the short block's face at j1 ~ 0.067 and the block
#: starts 2 cm from the tall one: ends of 0.085-0.10 push and tip it by a few mm without a collision.
ZOO_PUSHES = ((0.04, 0.09, 0.15, 0.05, 0.03), (0.0, 0.10, 0.2, 0.0, 0.05), (0.05, 0.085, 0.12, 0.05, 0.0),
              (0.02, 0.095, 0.18, 0.02, 0.04))


def _smoothstep(x):
    x = np.clip(x, 0.0, 1.0)
    return x * x * (3.0 - 2.0 * x)


def zoo_push(mj, q0, steps: int, pushes=ZOO_PUSHES, settle_steps: int = 300) -> tuple:
    """Push episodes for a ``gripper_arm`` zoo scene (joints ``j1``, ``j2``, ``gripper``; servo targets
    as ``ctrl``): ``(qpos0 (E, nq), ctrl (E, steps, 3))``, one episode per ``pushes`` row.

    ``q0``: (3,) robot start pose (the task's ``q0``). The props are first settled for ``settle_steps``
    MuJoCo C steps with the arm held at ``q0``; each episode then starts at rest with j1 = -j2 at its
    start value and sweeps j1 (and j2 = -j1) start -> end (smoothstep over ``ramp``), holds, and
    returns to ``back`` (smoothstep over ``ramp``); the gripper holds ``q0[2]``."""
    import mujoco

    mj = getattr(mj, "mj", mj)
    names = [mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(min(mj.njnt, 3))]
    if mj.nu != 3 or names != ["j1", "j2", "gripper"]:
        raise CaliperError(f"zoo_push: needs a gripper_arm scene (joints j1, j2, gripper first, "
                           f"3 actuators), got joints {names} and {mj.nu} actuators")
    q0 = np.asarray(q0, np.float64).reshape(3)
    d = mujoco.MjData(mj)
    d.qpos[:3], d.ctrl[:] = q0, q0
    for _ in range(int(settle_steps)):
        mujoco.mj_step(mj, d)
    rest = d.qpos.copy()
    t = np.arange(int(steps)) * float(mj.opt.timestep)
    qpos0, ctrl = [], []
    for a0, a1, ramp, hold, back in pushes:
        a = a0 + (a1 - a0) * _smoothstep(t / ramp) + (back - a1) * _smoothstep((t - ramp - hold) / ramp)
        ctrl.append(np.stack([a, -a, np.full_like(a, q0[2])], axis=-1))
        q = rest.copy()
        q[:3] = (a0, -a0, q0[2])
        qpos0.append(q)
    return np.stack(qpos0), np.stack(ctrl)


__all__ = ["SCENES", "ZOO_PUSHES", "excite", "scene", "zoo_push"]

"""Small MJCF scenes for tests, docs and the benchmark (fast MJX compiles on a CPU).

- ``"swing"``: a two-link arm under position servos, no contact (free arm swing);
- ``"push"``: a slider pusher and a capsule prop on a table (resting / pushed contact, friction);
- ``"grip"``: two slide fingers closing on a capsule prop resting on the table.

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


__all__ = ["SCENES", "excite", "scene"]

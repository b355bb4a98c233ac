"""Real arms in a contact scene: per-robot physics and grasp geometry for the registry arms.

An :class:`ArmProfile` says what the URDF does not: servo gains, gravity compensation, joint
armature / damping, which links are friction pads, the tool centre point (TCP) and the gripper's
approach axis, a home pose and the reach. :func:`arm_profile` finds the profile of a task's robot
(by the registry file it resolves to); robots without one (``gripper_arm``) keep the seed's
scene and its weld grasp.

Panda (``example-robot-data`` ``panda.urdf``): 7 revolute joints and two prismatic fingers; the
URDF's ``<mimic>`` on ``panda_finger_joint2`` becomes a MuJoCo joint equality, so one position
actuator on ``panda_finger_joint1`` drives both fingers (the coupling MuJoCo users write for the
Franka hand). Gravity compensation on every body (the real arm's controller compensates gravity);
armature 0.1 kg m^2 on the arm joints (reflected rotor inertia, the value MuJoCo Menagerie's Panda
uses), damping 1 N m s/rad (the URDF's 0.003 is a placeholder). Pads: every collision box of the
two finger links (the URDF's rubber tips, sledges and mounts), condim 4, the ``rubber`` preset.
Gains: see :data:`PANDA_KP` and the figures measured by ``benchmarks/bench_arm_gains.py``.

SO-101 (``so101.urdf``): 5 revolute joints and a revolute jaw (``gripper``). Its hobby servos do
not compensate gravity, so no gravcomp; a position servo holds the load.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mjx_backend.arm_physics import ArmPhysics
from mjx_backend.materials import PRESETS

PANDA_ARM = tuple(f"panda_joint{i}" for i in range(1, 8))
# Servo gains (N m/rad, N m s/rad; the finger N/m, N s/m), chosen from the tracking measured by
# benchmarks/bench_arm_gains.py (implicitfast, 2 ms, gravcomp, armature 0.1; simulated time):
# kp 4500 / 2000 with kv = kp / 10 was overdamped (0.1 rad step: 248 ms to 90 %, 0 % overshoot;
# a 0.5 rad, 1 s minimum-jerk move lagged 87 mrad); kv = 0.03 kp gives 90 ms, <= 2.8 % overshoot
# and 27 mrad lag (kv = 0.02 kp: 12 % overshoot). The finger: kp 1000 N/m pinches a 4 cm cube with
# ~19 N (the steady force measured in tests/test_arm_grasp.py); kv 100 closes it in ~0.3 s.
PANDA_KP = {**dict.fromkeys(PANDA_ARM[:4], 4500.0), **dict.fromkeys(PANDA_ARM[4:], 2000.0),
            "panda_finger_joint1": 1000.0}
PANDA_KV = {**dict.fromkeys(PANDA_ARM[:4], 135.0), **dict.fromkeys(PANDA_ARM[4:], 60.0),
            "panda_finger_joint1": 100.0}

SO101_ARM = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll")
# SO-101 gains (N m/rad, N m s/rad), from benchmarks/bench_arm_gains.py --arm so101 (no gravcomp,
# armature 0.01, damping 0.1; simulated time): kp 60 / kv 3 left 6.2 mrad of gravity sag after 1 s,
# a 112 ms rise and 6.2 % overshoot; kp 120 / kv 3 gives 3.1 mrad, 52 ms, 3.1 % and at most 23 mrad
# of lag on a 0.5 rad, 1 s minimum-jerk move (kv 1.5: 15.6 % overshoot). The URDF's 10 N m effort
# limit bounds the servo torque. The jaw: kp 15 pinches a 2.5 cm cube with ~2.5 N m (the STS3215's
# stall torque is about 3 N m).
SO101_KP = {**dict.fromkeys(SO101_ARM, 120.0), "gripper": 15.0}
SO101_KV = {**dict.fromkeys(SO101_ARM, 3.0), "gripper": 0.5}
SO101_JOINTS = SO101_ARM + ("gripper",)
# The SO-101's jaws as pads (each link's body frame, m): the URDF's colliders are whole-part meshes
# whose convex hulls fill the gap between the jaws. Fitted to the inner faces of the mesh vertices
# (the fixed jaw's at x = -0.0116 .. -0.008 for z in -0.10 .. -0.05 of gripper_link; the moving
# jaw's at x = -0.0083 .. -0.0123 for y in -0.08 .. -0.03 of its link).
SO101_PADS = (("gripper_link", (-0.015, 0.0, -0.075), (0.005, 0.0075, 0.025)),
              ("moving_jaw_so101_v1_link", (-0.00475, -0.054, 0.0185), (0.00475, 0.024, 0.007)))


@dataclass(frozen=True)
class ArmProfile:
    """``registry``: the robot's registry name. ``kp`` / ``kv``: {actuated joint: gain}.
    ``physics``: the MJCF additions. ``tcp``: the frame between the pads, ``approach``: the unit
    axis (in the TCP frame) along which the gripper approaches a grasp. ``home``: (nq,) a start
    pose. ``reach``: (m) the radius about ``base`` (world xyz of the first joint) beyond which no
    prop can be grasped. ``base_radius``: (m) the robot base's footprint radius, no zone within."""

    registry: str
    kp: dict
    kv: dict
    physics: ArmPhysics
    tcp: str
    approach: tuple
    home: tuple
    reach: float
    base: tuple
    base_radius: float
    max_opening: float          # (m) widest prop the gripper can close on
    grasp_offset: tuple = (0.0, 0.0, 0.0)   # (m) where a grasped prop's centre sits, in the TCP frame
    open_q: float | None = None  # gripper target the expert opens to (None: the joint's open limit)
    pre_m: float = 0.10          # (m) expert: pre-grasp height above the grasp
    lift_m: float = 0.15         # (m) expert: lift above the grasp
    carry_z: float = 0.17        # (m) expert: grasp point height while carrying
    vmax: float | None = None    # (rad/s) expert: cap on the joint speed limits it plans with
    close_s: float = 0.0         # (s) expert: the gripper target ramps to closed over this time (0: a step)
    yaw_from_base: bool = False  # expert: fold the hand's yaw about the base->prop bearing + pi (a 5-dof
                                 # arm turns its hand about z with the pan joint), not about 0
    # A push (the gripper closed): the hand yaw relative to the push bearing (0: the hand's x axis
    # along the push), the pushing face's centre in the TCP frame relative to the grasp point, that
    # centre's distance to the face along the push (m), and whether the hand turned by pi pushes
    # the same way (two symmetric pads)
    push_yaw: float = 0.0
    push_center: tuple = (0.0, 0.0, 0.0)
    push_half: float = 0.00875   # the Panda's closed pads: half their width along the hand x axis
    push_symmetric: bool = True
    push_segment: float | None = None   # (m) push in strokes this long, re-aimed from the prop observed
                                        # after each (None: one stroke to the end)


PROFILES = {
    "panda": ArmProfile(
        "panda", PANDA_KP, PANDA_KV,
        ArmPhysics(gravcomp=True, armature=dict.fromkeys(PANDA_ARM, 0.1),
                   damping=dict.fromkeys(PANDA_ARM, 1.0),
                   pad_links=("panda_leftfinger", "panda_rightfinger"), pad_material=PRESETS["rubber"],
                   pad_condim=4, mimic_solref=(0.005, 1.0)),
        tcp="panda_hand_tcp", approach=(0.0, 0.0, 1.0),
        home=(0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785, 0.04),
        reach=0.855, base=(0.0, 0.0, 0.333), base_radius=0.12, max_opening=0.08),
    "so101": ArmProfile(
        "so101", SO101_KP, SO101_KV,
        ArmPhysics(gravcomp=False, armature=dict.fromkeys(SO101_JOINTS, 0.01),
                   damping=dict.fromkeys(SO101_JOINTS, 0.1),
                   pad_links=("moving_jaw_so101_v1_link", "gripper_link"), pad_boxes=SO101_PADS,
                   pad_material=PRESETS["rubber"], pad_condim=4, self_collide=False),
        tcp="gripper_frame_link", approach=(0.0, 0.0, 1.0),
        home=(0.0, -1.0, 0.6, 1.4, 0.0, 0.6),
        reach=0.40, base=(0.0388, 0.0, 0.0624), base_radius=0.06, max_opening=0.05,
        grasp_offset=(-0.0139, 0.0, -0.0061), open_q=0.6, pre_m=0.06, lift_m=0.08, carry_z=0.09,
        vmax=3.0, close_s=0.4, yaw_from_base=True,
        # the closed jaws side by side push with their +y faces (7.5 / 7.7 mm): the moving pad spans x
        # -10 .. 6 mm and the fixed one 16 .. 26 mm of the grasp point, so a 2.5 cm cube centred at
        # x = 8 mm touches both (measured at the closed limit, -0.136 rad); 3 mm lower than a grasp
        push_yaw=np.pi / 2, push_center=(0.008, 0.0, -0.003), push_half=0.0075, push_symmetric=False,
        push_segment=0.03),
}


def arm_profile(robot_path) -> ArmProfile | None:
    """The profile of the robot file ``robot_path`` (a registry arm), or None."""
    import robots

    path = Path(robot_path).resolve()
    for name, profile in PROFILES.items():
        try:
            if robots.resolve(name).resolve() == path:
                return profile
        except Exception:      # example-robot-data missing: no registry arm can match
            return None
    return None


def check_layout(task, profile: ArmProfile) -> None:
    """Raise CaliperError("<field>: <what>") when a prop (moved by the task's declared ``prop_xy``
    randomisation, worst case) lies beyond the arm's reach from its shoulder, or a zone's footprint
    overlaps the robot base's disc."""
    from caliper_jax.errors import CaliperError

    base = np.asarray(profile.base, np.float64)
    xy = dict(task.randomization or ()).get("prop_xy") or 0.0
    for i, prop in enumerate(task.props):
        far = float(np.linalg.norm(np.asarray(prop.pos) - base)) + np.sqrt(2.0) * xy
        if far > profile.reach:
            raise CaliperError(f"scene.props[{i}].pos: {prop.name!r} is out of reach of {profile.registry}: "
                               f"{far:.3g} m from its shoulder {tuple(base)} with the prop_xy randomisation "
                               f"(reach {profile.reach:g} m)")
    for i, zone in enumerate(task.zones):
        c, h = np.asarray(zone.center, np.float64), np.asarray(zone.half, np.float64)
        nearest = np.clip(base[:2], c[:2] - h[:2], c[:2] + h[:2])        # footprint point nearest the base
        gap = float(np.linalg.norm(nearest - base[:2]))
        if gap < profile.base_radius:
            raise CaliperError(f"scene.zones[{i}]: zone {zone.name!r} overlaps the {profile.registry} base "
                               f"(its footprint comes within {gap:.3g} m of the base axis; base radius "
                               f"{profile.base_radius:g} m)")


def tcp_point(model, q, profile: ArmProfile) -> np.ndarray:
    """(3,) world position of the TCP at ``q`` (nq,)."""
    from caliper_jax.kinematics import frame_pose

    frame = list(model.frame_names).index(profile.tcp)
    import jax.numpy as jnp

    T = np.asarray(frame_pose(model, jnp.asarray(q, model.dtype), frame))
    return T[:3, 3].astype(np.float64)


__all__ = ["ArmProfile", "PROFILES", "arm_profile", "check_layout", "tcp_point"]

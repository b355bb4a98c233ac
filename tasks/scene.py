"""A task built into a real MuJoCo scene: robot, ground, props, grasp welds and position servos.

:func:`build_scene` loads ``task.robot``, resolves the gripper and the start pose, and compiles the
scene with :func:`mjx_backend.layout.compile_scene` (one inactive grasp weld per prop, attached to
the gripper joint's body). Every error is a :class:`CaliperError` that names the task and the
field or prop at fault.

Default servo gains (position actuators, ``kp`` N m/rad or N/m, ``kv`` N m s/rad or N s/m), chosen
for ``gripper_arm`` at MuJoCo's 2 ms timestep with the ``implicitfast`` integrator (the default
here; it integrates the servo damping implicitly, so a light joint with a large ``kv`` stays
stable -- under explicit Euler ``kv * h / M`` must stay below ~1, i.e. ``kv`` < 1.3 on the
wrist, far too soft to hold a load):

- ``kp = 1000`` on every joint: the worst static gravity load of ``j1`` (arm plus a 0.15 kg prop
  held horizontally, ~4 N m) then sags 4 mrad, under 2 mm at the jaw; the undamped part stays
  well inside the explicit-spring bound (``sqrt(kp / M) * h`` ~ 0.2 on ``j1``, ~1.2 on the
  light wrist);
- ``kv = 50``: overdamped on every joint (slow pole ``kp / kv`` = 20 1/s, a 50 ms time
  constant), so targets are tracked without overshoot and a held prop settles in well under 1 s.

The effort limits of the URDF still clamp every servo force (``actuatorfrcrange``).

A registry arm with a profile (:mod:`tasks.arms`: the Panda, the SO-101) takes its own gains,
gravity compensation, armature/damping and friction pads instead, and grasps by friction unless
the task says ``"grasp": "weld"`` (the heuristic, labelled: then one inactive weld per prop is
generated as for ``gripper_arm``). ``"grasp": "friction"`` on a robot without pads is an error.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from caliper_jax.errors import CaliperError

DEFAULT_KP = 1000.0
DEFAULT_KV = 50.0
DEFAULT_INTEGRATOR = "implicitfast"


@dataclass(frozen=True)
class TaskScene:
    """A built task. ``model``: the caliper Model of ``task.robot``; ``scene``: the compiled
    MuJoCo scene (:class:`mjx_backend.layout.CompiledScene`); ``gripper``: the resolved
    :class:`mjx_backend.grasp.Gripper`; ``q0``: (nq,) start pose inside the joint limits."""

    task: object
    model: object
    scene: object
    gripper: object
    q0: np.ndarray
    grasp: str = "weld"              # "weld" (the labelled heuristic) or "friction" (pads, physics)
    profile: object = None           # tasks.arms.ArmProfile of a registry arm, else None
    colliders: str = "mesh"          # "mesh" (the C engine) or "primitive" (fitted capsules, for MJX)

    @property
    def name(self) -> str:
        return self.task.name

    @property
    def prop_names(self) -> tuple:
        return tuple(p.name for p in self.task.props)

    @property
    def pos0(self) -> np.ndarray:
        """(P, 3) start centre of every prop, world frame, in ``task.props`` order."""
        return np.array([p.pos for p in self.task.props], dtype=np.float64).reshape(-1, 3)

    @property
    def vel0(self) -> np.ndarray:
        """(P, 3) start linear velocity of every prop, world frame."""
        return np.array([p.velocity[:3] for p in self.task.props], dtype=np.float64).reshape(-1, 3)

    @property
    def weld_body(self) -> int:
        """MuJoCo body id the grasp welds attach props to (the gripper joint's body; a friction-grasp
        scene has no welds, and this is then the gripper joint's body all the same)."""
        import mujoco

        name = self.scene.mjcf.weld_body
        if name is None:
            ours = self.model.body_id(self.gripper.joint)
            return int(self.scene.layout.body_id[ours])
        return mujoco.mj_name2id(self.scene.mj, mujoco.mjtObj.mjOBJ_BODY, name)

    def qpos(self, q) -> np.ndarray:
        """(mj nq,) MuJoCo positions: robot at ``q`` (nq,), props at their start poses."""
        return self.scene.layout.qpos_from_q(np.asarray(q, dtype=np.float64))[0]


def _fail(task, what: str, exc: Exception | str) -> CaliperError:
    return CaliperError(f"task {task.name}: {what}: {exc}")


def load_robot(task):
    """The caliper Model of ``task.robot`` (errors name the task)."""
    from caliper_jax.loading import load

    try:
        return load(task.robot)
    except CaliperError as exc:
        raise _fail(task, f"robot {task.robot}", exc) from None


def start_pose(task, model) -> np.ndarray:
    """(nq,) ``task.q0`` (when absent: a registry arm's home pose, else zeros), checked for length,
    finiteness and joint limits."""
    from tasks.arms import arm_profile

    profile = arm_profile(task.robot) if task.q0 is None else None
    if task.q0 is None:
        q0 = np.zeros(model.nq) if profile is None else np.asarray(profile.home, np.float64)
    else:
        q0 = np.asarray(task.q0, dtype=np.float64).reshape(-1)
        if q0.shape != (model.nq,):
            raise _fail(task, "q0", f"{q0.size} values, but robot {model.name!r} has {model.nq} joints "
                        f"({', '.join(model.joint_names)})")
        if not np.all(np.isfinite(q0)):
            raise _fail(task, "q0", "non-finite value")
    lo, hi = np.asarray(model.qpos_lower, np.float64), np.asarray(model.qpos_upper, np.float64)
    tol = 1e-6 * np.maximum(1.0, np.abs(q0))             # float32 limits read back from the URDF
    for i, name in enumerate(model.joint_names):
        if q0[i] < lo[i] - tol[i] or q0[i] > hi[i] + tol[i]:
            raise _fail(task, "q0", f"joint {name!r} = {q0[i]:.6g} is outside its limits "
                        f"[{lo[i]:.6g}, {hi[i]:.6g}]")
    return np.clip(q0, lo, hi)


def resolve_gripper(task, model):
    """The task's gripper (``task.gripper.joint``, else detected by name)."""
    from mjx_backend.grasp import detect_gripper
    from tasks.schema import GripperSpec

    spec = task.gripper or GripperSpec()
    try:
        return detect_gripper(model, spec.joint, spec.closed)
    except CaliperError as exc:
        why = f"{exc}; this task's props need one to be grasped" if task.props else exc
        raise _fail(task, "gripper", why) from None


def _check_props(task, model) -> None:
    """Prop and fixture names must be unique and clear of the robot's names (MuJoCo bodies are
    named after links or joints) and of the ground plane."""
    taken = set(model.frame_names) | set(model.body_names) | {"world"}
    if task.ground is not None:
        taken.add("ground")
    seen = set()
    for kind, prop in [("prop", p) for p in task.props] + [("fixture", f) for f in task.fixtures]:
        if prop.name in taken:
            raise _fail(task, f"{kind} {prop.name!r}",
                        "the name is taken by a robot link, joint or the ground")
        if prop.name in seen:
            raise _fail(task, f"{kind} {prop.name!r}", "duplicate prop or fixture name")
        seen.add(prop.name)


def build_scene(task, *, actuators: str = "position", kp=None, kv=None, options=None,
                colliders: str = "mesh") -> TaskScene:
    """Build ``task`` (a :class:`tasks.schema.Task`) into a compiled MuJoCo scene.

    ``kp`` / ``kv``: servo gains (scalar, per actuated joint, or {joint: gain}); None takes
    :data:`DEFAULT_KP` / :data:`DEFAULT_KV`. ``options``: simulation options (SimOptions or a
    dict); None takes MuJoCo's defaults with the ``implicitfast`` integrator. ``colliders``: "mesh"
    or "primitive" (:func:`mjx_backend.mjcf.model_to_mjcf`; the MJX engine's model)."""
    from mjx_backend.layout import compile_scene
    from mjx_backend.options import as_options

    model = load_robot(task)
    q0 = start_pose(task, model)
    gripper = resolve_gripper(task, model)
    _check_props(task, model)
    if task.ground is not None and not np.isfinite(task.ground):
        raise _fail(task, "scene.ground", f"must be finite, got {task.ground}")
    opts = as_options({"integrator": DEFAULT_INTEGRATOR} if options is None else options)
    profile, grasp = grasp_mode(task)
    if profile is not None:
        from tasks.arms import check_layout

        try:
            check_layout(task, profile)
        except CaliperError as exc:
            raise CaliperError(f"task {task.name}: {exc}") from None
        kp = profile.kp if kp is None else kp
        kv = profile.kv if kv is None else kv
    weld = grasp == "weld" and bool(task.props)
    try:
        scene = compile_scene(model, actuators=actuators, kp=DEFAULT_KP if kp is None else kp,
                              kv=DEFAULT_KV if kv is None else kv, ground=task.ground, props=task.props,
                              options=opts, weld_body=gripper.joint if weld else None,
                              arm=None if profile is None else profile.physics, colliders=colliders,
                              fixtures=task.fixtures)
    except CaliperError as exc:
        raise _fail(task, "MuJoCo scene", exc) from None
    return TaskScene(task, model, scene, gripper, q0, grasp, profile, colliders)


def grasp_mode(task):
    """(profile or None, "weld" | "friction") of ``task``: a registry arm with pads grasps by
    friction unless the task asks for the weld; every other robot welds."""
    from tasks.arms import arm_profile

    profile = arm_profile(task.robot)
    asked = getattr(task, "grasp", None)
    if asked == "friction" and (profile is None or not profile.physics.pad_links):
        raise _fail(task, "grasp", "'friction' needs a registry arm with gripper pads (panda, so101); "
                    f"{task.robot.name} has none (use \"grasp\": \"weld\")")
    return profile, asked or ("friction" if profile is not None else "weld")


__all__ = ["DEFAULT_INTEGRATOR", "DEFAULT_KP", "DEFAULT_KV", "TaskScene", "build_scene", "load_robot",
           "grasp_mode", "resolve_gripper", "start_pose"]

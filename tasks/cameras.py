"""The cameras of a task scene: where they are, which body carries them, their field of view.

Every task has four cameras, framed from the compiled scene's bounding statistics
(``mj.stat.center``, ``mj.stat.extent``, MuJoCo's own free-camera framing) so they fit any robot:

- ``front``: fixed, on the +x side of the scene centre, 30 degrees above it, looking at it;
- ``side``: fixed, on the +y side, same distance and elevation;
- ``top``: fixed, straight above the centre looking down (+x of the image along world +y);
- ``wrist``: carried by the gripper joint's body: at the start pose it sits beside and above the
  body (+x, +z, a fifth and a tenth of the extent) looking at the point below it where a grasped
  prop would be; it moves with the body.

The fixed cameras stand at twice the extent from the centre. Each is a
:class:`caliper_jax.rays.PinholeCamera` (MuJoCo's camera convention: the camera looks along its
-z axis, +x is image right, +y image up; ``R`` holds the camera axes as columns), fixed in the
world (``body`` -1) or on a MuJoCo body (``pos``/``R`` in that body's frame), rendered by the JAX
ray engine only. A camera carried by a body does not see that body's own geoms (the wrist camera
looks past the jaw it sits on). :func:`parse_camera` reads the command line's ``NAME[:WxH]``;
:func:`resolve_cameras` turns names or PinholeCameras into the cameras of a scene;
:func:`camera_renderer` renders them in every world in one jitted call.
"""
from __future__ import annotations

import re
from dataclasses import replace

import numpy as np

from caliper_jax.errors import CaliperError

DEFAULT_SIZE = (96, 96)         # (width, height) pixels
DEFAULT_FOVY = 45.0             # degrees
NAMES = ("front", "side", "top", "wrist")
MAX_PIXELS = 4096 * 4096
#: Image key prefix of a camera in a recorded dataset (lerobot's convention).
FEATURE_PREFIX = "observation.images."


def look_at(pos, target, up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """(3, 3) rotation of a camera at ``pos`` looking at ``target`` with image-up towards ``up``
    (columns: camera x right, y up, z backwards; MuJoCo's convention)."""
    pos, target, up = (np.asarray(v, np.float64) for v in (pos, target, up))
    forward = target - pos
    if np.linalg.norm(forward) < 1e-12:
        raise CaliperError("camera: position and target coincide")
    z = -forward / np.linalg.norm(forward)
    x = np.cross(up, z)
    if np.linalg.norm(x) < 1e-9:                     # looking along `up`: any perpendicular will do
        x = np.cross((1.0, 0.0, 0.0) if abs(z[0]) < 0.9 else (0.0, 1.0, 0.0), z)
    x /= np.linalg.norm(x)
    return np.stack([x, np.cross(z, x), z], axis=1)


def frame_cameras(mj, qpos=None, *, wrist_body: int | None = None, size=DEFAULT_SIZE,
                  fovy: float = DEFAULT_FOVY) -> dict:
    """{name: PinholeCamera} framed from compiled MjModel ``mj`` (the rule of the module doc):
    front, side, top, and wrist on MuJoCo body ``wrist_body`` when given, placed at the pose
    ``qpos`` (mj nq,; default ``mj.qpos0``). ``size``: (width, height) pixels of every camera.
    The depth range is [0, max(10 m, 20 extents)]."""
    import mujoco

    from caliper_jax.rays import PinholeCamera

    center = np.asarray(mj.stat.center, np.float64)
    ext = float(mj.stat.extent)
    dist = 2.0 * ext
    el = np.radians(30.0)
    front = center + dist * np.array([np.cos(el), 0.0, np.sin(el)])
    side = center + dist * np.array([0.0, np.cos(el), np.sin(el)])
    top = center + np.array([0.0, 0.0, dist])
    kw = dict(width=int(size[0]), height=int(size[1]), fovy=float(fovy), max_range=max(10.0, 20.0 * ext))
    cams = {"front": PinholeCamera.fixed(front, look_at(front, center), name="front", **kw),
            "side": PinholeCamera.fixed(side, look_at(side, center), name="side", **kw),
            "top": PinholeCamera.fixed(top, look_at(top, center, up=(0.0, 1.0, 0.0)), name="top", **kw)}
    if wrist_body is not None:
        d = mujoco.MjData(mj)
        if qpos is not None:
            d.qpos[:] = np.asarray(qpos, np.float64)
        mujoco.mj_kinematics(mj, d)
        bpos, brot = d.xpos[wrist_body].copy(), d.xmat[wrist_body].reshape(3, 3).copy()
        wpos = bpos + np.array([0.2 * ext, 0.0, 0.1 * ext])
        wrot = look_at(wpos, bpos - np.array([0.0, 0.0, 0.2 * ext]))
        cams["wrist"] = PinholeCamera(pos=tuple(brot.T @ (wpos - bpos)), R=tuple((brot.T @ wrot).reshape(9)),
                                      body=int(wrist_body), name="wrist", **kw)
    return cams


def scene_cameras(ts, size=DEFAULT_SIZE) -> dict:
    """{name: PinholeCamera} of task scene ``ts`` (:class:`tasks.scene.TaskScene`): front, side,
    top, and wrist (on the gripper joint's body) when the scene has a gripper; ``size`` (width,
    height) pixels."""
    mj = ts.scene.mj
    body = None if ts.gripper is None else _gripper_body(ts)
    qpos = ts.scene.layout.qpos_from_q(np.asarray(ts.q0, np.float64), mj.qpos0)
    return frame_cameras(mj, qpos, wrist_body=body, size=size)


def _gripper_body(ts) -> int:
    import mujoco

    mj = ts.scene.mj
    jid = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_JOINT, ts.gripper.joint)
    if jid < 0:
        raise CaliperError(f"{ts.task.name}: gripper joint {ts.gripper.joint!r} is not in the scene")
    return int(mj.jnt_bodyid[jid])


_CAMERA_ARG = re.compile(r"^(?P<name>[A-Za-z_][\w.-]*)(?::(?P<w>\d+)x(?P<h>\d+))?$")


def parse_camera(text: str, available, *, what: str = "--camera", default_size=DEFAULT_SIZE
                 ) -> tuple[str, int, int]:
    """``NAME[:WxH]`` -> (name, width, height); the size defaults to ``default_size`` (96x96).
    Errors are one line that starts with ``what`` (the flag or argument)."""
    m = _CAMERA_ARG.match(str(text).strip())
    if m is None:
        raise CaliperError(f"{what} {text!r}: expected NAME or NAME:WxH (e.g. front:96x96)")
    name = m["name"]
    if name not in available:
        raise CaliperError(f"{what} {text!r}: no camera {name!r}; this scene has {', '.join(available)}")
    w, h = (int(m["w"]), int(m["h"])) if m["w"] else (int(default_size[0]), int(default_size[1]))
    if w < 1 or h < 1 or w * h > MAX_PIXELS:
        raise CaliperError(f"{what} {text!r}: size must be between 1x1 and {MAX_PIXELS} pixels")
    return name, w, h


def resolve_cameras(ts, cameras) -> tuple:
    """The cameras an environment renders: ``cameras`` is None, one item or a sequence of camera
    names of :func:`scene_cameras` (``"front"``, ``"front:96x96"``) or
    :class:`caliper_jax.rays.PinholeCamera` s (named, unique names; a ``body`` is a MuJoCo body
    id of the scene) -> tuple of PinholeCameras (empty for None)."""
    from caliper_jax.rays import PinholeCamera

    if cameras is None:
        return ()
    if isinstance(cameras, (str, PinholeCamera)):
        cameras = (cameras,)
    try:
        items = list(cameras)
    except TypeError:
        raise CaliperError(f"cameras: expected camera names or PinholeCameras, got {type(cameras).__name__}"
                           ) from None
    mj = ts.scene.mj
    named = None
    out = []
    for i, c in enumerate(items):
        if isinstance(c, str):
            named = scene_cameras(ts) if named is None else named
            name, w, h = parse_camera(c, tuple(named), what=f"cameras[{i}]")
            c = replace(named[name], width=w, height=h)
        elif isinstance(c, PinholeCamera):
            if not c.name:
                raise CaliperError(f"cameras[{i}]: a PinholeCamera needs a name (its images are keyed by it)")
            if c.body >= mj.nbody or c.mj_cam >= mj.ncam:
                raise CaliperError(f"cameras[{i}] ({c.name!r}): body {c.body} / model camera {c.mj_cam} is "
                                   f"not in the scene ({mj.nbody} bodies, {mj.ncam} cameras)")
        else:
            raise CaliperError(f"cameras[{i}]: expected a camera name ('front', 'front:96x96') or a "
                               f"caliper_jax.rays.PinholeCamera, got {type(c).__name__}")
        if c.width * c.height > MAX_PIXELS:
            raise CaliperError(f"cameras[{i}] ({c.name!r}): {c.width}x{c.height} is over {MAX_PIXELS} pixels")
        if any(o.name == c.name for o in out):
            raise CaliperError(f"cameras[{i}]: camera name {c.name!r} is given twice")
        out.append(c)
    return tuple(out)


def exclude_body(camera) -> int:
    """The body whose geoms ``camera`` does not see: the body carrying it (-1: none)."""
    return int(camera.body) if camera.body >= 0 else -1


def camera_renderer(ray_scene, cameras, *, block: int = 8):
    """jit: poses {field: (W, ...)} (``geom_xpos``, ``geom_xmat``; ``xpos``/``xmat`` for cameras on
    bodies; ``cam_xpos``/``cam_xmat`` for model cameras) -> {name: (W, height, width, 3) uint8} RGB
    of every camera in every world, in one call (``render_worlds``, ``block`` worlds at a time)."""
    import jax

    from caliper_jax.rays import render_worlds

    cameras = tuple(cameras)

    def images(poses):
        W = next(iter(poses.values())).shape[0]
        return {c.name: render_worlds(ray_scene, c, poses, block=min(int(block), W), outputs=("rgb",),
                                      exclude_body=exclude_body(c))["rgb"] for c in cameras}

    return jax.jit(images)


def pose_fields(cameras) -> tuple:
    """The MjData pose fields rendering ``cameras`` reads."""
    fields = ["geom_xpos", "geom_xmat"]
    if any(c.body >= 0 for c in cameras):
        fields += ["xpos", "xmat"]
    if any(c.mj_cam >= 0 for c in cameras):
        fields += ["cam_xpos", "cam_xmat"]
    return tuple(fields)


def feature_key(camera) -> str:
    """The dataset feature of a camera: ``observation.images.<name>``."""
    return FEATURE_PREFIX + camera.name


def camera_record(camera, mj=None) -> dict:
    """JSON description of ``camera``: size, field of view, intrinsics (pixels), depth range and
    pose in its parent frame (``frame``: "world", a body name, or a model camera). ``mj``: the
    compiled MjModel, to name bodies."""
    import mujoco

    def body_name(b):
        if b < 0:
            return None
        return (mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_BODY, b) if mj is not None else None) or f"body{b}"

    fx, fy, cx, cy = camera.intrinsics()
    if camera.mj_cam >= 0:
        frame = "model camera " + ((mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_CAMERA, camera.mj_cam)
                                    if mj is not None else None) or str(camera.mj_cam))
    else:
        frame = body_name(camera.body) or "world"
    return {"name": camera.name, "width": int(camera.width), "height": int(camera.height),
            "fovy": float(camera.fovy), "intrinsics": {"fx": fx, "fy": fy, "cx": cx, "cy": cy},
            "min_range": float(camera.min_range), "max_range": float(camera.max_range),
            "frame": frame, "body": body_name(camera.body), "body_id": int(camera.body),
            "pos": [float(x) + 0.0 for x in camera.pos],
            "R": (np.asarray(camera.R, np.float64).reshape(3, 3) + 0.0).tolist(),     # + 0.0: no -0.0
            "excludes_body": body_name(exclude_body(camera)),
            "convention": "looks along -z, +x image right, +y image up; R columns are the camera axes"}




def robot_scene(model, q=None):
    """(compiled scene, wrist body or None) of a robot alone on a ground plane, no actuators. The
    robot shows its visual geoms where it has any (its collision geoms are then transparent to
    the cameras: alpha 0), else its collision geoms. The plane is at z = 0, or under the robot's
    lowest shown point at pose ``q`` (nq,; default neutral) where it reaches below z = 0 (a hanging
    pendulum). The wrist camera rides the detected gripper's body, if any."""
    import mujoco

    from caliper_jax.configuration import neutral
    from mjx_backend.grasp import detect_gripper
    from mjx_backend.layout import compile_scene

    def shown(mj):
        robot = np.asarray(mj.geom_bodyid) > 0
        visual = robot & (np.asarray(mj.geom_group) == 2)
        return visual if visual.any() else robot

    bare = compile_scene(model, actuators="none", visual=True)
    q = np.asarray(neutral(model) if q is None else q, np.float64)
    d = mujoco.MjData(bare.mj)
    d.qpos[:] = bare.layout.qpos_from_q(q[None], base=bare.mj.qpos0)[0]
    mujoco.mj_kinematics(bare.mj, d)
    ground = 0.0
    signs = np.array([[i, j, k] for i in (-1, 1) for j in (-1, 1) for k in (-1, 1)], np.float64)
    for g in np.flatnonzero(shown(bare.mj)):                # the lowest corner of every geom's box
        corners = bare.mj.geom_aabb[g, :3] + bare.mj.geom_aabb[g, 3:] * signs
        ground = min(ground, float((d.geom_xpos[g, 2] + corners @ d.geom_xmat[g].reshape(3, 3)[2]).min()))
    scene = compile_scene(model, actuators="none", visual=True, ground=ground)
    mj = scene.mj
    hidden = (np.asarray(mj.geom_bodyid) > 0) & ~shown(mj)
    mj.geom_rgba[hidden, 3] = 0.0
    mj.geom_matid[hidden] = -1
    try:
        joint = detect_gripper(model).joint
    except CaliperError:
        return scene, None
    return scene, int(scene.layout.body_id[model.body_id(joint)])


_RENDER_JIT: list = []


def render_still(mj, camera, qpos, ray_scene=None) -> dict:
    """One frame of compiled MjModel ``mj`` at positions ``qpos`` (mj nq,) (kinematics only):
    NumPy ``depth`` (H, W) m along the optical axis (inf: no hit), ``segmentation`` (H, W) geom id
    (-1: none), ``normal`` (H, W, 3), ``rgb`` (H, W, 3) uint8, and ``T_world_camera`` (4, 4) the
    camera's world pose (columns of the rotation: its x right, y up, z backwards)."""
    import jax
    import mujoco

    from caliper_jax.rays import poses, render, scene_from_mujoco

    if not _RENDER_JIT:
        _RENDER_JIT.append(jax.jit(render, static_argnums=1, static_argnames=("exclude_body",)))
    d = mujoco.MjData(mj)
    d.qpos[:] = np.asarray(qpos, np.float64)
    mujoco.mj_kinematics(mj, d)
    mujoco.mj_camlight(mj, d)
    p = poses(d)
    rays = scene_from_mujoco(mj) if ray_scene is None else ray_scene
    frame = _RENDER_JIT[0](rays, camera, p, exclude_body=exclude_body(camera))
    out = {k: np.asarray(v) for k, v in frame.items()}
    pos, R = np.asarray(camera.pos, np.float64), np.asarray(camera.R, np.float64).reshape(3, 3)
    if camera.mj_cam >= 0:
        pos, R = d.cam_xpos[camera.mj_cam].copy(), d.cam_xmat[camera.mj_cam].reshape(3, 3).copy()
    elif camera.body >= 0:
        bR = d.xmat[camera.body].reshape(3, 3)
        pos, R = d.xpos[camera.body] + bR @ pos, bR @ R
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, pos
    out["T_world_camera"] = T
    return out


__all__ = ["DEFAULT_FOVY", "DEFAULT_SIZE", "FEATURE_PREFIX", "NAMES", "camera_record", "camera_renderer",
           "exclude_body", "feature_key", "frame_cameras", "look_at", "parse_camera", "pose_fields",
           "render_still", "resolve_cameras", "robot_scene", "scene_cameras"]

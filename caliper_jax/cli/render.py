"""``caliper render TASK|ROBOT``: one camera frame of a task scene or a robot, as PNG files.

A thin face over :mod:`tasks.cameras` (the framing rule and the JAX ray engine): a task (zoo name
or ``*.json`` task file) is rendered at its start pose with its props, a robot (registry name,
URDF or MJCF file) alone on a ground plane at z = 0 (or just under it where it reaches lower), at
the neutral pose (q = 0) or ``--q``. The
colour image goes to ``--out``; ``--depth`` writes 16-bit depth in millimetres (0: no hit, along
the optical axis, clipped at 65.535 m); ``--segmentation`` one colour per geom (black: no hit),
the colours listed in the ``--json`` report with each visible geom's pixel count.
"""
from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np

from caliper_jax.cli import runtime
from caliper_jax.cli.common import emit, limit_warnings
from caliper_jax.errors import CaliperError, NotFoundError

#: Size of a ``--camera NAME`` without ``:WxH`` here (a picture to look at; datasets default to 96x96).
DEFAULT_SIZE = (320, 240)


def register(subparsers) -> None:
    p = subparsers.add_parser("render", help="render a task scene or a robot with the JAX ray engine (PNG)")
    p.add_argument("target", metavar="TASK|ROBOT",
                   help="a zoo task or task file (start pose, props), or a robot: registry name, URDF "
                        "or MJCF")
    p.add_argument("--camera", default="front", metavar="NAME[:WxH]",
                   help="front, side, top or wrist (robots with a gripper), optionally sized "
                        f"(default front:{DEFAULT_SIZE[0]}x{DEFAULT_SIZE[1]})")
    p.add_argument("--q", metavar="Q1,Q2,...", help="joint positions (default: the task's start pose; "
                                                     "a robot's neutral pose)")
    p.add_argument("--out", required=True, metavar="IMAGE.png", help="the colour image (PNG)")
    p.add_argument("--depth", metavar="D.png", help="also write depth: 16-bit PNG, millimetres, 0 = no hit")
    p.add_argument("--segmentation", metavar="S.png",
                   help="also write the geom of every pixel, one colour each")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_render)


def _target(text: str):
    """("task", Task) or ("robot", Model) for a TASK|ROBOT argument; the error names both tries."""
    from tasks.schema import find_task, load_task, zoo_files

    path = Path(text)
    if path.is_file() and path.suffix.lower() == ".json":
        return "task", load_task(path)
    if not path.is_file():
        try:
            return "task", load_task(find_task(text))
        except NotFoundError:
            pass
    from caliper_jax.loading import load

    try:
        return "robot", load(text)
    except NotFoundError as exc:
        zoo = ", ".join(load_task(f).name for f in zoo_files())
        raise NotFoundError(f"{text!r} is neither a task (zoo: {zoo}; or a *.json task file) nor a robot: "
                            f"{exc}") from None


def _png_path(path: str, flag: str) -> Path:
    from caliper_jax.cli.motion import _out_dir

    _out_dir(path, flag)
    if Path(path).suffix.lower() != ".png":
        raise CaliperError(f"{flag}: {path} must end in .png")
    return Path(path)


def segmentation_colors(seg: np.ndarray) -> tuple[np.ndarray, dict]:
    """(H, W, 3) uint8 image of a segmentation (a fixed, well-spread colour per geom id; black
    where no geom), and {geom id: (r, g, b)}."""
    ids = sorted(int(i) for i in np.unique(seg) if i >= 0)
    colors = {}
    for i in ids:
        h = (0.61803398875 * (i + 1)) % 1.0                 # golden-ratio hues, full saturation
        k = (np.array([5.0, 3.0, 1.0]) + 6.0 * h) % 6.0
        rgb = 1.0 - 0.85 * np.clip(np.minimum(k, 4.0 - k), 0.0, 1.0)
        colors[i] = tuple(int(round(255 * c)) for c in rgb)
    img = np.zeros(seg.shape + (3,), np.uint8)
    for i, c in colors.items():
        img[seg == i] = c
    return img, colors


def cmd_render(args) -> int:
    from caliper_jax.cli.common import configuration
    from tasks.cameras import NAMES, camera_record, frame_cameras, parse_camera, render_still, robot_scene

    out = _png_path(args.out, "--out")
    depth_path = None if args.depth is None else _png_path(args.depth, "--depth")
    seg_path = None if args.segmentation is None else _png_path(args.segmentation, "--segmentation")
    cam_name, w, h = parse_camera(args.camera, NAMES, default_size=DEFAULT_SIZE)
    kind, thing = _target(args.target)
    if kind == "task":
        from tasks.scene import build_scene

        ts = build_scene(thing)
        model, layout, mj, name = ts.model, ts.scene.layout, ts.scene.mj, ts.name
        q0 = np.asarray(ts.q0, np.float64)
        wrist = None if ts.gripper is None else int(layout.body_id[model.body_id(ts.gripper.joint)])
    else:
        model, name = thing, thing.name
        q0 = configuration(model, None)
    q = q0 if args.q is None else configuration(model, args.q, "--q")
    if kind == "robot":
        scene, wrist = robot_scene(model, q)
        layout, mj = scene.layout, scene.mj
    qpos = layout.qpos_from_q(q[None], base=mj.qpos0)[0]          # props at their spawn poses
    qpos_start = layout.qpos_from_q(q0[None], base=mj.qpos0)[0]
    warnings = limit_warnings(model, q, "--q") if args.q is not None else []
    if cam_name == "wrist" and wrist is None:
        raise CaliperError(f"--camera {args.camera!r}: {name} has no gripper to carry a wrist camera "
                           "(cameras: front, side, top)")
    # cameras are framed at the start pose (the wrist camera then rides its body to q)
    camera = frame_cameras(mj, qpos_start, wrist_body=wrist, size=(w, h))[cam_name]
    frame = render_still(mj, camera, qpos)
    import mujoco
    from PIL import Image

    seg, depth = frame["segmentation"], frame["depth"]
    hit = np.isfinite(depth)
    seg_img, colors = segmentation_colors(seg)
    written = [out] + [p for p in (depth_path, seg_path) if p is not None]
    with contextlib.ExitStack() as stack:
        for p in written:
            stack.enter_context(runtime.partial_output(p))
        with runtime.writing():
            Image.fromarray(frame["rgb"]).save(out, format="PNG")
            if depth_path is not None:
                mm = np.where(hit, np.clip(np.round(depth * 1000.0), 1, 65535), 0).astype(np.uint16)
                Image.fromarray(mm).save(depth_path, format="PNG")
            if seg_path is not None:
                Image.fromarray(seg_img).save(seg_path, format="PNG")
    geom_names = [mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_GEOM, i) or f"geom{i}" for i in range(mj.ngeom)]
    visible = [{"id": i, "name": geom_names[i], "pixels": int((seg == i).sum()), "color": list(c)}
               for i, c in colors.items()]
    seen = (np.asarray(mj.geom_bodyid) > 0) & (np.asarray(mj.geom_rgba)[:, 3] > 0)
    notes = [] if seen.any() else [f"robot {model.name!r} has no geometry to show (no collision or visual "
                                   "geoms)"]
    cam = camera_record(camera, mj)
    cam["T_world_camera"] = (frame["T_world_camera"] + 0.0).tolist()
    report = {"target": args.target, "kind": kind, "name": name, "robot": model.name, "q": q.tolist(),
              "camera": cam, "out": str(out), "depth": None if depth_path is None else str(depth_path),
              "segmentation": None if seg_path is None else str(seg_path),
              "hit_fraction": float(hit.mean()),
              "depth_m": ({"min": float(depth[hit].min()), "max": float(depth[hit].max())}
                          if hit.any() else None),
              "visible_geoms": visible, "limit_warnings": warnings, "notes": notes}
    lines = [f"{name} ({kind}): camera {cam_name} {w}x{h} -> {out}",
             f"  {hit.mean() * 100:.1f}% of the pixels hit a geom"
             + (f", depth {depth[hit].min():.3f}..{depth[hit].max():.3f} m" if hit.any() else "")]
    lines += [f"  {p}" for p in written[1:]]
    lines += [f"  warning: {m}" for m in warnings]
    lines += [f"  note: {m}" for m in notes]
    emit(args, report, "\n".join(lines))
    return 0

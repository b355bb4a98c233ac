"""Model -> MJCF, host-side string work (no MuJoCo needed to generate).

What is written:
- the kinematic tree: one MuJoCo body per moving joint, placed at the joint frame (our body
  frame), with a hinge / slide / ball / free joint at its origin; mimic joints become joint
  equalities (``polycoef = offset, multiplier``);
- inertials about the COM in the body frame (``fullinertia``); the compiler never infers mass
  from geometry (``inertiafromgeom="false"``);
- collision geoms: primitives, and meshes as mesh assets (STL/OBJ/MSH by file path; other formats
  inlined as the vertices of their convex hull, which is what MuJoCo collides with anyway);
- joint damping, armature, Coulomb friction (``frictionloss``), position limits and the effort
  limit (``actuatorfrcrange``) from the Model;
- actuators chosen at build time: torque ``motor`` (ctrlrange = effort), ``position`` servos
  (kp, kv) or ``velocity`` servos (kv) on every independent 1-dof joint -- never mixed, since a
  servo applies force on every step and cannot coexist with torque injection;
- an optional ground plane, props (free bodies), contact materials, a disabled weld equality
  per prop for grasping, the model's frames as sites, and the solver options;
- one noiseless ``jointactuatorfrc`` sensor per actuated joint (the effort applied at the joint,
  which ``mujoco.rollout`` returns with every step).

Every MuJoCo joint and actuator is named after our joint, so addressing after compilation is
resolved by name (:mod:`mjx_backend.layout`), never by assuming index order.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from caliper_jax.errors import CaliperError
from caliper_jax.io.rotations import mat_to_quat
from caliper_jax.model import Model
from mjx_backend.materials import Material, resolve_material
from mjx_backend.options import SimOptions, as_options
from mjx_backend.scene import Prop, as_props

ACTUATORS = ("motor", "position", "velocity", "none")
COLLIDERS = ("mesh", "primitive")
MUJOCO_MESH_SUFFIXES = (".stl", ".obj", ".msh")
_JOINT_TAG = {"revolute": "hinge", "prismatic": "slide", "ball": "ball"}


@dataclass(frozen=True)
class Mjcf:
    """A generated document and the names it uses."""

    xml: str
    robot: str
    body_names: tuple        # MuJoCo body name of each of our bodies
    joint_names: tuple       # MuJoCo joint name of each of our bodies (= our body names)
    actuated: tuple          # joints carrying an actuator, in actuator (ctrl) order
    actuators: str
    props: tuple             # Prop
    welds: tuple             # (prop name, weld equality name)
    weld_body: str | None    # MuJoCo body the welds attach props to
    ground: float | None
    options: SimOptions
    notes: tuple             # what could not be exported, one line each

    def save(self, path) -> Path:
        path = Path(path)
        path.write_text(self.xml)
        return path


def _f(x) -> str:
    """Shortest text that reads back as the same number in the value's own precision (a float32
    leaf 0.15 is written 0.15, not 0.15000000596046448)."""
    if isinstance(x, (np.floating, np.ndarray)) and np.asarray(x).dtype == np.float32:
        return np.format_float_positional(np.float32(x), unique=True, trim="-") if abs(float(x)) < 1e16 \
            else repr(float(x))
    return repr(float(x))


def _v(values) -> str:
    arr = np.asarray(values)
    if arr.dtype != np.float32:
        arr = arr.astype(np.float64)
    return " ".join(_f(x) for x in arr.ravel())


def _pose(el: ET.Element, R, p) -> None:
    p, R = np.asarray(p), np.asarray(R)
    if np.any(p != 0):
        el.set("pos", _v(p))
    if not np.array_equal(R, np.eye(3)):
        el.set("quat", _v(mat_to_quat(R).astype(R.dtype)))


def _per_joint(value, joints, what) -> dict:
    """A scalar, a sequence in joint order, or a {joint: value} mapping -> {joint: float}."""
    if isinstance(value, dict):
        unknown = set(value) - set(joints)
        if unknown:
            raise CaliperError(f"{what}: unknown joint(s) {', '.join(sorted(unknown))}")
        return {j: float(value.get(j, 0.0)) for j in joints}
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0:
        return {j: float(arr) for j in joints}
    if arr.shape != (len(joints),):
        raise CaliperError(f"{what}: expected a scalar or {len(joints)} values (one per actuated joint)")
    return dict(zip(joints, map(float, arr), strict=True))


def _mesh_attributes(geom) -> tuple[dict | None, str | None]:
    """MJCF <mesh> attributes for a mesh geom, or (None, why it is skipped)."""
    if geom.mesh is None:
        return None, f"{geom.link}: mesh {geom.mesh_uri or '?'} could not be resolved"
    path = Path(geom.mesh)
    scale = {"scale": _v(geom.size)} if tuple(geom.size) != (1.0, 1.0, 1.0) else {}
    if path.suffix.lower() in MUJOCO_MESH_SUFFIXES:
        return {"file": str(path.resolve()), "inertia": "convex", **scale}, None
    try:
        import trimesh

        loaded = trimesh.load(str(path), force="mesh")
        hull = loaded.convex_hull.vertices
    except Exception as exc:  # an unreadable mesh is a note, not a failed build
        return None, f"{geom.link}: mesh {path.name} could not be converted ({type(exc).__name__}: {exc})"
    return {"vertex": _v(hull), "inertia": "convex", **scale}, None


def _unique(name: str, taken: set) -> str:
    out, k = name, 1
    while out in taken:
        out, k = f"{name}_{k}", k + 1
    taken.add(out)
    return out


def _body_names(model: Model) -> tuple:
    """MuJoCo body names: the child link when a link frame sits at a body's origin, else the
    joint name."""
    taken = {"world"}
    out = []
    for i, jname in enumerate(model.body_names):
        link = None
        for k, (fb, kind) in enumerate(zip(model.frame_body, model.frame_kind, strict=True)):
            if fb == i and kind == "link" and np.allclose(model.frame_R[k], np.eye(3)) and \
                    np.allclose(model.frame_p[k], 0.0):
                link = model.frame_names[k]
                break
        out.append(_unique(link or jname, taken))
    return tuple(out)


def _set_material(el: ET.Element, material: Material | None) -> None:
    if material is not None:
        for key, value in material.attributes().items():
            el.set(key, value)


def model_to_mjcf(model: Model, *, actuators: str = "motor", kp=100.0, kv=10.0, ground: float | None = None,
                  props=(), material=None, ground_material=None, options=None, visual: bool = False,
                  meshes: bool = True, weld_body: str | None = None, arm=None,
                  colliders: str = "mesh", fixtures=()) -> Mjcf:
    """Generate the MJCF of ``model`` in a scene.

    ``actuators``: "motor" | "position" | "velocity" | "none". ``kp``/``kv``: servo gains (scalar,
    per actuated joint, or {joint: gain}). ``ground``: height of a ground plane, None for none.
    ``fixtures``: static boxes (:class:`Prop` values whose mass is unused) fixed to the world, each
    one geom named after it (a peg's hole, a wall).
    ``material``: robot (and default ground) contact material, a preset name or a mapping; None
    keeps MuJoCo's defaults. ``weld_body``: our joint name or "auto" (the detected gripper) to
    add one inactive weld per prop for grasping. ``visual``: also export visual geoms (no contact).
    ``arm``: an :class:`ArmPhysics` (gravity compensation, joint armature/damping overrides,
    friction pads; see its doc), or None for the Model's own values and no pads.
    ``colliders``: "mesh" (mesh colliders as meshes) or "primitive" (each mesh collider replaced by
    the capsule fitted to its vertices, :func:`fit_capsule`, and no robot self-contacts: the model
    MJX compiles quickly and steps without mesh-mesh contact).
    """
    if colliders not in COLLIDERS:
        raise CaliperError(f"colliders={colliders!r}: expected one of {', '.join(COLLIDERS)}")
    if actuators not in ACTUATORS:
        raise CaliperError(f"actuators={actuators!r}: expected one of {', '.join(ACTUATORS)}")
    opts = as_options(options)
    props = as_props(props)
    fixtures = as_props(fixtures)
    robot_mat = resolve_material(material)
    ground_mat = resolve_material(ground_material) if ground_material is not None else robot_mat
    if ground is not None and not np.isfinite(ground):
        raise CaliperError(f"ground height must be finite, got {ground}")
    body_names = _body_names(model)
    taken_bodies = set(body_names) | {"world"}
    for p in (*props, *fixtures):
        if p.name in taken_bodies:
            raise CaliperError(f"prop name {p.name!r} collides with a robot body name or another prop")
        taken_bodies.add(p.name)
    for f in fixtures:
        if f.kind != "box":
            raise CaliperError(f"fixture {f.name!r}: kind {f.kind!r}, only boxes are fixtures")
    weld_mj = None
    if weld_body is not None and props:
        if weld_body == "auto":
            from mjx_backend.grasp import detect_gripper

            weld_body = detect_gripper(model).joint
        weld_mj = body_names[model.body_id(weld_body)] if weld_body in model.body_names else weld_body
        if weld_mj not in body_names:
            raise CaliperError(f"weld_body {weld_body!r} is neither a joint nor a body of {model.name!r}")

    root = ET.Element("mujoco", model=model.name or "robot")
    ET.SubElement(root, "compiler", angle="radian", autolimits="true", inertiafromgeom="false")
    option = ET.SubElement(root, "option", gravity=_v(model.gravity), **opts.option_attributes())
    if not opts.contact:
        ET.SubElement(option, "flag", contact="disable")
    size = {k: str(getattr(opts, k)) for k in ("nconmax", "njmax") if getattr(opts, k) is not None}
    if size:
        ET.SubElement(root, "size", **size)
    asset = ET.SubElement(root, "asset")
    world = ET.SubElement(root, "worldbody")
    notes: list[str] = []

    if ground is not None:
        g = ET.SubElement(world, "geom", name="ground", type="plane", size="0 0 1", pos=f"0 0 {_f(ground)}",
                          rgba="0.6 0.6 0.6 1")
        _set_material(g, ground_mat)
    for f in fixtures:
        g = ET.SubElement(world, "geom", name=f.name, type="box", size=_v(f.size), pos=_v(f.pos),
                          quat=_v(f.quat), rgba=_v(f.rgba))
        _set_material(g, f.material)

    # ---- robot bodies ------------------------------------------------------------------------
    # leaves keep their dtype so numbers are written in their own precision
    mass, com, inertia = (np.asarray(x) for x in (model.body_mass, model.body_com, model.body_inertia))
    jR, jp, axis = (np.asarray(x) for x in (model.jnt_R, model.jnt_p, model.jnt_axis))
    lower, upper = np.asarray(model.qpos_lower), np.asarray(model.qpos_upper)
    damping, armature = np.asarray(model.dof_damping), np.asarray(model.dof_armature)
    if arm is not None:
        damping, armature = arm.override(model, "damping", damping), arm.override(model, "armature", armature)
    friction, effort = np.asarray(model.dof_friction), np.asarray(model.dof_effort_limit)
    elements: dict[int, ET.Element] = {-1: world}
    actuated: list[str] = []
    equality = ET.Element("equality")
    for i, (jname, jtype) in enumerate(zip(model.body_names, model.jnt_type, strict=True)):
        parent = model.body_parent[i]
        body = ET.SubElement(elements[parent], "body", name=body_names[i])
        _pose(body, jR[i], jp[i])
        if arm is not None and arm.gravcomp and jname not in arm.no_gravcomp:
            body.set("gravcomp", "1")
        elements[i] = body
        if jtype == "free":
            if parent != -1:
                raise CaliperError(f"{model.name}: free joint {jname!r} must hang off the world in MuJoCo")
            ET.SubElement(body, "freejoint", name=jname)
        else:
            joint = ET.SubElement(body, "joint", name=jname, type=_JOINT_TAG[jtype])
            mimic = model.vfull_mimic[model.body_vadr[i]]
            if jtype != "ball":
                joint.set("axis", _v(axis[i]))
            if mimic >= 0:
                src = _mimic_source(model, i)
                poly = f"{_f(model.mimic_offset[mimic])} {_f(model.mimic_multiplier[mimic])} 0 0 0"
                eq = ET.SubElement(equality, "joint", name=f"mimic_{jname}", joint1=jname, joint2=src,
                                   polycoef=poly)
                if arm is not None and arm.mimic_solref is not None:
                    eq.set("solref", _v(arm.mimic_solref))
                    eq.set("solimp", _v(arm.mimic_solimp))
            else:
                qa = model.qfull_src[model.body_qadr[i]]
                va = model.vfull_src[model.body_vadr[i]]
                if jtype != "ball" and np.isfinite(lower[qa]) and np.isfinite(upper[qa]):
                    joint.set("range", f"{_f(lower[qa])} {_f(upper[qa])}")
                nv = 3 if jtype == "ball" else 1
                for attr, values in (("damping", damping), ("armature", armature),
                                     ("frictionloss", friction)):
                    value = values[va] if nv == 1 else np.mean(values[va:va + nv])
                    if value != 0.0:
                        joint.set(attr, _f(value))
                if jtype != "ball" and np.isfinite(effort[va]):
                    joint.set("actuatorfrcrange", f"{_f(-effort[va])} {_f(effort[va])}")
                if jtype != "ball" and actuators != "none":
                    actuated.append(jname)
        if mass[i] > 0 or np.any(inertia[i]):
            I = inertia[i]
            ET.SubElement(body, "inertial", pos=_v(com[i]), mass=_f(mass[i]),
                          fullinertia=_v([I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2]]))

    # ---- geoms -------------------------------------------------------------------------------
    mesh_names: dict[tuple, str] = {}
    counts: dict[str, int] = {}
    boxed = arm.box_links() if arm is not None else set()
    box_body: dict[str, int] = {}
    no_self = arm is not None and not arm.self_collide
    for geom in model.geoms:
        if geom.role != "collision" and not visual:
            continue
        if geom.role == "collision" and geom.link in boxed:
            box_body[geom.link] = geom.body              # replaced by the arm's pad boxes below
            continue
        parent_el = elements[geom.body]
        k = counts[geom.link] = counts.get(geom.link, -1) + 1
        attrs = {"name": f"{geom.link}_{geom.role}{k}", "type": geom.kind}
        if geom.kind == "mesh" and colliders == "primitive" and geom.role == "collision":
            fit = fit_capsule(geom)
            if fit is None:
                notes.append(f"{geom.link}: mesh {geom.mesh_uri or '?'} has no vertices to fit a capsule to")
                continue
            a, b, r = fit
            shape = {"type": "sphere", "pos": _v(a)} if np.array_equal(a, b) else \
                {"type": "capsule", "fromto": _v([*a, *b])}
            el = ET.SubElement(parent_el, "geom", name=attrs["name"], **shape, size=_f(r), contype="2",
                               conaffinity="1")
            _set_material(el, robot_mat)
            continue
        if geom.kind == "mesh":
            if not meshes:
                notes.append(f"{geom.link}: mesh collider skipped (meshes=False)")
                continue
            key = (geom.mesh, tuple(geom.size))
            if key not in mesh_names:
                mesh_attrs, why = _mesh_attributes(geom)
                if mesh_attrs is None:
                    notes.append(why)
                    continue
                mesh_names[key] = f"mesh{len(mesh_names)}_{Path(geom.mesh).stem}"
                ET.SubElement(asset, "mesh", name=mesh_names[key], **mesh_attrs)
            attrs["mesh"] = mesh_names[key]
        else:
            attrs["size"] = _v(geom.size)
        el = ET.SubElement(parent_el, "geom", **attrs)
        _pose(el, geom.R, geom.p)
        if geom.role != "collision":
            el.set("contype", "0")
            el.set("conaffinity", "0")
            el.set("group", "2")
        elif arm is not None and geom.link in arm.pad_links:
            _set_material(el, arm.pad_material)
            el.set("condim", str(arm.pad_condim))
            el.set("name", f"{geom.link}_pad{k}")
        else:
            _set_material(el, robot_mat)
        if geom.role == "collision" and (colliders == "primitive" or no_self):
            el.set("contype", "2")          # touches props and the ground, never the robot itself
            el.set("conaffinity", "1")
    for k, (link, center, half) in enumerate(arm.pad_boxes if arm is not None else ()):
        if link not in box_body:
            raise CaliperError(f"pad_boxes: {model.name!r} has no link {link!r} with collision geometry")
        el = ET.SubElement(elements[box_body[link]], "geom", name=f"{link}_pad{k}", type="box",
                           pos=_v(center), size=_v(half))
        _set_material(el, arm.pad_material)
        el.set("condim", str(arm.pad_condim))
        if colliders == "primitive" or no_self:
            el.set("contype", "2")
            el.set("conaffinity", "1")

    # ---- frames as sites ---------------------------------------------------------------------
    for k, name in enumerate(model.frame_names):
        if model.frame_kind[k] == "joint":
            continue
        site = ET.SubElement(elements[model.frame_body[k]], "site", name=name, size="0.005", group="4")
        _pose(site, model.frame_R[k], model.frame_p[k])

    # ---- props ---------------------------------------------------------------------------------
    welds = []
    for prop in props:
        pb = ET.SubElement(world, "body", name=prop.name, pos=_v(prop.pos), quat=_v(prop.quat))
        ET.SubElement(pb, "freejoint", name=f"{prop.name}_free")
        ET.SubElement(pb, "inertial", pos="0 0 0", mass=_f(prop.mass), diaginertia=_v(prop.inertia()))
        g = ET.SubElement(pb, "geom", name=prop.name, type=prop.kind, size=_v(prop.size), rgba=_v(prop.rgba))
        _set_material(g, prop.material)
        if arm is not None and arm.pad_links:
            # the prop's own friction decides its contacts (MuJoCo takes the higher-priority geom's
            # friction and condim instead of the element-wise max), so a frictionless prop is ice
            # (sliding friction 0 is a frictionless contact, condim 1: MuJoCo's pyramidal cone
            # degenerates with a zero coefficient and condim > 1 -- a resting cube flies off, measured)
            g.set("priority", "1")
            frictionless = prop.material is not None and prop.material.friction[0] == 0.0
            g.set("condim", "1" if frictionless else str(arm.pad_condim))
        if weld_mj is not None:
            eq = f"grasp_{prop.name}"
            ET.SubElement(equality, "weld", name=eq, body1=weld_mj, body2=prop.name, active="false")
            welds.append((prop.name, eq))
    if len(equality):
        root.append(equality)

    # ---- actuators -----------------------------------------------------------------------------
    if actuated:
        act = ET.SubElement(root, "actuator")
        kps = _per_joint(kp, actuated, "kp")
        kvs = _per_joint(kv, actuated, "kv")
        for jname in actuated:
            va = model.vfull_src[model.body_vadr[model.body_id(jname)]]
            if actuators == "motor":
                el = ET.SubElement(act, "motor", name=jname, joint=jname)
                if np.isfinite(effort[va]):
                    el.set("ctrlrange", f"{_f(-effort[va])} {_f(effort[va])}")
            elif actuators == "position":
                el = ET.SubElement(act, "position", name=jname, joint=jname, kp=_f(kps[jname]))
                if kvs[jname]:
                    el.set("kv", _f(kvs[jname]))
                qa = model.qfull_src[model.body_qadr[model.body_id(jname)]]
                if np.isfinite(lower[qa]) and np.isfinite(upper[qa]):
                    el.set("ctrlrange", f"{_f(lower[qa])} {_f(upper[qa])}")
            else:
                ET.SubElement(act, "velocity", name=jname, joint=jname, kv=_f(kvs[jname]))
        sensor = ET.SubElement(root, "sensor")   # exact applied effort, readable from rollouts too
        for jname in actuated:
            ET.SubElement(sensor, "jointactuatorfrc", name=f"effort_{jname}", joint=jname)
    if not len(asset):
        root.remove(asset)
    ET.indent(root)
    return Mjcf(ET.tostring(root, encoding="unicode"), model.name, body_names, tuple(model.body_names),
                tuple(actuated), actuators, props, tuple(welds), weld_mj, ground, opts, tuple(notes))


def fit_capsule(geom) -> tuple | None:
    """(end a (3,), end b (3,), radius) in the geom's body frame: the capsule whose axis is the
    principal axis of the mesh's vertices and whose radius is their largest distance from it, so it
    covers every vertex (conservative: contacts start up to a few mm early on a tapered link); a
    sphere (a == b) when the mesh is shorter than its width. None when the mesh has no vertices."""
    if geom.mesh is None:
        return None
    try:
        import trimesh

        verts = np.asarray(trimesh.load(str(geom.mesh), force="mesh").vertices, np.float64)
    except Exception:  # an unreadable mesh is a note, not a failed build
        return None
    if len(verts) == 0:
        return None
    R, p = np.asarray(geom.R, np.float64), np.asarray(geom.p, np.float64)
    pts = (verts * np.asarray(geom.size, np.float64)) @ R.T + p
    c = pts.mean(axis=0)
    axis = np.linalg.svd(pts - c, full_matrices=False)[2][0]
    t = (pts - c) @ axis
    radial = np.linalg.norm((pts - c) - np.outer(t, axis), axis=1)
    r = float(radial.max())
    lo, hi = float(t.min()) + r, float(t.max()) - r
    if hi - lo < 1e-3:                               # short and wide: a sphere about the middle
        mid = 0.5 * (t.min() + t.max())
        r = float(np.linalg.norm(pts - (c + mid * axis), axis=1).max())
        lo = hi = mid
    else:                                            # each vertex inside the capsule (ends included)
        ends = np.clip(t, lo, hi)
        r = float(np.linalg.norm(pts - (c + np.outer(ends, axis)), axis=1).max())
    return c + lo * axis, c + hi * axis, r


def _mimic_source(model: Model, i: int) -> str:
    """The joint a mimic body follows: the independent joint owning its source coordinate."""
    src_q = model.qfull_src[model.body_qadr[i]]
    for k, name in enumerate(model.body_names):
        if model.vfull_mimic[model.body_vadr[k]] < 0 and model.qfull_src[model.body_qadr[k]] == src_q:
            return name
    raise CaliperError(f"{model.name}: mimic joint {model.body_names[i]!r} has no source joint")


def save_mjcf(model: Model, path, **kwargs) -> Mjcf:
    """Generate the MJCF (see :func:`model_to_mjcf`) and write it to ``path`` for debugging."""
    doc = model_to_mjcf(model, **kwargs)
    doc.save(path)
    return doc


__all__ = ["ACTUATORS", "COLLIDERS", "Mjcf", "fit_capsule", "Prop", "model_to_mjcf", "save_mjcf"]

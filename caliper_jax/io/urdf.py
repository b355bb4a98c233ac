"""URDF -> RobotDescription (host side, NumPy only).

Supports revolute, continuous (a revolute without limits, one coordinate), prismatic, fixed and
floating joints, ``<mimic>``, ``<dynamics damping friction>``, ``<inertial>``, and collision /
visual geometry with mesh paths resolved (kinematics never need the meshes themselves). Bad input
raises :class:`ModelError` naming the file and element.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from caliper_jax.errors import ModelError
from caliper_jax.io.description import Body, Frame, Geom, RobotDescription
from caliper_jax.io.meshpath import resolve_mesh
from caliper_jax.io.robot_xml import parse_robot_xml, read_text
from caliper_jax.io.rotations import rpy_matrix

_JOINT_TYPES = {"revolute", "continuous", "prismatic", "fixed", "floating"}


def read_urdf(path, *, floating: bool = False, mimic: bool = True, mesh_roots=()) -> RobotDescription:
    """Read a URDF file. ``floating`` adds a free joint above the root link; ``mimic=False``
    treats mimic joints as independent coordinates (Pinocchio's default)."""
    path = Path(path)
    text = read_text(path, "URDF file", error=ModelError)
    return read_urdf_string(text, source=str(path), floating=floating, mimic=mimic, mesh_roots=mesh_roots)


def read_urdf_string(text: str, *, source: str = "<string>", floating: bool = False, mimic: bool = True,
                     mesh_roots=()) -> RobotDescription:
    """Read URDF XML text; ``source`` names it in errors and anchors relative mesh paths."""
    root = parse_robot_xml(text, source, error=ModelError)
    try:
        return _Builder(root, source, floating, mimic, mesh_roots).build()
    except ModelError as exc:  # attribute-level errors do not know the file: name it
        message = str(exc)
        if not message.startswith(f"{source}:"):
            raise ModelError(f"{source}: {message}") from None
        raise


def _floats(text, n, where):
    parts = (text or "").split()
    try:
        values = [float(x) for x in parts]
    except ValueError:
        raise ModelError(f"{where}: expected {n} numbers, got {text!r}") from None
    if len(values) != n:
        raise ModelError(f"{where}: expected {n} numbers, got {text!r}")
    if not all(math.isfinite(v) for v in values):
        raise ModelError(f"{where}: non-finite value in {text!r}")
    return np.array(values, dtype=np.float64)


def _attr_float(elem, name, where, default=None):
    raw = elem.get(name)
    if raw is None:
        if default is None:
            raise ModelError(f"{where}: missing attribute {name}=")
        return default
    return float(_floats(raw, 1, f"{where} {name}=")[0])


def _origin(elem, where):
    """(R, p) of an element's <origin>, identity when absent."""
    org = elem.find("origin")
    if org is None:
        return np.eye(3), np.zeros(3)
    xyz = _floats(org.get("xyz", "0 0 0"), 3, f"{where} <origin xyz>")
    rpy = _floats(org.get("rpy", "0 0 0"), 3, f"{where} <origin rpy>")
    return rpy_matrix(rpy), xyz


class _Builder:
    def __init__(self, root, source, floating, mimic, mesh_roots):
        self.root, self.source = root, source
        self.floating, self.mimic, self.mesh_roots = floating, mimic, mesh_roots
        self.bodies: list[Body] = []
        self.frames: list[Frame] = []
        self.frame_names: set[str] = set()   # names in self.frames (a list scan per joint is O(n^2))
        self.geoms: list[Geom] = []
        self.warnings: list[str] = []

    def err(self, msg):
        return ModelError(f"{self.source}: {msg}")

    def build(self) -> RobotDescription:
        links = {}
        for el in self.root.findall("link"):
            name = el.get("name")
            if not name:
                raise self.err("a <link> has no name")
            if name in links:
                raise self.err(f"duplicate link name {name!r}")
            links[name] = el
        if not links:
            raise self.err("no <link> elements")
        joints, child_of, children = {}, {}, {name: [] for name in links}
        for el in self.root.findall("joint"):
            name = el.get("name")
            if not name:
                raise self.err("a <joint> has no name")
            if name in joints:
                raise self.err(f"duplicate joint name {name!r}")
            jtype = el.get("type")
            if jtype not in _JOINT_TYPES:
                raise self.err(f"joint {name!r}: unsupported type {jtype!r} (expected one of "
                               f"{', '.join(sorted(_JOINT_TYPES))})")
            parent = (el.find("parent").get("link") if el.find("parent") is not None else None)
            child = (el.find("child").get("link") if el.find("child") is not None else None)
            for role, link in (("parent", parent), ("child", child)):
                if link is None:
                    raise self.err(f"joint {name!r}: missing <{role} link=...>")
                if link not in links:
                    raise self.err(f"joint {name!r}: {role} link {link!r} is not defined")
            if child in child_of:
                raise self.err(f"link {child!r} has two parent joints ({child_of[child]!r}, {name!r})")
            joints[name] = el
            child_of[child] = name
            children[parent].append(name)
        roots = [name for name in links if name not in child_of]
        if not roots:
            raise self.err("the joints form a cycle (every link has a parent)")
        if len(roots) > 1:
            raise self.err(f"more than one root link: {', '.join(roots)} (the tree must be connected)")
        self.links, self.joints, self.children = links, joints, children
        root = roots[0]
        body = -1
        if self.floating:
            self.bodies.append(Body("root_joint", "free", -1, np.eye(3), np.zeros(3), np.zeros(3)))
            body = 0
        self._visit_link(root, body, np.eye(3), np.zeros(3))
        visited = {f.name for f in self.frames if f.kind == "link"}
        if len(visited) != len(links):
            missing = sorted(set(links) - visited)
            raise self.err(f"links not connected to the root {root!r} (cycle?): {', '.join(missing)}")
        self._resolve_mimic()
        name = self.root.get("name") or Path(self.source).stem
        return RobotDescription(name, self.bodies, self.frames, self.geoms, self.source,
                                warnings=self.warnings)

    def _visit_link(self, link, body, R, p):
        """Attach ``link`` to ``body`` at (R, p) and recurse into its child joints (iteratively)."""
        stack = [(link, body, R, p)]
        while stack:
            link, body, R, p = stack.pop()
            self._add_frame(Frame(link, body, R, p, "link"))
            el = self.links[link]
            self._inertial(el, link, body, R, p)
            self._geometry(el, link, body, R, p)
            attached = [self._joint(jname, body, R, p) for jname in self.children[link]]
            stack.extend(reversed(attached))

    def _add_frame(self, frame: Frame):
        self.frames.append(frame)
        self.frame_names.add(frame.name)

    def _joint(self, jname, body, R, p):
        el = self.joints[jname]
        where = f"joint {jname!r}"
        jtype = el.get("type")
        Ro, po = _origin(el, where)
        Rj, pj = R @ Ro, R @ po + p
        child = el.find("child").get("link")
        if jtype == "fixed":
            if jname not in self.frame_names:
                self._add_frame(Frame(jname, body, Rj, pj, "joint"))
            return child, body, Rj, pj
        if jtype == "floating":
            new = Body(jname, "free", body, Rj, pj, np.zeros(3))
        else:
            axis_el = el.find("axis")
            axis = _floats(axis_el.get("xyz", "1 0 0") if axis_el is not None else "1 0 0", 3,
                           f"{where} <axis xyz>")
            norm = np.linalg.norm(axis)
            if norm < 1e-12:
                raise self.err(f"{where}: <axis xyz> has zero length")
            axis = axis / norm
            new = Body(jname, "prismatic" if jtype == "prismatic" else "revolute", body, Rj, pj, axis)
            self._limits(el, new, jtype, where)
            dyn = el.find("dynamics")
            if dyn is not None:
                new.damping = np.array([_attr_float(dyn, "damping", f"{where} <dynamics>", 0.0)])
                new.friction = np.array([_attr_float(dyn, "friction", f"{where} <dynamics>", 0.0)])
            mim = el.find("mimic")
            if mim is not None and self.mimic:
                src = mim.get("joint")
                if not src:
                    raise self.err(f"{where}: <mimic> without joint=")
                new.mimic = (src, _attr_float(mim, "multiplier", f"{where} <mimic>", 1.0),
                             _attr_float(mim, "offset", f"{where} <mimic>", 0.0))
        self.bodies.append(new)
        index = len(self.bodies) - 1
        if jname not in self.frame_names:
            self._add_frame(Frame(jname, index, np.eye(3), np.zeros(3), "joint"))
        return child, index, np.eye(3), np.zeros(3)

    def _limits(self, el, body, jtype, where):
        lim = el.find("limit")
        inf = np.array([np.inf])
        body.lower, body.upper, body.velocity, body.effort = -inf, inf.copy(), inf.copy(), inf.copy()
        if lim is None:
            return
        if jtype != "continuous":
            lo = _attr_float(lim, "lower", f"{where} <limit>", 0.0)
            hi = _attr_float(lim, "upper", f"{where} <limit>", 0.0)
            if lo > hi:
                raise self.err(f"{where}: <limit> lower={lo} exceeds upper={hi}")
            if lo < hi:
                body.lower, body.upper = np.array([lo]), np.array([hi])
        vel = _attr_float(lim, "velocity", f"{where} <limit>", math.inf)
        eff = _attr_float(lim, "effort", f"{where} <limit>", math.inf)
        body.velocity, body.effort = np.array([vel]), np.array([eff])

    def _inertial(self, el, link, body, R, p):
        ine = el.find("inertial")
        if ine is None:
            return
        where = f"link {link!r} <inertial>"
        Ri, pi = _origin(ine, where)
        mass_el = ine.find("mass")
        mass = _attr_float(mass_el, "value", f"{where} <mass>") if mass_el is not None else 0.0
        if mass < 0:
            raise self.err(f"{where}: negative mass {mass}")
        I = np.zeros((3, 3))
        in_el = ine.find("inertia")
        if in_el is not None:
            g = {k: _attr_float(in_el, k, f"{where} <inertia>", 0.0)
                 for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
            I = np.array([[g["ixx"], g["ixy"], g["ixz"]], [g["ixy"], g["iyy"], g["iyz"]],
                          [g["ixz"], g["iyz"], g["izz"]]])
        Rb = R @ Ri
        if body < 0:
            return  # inertia of links welded to the world does not move
        self.bodies[body].add_inertia(mass, R @ pi + p, Rb @ I @ Rb.T)

    def _geometry(self, el, link, body, R, p):
        for role in ("collision", "visual"):
            for k, g in enumerate(el.findall(role)):
                where = f"link {link!r} <{role}> #{k}"
                Rg, pg = _origin(g, where)
                geo = g.find("geometry")
                shape = geo[0] if geo is not None and len(geo) else None
                if shape is None:
                    raise self.err(f"{where}: <geometry> is empty")
                mesh = uri = None
                tried: tuple = ()
                if shape.tag == "box":
                    kind, size = "box", tuple(_floats(shape.get("size"), 3, f"{where} <box size>") / 2)
                elif shape.tag == "sphere":
                    kind, size = "sphere", (_attr_float(shape, "radius", f"{where} <sphere>"),)
                elif shape.tag in ("cylinder", "capsule"):
                    kind = shape.tag
                    size = (_attr_float(shape, "radius", f"{where} <{kind}>"),
                            _attr_float(shape, "length", f"{where} <{kind}>") / 2)
                elif shape.tag == "mesh":
                    kind, uri = "mesh", shape.get("filename", "")
                    size = tuple(_floats(shape.get("scale", "1 1 1"), 3, f"{where} <mesh scale>"))
                    mesh, tried_list = resolve_mesh(uri, self.source, self.mesh_roots)
                    tried = tuple(tried_list)
                    if mesh is None:
                        self.warnings.append(
                            f"link {link!r} {role} mesh {uri!r} not found; searched: " + ", ".join(tried))
                else:
                    raise self.err(f"{where}: unsupported geometry <{shape.tag}>")
                Rb, pb = R @ Rg, R @ pg + p
                self.geoms.append(Geom(link, body, role, kind, tuple(map(tuple, Rb)), tuple(pb),
                                       tuple(float(s) for s in size), mesh, uri, tried))

    def _resolve_mimic(self):
        names = {b.name: b for b in self.bodies}
        for b in self.bodies:
            if b.mimic is None:
                continue
            src = names.get(b.mimic[0])
            if src is None:
                raise self.err(f"joint {b.name!r}: <mimic> references unknown joint {b.mimic[0]!r}")
            if src is b or src.mimic is not None:
                raise self.err(f"joint {b.name!r}: mimic chains and self-mimic are not supported")
            if src.nv != 1:
                raise self.err(f"joint {b.name!r}: mimics a multi-dof joint {src.name!r}")

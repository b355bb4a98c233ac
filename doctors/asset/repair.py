"""Mechanical repair: write a fixed copy beside the input, log every change, re-diagnose the copy.

Fixes (all opt-in): ``compute_inertials`` (A001, uniform density, never the root, never over a
positive mass), ``normalize_axes`` (A009), ``dedupe_mesh_basenames`` (A004, copies the later
files under an ``mN__`` prefix) and ``inject_limits`` (A007, A014 and unparseable revolute
ranges of A016). Links and joints are edited positionally, so duplicates (A015) each get their
own result. A plain URDF whose xacro leftovers expand in-process is written expanded (A013).
"""
from __future__ import annotations

import contextlib
import filecmp
import math
import os
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from caliper_jax.errors import CaliperError
from doctors.asset import inertia
from doctors.asset.checks import (
    axis_state,
    basename,
    basename_clashes,
    diagnose,
    mass_problem,
    mesh_refs,
    range_state,
    run_checks,
)
from doctors.asset.loader import XACRO_NS, load_document
from doctors.asset.meshes import Meshes, MeshLoadError
from doctors.asset.report import Report
from doctors.asset.urdf_xml import Geometry, Link, Robot, build_robot, origin_of, parse_number, parse_vector

FIXES = ("compute_inertials", "normalize_axes", "dedupe_mesh_basenames", "inject_limits")
DEFAULT_DENSITY = 1000.0
INJECTED_EFFORT = "1"
INJECTED_VELOCITY = "1"

ET.register_namespace("xacro", XACRO_NS)


@dataclass
class RepairResult:
    """Where the copy went, what was applied or skipped (with reasons), and the two reports."""

    out: str
    before: Report
    after: Report
    applied: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    mesh_copies: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        """The repair section of a JSON report (``before`` is the report it belongs to)."""
        return {"out": self.out, "applied": self.applied, "skipped": self.skipped,
                "mesh_copies": self.mesh_copies, "after": self.after.to_dict()}

    def to_text(self) -> str:
        lines = [f"repair: wrote {self.out} ({len(self.applied)} applied, {len(self.skipped)} skipped)"]
        lines += [f"  applied {a['fix']} on {a['target']}: {a['detail']}" for a in self.applied]
        lines += [f"  skipped {s['fix']} on {s['target']}: {s['reason']}" for s in self.skipped]
        return "\n".join(lines + ["", "after repair:", self.after.to_text()])


class _Session:
    """One repair run: the document being edited and the log."""

    def __init__(self, robot: Robot, meshes: Meshes, fixes: Iterable[str], density: float):
        self.robot, self.meshes, self.fixes, self.density = robot, meshes, set(fixes), density
        self.applied: list[dict] = []
        self.skipped: list[dict] = []
        self.mesh_copies: list[dict] = []
        link_names = Counter(link.name for link in robot.links)
        self.duplicated = {name for name, count in link_names.items() if count > 1}

    def wants(self, fix: str, target: str) -> bool:
        """True when ``fix`` is enabled; otherwise log the target as skipped."""
        if fix not in self.fixes:
            self.skip(fix, target, "fix not requested")
        return fix in self.fixes

    def apply(self, fix: str, target: str, detail: str) -> None:
        self.applied.append({"fix": fix, "target": target, "detail": detail})

    def skip(self, fix: str, target: str, reason: str) -> None:
        self.skipped.append({"fix": fix, "target": target, "reason": reason})

    def link_label(self, link: Link) -> str:
        suffix = f" (link #{link.index + 1} in the file)" if link.name in self.duplicated else ""
        return f"link `{link.name}`{suffix}"


def default_output(path: Path) -> Path:
    """``<stem>.repaired.urdf`` beside ``path`` (``robot.urdf.xacro`` -> ``robot.repaired.urdf``)."""
    name = path.name
    for suffix in (".xacro", ".urdf"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    return path.with_name(f"{name}.repaired.urdf")


def repair(path: str | Path, fixes: Iterable[str] = FIXES, density: float = DEFAULT_DENSITY,
           out: str | Path | None = None, mesh_roots: Sequence[str | Path] = ()) -> RepairResult:
    """Write a repaired copy of ``path`` (the input is never modified) and re-diagnose it."""
    path, fixes = Path(path), tuple(fixes)
    roots = tuple(Path(r) for r in mesh_roots)
    unknown = sorted(set(fixes) - set(FIXES))
    if unknown:
        raise CaliperError(f"unknown repair fix `{unknown[0]}` (choose from {', '.join(FIXES)})")
    if not (math.isfinite(density) and density > 0):
        raise CaliperError(f"density must be a positive number of kg/m^3, got {density}")
    target = Path(out) if out is not None else default_output(path)
    if target.resolve() == path.resolve():
        raise CaliperError(f"{path}: refusing to overwrite the input; choose another --out")
    document = load_document(path, roots)
    meshes = Meshes(document.base_dir, roots)
    before = run_checks(document, meshes)
    session = _Session(build_robot(document.root, str(path)), meshes, fixes, density)
    if document.leftovers and document.expansion_error is None:
        session.apply("expand_xacro", path.name, "wrote the in-process xacro expansion")
    _compute_inertials(session)
    _normalize_axes(session)
    _dedupe_mesh_basenames(session)
    _inject_limits(session)
    if target.parent.resolve() != path.parent.resolve():
        _relocate_relative_meshes(session, path.parent, target.parent)
        here = path.parent.resolve()
        roots = (*roots, here, *here.parents)
    ET.indent(document.root, space="  ")
    text = '<?xml version="1.0"?>\n' + ET.tostring(document.root, encoding="unicode") + "\n"
    _atomic_write(target, text.encode("utf-8"))
    return RepairResult(str(target), before, diagnose(target, roots), session.applied, session.skipped,
                        session.mesh_copies)


def _atomic_write(path: Path, data: bytes) -> None:
    """Write through a temporary file in the same folder and os.replace, so readers never see half."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise CaliperError(f"{path}: cannot write ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise CaliperError(f"{path}: cannot write ({exc.strerror or exc})") from None


def _num(value: float) -> str:
    return f"{value:.12g}"


# ---------------------------------------------------------------- compute_inertials


def _geometry_properties(geometry: Geometry, meshes: Meshes, density: float) -> inertia.MassProperties:
    """Mass properties of one visual/collision in the link frame; ValueError saying why not."""
    origin, shape = origin_of(geometry.elem), geometry.shape
    if origin is None:
        raise ValueError("its <origin> is unparseable")
    if shape is None:
        raise ValueError("its <geometry> is empty")
    size = parse_vector(shape.get("size"))
    radius, length = parse_number(shape.get("radius")), parse_number(shape.get("length"))
    if shape.tag == "box" and size is not None:
        props = inertia.box(size, density)
    elif shape.tag == "cylinder" and radius is not None and length is not None:
        props = inertia.cylinder(radius, length, density)
    elif shape.tag == "sphere" and radius is not None:
        props = inertia.sphere(radius, density)
    elif shape.tag == "mesh":
        props = inertia.closed_mesh(_mesh_triangles(shape, meshes), density)
    else:
        raise ValueError(f"no volume formula for <{shape.tag}> with these attributes")
    return inertia.placed(props, *origin)


def _mesh_triangles(shape: ET.Element, meshes: Meshes) -> np.ndarray:
    url = shape.get("filename", "")
    path = meshes.resolve(url).path
    scale = parse_vector(shape.get("scale", "1 1 1"))
    if path is None or scale is None:
        raise ValueError(f"mesh `{url}` cannot be resolved" if path is None else "mesh scale is unparseable")
    try:
        triangles = meshes.triangles(path)
    except MeshLoadError as exc:
        raise ValueError(f"mesh `{url}` cannot be loaded: {exc}") from None
    if triangles is None:
        raise ValueError(f"no reader for `{path.suffix}` meshes is installed")
    return triangles * np.asarray(scale)


def _link_properties(link: Link, meshes: Meshes, density: float) -> tuple[inertia.MassProperties, str]:
    """Combined properties of the link's collision geometry, else its visual geometry."""
    reasons = []
    for role, geometries in (("collision", link.collisions), ("visual", link.visuals)):
        if geometries:
            try:
                parts = [_geometry_properties(g, meshes, density) for g in geometries]
                return inertia.combine(parts), f"{len(parts)} {role} geometry element(s)"
            except ValueError as exc:
                reasons.append(f"{role}: {exc}")
    raise ValueError("; ".join(reasons) or "the link has no geometry")


def _write_inertial(link: Link, props: inertia.MassProperties, note: str) -> None:
    new = ET.Element("inertial")
    ET.SubElement(new, "origin", {"xyz": " ".join(map(_num, props.com)), "rpy": "0 0 0"})
    ET.SubElement(new, "mass", {"value": _num(props.mass)})
    tensor = props.inertia
    ET.SubElement(new, "inertia", {f"i{'xyz'[r]}{'xyz'[c]}": _num(tensor[r, c])
                                   for r, c in ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))})
    old = link.inertial
    position = list(link.elem).index(old) if old is not None else 0
    if old is not None:
        link.elem.remove(old)
    link.elem.insert(position, new)
    link.elem.insert(position, ET.Comment(f" {note} "))


def _compute_inertials(session: _Session) -> None:
    roots = {link.index for link in session.robot.roots}
    for link in session.robot.links:
        target = session.link_label(link)
        if link.index in roots or mass_problem(link) is None:
            continue
        if not session.wants("compute_inertials", target):
            continue
        try:
            props, source = _link_properties(link, session.meshes, session.density)
        except ValueError as exc:
            session.skip("compute_inertials", target, str(exc))
            continue
        note = f"caliper doctor: computed from {source} at {session.density:g} kg/m^3 (placeholder, not CAD)"
        _write_inertial(link, props, note)
        session.apply("compute_inertials", target, f"mass {props.mass:.6g} kg from {source} at "
                                                   f"{session.density:g} kg/m^3")


# ---------------------------------------------------------------- the other fixes


def _normalize_axes(session: _Session) -> None:
    for joint in session.robot.joints:
        state, unit = axis_state(joint)
        if state != "nonunit" or not session.wants("normalize_axes", f"joint `{joint.name}`"):
            continue
        axis = joint.elem.find("axis")
        old, new = axis.get("xyz"), " ".join(map(_num, unit))
        axis.set("xyz", new)
        session.apply("normalize_axes", f"joint `{joint.name}`", f"axis `{old}` -> `{new}`")


def _inject_limits(session: _Session) -> None:
    for joint in session.robot.joints:
        state, limit = range_state(joint), joint.limit
        target = f"joint `{joint.name}`"
        if state is None and (limit is None or "velocity" in limit.attrib):
            continue
        if not session.wants("inject_limits", target):
            continue
        changes = []
        if limit is None:
            limit = ET.SubElement(joint.elem, "limit", effort=INJECTED_EFFORT, velocity=INJECTED_VELOCITY)
            changes.append(f"added <limit> with effort {INJECTED_EFFORT}, velocity {INJECTED_VELOCITY}")
        if state is not None:
            limit.set("lower", _num(-math.pi))
            limit.set("upper", _num(math.pi))
            changes.append(f"conservative range +-pi (range was {state})")
        if "velocity" not in limit.attrib:
            limit.set("velocity", INJECTED_VELOCITY)
            changes.append(f"velocity=\"{INJECTED_VELOCITY}\"")
        session.apply("inject_limits", target, "; ".join(changes))


def _dedupe_mesh_basenames(session: _Session) -> None:
    fix = "dedupe_mesh_basenames"
    used = {basename(mesh.get("filename", "")) for _, mesh in mesh_refs(session.robot)}
    for name, files in basename_clashes(session.robot, session.meshes).items():
        for number, elems in enumerate(list(files.values())[1:], start=2):
            target = f"mesh `{elems[0].get('filename', '')}`"
            source = session.meshes.resolve(elems[0].get("filename", "")).path
            if not session.wants(fix, target):
                continue
            if source is None:
                session.skip(fix, target, "the file cannot be resolved, so it cannot be copied")
                continue
            while f"m{number}__{name}" in used or not _free_or_same(source, f"m{number}__{name}"):
                number += 1
            new_name = f"m{number}__{name}"
            used.add(new_name)
            destination = source.with_name(new_name)
            try:
                if not destination.exists():
                    _atomic_write(destination, source.read_bytes())
            except (OSError, CaliperError) as exc:
                session.skip(fix, target, f"cannot copy the file: {exc}")
                continue
            for mesh in elems:
                old = mesh.get("filename", "")
                mesh.set("filename", old[: len(old) - len(name)] + new_name)
            session.mesh_copies.append({"from": str(source), "to": str(destination)})
            session.apply(fix, target, f"renamed to `{new_name}` (file copied)")


def _free_or_same(source: Path, new_name: str) -> bool:
    destination = source.with_name(new_name)
    return not destination.exists() or filecmp.cmp(source, destination, shallow=False)


def _relocate_relative_meshes(session: _Session, old_dir: Path, new_dir: Path) -> None:
    """Keep relative mesh paths valid when the copy is written to another folder."""
    for _, mesh in mesh_refs(session.robot):
        url = mesh.get("filename", "")
        if url and "://" not in url and not os.path.isabs(url):
            moved = Path(os.path.relpath(os.path.abspath(old_dir / url), os.path.abspath(new_dir))).as_posix()
            mesh.set("filename", moved)
            session.apply("relocate", f"mesh `{url}`", f"rewritten as `{moved}` for the output folder")

"""The A001-A019 checks, and ``diagnose``.

Everything caliper's URDF loader (``caliper_jax.io.urdf``) refuses is reported here as an
Error-severity finding, or makes the file uninspectable (``tests/test_doctor_loader_agreement.py``).

The predicates that decide whether a link or joint is defective (``mass_problem``,
``axis_state``, ``range_state``, ``basename_clashes``) are shared with :mod:`repair`, so a repair
targets exactly what a check reports.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from doctors.asset.loader import Document, load_document
from doctors.asset.meshes import Meshes, MeshLoadError
from doctors.asset.report import Finding, Report
from doctors.asset.urdf_xml import (
    Geometry,
    Joint,
    Link,
    Robot,
    build_robot,
    is_element,
    parse_number,
    parse_vector,
)

INERTIA_KEYS = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
LIMIT_ATTRS = ("lower", "upper", "effort", "velocity")
AXIS_TYPES = ("revolute", "continuous", "prismatic", "planar")
LOADABLE_JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating")  # caliper's loader
RANGED_TYPES = ("revolute", "prismatic")  # types whose <limit lower upper> the loader reads
ONE_DOF_TYPES = ("revolute", "continuous", "prismatic")  # joints a mimic can follow
# shape -> (attribute, count) the loader reads; required unless it has a default
SHAPES = {"box": (("size", 3),), "sphere": (("radius", 1),), "cylinder": (("radius", 1), ("length", 1)),
          "capsule": (("radius", 1), ("length", 1)), "mesh": (("scale", 3),)}
OPTIONAL_SHAPE_ATTRS = {("mesh", "scale")}
AXIS_ZERO = 1e-12
AXIS_UNIT_TOL = 1e-6
INERTIA_REL_TOL = 1e-9
HULL_VERTEX_CAP = 1024

SEVERITY = {"A001": "Error", "A002": "Error", "A003": "Error", "A004": "Warning", "A005": "Warning",
            "A006": "Info", "A007": "Warning", "A008": "Error", "A009": "Warning", "A010": "Info",
            "A011": "Error", "A012": "Error", "A013": "Error", "A014": "Error", "A015": "Error",
            "A016": "Error", "A017": "Error", "A018": "Error", "A019": "Error"}
HINTS = {
    "A001": "Add the link's <inertial> from CAD, or repair with compute_inertials (uniform density, "
            "from the link's geometry).",
    "A002": "Re-export the inertia tensor from CAD; the true values cannot be recovered mechanically.",
    "A003": "Restore the mesh at one of the tried paths, or pass the folder holding its package as a "
            "mesh root.",
    "A004": "Give every mesh file a unique basename, or repair with dedupe_mesh_basenames.",
    "A005": "Add a <collision> (exporters often drop it); ignore if the geometry is purely decorative.",
    "A006": "Nothing is wrong; ship a simplified collision mesh if hull tightness matters.",
    "A007": "Add <limit lower= upper=>, use type=\"continuous\" for a free spinner, or repair with "
            "inject_limits.",
    "A008": "Write the intended axis as three numbers, e.g. xyz=\"0 0 1\".",
    "A009": "Write a unit axis, or repair with normalize_axes.",
    "A010": "Nothing to fix (the root never moves); it marks a CAD-exporter file.",
    "A011": "Point <mimic joint=...> at an existing revolute, continuous or prismatic joint, or remove "
            "the <mimic>.",
    "A012": "Make every mimic follow a joint that is not itself a mimic.",
    "A013": "Run the file through xacro once and ship the expanded URDF.",
    "A014": "Add velocity= to the <limit>, or repair with inject_limits (velocity=\"1\").",
    "A015": "Rename the duplicates so that every link and joint name is unique.",
    "A016": "Write plain decimal numbers; inject_limits replaces an unparseable revolute range.",
    "A017": "Use revolute, continuous, prismatic, fixed or floating (a planar joint is two prismatic "
            "joints and a revolute one).",
    "A018": "Connect every link into one tree under a single root link (add the missing joints, or "
            "remove the stray links).",
    "A019": "Give each <geometry> one <box size>, <sphere radius>, <cylinder radius length> or "
            "<mesh filename> element.",
}


def _finding(code: str, message: str, auto_fixable: bool = False, severity: str | None = None,
             **where: str) -> Finding:
    return Finding(code, severity or SEVERITY[code], message, HINTS[code], auto_fixable, **where)


def diagnose(path: str | Path, mesh_roots: Sequence[str | Path] = ()) -> Report:
    """Every A-code finding for a URDF or xacro file; CaliperError only when it cannot be inspected."""
    roots = tuple(Path(r) for r in mesh_roots)
    document = load_document(Path(path), roots)
    return run_checks(document, Meshes(document.base_dir, roots))


def run_checks(document: Document, meshes: Meshes) -> Report:
    """Run every check on a loaded document."""
    robot = build_robot(document.root, str(document.path))
    findings = [*_xacro(document), *_names(robot), *_structure(robot), *_inertials(robot), *_geometry(robot),
                *_shapes(robot), *_meshes(robot, meshes), *_joints(robot), *_origins(robot), *_mimics(robot)]
    return Report(str(document.path), findings, list(meshes.unchecked))


# ---------------------------------------------------------------- shared predicates


def link_mass(link: Link) -> float | None:
    inertial = link.inertial
    mass = None if inertial is None else inertial.find("mass")
    return None if mass is None else parse_number(mass.get("value"))


def mass_problem(link: Link) -> str | None:
    """Why ``link`` has no real inertial (A001), or None."""
    inertial = link.inertial
    if inertial is None:
        return "has no <inertial>"
    mass = inertial.find("mass")
    raw = None if mass is None else mass.get("value")
    if raw is None:
        return "has an <inertial> without <mass value=...>"
    value = parse_number(raw)
    if value is None:
        return f"has mass `{raw}`, not a finite number"
    return f"has mass {raw} kg" if value <= 0 else None


def root_mass_problem(link: Link) -> str | None:
    """Why the loader refuses a root link's mass (a <mass> without a number, or negative), or None.
    A root without <inertial> or <mass>, or with mass 0, is fine (A010 notes the zero mass)."""
    inertial = link.inertial
    mass = None if inertial is None else inertial.find("mass")
    if mass is None:
        return None
    raw = mass.get("value")
    if raw is None:
        return "has a <mass> without value="
    value = parse_number(raw)
    if value is None:
        return f"has mass `{raw}`, not a finite number"
    return f"has a negative mass {raw} kg" if value < 0 else None


def axis_state(joint: Joint) -> tuple[str, np.ndarray | None]:
    """("absent" | "bad" | "zero" | "nonunit" | "unit", the unit vector when "nonunit")."""
    axis = joint.elem.find("axis")
    if axis is None or joint.type not in AXIS_TYPES:
        return "absent", None
    values = parse_vector(axis.get("xyz", "1 0 0"))
    if values is None:
        return "bad", None
    v = np.array(values)
    peak = float(np.abs(v).max())
    scaled = v / peak if peak > 0 else v
    norm = peak * float(np.linalg.norm(scaled))
    if norm < AXIS_ZERO:
        return "zero", None
    if abs(norm - 1.0) > AXIS_UNIT_TOL:
        return "nonunit", scaled / np.linalg.norm(scaled)
    return "unit", None


def inverted_range(joint: Joint) -> bool:
    """True when a revolute/prismatic ``<limit>`` has lower > upper (the loader refuses it)."""
    limit = joint.limit
    if joint.type not in RANGED_TYPES or limit is None:
        return False
    lower, upper = (parse_number(limit.get(k, "0")) for k in ("lower", "upper"))
    return lower is not None and upper is not None and lower > upper


def range_state(joint: Joint) -> str | None:
    """For a revolute joint: "missing", "unparseable" or "degenerate" range; else None."""
    if joint.type != "revolute":
        return None
    limit = joint.limit
    if limit is None:
        return "missing"
    lower, upper = (parse_number(limit.get(k, "0")) for k in ("lower", "upper"))
    if lower is None or upper is None:
        return "unparseable"
    return "degenerate" if lower >= upper else None


def mesh_refs(robot: Robot) -> Iterator[tuple[Geometry, ET.Element]]:
    """(geometry, <mesh> element) for every mesh geometry, in document order."""
    for geometry in robot.geometries:
        shape = geometry.shape
        if shape is not None and shape.tag == "mesh":
            yield geometry, shape


def basename(url: str) -> str:
    return url.replace("\\", "/").rsplit("/", 1)[-1]


def basename_clashes(robot: Robot, meshes: Meshes) -> dict[str, dict[str, list[ET.Element]]]:
    """basename -> {file identity -> <mesh> elements}, for basenames naming several files."""
    groups: dict[str, dict[str, list[ET.Element]]] = {}
    for _, mesh in mesh_refs(robot):
        url = mesh.get("filename")
        if url:
            path = meshes.resolve(url).path
            identity = str(path.resolve()) if path is not None else url
            groups.setdefault(basename(url), {}).setdefault(identity, []).append(mesh)
    return {name: files for name, files in groups.items() if len(files) > 1}


# ---------------------------------------------------------------- checks


def _xacro(document: Document) -> list[Finding]:
    if not document.leftovers:
        return []
    count = len(document.leftovers)
    examples = ", ".join(document.leftovers[:3]) + (", ..." if count > 3 else "")
    name = document.path.name
    what = f"{name} holds {count} xacro leftover(s) ({examples})"
    if document.expansion_error is None:
        message = f"{what}; expanded in-process, but most URDF consumers will not expand them"
        return [_finding("A013", message, True, "Warning", file=name)]
    message = f"{what} that cannot be expanded in-process: {document.expansion_error}"
    return [_finding("A013", message, file=name)]


def _names(robot: Robot) -> list[Finding]:
    findings = []
    for kind, items in (("link", robot.links), ("joint", robot.joints)):
        for name, count in Counter(item.name for item in items).items():
            if count > 1:
                message = f"{kind} name `{name}` is used {count} times"
                findings.append(_finding("A015", message, **{kind: name}))
    return findings


def inertia_problem(link: Link) -> str | None:
    """Why ``link``'s inertia tensor is implausible (A002), or None (also when it has no inertial)."""
    inertial = link.inertial
    if inertial is None:
        return None
    tensor = inertial.find("inertia")
    raw = {k: "0" if tensor is None else tensor.get(k, "0") for k in INERTIA_KEYS}
    values = {k: parse_number(v) for k, v in raw.items()}
    bad = [k for k in INERTIA_KEYS if values[k] is None]
    if bad:
        return f"non-finite entry {bad[0]}=`{raw[bad[0]]}`"
    xx, xy, xz, yy, yz, zz = (values[k] for k in INERTIA_KEYS)
    matrix = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
    scale = float(np.abs(matrix).max())
    l0, l1, l2 = np.linalg.eigvalsh(matrix / scale) if scale > 0 else np.zeros(3)
    tol = INERTIA_REL_TOL * abs(l2)
    moments = ", ".join(f"{float(v) * scale:.6g}" for v in (l0, l1, l2))
    mass = link_mass(link)
    if mass is not None and mass > 0 and l2 <= tol:
        return f"zero tensor with mass {mass:g} kg"
    if l0 < -tol:
        return f"negative principal moment (moments {moments})"
    if l0 + l1 < l2 - tol:
        return f"principal moments {moments} violate the triangle inequality"
    return None


def _structure(robot: Robot) -> list[Finding]:
    """A018 (not one tree) and A017 (joint types the loader cannot build)."""
    findings = []
    if not robot.links:
        findings.append(_finding("A018", "the file defines no <link>: there is no robot to load"))
    elif len(robot.roots) > 1:
        names = ", ".join(f"`{link.name}`" for link in robot.roots)
        message = f"{len(robot.roots)} root links ({names}): the links do not form one connected tree"
        findings.append(_finding("A018", message, link=robot.roots[0].name))
    for joint in robot.joints:
        if joint.type not in LOADABLE_JOINT_TYPES:
            what = f'type "{joint.type}"' if joint.type else "no type="
            message = (f"joint `{joint.name}` has {what}; caliper loads "
                       f"{', '.join(LOADABLE_JOINT_TYPES)}")
            findings.append(_finding("A017", message, joint=joint.name))
    return findings


def _inertials(robot: Robot) -> list[Finding]:
    findings = []
    roots = {link.index for link in robot.roots}
    for link in robot.links:
        problem = None if link.index in roots else mass_problem(link)
        if problem:
            message = f"link `{link.name}` {problem}; without a real inertial the model has no dynamics"
            findings.append(_finding("A001", message, bool(link.collisions or link.visuals), link=link.name))
        root_problem = root_mass_problem(link) if link.index in roots else None
        if root_problem:
            message = f"root link `{link.name}` {root_problem}; the loader refuses it"
            findings.append(_finding("A001", message, link=link.name))
        why = inertia_problem(link)
        if why:
            message = f"link `{link.name}` has an implausible inertia tensor: {why}"
            findings.append(_finding("A002", message, link=link.name))
    if any(link.index not in roots and (link_mass(link) or 0.0) > 0 for link in robot.links):
        for root in robot.roots:
            if not (link_mass(root) or 0.0) > 0:
                message = f"root link `{root.name}` has zero mass while other links have mass (CAD export)"
                findings.append(_finding("A010", message, link=root.name))
    return findings


def _geometry(robot: Robot) -> list[Finding]:
    return [_finding("A005", f"link `{link.name}` has <visual> but no <collision>: collision checks and "
                             "planning do not see it", link=link.name)
            for link in robot.links if link.visuals and not link.collisions]


def _shapes(robot: Robot) -> list[Finding]:
    """A019 (a geometry the loader cannot read) and A016 (its size is not numbers)."""
    findings = []
    for link in robot.links:
        for role, geometries in (("collision", link.collisions), ("visual", link.visuals)):
            for k, geometry in enumerate(geometries):
                where = f"link `{link.name}` <{role}> #{k}"
                shape = geometry.shape
                if shape is None:
                    findings.append(_finding("A019", f"{where} has an empty <geometry>", link=link.name))
                    continue
                if shape.tag not in SHAPES:
                    message = f"{where} has an unsupported shape <{shape.tag}> (box, sphere, cylinder, " \
                              "capsule or mesh)"
                    findings.append(_finding("A019", message, link=link.name))
                    continue
                for attr, count in SHAPES[shape.tag]:
                    raw = shape.get(attr)
                    if raw is None:
                        if (shape.tag, attr) not in OPTIONAL_SHAPE_ATTRS:
                            message = f"{where} <{shape.tag}> has no {attr}="
                            findings.append(_finding("A019", message, link=link.name))
                    elif parse_vector(raw, count) is None:
                        numbers = "a finite number" if count == 1 else f"{count} finite numbers"
                        message = f"{where} <{shape.tag} {attr}=\"{raw}\"> is not {numbers}"
                        findings.append(_finding("A016", message, link=link.name))
    return findings


def _meshes(robot: Robot, meshes: Meshes) -> list[Finding]:
    findings = []
    for geometry, mesh in mesh_refs(robot):
        url = mesh.get("filename")
        where = {"severity": "Error" if geometry.role == "collision" else "Warning", "link": geometry.link}
        what = f"{geometry.role} mesh `{url}` on link `{geometry.link}`"
        if not url:
            message = f"{geometry.role} mesh on link `{geometry.link}` has no filename="
            findings.append(_finding("A003", message, **where))
            continue
        resolution = meshes.resolve(url)
        if resolution.path is None:
            tried = ", ".join(map(str, resolution.tried)) or "nothing: unsupported URL scheme"
            findings.append(_finding("A003", f"{what} cannot be resolved (tried {tried})", **where, file=url))
            continue
        try:  # only collision meshes need their distinct vertices counted
            count = meshes.vertex_count(resolution.path) if geometry.role == "collision" else None
            meshes.triangles(resolution.path)
        except MeshLoadError as exc:
            message = f"{what} cannot be loaded from {resolution.path}: {exc}"
            findings.append(_finding("A003", message, **where, file=url))
            continue
        if count is not None and count > HULL_VERTEX_CAP:
            message = f"{what} has {count} vertices (> {HULL_VERTEX_CAP}); its hull is built from a subsample"
            findings.append(_finding("A006", message, link=geometry.link, file=url))
    for name, files in basename_clashes(robot, meshes).items():
        fixable = all(meshes.resolve(elems[0].get("filename", "")).path for elems in files.values())
        message = f"mesh basename `{name}` names {len(files)} different files: {', '.join(files)}"
        findings.append(_finding("A004", message, fixable, file=name))
    return findings


def _joints(robot: Robot) -> list[Finding]:
    findings = []
    for joint in robot.joints:
        name, limit = joint.name, joint.limit
        state = range_state(joint)
        if state == "missing":
            findings.append(_finding("A007", f"revolute joint `{name}` has no <limit>", True, joint=name))
        elif state == "degenerate" and not inverted_range(joint):
            bounds = f"lower {limit.get('lower', '0')} >= upper {limit.get('upper', '0')}"
            findings.append(_finding("A007", f"revolute joint `{name}` has {bounds}", True, joint=name))
        if inverted_range(joint):  # an Error: the loader refuses the file
            bounds = f"lower {limit.get('lower', '0')} > upper {limit.get('upper', '0')}"
            message = f"{joint.type} joint `{name}` has an inverted range: {bounds}"
            findings.append(_finding("A007", message, joint.type == "revolute", "Error", joint=name))
        axis, _ = axis_state(joint)
        if axis in ("bad", "zero", "nonunit"):
            raw = joint.elem.find("axis").get("xyz", "1 0 0")
            why = {"bad": "is not three finite numbers", "zero": "has zero length", "nonunit": "is not unit"}
            code = "A009" if axis == "nonunit" else "A008"
            message = f"joint `{name}` axis xyz=\"{raw}\" {why[axis]}"
            findings.append(_finding(code, message, code == "A009", joint=name))
        if limit is None:
            continue
        if "velocity" not in limit.attrib:
            message = f"joint `{name}` has a <limit> without velocity="
            findings.append(_finding("A014", message, True, joint=name))
        for attr in LIMIT_ATTRS:
            value = limit.get(attr)
            if value is not None and parse_number(value) is None:
                fixable = joint.type == "revolute" and attr in ("lower", "upper")
                message = f"joint `{name}` <limit {attr}=\"{value}\"> is not a finite number"
                findings.append(_finding("A016", message, fixable, joint=name))
    for joint in robot.joints:
        for tag, attrs in (("dynamics", ("damping", "friction")), ("mimic", ("multiplier", "offset"))):
            elem = joint.elem.find(tag)
            for attr in attrs if elem is not None else ():
                value = elem.get(attr)
                if value is not None and parse_number(value) is None:
                    message = f"joint `{joint.name}` <{tag} {attr}=\"{value}\"> is not a finite number"
                    findings.append(_finding("A016", message, joint=joint.name))
    return findings


def _origins(robot: Robot) -> list[Finding]:
    owners = [(f"joint `{j.name}`", j.elem, {"joint": j.name}) for j in robot.joints]
    owners += [(f"link `{link.name}` <{child.tag}>", child, {"link": link.name})
               for link in robot.links for child in link.elem if is_element(child)]
    findings = []
    for label, elem, where in owners:
        for origin in elem.findall("origin"):
            for attr in ("xyz", "rpy"):
                value = origin.get(attr)
                if value is not None and parse_vector(value) is None:
                    message = f"{label} <origin {attr}=\"{value}\"> is not three finite numbers"
                    findings.append(_finding("A016", message, **where))
    return findings


def _mimics(robot: Robot) -> list[Finding]:
    mimics = {j.name: j.elem.find("mimic") for j in robot.joints if j.elem.find("mimic") is not None}
    names = {j.name for j in robot.joints}
    types = {j.name: j.type for j in robot.joints}
    findings = []
    for joint in robot.joints:
        mimic = joint.elem.find("mimic")
        if mimic is None:
            continue
        source = mimic.get("joint", "")
        if not source:
            message = f"joint `{joint.name}` has a <mimic> without joint="
            findings.append(_finding("A011", message, joint=joint.name))
        elif source == joint.name:
            findings.append(_finding("A012", f"joint `{joint.name}` mimics itself", joint=joint.name))
        elif source not in names:
            message = f"joint `{joint.name}` mimics `{source}`, which is not a joint in this file"
            findings.append(_finding("A011", message, joint=joint.name))
        elif types[source] not in ONE_DOF_TYPES:
            message = (f"joint `{joint.name}` mimics `{source}`, a {types[source] or 'untyped'} joint "
                       "without the one coordinate a mimic follows")
            findings.append(_finding("A011", message, joint=joint.name))
        elif source in mimics:
            upstream = mimics[source].get("joint")
            message = f"joint `{joint.name}` mimics `{source}`, which itself mimics `{upstream}`"
            findings.append(_finding("A012", message, joint=joint.name))
    return findings

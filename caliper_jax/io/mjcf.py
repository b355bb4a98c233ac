"""MJCF -> RobotDescription through MuJoCo's own parser (hinge, slide, ball, free joints).

A MuJoCo body may carry several joints at offsets inside it; each becomes one of our bodies
(massless but the last), chained at the joint positions, so the kinematics are identical. Free
joints sit at the identity with MuJoCo's ``qpos0`` as their neutral value. Sites become frames.
An active joint equality between two hinge/slide joints with a linear ``polycoef="offset
multiplier 0 0 0"`` is a mimic joint (``joint1 = offset + multiplier * joint2``), as the MJCF
generator writes URDF mimics; other joint equalities are listed in the description's warnings.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from caliper_jax.errors import ModelError
from caliper_jax.io.description import Body, Frame, Geom, RobotDescription
from caliper_jax.io.rotations import quat_to_mat as quat_matrix

_TYPES = {0: "free", 1: "ball", 2: "prismatic", 3: "revolute"}
_GEOMS = {2: "sphere", 3: "capsule", 5: "cylinder", 6: "box", 7: "mesh"}


def read_mjcf(path) -> RobotDescription:
    """Read an MJCF file with ``mujoco.MjModel.from_xml_path``."""
    import mujoco

    from caliper_jax import limits
    from caliper_jax.errors import CaliperError

    path = Path(path)
    try:
        limits.check_file(path, "MJCF file")   # regular file within CALIPER_MAX_FILE_MB (not /dev/zero)
    except CaliperError as exc:
        raise ModelError(str(exc)) from None
    try:
        mj = mujoco.MjModel.from_xml_path(str(path))
    except ValueError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "parse error"
        raise ModelError(f"{path}: MuJoCo cannot load it ({first})") from None
    return description_from_mjmodel(mj, source=str(path))


def description_from_mjmodel(mj, source: str = "<mjModel>") -> RobotDescription:
    import mujoco

    def name(kind, i, fallback):
        return mujoco.mj_id2name(mj, kind, i) or fallback

    bodies: list[Body] = []
    frames: list[Frame] = []
    geoms: list[Geom] = []
    # MuJoCo body -> (our body carrying it, R, p of the MuJoCo body frame in that body's frame)
    carrier = {0: (-1, np.eye(3), np.zeros(3))}
    joint_body = {}  # MuJoCo joint id -> our body index
    for b in range(1, mj.nbody):
        parent_body, Rp, pp = carrier[int(mj.body_parentid[b])]
        Rb = Rp @ quat_matrix(mj.body_quat[b])
        pb = Rp @ mj.body_pos[b] + pp
        bname = name(mujoco.mjtObj.mjOBJ_BODY, b, f"body{b}")
        # (R_in, p_in): the MuJoCo body frame in the frame of ``cur``, updated joint by joint
        cur, R_in, p_in = parent_body, Rb, pb
        for j in range(mj.body_jntadr[b], mj.body_jntadr[b] + mj.body_jntnum[b]):
            jtype = _TYPES[int(mj.jnt_type[j])]
            jname = name(mujoco.mjtObj.mjOBJ_JOINT, j, f"joint{j}")
            if jtype == "free":
                if cur != -1:
                    raise ModelError(f"{source}: free joint {jname!r} must belong to a child of the world")
                Rj, pj, jpos = np.eye(3), np.zeros(3), np.zeros(3)
            else:
                jpos = np.array(mj.jnt_pos[j], dtype=float)
                Rj, pj = R_in, R_in @ jpos + p_in
            body = Body(jname, jtype, cur, Rj, pj, np.array(mj.jnt_axis[j], dtype=float))
            dof, nv = mj.jnt_dofadr[j], body.nv
            body.damping = np.array(mj.dof_damping[dof:dof + nv])
            body.friction = np.array(mj.dof_frictionloss[dof:dof + nv])
            body.armature = np.array(mj.dof_armature[dof:dof + nv])
            if jtype in ("revolute", "prismatic"):
                lo, hi = mj.jnt_range[j] if mj.jnt_limited[j] else (-np.inf, np.inf)
                eff = float(np.max(np.abs(mj.jnt_actfrcrange[j]))) if mj.jnt_actfrclimited[j] else np.inf
                body.lower, body.upper = np.array([lo]), np.array([hi])
                body.effort, body.velocity = np.array([eff]), np.array([np.inf])
            bodies.append(body)
            cur = len(bodies) - 1
            joint_body[j] = cur
            frames.append(Frame(jname, cur, np.eye(3), np.zeros(3), "joint"))
            R_in, p_in = np.eye(3), -jpos
        carrier[b] = (cur, R_in, p_in)
        frames.append(Frame(bname, cur, R_in, p_in, "link"))
        if cur >= 0 and mj.body_mass[b] > 0:
            Ri = R_in @ quat_matrix(mj.body_iquat[b])
            bodies[cur].add_inertia(float(mj.body_mass[b]), R_in @ mj.body_ipos[b] + p_in,
                                    Ri @ np.diag(mj.body_inertia[b]) @ Ri.T)
    by_name = {f.name: f for f in frames}
    for s in range(mj.nsite):
        cur, Rc, pc = carrier[int(mj.site_bodyid[s])]
        site = Frame(name(mujoco.mjtObj.mjOBJ_SITE, s, f"site{s}"), cur,
                     Rc @ quat_matrix(mj.site_quat[s]), Rc @ mj.site_pos[s] + pc, "site")
        same = by_name.get(site.name)
        if same is not None and same.parent == cur and np.allclose(same.R, site.R, atol=1e-12) \
                and np.allclose(same.p, site.p, atol=1e-12):
            continue  # the site marks a body's own frame (as generated MJCF does): one frame, not two
        frames.append(site)
        by_name.setdefault(site.name, site)
    for g in range(mj.ngeom):
        kind = _GEOMS.get(int(mj.geom_type[g]))
        cur, Rc, pc = carrier[int(mj.geom_bodyid[g])]
        if kind is None or cur < 0 and int(mj.geom_type[g]) == 0:
            continue
        role = "collision" if (mj.geom_contype[g] or mj.geom_conaffinity[g]) else "visual"
        size = {"sphere": mj.geom_size[g][:1], "capsule": mj.geom_size[g][:2],
                "cylinder": mj.geom_size[g][:2], "box": mj.geom_size[g][:3], "mesh": np.ones(3)}[kind]
        mesh_uri = name(mujoco.mjtObj.mjOBJ_MESH, int(mj.geom_dataid[g]), None) if kind == "mesh" else None
        Rg = Rc @ quat_matrix(mj.geom_quat[g])
        geoms.append(Geom(name(mujoco.mjtObj.mjOBJ_BODY, int(mj.geom_bodyid[g]), "world"), cur, role, kind,
                          tuple(map(tuple, Rg)), tuple(Rc @ mj.geom_pos[g] + pc),
                          tuple(float(x) for x in size), None, mesh_uri))
    warnings = _read_mimics(mj, bodies, joint_body, source)
    return RobotDescription(name(mujoco.mjtObj.mjOBJ_MODEL, 0, Path(source).stem), bodies, frames, geoms,
                            source, gravity=np.array(mj.opt.gravity, dtype=float), warnings=warnings)


def _read_mimics(mj, bodies: list[Body], joint_body: dict, source: str) -> list[str]:
    """Set ``Body.mimic`` from linear joint equalities; chains are composed onto their first
    independent joint. Returns a warning for each joint equality that is not read as a mimic."""
    import mujoco

    warnings: list[str] = []
    link: dict[int, tuple[int, float, float]] = {}  # mimic body -> (source body, multiplier, offset)
    for e in range(mj.neq):
        if int(mj.eq_type[e]) != int(mujoco.mjtEq.mjEQ_JOINT):
            continue
        label = mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_EQUALITY, e) or f"equality{e}"
        j1, j2 = int(mj.eq_obj1id[e]), int(mj.eq_obj2id[e])
        poly = np.asarray(mj.eq_data[e][:5], dtype=float)
        why = None
        if not mj.eq_active0[e]:
            why = "inactive"
        elif j2 < 0:
            why = "no joint2 (it locks joint1)"
        elif np.any(poly[2:] != 0.0):
            why = f"non-linear polycoef {' '.join(f'{c:g}' for c in poly)}"
        elif bodies[joint_body[j1]].nv != 1 or bodies[joint_body[j2]].nv != 1:
            why = "not between two hinge/slide joints"
        elif joint_body[j1] in link:
            why = f"joint {bodies[joint_body[j1]].name!r} is already coupled by another equality"
        if why:
            warnings.append(f"joint equality {label!r} not read as a mimic: {why}")
            continue
        link[joint_body[j1]] = (joint_body[j2], float(poly[1]), float(poly[0]))
    for b, (src, mult, off) in link.items():
        seen = {b}
        while src in link:  # y = off + mult x, x = off2 + mult2 z  ->  y = off + mult off2 + mult mult2 z
            if src in seen:
                raise ModelError(f"{source}: joint equalities form a cycle through {bodies[src].name!r}")
            seen.add(src)
            src2, mult2, off2 = link[src]
            src, mult, off = src2, mult * mult2, off + mult * off2
        bodies[b].mimic = (bodies[src].name, mult, off)
    return warnings


"""MJCF -> RobotDescription through MuJoCo's own parser (hinge, slide, ball, free joints).

A MuJoCo body may carry several joints at offsets inside it; each becomes one of our bodies
(massless but the last), chained at the joint positions, so the kinematics are identical. Free
joints sit at the identity with MuJoCo's ``qpos0`` as their neutral value. Sites become frames.
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

    path = Path(path)
    if not path.is_file():
        raise ModelError(f"{path}: no such file")
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
            frames.append(Frame(jname, cur, np.eye(3), np.zeros(3), "joint"))
            R_in, p_in = np.eye(3), -jpos
        carrier[b] = (cur, R_in, p_in)
        frames.append(Frame(bname, cur, R_in, p_in, "link"))
        if cur >= 0 and mj.body_mass[b] > 0:
            Ri = R_in @ quat_matrix(mj.body_iquat[b])
            bodies[cur].add_inertia(float(mj.body_mass[b]), R_in @ mj.body_ipos[b] + p_in,
                                    Ri @ np.diag(mj.body_inertia[b]) @ Ri.T)
    for s in range(mj.nsite):
        cur, Rc, pc = carrier[int(mj.site_bodyid[s])]
        frames.append(Frame(name(mujoco.mjtObj.mjOBJ_SITE, s, f"site{s}"), cur,
                            Rc @ quat_matrix(mj.site_quat[s]), Rc @ mj.site_pos[s] + pc, "site"))
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
    return RobotDescription(name(mujoco.mjtObj.mjOBJ_MODEL, 0, Path(source).stem), bodies, frames, geoms,
                            source, gravity=np.array(mj.opt.gravity, dtype=float))


"""Compile a generated MJCF and map coordinates between our Model and MuJoCo, by name.

Our coordinates are the Model's independent ``q`` (nq,) / ``v`` (nv,) (mimic joints excluded);
MuJoCo's are ``qpos`` / ``qvel`` of the whole scene (robot, mimic joints, props). Two conventions
differ and are converted here, nowhere else:
- a free joint's position is ours in its parent (world) frame offset by the joint placement,
  MuJoCo's is the body's world pose;
- a free joint's velocity is ours a body-frame twist ``[v; w]``, MuJoCo's ``qvel`` is the world
  linear velocity of the body origin followed by the body-frame angular velocity (forces alike).
Ball joints agree (quaternion (w, x, y, z), body-frame angular velocity).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from caliper_jax.errors import CaliperError
from caliper_jax.io.rotations import mat_to_quat, quat_conj, quat_mul, quat_to_mat
from caliper_jax.model import Model
from mjx_backend.mjcf import Mjcf, model_to_mjcf


class FreeJoint(NamedTuple):
    qfull: int          # our full q address
    vfull: int          # our full v address
    q: int              # our independent q address
    v: int              # our independent v address
    qposadr: int
    dofadr: int
    quat0: np.ndarray   # joint placement in the world
    p0: np.ndarray
    R0: np.ndarray


@dataclass
class Layout:
    """Index maps both ways (numpy int arrays) and the coordinate conversions."""

    nq: int
    nv: int
    nu: int
    mj_nq: int
    mj_nv: int
    jnt_id: np.ndarray           # (nbody,) MuJoCo joint of each of our bodies
    body_id: np.ndarray          # (nbody,) MuJoCo body of each of our bodies
    mj_body_to_ours: np.ndarray  # (mj nbody,) our body index, -1 for world and props
    full_q_to_qpos: np.ndarray   # (nq_full,) qpos address of each full coordinate
    full_v_to_dof: np.ndarray    # (nv_full,)
    q_to_qpos: np.ndarray        # (nq,) qpos address of each independent coordinate
    v_to_dof: np.ndarray         # (nv,)
    dof_to_v: np.ndarray         # (mj nv,) our independent velocity index, -1 elsewhere
    v_to_ctrl: np.ndarray        # (nv,) actuator of each velocity coordinate, -1 when none
    ctrl_to_v: np.ndarray        # (nu,)
    ctrl_to_q: np.ndarray        # (nu,) our q index of each actuated joint
    effort_sensor: np.ndarray    # (nu,) sensordata address of each actuator's joint-effort sensor
    qfull_src: np.ndarray
    vfull_src: np.ndarray
    mimic_qfull: np.ndarray      # (nmimic,) full q index of each mimic joint
    mimic_vfull: np.ndarray      # (nmimic,) full v index
    mimic_mult: np.ndarray
    mimic_off: np.ndarray
    free: tuple                  # FreeJoint per free joint
    prop_body: dict = field(default_factory=dict)    # prop -> MuJoCo body id
    prop_qposadr: dict = field(default_factory=dict)
    prop_dofadr: dict = field(default_factory=dict)
    prop_geom: dict = field(default_factory=dict)
    weld_eq: dict = field(default_factory=dict)      # prop -> equality id
    robot_geoms: frozenset = frozenset()
    qpos0: np.ndarray | None = None

    # ---- positions ------------------------------------------------------------------------------
    def qpos_from_q(self, q, base=None) -> np.ndarray:
        """(W, nq) -> (W, mj nq); non-robot coordinates come from ``base`` (default qpos0)."""
        q = np.atleast_2d(np.asarray(q, dtype=np.float64))
        out = np.array(np.broadcast_to(self.qpos0 if base is None else base, (q.shape[0], self.mj_nq)))
        qf = q[:, self.qfull_src]
        if len(self.mimic_qfull):
            qf[:, self.mimic_qfull] = qf[:, self.mimic_qfull] * self.mimic_mult + self.mimic_off
        for fj in self.free:
            a = fj.qfull
            qf[:, a:a + 3] = fj.p0 + qf[:, a:a + 3] @ fj.R0.T
            qf[:, a + 3:a + 7] = quat_mul(fj.quat0, qf[:, a + 3:a + 7])
        out[:, self.full_q_to_qpos] = qf
        return out

    def q_from_qpos(self, qpos) -> np.ndarray:
        qpos = _rows(qpos)
        q = qpos[:, self.q_to_qpos]                      # fancy indexing copies
        for fj in self.free:
            k, a = fj.q, fj.qposadr
            q[:, k:k + 3] = (qpos[:, a:a + 3] - fj.p0) @ fj.R0
            q[:, k + 3:k + 7] = quat_mul(quat_conj(fj.quat0), qpos[:, a + 3:a + 7])
        return q

    # ---- velocities and forces ------------------------------------------------------------------
    def _free_rotations(self, qpos, qpa):
        return quat_to_mat(np.atleast_2d(qpos)[:, qpa + 3:qpa + 7])

    def qvel_from_v(self, v, qpos, base=None) -> np.ndarray:
        """(W, nv) -> (W, mj nv), given the MuJoCo positions (for free-joint rotations)."""
        v = np.atleast_2d(np.asarray(v, dtype=np.float64))
        out = np.zeros((v.shape[0], self.mj_nv)) if base is None else np.array(
            np.broadcast_to(base, (v.shape[0], self.mj_nv)))
        vf = v[:, self.vfull_src]
        if len(self.mimic_vfull):
            vf[:, self.mimic_vfull] = vf[:, self.mimic_vfull] * self.mimic_mult
        for fj in self.free:
            R = self._free_rotations(qpos, fj.qposadr)
            vf[:, fj.vfull:fj.vfull + 3] = np.einsum("wij,wj->wi", R, vf[:, fj.vfull:fj.vfull + 3])
        out[:, self.full_v_to_dof] = vf
        return out

    def v_from_qvel(self, qvel, qpos) -> np.ndarray:
        qvel = _rows(qvel)
        v = qvel[:, self.v_to_dof]
        for fj in self.free:
            R, d = self._free_rotations(qpos, fj.qposadr), fj.dofadr
            v[:, fj.v:fj.v + 3] = np.einsum("wji,wj->wi", R, qvel[:, d:d + 3])
        return v

    def qfrc_from_tau(self, tau, qpos) -> np.ndarray:
        """Generalized forces conjugate to our v -> MuJoCo's (mimic dofs get none)."""
        tau = np.atleast_2d(np.asarray(tau, dtype=np.float64))
        out = np.zeros((tau.shape[0], self.mj_nv))
        out[:, self.v_to_dof] = tau
        for fj in self.free:
            R, d = self._free_rotations(qpos, fj.qposadr), fj.dofadr
            out[:, d:d + 3] = np.einsum("wij,wj->wi", R, out[:, d:d + 3])
        return out

    def tau_from_qfrc(self, qfrc, qpos) -> np.ndarray:
        """MuJoCo generalized forces -> ours (mimic dofs folded onto their source, G^T f)."""
        qfrc = np.atleast_2d(np.asarray(qfrc, dtype=np.float64))
        tau = qfrc[:, self.v_to_dof].copy()
        for k, full in enumerate(self.mimic_vfull):
            tau[:, self.vfull_src[full]] += self.mimic_mult[k] * qfrc[:, self.full_v_to_dof[full]]
        for fj in self.free:
            R, d = self._free_rotations(qpos, fj.qposadr), fj.dofadr
            tau[:, fj.v:fj.v + 3] = np.einsum("wji,wj->wi", R, qfrc[:, d:d + 3])
        return tau

    def velocity_map(self, qpos) -> np.ndarray:
        """S (mj nv, nv) with qvel = S v at one configuration (for reducing MuJoCo matrices)."""
        return np.stack([self.qvel_from_v(e, qpos)[0] for e in np.eye(self.nv)], axis=1)


def _rows(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x[None] if x.ndim == 1 else x


@dataclass
class CompiledScene:
    """Our Model, its generated MJCF, the compiled MjModel and the index maps."""

    model: Model
    mjcf: Mjcf
    mj: object
    layout: Layout
    notes: tuple = ()

    @property
    def timestep(self) -> float:
        return float(self.mj.opt.timestep)


def compile_xml(xml: str, what: str = "generated MJCF"):
    import mujoco

    try:
        return mujoco.MjModel.from_xml_string(xml)
    except ValueError as exc:
        msg = " ".join(str(exc).split())
        hint = ""
        if "mass and inertia" in msg:
            hint = " (the robot lacks inertials: caliper doctor ROBOT --repair computes them from geometry)"
        raise CaliperError(f"MuJoCo rejects the {what}: {msg}{hint}") from None


def build_layout(model: Model, doc: Mjcf, mj) -> Layout:
    import mujoco

    def lookup(kind, name, what):
        i = mujoco.mj_name2id(mj, kind, name)
        if i < 0:
            raise CaliperError(f"generated MJCF has no {what} named {name!r}")
        return i

    J, B = mujoco.mjtObj.mjOBJ_JOINT, mujoco.mjtObj.mjOBJ_BODY
    jnt_id = np.array([lookup(J, n, "joint") for n in doc.joint_names], dtype=np.int64)
    body_id = np.array([lookup(B, n, "body") for n in doc.body_names], dtype=np.int64)
    full_q, full_v = np.zeros(model.nq_full, np.int64), np.zeros(model.nv_full, np.int64)
    for i, jtype in enumerate(model.jnt_type):
        n_q = {"free": 7, "ball": 4}.get(jtype, 1)
        n_v = {"free": 6, "ball": 3}.get(jtype, 1)
        full_q[model.body_qadr[i]:model.body_qadr[i] + n_q] = mj.jnt_qposadr[jnt_id[i]] + np.arange(n_q)
        full_v[model.body_vadr[i]:model.body_vadr[i] + n_v] = mj.jnt_dofadr[jnt_id[i]] + np.arange(n_v)
    mimic = [i for i in range(model.nbody) if model.vfull_mimic[model.body_vadr[i]] >= 0]
    mimic_v = np.array([model.body_vadr[i] for i in mimic], dtype=np.int64)
    mimic_q = np.array([model.body_qadr[i] for i in mimic], dtype=np.int64)
    qfull_src, vfull_src = np.array(model.qfull_src, np.int64), np.array(model.vfull_src, np.int64)
    is_mimic_q = np.zeros(model.nq_full, bool)
    is_mimic_q[mimic_q] = True
    is_mimic_v = np.zeros(model.nv_full, bool)
    is_mimic_v[mimic_v] = True
    q_to_qpos = np.zeros(model.nq, np.int64)
    q_to_qpos[qfull_src[~is_mimic_q]] = full_q[~is_mimic_q]
    v_to_dof = np.zeros(model.nv, np.int64)
    v_to_dof[vfull_src[~is_mimic_v]] = full_v[~is_mimic_v]
    dof_to_v = np.full(mj.nv, -1, np.int64)
    dof_to_v[v_to_dof] = np.arange(model.nv)
    mj_body_to_ours = np.full(mj.nbody, -1, np.int64)
    mj_body_to_ours[body_id] = np.arange(model.nbody)
    v_to_ctrl = np.full(model.nv, -1, np.int64)
    ctrl_to_v = np.zeros(mj.nu, np.int64)
    effort_sensor = np.zeros(mj.nu, np.int64)
    ctrl_to_q = np.zeros(mj.nu, np.int64)
    for jname in doc.actuated:
        act = lookup(mujoco.mjtObj.mjOBJ_ACTUATOR, jname, "actuator")
        dof = mj.jnt_dofadr[lookup(J, jname, "joint")]
        v_to_ctrl[dof_to_v[dof]] = act
        ctrl_to_v[act] = dof_to_v[dof]
        ctrl_to_q[act] = int(np.flatnonzero(q_to_qpos == mj.jnt_qposadr[lookup(J, jname, "joint")])[0])
        effort_sensor[act] = mj.sensor_adr[lookup(mujoco.mjtObj.mjOBJ_SENSOR, f"effort_{jname}", "sensor")]
    free = []
    for i, jtype in enumerate(model.jnt_type):
        if jtype == "free":
            R0 = np.asarray(model.jnt_R[i], np.float64)
            free.append(FreeJoint(model.body_qadr[i], model.body_vadr[i], model.qfull_src[model.body_qadr[i]],
                                  model.vfull_src[model.body_vadr[i]], int(mj.jnt_qposadr[jnt_id[i]]),
                                  int(mj.jnt_dofadr[jnt_id[i]]), mat_to_quat(R0),
                                  np.asarray(model.jnt_p[i], np.float64), R0))
    layout = Layout(
        nq=model.nq, nv=model.nv, nu=mj.nu, mj_nq=mj.nq, mj_nv=mj.nv, jnt_id=jnt_id, body_id=body_id,
        mj_body_to_ours=mj_body_to_ours, full_q_to_qpos=full_q, full_v_to_dof=full_v, q_to_qpos=q_to_qpos,
        v_to_dof=v_to_dof, dof_to_v=dof_to_v, v_to_ctrl=v_to_ctrl, ctrl_to_v=ctrl_to_v, ctrl_to_q=ctrl_to_q,
        effort_sensor=effort_sensor, qfull_src=qfull_src,
        vfull_src=vfull_src, mimic_qfull=mimic_q, mimic_vfull=mimic_v,
        mimic_mult=np.asarray(model.mimic_multiplier, np.float64).reshape(-1),
        mimic_off=np.asarray(model.mimic_offset, np.float64).reshape(-1), free=tuple(free),
        qpos0=np.array(mj.qpos0))
    for prop in doc.props:
        b = lookup(B, prop.name, "body")
        jnt = lookup(J, f"{prop.name}_free", "joint")
        layout.prop_body[prop.name] = b
        layout.prop_qposadr[prop.name] = int(mj.jnt_qposadr[jnt])
        layout.prop_dofadr[prop.name] = int(mj.jnt_dofadr[jnt])
        layout.prop_geom[prop.name] = lookup(mujoco.mjtObj.mjOBJ_GEOM, prop.name, "geom")
    for prop, eq in doc.welds:
        layout.weld_eq[prop] = lookup(mujoco.mjtObj.mjOBJ_EQUALITY, eq, "equality")
    robot_bodies = set(body_id.tolist())
    layout.robot_geoms = frozenset(g for g in range(mj.ngeom) if int(mj.geom_bodyid[g]) in robot_bodies)
    return layout


def compile_scene(model: Model, **mjcf_kwargs) -> CompiledScene:
    """Generate the MJCF of ``model`` (keywords of :func:`~mjx_backend.mjcf.model_to_mjcf`),
    compile it with MuJoCo and resolve the index maps by name."""
    doc = model_to_mjcf(model, **mjcf_kwargs)
    mj = compile_xml(doc.xml, f"MJCF generated for {model.name!r}")
    layout = build_layout(model, doc, mj)
    notes = doc.notes + _servo_damping_notes(mj, doc, layout)
    for note in notes[len(doc.notes):]:
        warnings.warn(note, stacklevel=2)
    return CompiledScene(model, doc, mj, layout, notes)


def _servo_damping_notes(mj, doc: Mjcf, layout: Layout) -> tuple:
    """Explicit integrators treat a servo's kv explicitly: kv * h / M_ii > 2 diverges. Checked at
    qpos0 against the diagonal of the joint-space inertia (armature included)."""
    import mujoco

    if doc.options.integrator not in ("euler", "rk4") or doc.actuators not in ("position", "velocity"):
        return ()
    d = mujoco.MjData(mj)
    mujoco.mj_forward(mj, d)
    M = np.zeros((mj.nv, mj.nv))
    mujoco.mj_fullM(mj, d, M)
    notes = []
    for a in range(mj.nu):
        dof = layout.v_to_dof[layout.ctrl_to_v[a]]
        kv = -mj.actuator_biasprm[a, 2] if doc.actuators == "position" else mj.actuator_gainprm[a, 0]
        ratio = kv * mj.opt.timestep / M[dof, dof]
        if ratio > 1.0:
            notes.append(f"actuator {doc.actuated[a]!r}: kv*timestep/inertia = {ratio:.2g} with the "
                         f"explicit {doc.options.integrator} integrator (unstable above 2): use "
                         "integrator='implicitfast', a smaller kv or a smaller timestep")
    return tuple(notes)


__all__ = ["CompiledScene", "Layout", "build_layout", "compile_scene", "compile_xml"]

"""The exact validity stage of planning on MuJoCo's C collision pipeline.

:class:`MujocoEngine` mirrors a :class:`~caliper_jax.collision.CollisionModel` in an ``MjModel``:
one mocap body per robot body that carries colliders, each collider a geom on it (``hull`` ->
a mesh of the hull's vertices, which MuJoCo collides as their convex hull; ``box``, ``point`` ->
sphere, ``segment`` -> capsule, ``cylinder``; obstacles on the world body, ``halfspace`` ->
plane), every geom's ``contype``/``conaffinity`` 0 and exactly the CollisionModel's pairs as
explicit ``<pair>``\\ s, whose ``margin`` is the required clearance plus the radius a box, cylinder
or hull core is grown by. A state collides when ``mj_collision`` reports any contact (MuJoCo's
convex solver, ``ccd_tolerance`` 1e-6: a pair within about 1e-6 m of the margin can go either way).
The robot's body poses come from caliper's kinematics (one jitted, vmapped call per chunk of
``CHUNK`` states), so the C side only places bodies and collides; states run in a loop of
``mj_kinematics`` + ``mj_collision`` per state (the GIL is released inside both calls).

:class:`ExactChecker` is the planners' :class:`~caliper_jax.planning.validity.Checker` on this
engine, optionally behind a conservative sphere cover
(:class:`~caliper_jax.planning.spherecheck.PlanningChecker`): a state the cover clears is
collision-free under the exact geometry (the cover holds every collider), so only the states it
rejects reach MuJoCo -- near obstacles, a small share of a path's states.
"""
from __future__ import annotations

import jax
import numpy as np

from caliper_jax.collision.scene import CollisionModel, colliders_of
from caliper_jax.errors import CaliperError
from caliper_jax.model import Model
from caliper_jax.planning.aot import program
from caliper_jax.planning.validity import Checker

#: States per jitted kinematics call (one compiled shape).
CHUNK = 256
#: States per jitted sphere-cover call (one compiled shape, the one the search's escapes use).
COVER_CHUNK = 256


def _quat(R):
    """Rotation matrices (..., 3, 3) -> unit quaternions (..., 4) w x y z (Shepperd's method)."""
    R = np.asarray(R, np.float64)
    tr = R[..., 0, 0] + R[..., 1, 1] + R[..., 2, 2]
    cand = np.stack([
        np.stack([1 + tr, R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0],
                  R[..., 1, 0] - R[..., 0, 1]], -1),
        np.stack([R[..., 2, 1] - R[..., 1, 2], 1 + R[..., 0, 0] - R[..., 1, 1] - R[..., 2, 2],
                  R[..., 0, 1] + R[..., 1, 0], R[..., 0, 2] + R[..., 2, 0]], -1),
        np.stack([R[..., 0, 2] - R[..., 2, 0], R[..., 0, 1] + R[..., 1, 0],
                  1 - R[..., 0, 0] + R[..., 1, 1] - R[..., 2, 2], R[..., 1, 2] + R[..., 2, 1]], -1),
        np.stack([R[..., 1, 0] - R[..., 0, 1], R[..., 0, 2] + R[..., 2, 0], R[..., 1, 2] + R[..., 2, 1],
                  1 - R[..., 0, 0] - R[..., 1, 1] + R[..., 2, 2]], -1)], -2)       # (..., 4, 4)
    diag = np.stack([tr, R[..., 0, 0], R[..., 1, 1], R[..., 2, 2]], -1)
    pick = np.argmax(diag, axis=-1)
    q = np.take_along_axis(cand, pick[..., None, None], axis=-2)[..., 0, :]
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def _geom(body, c, name: str):
    """Add collider ``c`` as a geom of MjSpec body ``body``; returns the radius MuJoCo leaves out."""
    import mujoco

    g = body.add_geom()
    g.name = name
    g.contype = g.conaffinity = 0
    g.pos = np.asarray(c.p, np.float64)
    g.quat = _quat(c.R)
    g.group = 3
    if c.kind == "point":
        g.type, g.size = mujoco.mjtGeom.mjGEOM_SPHERE, [max(c.radius, 1e-9), 0, 0]
        return 0.0
    if c.kind == "segment":
        g.type, g.size = mujoco.mjtGeom.mjGEOM_CAPSULE, [max(c.radius, 1e-9), float(c.half[2]), 0]
        return 0.0
    if c.kind == "box":
        g.type, g.size = mujoco.mjtGeom.mjGEOM_BOX, np.maximum(np.asarray(c.half, np.float64), 1e-9)
    elif c.kind == "cylinder":
        g.type, g.size = mujoco.mjtGeom.mjGEOM_CYLINDER, [float(c.half[0]), float(c.half[2]), 0]
    elif c.kind == "hull":
        g.type, g.meshname = mujoco.mjtGeom.mjGEOM_MESH, name
    elif c.kind == "halfspace":
        g.type, g.size = mujoco.mjtGeom.mjGEOM_PLANE, [0, 0, 1]
    else:                                         # pragma: no cover - KINDS is closed
        raise CaliperError(f"exact engine: unknown collider kind {c.kind!r} ({c.name})")
    return float(c.radius)


class MujocoEngine:
    """MuJoCo mirror of ``cm`` for ``model`` with required clearance ``margin`` (m); see the
    module docstring. ``collides(qs (n, nq)) -> (n,) bool``; ``states`` counts states checked."""

    def __init__(self, model: Model, cm: CollisionModel, margin: float = 0.0):
        import mujoco

        self.model, self.cm, self.margin = model, cm, float(margin)
        cols = colliders_of(cm)
        spec = mujoco.MjSpec()
        spec.modelname = f"{model.name}_exact"
        bodies = sorted({c.body for c in cols if c.body >= 0 and not c.obstacle})
        self.bodies = np.array(bodies, dtype=np.int64)
        mj_body = {}
        for b in bodies:
            mb = spec.worldbody.add_body()
            mb.name = f"b{b}"
            mb.mocap = True
            mj_body[b] = mb
        extra = []
        for i, c in enumerate(cols):
            name = f"c{i}"
            if c.kind == "hull":
                mesh = spec.add_mesh()
                mesh.name = name
                mesh.uservert = np.asarray(c.vertices, np.float64).reshape(-1)
                mesh.inertia = mujoco.mjtMeshInertia.mjMESH_INERTIA_CONVEX
            parent = mj_body[c.body] if (c.body >= 0 and not c.obstacle) else spec.worldbody
            extra.append(_geom(parent, c, name))
        for i, j in cm.pairs:
            p = spec.add_pair()
            p.geomname1, p.geomname2 = f"c{i}", f"c{j}"
            p.margin = self.margin + extra[i] + extra[j]
            p.gap = 0.0
        spec.option.ccd_tolerance = 1e-6
        try:
            self.mj = spec.compile()
        except Exception as e:                    # MuJoCo's compiler message, one line
            raise CaliperError(f"exact engine: MuJoCo could not compile the collision scene of "
                               f"{model.name!r}: {str(e).splitlines()[0]}") from None
        self.data = mujoco.MjData(self.mj)
        self.states = 0
        self._poses = program("exact.poses", jax.vmap(lambda q: _body_poses(model, q)), lambda: (model,))
        if self.bodies.size:                      # compile now, not in the middle of a later call
            self.poses(np.zeros((1, model.nq)))

    def poses(self, qs: np.ndarray):
        """Mocap positions (n, nb, 3) and quaternions (n, nb, 4) of the collider-carrying bodies."""
        n = qs.shape[0]
        P, Q = np.zeros((n, self.bodies.size, 3)), np.zeros((n, self.bodies.size, 4))
        if self.bodies.size == 0:
            return P, Q
        dt = self.model.jnt_p.dtype
        for s in range(0, n, CHUNK):
            part = qs[s:s + CHUNK]
            pad = np.concatenate([part, np.repeat(part[-1:], CHUNK - part.shape[0], 0)])
            R, p = jax.device_get(self._poses(jax.device_put(np.asarray(pad, dtype=dt))))
            m = part.shape[0]
            P[s:s + m] = np.asarray(p, np.float64)[:m, self.bodies]
            Q[s:s + m] = _quat(np.asarray(R, np.float64)[:m, self.bodies])
        return P, Q

    def collides(self, qs) -> np.ndarray:
        import mujoco

        qs = np.asarray(qs, np.float64).reshape(-1, self.model.nq)
        n = qs.shape[0]
        out = np.zeros(n, bool)
        if n == 0 or not self.cm.npair:
            return out
        P, Q = self.poses(qs)
        m, d = self.mj, self.data
        kin, col = mujoco.mj_kinematics, mujoco.mj_collision
        for k in range(n):
            d.mocap_pos[:] = P[k]
            d.mocap_quat[:] = Q[k]
            kin(m, d)
            col(m, d)
            out[k] = d.ncon > 0
        self.states += n
        return out


def _body_poses(model, q):
    from caliper_jax.kinematics import body_poses

    return body_poses(model, q)


#: (id(cm), id(model), margin) -> MujocoEngine (identity-checked on a hit: ids can be reused).
_ENGINES: dict = {}


def mujoco_engine(model: Model, cm: CollisionModel, margin: float = 0.0) -> MujocoEngine:
    """:class:`MujocoEngine` cached per (model, collision model, margin)."""
    key = (id(cm), id(model), float(margin))
    hit = _ENGINES.get(key)
    if hit is None or hit.model is not model or hit.cm is not cm:
        hit = _ENGINES[key] = MujocoEngine(model, cm, margin)
    return hit


class ExactChecker(Checker):
    """:class:`~caliper_jax.planning.validity.Checker` whose collision test is the MuJoCo engine,
    behind the conservative sphere ``cover`` (a :class:`~caliper_jax.planning.spherecheck.PlanningChecker`
    with ``cover_params`` at this checker's margin) when given: states it clears skip MuJoCo.
    ``cover_cleared`` counts them, ``exact_states`` the states MuJoCo checked."""

    def __init__(self, model: Model, cm: CollisionModel, *, margin: float = 0.0, resolution: float = 0.02,
                 cover=None, cover_params=None):
        super().__init__(model, cm, margin=margin, resolution=resolution, filtered=False)
        self.engine = mujoco_engine(model, cm, self.margin)
        self.cover = cover
        if cover is not None:
            params = cover.params if cover_params is None else cover_params
            margin = np.asarray(self.margin, dtype=params.margin.dtype)
            self.cover_params = params._replace(margin=jax.device_put(margin))
        self.cover_cleared = 0
        self.exact_states = 0

    def valid(self, qs) -> np.ndarray:
        qs = np.asarray(qs, dtype=np.float64).reshape(-1, self.nq)
        n = qs.shape[0]
        if n == 0:
            return np.zeros(0, dtype=bool)
        inside = np.all((qs >= self.lower) & (qs <= self.upper), axis=-1)
        todo = inside.copy()
        if self.cover is not None:
            from caliper_jax.planning.vrrt import valid_padded

            clear = valid_padded(self.cover, qs, self.cover_params, chunk=COVER_CHUNK)
            self.cover_cleared += int(np.sum(clear & inside))
            todo &= ~clear
        hit = np.zeros(n, bool)
        idx = np.flatnonzero(todo)
        if idx.size:
            hit[idx] = self.engine.collides(qs[idx])
        self.exact_states += idx.size
        self.calls += 1
        self.states += n
        return inside & ~hit


__all__ = ["CHUNK", "COVER_CHUNK", "ExactChecker", "MujocoEngine", "mujoco_engine"]

"""Drawing a robot in the viser scene from forward kinematics.

One scene node per body (``{root}/b{i}``) placed at ``T_world_body`` from
``caliper_jax.kinematics.body_poses``; the body's geometry (boxes, spheres, cylinders, capsules of
the visual role, else the collision role) hangs below it at its fixed placement, so a new pose is
one position/orientation update per body. A skeleton (parent origin -> child origin line
segments) is always drawn, so robots without geometry (and meshes, which are not loaded here) are
still visible. No maths of its own: every pose comes from the engine.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from caliper_jax.errors import CaliperError

COLLIDING = (220, 40, 40)  # RGB of a colliding link or obstacle
OBSTACLE = (150, 150, 150)
GROUND_SIZE = 2.0  # side (m) of the square drawn for the ground half-space


def import_viser():
    """``viser``, or a CaliperError naming the extra to install."""
    try:
        import viser
    except ImportError:
        raise CaliperError("the studio needs viser: pip install 'caliper-jax[studio]'") from None
    return viser


def wxyz(R) -> np.ndarray:
    """(4,) unit quaternion (w, x, y, z) of a 3x3 rotation matrix (the project's own converter)."""
    from caliper_jax.io.rotations import mat_to_quat

    q = np.asarray(mat_to_quat(np.asarray(R, np.float64)), np.float64)
    return q / np.linalg.norm(q)


@lru_cache(maxsize=8)
def _body_poses_fn(_key):
    import jax

    from caliper_jax import kinematics

    return jax.jit(kinematics.body_poses)


def body_transforms(model, q) -> tuple[np.ndarray, np.ndarray]:
    """World pose of every body at q (nq,): R (nbody, 3, 3), p (nbody, 3), NumPy float64."""
    q = np.asarray(q, np.float64)
    if q.shape != (model.nq,) or not np.all(np.isfinite(q)):
        raise CaliperError(f"q: expected {model.nq} finite values for {model.name!r}, got shape {q.shape}")
    import jax.numpy as jnp

    R, p = _body_poses_fn((model.body_parent, model.jnt_type))(model, jnp.asarray(q, model.dtype))
    return np.asarray(R, np.float64), np.asarray(p, np.float64)


def geoms_to_draw(model) -> list:
    """The visual geoms of ``model``, or its collision geoms when it has no visual ones."""
    visual = [g for g in model.geoms if g.role == "visual"]
    return visual or [g for g in model.geoms if g.role == "collision"]


class RobotDrawing:
    """A robot in a viser scene. ``update(q)`` moves it; ``last_q`` / ``body_positions`` hold what
    was drawn (for tests). ``opacity`` < 1 draws a ghost."""

    def __init__(
        self, server, model, root: str = "/robot", color=(90, 140, 220), opacity: float | None = None
    ):
        self.server, self.model, self.root = server, model, root
        self.color, self.opacity = tuple(color), opacity
        self.frames = []
        for b in range(model.nbody):
            self.frames.append(
                server.scene.add_frame(f"{root}/b{b}", show_axes=True, axes_length=0.05, axes_radius=0.003)
            )
        self.ngeom = 0
        self.body_geoms = {}  # body index -> the viser handles of its drawn geometry
        self.highlighted = ()
        for k, g in enumerate(geoms_to_draw(model)):
            if g.body < 0:
                continue
            if self._add_geom(f"{root}/b{g.body}/g{k}", g):
                self.ngeom += 1
        self.skeleton = None
        self.last_q = None
        self.body_positions = None

    def _add_geom(self, name: str, g) -> bool:
        scene = self.server.scene
        handles = self.body_geoms.setdefault(int(g.body), [])
        kw = dict(wxyz=wxyz(np.asarray(g.R, np.float64).reshape(3, 3)), position=np.asarray(g.p, np.float64))
        if self.opacity is not None:
            kw["opacity"] = self.opacity
        size = np.asarray(g.size, np.float64)
        if g.kind == "box":
            handles.append(scene.add_box(name, color=self.color, dimensions=tuple(2.0 * size[:3]), **kw))
        elif g.kind == "sphere":
            handles.append(scene.add_icosphere(name, radius=float(size[0]), color=self.color, **kw))
        elif g.kind in ("cylinder", "capsule"):
            # viser's cylinder runs along its local z, as URDF's and MuJoCo's do
            handles.append(
                scene.add_cylinder(
                    name, radius=float(size[0]), height=2.0 * float(size[1]), color=self.color, **kw
                )
            )
            if g.kind == "capsule":
                R = np.asarray(g.R, np.float64).reshape(3, 3)
                for s, end in ((1, "a"), (-1, "b")):
                    p = np.asarray(g.p, np.float64) + s * float(size[1]) * R[:, 2]
                    h = scene.add_icosphere(
                        f"{name}{end}",
                        radius=float(size[0]),
                        color=self.color,
                        position=p,
                        **({} if self.opacity is None else {"opacity": self.opacity}),
                    )
                    handles.append(h)
        else:
            return False  # meshes: the skeleton stands in for them
        return True

    def highlight(self, bodies=()) -> None:
        """Colour the geometry of ``bodies`` (indices) red, every other body its normal colour."""
        bodies = tuple(sorted({int(b) for b in bodies}))
        if bodies == self.highlighted:
            return
        for b, handles in self.body_geoms.items():
            for h in handles:
                h.color = COLLIDING if b in bodies else self.color
        self.highlighted = bodies

    def update(self, q) -> None:
        """Draw the robot at q (nq,)."""
        R, p = body_transforms(self.model, q)
        with self.server.atomic():
            for b, frame in enumerate(self.frames):
                frame.wxyz = wxyz(R[b])
                frame.position = p[b]
            segments = [
                (p[self.model.body_parent[b]] if self.model.body_parent[b] >= 0 else np.zeros(3), p[b])
                for b in range(self.model.nbody)
            ]
            points = np.asarray(segments, np.float32).reshape(-1, 2, 3)
            if self.skeleton is None:
                self.skeleton = self.server.scene.add_line_segments(
                    f"{self.root}/skeleton", points, colors=(40, 40, 40), thickness=0.006
                )
            else:
                self.skeleton.points = points
        self.last_q = np.asarray(q, np.float64).copy()
        self.body_positions = p

    def remove(self) -> None:
        self.server.scene.remove_by_name(self.root) if hasattr(self.server.scene, "remove_by_name") else None
        for f in self.frames:
            f.remove()
        if self.skeleton is not None:
            self.skeleton.remove()


class ObstacleDrawing:
    """World obstacles (:class:`caliper_jax.collision.geometry.Collider`, ``body`` -1) in a viser
    scene under ``root``: boxes, spheres, capsules, and half-spaces as a thin square slab at their
    surface. ``highlight(names)`` colours the named ones red."""

    def __init__(self, server, obstacles, root: str = "/obstacles"):
        self.server, self.root = server, root
        self.handles = {}
        self.highlighted = ()
        scene = server.scene
        for k, c in enumerate(obstacles):
            name = f"{root}/o{k}"
            kw = dict(color=OBSTACLE, wxyz=wxyz(c.R), position=np.asarray(c.p, np.float64), opacity=0.6)
            if c.kind == "box":
                h = [scene.add_box(name, dimensions=tuple(2.0 * np.asarray(c.half, np.float64)), **kw)]
            elif c.kind == "point":
                h = [scene.add_icosphere(name, radius=float(c.radius), **kw)]
            elif c.kind == "segment":
                h = [scene.add_cylinder(name, radius=float(c.radius), height=2.0 * float(c.half[2]), **kw)]
            elif c.kind == "halfspace":  # the surface plane: a thin slab just below it
                kw["position"] = kw["position"] - 0.001 * np.asarray(c.R, np.float64)[:, 2]
                kw["opacity"] = 0.25
                h = [scene.add_box(name, dimensions=(GROUND_SIZE, GROUND_SIZE, 0.002), **kw)]
            else:
                continue
            self.handles[c.name] = h

    def highlight(self, names=()) -> None:
        names = tuple(sorted(set(names)))
        if names == self.highlighted:
            return
        for n, hs in self.handles.items():
            for h in hs:
                h.color = COLLIDING if n in names else OBSTACLE
        self.highlighted = names

    def remove(self) -> None:
        for hs in self.handles.values():
            for h in hs:
                h.remove()
        self.handles = {}

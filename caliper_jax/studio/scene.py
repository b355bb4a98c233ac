"""Drawing a robot in the viser scene from forward kinematics.

One scene node per body (``{root}/b{i}``) placed at ``T_world_body`` from
``caliper_jax.kinematics.body_poses``; the body's geometry (boxes, spheres, cylinders, capsules and
meshes of the visual role, else the collision role) hangs below it at its fixed placement, so a
new pose is one position/orientation update per body. Meshes (STL / OBJ / DAE) are read by trimesh
and keep the file's own colours. A skeleton (parent origin -> child origin line segments) is
always drawn, so robots without geometry (or with unreadable meshes) are still visible. No maths
of its own: every pose comes from the engine.
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


@lru_cache(maxsize=64)
def load_mesh(path: str):
    """A mesh file (STL / OBJ / DAE / GLB ... via trimesh; DAE needs pycollada) as
    ``(glb bytes or None, vertices (V, 3), faces (F, 3), has_colours)``: the GLB keeps the file's
    own materials (colours from the description); vertices / faces are the whole file in one
    mesh, in the file's frame and units. A CaliperError names the file when it cannot be read."""
    try:
        import trimesh
    except ImportError:
        raise CaliperError("drawing meshes needs trimesh: pip install 'caliper-jax[studio]'") from None
    try:
        scene = trimesh.load(str(path), force="scene")
        whole = scene.to_geometry() if hasattr(scene, "to_geometry") else scene.dump(concatenate=True)
    except Exception as exc:  # trimesh raises many kinds (missing pycollada, bad file, ...)
        raise CaliperError(f"mesh {path}: cannot be read ({type(exc).__name__}: {exc})") from None
    coloured = any(getattr(g.visual, "defined", False) for g in scene.geometry.values())
    glb = scene.export(file_type="glb") if coloured else None
    return (glb, np.asarray(whole.vertices, np.float32), np.asarray(whole.faces, np.uint32), coloured)


class RobotDrawing:
    """A robot in a viser scene. ``update(q)`` moves it; ``last_q`` / ``body_positions`` hold what
    was drawn (for tests). ``opacity`` < 1 draws a ghost (primitives only, no meshes).

    The visual geometry (boxes, spheres, cylinders, capsules and meshes; the collision geometry
    when the robot has no visual one) hangs below one frame per body, so a new pose is one
    transform per body. Meshes keep their file's colours (an uncoloured mesh gets ``color``).
    ``show_collision(True)`` adds the collision geometry (translucent orange, built on first use);
    ``highlight(bodies)`` draws those bodies red. ``mesh_errors`` lists meshes that could not be
    read (the skeleton stands in for them)."""

    COLLISION_COLOR = (255, 150, 40)

    def __init__(
        self, server, model, root: str = "/robot", color=(190, 195, 205), opacity: float | None = None,
        meshes: bool = True,
    ):
        self.server, self.model, self.root = server, model, root
        self.color, self.opacity = tuple(color), opacity
        self.meshes = meshes and opacity is None
        self.mesh_errors = []
        self.body_geoms = {}  # body index -> handles of its drawn (visual) geometry
        self._red = {}  # body index -> handles of its red overlay (built on first highlight)
        self._collision = None  # handles of the collision geometry (built on first show)
        self.highlighted = ()
        self.frames = [
            server.scene.add_frame(f"{root}/b{b}", show_axes=False, axes_length=0.05, axes_radius=0.003)
            for b in range(model.nbody)
        ]
        self.base = server.scene.add_frame(f"{root}/base", show_axes=False)  # world-fixed geometry
        self.drawn = geoms_to_draw(model)
        self.ngeom = sum(
            bool(self._add_geom(self._name(k, g, "g"), g, self.color, self.body_geoms, self.opacity))
            for k, g in enumerate(self.drawn)
        )
        if self.ngeom == 0:  # nothing but the skeleton: show the body frames
            for f in self.frames:
                f.show_axes = True
        self.skeleton = None
        self.last_q = None
        self.body_positions = None

    def _name(self, k, g, tag) -> str:
        return f"{self.root}/{'base' if g.body < 0 else f'b{g.body}'}/{tag}{k}"

    def _add_geom(self, name: str, g, color, store, opacity=None, plain=False) -> bool:
        """Add geom ``g`` under ``name`` in ``color`` (meshes keep their own colours unless
        ``plain``); its handles go to ``store[body]``. False when it cannot be drawn."""
        scene = self.server.scene
        handles = store.setdefault(int(g.body), [])
        kw = dict(wxyz=wxyz(np.asarray(g.R, np.float64).reshape(3, 3)), position=np.asarray(g.p, np.float64))
        op = {} if opacity is None else {"opacity": opacity}
        size = np.asarray(g.size, np.float64)
        if g.kind == "box":
            handles.append(scene.add_box(name, color=color, dimensions=tuple(2.0 * size[:3]), **kw, **op))
        elif g.kind == "sphere":
            handles.append(scene.add_icosphere(name, radius=float(size[0]), color=color, **kw, **op))
        elif g.kind in ("cylinder", "capsule"):
            # viser's cylinder runs along its local z, as URDF's and MuJoCo's do
            r, h = float(size[0]), 2.0 * float(size[1])
            handles.append(scene.add_cylinder(name, radius=r, height=h, color=color, **kw, **op))
            if g.kind == "capsule":
                R = np.asarray(g.R, np.float64).reshape(3, 3)
                for s, end in ((1, "a"), (-1, "b")):
                    p = np.asarray(g.p, np.float64) + s * float(size[1]) * R[:, 2]
                    ball = scene.add_icosphere(f"{name}{end}", radius=r, color=color, position=p, **op)
                    handles.append(ball)
        elif g.kind == "mesh" and self.meshes and g.mesh:
            try:
                glb, verts, faces, coloured = load_mesh(str(g.mesh))
            except CaliperError as exc:
                self.mesh_errors.append(str(exc))
                return False
            scale = tuple(float(v) for v in size[:3])
            if coloured and not plain and opacity is None:
                handles.append(scene.add_glb(name, glb, scale=scale, **kw))
            else:
                handles.append(
                    scene.add_mesh_simple(name, verts, faces, color=color, scale=scale, **kw, **op)
                )
        else:
            return False
        return True

    def show_collision(self, on: bool = True) -> int:
        """Show / hide the collision geometry (built on first show). Returns the geoms drawn."""
        if on and self._collision is None:
            self._collision = {}
            for k, g in enumerate(x for x in self.model.geoms if x.role == "collision"):
                name = self._name(k, g, "c")
                self._add_geom(name, g, self.COLLISION_COLOR, self._collision, 0.45, plain=True)
        for hs in (self._collision or {}).values():
            for h in hs:
                h.visible = bool(on)
        return sum(len(hs) for hs in (self._collision or {}).values())

    def highlight(self, bodies=()) -> None:
        """Draw the geometry of ``bodies`` (indices) red, every other body in its own colours."""
        bodies = tuple(sorted({int(b) for b in bodies}))
        if bodies == self.highlighted:
            return
        for b in bodies:
            if b not in self._red:  # the red copy of body b's drawn geometry, built on first use
                for k, g in enumerate(self.drawn):
                    if g.body == b:
                        self._add_geom(self._name(k, g, "r"), g, COLLIDING, self._red, plain=True)
        for b, handles in self.body_geoms.items():
            for h in handles:
                h.visible = b not in bodies
        for b, handles in self._red.items():
            for h in handles:
                h.visible = b in bodies
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
        """Remove every scene node of this drawing."""
        for store in (self.body_geoms, self._red, self._collision or {}):
            for hs in store.values():
                for h in hs:
                    h.remove()
        for f in [*self.frames, self.base]:
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

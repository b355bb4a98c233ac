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
        kw = dict(wxyz=wxyz(np.asarray(g.R, np.float64).reshape(3, 3)), position=np.asarray(g.p, np.float64))
        if self.opacity is not None:
            kw["opacity"] = self.opacity
        size = np.asarray(g.size, np.float64)
        if g.kind == "box":
            scene.add_box(name, color=self.color, dimensions=tuple(2.0 * size[:3]), **kw)
        elif g.kind == "sphere":
            scene.add_icosphere(name, radius=float(size[0]), color=self.color, **kw)
        elif g.kind in ("cylinder", "capsule"):
            # viser's cylinder runs along its local z, as URDF's and MuJoCo's do
            scene.add_cylinder(
                name, radius=float(size[0]), height=2.0 * float(size[1]), color=self.color, **kw
            )
            if g.kind == "capsule":
                R = np.asarray(g.R, np.float64).reshape(3, 3)
                for s, end in ((1, "a"), (-1, "b")):
                    p = np.asarray(g.p, np.float64) + s * float(size[1]) * R[:, 2]
                    scene.add_icosphere(
                        f"{name}{end}",
                        radius=float(size[0]),
                        color=self.color,
                        position=p,
                        **({} if self.opacity is None else {"opacity": self.opacity}),
                    )
        else:
            return False  # meshes: the skeleton stands in for them
        return True

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

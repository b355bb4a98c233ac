"""The eight procedural terrains of the harness as MJCF, each with a closed-form surface.

Every scene is a MuJoCo model (``TerrainScene.xml``) plus an independently written closed form
``TerrainScene.height(x, y)`` (world z of the top surface, metres, NumPy, broadcasting). World frame:
+z up, the body starts at the origin; every scene is flat or gently varying under the origin so a
body placed at ``(0, 0)`` stands on ground near z = 0.

========  ==========================================================================================
scene     what (and how it is modelled)
========  ==========================================================================================
flat      an infinite plane at z = 0
slope     a 5 degree incline rising towards azimuth 30 degrees (height field: a plane tilted in
          both x and y, 1.5 m from its low to its high corner; a grazing LiDAR ring skims it)
rough     three sinusoidal ripples, about 0.12 m peak to peak, 0.8 to 2.3 m wavelengths (height field)
steps     a flight of five 0.10 m steps (0.40 m treads) up along +x ending on a landing (boxes)
boxes     five box obstacles 0.10 - 0.30 m tall, one yawed 30 degrees (boxes on a plane)
gap       a 0.40 m wide, 0.30 m deep trench across the path (ground slabs around a lower floor)
wall      a 0.20 m thick, 0.50 m tall wall, 3 m long, 1.6 m ahead (box)
mixed     gentle ripples with a 0.12 m smooth ramp (height field), a box and a raised platform on it
========  ==========================================================================================

Height fields are used where the surface is not made of flat faces (slope, rough, mixed): MuJoCo
has no other primitive for them, and they are where its ray casts get slow. Piecewise-flat terrain
(steps, boxes, gap, wall) is built from boxes, whose vertical faces are exact (a height field
cannot represent a vertical face). The height fields are 12.8 m square (+-6.4 m, covering the 10 m
LiDAR map) at 0.05 m (257 x 257 samples, a power of two cells). The closed form is the smooth
surface; MuJoCo's field is its samples, triangulated (each cell split along its low-x low-y to
high-x high-y diagonal), so the two differ by the linear-interpolation error, bounded by
``M * (dx^2 + dy^2) / 8`` with ``M`` the largest second derivative (Hessian norm) of the surface
(the error of linear interpolation on a triangle is ``-1/2 sum_i lambda_i (v_i - p)' H (v_i - p)``,
and ``sum_i lambda_i |v_i - p|^2`` peaks at the circumradius squared, ``(dx^2 + dy^2) / 4`` for
these right triangles); ``info["interp_tol"]`` holds that bound and ``info["truth_tol"]`` adds the
float32 rounding of the stored samples (``2^-24`` of the field's height range) -- the tolerance of
the ground truth against the closed form (1e-9 m for the flat-faced scenes).

The ground plane under a height field sits 1 cm below the field's lowest point (so the plane never
shows through it); outside the field's square the closed form is that plane's height too.

Every scene carries a mocap body ``shell_body`` with a box geom ``shell`` around the sensor mounts
(a stand-in for the robot's own shell): sensors sit inside it, so rays must exclude that body or
the first thing they hit is the shell from the inside.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

import numpy as np

from caliper_jax.errors import CaliperError

SCENES = ("flat", "slope", "rough", "steps", "boxes", "gap", "wall", "mixed")

#: height fields: half extent (m) and samples per side (a power of two cells)
HFIELD_HALF = 6.4
HFIELD_SAMPLES = 257
#: the plane under a height field, below its lowest point (m)
PLANE_DROP = 0.01
#: the base box under a height field (MuJoCo's hfield_size[3], m)
HFIELD_BASE = 0.1
#: the mocap body carrying the sensors, its default height (m) and its shell box (body frame)
SHELL_BODY = "shell_body"
SHELL_GEOM = "shell"
SHELL_POS = (0.05, 0.0, 0.30)
SHELL_HALF = (0.35, 0.20, 0.12)
BODY_HEIGHT = 0.5


@dataclass(frozen=True)
class TerrainScene:
    """One terrain: its MJCF (``xml``), the mocap body carrying the sensors (``shell_body``) and a
    closed-form surface. ``info`` holds scene facts the metrics can check (``slope_deg``,
    ``slope_azimuth_deg``, ``step_height``, ``step_edges_x``, ``hfield_resolution``, ``interp_tol``,
    ``truth_tol``, ``z_max``, ...). Hashable by name and MJCF (the closed form is not compared)."""

    name: str
    xml: str
    shell_body: str = SHELL_BODY
    info_items: tuple = ()
    surface: Callable = field(default=None, compare=False, repr=False)

    @property
    def info(self) -> dict:
        return dict(self.info_items)

    @property
    def slope_deg(self):
        """The incline (degrees) where the scene is one, else None."""
        return self.info.get("slope_deg")

    def height(self, x, y) -> np.ndarray:
        """Closed-form surface height z (world, m) at ``x``, ``y`` (NumPy, broadcasting)."""
        x, y = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))
        return np.asarray(self.surface(x, y), dtype=np.float64)

    @cached_property
    def mj(self):
        """The compiled ``mujoco.MjModel`` (cached)."""
        import mujoco

        try:
            return mujoco.MjModel.from_xml_string(self.xml)
        except ValueError as e:
            raise CaliperError(f"terrain scene {self.name!r}: MJCF does not compile: {e}") from None

    @cached_property
    def rays(self):
        """The scene as the JAX ray engine sees it (:class:`caliper_jax.rays.RayScene`, cached)."""
        from caliper_jax.rays import scene_from_mujoco

        return scene_from_mujoco(self.mj)

    @cached_property
    def shell_body_id(self) -> int:
        import mujoco

        i = mujoco.mj_name2id(self.mj, mujoco.mjtObj.mjOBJ_BODY, self.shell_body)
        if i < 0:
            raise CaliperError(f"terrain scene {self.name!r}: no body named {self.shell_body!r}")
        return int(i)

    @cached_property
    def _rest(self):
        """Geom poses with the shell at the identity, and each geom's pose in its body's frame."""
        import mujoco

        m = self.mj
        d = mujoco.MjData(m)
        mocap = int(m.body_mocapid[self.shell_body_id])
        d.mocap_pos[mocap] = 0.0
        d.mocap_quat[mocap] = (1.0, 0.0, 0.0, 0.0)
        mujoco.mj_kinematics(m, d)
        shell = np.asarray(m.geom_bodyid) == self.shell_body_id
        return (np.array(d.geom_xpos), np.array(d.geom_xmat).reshape(-1, 3, 3), shell)

    def poses(self, T_world_body=None) -> tuple:
        """``(geom_xpos (ngeom, 3), geom_xmat (ngeom, 3, 3))`` with the shell body at
        ``T_world_body`` (4, 4) (default: the identity at ``BODY_HEIGHT``). NumPy in and out; the
        same as JAX in :func:`geom_poses`."""
        T = default_pose() if T_world_body is None else _as_pose(T_world_body)
        xpos, xmat, shell = self._rest
        xpos, xmat = xpos.copy(), xmat.copy()
        R, p = T[:3, :3], T[:3, 3]
        xpos[shell] = xpos[shell] @ R.T + p
        xmat[shell] = R @ xmat[shell]
        return xpos, xmat

    def geom_poses(self, T_world_body):
        """:meth:`poses` in JAX (traceable in ``T_world_body`` (4, 4), vmappable)."""
        import jax.numpy as jnp

        xpos0, xmat0, shell = self._rest
        T = jnp.asarray(T_world_body)
        dtype = jnp.result_type(T.dtype, jnp.float32)
        T = T.astype(dtype)
        R, p = T[:3, :3], T[:3, 3]
        m = jnp.asarray(shell)
        xpos = jnp.where(m[:, None], jnp.asarray(xpos0, dtype) @ R.T + p, jnp.asarray(xpos0, dtype))
        xmat = jnp.where(m[:, None, None], jnp.einsum("ij,gjk->gik", R, jnp.asarray(xmat0, dtype)),
                         jnp.asarray(xmat0, dtype))
        return xpos, xmat


def default_pose() -> np.ndarray:
    T = np.eye(4)
    T[2, 3] = BODY_HEIGHT
    return T


def _as_pose(T) -> np.ndarray:
    T = np.asarray(T, dtype=np.float64)
    if T.shape != (4, 4) or not np.all(np.isfinite(T)):
        raise CaliperError(f"T_world_body: expected a finite (4, 4) pose, got shape {T.shape}")
    return T


# ---- MJCF pieces -----------------------------------------------------------------------------

def _f(v) -> str:
    return " ".join(f"{float(x):.10g}" for x in np.atleast_1d(v))


def _shell_xml() -> str:
    return (f'<body name="{SHELL_BODY}" mocap="true" pos="0 0 {BODY_HEIGHT}">'
            f'<geom name="{SHELL_GEOM}" type="box" size="{_f(SHELL_HALF)}" pos="{_f(SHELL_POS)}" '
            'rgba="0.25 0.25 0.3 1" contype="0" conaffinity="0"/></body>')


def _box_xml(name, center_xy, half_xy, z_bottom, z_top, yaw_deg=0.0) -> str:
    cz, hz = 0.5 * (z_top + z_bottom), 0.5 * (z_top - z_bottom)
    return (f'<geom name="{name}" type="box" pos="{_f(center_xy)} {cz:.10g}" '
            f'size="{_f(half_xy)} {hz:.10g}" euler="0 0 {yaw_deg:.10g}" rgba="0.6 0.55 0.5 1"/>')


def _model(name, body: str, asset: str = "") -> str:
    return (f'<mujoco model="terrain_{name}"><compiler angle="degree"/>'
            f'<asset>{asset}</asset><worldbody>{body}{_shell_xml()}</worldbody></mujoco>')


def _hfield_grid():
    xs = np.linspace(-HFIELD_HALF, HFIELD_HALF, HFIELD_SAMPLES)
    return np.meshgrid(xs, xs)            # X, Y (rows along y)


def _hfield_scene(name, surface, hessian_bound, extra_geoms=(), info=()):
    """A height-field scene: samples of ``surface`` on the grid, normalised to [0, 1] (MuJoCo
    normalises any other range), the plane ``PLANE_DROP`` under the lowest sample."""
    X, Y = _hfield_grid()
    Z = surface(X, Y)
    zmin, zmax = float(Z.min()), float(Z.max())
    norm = (Z - zmin) / (zmax - zmin)
    # MJCF elevation rows run from +y down to -y (MuJoCo stores them the other way round)
    elev = " ".join(f"{v:.9g}" for v in norm[::-1].ravel())
    step = 2.0 * HFIELD_HALF / (HFIELD_SAMPLES - 1)
    plane_z = zmin - PLANE_DROP
    asset = (f'<hfield name="{name}_field" nrow="{HFIELD_SAMPLES}" ncol="{HFIELD_SAMPLES}" '
             f'size="{HFIELD_HALF} {HFIELD_HALF} {zmax - zmin:.10g} {HFIELD_BASE}" elevation="{elev}"/>')
    body = (f'<geom name="ground" type="plane" size="0 0 1" pos="0 0 {plane_z:.10g}" rgba="0.5 0.5 0.5 1"/>'
            f'<geom name="terrain" type="hfield" hfield="{name}_field" pos="0 0 {zmin:.10g}" '
            'rgba="0.45 0.6 0.4 1"/>' + "".join(g[0] for g in extra_geoms))
    boxes = [g[1] for g in extra_geoms]

    def height(x, y):
        inside = (np.abs(x) <= HFIELD_HALF) & (np.abs(y) <= HFIELD_HALF)
        z = np.where(inside, surface(x, y), plane_z)
        for b in boxes:
            z = np.where(b.contains(x, y), np.maximum(z, b.top), z)
        return z

    tol = hessian_bound * (2.0 * step * step) / 8.0
    quant = 2.0 ** -24 * (zmax - zmin)          # MuJoCo keeps the normalised samples as float32
    z_top = max([zmax] + [b.top for b in boxes])
    items = (("hfield_resolution", step), ("interp_tol", tol), ("truth_tol", tol + quant + 1e-9),
             ("plane_z", plane_z), ("z_max", z_top)) + info
    return TerrainScene(name=name, xml=_model(name, body, asset), info_items=items, surface=height)


@dataclass(frozen=True)
class _Box:
    """An axis-aligned (in its own yawed frame) box footprint and its top height."""

    center: tuple
    half: tuple
    top: float
    yaw_deg: float = 0.0

    def contains(self, x, y):
        c, s = math.cos(math.radians(self.yaw_deg)), math.sin(math.radians(self.yaw_deg))
        dx, dy = x - self.center[0], y - self.center[1]
        u, v = c * dx + s * dy, -s * dx + c * dy
        return (np.abs(u) <= self.half[0]) & (np.abs(v) <= self.half[1])

    def xml(self, name, z_bottom):
        return _box_xml(name, self.center, self.half, z_bottom, self.top, self.yaw_deg)


def _box_scene(name, boxes, floor_z=0.0, cut=None, info=()):
    """Boxes on a plane at ``floor_z``; ``cut``: a footprint where the ground is the plane (the
    boxes with ``top`` 0 are the ground slabs around it)."""
    body = f'<geom name="ground" type="plane" size="0 0 1" pos="0 0 {floor_z:.10g}" rgba="0.5 0.5 0.5 1"/>'
    body += "".join(b.xml(f"box{i}", floor_z - 0.2) for i, b in enumerate(boxes))

    def height(x, y):
        z = np.full(np.shape(x), float(floor_z))
        for b in boxes:
            z = np.where(b.contains(x, y), np.maximum(z, b.top), z)
        return z

    items = (("hfield_resolution", None), ("interp_tol", 0.0), ("truth_tol", 1e-9),
             ("z_max", max([floor_z] + [b.top for b in boxes]))) + info
    return TerrainScene(name=name, xml=_model(name, body), info_items=items, surface=height)


# ---- the eight scenes ------------------------------------------------------------------------

SLOPE_DEG, SLOPE_AZIMUTH_DEG = 5.0, 30.0


def _flat():
    body = '<geom name="ground" type="plane" size="0 0 1" rgba="0.5 0.5 0.5 1"/>'
    return TerrainScene(name="flat", xml=_model("flat", body),
                        info_items=(("hfield_resolution", None), ("interp_tol", 0.0), ("truth_tol", 1e-9),
                                    ("z_max", 0.0)),
                        surface=lambda x, y: np.zeros(np.shape(x)))


def _slope():
    g = math.tan(math.radians(SLOPE_DEG))
    a, b = g * math.cos(math.radians(SLOPE_AZIMUTH_DEG)), g * math.sin(math.radians(SLOPE_AZIMUTH_DEG))
    return _hfield_scene("slope", lambda x, y: a * x + b * y, 0.0,
                         info=(("slope_deg", SLOPE_DEG), ("slope_azimuth_deg", SLOPE_AZIMUTH_DEG)))


# rough: (amplitude, kx, ky, phase) of A sin(kx x + ky y + phase), plus one A sin(kx x) cos(ky y) term
_ROUGH_PRODUCT = (0.03, 2 * math.pi / 1.7, 2 * math.pi / 2.3, 0.3)
_ROUGH_WAVES = ((0.02, 2 * math.pi / 1.3, 2 * math.pi / 1.3, 1.1),
                (0.01, 2 * math.pi * 0.6 / 0.8, -2 * math.pi * 0.8 / 0.8, 0.4))


def _ripples(product, waves):
    def surface(x, y):
        A, kx, ky, ph = product
        z = A * np.sin(kx * x + ph) * np.cos(ky * y)
        for A, kx, ky, ph in waves:
            z = z + A * np.sin(kx * x + ky * y + ph)
        return z

    # Hessian norm bounds: A (kx^2 + ky^2) per term (for the product term too)
    bound = product[0] * (product[1] ** 2 + product[2] ** 2)
    bound += sum(A * (kx * kx + ky * ky) for A, kx, ky, _ in waves)
    return surface, bound


def _rough():
    surface, bound = _ripples(_ROUGH_PRODUCT, _ROUGH_WAVES)
    return _hfield_scene("rough", surface, bound)


STEP_RISE, STEP_TREAD, STEP_START, STEP_COUNT, STEP_HALF_WIDTH, LANDING_END = 0.10, 0.40, 0.80, 5, 1.60, 3.60


def _steps():
    boxes = []
    for k in range(STEP_COUNT):
        x0 = STEP_START + k * STEP_TREAD
        x1 = LANDING_END if k == STEP_COUNT - 1 else x0 + STEP_TREAD
        boxes.append(_Box((0.5 * (x0 + x1), 0.0), (0.5 * (x1 - x0), STEP_HALF_WIDTH), STEP_RISE * (k + 1)))
    edges = tuple(round(STEP_START + k * STEP_TREAD, 6) for k in range(STEP_COUNT)) + (LANDING_END,)
    return _box_scene("steps", boxes, info=(("step_height", STEP_RISE), ("step_edges_x", edges),
                                            ("step_half_width", STEP_HALF_WIDTH)))


_BOXES = (_Box((1.20, 0.60), (0.28, 0.20), 0.15),
          _Box((-1.00, 1.20), (0.25, 0.25), 0.25, 30.0),
          _Box((0.40, -1.40), (0.40, 0.20), 0.10),
          _Box((-1.60, -0.80), (0.20, 0.28), 0.30),
          _Box((2.00, -0.40), (0.16, 0.16), 0.20))


def _boxes():
    return _box_scene("boxes", list(_BOXES))


GAP_X0, GAP_X1, GAP_HALF_LENGTH, GAP_DEPTH = 0.80, 1.20, 2.40, 0.30


def _gap():
    # ground slabs (top at 0) around the trench; the floor plane below is the trench bottom
    big = 12.0
    slabs = [_Box((0.5 * (-big + GAP_X0), 0.0), (0.5 * (GAP_X0 + big), big), 0.0),
             _Box((0.5 * (GAP_X1 + big), 0.0), (0.5 * (big - GAP_X1), big), 0.0),
             _Box((0.5 * (GAP_X0 + GAP_X1), 0.5 * (GAP_HALF_LENGTH + big)),
                  (0.5 * (GAP_X1 - GAP_X0), 0.5 * (big - GAP_HALF_LENGTH)), 0.0),
             _Box((0.5 * (GAP_X0 + GAP_X1), -0.5 * (GAP_HALF_LENGTH + big)),
                  (0.5 * (GAP_X1 - GAP_X0), 0.5 * (big - GAP_HALF_LENGTH)), 0.0)]
    scene = _box_scene("gap", slabs, floor_z=-GAP_DEPTH,
                       info=(("gap_x", (GAP_X0, GAP_X1)), ("gap_depth", GAP_DEPTH)))
    # outside the slabs (|x|, |y| > 12 m) the floor: the closed form says so too
    return scene


WALL_X0, WALL_X1, WALL_HALF_LENGTH, WALL_HEIGHT = 1.60, 1.80, 1.52, 0.50


def _wall():
    wall = _Box((0.5 * (WALL_X0 + WALL_X1), 0.0), (0.5 * (WALL_X1 - WALL_X0), WALL_HALF_LENGTH), WALL_HEIGHT)
    return _box_scene("wall", [wall], info=(("wall_x", (WALL_X0, WALL_X1)), ("wall_height", WALL_HEIGHT)))


_MIXED_PRODUCT = (0.025, 2 * math.pi / 3.0, 2 * math.pi / 2.6, 0.0)
_MIXED_WAVES = ((0.015, 2 * math.pi / 1.9, -2 * math.pi / 1.9, 0.7),)
RAMP_Y0, RAMP_Y1, RAMP_RISE = 1.0, 2.0, 0.12
_MIXED_BOXES = (_Box((-1.20, -0.80), (0.28, 0.24), 0.20),
                _Box((1.80, -1.00), (0.60, 0.60), 0.15))


def _mixed():
    ripples, bound = _ripples(_MIXED_PRODUCT, _MIXED_WAVES)

    def surface(x, y):
        u = np.clip((y - RAMP_Y0) / (RAMP_Y1 - RAMP_Y0), 0.0, 1.0)
        return ripples(x, y) + RAMP_RISE * u * u * (3.0 - 2.0 * u)

    # the ramp's smoothstep: |d2/dy2| <= 6 rise / length^2
    bound = bound + 6.0 * RAMP_RISE / (RAMP_Y1 - RAMP_Y0) ** 2
    low = -(_MIXED_PRODUCT[0] + sum(w[0] for w in _MIXED_WAVES)) - 0.05
    extra = [(b.xml(f"box{i}", low), b) for i, b in enumerate(_MIXED_BOXES)]
    return _hfield_scene("mixed", surface, bound, extra_geoms=extra)


_BUILDERS = {"flat": _flat, "slope": _slope, "rough": _rough, "steps": _steps, "boxes": _boxes,
             "gap": _gap, "wall": _wall, "mixed": _mixed}
_CACHE: dict = {}


def load_scene(name: str) -> TerrainScene:
    """One of :data:`SCENES` (built once per process and cached)."""
    if name not in _BUILDERS:
        raise CaliperError(f"terrain scene: unknown scene {name!r} (choose from {', '.join(SCENES)})")
    if name not in _CACHE:
        _CACHE[name] = _BUILDERS[name]()
    return _CACHE[name]


__all__ = ["SCENES", "TerrainScene", "load_scene", "default_pose"]

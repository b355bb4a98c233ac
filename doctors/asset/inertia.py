"""Uniform-density mass properties: primitives in closed form, closed meshes by volume integrals.

Every result is a :class:`MassProperties` whose inertia is taken about the centre of mass and
expressed in the frame the geometry is given in; :func:`placed` moves it through an origin and
:func:`combine` sums several bodies with the parallel-axis theorem.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from doctors.asset.meshes import merge


@dataclass(frozen=True)
class MassProperties:
    mass: float
    com: np.ndarray  # (3,)
    inertia: np.ndarray  # (3, 3) about the centre of mass


def _checked(mass: float, com: np.ndarray, inertia: np.ndarray) -> MassProperties:
    if not (math.isfinite(mass) and mass > 0 and np.all(np.isfinite(com)) and np.all(np.isfinite(inertia))):
        raise ValueError("geometry has no finite positive volume")
    return MassProperties(float(mass), com, inertia)


def box(size: Sequence[float], density: float) -> MassProperties:
    x, y, z = size
    mass = density * x * y * z
    return _checked(mass, np.zeros(3), mass / 12.0 * np.diag([y * y + z * z, x * x + z * z, x * x + y * y]))


def cylinder(radius: float, length: float, density: float) -> MassProperties:
    """Solid cylinder along Z."""
    mass = density * math.pi * radius * radius * length
    side = mass * (3.0 * radius * radius + length * length) / 12.0
    return _checked(mass, np.zeros(3), np.diag([side, side, mass * radius * radius / 2.0]))


def sphere(radius: float, density: float) -> MassProperties:
    mass = density * 4.0 / 3.0 * math.pi * radius**3
    return _checked(mass, np.zeros(3), np.eye(3) * 0.4 * mass * radius * radius)


def is_closed(triangles: np.ndarray) -> bool:
    """Every edge shared by exactly two faces, traversed once in each direction."""
    faces = merge(triangles)[1]
    faces = faces[(faces[:, 0] != faces[:, 1]) & (faces[:, 1] != faces[:, 2]) & (faces[:, 0] != faces[:, 2])]
    if len(faces) == 0:
        return False
    directed = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    _, counts = np.unique(np.sort(directed, axis=1), axis=0, return_counts=True)
    return bool(np.all(counts == 2)) and len(np.unique(directed, axis=0)) == len(directed)


def closed_mesh(triangles: np.ndarray, density: float) -> MassProperties:
    """Mass properties of the solid a closed triangle surface bounds (signed tetrahedra).

    Each face and the origin span a tetrahedron; its signed volume and second moment
    ``det/120 * (aa' + bb' + cc' + ss')`` (s = a + b + c) sum to the solid's. Inverted winding is
    accepted (the signs flip together); an open surface raises ValueError.
    """
    if not is_closed(triangles):
        raise ValueError("mesh is not a closed surface, its volume is undefined")
    shift = triangles.reshape(-1, 3).mean(axis=0)
    a, b, c = np.moveaxis(triangles - shift, 1, 0)
    det = np.einsum("ij,ij->i", a, np.cross(b, c))
    volume = det.sum() / 6.0
    if volume < 0:
        det, volume = -det, -volume
    if not volume > 0:
        raise ValueError("mesh encloses no volume")
    s = a + b + c
    com = (det[:, None] * s).sum(axis=0) / (24.0 * volume)
    second = sum(np.einsum("i,ij,ik->jk", det, v, v) for v in (a, b, c, s)) / 120.0
    mass = density * volume
    covariance = density * second - mass * np.outer(com, com)
    return _checked(mass, com + shift, np.trace(covariance) * np.eye(3) - covariance)


def rpy_matrix(rpy: Sequence[float]) -> np.ndarray:
    """URDF fixed-axis roll-pitch-yaw: R = Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def placed(props: MassProperties, xyz: Sequence[float], rpy: Sequence[float]) -> MassProperties:
    """``props`` given in a child frame, expressed in the parent frame of origin (xyz, rpy)."""
    rot = rpy_matrix(rpy)
    return MassProperties(props.mass, rot @ props.com + np.asarray(xyz, dtype=float),
                          rot @ props.inertia @ rot.T)


def combine(parts: Sequence[MassProperties]) -> MassProperties:
    """One body from several (same frame), moving each inertia to the common COM."""
    mass = sum(p.mass for p in parts)
    com = sum(p.mass * p.com for p in parts) / mass
    inertia = np.zeros((3, 3))
    for p in parts:
        d = p.com - com
        inertia += p.inertia + p.mass * (d @ d * np.eye(3) - np.outer(d, d))
    return _checked(mass, com, inertia)

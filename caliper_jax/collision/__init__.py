"""Collision: colliders from a model's collision geometry, world obstacles, exact signed distances
(closed forms, GJK/EPA) with normals and witnesses, a conservative sphere approximation, and the
T008/T009 trajectory lint.

One pure-JAX core (``query``: one configuration, differentiable, batch with ``vmap``) and its
batched NumPy face (``api``: jitted, re-exported here), host-side builders (``geometry``,
``scene``, ``spheres``, ``srdf``).
"""
from caliper_jax.collision.api import (
    SphereFilter,
    check,
    collision_flags,
    contacts,
    distances,
    filtered_in_collision,
    in_collision,
    pairwise,
)
from caliper_jax.collision.geometry import (
    KINDS,
    Collider,
    Uncovered,
    box,
    capsule,
    ground,
    halfspace,
    parse_box,
    parse_sphere,
    robot_colliders,
    sphere,
)
from caliper_jax.collision.lint import lint_collision, lint_trajectory
from caliper_jax.collision.pairs import Contact, signed_distance
from caliper_jax.collision.scene import (
    CollisionModel,
    build_collision_model,
    build_sphere_model,
    colliders_of,
    describe,
    with_obstacles,
)
from caliper_jax.collision.spheres import SphereFit, sphere_colliders
from caliper_jax.collision.srdf import read_disabled_pairs
from caliper_jax.collision.support import Shape

__all__ = [
    "KINDS",
    "Collider",
    "CollisionModel",
    "Contact",
    "Shape",
    "SphereFilter",
    "SphereFit",
    "Uncovered",
    "box",
    "build_collision_model",
    "build_sphere_model",
    "capsule",
    "check",
    "colliders_of",
    "collision_flags",
    "contacts",
    "describe",
    "distances",
    "filtered_in_collision",
    "ground",
    "halfspace",
    "in_collision",
    "lint_collision",
    "lint_trajectory",
    "pairwise",
    "parse_box",
    "parse_sphere",
    "read_disabled_pairs",
    "robot_colliders",
    "signed_distance",
    "sphere",
    "sphere_colliders",
    "with_obstacles",
]

"""A batched ray engine in JAX: ray casts against a MuJoCo model's geoms (height fields included:
``caliper_jax.rays.hfield``), pinhole cameras (depth, segmentation, normals, shaded RGB), depth noise
and LiDAR patterns.

One implementation serves every ray sensor (``mjx_backend.sensors`` is a face over it). See
``docs/rays.md`` for frames, conventions and parity/benchmark figures.
"""
from caliper_jax.rays.camera import (
    PinholeCamera,
    camera_pose,
    cameras_from_mujoco,
    poses,
    render,
    render_worlds,
)
from caliper_jax.rays.cast import Hits, cast_rays
from caliper_jax.rays.lidar import grid_pattern, scan, spinning_pattern, spiral_pattern
from caliper_jax.rays.mesh import BVH, build_bvh
from caliper_jax.rays.noise import noisy_depth, noisy_frame
from caliper_jax.rays.scene import RayScene, make_scene, scene_from_mujoco

__all__ = ["BVH", "Hits", "PinholeCamera", "RayScene", "build_bvh", "camera_pose", "cameras_from_mujoco",
           "cast_rays", "grid_pattern", "make_scene", "noisy_depth", "noisy_frame", "poses", "render",
           "render_worlds", "scan", "scene_from_mujoco", "spinning_pattern", "spiral_pattern"]

"""Host-side robot description readers (NumPy only; no JAX import).

``read_urdf`` / ``read_mjcf`` return a :class:`RobotDescription`; ``caliper_jax.model.build_model``
turns one into the pytree ``Model``.
"""
from caliper_jax.io.description import Body, Frame, Geom, RobotDescription
from caliper_jax.io.meshpath import resolve_mesh
from caliper_jax.io.urdf import read_urdf, read_urdf_string

__all__ = ["Body", "Frame", "Geom", "RobotDescription", "read_urdf", "read_urdf_string", "resolve_mesh"]

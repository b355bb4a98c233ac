"""CHOMP-style trajectory optimisation: smoothness + sphere-approximation obstacle hinge,
Adam in JAX, joint limits by projection, batched over problems and initialisations."""
from caliper_jax.trajopt.api import TrajoptResult, solve_batch, trajopt
from caliper_jax.trajopt.chomp import (
    ChompOptions,
    cost,
    hinge,
    initial_paths,
    obstacle,
    optimize,
    smoothness,
    straight_line,
)

__all__ = ["ChompOptions", "TrajoptResult", "cost", "hinge", "initial_paths", "obstacle", "optimize",
           "smoothness", "solve_batch", "straight_line", "trajopt"]

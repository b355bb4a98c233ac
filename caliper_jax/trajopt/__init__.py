"""Trajectory optimisation: CHOMP (kinematic, covariant), direct multiple shooting over the native
dynamics (:mod:`~caliper_jax.trajopt.dynamic`) and open-loop controls through MJX contact
(:mod:`~caliper_jax.trajopt.contact`); batched over problems and initialisations."""
from caliper_jax.trajopt.api import TrajoptResult, solve_batch, trajopt
from caliper_jax.trajopt.auglag import ALOptions
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
from caliper_jax.trajopt.contact import ContactEvaluator, ContactResult, trajopt_contact
from caliper_jax.trajopt.dynamic import DynamicOptions, DynamicResult, trajopt_dynamic
from caliper_jax.trajopt.path_timing import time_optimal

__all__ = ["ALOptions", "ContactEvaluator", "ContactResult", "trajopt_contact",
           "DynamicOptions", "DynamicResult", "time_optimal", "trajopt_dynamic",
           "ChompOptions", "TrajoptResult", "cost", "hinge", "initial_paths", "obstacle", "optimize",
           "smoothness", "solve_batch", "straight_line", "trajopt"]

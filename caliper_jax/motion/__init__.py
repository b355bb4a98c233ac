"""Motion: jerk-limited S-curves, MOVE_J, waypoint retiming and time-optimal path parameterisation.

Every function here is pure JAX over arrays: no ``jit`` inside, batch with ``vmap``, precision
follows the inputs. :class:`MotionLimits` is validated on the host.
"""
from caliper_jax.motion.limits import MotionLimits
from caliper_jax.motion.reachability import (
    PathConstraints,
    ToppRAResult,
    acceleration_constraints,
    joint_limit_constraints,
    joint_rows,
    stack_constraints,
    topp_ra,
    topp_ra_spline,
    velocity_constraints,
)
from caliper_jax.motion.scurve import (
    ProfileState,
    SCurve,
    scurve_duration,
    scurve_fixed_time,
    scurve_min_time,
    scurve_sample,
)
from caliper_jax.motion.spline import CubicSpline, PathSamples, cubic_spline, spline_eval
from caliper_jax.motion.topp_linear import LinearPathTrajectory, topp_piecewise_linear
from caliper_jax.motion.trajectory import (
    MotionSample,
    SampledRows,
    Trajectory,
    move_j,
    retime_waypoints,
    synchronized_profiles,
    uniform_times,
)

#: The spec's name for the bang-bang corner-stop parameterisation of a waypoint path.
topp = topp_piecewise_linear

__all__ = [
    "CubicSpline",
    "LinearPathTrajectory",
    "MotionLimits",
    "MotionSample",
    "PathConstraints",
    "PathSamples",
    "ProfileState",
    "SCurve",
    "SampledRows",
    "ToppRAResult",
    "Trajectory",
    "acceleration_constraints",
    "cubic_spline",
    "joint_limit_constraints",
    "joint_rows",
    "move_j",
    "retime_waypoints",
    "scurve_duration",
    "scurve_fixed_time",
    "scurve_min_time",
    "scurve_sample",
    "spline_eval",
    "stack_constraints",
    "synchronized_profiles",
    "topp",
    "topp_piecewise_linear",
    "topp_ra",
    "topp_ra_spline",
    "uniform_times",
    "velocity_constraints",
]

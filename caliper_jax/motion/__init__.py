"""Motion: jerk-limited S-curves, MOVE_J/L/C, waypoint retiming, time-optimal path
parameterisation (joint and torque limits), and the model-aware trajectory lint.

The joint-space pieces are pure JAX over arrays: no ``jit`` inside, batch with ``vmap``,
precision follows the inputs. :class:`MotionLimits` is validated on the host. The model-aware
faces (``move_l``, ``move_c``, ``topp_torque``, ``path_metrics``, ``lint_model_path``) take and
return NumPy and jit internally, like ``caliper_jax.api``.
"""
from caliper_jax.motion.cartesian import (
    CartesianMove,
    CartesianReport,
    Discontinuity,
    SplineTrajectory,
    follow_path,
    move_c,
    move_l,
    spline_trajectory,
    track_poses,
)
from caliper_jax.motion.cartesian_path import (
    CartesianLimits,
    PosePath,
    arc_path,
    cartesian_time_law,
    line_path,
    path_pose,
)
from caliper_jax.motion.limits import MotionLimits
from caliper_jax.motion.path_metrics import PathMetrics, lint_model_path, path_metrics, singularity_measures
from caliper_jax.motion.reachability import (
    PathConstraints,
    ToppRAResult,
    acceleration_constraints,
    interpolate_constraints,
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
from caliper_jax.motion.torque import (
    TorqueTopp,
    dense_torques,
    path_torques,
    topp_ra_torque,
    topp_torque,
    torque_coefficients,
    torque_constraints,
)
from caliper_jax.motion.trajectory import (
    MotionSample,
    SampledRows,
    Trajectory,
    move_j,
    retime_waypoints,
    sample_at,
    synchronized_profiles,
    uniform_times,
)

#: The spec's name for the bang-bang corner-stop parameterisation of a waypoint path.
topp = topp_piecewise_linear

__all__ = [
    "CartesianLimits",
    "CartesianMove",
    "CartesianReport",
    "CubicSpline",
    "Discontinuity",
    "LinearPathTrajectory",
    "MotionLimits",
    "MotionSample",
    "PathConstraints",
    "PathMetrics",
    "PathSamples",
    "PosePath",
    "ProfileState",
    "SCurve",
    "SampledRows",
    "SplineTrajectory",
    "ToppRAResult",
    "TorqueTopp",
    "Trajectory",
    "acceleration_constraints",
    "arc_path",
    "cartesian_time_law",
    "cubic_spline",
    "dense_torques",
    "follow_path",
    "interpolate_constraints",
    "joint_limit_constraints",
    "joint_rows",
    "line_path",
    "lint_model_path",
    "move_c",
    "move_j",
    "move_l",
    "path_metrics",
    "path_pose",
    "path_torques",
    "retime_waypoints",
    "sample_at",
    "scurve_duration",
    "scurve_fixed_time",
    "scurve_min_time",
    "scurve_sample",
    "singularity_measures",
    "spline_eval",
    "spline_trajectory",
    "stack_constraints",
    "synchronized_profiles",
    "topp",
    "topp_piecewise_linear",
    "topp_ra",
    "topp_ra_spline",
    "topp_ra_torque",
    "topp_torque",
    "torque_coefficients",
    "torque_constraints",
    "track_poses",
    "uniform_times",
    "velocity_constraints",
]

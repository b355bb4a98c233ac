"""Calibration and identification over the differentiable Model: joint offsets, kinematic
parameters (joint placements and rotations) from pose observations, and inertial parameters from
joint-space torque samples. All three are damped Gauss-Newton fits with exact Jacobians from
``jax.jacfwd`` through the forward kinematics / inverse dynamics.
"""
from caliper_jax.calibration.dynamic import (
    PARAM_NAMES,
    DynamicIdentification,
    identify_dynamics,
    inertial_parameters,
    regressor,
    torque_residuals,
    with_inertial_parameters,
)
from caliper_jax.calibration.kinematic import KinematicCalibration, calibrate_kinematics
from caliper_jax.calibration.offsets import OffsetCalibration, calibrate_joint_offsets, pose_residual
from caliper_jax.calibration.solver import LSQResult, identifiable, least_squares

__all__ = [
    "PARAM_NAMES", "DynamicIdentification", "identify_dynamics", "inertial_parameters", "regressor",
    "torque_residuals", "with_inertial_parameters", "KinematicCalibration", "calibrate_kinematics",
    "OffsetCalibration", "calibrate_joint_offsets", "pose_residual", "LSQResult", "identifiable",
    "least_squares",
]

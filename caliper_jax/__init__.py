"""caliper_jax: a JAX-native, differentiable, vectorized robotics stack for serial arms.

Public names are loaded lazily so that JAX-free parts (``caliper_jax.dataset``,
``caliper_jax.errors``) can be imported without importing JAX.
"""
from __future__ import annotations

from caliper_jax.lazy import LazyExports

__version__ = "0.1.0"
_lazy = LazyExports(__name__, globals(), subpackages=("ik",))
_export = _lazy.add


_export(".errors", "CaliperError", "ModelError")
_export(".loading", "load", "read_description")
_export(".model", "Model", "build_model", "model_in_axes", "stack_models")
_export(".configuration", "neutral", "random_configuration", "integrate_pos", "difference_pos",
        "normalize", "expand_q", "expand_v")
_export(".kinematics", "forward_kinematics", "frame_placements", "frame_pose", "body_poses",
        "frame_jacobian", "frame_jacobians", "frame_velocity", "frame_acceleration")
_export(".dynamics", "rnea", "inverse_dynamics", "crba", "mass_matrix", "aba", "forward_dynamics",
        "forward_dynamics_cholesky", "bias_forces", "gravity_torques", "kinetic_energy",
        "potential_energy", "total_energy", "center_of_mass", "solve_spd")
_export(".integrators", "step", "simulate")
_export(".single", "single_call", "SingleCall")
_export(".control", "ControlLoop", "ControlParams", "SafetyParams", "Setpoint", "control_params",
        "safety_params", "computed_torque")
_export(".backend.native", "NativeBackend")
_export(".ik", "ik_position", "analytic_ik", "analyze", "IKOptions", "IKSolution")
_export(".motion", "MotionLimits", "CartesianLimits", "move_j", "move_l", "move_c", "retime_waypoints",
        "topp", "topp_ra_spline", "topp_torque", "path_metrics", "lint_model_path")
_export(".calibration", "calibrate_joint_offsets", "calibrate_kinematics", "identify_dynamics")
_export(".compile_cache", "enable_compile_cache")


# ``ik`` is the package ``caliper_jax.ik``, which is callable (``cj.ik(model, T)`` is
# ``caliper_jax.ik.ik(model, T)``): exporting the bare function under the subpackage's name made
# ``cj.ik`` the function or the module depending on import order, so it is a subpackage export.
__getattr__, __dir__ = _lazy.getattr, _lazy.dir

"""Asset doctor: diagnose URDF / xacro files (A001-A019) and write mechanically repaired copies.

NumPy only (trimesh, when installed, reads extra mesh formats); never imports JAX.
"""
from doctors.asset.checks import diagnose
from doctors.asset.repair import FIXES, RepairResult, repair
from doctors.asset.report import Finding, Report

__all__ = ["FIXES", "Finding", "RepairResult", "Report", "diagnose", "repair"]

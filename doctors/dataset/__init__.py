"""Dataset doctor for LeRobotDataset v3.0 (NumPy + pyarrow, no JAX): D001-D021, report, guard()."""

from doctors.dataset.doctor import DatasetNotReady, diagnose, guard
from doctors.dataset.findings import DoctorOptions, Finding
from doctors.dataset.report import Report
from doctors.dataset.rules import RULES

__all__ = ["DatasetNotReady", "DoctorOptions", "Finding", "RULES", "Report", "diagnose", "guard"]

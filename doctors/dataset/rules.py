"""The dataset doctor's codes: default severity and fix hint of each, and the Finding factory."""

from __future__ import annotations

from doctors.dataset.findings import Finding

RULES: dict[str, tuple[str, str, str]] = {
    # code: (default severity, title, fix hint)
    "D001": (
        "Warning",
        "dead dof",
        "check the sensor/joint wiring; drop the dof or make it move in the demos",
    ),
    "D002": (
        "Error",
        "stale or missing stats.json",
        "recompute meta/stats.json from the data (any caliper edit op rewrites it)",
    ),
    "D003": ("Warning", "saturated action dof", "check teleop gains and command clipping"),
    "D004": ("Warning", "echo action labels", "train on delta or one-step-shifted action targets"),
    "D005": ("Warning", "numerically tiny actions", "check the action units against the state units"),
    "D006": (
        "Warning",
        "contradictory demonstrations",
        "delete the wrong demo, or condition the policy on the context that separates them",
    ),
    "D007": ("Info", "coverage holes", "record episodes that visit the empty part of the range"),
    "D008": ("Info", "corridor-shaped data", "vary starts, goals and speeds across episodes"),
    "D009": ("Info", "episode-length outlier", "review the episode; split or delete it if the take is bad"),
    "D010": ("Warning", "irregular timestamps", "record at exact k/fps timestamps"),
    "D011": (
        "Warning",
        "frozen tail",
        "split at the last moving frame and delete the remainder (caliper data split/delete)",
    ),
    "D012": ("Warning", "dead camera", "check the camera; delete the affected episodes"),
    "D013": ("Info", "duplicated camera frames", "record the camera at the dataset fps or lower the fps"),
    "D014": ("Info", "brightness drift", "lock exposure and white balance"),
    "D015": ("Warning", "duplicate episodes", "delete the duplicate (caliper data delete)"),
    "D016": ("Error", "non-finite values", "repair or delete the poisoned episodes (caliper data delete)"),
    "D017": ("Warning", "encoder wrap-around", "unwrap the angle (numpy.unwrap) before training"),
    "D018": ("Warning", "action/state units disagree", "convert action and state to the same unit"),
    "D019": (
        "Error",
        "metadata disagrees with files",
        "rewrite the dataset through a caliper edit op or re-record it",
    ),
    "D020": (
        "Warning",
        "episode shorter than the policy window",
        "lower the policy's chunk/window size or drop the short episodes",
    ),
    "D021": ("Info", "video not checked",
             'pip install "caliper-jax[video]" (PyAV) to let the doctor decode video features'),
}


def finding(code: str, message: str, severity: str | None = None, **where) -> Finding:
    default, _, hint = RULES[code]
    return Finding(code=code, severity=severity or default, message=message, hint=hint, **where)

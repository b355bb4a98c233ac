"""Finding records, severities and the doctor's tunable thresholds (defaults from the reference)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

SEVERITY_ORDER = {"Error": 0, "Warning": 1, "Info": 2}


@dataclass(frozen=True)
class Finding:
    """One diagnosis: stable code, severity, one-line message, fix hint, where (episode/frame/feature)."""

    code: str
    severity: str
    message: str
    hint: str
    episode: int | None = None
    frame: int | None = None
    feature: str | None = None
    dof: int | None = None
    value: float | None = None

    def sort_key(self) -> tuple:
        return (
            SEVERITY_ORDER[self.severity],
            self.code,
            -1 if self.episode is None else self.episode,
            -1 if self.frame is None else self.frame,
            self.feature or "",
            -1 if self.dof is None else self.dof,
        )

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class DoctorOptions:
    """Thresholds; the defaults make a healthy teleop dataset report zero findings."""

    state_key: str = "observation.state"
    action_key: str = "action"
    seed: int = 0
    dead_std: float = 1e-8  # D001
    stats_atol: float = 1e-6  # D002
    stats_rtol: float = 1e-4
    saturation_fraction: float = 0.5  # D003
    histogram_bins: int = 20  # D003, D007, summaries
    echo_ratio: float = 0.05  # D004
    tiny_action_ratio: float = 0.01  # D005
    reservoir_size: int = 256  # D006
    contradiction_state: float = 0.1
    contradiction_action: float = 1.5
    contradiction_max_pairs: int = 3
    coverage_min: float = 0.5  # D007
    corridor_correlation: float = 0.95  # D008
    corridor_max_dim: int = 32
    length_z: float = 4.0  # D009
    dt_tolerance: float = 0.05  # D010
    frozen_tail: int = 5  # D011
    camera_sample: int = 32  # D012/D014: decoded frames per episode and camera
    dark_level: float = 10.0 / 255  # D012 black/white/constant on [0, 1]
    constant_std: float = 2.0 / 255
    duplicate_frames: float = 0.25  # D013
    brightness_drift: float = 0.25  # D014
    duplicate_max_pairs: int = 8  # D015
    wrap_fraction: float = 0.75  # D017: a jump of >= this fraction of a full turn
    units_tolerance: float = 0.2  # D018: range ratio within 20% of 180/pi
    policy_window: int | None = None  # D020: skipped unless set
    skip: frozenset = field(default_factory=frozenset)  # codes to leave out

"""Contact-stability lint C001-C003 over a settle rollout.

A scene is held under a constant command for ``settle`` seconds (1.0), then observed for
``observe`` seconds (0.5) on the CPU MuJoCo backend, one world, one MuJoCo step per sample:
- C001 explosion (Error): a non-finite state (MuJoCo's instability reset counts), a speed above
  100 (any MuJoCo dof, robot or prop) after settling, or the energy proxy 0.5 * sum(qd^2)
  growing more than 25x from the first half of the observe window to the second (with the
  second half above 0.1). C001 suppresses the other two.
- C002 penetration (Warning): the deepest contact exceeds 5 mm on at least 80% of observed steps.
- C003 jitter (Warning): the peak-to-peak of the total contact normal force exceeds 0.5x its mean,
  judged only when that mean is at least 0.5 N.
Every finding states the measured value and a concrete fix. :func:`lint_record` is pure NumPy
over a :class:`SettleRecord`, so recorded rollouts from anywhere can be linted.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from caliper_jax.errors import CaliperError

SETTLE_S, OBSERVE_S = 1.0, 0.5
MAX_SPEED, ENERGY_GROWTH, ENERGY_FLOOR = 100.0, 25.0, 0.1
DEPTH_M, DEPTH_FRACTION = 0.005, 0.8
JITTER_RATIO, JITTER_MIN_MEAN_N = 0.5, 0.5


@dataclass(frozen=True)
class ContactFinding:
    code: str
    severity: str      # "error" | "warning"
    message: str
    fix: str
    value: float       # the measured quantity the rule compared

    def as_dict(self) -> dict:
        return {"code": self.code, "severity": self.severity, "message": self.message, "fix": self.fix,
                "value": self.value}


@dataclass(frozen=True)
class SettleRecord:
    """Samples of the observe window (one per MuJoCo step) plus whether anything went
    non-finite during the whole rollout."""

    timestep: float
    qvel: np.ndarray          # (T, mj nv) every MuJoCo dof
    max_depth: np.ndarray     # (T,) deepest contact penetration, m (0 without contact)
    normal_force: np.ndarray  # (T,) total contact normal force, N
    finite: bool = True
    unstable_at: float | None = None  # time of the first non-finite state


def lint_record(rec: SettleRecord) -> list[ContactFinding]:
    """C001-C003 over a settle record."""
    if not rec.finite:
        when = f" at t = {rec.unstable_at:.3f} s" if rec.unstable_at is not None else ""
        return [ContactFinding("C001", "error", f"explosion: the state went non-finite{when}",
                               _fix_c001(rec.timestep), float("nan"))]
    qvel = np.asarray(rec.qvel, dtype=np.float64)
    if qvel.size == 0:
        raise CaliperError("lint: the settle record has no observed samples")
    speed = float(np.max(np.abs(qvel)))
    if speed > MAX_SPEED:
        return [ContactFinding("C001", "error", f"explosion: speed {speed:.3g} > {MAX_SPEED:g} after "
                               "settling", _fix_c001(rec.timestep), speed)]
    energy = 0.5 * np.sum(qvel * qvel, axis=1)
    half = len(energy) // 2
    first, second = float(np.mean(energy[:half])) if half else 0.0, float(np.mean(energy[half:]))
    if second > ENERGY_FLOOR and second > ENERGY_GROWTH * first:
        growth = second / first if first > 0 else float("inf")
        return [ContactFinding("C001", "error", f"explosion: kinetic-energy proxy grew {growth:.3g}x within "
                               f"the observe window (to {second:.3g})", _fix_c001(rec.timestep), growth)]
    findings = []
    depth = np.asarray(rec.max_depth, dtype=np.float64)
    deep = float(np.mean(depth > DEPTH_M))
    if deep >= DEPTH_FRACTION:
        findings.append(ContactFinding(
            "C002", "warning", f"penetration: contacts deeper than {DEPTH_M * 1e3:g} mm on {deep:.0%} of "
            f"observed steps (median {np.median(depth) * 1e3:.3g} mm)",
            "stiffen the contact: a smaller solref timeconst (not below 2x the timestep), solimp dmin/dmax "
            "closer to 1 (material 'rigid' or 'steel'), or a lighter prop on a soft material", deep))
    force = np.asarray(rec.normal_force, dtype=np.float64)
    mean = float(np.mean(force))
    if mean >= JITTER_MIN_MEAN_N:
        p2p = float(np.ptp(force))
        if p2p > JITTER_RATIO * mean:
            findings.append(ContactFinding(
                "C003", "warning", f"jitter: total normal force swings {p2p:.3g} N peak to peak around "
                f"a mean of {mean:.3g} N ({p2p / mean:.2g}x)",
                "damp what excites it: a servo pressing into the contact (lower kv/kp, or "
                "integrator='implicitfast' for servo damping), the contact itself (solref dampratio >= 1, "
                "timeconst >= 2x the timestep), or a smaller timestep", p2p / mean))
    return findings


def _fix_c001(timestep: float) -> str:
    return (f"halve the timestep (now {timestep:g} s) or use integrator='implicitfast'; check for tiny "
            "inertias next to stiff contacts, add joint damping, and lower servo gains")


def settle(backend, command=None, settle_s: float = SETTLE_S, observe_s: float = OBSERVE_S) -> SettleRecord:
    """Run a one-world CPU backend (fresh from ``reset()``) under a constant ``command`` (None:
    zero torque, or hold the reset pose with servos) and record the observe window."""
    import mujoco

    from mjx_backend.cpu import MujocoBackend

    if not isinstance(backend, MujocoBackend) or backend.use_rollout:
        raise CaliperError("settle(): needs a one-world MujocoBackend (rollout=False)")
    h = backend.timestep
    n_settle, n_obs = int(round(settle_s / h)), int(round(observe_s / h))
    backend.enable()
    if command is not None:
        backend.command(command)
    m, d = backend._model(0), backend._data
    qvel, depth, force = [], [], []
    f6 = np.zeros(6)
    for k in range(n_settle + n_obs):
        try:
            backend.step(h)
        except CaliperError:
            return SettleRecord(h, np.zeros((0, m.nv)), np.zeros(0), np.zeros(0), finite=False,
                                unstable_at=(k + 1) * h)
        if k < n_settle:
            continue
        qvel.append(np.array(d.qvel))
        dmax, ftot = 0.0, 0.0
        for i in range(d.ncon):
            dmax = max(dmax, -float(d.contact[i].dist))
            mujoco.mj_contactForce(m, d, i, f6)
            ftot += float(f6[0])
        depth.append(dmax)
        force.append(ftot)
    return SettleRecord(h, np.array(qvel), np.array(depth), np.array(force))


def contact_lint(scene, *, q0=None, command=None, settle_s: float = SETTLE_S, observe_s: float = OBSERVE_S,
                 **scene_kwargs) -> list[ContactFinding]:
    """Settle ``scene`` (a CompiledScene, or a Model with scene keywords) and lint it."""
    from mjx_backend.cpu import MujocoBackend

    with MujocoBackend(scene, 1, q0=q0, rollout=False, **scene_kwargs) as backend:
        return lint_record(settle(backend, command, settle_s, observe_s))


__all__ = ["ContactFinding", "SettleRecord", "contact_lint", "lint_record", "settle"]

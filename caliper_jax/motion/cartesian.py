"""Cartesian moves: MOVE_L (line or screw) and MOVE_C (arc) of a tool frame, through IK.

Recipe (defaults from the spec): the tool path (``cartesian_path``) is timed by one S-curve of
its parameter under the Cartesian caps, sampled every ``dt`` (0.01 s; the grid is made uniform:
ceil(T/dt) equal intervals), and IK is solved at every sample warm-started from the previous
sample's answer -- one ``lax.scan`` over the samples, ``CHUNK`` samples per compiled call, so a
path of any length reuses one compile. The tracking solver is the numerical IK with a single
restart and no stall re-draws: a random restart in the middle of a path is a jump, never a fix.

Then, on the joint samples:

* a sample whose IK did not converge is an IK failure (the path leaves the workspace or hits a
  limit); consecutive samples whose joints differ by more than ``max_jump`` (0.5 rad) are a
  discontinuity (a branch flip, typically at a singularity). With ``strict`` (default) either
  raises a CaliperError; otherwise they are listed in the report;
* a clamped cubic spline through the samples in time gives q, qd, qdd at any instant (rest at
  both ends); if a joint's speed (at the samples and midway between them) exceeds its vmax, the
  whole time axis is stretched once by the worst ratio, so every speed ends at or below its limit.

``move_l`` / ``move_c`` take and return NumPy (poses 4x4 row-major ``T_world_frame``); the
trajectory they return is a JAX pytree that samples at any time like the joint-space ones.
"""
from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax import limits as budgets
from caliper_jax.errors import CaliperError
from caliper_jax.ik import api as ik_api
from caliper_jax.ik import numerical
from caliper_jax.model import Model
from caliper_jax.motion.cartesian_path import (
    CartesianLimits,
    PosePath,
    arc_path,
    cartesian_time_law,
    line_path,
    path_pose,
)
from caliper_jax.motion.limits import MotionLimits
from caliper_jax.motion.scurve import SCurve, scurve_sample
from caliper_jax.motion.spline import CubicSpline, cubic_spline, spline_eval
from caliper_jax.motion.trajectory import MotionSample, SampledRows, grid_rows, uniform_rows
from caliper_jax.spatial import homogeneous

Array = jnp.ndarray

#: Default sample period of the IK along the path (s).
DEFAULT_DT = 0.01
#: Largest allowed change of one joint between consecutive samples (rad or m).
MAX_JUMP = 0.5
#: Samples per compiled tracking call (the last chunk is padded with the final pose).
CHUNK = 64
#: The tracking solver: one restart (the warm start), no stall re-draws.
TRACK_OPTIONS = numerical.IKOptions(restarts=1, stall_iters=numerical.IKOptions().max_iters + 1)


# ---- the joint-space trajectory through the IK samples --------------------------------------------

class SplineTrajectory(NamedTuple):
    """A clamped cubic spline in time through joint samples (rest at both ends).

    ``spline.knots`` are the sample times (from 0), ``spline.coeffs`` (N - 1, 4, ndof). Samples
    like :class:`~caliper_jax.motion.Trajectory`: ``sample(t)``, ``grid(n)``, ``sample_uniform(dt)``."""

    spline: CubicSpline

    @property
    def t_start(self) -> Array:
        return self.spline.knots[..., :1]

    @property
    def duration(self) -> Array:
        return self.spline.knots[..., -1]

    @property
    def ndof(self) -> int:
        return self.spline.coeffs.shape[-1]

    def sample(self, t) -> MotionSample:
        """State at time(s) ``t``; before 0 and after the end the state is at rest."""
        knots = self.spline.knots
        t = jnp.asarray(t, dtype=knots.dtype)
        st = spline_eval(self.spline, t)
        i = jnp.clip(jnp.searchsorted(knots, t, side="right") - 1, 0, knots.shape[0] - 2)
        moving = ((t > knots[0]) & (t < knots[-1]))[..., None]
        jerk = 6.0 * self.spline.coeffs[i, 3]
        zero = jnp.zeros_like(st.q)
        return MotionSample(st.q, jnp.where(moving, st.qs, zero), jnp.where(moving, st.qss, zero),
                            jnp.where(moving, jerk, zero))

    grid = grid_rows
    sample_uniform = uniform_rows


def spline_trajectory(times, q) -> SplineTrajectory:
    """The clamped (zero end velocity) cubic spline through ``q`` (N, ndof) at ``times`` (N,)."""
    return SplineTrajectory(cubic_spline(q, knots=times, bc="clamped"))


def _bucket(n: int) -> int:
    """Padded size for host-sized arrays: a power of two, at least CHUNK (bounds recompiles)."""
    return max(CHUNK, 1 << max(n - 1, 1).bit_length())


@jax.jit
def _padded_spline(times, q, n):
    """The clamped spline through the first ``n`` of padded samples, and each joint's largest
    speed at those samples and midway between them."""
    traj = SplineTrajectory(cubic_spline(q, knots=times, bc="clamped", valid=n))
    mid = 0.5 * (times[1:] + times[:-1])
    idx = jnp.arange(times.shape[0])
    at_knots = jnp.where((idx < n)[:, None], traj.sample(times).qd, 0.0)
    at_mids = jnp.where((idx[:-1] < n - 1)[:, None], traj.sample(mid).qd, 0.0)
    return traj.spline.coeffs, jnp.max(jnp.abs(jnp.concatenate([at_knots, at_mids])), axis=0)


def _build_spline(times: np.ndarray, q: np.ndarray, dtype):
    """Host side: (SplineTrajectory, max |qd| per joint) with one compile per size bucket."""
    n = times.shape[0]
    size = _bucket(n)
    step = times[-1] - times[-2]
    times_p = np.concatenate([times, times[-1] + step * np.arange(1, size - n + 1)])
    q_p = np.concatenate([q, np.repeat(q[-1:], size - n, axis=0)])
    coeffs, speeds = _padded_spline(jnp.asarray(times_p, dtype), jnp.asarray(q_p, dtype), n)
    spline = CubicSpline(jnp.asarray(times, dtype), coeffs[:n - 1])
    return SplineTrajectory(spline), np.asarray(speeds, np.float64)


_sample_law = jax.jit(scurve_sample)
_time_law = jax.jit(cartesian_time_law)


def _law_at(law: SCurve, times: np.ndarray):
    """(u, du/dt) of the time law at host times (NumPy), padded to a bucket."""
    n = times.shape[0]
    padded = np.concatenate([times, np.full(_bucket(n) - n, times[-1])])
    st = _sample_law(law, jnp.asarray(padded, law.distance.dtype))
    return np.asarray(st.p, np.float64)[:n], np.asarray(st.v, np.float64)[:n]


# ---- IK along the path --------------------------------------------------------------------------------

def track_poses(model: Model, targets, q0, key, weights=None, *, frame: int,
                opts: numerical.IKOptions = TRACK_OPTIONS):
    """IK at each target (N, 4, 4) in turn, each warm-started from the previous answer (the first
    from ``q0``): one ``lax.scan``. Returns (last q, ``IKResult`` with a leading (N,) axis)."""
    def step(q, T):
        res = numerical.solve(model, T, q, key, None, None, weights, frame=frame, opts=opts)
        return res.q, res

    return jax.lax.scan(step, jnp.asarray(q0, model.dtype), targets)


@lru_cache(maxsize=None)
def _track_fn(frame: int, opts: numerical.IKOptions):
    def run(model, path, u, q0, key, weights):
        R, p = path_pose(path, u)
        targets = homogeneous(R, p)
        _, res = track_poses(model, targets, q0, key, weights, frame=frame, opts=opts)
        return res, targets

    return jax.jit(run)


def _track(model, path, u, q0, weights, frame, opts):
    """Host loop over CHUNK-sized scans (one compile for any path length): (IKResult, targets)
    as NumPy with a leading (N,) axis."""
    fn = _track_fn(frame, opts)
    jm = ik_api.jit_model(model)
    key = jax.random.PRNGKey(0)
    n = u.shape[0]
    q = jnp.asarray(q0, model.dtype)
    parts = []
    for i in range(0, n, CHUNK):
        chunk = u[i:i + CHUNK]
        padded = np.concatenate([chunk, np.full(CHUNK - chunk.shape[0], chunk[-1])])
        out = fn(jm, path, jnp.asarray(padded, model.dtype), q, key, weights)
        out = jax.tree_util.tree_map(lambda x, m=chunk.shape[0]: np.asarray(x)[:m], out)
        q = jnp.asarray(out[0].q[-1])
        parts.append(out)
    return jax.tree_util.tree_map(lambda *xs: np.concatenate(xs), *parts)


# ---- report -----------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Discontinuity:
    """Joint ``joint`` changes by ``jump`` between samples ``sample - 1`` and ``sample``."""

    sample: int
    time: float
    joint: int
    jump: float


@dataclasses.dataclass(frozen=True)
class CartesianReport:
    """What happened along a Cartesian move (times after the stretch)."""

    kind: str
    frame: str
    n_samples: int
    dt: float
    path_length: float          # m, of the tool origin
    path_angle: float           # rad
    nominal_duration: float     # s, from the Cartesian time law
    duration: float             # s, after the velocity stretch
    stretch: float              # >= 1
    stretch_joint: int | None   # the joint that set it (None: no stretch)
    velocity_ratio: float       # worst max |qd| / vmax before the stretch
    ik_failures: tuple          # sample indices whose IK did not converge
    max_pos_residual: float
    max_rot_residual: float
    discontinuities: tuple      # Discontinuity, one per (sample, joint) above max_jump
    max_jump: float
    max_jump_limit: float
    via_time: float | None      # MOVE_C: when the tool passes the via point

    @property
    def ok(self) -> bool:
        return not self.ik_failures and not self.discontinuities

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["ik_failures"] = list(self.ik_failures)
        out["discontinuities"] = [dataclasses.asdict(d) for d in self.discontinuities]
        out["ok"] = self.ok
        return out


class CartesianMove(NamedTuple):
    """Result of ``move_l`` / ``move_c``: the trajectory (JAX pytree, samples at any time), the IK
    samples as NumPy -- ``times`` (N,), ``q`` (N, nq), ``poses`` (N, 4, 4) the tool targets,
    ``u`` (N,) the path parameter -- the ``path`` and time ``law`` (nominal time), the report."""

    trajectory: SplineTrajectory
    times: np.ndarray
    q: np.ndarray
    poses: np.ndarray
    u: np.ndarray
    path: PosePath
    law: SCurve
    report: CartesianReport

    def rows(self, dt: float = DEFAULT_DT) -> SampledRows:
        """(times, q, qd, qdd) every ``dt`` seconds, as NumPy."""
        return SampledRows(*(np.asarray(x) for x in self.trajectory.sample_uniform(dt)))


def _time_of(law: SCurve, u_target: float) -> float:
    """The instant at which the time law reaches ``u_target`` (bisection on a grid + Newton)."""
    T = float(law.duration)
    ts = np.linspace(0.0, T, 2049)
    us, _ = _law_at(law, ts)
    k = int(np.clip(np.searchsorted(us, u_target), 1, ts.size - 1))
    t = np.array([np.interp(u_target, us[k - 1:k + 1], ts[k - 1:k + 1])])
    for _ in range(3):
        u, v = _law_at(law, t)
        if v[0] <= 0.0:
            break
        t = np.clip(t - (u - u_target) / v, 0.0, T)
    return float(t[0])


# ---- the move ----------------------------------------------------------------------------------------

def _q_vector(model: Model, q_start) -> np.ndarray:
    q = np.asarray(q_start, dtype=np.float64)
    if q.shape != (model.nq,) or not np.all(np.isfinite(q)):
        raise CaliperError(f"q_start: expected {model.nq} finite values for {model.name!r}, "
                           f"got shape {q.shape}")
    return q


def _start_q(model: Model, q_start, limits: MotionLimits) -> np.ndarray:
    q0 = _q_vector(model, q_start)
    tol = 1e-9
    bad = (q0 < limits.lower - tol) | (q0 > limits.upper + tol)
    if np.any(bad):
        j = int(np.flatnonzero(bad)[0])
        raise CaliperError(f"q_start: coordinate {j} = {q0[j]:.6g} is outside its limits "
                           f"[{limits.lower[j]:.6g}, {limits.upper[j]:.6g}]")
    return np.clip(q0, limits.lower, limits.upper)


def _check_dt(dt, max_jump):
    for name, x in (("dt", dt), ("max_jump", max_jump)):
        if not (isinstance(x, (int, float, np.floating)) and np.isfinite(x) and x > 0):
            raise CaliperError(f"{name} must be > 0 and finite, got {x!r}")


def follow_path(model: Model, q_start, path: PosePath, *, kind: str, frame=None,
                limits: MotionLimits | None = None, cartesian: CartesianLimits | None = None,
                dt: float = DEFAULT_DT, max_jump: float = MAX_JUMP, position_only: bool = False,
                strict: bool = True, options: numerical.IKOptions | None = None) -> CartesianMove:
    """Time ``path`` with the Cartesian law, track it by IK from ``q_start`` and build the joint
    trajectory (see the module notes). ``frame`` defaults to the tool frame."""
    _check_dt(dt, max_jump)
    cart = (cartesian or CartesianLimits()).checked()
    frame_idx, frame_name = ik_api.resolve_frame(model, frame)
    limits = MotionLimits.from_model(model) if limits is None else limits
    if limits.ndof != model.nv:
        raise CaliperError(f"limits: expected {model.nv} dofs for {model.name!r}, got {limits.ndof}")
    q0 = _start_q(model, q_start, limits)
    opts = options or TRACK_OPTIONS
    dtype = model.dtype
    path = jax.tree_util.tree_map(lambda x: x if x.dtype == bool else x.astype(dtype), path)
    angle = 0.0 if position_only else float(path.angle)
    law = _time_law(jnp.asarray(path.length, dtype), jnp.asarray(angle, dtype), cart)
    nominal = float(law.duration)    # the IK samples are checked against the budget before any is solved
    budgets.check("steps", np.ceil(nominal / dt) + 1, f"{kind} dt={dt:g} s over {nominal:.4g} s (IK samples)")
    n_int = max(1, int(np.ceil(nominal / dt - 1e-9)))
    times = np.linspace(0.0, nominal, n_int + 1)
    u = np.clip(_law_at(law, times)[0], 0.0, 1.0)
    u[-1] = 1.0
    weights = jnp.asarray([1.0] * 3 + [0.0 if position_only else 1.0] * 3, dtype)
    res, poses = _track(model, path, u, q0, weights, frame_idx, opts)
    q = res.q.astype(np.float64)

    failures = tuple(int(k) for k in np.flatnonzero(~res.success))
    steps = np.abs(np.diff(np.concatenate([q0[None], q]), axis=0))
    jumps = tuple(Discontinuity(int(k), float(times[k]), int(j), float(steps[k, j]))
                  for k, j in zip(*np.nonzero(steps > max_jump), strict=True))
    if strict and failures:
        k = failures[0]
        raise CaliperError(
            f"{kind}: IK did not converge at {len(failures)} of {len(times)} samples (first at "
            f"t={times[k]:.3f} s, residual {res.pos_residual[k]:.3g} m / {res.rot_residual[k]:.3g} rad): "
            f"the path leaves the reachable workspace or runs into a joint limit")
    if strict and jumps:
        d = jumps[0]
        raise CaliperError(
            f"{kind}: joint {d.joint} jumps {d.jump:.3g} rad (> {max_jump:g}) at t={d.time:.3f} s (sample "
            f"{d.sample}): the IK switched branches, typically at a singularity; re-pose the start or "
            f"the target")

    traj, speeds = _build_spline(times, q, dtype)
    ratios = np.asarray(speeds, np.float64) / np.asarray(limits.vmax, np.float64)
    worst = int(np.argmax(ratios))
    ratio = float(ratios[worst])
    stretch = max(ratio, 1.0)
    if ratio > 1.0:
        times = times * ratio
        traj, _ = _build_spline(times, q, dtype)
    via_u = float(path.via_u)
    report = CartesianReport(
        kind=kind, frame=frame_name, n_samples=int(times.size), dt=float(dt), path_length=float(path.length),
        path_angle=angle, nominal_duration=nominal, duration=float(times[-1]), stretch=stretch,
        stretch_joint=worst if ratio > 1.0 else None, velocity_ratio=ratio, ik_failures=failures,
        max_pos_residual=float(np.max(res.pos_residual)), max_rot_residual=float(np.max(res.rot_residual)),
        discontinuities=jumps, max_jump=float(np.max(steps)), max_jump_limit=float(max_jump),
        via_time=None if via_u < 0 else stretch * _time_of(law, via_u))
    return CartesianMove(traj, times, q, poses, u, path, law, report)


def _start_pose(model: Model, q_start, frame_idx: int) -> np.ndarray:
    from caliper_jax import api

    return api.fk(model, _q_vector(model, q_start))[frame_idx]


def _target(target, T0):
    """A 4x4 target, or a point x, y, z (keeps the start orientation)."""
    arr = np.asarray(target, dtype=np.float64)
    if arr.shape == (3,):
        if not np.all(np.isfinite(arr)):
            raise CaliperError("target: non-finite values")
        T = T0.copy()
        T[:3, 3] = arr
        return T
    return arr


def move_l(model: Model, q_start, target, *, frame=None, screw: bool = False, position_only: bool = False,
           **kwargs) -> CartesianMove:
    """MOVE_L: the tool ``frame`` from its pose at ``q_start`` along a straight line (slerped
    orientation; ``screw=True``: the screw motion) to ``target`` -- a 4x4 row-major
    ``T_world_frame``, or x, y, z keeping the start orientation. ``position_only`` leaves the
    orientation free (robots with fewer than 6 dof). Keywords: see :func:`follow_path`."""
    frame_idx, _ = ik_api.resolve_frame(model, frame)
    T0 = _start_pose(model, q_start, frame_idx)
    path = line_path(T0, _target(target, T0), screw=screw, ignore_rotation=position_only, dtype=model.dtype)
    kind = "MOVE_L (screw)" if screw and not position_only else "MOVE_L"
    return follow_path(model, q_start, path, kind=kind, frame=frame_idx, position_only=position_only,
                       **kwargs)


def move_c(model: Model, q_start, via, target, *, frame=None, position_only: bool = False,
           **kwargs) -> CartesianMove:
    """MOVE_C: the tool ``frame`` along the arc of the circle through its start position, ``via``
    (x, y, z or a pose) and ``target`` (pose or x, y, z keeping the start orientation), passing
    the via; the orientation is slerped from start to target. Keywords: see :func:`follow_path`."""
    frame_idx, _ = ik_api.resolve_frame(model, frame)
    T0 = _start_pose(model, q_start, frame_idx)
    path = arc_path(T0, via, _target(target, T0), ignore_rotation=position_only, dtype=model.dtype)
    return follow_path(model, q_start, path, kind="MOVE_C", frame=frame_idx, position_only=position_only,
                       **kwargs)


__all__ = ["DEFAULT_DT", "MAX_JUMP", "CHUNK", "TRACK_OPTIONS", "SplineTrajectory", "spline_trajectory",
           "track_poses", "Discontinuity", "CartesianReport", "CartesianMove", "follow_path", "move_l",
           "move_c"]

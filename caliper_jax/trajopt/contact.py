"""Trajectory optimisation through contact: open-loop controls of an MJX rollout that bring a body
(a pushed prop) to a target position, by Levenberg-Marquardt on a forward-mode Jacobian.

Decision variables: ``knots`` values per actuator, ``u`` (K, nu), linearly interpolated to the
``steps`` control rows (knot k at row ``k (steps - 1) / (K - 1)``). Where an actuator's control is
bounded (its ``ctrlrange`` when ``ctrllimited``, or the ``ctrlrange`` argument) the optimiser
works in ``z`` with ``u = lo + (hi - lo) sigmoid(z)``, so every iterate is inside the range;
unbounded controls are ``u = z``.

Residuals (the cost is 0.5 |r|^2):

* terminal position: ``(xpos_body(T) - target) / tol`` (3,), world frame, m / m;
* with ``rest``: the body's joint velocities at T (linear m/s and angular rad/s alike) / ``vel_tol``;
* smoothness: ``sqrt(w_smooth) (u_{k+1} - u_k)`` and effort ``sqrt(w_effort) u_k`` (ctrl units).

The rollout is :func:`caliper_jax.sysid.rollout.rollout`'s ``mjx.step`` scan. The Jacobian is
``jax.jacfwd`` (one tangent per knot value): reverse mode cannot go through MJX's constraint
solver (a ``lax.while_loop``), and there are few variables. A control sequence that never touches
the body has a zero Jacobian of the position residual (no force, no gradient): start from controls
that make contact (``init``). The cost is only piecewise smooth: a contact switching on brings its
velocity-dependent reference force in at once, so LM can stop on a kink; several starts help
(``init`` (S, K, nu), solved one after the other with the same compiled function, best kept).

The answer is replayed in MuJoCo C (:func:`caliper_jax.sysid.rollout.simulate`), and both final
errors are reported. Precision is JAX's default float when the :class:`ContactEvaluator` is
built (build and solve under ``jax.enable_x64(True)`` for float64). NumPy in, NumPy out.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from caliper_jax.errors import CaliperError

MAX_STEPS = 5000
MAX_KNOTS = 64


@dataclass
class ContactResult:
    """What :func:`trajopt_contact` found. ``knots`` (K, nu) and ``ctrl`` (steps, nu): the best
    controls; ``cost``: 0.5 |r|^2 per accepted LM iteration (best start); ``position`` (3,): final
    body position (world, m) in MJX, ``replay_position`` (3,) in the MuJoCo C replay of ``ctrl``;
    ``error`` / ``replay_error``: their distances to ``target`` (m); ``velocity`` / ``replay_velocity``:
    the body's final joint velocities; ``success``: MJX error <= tol (and |velocity| <= vel_tol when
    ``rest``); ``costs``: final cost per start; ``compile_s`` (0 when the evaluator was reused)
    and ``run_s``: wall seconds."""

    knots: np.ndarray
    ctrl: np.ndarray
    cost: list
    target: np.ndarray
    position: np.ndarray
    replay_position: np.ndarray
    error: float
    replay_error: float
    velocity: np.ndarray
    replay_velocity: np.ndarray
    iterations: int
    success: bool
    compile_s: float
    run_s: float
    costs: list = field(default_factory=list)
    start: int = 0

    def summary(self) -> dict:
        """JSON-ready report (lists and floats)."""
        return {"error": self.error, "replay_error": self.replay_error, "iterations": self.iterations,
                "success": self.success, "cost": [float(c) for c in self.cost],
                "position": self.position.tolist(), "replay_position": self.replay_position.tolist(),
                "target": self.target.tolist(), "compile_s": self.compile_s, "run_s": self.run_s,
                "costs": [float(c) for c in self.costs], "start": self.start}


def _body(mj, body):
    import mujoco

    from caliper_jax.sysid.params import prop_bodies

    if body is None:
        props = prop_bodies(mj)
        if len(props) != 1:
            listed = ", ".join(props) or "none"
            raise CaliperError(f"body: name the body to move (free-floating bodies: {listed})")
        body = next(iter(props))
    b = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_BODY, str(body))
    if b < 0:
        names = [mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_BODY, i) or f"body{i}" for i in range(1, mj.nbody)]
        raise CaliperError(f"body: no body {body!r} (bodies: {', '.join(names)})")
    return str(body), int(b)


def _body_dofs(mj, b) -> np.ndarray:
    """Indices of the dofs of the joints of body ``b`` (its own joints only)."""
    dofs = [d for d in range(mj.nv) if int(mj.dof_bodyid[d]) == b]
    return np.asarray(dofs, dtype=np.int64)


def interpolation(steps: int, knots: int) -> np.ndarray:
    """(steps, knots) matrix W: ``ctrl = W @ u`` linearly interpolates knot k placed at row
    ``k (steps - 1) / (knots - 1)``."""
    t = np.arange(steps, dtype=np.float64)
    pos = np.linspace(0.0, steps - 1.0, knots)
    W = np.zeros((steps, knots))
    for k in range(knots):
        e = np.zeros(knots)
        e[k] = 1.0
        W[:, k] = np.interp(t, pos, e)
    return W


def _bounds(mj, ctrlrange):
    """(lo, hi) (nu,) with +-inf where unbounded."""
    lo, hi = np.full(mj.nu, -np.inf), np.full(mj.nu, np.inf)
    lim = mj.actuator_ctrllimited.astype(bool)
    lo[lim], hi[lim] = mj.actuator_ctrlrange[lim, 0], mj.actuator_ctrlrange[lim, 1]
    if ctrlrange is not None:
        r = np.asarray(ctrlrange, np.float64)
        if r.shape != (mj.nu, 2) or np.isnan(r).any() or not np.all(r[:, 0] < r[:, 1]):
            raise CaliperError(f"ctrlrange: expected ({mj.nu}, 2) rows lo < hi (inf: unbounded), "
                               f"got {r.tolist()}")
        lo, hi = r[:, 0].copy(), r[:, 1].copy()
    bounded = np.isfinite(lo) & np.isfinite(hi)
    if np.any(np.isfinite(lo) != np.isfinite(hi)):
        raise CaliperError("ctrlrange: one-sided bounds are not supported (give both or neither)")
    return lo, hi, bounded


class ContactEvaluator:
    """Compiled residuals and Jacobian of one (scene, body, steps, knots, bounds) problem.

    :meth:`evaluate` ``(z, qpos0, qvel0, target, weights)`` with ``weights`` = (1 / tol, rest
    weight / vel_tol, sqrt(w_smooth), sqrt(w_effort)). Start state, target and weights are traced:
    a new target or start does not recompile. Precision: JAX's default float when built."""

    def __init__(self, mj, *, steps: int, knots: int, body=None, ctrlrange=None):
        import jax
        import jax.numpy as jnp

        from caliper_jax.sysid.rollout import rollout
        from mjx_backend.versions import import_mjx

        mjx = import_mjx()
        self.mj = mj = getattr(mj, "mj", mj)
        steps, knots = _check_sizes(steps, knots)
        self.steps, self.knots = steps, knots
        self.body, self.body_id = _body(mj, body)
        self.dofs = _body_dofs(mj, self.body_id)
        self.lo, self.hi, self.bounded = _bounds(mj, ctrlrange)
        self.dtype = jnp.zeros(()).dtype
        try:
            mx = mjx.put_model(mj)
        except NotImplementedError as exc:
            raise CaliperError(f"MJX cannot run this scene: {exc}") from None
        d0 = mjx.make_data(mx)
        W = jnp.asarray(interpolation(steps, knots), self.dtype)
        lo = jnp.asarray(np.where(self.bounded, self.lo, 0.0), self.dtype)
        span = jnp.asarray(np.where(self.bounded, self.hi - self.lo, 1.0), self.dtype)
        bnd = jnp.asarray(self.bounded)
        b, dofs = self.body_id, jnp.asarray(self.dofs)

        def knots_of(z):                                     # (K, nu)
            return jnp.where(bnd, lo + span * jax.nn.sigmoid(z), z)

        def final(z, qpos0, qvel0):
            ctrl = W @ knots_of(z)
            qp, qv = rollout(mx, d0, qpos0, qvel0, ctrl)
            d = mjx.kinematics(mx, d0.replace(qpos=qp[-1], qvel=qv[-1]))
            return d.xpos[b], qv[-1][dofs]

        def res(z, qpos0, qvel0, target, weights):
            pos, vel = final(z, qpos0, qvel0)
            u = knots_of(z)
            r = jnp.concatenate([(pos - target) * weights[0], vel * weights[1],
                                 (u[1:] - u[:-1]).reshape(-1) * weights[2], u.reshape(-1) * weights[3]])
            return r, (r, pos, vel)

        def res_jac(z, qpos0, qvel0, target, weights):
            J, aux = jax.jacfwd(res, has_aux=True)(z, qpos0, qvel0, target, weights)
            return J, aux

        self.knots_of = knots_of
        self.residual_fn = lambda *a: res(*a)[0]        # pure, for other derivatives
        self._res_jac = jax.jit(res_jac)
        self.compile_s = None
        self.calls = 0

    def _args(self, *arrays):
        return tuple(np.asarray(a, self.dtype) for a in arrays)

    def compile(self, qpos0, qvel0) -> float:
        """Compile (ahead of the first call); seconds spent, 0 when already compiled."""
        if self.compile_s is not None:
            return 0.0
        t0 = time.perf_counter()
        args = self._args(np.zeros((self.knots, self.mj.nu)), qpos0, qvel0, np.zeros(3), np.ones(4))
        self._res_jac = self._res_jac.lower(*args).compile()
        self.compile_s = time.perf_counter() - t0
        return self.compile_s

    def evaluate(self, z, qpos0, qvel0, target, weights):
        """(r (R,), J (R, K nu) = d r / d z, final body position (3,), final body joint velocities),
        float64. Every call is one MJX rollout carrying K nu tangents."""
        self.calls += 1
        J, (r, pos, vel) = self._res_jac(*self._args(z, qpos0, qvel0, target, weights))
        r = np.asarray(r, np.float64)
        return r, np.asarray(J, np.float64).reshape(len(r), -1), np.asarray(pos, np.float64), \
            np.asarray(vel, np.float64)

    def to_z(self, u) -> np.ndarray:
        """Unconstrained variables of knot values (K, nu), strictly inside the bounds."""
        u = np.asarray(u, np.float64)
        z = u.copy()
        for i in np.flatnonzero(self.bounded):
            s = np.clip((u[..., i] - self.lo[i]) / (self.hi[i] - self.lo[i]), 1e-6, 1 - 1e-6)
            z[..., i] = np.log(s) - np.log1p(-s)
        return z

    def to_u(self, z) -> np.ndarray:
        """Knot values (K, nu) of the unconstrained variables (inside the bounds)."""
        z = np.asarray(z, np.float64)
        span = np.where(self.bounded, self.hi - self.lo, 1.0)
        lo = np.where(self.bounded, self.lo, 0.0)
        return np.where(self.bounded, np.clip(lo + span / (1.0 + np.exp(-z)), self.lo, self.hi), z)


def _check_sizes(steps, knots):
    try:
        steps, knots = int(steps), int(knots)
    except (TypeError, ValueError):
        raise CaliperError(f"steps, knots: expected integers, got {steps!r}, {knots!r}") from None
    if not 2 <= steps <= MAX_STEPS:
        raise CaliperError(f"steps: need 2 <= steps <= {MAX_STEPS}, got {steps}")
    if not 2 <= knots <= min(steps, MAX_KNOTS):
        raise CaliperError(f"knots: need 2 <= knots <= min(steps, {MAX_KNOTS}), got {knots}")
    return steps, knots


def _vector(name, a, n):
    a = np.asarray(a, dtype=np.float64)
    if a.shape != (n,):
        raise CaliperError(f"{name}: expected shape ({n},), got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise CaliperError(f"{name}: non-finite values")
    return a


def _final_c(mj, b, dofs, qpos0, qvel0, ctrl):
    import mujoco

    from caliper_jax.sysid.rollout import simulate

    qp, qv = simulate(mj, qpos0, qvel0, ctrl)
    d = mujoco.MjData(mj)
    d.qpos[:] = qp[-1]
    mujoco.mj_kinematics(mj, d)
    return d.xpos[b].copy(), qv[-1][dofs]


def _lm(ev, z, args, iterations, tol_rel):
    """Levenberg-Marquardt (:mod:`caliper_jax.least_squares`) from ``z`` (K, nu): (z, cost history,
    iterations, final position, final body velocities)."""
    from caliper_jax.least_squares import levenberg_marquardt

    shape = z.shape

    def evaluate(flat):
        r, J, pos, vel = ev.evaluate(flat.reshape(shape), *args)
        return r, J, (pos, vel)

    out = levenberg_marquardt(evaluate, z, iterations=iterations, tol_rel=tol_rel, step_tol=1e-10,
                              diverged="trajopt_contact: non-finite residuals or "
                              "Jacobian (the MJX rollout diverged)")
    return out.z.reshape(shape), out.cost, out.iterations, *out.aux


def trajopt_contact(mj, qpos0, qvel0, target, *, steps: int = 120, knots: int = 6, body=None,
                    init=None, ctrlrange=None, tol: float = 2e-3, rest: bool = False, vel_tol: float = 0.05,
                    w_smooth: float = 1.0, w_effort: float = 0.0, iterations: int = 30, rel_tol: float = 1e-8,
                    evaluator: ContactEvaluator | None = None) -> ContactResult:
    """Open-loop controls (``knots`` per actuator, interpolated to ``steps`` rows of
    ``mj.opt.timestep``) that bring ``body``'s origin to ``target`` (3,) (world, m) at the end of
    an MJX rollout from ``qpos0`` (nq,), ``qvel0`` (nv,) of the MjModel ``mj``.

    ``body``: body name (default: the model's only free-floating body); ``init``: (K, nu) or
    (S, K, nu) starting knot values (default: zeros, or mid-range where bounded; it must make contact
    to give a gradient); ``ctrlrange``: (nu, 2) bounds overriding the model's (inf: unbounded);
    ``tol``: position tolerance (m), the residual's unit and the success gate; ``rest``: also drive
    the body's joint velocities to zero (unit ``vel_tol``); ``w_smooth`` / ``w_effort``: weights of
    the knot differences / values (ctrl units, relative to (error / tol)^2); ``iterations``: LM cap per
    start; ``evaluator``: a :class:`ContactEvaluator` to reuse (same steps, knots, body, bounds)."""
    mj = getattr(mj, "mj", mj)
    steps, knots = _check_sizes(steps, knots)
    qpos0 = _vector("qpos0", qpos0, mj.nq)
    qvel0 = _vector("qvel0", qvel0, mj.nv)
    target = _vector("target", target, 3)
    for name, v in (("tol", tol), ("vel_tol", vel_tol)):
        if not (np.isfinite(v) and v > 0):
            raise CaliperError(f"{name}: need a finite value > 0, got {v}")
    for name, v in (("w_smooth", w_smooth), ("w_effort", w_effort)):
        if not (np.isfinite(v) and v >= 0):
            raise CaliperError(f"{name}: need a finite weight >= 0, got {v}")
    if int(iterations) < 0:
        raise CaliperError(f"iterations: need >= 0, got {iterations}")
    name, b = _body(mj, body)
    dofs = _body_dofs(mj, b)
    if rest and len(dofs) == 0:
        raise CaliperError(f"rest: body {name!r} has no joints of its own (nothing to bring to rest)")
    if init is not None:
        starts = np.asarray(init, np.float64)
        if starts.ndim == 2:
            starts = starts[None]
        if starts.ndim != 3 or starts.shape[1:] != (knots, mj.nu) or len(starts) < 1:
            raise CaliperError(f"init: expected shape ({knots}, {mj.nu}) or (starts, {knots}, {mj.nu}), "
                               f"got {np.shape(init)}")
        if not np.all(np.isfinite(starts)):
            raise CaliperError("init: non-finite values")
    if evaluator is None:
        evaluator = ContactEvaluator(mj, steps=steps, knots=knots, body=name, ctrlrange=ctrlrange)
    else:
        lo, hi, _ = _bounds(mj, ctrlrange)
        ev = evaluator
        same = ev.mj is mj and (ev.steps, ev.knots, ev.body_id) == (steps, knots, b)
        if not (same and np.array_equal(lo, ev.lo) and np.array_equal(hi, ev.hi)):
            raise CaliperError("evaluator: built for another model, steps, knots, body or ctrlrange")
    ev = evaluator
    if init is None:
        mid = 0.5 * (np.where(ev.bounded, ev.lo, 0.0) + np.where(ev.bounded, ev.hi, 0.0))
        starts = np.broadcast_to(np.where(ev.bounded, mid, 0.0), (1, knots, mj.nu)).copy()
    weights = np.array([1.0 / tol, (1.0 / vel_tol) if rest else 0.0, np.sqrt(w_smooth), np.sqrt(w_effort)])
    args = (qpos0, qvel0, target, weights)
    compile_s = ev.compile(qpos0, qvel0)
    t0 = time.perf_counter()
    best = None
    costs = []
    for s, u in enumerate(starts):
        out = _lm(ev, ev.to_z(u), args, int(iterations), rel_tol)
        costs.append(out[1][-1])
        if best is None or out[1][-1] < best[1][-1]:
            best = out + (s,)
    z, cost, it, pos, vel, s = best
    run_s = time.perf_counter() - t0
    u = ev.to_u(z)
    ctrl = interpolation(steps, knots) @ u
    rpos, rvel = _final_c(mj, b, dofs, qpos0, qvel0, ctrl)
    err = float(np.linalg.norm(pos - target))
    ok = err <= tol and (not rest or float(np.linalg.norm(vel)) <= vel_tol)
    return ContactResult(knots=u, ctrl=ctrl, cost=cost, target=target, position=pos, replay_position=rpos,
                         error=err, replay_error=float(np.linalg.norm(rpos - target)), velocity=vel,
                         replay_velocity=rvel, iterations=it, success=bool(ok), compile_s=compile_s,
                         run_s=run_s, costs=costs, start=s)


__all__ = ["ContactEvaluator", "ContactResult", "interpolation", "trajopt_contact"]

"""System identification through contact: Levenberg-Marquardt on chunked MJX rollout residuals.

The unknowns are a :class:`~caliper_jax.sysid.params.ParamSet` (named, bounded scalars written
into the ``mjx.Model``). The residuals are the shooting errors of :mod:`caliper_jax.sysid.rollout`
(every chunk restarts from the recorded state), each feature divided by its spread in the training
episodes. The Jacobian comes from forward mode (``jax.jacfwd``, one tangent per parameter) w.r.t.
the parameter *values*; reverse mode cannot go through MJX's constraint solver (a
``lax.while_loop`` unless ``opt.iterations == 1``; see ``benchmarks/bench_sysid.py``). The
optimiser works in the bounded reparameterisation ``z`` (log-sigmoid, see
:mod:`caliper_jax.sysid.params`) with the chain rule applied on the host.

One compiled function per (scene, parameter set, chunk length, block size): segments go through
it in fixed-size blocks (the last padded), so the training split, the validation split and every
LM trial reuse it. Episodes are split into training and validation by an explicit PRNG key.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from caliper_jax.errors import CaliperError
from caliper_jax.least_squares import levenberg_marquardt
from caliper_jax.sysid.params import ParamSet, param_set
from caliper_jax.sysid.rollout import Chunks, Trajectories, check_trajectories, make_chunks

POS_FLOOR = 1e-2
VEL_FLOOR = 1e-1


def feature_names(mj) -> tuple:
    """Names of the nq + nv state features: ``qpos:<joint>[.x|.y|.z|.qw|.qx|.qy|.qz]`` then
    ``qvel:<joint>[.vx|.vy|.vz|.wx|.wy|.wz]`` (free joints) or ``[.w?]`` for ball joints."""
    import mujoco

    mj = getattr(mj, "mj", mj)
    qn, vn = [], []
    for j in range(mj.njnt):
        name = mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_JOINT, j) or f"joint{j}"
        t = int(mj.jnt_type[j])
        if t == int(mujoco.mjtJoint.mjJNT_FREE):
            qn += [f"qpos:{name}.{s}" for s in ("x", "y", "z", "qw", "qx", "qy", "qz")]
            vn += [f"qvel:{name}.{s}" for s in ("vx", "vy", "vz", "wx", "wy", "wz")]
        elif t == int(mujoco.mjtJoint.mjJNT_BALL):
            qn += [f"qpos:{name}.{s}" for s in ("qw", "qx", "qy", "qz")]
            vn += [f"qvel:{name}.{s}" for s in ("wx", "wy", "wz")]
        else:
            qn.append(f"qpos:{name}")
            vn.append(f"qvel:{name}")
    return tuple(qn + vn)


class Evaluator:
    """Residuals and their Jacobian w.r.t. the parameter values, through chunked MJX rollouts.

    ``mj``: compiled MjModel (or CompiledScene); ``params``: ParamSet; ``chunk``: steps per
    shooting segment; ``block``: segments per compiled call. Precision: JAX's default float when
    built (build under ``jax.enable_x64(True)`` for float64)."""

    def __init__(self, mj, params: ParamSet, chunk: int, block: int = 8):
        import jax

        from mjx_backend.versions import import_mjx

        mjx = import_mjx()
        from caliper_jax.sysid.rollout import residuals

        self.mj = getattr(mj, "mj", mj)
        self.params, self.chunk, self.block = params, int(chunk), int(block)
        if self.block < 1:
            raise CaliperError(f"block: need >= 1 segments per call, got {block}")
        try:
            mx = mjx.put_model(self.mj)
        except NotImplementedError as exc:
            raise CaliperError(f"MJX cannot run this scene: {exc}") from None
        d0 = mjx.make_data(mx)
        self.dtype = jax.numpy.zeros(()).dtype

        def res(values, ch, scale):
            return residuals(params.apply(mx, values), d0, ch, scale)

        def res_jac(values, ch, scale):
            r = res(values, ch, scale)
            return r, jax.jacfwd(res)(values, ch, scale)

        self.residual_fn = res         # pure (values, chunks, scale) -> (R,), for other derivatives
        self._res = jax.jit(res)
        self._res_jac = jax.jit(res_jac)
        self.calls = 0

    def _blocks(self, chunks: Chunks):
        S, B = chunks.qpos0.shape[0], self.block
        for s in range(0, S, B):
            n = min(B, S - s)
            idx = np.r_[np.arange(s, s + n), np.full(B - n, s + n - 1)]
            yield n, Chunks(*(np.asarray(a[idx], self.dtype) for a in chunks))

    def residuals(self, values, chunks: Chunks, scale, jacobian: bool = False):
        """(R,) scaled residuals of all segments (and (R, P) d residual / d values if asked)."""
        v = np.asarray(values, self.dtype)
        sc = np.asarray(scale, self.dtype)
        rs, js = [], []
        per = self.chunk * (self.mj.nq + self.mj.nv)
        for n, blk in self._blocks(chunks):
            self.calls += 1
            if jacobian:
                r, J = self._res_jac(v, blk, sc)
                js.append(np.asarray(J, np.float64)[: n * per])
            else:
                r = self._res(v, blk, sc)
            rs.append(np.asarray(r, np.float64)[: n * per])
        r = np.concatenate(rs)
        return (r, np.concatenate(js)) if jacobian else r

    def rmse(self, values, chunks: Chunks, scale) -> np.ndarray:
        """(nq + nv,) RMSE per state feature (unscaled units) over all segments."""
        r = self.residuals(values, chunks, scale).reshape(-1, self.mj.nq + self.mj.nv) * scale
        return np.sqrt(np.mean(r ** 2, axis=0))


@dataclass
class SysIdResult:
    """What :func:`identify` found. ``values``/``start``/``nominal``: (P,) in ``names`` order;
    ``rmse``: {"train"|"validation": {"before"|"after": {feature: RMSE}}}; ``cost``: 0.5 |r|^2
    (scaled residuals) per accepted iteration; ``sensitivity``: (P,) norm of d r / d log(value)
    at the solution (how strongly the data see a relative change of each parameter)."""

    names: tuple
    values: np.ndarray
    start: np.ndarray
    nominal: np.ndarray
    bounds: np.ndarray
    train_episodes: np.ndarray
    validation_episodes: np.ndarray
    rmse: dict
    cost: list
    iterations: int
    converged: bool
    sensitivity: np.ndarray
    chunk: int
    features: tuple = field(default=())

    def summary(self) -> dict:
        """JSON-ready report (lists and floats)."""
        def agg(split, when):
            d = self.rmse.get(split, {}).get(when)
            return None if d is None else float(np.sqrt(np.mean(np.square(list(d.values())))))

        return {
            "parameters": {n: {"value": float(v), "start": float(s), "nominal": float(m),
                               "bounds": [float(b[0]), float(b[1])], "sensitivity": float(k)}
                           for n, v, s, m, b, k in zip(self.names, self.values, self.start, self.nominal,
                                                       self.bounds, self.sensitivity, strict=True)},
            "rmse": self.rmse,
            "rmse_all_features": {sp: {w: agg(sp, w) for w in ("before", "after")} for sp in self.rmse},
            "cost": [float(c) for c in self.cost], "iterations": self.iterations, "converged": self.converged,
            "chunk": self.chunk, "train_episodes": [int(e) for e in self.train_episodes],
            "validation_episodes": [int(e) for e in self.validation_episodes],
        }


def split_episodes(key, episodes: int, validation: float) -> tuple:
    """(train, validation) episode indices: a permutation drawn from ``key``; ``validation`` is the
    fraction held out (at least one episode when 0 < validation and there are >= 2 episodes)."""
    import jax

    if not 0.0 <= validation < 1.0:
        raise CaliperError(f"--validation: need a fraction in [0, 1), got {validation}")
    perm = np.asarray(jax.random.permutation(key, episodes))
    nval = int(round(validation * episodes))
    if validation > 0 and episodes >= 2:
        nval = max(1, nval)
    nval = min(nval, episodes - 1)
    return np.sort(perm[nval:]), np.sort(perm[:nval])


def feature_scale(mj, data: Trajectories, episodes) -> np.ndarray:
    """(nq + nv,) residual scale of each state feature: its spread over ``episodes`` of ``data``,
    floored at 1 cm (or 0.01 rad / quaternion unit) and 0.1 m/s (rad/s), so that near-constant
    features (a resting prop's height, its tilt) do not dominate the fit through tiny, non-smooth
    contact effects."""
    states = np.concatenate([data.qpos[episodes], data.qvel[episodes]], axis=-1).reshape(-1, mj.nq + mj.nv)
    floor = np.r_[np.full(mj.nq, POS_FLOOR), np.full(mj.nv, VEL_FLOOR)]
    return np.maximum(states.std(axis=0), floor)


def _dvdz(ps: ParamSet, z):
    lo = np.log([p.lo for p in ps.params])
    hi = np.log([p.hi for p in ps.params])
    s = 1.0 / (1.0 + np.exp(-z))
    v = np.exp(lo + (hi - lo) * s)
    return v, v * (hi - lo) * s * (1.0 - s)


def identify(mj, data, params, *, start=None, chunk: int = 25, validation: float = 0.25, key=None,
             iterations: int = 30, block: int = 8, bounds=None, evaluator: Evaluator | None = None,
             tol: float = 1e-9, fit=None) -> SysIdResult:
    """Identify ``params`` of the scene ``mj`` (compiled MjModel or CompiledScene) from ``data``
    (a :class:`Trajectories`, or a dict / npz with ``qpos`` (E, T+1, nq), ``qvel`` (E, T+1, nv),
    ``ctrl`` (E, T, nu)).

    ``params``: kinds / names (``"friction,damping"``) or a ParamSet; ``start``: (P,) initial
    values (default: the model's nominal values); ``chunk``: shooting segment length in steps;
    ``validation``: fraction of episodes held out (split by ``key``, default ``PRNGKey(0)``);
    ``iterations``: LM iteration cap; ``fit``: names of the parameters to fit (default all; the
    others stay at their start values). Returns a :class:`SysIdResult` with before/after RMSE per
    feature on both splits."""
    import jax

    mj = getattr(mj, "mj", mj)
    ps = params if isinstance(params, ParamSet) else param_set(mj, params, bounds)
    if not isinstance(data, Trajectories):
        get = data.get if hasattr(data, "get") else (lambda k: data[k] if k in data else None)
        data = check_trajectories(mj, get("qpos"), get("qvel"), get("ctrl"))
    if iterations < 0:
        raise CaliperError(f"--iterations: need >= 0, got {iterations}")
    key = jax.random.PRNGKey(0) if key is None else key
    tr_idx, va_idx = split_episodes(key, data.episodes, validation)
    train = make_chunks(data.take(tr_idx), chunk)
    val = make_chunks(data.take(va_idx), chunk) if len(va_idx) else None
    scale = feature_scale(mj, data, tr_idx)
    ev = evaluator or Evaluator(mj, ps, chunk, block)
    if ev.params is not ps and ev.params.names != ps.names:
        raise CaliperError("identify: the evaluator was built for other parameters")
    free = np.ones(len(ps), bool)
    if fit is not None:
        fit = [fit] if isinstance(fit, str) else list(fit)
        unknown = [n for n in fit if n not in ps.names]
        if unknown:
            raise CaliperError(f"--fit: {', '.join(unknown)} not among the parameters "
                               f"({', '.join(ps.names)})")
        free = np.array([n in fit for n in ps.names])
    v0 = ps.nominal if start is None else np.asarray(start, np.float64).reshape(-1)
    start_v, _ = _dvdz(ps, ps.to_z(v0))
    mask = free.astype(np.float64)

    def evaluate(z):
        v, dv = _dvdz(ps, z)
        r, Jv = ev.residuals(v, train, scale, jacobian=True)
        return r, Jv * (dv * mask)[None], (v, Jv)

    fit_out = levenberg_marquardt(evaluate, ps.to_z(v0), iterations=iterations, tol_rel=tol, step_tol=1e-8,
                                  diverged="identify: non-finite Jacobian (the rollout diverged; "
                                  "shorten --chunk)")
    v, Jv = fit_out.aux
    cost, it, converged = fit_out.cost, fit_out.iterations, fit_out.converged
    feats = feature_names(mj)
    rmse = {"train": {"before": dict(zip(feats, ev.rmse(start_v, train, scale).tolist(), strict=True)),
                      "after": dict(zip(feats, ev.rmse(v, train, scale).tolist(), strict=True))}}
    if val is not None:
        rmse["validation"] = {"before": dict(zip(feats, ev.rmse(start_v, val, scale).tolist(), strict=True)),
                              "after": dict(zip(feats, ev.rmse(v, val, scale).tolist(), strict=True))}
    sens = np.linalg.norm(Jv * v[None], axis=0)
    return SysIdResult(names=ps.names, values=v, start=start_v, nominal=ps.nominal,
                       bounds=np.array([[p.lo, p.hi] for p in ps.params]), train_episodes=tr_idx,
                       validation_episodes=va_idx, rmse=rmse, cost=cost, iterations=it, converged=converged,
                       sensitivity=sens, chunk=int(chunk), features=feats)


def load_trajectories(path, mj) -> Trajectories:
    """Trajectories from an ``.npz`` with arrays ``qpos``, ``qvel``, ``ctrl`` (see
    :func:`caliper_jax.sysid.rollout.check_trajectories` for shapes); errors name the file."""
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise CaliperError(f"{p}: no such file (expected an .npz with qpos, qvel, ctrl)")
    from caliper_jax.io.npz import load_npz

    arrs = load_npz(p, str(p), keys=("qpos", "qvel", "ctrl"))   # declared shapes within the budget first
    return check_trajectories(mj, arrs.get("qpos"), arrs.get("qvel"), arrs.get("ctrl"), what=str(p))


def planted_dataset(mj, params, values, *, episodes: int | None = None, steps: int | None = None, key=None,
                    amplitude: float = 1.0, offset=None, knots: int = 4, qpos0=None, ctrl=None,
                    engine: str = "mujoco") -> Trajectories:
    """Episodes simulated with ``params`` set to ``values`` (the planted truth), from rest.

    Controls: ``ctrl`` (E, T, nu) if given (then ``episodes``/``steps``/``key`` are not needed),
    else random smooth servo targets (:func:`caliper_jax.sysid.scenes.excite`, one key per
    episode). ``qpos0``: (nq,) or (E, nq) start positions (default ``mj.qpos0``). ``engine``:
    ``"mujoco"`` (MuJoCo C, the default) or ``"mjx"`` (MJX in JAX's default float: the engine the
    fit itself runs, so a recovery from its data is not limited by MJX-vs-C differences)."""
    import jax

    from caliper_jax.sysid.rollout import simulate
    from caliper_jax.sysid.scenes import excite

    mj = getattr(mj, "mj", mj)
    ps = params if isinstance(params, ParamSet) else param_set(mj, params)
    if engine not in ("mujoco", "mjx"):
        raise CaliperError(f"engine: expected 'mujoco' or 'mjx', got {engine!r}")
    if ctrl is None:
        if episodes is None or steps is None or key is None:
            raise CaliperError("planted_dataset: give ctrl (episodes, steps, nu), or episodes, steps and key")
        cs = np.stack([excite(k, mj, steps, knots=knots, amplitude=amplitude, offset=offset)
                       for k in jax.random.split(key, episodes)])
    else:
        cs = np.asarray(ctrl, np.float64)
        if cs.ndim != 3 or cs.shape[2] != mj.nu or cs.shape[1] < 1:
            raise CaliperError(f"ctrl: expected shape (episodes, steps, {mj.nu}), got {cs.shape}")
    E = cs.shape[0]
    q0 = np.broadcast_to(mj.qpos0 if qpos0 is None else np.asarray(qpos0, np.float64), (E, mj.nq)).copy()
    v0 = np.zeros((E, mj.nv))
    if engine == "mjx":
        from caliper_jax.sysid.rollout import rollout
        from mjx_backend.versions import import_mjx

        mjx = import_mjx()
        mx = ps.apply(mjx.put_model(mj), jax.numpy.asarray(values, jax.numpy.zeros(()).dtype))
        d0 = mjx.make_data(mx)
        qp, qv = jax.jit(jax.vmap(lambda q, v, c: rollout(mx, d0, q, v, c)))(q0, v0, cs)
        return Trajectories(np.concatenate([q0[:, None], np.asarray(qp, np.float64)], axis=1),
                            np.concatenate([v0[:, None], np.asarray(qv, np.float64)], axis=1), cs)
    truth = ps.apply_mj(mj, values)
    qp, qv = zip(*(simulate(truth, q0[e], v0[e], cs[e]) for e in range(E)), strict=True)
    return Trajectories(np.stack(qp), np.stack(qv), cs)


__all__ = ["Evaluator", "SysIdResult", "feature_names", "feature_scale", "identify", "load_trajectories",
           "planted_dataset", "split_episodes"]

"""CHOMP-style trajectory optimisation (pure JAX: differentiable, vmappable, no jit inside).

A path is ``n`` waypoints from a fixed ``start`` to a fixed ``goal``; only the interior moves.

    cost(path) = w_smooth * smoothness(path) + w_obstacle * obstacle(path)

* smoothness: squared finite-difference accelerations ``(q[i-1] - 2 q[i] + q[i+1]) (n - 1)^2``
  summed over the interior and multiplied by the step ``1 / (n - 1)`` -- a Riemann sum of the
  integral of the squared acceleration on a unit time interval, so the weight does not depend on
  ``n``.
* obstacle: the CHOMP hinge potential of every sphere-pair signed distance ``d`` (robot spheres
  against the obstacles, and against each other for self pairs) of the sphere approximation
  (:func:`caliper_jax.collision.build_sphere_model`): 0 beyond the clearance ``epsilon``,
  ``(epsilon - d)^2 / (2 epsilon)`` inside it, ``epsilon / 2 - d`` when penetrating -- C1 in d.
  It is evaluated at the waypoints and ``substeps - 1`` points between each pair, and averaged.

The default update is CHOMP's covariant gradient step (Zucker et al. 2013, eq. 12):
``x <- x - (1/eta) A^-1 grad cost(x)`` with ``A`` the smoothness metric (the Hessian of the
smoothness term, ``2 w_smooth (n-1)^3 K^T K``, ``K`` the tridiagonal second-difference matrix of
the interior) and ``1/eta = step_size`` in units of that metric (``step_size`` 1: the smoothness
part alone is solved in one step). ``A^-1 g`` is two tridiagonal solves with ``K`` (``K^T K = K K``,
O(n) per joint, no dense inverse). ``update="adam"`` / ``"gd"`` keep the earlier optax path in the
coordinates where smoothness is isotropic (its second differences; see :func:`optimize`). Either
runs a fixed number of steps in a ``lax.scan``, with a trust region (no waypoint moves more than
``max_step`` per step) and a projection onto the joint limits after every step. The whole solve
is differentiable with respect to ``start``, ``goal`` and the initial path (through the scan),
and ``jax.vmap`` batches it over problems and initialisations.
"""
from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import optax

from caliper_jax.collision import query
from caliper_jax.collision.scene import CollisionModel
from caliper_jax.errors import CaliperError
from caliper_jax.model import Model


@dataclass(frozen=True)
class ChompOptions:
    """Static settings (hashable: a jit cache key)."""

    n_waypoints: int = 32
    iterations: int = 200
    learning_rate: float = 0.02
    w_smooth: float = 0.01
    w_obstacle: float = 100.0
    epsilon: float = 0.05
    substeps: int = 2
    update: str = "covariant"       # "covariant" (CHOMP's A^-1 step) | "adam" | "gd" (optax)
    step_size: float = 1.0          # covariant: 1/eta in units of the smoothness Hessian
    optimizer: str | None = None    # legacy alias of update ("adam" | "gd"); overrides it when given
    fallback: bool = True           # covariant: problems with no collision-free result rerun with adam
    beta1: float = 0.9
    beta2: float = 0.999
    adam_eps: float = 1e-8
    max_step: float = 0.05

    def __post_init__(self):
        if self.optimizer is not None:
            object.__setattr__(self, "update", self.optimizer)

    def check(self) -> ChompOptions:
        if self.n_waypoints < 3:
            raise CaliperError(f"n_waypoints must be >= 3, got {self.n_waypoints}")
        if self.iterations < 0 or self.substeps < 1:
            raise CaliperError("iterations must be >= 0 and substeps >= 1")
        if not (self.learning_rate > 0 and self.epsilon > 0 and self.max_step > 0):
            raise CaliperError("learning_rate, epsilon and max_step must be > 0")
        if not (self.w_smooth >= 0 and self.w_obstacle >= 0):
            raise CaliperError("w_smooth and w_obstacle must be >= 0")
        if self.update not in ("covariant", "adam", "gd"):
            raise CaliperError(f"ChompOptions.update must be 'covariant', 'adam' or 'gd', "
                               f"got {self.update!r}")
        if not self.step_size > 0:
            raise CaliperError(f"ChompOptions.step_size must be > 0, got {self.step_size}")
        return self

    def transformation(self) -> optax.GradientTransformation:
        """The optax optimiser: ``optax.adam`` or ``optax.sgd`` (plain gradient descent)."""
        if self.update == "adam":
            return optax.adam(self.learning_rate, b1=self.beta1, b2=self.beta2, eps=self.adam_eps)
        return optax.sgd(self.learning_rate)


def straight_line(start, goal, n: int):
    """(n, nq) waypoints evenly spaced from ``start`` to ``goal``."""
    s = jnp.linspace(0.0, 1.0, n, dtype=jnp.result_type(start, goal))[:, None]
    return start[None] * (1 - s) + goal[None] * s


def hinge(d, epsilon):
    """The CHOMP obstacle potential of a signed distance (C1, zero beyond ``epsilon``)."""
    inside = (epsilon - d) ** 2 / (2 * epsilon)
    return jnp.where(d >= epsilon, 0.0, jnp.where(d >= 0, inside, epsilon / 2 - d))


def smoothness(path):
    """Integral of the squared finite-difference acceleration over a unit time interval."""
    n = path.shape[0]
    acc = (path[:-2] - 2 * path[1:-1] + path[2:]) * (n - 1) ** 2
    return jnp.sum(acc * acc) / (n - 1)


def _dense(path, substeps: int):
    if substeps == 1:
        return path
    s = jnp.arange(substeps, dtype=path.dtype)[:, None, None] / substeps
    mid = path[:-1][None] * (1 - s) + path[1:][None] * s        # (substeps, n-1, nq)
    mid = jnp.swapaxes(mid, 0, 1).reshape(-1, path.shape[1])
    return jnp.concatenate([mid, path[-1:]])


def obstacle(model: Model, spheres: CollisionModel, path, epsilon: float, substeps: int = 1):
    """Mean over the densified path of the summed hinge potential of every sphere pair."""
    states = _dense(path, substeps)
    potential = jax.vmap(lambda q: query.sphere_potential(model, spheres, q, lambda d: hinge(d, epsilon)))
    return jnp.mean(potential(states))


def cost(model: Model, spheres: CollisionModel, path, opts: ChompOptions):
    """The CHOMP objective of a full path (endpoints included)."""
    total = opts.w_smooth * smoothness(path)
    if opts.w_obstacle and spheres.npair:
        total = total + opts.w_obstacle * obstacle(model, spheres, path, opts.epsilon, opts.substeps)
    return total


def _assemble(start, interior, goal):
    return jnp.concatenate([start[None], interior, goal[None]])


def _second_difference(m: int):
    """K (m, m): second differences of the m interior waypoints (endpoint terms separate), and
    its inverse in closed form (minus the Green's function of the discrete Dirichlet Laplacian:
    ``(-K)^-1[i, j] = min(i, j) (m + 1 - max(i, j)) / (m + 1)``, 1-based)."""
    K = np.eye(m, k=-1) - 2 * np.eye(m) + np.eye(m, k=1)
    i = np.arange(1, m + 1)
    Kinv = -np.minimum.outer(i, i) * (m + 1 - np.maximum.outer(i, i)) / (m + 1)
    return K, Kinv


def smoothness_metric_solve(g, w_smooth: float):
    """A^-1 g for g (m, nq) over the m interior waypoints, A = 2 w_smooth (m+1)^3 K^T K the
    Hessian of ``w_smooth * smoothness`` (w_smooth 0: the metric of weight 1). Two tridiagonal
    solves with the second-difference matrix K (symmetric, so K^T K = K K)."""
    m = g.shape[0]
    dt = g.dtype
    one = jnp.ones(m, dt)
    dl, du = one.at[0].set(0.0), one.at[-1].set(0.0)
    solve_k = lambda b: jax.lax.linalg.tridiagonal_solve(dl, -2.0 * one, du, b)
    scale = 2.0 * (w_smooth if w_smooth > 0 else 1.0) * float(m + 1) ** 3
    return solve_k(solve_k(g)) / scale


def _covariant(model: Model, spheres: CollisionModel, start, goal, init, opts: ChompOptions, mask):
    """CHOMP's covariant descent, monotone: a step x - step_size A^-1 grad, capped so no waypoint
    moves more than the trust radius r and projected onto the limits, is kept only if it lowers
    the cost; r (``max_step`` at the start) grows 1.5x after a kept step (up to ``max_step``) and
    halves after a rejected one. The trace holds the accepted cost before each step."""
    dt = init.dtype
    lo, hi = model.qpos_lower.astype(dt), model.qpos_upper.astype(dt)
    objective = lambda x: cost(model, spheres, _assemble(start, x, goal), opts)
    value_and_grad = jax.value_and_grad(objective)

    def step(carry, _):
        x, f, g, r = carry
        dx = -opts.step_size * smoothness_metric_solve(g, opts.w_smooth) * mask[None, :]
        peak = jnp.max(jnp.abs(dx))
        over = peak > r
        dx = dx * jnp.where(over, r / jnp.where(over, peak, 1.0), 1.0)
        x1 = jnp.clip(x + dx, lo, hi)
        f1, g1 = value_and_grad(x1)
        keep = f1 <= f
        pick = lambda a, b: jnp.where(keep, a, b)
        r = jnp.where(keep, jnp.minimum(1.5 * r, opts.max_step), 0.5 * r)
        return (pick(x1, x), pick(f1, f), pick(g1, g), r), f

    x0 = jnp.clip(init[1:-1], lo, hi)
    f0, g0 = value_and_grad(x0)
    carry = (x0, f0, g0, jnp.asarray(opts.max_step, dt))
    (x, f, _, _), trace = jax.lax.scan(step, carry, None, length=opts.iterations)
    return _assemble(start, x, goal), f, trace


def optimize(model: Model, spheres: CollisionModel, start, goal, init, opts: ChompOptions = ChompOptions(),
             free=None):
    """Optimise one path. ``init`` (n, nq) is the initial path (its endpoints are replaced by
    ``start`` and ``goal``). Returns ``(path (n, nq), final cost, cost per iteration (iterations,))``.
    ``free`` (nq,) bool: the joints that may move (default all); a held joint keeps ``init``'s
    column exactly (its updates are zeroed).

    The variables are the interior's second differences ``a = K x + e`` (``K`` the second-
    difference matrix, ``e`` the endpoint terms), in which the smoothness term is isotropic: a
    gradient step in ``a`` is CHOMP's covariant step ``A^-1 grad`` (``A = K^T K``) up to a
    constant, so updates spread smoothly along the path instead of zig-zagging waypoints. After
    every step the interior is projected onto the joint limits and ``a`` recomputed from it.
    That is the ``update="adam"`` / ``"gd"`` path; the default ``"covariant"`` steps the waypoints
    directly by ``-step_size A^-1 grad`` (module docstring).
    """
    dt = init.dtype
    mask = jnp.ones(init.shape[1], dt) if free is None else jnp.asarray(free).astype(dt)
    if opts.update == "covariant":
        return _covariant(model, spheres, start, goal, init, opts, mask)
    m = init.shape[0] - 2
    lo = model.qpos_lower.astype(dt)
    hi = model.qpos_upper.astype(dt)
    K, Kinv = (jnp.asarray(x, dt) for x in _second_difference(m))
    e = jnp.zeros((m, init.shape[1]), dt).at[0].add(start).at[-1].add(goal)
    to_x = lambda a: Kinv @ (a - e)
    to_a = lambda x: K @ x + e
    objective = lambda x: cost(model, spheres, _assemble(start, x, goal), opts)
    value_and_grad = jax.value_and_grad(lambda a: objective(to_x(a)))
    a0 = to_a(jnp.clip(init[1:-1], lo, hi))

    tx = opts.transformation()

    def step(carry, _):
        a, state = carry
        f, g = value_and_grad(a)
        updates, state = tx.update(g, state, a)
        updates = updates * mask[None, :]          # held joints do not move
        # trust region in joint space: a step of the second differences moves the waypoints by
        # Kinv @ step, up to ~m^2/8 times larger; cap the largest waypoint move at max_step
        peak = jnp.max(jnp.abs(Kinv @ updates))
        over = peak > opts.max_step
        updates = updates * jnp.where(over, opts.max_step / jnp.where(over, peak, 1.0), 1.0)
        a = optax.apply_updates(a, updates)
        return (to_a(jnp.clip(to_x(a), lo, hi)), state), f

    (a, _), trace = jax.lax.scan(step, (a0, tx.init(a0)), None, length=opts.iterations)
    x = to_x(a)
    return _assemble(start, x, goal), objective(x), trace


def initial_paths(start, goal, key, count: int, n: int, scale: float, lower=None, upper=None):
    """``count`` initial paths (count, n, nq): the straight line, then the line plus a random
    bump ``b sin(pi s)`` with ``b`` uniform in +-``scale`` per joint, clipped to the limits."""
    line = straight_line(start, goal, n)
    if count <= 1:
        return line[None]
    b = jax.random.uniform(key, (count - 1, start.shape[0]), dtype=line.dtype, minval=-scale, maxval=scale)
    s = jnp.sin(jnp.pi * jnp.linspace(0.0, 1.0, n, dtype=line.dtype))[None, :, None]
    paths = jnp.concatenate([line[None], line[None] + b[:, None, :] * s])
    if lower is not None:
        paths = jnp.clip(paths, lower, upper)
    return paths


__all__ = ["ChompOptions", "cost", "hinge", "initial_paths", "obstacle", "optimize", "smoothness",
           "smoothness_metric_solve", "straight_line"]

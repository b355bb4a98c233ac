"""VecEnv: N worlds of one task behind one NumPy API, on MuJoCo's C code (CPU) or on MJX.

``VecEnv(task, num_envs)`` (engine "mujoco") steps every world through
:class:`mujoco.batch.Batch` -- MuJoCo's threaded batch of ``mj_step``, the successor of
``mujoco.rollout`` in the pinned release -- with one call per control tick for all worlds of
``layout.substeps`` physics steps. A world's state row is MuJoCo's ``mjSTATE_INTEGRATION`` state,
so the solver warm start (``qacc_warmstart``), the controls and the active equalities carry over
from tick to tick, and every world equals a plain ``mj_step`` loop bit for bit at any thread
count. (``mujoco.rollout.Rollout`` cannot do this: its state is ``mjSTATE_FULLPHYSICS``, it takes
a warm start in but never gives one back.) Per-world model parameters -- the randomised masses,
frictions, damping, servo gains and gravity, and each world's grasp weld pose ``eq_data`` -- are the
batch's per-world copies of those MjModel fields (``Batch.expand``), written in place at that
world's reset or grasp, with no recompile.

One control tick, for all worlds at once:

1. one jitted, vmapped JAX call: the action (W, nq) -- joint position targets -- passes the safety
   gate of :mod:`caliper_jax.control.safety` (position mode, the control tick as ``dt``: limit
   clamp, rate limit, static gravity check), and the grasp rule of :mod:`tasks.env_spec` decides
   on the state the tick starts from: a gripper commanded closed takes the first prop inside its
   grown jaw box, an opening one releases;
2. the weld of a newly taken prop gets the prop's current pose in the jaw frame (``eq_data``
   [anchor 0, relpos, relquat, torquescale], as :meth:`mjx_backend.base.SimBackend.set_weld`)
   and is switched on; a dropped prop's weld is switched off;
3. physics: ``ctrl`` = the gated targets of the actuated joints (position servos), ``substeps``
   MuJoCo steps, then MuJoCo's position stage at the new state, so the jaw body's pose is MuJoCo's
   own ``xpos`` / ``xmat`` / ``xquat`` (no separate kinematics);
4. success: the task predicate (:func:`tasks.predicates.evaluate_np`, vectorised over worlds) on
   the new prop centres, their episode-start centres and linear velocities, the held prop and the
   props carried so far this episode; it fires once the verdict has held on
   :func:`tasks.predicates.dwell_ticks` consecutive ticks, and latches per episode;
5. ``terminated`` = success fired; ``truncated`` = horizon reached, or the world went unstable
   (MuJoCo raised or reset it; ``info["unstable"]``). Those worlds start a new episode in the same
   step: the returned observation is the new episode's first, ``info["final_obs"]`` the last
   observation before any reset (every world).

Cameras (``cameras=``: names of :func:`tasks.cameras.scene_cameras` such as ``"front"`` or
``"front:96x96"``, or :class:`caliper_jax.rays.PinholeCamera` s): after ``reset`` and every
``step``, one jitted call renders every camera in every world with the JAX ray engine from the
batch's current geom (and body) poses -- MuJoCo's ``geom_xpos``/``geom_xmat`` of each world, read
like ``xpos``/``xmat`` -- into ``info["images"]`` = {name: (W, height, width, 3) uint8}, the frames
of the returned observations (after an auto-reset: the new episode's first). ``info["final_images"]``
holds the frames of ``info["final_obs"]``; on a tick where an episode ended the worlds are rendered
twice (before and after the reset). Frozen worlds (``step(active=...)``) are rendered anyway, from
their unchanged poses. The observation array stays the state vector.

Reward: 1.0 on the tick success first fires (the tick that ends the episode), 0 otherwise -- or,
for a task with a ``"reward"`` block (schema v2), ``success`` weight * that flag + the weighted dense
terms of :mod:`tasks.rewards` on the state after the tick (NumPy twin), each term's weighted value
per world in ``info["reward_terms"]`` ({} without a block). A non-finite term is a CaliperError
naming it; an unstable world's terms are 0. ``action_rate`` compares the gated targets of
consecutive ticks (the first tick of an episode against the start pose).

Randomisation: episode ``e`` of world ``w`` draws :func:`tasks.env_spec.draw` from
``fold_in(fold_in(PRNGKey(seed), w), e)`` -- a world's episodes do not depend on the number of
worlds, and disabling one field never changes another's draws. ``info["randomization"]`` holds the
draws of the current episodes ({field: (W, ...)} float32). The MJX engine (:mod:`tasks.env_mjx`) uses
the same streams. ``reset(options={"draws": ...})`` starts every world from given draws instead
(:func:`check_draws`; :mod:`tasks.resim` replays recorded episodes this way): the same draws give
the same episode start bit for bit as the seeded reset that drew them.
"""
from __future__ import annotations

import numpy as np

from caliper_jax.errors import CaliperError
from tasks import env_spec as S
from tasks import rewards as R
from tasks.env_common import (  # noqa: F401  (re-exported: tasks.env.check_draws, ...)
    EnvShapes,
    _cached,
    _check_args,
    _reset_draws,
    check_draws,
    draw_shapes,
    resolve_task,
)
from tasks.predicates import (
    carry_start,
    carry_ticks,
    carry_update,
    dwell_ticks,
    evaluator_np,
    held_mask,
    streak,
)

ENGINES = ("mujoco", "mjx")
_DEFAULT_RANDOMIZATION = S.EnvRandomization()


class _TickIO:
    """Column layout of the per-tick JAX call (:func:`_tick_fn`): per world one float row (the
    model's dtype) and one int32 row in, and two such rows out, rather than thirteen arguments and
    nine results -- each one costs dispatch time, several times more right after a MuJoCo step.
    The gate state (:class:`caliper_jax.control.safety.SafetyState`) fills the leading columns of
    both rows, in and out, so it stays on the host between ticks.

    Floats: gate state last_q, last_qd, hold_q | action, q (nq), jaw_pos (3), jaw_rot (9), prop_pos
    (3P); out: gate state | gated target (nq). Ints: gate state idle, holding, estop | fresh, held;
    out: gate state | gate flags, held."""

    STATE_F = ("last_q", "last_qd", "hold_q")
    STATE_I = ("idle", "holding", "estop")

    def __init__(self, L: S.EnvLayout, nv: int):
        widths = (("last_q", L.nq), ("last_qd", nv), ("hold_q", L.nq), ("action", L.nq), ("q", L.nq),
                  ("jaw_pos", 3), ("jaw_rot", 9), ("prop_pos", 3 * L.nprop))
        self.f, at = {}, 0
        for name, n in widths:
            self.f[name], at = slice(at, at + n), at + n
        self.nf = at
        self.nstate_f = self.f["hold_q"].stop                     # gate state columns, in and out
        self.target = slice(self.nstate_f, self.nstate_f + L.nq)  # out
        self.i = {name: k for k, name in enumerate(self.STATE_I + ("fresh", "held"))}
        self.ni = len(self.i)
        self.nstate_i = len(self.STATE_I)
        self.flags, self.held = self.nstate_i, self.nstate_i + 1   # out


def _tick_fn(L: S.EnvLayout, safety, model):
    """jit(vmap) of the host-free part of a tick, for all worlds, on :class:`_TickIO` rows: (floats
    (W, nf), ints (W, ni)) -> (floats (W, nstate_f + nq), ints (W, nstate_i + 2)): the gate state
    after the tick, the gated targets, the gate flags and the held prop. A fresh world's gate state
    restarts from its measured position ``q`` first; the grasp rule sees the gated gripper target
    and the state the tick starts from."""
    import jax
    import jax.numpy as jnp

    from caliper_jax.control.safety import SafetyState, gate, init_safety, setpoint

    io = _TickIO(L, model.nv)
    f, i = io.f, io.i

    def one(x, k):
        q = x[f["q"]]
        state = SafetyState(**{name: x[f[name]] for name in io.STATE_F}, idle=k[i["idle"]],
                            holding=k[i["holding"]] != 0, estop=k[i["estop"]] != 0)
        fresh = k[i["fresh"]] != 0
        state = jax.tree_util.tree_map(lambda old, new: jnp.where(fresh, new, old), state,
                                       init_safety(q, model.nv))
        cmd, state, warn = gate(safety, state, setpoint(x[f["action"]]), q, "position")
        held = k[i["held"]]
        if L.nprop:
            candidates = S.grasp_candidates(L, jnp, x[f["jaw_pos"]], x[f["jaw_rot"]].reshape(3, 3),
                                            x[f["prop_pos"]].reshape(L.nprop, 3))
            held = S.grasp_update(jnp, held, S.closing(L, cmd.q), candidates, L.friction)
        floats = jnp.concatenate([getattr(state, name) for name in io.STATE_F] + [cmd.q])
        ints = jnp.stack([getattr(state, name).astype(jnp.int32) for name in io.STATE_I]
                         + [warn.flags.astype(jnp.int32), held.astype(jnp.int32)])
        return floats, ints

    return jax.jit(jax.vmap(one))


def _draw_fn(spec: S.EnvRandomization, shapes: dict):
    """jit: (base key, worlds (W,), episodes (W,)) -> {field: (W, ...)} draws of those episodes."""
    import jax

    def one(base, world, episode):
        return S.draw(spec, jax.random.fold_in(jax.random.fold_in(base, world), episode), shapes)

    return jax.jit(jax.vmap(one, in_axes=(None, 0, 0)))




class VecEnv(EnvShapes):
    """``num_envs`` worlds of ``task`` (a Task, a task file, a zoo name or a built TaskScene).

    ``engine``: "mujoco" (CPU, MuJoCo's C batch) or "mjx" (returns a :class:`tasks.env_mjx.MjxEnv`,
    same NumPy face). ``seed``: base of every world's randomisation stream. ``randomization``: an
    :class:`tasks.env_spec.EnvRandomization` (default: its defaults), or None for none.
    ``nthread``: MuJoCo threads including the caller's (None: one per CPU). ``cameras``: None, or
    camera names (``"front"``, ``"wrist:64x48"``) / named :class:`caliper_jax.rays.PinholeCamera` s
    rendered into ``info["images"]`` (module doc); ``self.cameras`` is the resolved tuple.

    Arrays: observations (W, obs_dim) float32 (layout: :func:`tasks.env_spec.observation`), actions
    (W, nq) joint position targets in the robot's independent coordinates, gripper included.
    """

    def __new__(cls, task=None, num_envs: int = 1, *, engine: str = "mujoco", **kwargs):
        if engine not in ENGINES:
            raise CaliperError(f"engine={engine!r}: expected one of {', '.join(ENGINES)}")
        if engine == "mjx":
            try:
                from tasks.env_mjx import MjxEnv
            except ImportError as exc:
                raise CaliperError(f"engine='mjx' needs tasks.env_mjx ({exc})") from None
            return MjxEnv(task, num_envs, **kwargs)
        return super().__new__(cls)

    def __init__(self, task, num_envs: int, *, engine: str = "mujoco", seed: int = 0,
                 randomization: S.EnvRandomization | None = _DEFAULT_RANDOMIZATION,
                 nthread: int | None = None, cameras=None):
        _check_args(num_envs, randomization, nthread, seed)
        self.engine = engine
        self.task_scene = ts = resolve_task(task)
        self.task = ts.task
        self.num_envs = int(num_envs)
        self.layout = S.make_layout(ts)
        self.randomization = S.task_randomization(ts.task, randomization, _DEFAULT_RANDOMIZATION)
        if ts.scene.mjcf.actuators != "position":
            raise CaliperError(f"task {self.task.name}: VecEnv drives position servos; the scene was built "
                               f"with actuators={ts.scene.mjcf.actuators!r}")
        self.action_low = np.asarray(ts.model.qpos_lower, np.float32)
        self.action_high = np.asarray(ts.model.qpos_upper, np.float32)
        self._host_tables(ts)
        self._open_batch(nthread)
        self._jit_functions(ts.model)
        self._setup_cameras(cameras)
        self._seed = int(seed)
        self._started = False
        self._closed = False

    # ---- setup -----------------------------------------------------------------------------------
    def _host_tables(self, ts) -> None:
        """Index maps (props in task order), start state and nominal model parameters."""
        lay, mj, names = ts.scene.layout, ts.scene.mj, self.layout.prop_names
        self._lay, self._mj = lay, mj
        self._prop_body = np.array([lay.prop_body[n] for n in names], np.int64)
        self._prop_geom = np.array([lay.prop_geom[n] for n in names], np.int64)
        P = len(names)
        self._prop_qpos = np.array([lay.prop_qposadr[n] + np.arange(7) for n in names], int).reshape(P, 7)
        self._prop_dof = np.array([lay.prop_dofadr[n] + np.arange(3) for n in names], int).reshape(P, 3)
        # friction-grasp scenes have no welds: the grasp rule then only reports the held flag
        self._weld_eq = np.array([lay.weld_eq[n] for n in names] if lay.weld_eq else [], int).reshape(-1)
        self._jaw = S.jaw_body(ts)
        q0 = np.asarray(ts.q0, np.float64)
        self._qpos0 = lay.qpos_from_q(q0[None], base=mj.qpos0)[0]        # robot at q0, props at spawn
        prop_vel = np.zeros(mj.nv)
        for prop in self.task.props:
            prop_vel[lay.prop_dofadr[prop.name]:lay.prop_dofadr[prop.name] + 6] = prop.velocity
        self._qvel0 = lay.qvel_from_v(np.zeros((1, self.layout.nv)), self._qpos0[None], base=prop_vel)[0]
        self._ctrl0 = q0[lay.ctrl_to_q]
        self._q0 = q0
        self._nominal = {name: np.array(getattr(mj, name)) for name in (
            "body_mass", "body_inertia", "geom_friction", "dof_damping", "actuator_gainprm",
            "actuator_biasprm", "eq_data")}
        self._nominal["opt.gravity"] = np.array(mj.opt.gravity)
        # the NumPy twin of the success predicate, built once: (W, P, 3) float64 arrays -> (W,) bool
        self._success_np = None if self.task.success is None else evaluator_np(self.task.success, names)
        self._dwell = dwell_ticks(self.task, self.layout.fps)
        self._carry_need = carry_ticks(self.layout.fps)

    def _open_batch(self, nthread) -> None:
        """The MuJoCo batch and its live views: state rows (writable) and outputs (refreshed by
        every call on a world)."""
        import mujoco
        import mujoco.batch

        threads = 0 if nthread is None else int(nthread)
        self._batch = b = mujoco.batch.Batch(self._mj, self.num_envs, nthread=threads)
        self._v = {k: b.bind(k) for k in ("qpos", "qvel", "ctrl", "eq_active", "xpos", "xmat", "xquat")}
        self._rows = {}                      # expanded (per-world) model fields
        self._stage_pos = int(mujoco.mjtStage.mjSTAGE_POS)
        self._stage_none = int(mujoco.mjtStage.mjSTAGE_NONE)
        self._SimulationError = mujoco.batch.SimulationError
        # live (W, 3) view of MuJoCo's warning counters BADQPOS, BADQVEL, BADQACC (consecutive in mjtWarning)
        bad = int(mujoco.mjtWarning.mjWARN_BADQPOS)
        self._bad_counts = b.warning[:, bad:bad + 3, 1]

    def _jit_functions(self, model) -> None:
        import jax.numpy as jnp

        from caliper_jax.control.safety import init_safety, safety_params

        L, W, scene = self.layout, self.num_envs, self.task_scene.scene
        self._tick_jit = _cached(scene, ("tick", L.fps, L.grasp_margin, L.friction),
                                 lambda: _tick_fn(L, safety_params(model, 1.0 / L.fps), model))
        # the tick call's input rows (_TickIO), gate state included, starting from q0
        self._io = io = _TickIO(L, model.nv)
        self._tick_f = np.zeros((W, io.nf), np.dtype(model.dtype))
        self._tick_i = np.zeros((W, io.ni), np.int32)
        state = init_safety(jnp.asarray(np.broadcast_to(self._q0, (W, L.nq)), model.dtype), model.nv)
        for name in io.STATE_F:
            self._tick_f[:, io.f[name]] = np.asarray(getattr(state, name))
        for name in io.STATE_I:
            self._tick_i[:, io.i[name]] = np.asarray(getattr(state, name))
        self._ctrl_cols = io.target.start + np.asarray(self._lay.ctrl_to_q)
        self._draw_shapes = shapes = draw_shapes(L, self._mj.nu)
        spec = self.randomization
        self._draw = None if spec is None else _cached(scene, ("draw", spec, tuple(shapes.items())),
                                                       lambda: _draw_fn(spec, shapes))
        self._worlds = np.arange(W, dtype=np.int32)

    def _setup_cameras(self, cameras) -> None:
        """The cameras (:func:`tasks.cameras.resolve_cameras`), their renderer (one jitted call
        for all worlds and cameras, shared by the envs of one built scene) and the batch views of
        the pose fields it reads (bound before the first reset fills them)."""
        from tasks.cameras import camera_renderer, pose_fields, resolve_cameras

        self.cameras = cams = resolve_cameras(self.task_scene, cameras)
        self._render = None
        if not cams:
            return
        from caliper_jax.rays import scene_from_mujoco

        scene = self.task_scene.scene
        rays = _cached(scene, "ray_scene", lambda: scene_from_mujoco(self._mj))
        self._render = _cached(scene, ("cameras", cams), lambda: camera_renderer(rays, cams))
        self._pose_views = {k: self._batch.bind(k) for k in pose_fields(cams)}

    def _images(self) -> dict:
        """{camera: (W, height, width, 3) uint8} of every world's current poses (read-only)."""
        return {k: np.asarray(v) for k, v in self._render(self._pose_views).items()}

    # ---- episode starts -------------------------------------------------------------------------
    def _redraw(self, ids: np.ndarray, given: dict | None = None) -> None:
        """New draws for the episodes starting in worlds ``ids`` (one fixed-shape jitted call), or
        the checked ``given`` ones (every world). The arrays are replaced, never changed, and
        read-only, so ``info["randomization"]`` hands them out without a copy per tick (as the MJX
        engine's, they cannot be written)."""
        if given is not None:
            self._draws = dict(given)
            return
        if self._draw is None:
            return
        new = self._draw(self._key, self._worlds, self._episode)
        for k, v in new.items():
            if k in self._draws:
                rows = self._draws[k].copy()
                rows[ids] = np.asarray(v)[ids]
            else:
                rows = np.array(v)
            rows.flags.writeable = False
            self._draws[k] = rows

    def episode_draws(self, worlds, episodes, seed: int | None = None) -> dict:
        """{field: (n, ...) float32}: the draws of episode ``episodes[i]`` of world ``worlds[i]``
        under ``seed`` (default: this env's), which they get in an env of any world count; give
        them to ``reset(options={"draws": ...})`` to replay those episodes in other worlds."""
        import jax

        self._check_open()
        worlds = np.asarray(worlds, np.int32).reshape(-1)
        episodes = np.asarray(episodes, np.int32).reshape(-1)
        if worlds.shape != episodes.shape or (worlds < 0).any() or (episodes < 0).any():
            raise CaliperError(f"episode_draws: worlds and episodes must be equal-length lists of indices "
                               f">= 0, got {worlds.shape[0]} and {episodes.shape[0]}")
        if self._draw is None:
            return {}
        key = jax.random.PRNGKey(self._seed if seed is None else int(seed))
        return {k: np.asarray(v) for k, v in self._draw(key, worlds, episodes).items()}

    def _row(self, name: str) -> np.ndarray:
        """(W, ...) per-world values of MjModel field ``name`` (expanded on first use)."""
        rows = self._rows.get(name)
        if rows is None:
            rows = self._rows[name] = self._batch.expand(name)
        return rows

    def _apply_params(self, ids: np.ndarray) -> None:
        """Write the drawn parameters of worlds ``ids`` into their model rows: nominal x factor."""
        d, nom, ix = self._draws, self._nominal, ids[:, None]
        body, geom, dof = self._prop_body, self._prop_geom, self._lay.v_to_dof

        def factor(name):
            return d[name][ids].astype(np.float64)

        if "prop_mass" in d:
            self._row("body_mass")[ix, body] = nom["body_mass"][body] * factor("prop_mass")
            self._row("body_inertia")[ix, body] = nom["body_inertia"][body] * factor("prop_mass")[..., None]
        if "prop_friction" in d:
            self._row("geom_friction")[ix, geom, 0] = nom["geom_friction"][geom, 0] * factor("prop_friction")
        if "damping" in d:
            self._row("dof_damping")[ix, dof] = nom["dof_damping"][dof] * factor("damping")
        if "gain" in d and self._mj.nu:
            self._row("actuator_gainprm")[ids, :, 0] = nom["actuator_gainprm"][:, 0] * factor("gain")
            bias = nom["actuator_biasprm"][:, 1:3]
            self._row("actuator_biasprm")[ids, :, 1:3] = bias * factor("gain")[..., None]
        if "gravity" in d:
            self._row("opt.gravity")[ids] = nom["opt.gravity"] * factor("gravity")[:, None]

    def _start_qpos(self, ids: np.ndarray) -> np.ndarray:
        """(n, mj nq) start positions of worlds ``ids``: robot at q0, props at their spawn poses
        moved by the drawn xy offsets and turned by the drawn yaw (about world z)."""
        from caliper_jax.io.rotations import quat_mul

        qpos = np.array(np.broadcast_to(self._qpos0, (len(ids), self._mj.nq)))
        if "prop_xy" in self._draws:
            qpos[:, self._prop_qpos[:, :2]] += self._draws["prop_xy"][ids].astype(np.float64)
        if "prop_yaw" in self._draws:
            yaw = S.yaw_quat(np, self._draws["prop_yaw"][ids].astype(np.float64))
            qpos[:, self._prop_qpos[:, 3:]] = quat_mul(yaw, qpos[:, self._prop_qpos[:, 3:]])
        return qpos

    def _reset_worlds(self, ids: np.ndarray, draws: dict | None = None) -> None:
        """Start the next episode (index already set) in worlds ``ids``: new draws (or the checked
        ``draws`` of every world), model rows, MuJoCo state (time 0, zero warm start, welds off,
        servos holding q0), position stage."""
        self._redraw(ids, draws)
        self._apply_params(ids)
        b, v = self._batch, self._v
        b.reset(ids, stage=self._stage_none)
        qpos = self._start_qpos(ids)
        v["qpos"][ids] = qpos
        v["qvel"][ids] = self._qvel0
        v["ctrl"][ids] = self._ctrl0
        v["eq_active"][ids[:, None], self._weld_eq] = 0.0
        b.forward(ids, stage=self._stage_pos)
        self._pos0[ids] = qpos[:, self._prop_qpos[:, :3]]
        self._held[ids] = -1
        for part in self._carry:
            part[ids] = 0
        self._carried[ids] = False
        self._streak[ids] = 0
        self._success[ids] = False
        self._tick[ids] = 0
        self._return[ids] = 0.0
        self._fresh[ids] = 1
        self._prev_target[ids] = self._q0

    def _start_streams(self) -> None:
        import jax

        W = self.num_envs
        self._key = jax.random.PRNGKey(self._seed)
        self._episode = np.zeros(W, np.int32)
        self._pos0 = np.zeros((W, self.layout.nprop, 3))
        self._held = self._tick_i[:, self._io.i["held"]]        # views of the tick call's int rows
        self._held[:] = -1
        self._fresh = self._tick_i[:, self._io.i["fresh"]]
        self._fresh[:] = 1
        self._success = np.zeros(W, bool)
        self._carry = carry_start(np, (W, self.layout.nprop))     # tasks.predicates.carry_update
        self._carried = np.zeros((W, self.layout.nprop), bool)   # props picked up this episode
        self._streak = np.zeros(W, np.int32)                       # ticks the verdict has held, ending now
        self._tick = np.zeros(W, np.int32)
        self._return = np.zeros(W, np.float64)
        self._prev_target = np.zeros((W, self.layout.nq))
        self._draws = {}
        self._started = True

    def reset(self, seed: int | None = None, options: dict | None = None):
        """Start a new episode in every world -> (obs (W, obs_dim) float32, info). ``seed`` restarts
        the randomisation streams at episode 0 from ``PRNGKey(seed)``; None continues them (each
        world's next episode, or episode 0 on the first reset). ``options={"draws": {field: (W, ...)}}``
        starts these episodes from the given draws instead of the streams' (:func:`check_draws`;
        the episode indices advance as usual, later episodes draw from the streams again)."""
        self._check_open()
        given = _reset_draws(options, self.randomization, self._draw_shapes, self.num_envs)
        if seed is not None:
            if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
                raise CaliperError(f"seed must be an integer or None, got {seed!r}")
            self._seed, self._started = int(seed), False
        if self._started:
            self._episode += 1
        else:
            self._start_streams()
        self._reset_worlds(self._worlds.astype(np.int64), given)
        obs, _ = self._observe()
        W = self.num_envs
        info = self._info(np.zeros(W, bool), np.zeros(W, np.int32))
        info["reward_terms"] = {t.name: np.zeros(W, np.float32) for t in self._reward_active}
        if self._render is not None:
            info["images"] = self._images()
        return obs, info

    # ---- ticks -----------------------------------------------------------------------------------
    def _read(self) -> dict:
        """Current state of every world: q, v (W, nq / nv), prop pos / quat / vel (W, P, 3 / 4 / 3),
        jaw pos (W, 3), rot (W, 3, 3) (jaw frame -> world), quat (W, 4). World frame, copies."""
        v, lay, j = self._v, self._lay, self._jaw
        qpos, qvel = v["qpos"], v["qvel"]
        props = qpos[:, self._prop_qpos]
        return {"q": lay.q_from_qpos(qpos), "v": lay.v_from_qvel(qvel, qpos),
                "pos": props[..., :3], "quat": props[..., 3:], "vel": qvel[:, self._prop_dof],
                "jaw_pos": v["xpos"][:, j].copy(), "jaw_rot": v["xmat"][:, j].reshape(-1, 3, 3),
                "jaw_quat": v["xquat"][:, j].copy()}

    def _observe(self):
        """(obs (W, obs_dim) float32, state) of the current state, kept for the next tick."""
        self._state = s = self._read()
        obs = S.observation(self.layout, np, s["q"], s["v"], self._held, s["pos"], s["quat"], s["vel"],
                            s["jaw_pos"])
        return obs.astype(np.float32), s

    def _weld(self, s: dict, held: np.ndarray) -> None:
        """Apply the grasp decisions ``held`` (W,) taken on the state ``s`` the tick starts from:
        release dropped props, weld newly taken ones at their current pose in the jaw frame."""
        changed = held != self._held
        if not changed.any():
            return
        if not len(self._weld_eq):                            # friction grasp: physics holds the prop
            self._held[:] = held
            return
        from caliper_jax.io.rotations import quat_conj, quat_mul

        eq_active = self._v["eq_active"]
        lost = np.flatnonzero(changed & (self._held >= 0))
        eq_active[lost, self._weld_eq[self._held[lost]]] = 0.0
        took = np.flatnonzero(changed & (held >= 0))
        if len(took):
            p = held[took]
            rel_pos = np.einsum("wji,wj->wi", s["jaw_rot"][took], s["pos"][took, p] - s["jaw_pos"][took])
            rel_quat = quat_mul(quat_conj(s["jaw_quat"][took]), s["quat"][took, p])
            eq = self._weld_eq[p]
            rows = self._nominal["eq_data"][eq].copy()
            rows[:, :3] = 0.0                                 # anchor at the prop origin
            rows[:, 3:6] = rel_pos
            rows[:, 6:10] = rel_quat / np.linalg.norm(rel_quat, axis=-1, keepdims=True)
            self._row("eq_data")[took, eq] = rows
            eq_active[took, eq] = 1.0
        self._held[:] = held

    def _physics(self, ids=None) -> np.ndarray:
        """Advance every world (or worlds ``ids``) one control tick -> (W,) bool: worlds MuJoCo
        failed or reset (a bad qpos / qvel / qacc warning: MuJoCo then restarts that world from its
        defaults)."""
        before = self._bad_state_warnings()
        raised = None
        try:
            self._batch.step(ids, nstep=self.layout.substeps, stage=self._stage_pos)
        except self._SimulationError as exc:          # those worlds kept their state; the others ran
            raised = exc.ids
        failed = self._bad_state_warnings() > before
        failed |= ~np.isfinite(self._v["qvel"]).all(axis=1)
        if raised is not None:
            failed[raised] = True
        return failed

    def _bad_state_warnings(self) -> np.ndarray:
        """(W,) count of MuJoCo's bad qpos / qvel / qacc warnings per world since its reset."""
        return self._bad_counts.sum(axis=1)

    def _check_action(self, action) -> np.ndarray:
        action = np.asarray(action)
        W, nq = self.num_envs, self.layout.nq
        if action.shape != (W, nq) or not np.issubdtype(action.dtype, np.number):
            raise CaliperError(f"action: expected a numeric array of shape ({W}, {nq}) (num_envs, joint "
                               f"position targets of {', '.join(self.task_scene.model.joint_names)}), got "
                               f"{action.dtype} {action.shape}")
        return action

    def step(self, action, active=None):
        """One control tick of every world -> (obs (W, obs_dim) float32, reward (W,) float32,
        terminated (W,), truncated (W,), info). ``action`` (W, nq): joint position targets (a
        non-finite one is replaced by the last command, ``info["gate_flags"]``). ``active`` (W,)
        bool, optional: only those worlds advance; the others are frozen (not simulated, their
        gate, grasp, tick and episode unchanged, never done) -- a batched evaluation stops paying
        for worlds that have finished their episodes."""
        self._check_open()
        if not self._started:
            raise CaliperError("step() before reset(): call reset() first")
        s, io, x, W = self._state, self._io, self._tick_f, self.num_envs
        act = self._check_active(active)
        x[:, io.f["action"]] = self._check_action(action)
        x[:, io.f["q"]] = s["q"]
        x[:, io.f["jaw_pos"]] = s["jaw_pos"]
        x[:, io.f["jaw_rot"]] = s["jaw_rot"].reshape(W, 9)
        x[:, io.f["prop_pos"]] = s["pos"].reshape(W, 3 * self.layout.nprop)
        floats, ints = self._tick_jit(x, self._tick_i)
        floats, ints = np.asarray(floats), np.asarray(ints)
        if act is None:
            x[:, :io.nstate_f] = floats[:, :io.nstate_f]                  # the new gate state
            self._tick_i[:, :io.nstate_i] = ints[:, :io.nstate_i]
            held = ints[:, io.held]
            self._v["ctrl"][:] = floats[:, self._ctrl_cols]
        else:
            x[act, :io.nstate_f] = floats[act, :io.nstate_f]
            self._tick_i[act, :io.nstate_i] = ints[act, :io.nstate_i]
            held = np.where(act, ints[:, io.held], self._held)
            self._v["ctrl"][act] = floats[act][:, self._ctrl_cols]
        flags = ints[:, io.flags]
        target = floats[:, io.target] if act is None else np.where(act[:, None], floats[:, io.target],
                                                                   self._prev_target)
        self._fresh[slice(None) if act is None else act] = 0
        self._weld(s, held)
        unstable = self._physics(None if act is None else np.flatnonzero(act))
        obs, s = self._observe()
        now = self._evaluate(s) & ~unstable
        run = streak(np, self._streak, now)
        self._streak[:] = run if act is None else np.where(act, run, self._streak)
        fired = (self._streak >= self._dwell) & ~self._success
        if act is not None:
            unstable &= act
            fired &= act
        self._success |= fired
        self._tick += 1 if act is None else act
        terms = self._reward_terms(s, target, unstable, act)
        reward = R.total(self.task.reward, fired, terms, np)
        self._prev_target[:] = target
        self._return += reward
        truncated = ~fired & ((self._tick >= self.layout.horizon) | unstable)
        if act is not None:
            truncated &= act
        done = fired | truncated
        ended = {"final_success": self._success & done, "final_return": np.where(done, self._return, 0.0),
                 "final_length": np.where(done, self._tick, 0)}
        final_obs = obs
        final_images = images = None if self._render is None else self._images()
        if done.any():
            ids = np.flatnonzero(done)
            self._episode[ids] += 1
            self._reset_worlds(ids)
            obs, _ = self._observe()
            if self._render is not None:
                images = self._images()
        info = self._info(ended["final_success"], flags)
        info.update(final_obs=final_obs, unstable=unstable, reward_terms=terms)
        if self._render is not None:
            info.update(images=images, final_images=final_images)
        info["episode"].update(ended)
        return obs, reward, fired, truncated, info

    @property
    def _reward_active(self) -> tuple:
        return () if self.task.reward is None else self.task.reward.active

    def _reward_terms(self, s: dict, target, unstable, act) -> dict:
        """{term: (W,) float32 weighted value} on the state ``s`` after the tick (0 in unstable and
        frozen worlds); a non-finite value elsewhere raises, naming the term."""
        if not self._reward_active:
            return {}
        ctx = R.context(self.task, self.layout, np, jaw_pos=s["jaw_pos"], jaw_rot=s["jaw_rot"], pos=s["pos"],
                        pos0=self._pos0, held=self._held, target=target, prev_target=self._prev_target)
        with np.errstate(invalid="ignore", over="ignore"):
            values = R.terms(self.task.reward, ctx, np)
        keep = ~unstable if act is None else (~unstable & act)
        values = {k: np.where(keep, v, np.float32(0.0)) for k, v in values.items()}
        R.check_finite(values, " (world index)")
        return values

    def _check_active(self, active):
        if active is None:
            return None
        act = np.asarray(active)
        if act.shape != (self.num_envs,) or act.dtype != bool:
            raise CaliperError(f"active: expected a bool array of shape ({self.num_envs},), got {act.dtype} "
                               f"{act.shape}")
        return None if act.all() else act

    def _evaluate(self, s: dict) -> np.ndarray:
        """(W,) bool: the task's success predicate holds now (updates the carried props first)."""
        held = held_mask(np, self._held, self.layout.nprop)
        carry, carried = carry_update(np, self._carry, held, s["pos"], self._pos0, self._carry_need)
        for part, new in zip(self._carry, carry, strict=True):
            part[:] = new
        self._carried[:] = carried
        if self._success_np is None:
            return np.zeros(self.num_envs, bool)
        return self._success_np(s["pos"], self._pos0, s["vel"], held, self._carried,
                                R.grip_point(self.layout, np, s["jaw_pos"], s["jaw_rot"]))

    def _info(self, final_success, flags) -> dict:
        return {"success": self._success.copy(), "final_success": final_success, "held": self._held.copy(),
                "gate_flags": np.asarray(flags, np.int32),
                "randomization": dict(self._draws),
                "episode": {"index": self._episode.copy(), "tick": self._tick.copy(),
                            "return": self._return.copy()}}

    def _world(self, world) -> int:
        self._check_open()
        if not isinstance(world, (int, np.integer)) or not 0 <= world < self.num_envs:
            raise CaliperError(f"world {world!r} out of range (num_envs={self.num_envs})")
        return int(world)

    def world_model(self, world: int):
        """A copy of world ``world``'s MjModel: the scene with that world's randomised parameters
        and grasp weld poses (to render or inspect it)."""
        return self._batch.get_model(self._world(world))

    def world_data(self, world: int):
        """A new MjData holding world ``world``'s full state (``mjSTATE_INTEGRATION``: time, qpos,
        qvel, warm start, ctrl, eq_active, ...) with its derived quantities computed
        (``mj_forward`` on :meth:`world_model`)."""
        import mujoco

        w = self._world(world)
        d = self._batch.get_data(w)
        mujoco.mj_forward(self.world_model(w), d)
        return d

    # ---- lifecycle -------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise CaliperError("this VecEnv is closed")

    def close(self) -> None:
        """Release MuJoCo's threads and buffers (idempotent)."""
        self._closed = True
        self._v = self._rows = self._batch = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return f"VecEnv({self.task.name!r}, num_envs={self.num_envs}, engine={self.engine!r})"


__all__ = ["ENGINES", "EnvShapes", "VecEnv", "check_draws", "draw_shapes", "resolve_task"]

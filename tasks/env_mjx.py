"""The MJX engine of :class:`tasks.env.VecEnv`: every world of a task as pure, jitted JAX functions.

JAX RL convention (Brax / MuJoCo Playground): a :class:`State` pytree holds everything a world
needs, ``reset_state(key) -> State`` and ``step_state(state, action) -> State`` are pure (no jit
inside; every leaf carries a leading world axis ``W`` except the base ``key``), and
:meth:`MjxEnv.rollout` runs a whole episode -- policy included -- as one ``lax.scan`` with no host
round trip per tick. The NumPy face (``reset(seed)`` / ``step(action)``) keeps a state inside and
returns exactly what the CPU engine returns, so ``VecEnv(task, n, engine="mjx")`` delegates here.

One control tick, per world (the CPU engine's order, :mod:`tasks.env`):

1. the action (nq,) -- joint position targets -- passes the safety gate
   (:func:`caliper_jax.control.safety.gate`, position mode, the task's control tick as ``dt``);
2. grasp (:mod:`tasks.env_spec`) from the jaw pose (``xpos``/``xmat``/``xquat`` of the gripper
   body) and prop poses the tick starts from: a newly held prop's pose in the jaw frame is written
   into that world's weld ``eq_data`` [anchor 0 (3), relpose pos (3), quat (4), torquescale] and
   its weld switched on; the others off;
3. ``substeps`` ``mjx.step`` calls (``lax.fori_loop``) with ``ctrl`` = gated targets of the
   actuated joints; the jaw pose the env reads (grasp, observation, reward) is the robot Model's
   forward kinematics at the new ``q`` (the CPU engine reads MuJoCo's position stage: the same
   pose to float precision). MJX's whole ``mjx.kinematics`` runs only for cameras: without them
   ``State.data``'s pose fields (``xpos``, ``geom_xpos``, ...) are those of the last substep's start,
   as after MuJoCo's ``mj_step``; each ``mjx.step`` recomputes them from ``qpos``;
4. success: the task predicate's JAX twin on (prop pos, pos0, prop linear velocity, held prop,
   props carried so far), fired after :func:`tasks.predicates.dwell_ticks` consecutive true ticks,
   latched;
5. ``terminated`` = success fired (reward 1 on that tick, or the task's dense reward of
   :mod:`tasks.rewards`, JAX twin, with ``info["reward_terms"]``), ``truncated`` = horizon reached or the
   world went non-finite; finished worlds reset in the same step (``jnp.where`` over the world's
   tree) and ``info`` keeps ``final_obs`` / ``final_success`` / ``final_return`` / ``final_length``.

Randomisation: episode ``e`` of world ``w`` draws :func:`tasks.env_spec.draw` from
``fold_in(fold_in(key, w), e)`` -- the CPU engine's stream, so one seed gives both engines the
same draws. The drawn masses/inertias, frictions, damping, servo gains and gravity are per-world
leaves of the ``mjx.Model`` (``State.model``, with each world's weld ``eq_data``), batched with
:func:`mjx_backend.randomize.batch_mjx_model`: a new draw or a new key never retraces.

API of :class:`MjxEnv`: pure ``reset_state`` / ``step_state``; jitted ``jit_reset(key)`` /
``jit_step(state, action)`` (compiled once per scene, world count, randomisation and precision,
shared by envs of one built task); ``rollout(state, policy, ticks)`` and ``replay(state, actions)``
(one ``lax.scan`` each) -> (State, :class:`Transition` (T, W, ...)); ``compile_counts()``.
Every tick also computes each world's next-episode start (draws, start pose, observation) and
selects it where the episode ended -- the price of a branch-free auto-reset. Its data's pose fields
are the nominal start's (MuJoCo's kinematics at the robot's q0 and the props' nominal poses,
computed once on the host); ``reset_state`` runs ``mjx.kinematics`` on the drawn start.

Cameras (``cameras=``, as the CPU engine's: names of :func:`tasks.cameras.scene_cameras` or
named :class:`caliper_jax.rays.PinholeCamera` s) are rendered inside the jitted step by the JAX
ray engine from each world's MJX ``geom_xpos``/``geom_xmat`` (``xpos``/``xmat`` for a camera on a
body): ``State.info["images"]`` = {name: (W, height, width, 3) uint8} of the state's observation,
``info["final_images"]`` of ``final_obs``, and :class:`Transition` ``.images`` (T, W, ...) the
frames the policy saw, so they come out of the episode ``lax.scan``. Every tick then renders each
camera twice per world (the stepped state and the next episode's start, branch-free like the
reset itself); a rollout keeps T x W frames per camera in memory.

Precision: the mjx.Model takes JAX's default float (build the env under ``jax.enable_x64(True)``
for float64); the gate runs in the robot Model's dtype; observations are float32 on both engines.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.control.safety import gate, init_safety, safety_params, setpoint
from caliper_jax.errors import CaliperError
from caliper_jax.kinematics import body_poses
from caliper_jax.spatial import R_to_quat, quat_conj, quat_mul
from mjx_backend.randomize import batch_mjx_model
from mjx_backend.versions import import_mjx
from tasks import env_spec as S
from tasks import rewards as R
from tasks.env_common import (
    EnvShapes,
    _cached,
    _check_args,
    _reset_draws,
    check_draws,
    draw_shapes,
    resolve_task,
)
from tasks.predicates import carry_start, carry_ticks, carry_update, dwell_ticks, evaluator, held_mask, streak

mjx = import_mjx()

_DEFAULT_RANDOMIZATION = S.EnvRandomization()


class State(NamedTuple):
    """All worlds of an MjxEnv. Every leaf has a leading world axis (W, ...) but ``key``."""

    data: Any          # mjx.Data: simulation state (qpos, qvel, ctrl, eq_active, warm start, ...)
    model: dict        # {mjx.Model field: (W, ...)}: randomised fields and the grasp welds' eq_data
    safety: Any        # caliper_jax.control.safety.SafetyState, the gate's state
    held: Any          # (W,) int32 held prop index, -1: none
    success: Any       # (W,) bool success latched in the current episode
    carry: Any         # carry state of tasks.predicates.carry_update: 3 x (W, P)
    streak: Any        # (W,) int32 consecutive ticks the verdict has held, ending now
    tick: Any          # (W,) int32 control ticks into the current episode
    episode: Any       # (W,) int32 episode index of each world
    ret: Any           # (W,) float32 return of the current episode so far
    pos0: Any          # (W, P, 3) prop start centres of the current episode (world frame, m)
    obs: Any           # (W, obs_dim) float32, layout of tasks.env_spec.observation
    reward: Any        # (W,) float32 reward of the last tick
    terminated: Any    # (W,) bool: the last tick ended the episode by success
    truncated: Any     # (W,) bool: ... by the horizon or instability
    info: dict         # success, final_success, final_obs, final_return, final_length, unstable,
                       # gate_flags, randomization {field: (W, ...)} draws of the current episodes
    key: Any           # base PRNG key of the randomisation streams (not per world)
    target: Any = None  # (W, nq) gated joint targets of the last tick (the start pose after a reset)


class Transition(NamedTuple):
    """One tick of a rollout, every field (T, W, ...): the observation the policy saw, its action,
    and what the step returned (``final_obs``: the observation after physics, before any reset)."""

    obs: Any
    action: Any
    reward: Any
    terminated: Any
    truncated: Any
    success: Any
    final_success: Any
    final_obs: Any
    images: Any = None   # {camera: (T, W, height, width, 3) uint8} the frames of ``obs`` (None: no cameras)


def _put_model(mj, impl):
    """(mjx.Model, mjx.Data template) of a compiled MjModel, as :class:`mjx_backend.mjx_sim.MjxBackend`."""
    try:
        mx = mjx.put_model(mj, impl=impl)
    except NotImplementedError as exc:
        raise CaliperError(f"MJX ({impl or 'default'} impl) cannot run this task's scene: {exc}") from None
    d0 = mjx.make_data(mx, impl=impl)
    return mx, jax.tree_util.tree_map(lambda x: jnp.asarray(x) if isinstance(x, np.ndarray) else x, d0)


_POSE_FIELDS = ("xpos", "xquat", "xmat", "xipos", "ximat", "xanchor", "xaxis", "geom_xpos", "geom_xmat",
                "site_xpos", "site_xmat")


def _with_poses(d0, mj, qpos):
    """The data template ``d0`` with the pose fields of MuJoCo's kinematics at ``qpos`` (nq,): the
    nominal episode start an auto-reset starts from without running MJX's kinematics."""
    import mujoco

    md = mujoco.MjData(mj)
    md.qpos[:] = qpos
    mujoco.mj_kinematics(mj, md)
    out = {}
    for name in _POSE_FIELDS:
        leaf = getattr(d0, name, None)
        if leaf is not None and hasattr(md, name):
            out[name] = jnp.asarray(np.asarray(getattr(md, name)).reshape(leaf.shape), leaf.dtype)
    return d0.replace(**out)


class MjxEnv(EnvShapes):
    """``num_envs`` worlds of ``task`` (a Task, task file, zoo name or built TaskScene) on MJX.

    ``seed``: base of every world's randomisation stream. ``randomization``: an
    :class:`tasks.env_spec.EnvRandomization` (default: its defaults, as the CPU engine) or None.
    ``nthread`` is the CPU engine's and is ignored here. ``cameras``: as the CPU engine's (module
    doc; ``self.cameras`` the resolved tuple). Actions (W, nq) joint position targets;
    observations (W, obs_dim) float32."""

    engine = "mjx"

    def __init__(self, task, num_envs: int = 1, *, seed: int = 0,
                 randomization: S.EnvRandomization | None = _DEFAULT_RANDOMIZATION,
                 nthread: int | None = None, cameras=None):
        _check_args(num_envs, randomization, nthread, seed)
        self.task_scene = ts = resolve_task(task, mjx=True)
        self.task = ts.task
        self.num_envs = int(num_envs)
        self.layout = S.make_layout(ts)
        self.randomization = randomization = S.task_randomization(ts.task, randomization,
                                                                  _DEFAULT_RANDOMIZATION)
        self._check_scene(ts)
        self._host_tables(ts)
        self._mx, self._d0 = _put_model(ts.scene.mj, ts.scene.mjcf.options.mjx_impl)
        self._d0 = _with_poses(self._d0, ts.scene.mj, self._qpos0)
        self._device_tables()
        self._setup_cameras(cameras)
        self.action_low = np.asarray(ts.model.qpos_lower, np.float32)
        self.action_high = np.asarray(ts.model.qpos_upper, np.float32)
        # One compilation each, shared by every MjxEnv of the same built scene, world count,
        # randomisation and precision (their tables are equal); a new key or draw never retraces.
        key = ("mjx", self.num_envs, randomization, str(self._d0.qpos.dtype), self.cameras)
        (self._reset_jit, self.jit_step, self._rollout_jit, self._replay_jit,
         self._rollout_stateful_jit) = _cached(
            ts.scene, key, lambda: (jax.jit(self.reset_state), jax.jit(self.step_state),
                                    jax.jit(self._rollout, static_argnums=(1, 2)), jax.jit(self._replay),
                                    jax.jit(self._rollout_stateful, static_argnums=(2, 3))))
        self._seed = int(seed)
        self._state = None
        self._closed = False

    # ---- host-side setup -------------------------------------------------------------------------
    def _check_scene(self, ts) -> None:
        name, lay = self.task.name, ts.scene.layout
        if ts.scene.mjcf.actuators != "position":
            raise CaliperError(f"task {name}: the MJX engine drives position servos; the scene was built "
                               f"with actuators={ts.scene.mjcf.actuators!r}")
        if lay.free:
            raise CaliperError(f"task {name}: the MJX engine supports fixed-base robots only (the robot has "
                               f"{len(lay.free)} free joint(s))")
        if lay.nq != lay.nv:
            raise CaliperError(f"task {name}: the MJX engine needs nq == nv for the gate, got nq={lay.nq}, "
                               f"nv={lay.nv}")

    def _host_tables(self, ts) -> None:
        """Static index maps (NumPy) and the start state, props in task order."""
        L, lay, mj = self.layout, ts.scene.layout, ts.scene.mj
        names = L.prop_names
        self._prop_body = np.array([lay.prop_body[n] for n in names], np.int64)
        self._prop_geom = np.array([lay.prop_geom[n] for n in names], np.int64)
        self._prop_qpos = np.array([lay.prop_qposadr[n] + np.arange(7) for n in names], np.int64)
        self._prop_dof = np.array([lay.prop_dofadr[n] + np.arange(3) for n in names], np.int64)
        self._prop_qpos, self._prop_dof = self._prop_qpos.reshape(-1, 7), self._prop_dof.reshape(-1, 3)
        self._weld_eq = np.array([lay.weld_eq[n] for n in names] if lay.weld_eq else [], np.int64).reshape(-1)
        self._jaw_ours = ts.model.body_id(ts.gripper.joint)      # the jaw body in the robot Model
        self._q_to_qpos, self._v_to_dof, self._ctrl_to_q = lay.q_to_qpos, lay.v_to_dof, lay.ctrl_to_q
        q0 = np.asarray(ts.q0, np.float64)
        self._qpos0 = lay.qpos_from_q(q0[None], base=mj.qpos0)[0]
        vel0 = np.zeros(mj.nv)
        for prop in self.task.props:
            a = lay.prop_dofadr[prop.name]
            vel0[a:a + 6] = prop.velocity
        self._qvel0 = lay.qvel_from_v(np.zeros((1, L.nv)), self._qpos0[None], base=vel0)[0]
        self._ctrl0 = q0[lay.ctrl_to_q]
        self._q0_target = q0
        self._draw_shapes = draw_shapes(L, mj.nu)
        self._evaluate = None if self.task.success is None else evaluator(self.task.success, names)
        self._dwell = dwell_ticks(self.task, L.fps)
        self._carry_need = carry_ticks(L.fps)

    def _device_tables(self) -> None:
        """Nominal values of the per-world model leaves and the gate parameters (device arrays)."""
        mx = self._mx
        self._nominal = {n: (mx.opt.gravity if n == "gravity" else getattr(mx, n)) for n in
                         ("body_mass", "body_inertia", "geom_friction", "dof_damping", "actuator_gainprm",
                          "actuator_biasprm", "gravity", "eq_data")}
        self._safety = safety_params(self.task_scene.model, 1.0 / self.layout.fps)
        self._gdtype = self.task_scene.model.dtype

    def _setup_cameras(self, cameras) -> None:
        """The resolved cameras (:func:`tasks.cameras.resolve_cameras`) and the scene's ray scene."""
        from tasks.cameras import resolve_cameras

        self.cameras = cams = resolve_cameras(self.task_scene, cameras)
        self._rays = None
        if cams:
            from caliper_jax.rays import scene_from_mujoco

            mj = self.task_scene.scene.mj
            self._rays = _cached(self.task_scene.scene, "ray_scene", lambda: scene_from_mujoco(mj))

    def _images(self, d) -> dict:
        """{camera: (height, width, 3) uint8} of one world's MJX data ``d``."""
        from caliper_jax.rays import render
        from tasks.cameras import exclude_body

        return {c.name: render(self._rays, c, d, exclude_body=exclude_body(c))["rgb"] for c in self.cameras}

    # ---- one world (vmapped by the pure functions below) -----------------------------------------
    def _draws(self, key, world, episode) -> dict:
        if self.randomization is None:
            return {}
        return S.draw(self.randomization, jax_fold(key, world, episode), self._draw_shapes)

    def _leaves(self, draws: dict) -> dict:
        """{mjx.Model field: value} of one world for its draws (nominal * factor, as the CPU engine)."""
        nom = self._nominal
        out = {}

        def scaled(name, idx, f):
            base = nom[name]
            f = jnp.asarray(f, base.dtype)
            return base.at[idx].set(base[idx] * f.reshape(f.shape + (1,) * (base[idx].ndim - f.ndim)))

        if "prop_mass" in draws:
            out["body_mass"] = scaled("body_mass", self._prop_body, draws["prop_mass"])
            out["body_inertia"] = scaled("body_inertia", self._prop_body, draws["prop_mass"])
        if "prop_friction" in draws:
            out["geom_friction"] = scaled("geom_friction", (self._prop_geom, 0), draws["prop_friction"])
        if "damping" in draws:
            out["dof_damping"] = scaled("dof_damping", self._v_to_dof, draws["damping"])
        if "gain" in draws:
            out["actuator_gainprm"] = scaled("actuator_gainprm", (slice(None), 0), draws["gain"])
            out["actuator_biasprm"] = scaled("actuator_biasprm", (slice(None), slice(1, 3)), draws["gain"])
        if "gravity" in draws:
            out["gravity"] = nom["gravity"] * jnp.asarray(draws["gravity"], nom["gravity"].dtype)
        if len(self._weld_eq):
            out["eq_data"] = nom["eq_data"]          # inactive until a grasp writes its row
        return out

    def _start_qpos(self, draws: dict):
        """(mj nq,) start positions: robot at q0, props at spawn moved by the drawn xy and yaw."""
        qpos = jnp.asarray(self._qpos0, self._d0.qpos.dtype)
        if "prop_xy" in draws:
            idx = self._prop_qpos[:, :2]
            qpos = qpos.at[idx].add(jnp.asarray(draws["prop_xy"], qpos.dtype))
        if "prop_yaw" in draws:
            idx = self._prop_qpos[:, 3:]
            yaw = S.yaw_quat(jnp, jnp.asarray(draws["prop_yaw"], qpos.dtype))
            qpos = qpos.at[idx].set(quat_mul(yaw, qpos[idx]))
        return qpos

    def _read(self, d) -> dict:
        """One world's q, v, prop pos/quat/vel (P, 3/4/3), jaw pos (3,), rot (3, 3), quat (4,).

        The jaw pose is the robot Model's forward kinematics at ``q`` (the gripper joint's body,
        the body MuJoCo's ``xpos``/``xmat`` give), not ``d.xpos``: the env never runs MJX's whole
        kinematics just to read one body (a third of the step's compile, measured by
        ``benchmarks/bench_mjx_compile.py``)."""
        props = d.qpos[self._prop_qpos]
        q = d.qpos[self._q_to_qpos]
        R, p = body_poses(self.task_scene.model, q.astype(self._gdtype))
        rot, pos = R[self._jaw_ours].astype(d.qpos.dtype), p[self._jaw_ours].astype(d.qpos.dtype)
        return {"q": q, "v": d.qvel[self._v_to_dof], "pos": props[:, :3],
                "quat": props[:, 3:], "vel": d.qvel[self._prop_dof], "jaw_pos": pos,
                "jaw_rot": rot, "jaw_quat": R_to_quat(rot)}

    def _observe(self, s: dict, held):
        obs = S.observation(self.layout, jnp, s["q"], s["v"], held, s["pos"], s["quat"], s["vel"],
                            s["jaw_pos"])
        return obs.astype(jnp.float32)

    def _reset_world(self, key, world, episode, draws=None, kinematics: bool = True) -> State:
        """A new episode of one world (``key`` None in the result; the caller keeps the base key),
        from its stream's draws or the given ``draws`` {field: (...)}. ``kinematics`` False (the
        step's auto-reset, no cameras): the data's pose fields stay the nominal start's (the next
        ``mjx.step`` recomputes them; the observation never reads them)."""
        if draws is None:
            draws = self._draws(key, world, episode)
        leaves = self._leaves(draws)
        d0 = self._d0
        qpos = self._start_qpos(draws)
        eq_active = d0.eq_active
        if len(self._weld_eq):
            eq_active = eq_active.at[self._weld_eq].set(False)
        d = d0.replace(qpos=qpos, qvel=jnp.asarray(self._qvel0, qpos.dtype),
                       ctrl=jnp.asarray(self._ctrl0, d0.ctrl.dtype), eq_active=eq_active)
        if kinematics or self.cameras:
            d = mjx.kinematics(self._mx, d)
        s = self._read(d)
        held = jnp.asarray(-1, jnp.int32)
        f32 = jnp.float32
        no = jnp.asarray(False)
        obs = self._observe(s, held)
        info = {"success": no, "final_success": no, "final_obs": jnp.zeros_like(obs),
                "final_return": jnp.zeros((), f32), "final_length": jnp.zeros((), jnp.int32), "unstable": no,
                "gate_flags": jnp.zeros((), jnp.int32), "randomization": draws,
                "reward_terms": {t.name: jnp.zeros((), f32) for t in self._reward_active}}
        if self.cameras:
            info["images"] = self._images(d)
            info["final_images"] = jax.tree_util.tree_map(jnp.zeros_like, info["images"])
        return State(data=d, model=leaves, safety=init_safety(s["q"].astype(self._gdtype), self.layout.nv),
                     held=held, success=no, carry=carry_start(jnp, (self.layout.nprop,)),
                     streak=jnp.zeros((), jnp.int32), tick=jnp.zeros((), jnp.int32),
                     episode=jnp.asarray(episode, jnp.int32), ret=jnp.zeros((), f32), pos0=s["pos"], obs=obs,
                     reward=jnp.zeros((), f32), terminated=no, truncated=no, info=info, key=None,
                     target=jnp.asarray(self._q0_target, self._gdtype))

    def _grasp(self, s: dict, held, target, eq_active, eq_data):
        """(new held, eq_active, eq_data) of one world after the grasp rule on gated ``target``."""
        L = self.layout
        cand = S.grasp_candidates(L, jnp, s["jaw_pos"], s["jaw_rot"], s["pos"])
        new = S.grasp_update(jnp, held, S.closing(L, target), cand, L.friction)
        if not len(self._weld_eq):                       # friction grasp: physics holds the prop
            return new, eq_active, eq_data
        props = jnp.arange(L.nprop)
        took = (new != held) & (new >= 0) & (props == new)                      # (P,)
        rel_pos = jnp.einsum("ji,pj->pi", s["jaw_rot"], s["pos"] - s["jaw_pos"])
        rel_quat = quat_mul(quat_conj(s["jaw_quat"])[None], s["quat"])
        rel_quat = rel_quat / jnp.linalg.norm(rel_quat, axis=-1, keepdims=True)
        rows = eq_data[self._weld_eq]
        fresh = jnp.concatenate([jnp.zeros_like(rows[:, :3]), rel_pos.astype(rows.dtype),
                                 rel_quat.astype(rows.dtype), rows[:, 10:]], axis=-1)
        eq_data = eq_data.at[self._weld_eq].set(jnp.where(took[:, None], fresh, rows))
        eq_active = eq_active.at[self._weld_eq].set(props == new)
        return new, eq_active, eq_data

    def _tick_world(self, m, w: State, action, key, world) -> State:
        """One control tick of one world with its model ``m`` (auto-reset included)."""
        L = self.layout
        d = w.data
        s = self._read(d)
        cmd, safety, warn = gate(self._safety, w.safety, setpoint(jnp.asarray(action, self._gdtype)),
                                 s["q"].astype(self._gdtype), "position")
        target = cmd.q
        held, eq_active, leaves = w.held, d.eq_active, dict(w.model)
        if L.nprop and len(self._weld_eq):
            held, eq_active, leaves["eq_data"] = self._grasp(s, held, target, eq_active, m.eq_data)
            m = m.replace(eq_data=leaves["eq_data"])
        elif L.nprop:                                     # friction grasp: the held flag only
            held, _, _ = self._grasp(s, held, target, eq_active, m.eq_data)
        d = d.replace(ctrl=target[self._ctrl_to_q].astype(d.ctrl.dtype), eq_active=eq_active)
        d = jax.lax.fori_loop(0, L.substeps, lambda _, x: mjx.step(m, x), d)
        if self.cameras:                                  # the renderer reads geom poses
            d = mjx.kinematics(m, d)
        unstable = ~(jnp.all(jnp.isfinite(d.qpos)) & jnp.all(jnp.isfinite(d.qvel)))
        s = self._read(d)
        obs = self._observe(s, held)
        held_now = held_mask(jnp, held, L.nprop)
        carry, carried = carry_update(jnp, w.carry, held_now, s["pos"], w.pos0, self._carry_need)
        now = jnp.asarray(False) if self._evaluate is None else \
            jnp.asarray(self._evaluate(s["pos"], w.pos0, s["vel"], held_now, carried,
                                       R.grip_point(L, jnp, s["jaw_pos"], s["jaw_rot"])), bool)
        now = now & ~unstable
        run = streak(jnp, w.streak, now)
        fired = (run >= self._dwell) & ~w.success
        success = w.success | fired
        tick = w.tick + 1
        terms = self._reward_terms(s, w, held, target, unstable)
        reward = R.total(self.task.reward, fired, terms, jnp)
        ret = w.ret + reward
        truncated = ~fired & ((tick >= L.horizon) | unstable)
        done = fired | truncated
        final_images = self._images(d) if self.cameras else None
        stepped = w._replace(data=d, model=leaves, safety=safety, held=held, success=success,
                             carry=carry, streak=run, tick=tick,
                             ret=ret, obs=obs, key=None, target=target,
                             info=dict(w.info, images=final_images) if self.cameras else w.info)
        fresh = self._reset_world(key, world, w.episode + 1, kinematics=False)
        nxt = jax.tree_util.tree_map(lambda a, b: jnp.where(done, a, b), fresh, stepped)
        info = dict(nxt.info, final_success=success & done, final_obs=obs,
                    final_return=jnp.where(done, ret, 0.0).astype(jnp.float32),
                    final_length=jnp.where(done, tick, 0).astype(jnp.int32), unstable=unstable,
                    gate_flags=jnp.asarray(warn.flags, jnp.int32), reward_terms=terms)
        if self.cameras:
            info["final_images"] = final_images
        info["success"] = nxt.success
        return nxt._replace(reward=reward, terminated=fired, truncated=truncated, info=info)

    @property
    def _reward_active(self) -> tuple:
        return () if self.task.reward is None else self.task.reward.active

    def _reward_terms(self, s: dict, w: State, held, target, unstable) -> dict:
        """{term: () float32 weighted value} of one world after its tick (0 when unstable)."""
        if not self._reward_active:
            return {}
        ctx = R.context(self.task, self.layout, jnp, jaw_pos=s["jaw_pos"], jaw_rot=s["jaw_rot"], pos=s["pos"],
                        pos0=w.pos0, held=held, target=target, prev_target=w.target)
        return {k: jnp.where(unstable, 0.0, v).astype(jnp.float32)
                for k, v in R.terms(self.task.reward, ctx, jnp).items()}

    # ---- pure functions over all worlds ------------------------------------------------------------
    def reset_state(self, key, episode=None, draws=None) -> State:
        """New episodes in every world -> State. ``key``: base PRNG key of the randomisation
        streams; ``episode`` (W,) int: each world's episode index (default 0); ``draws``: None (the
        streams' draws) or {field: (W, ...) float32} to start from (exactly the fields the env
        randomises; :func:`tasks.env_common.check_draws` checks them on the host)."""
        W = self.num_envs
        episode = jnp.zeros(W, jnp.int32) if episode is None else jnp.asarray(episode, jnp.int32)
        worlds = jnp.arange(W, dtype=jnp.int32)
        state = jax.vmap(self._reset_world, in_axes=(None, 0, 0, 0))(key, worlds, episode, draws)
        return state._replace(key=key)

    def jit_reset(self, key, episode=None, draws=None) -> State:
        """:meth:`reset_state`, jitted (one compilation for any key and episode indices, one more
        for explicit draws); ``draws`` are checked here (:func:`tasks.env_common.check_draws`)."""
        W = self.num_envs
        episode = jnp.zeros(W, jnp.int32) if episode is None else jnp.asarray(episode, jnp.int32)
        if draws is not None:
            draws = {k: jnp.asarray(v) for k, v in
                     check_draws(draws, self.randomization, self._draw_shapes, W).items()}
        return self._reset_jit(key, episode, draws)

    def compile_counts(self) -> dict:
        """{function: number of compilations so far} of the jitted reset, step, rollout and replay
        (shared by the envs of one scene and configuration): new keys or draws never add one."""
        fns = {"reset": self._reset_jit, "step": self.jit_step, "rollout": self._rollout_jit,
               "replay": self._replay_jit, "rollout_stateful": self._rollout_stateful_jit}
        return {k: int(f._cache_size()) for k, f in fns.items()}

    def step_state(self, state: State, action) -> State:
        """One control tick of every world -> State. ``action`` (W, nq): joint position targets."""
        W = self.num_envs
        mxb, m_axes = batch_mjx_model(self._mx, state.model, W)
        axes = State(*([0] * len(State._fields)))._replace(key=None)
        worlds = jnp.arange(W, dtype=jnp.int32)
        out = jax.vmap(self._tick_world, in_axes=(m_axes, axes, 0, None, 0))(
            mxb, state._replace(key=None), action, state.key, worlds)
        return out._replace(key=state.key)

    def _scan(self, state: State, act, xs, length, pstate=()):
        """``lax.scan`` of ``act(pstate, state, x) -> (pstate, action)`` then a tick -> (State,
        pstate, Transition); ``pstate`` rides in the carry (a stateful policy's state)."""
        def body(carry, x):
            s, ps = carry
            ps, a = act(ps, s, x)
            n = self.step_state(s, a)
            return (n, ps), Transition(s.obs, a, n.reward, n.terminated, n.truncated, n.info["success"],
                                       n.info["final_success"], n.info["final_obs"], s.info.get("images"))
        (s, ps), tr = jax.lax.scan(body, (state, pstate), xs, length=length)
        return s, ps, tr

    def _rollout(self, state, policy, ticks):
        s, _, tr = self._scan(state, lambda ps, s, _: (ps, policy(s.obs)), None, ticks)
        return s, tr

    def _rollout_stateful(self, state, pstate, policy, ticks):
        def act(ps, s, _):
            images = s.info.get("images")         # rendered cameras go to the policy when there are some
            extra = () if images is None else (images,)
            return policy.step(ps, s.obs, s.terminated | s.truncated, *extra)
        s, ps, tr = self._scan(state, act, None, ticks, pstate)
        return s, tr, ps

    def _replay(self, state, actions):
        s, _, tr = self._scan(state, lambda ps, s, a: (ps, a), actions, None)
        return s, tr

    def rollout(self, state: State, policy, ticks: int, policy_state=None):
        """``ticks`` control ticks of every world as one jitted ``lax.scan``.

        ``policy``: a pure JAX function ``obs (W, obs_dim) -> action (W, nq)`` (hashable; a new
        function object compiles anew) -> (final State, Transition (T, W, ...)); or a stateful
        policy with ``init(num_worlds)`` and ``step(pstate, obs, reset (W,) bool[, images]) ->
        (pstate, action)`` (``images``: the rendered ``{camera: (W, H, W, 3)}``, given when the env has
        cameras; e.g. :meth:`learn.bundle.TrainedPolicy.jax_policy`: chunks and history inside
        the scan; ``reset`` is the previous tick's ``terminated | truncated``) -> (final State,
        Transition, final policy state). ``policy_state``: continue from it (default
        ``policy.init(num_envs)``)."""
        if not callable(policy) and not _stateful(policy):
            raise CaliperError(f"rollout: policy must be callable obs -> action, or have init() and step(), "
                               f"got {type(policy).__name__}")
        if not isinstance(ticks, (int, np.integer)) or ticks < 1:
            raise CaliperError(f"rollout: ticks must be an integer >= 1, got {ticks!r}")
        if _stateful(policy):
            pstate = policy.init(self.num_envs) if policy_state is None else policy_state
            return self._rollout_stateful_jit(state, pstate, policy, int(ticks))
        if policy_state is not None:
            raise CaliperError("rollout: policy_state is for a stateful policy (with init() and step())")
        return self._rollout_jit(state, policy, int(ticks))

    def replay(self, state: State, actions):
        """An open-loop action sequence (T, W, nq) as one jitted ``lax.scan`` -> (State, Transition)."""
        actions = jnp.asarray(actions)
        if actions.ndim != 3 or actions.shape[1:] != (self.num_envs, self.layout.nq):
            raise CaliperError(f"replay: expected actions (T, {self.num_envs}, {self.layout.nq}), "
                               f"got {actions.shape}")
        return self._replay_jit(state, actions)

    # ---- NumPy face (the CPU engine's API) -----------------------------------------------------------
    @property
    def state(self) -> State | None:
        """The State the NumPy face holds (None before ``reset``)."""
        return self._state

    def reset(self, seed: int | None = None, options: dict | None = None):
        """New episodes in every world -> (obs (W, obs_dim) float32, info). ``seed`` restarts the
        randomisation streams at episode 0; None continues them (episode 0 on the first reset).
        ``options={"draws": {field: (W, ...)}}``: start from these draws (as the CPU engine's)."""
        self._check_open()
        given = _reset_draws(options, self.randomization, self._draw_shapes, self.num_envs)
        if seed is not None:
            if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
                raise CaliperError(f"seed must be an integer or None, got {seed!r}")
            self._seed, self._state = int(seed), None
        episode = None if self._state is None else self._state.episode + 1
        self._state = self.jit_reset(jax.random.PRNGKey(self._seed), episode, given)
        return np.asarray(self._state.obs), self._host_info(self._state)

    def step(self, action):
        """One control tick of every world -> (obs, reward (W,) float32, terminated (W,), truncated
        (W,), info), as :meth:`tasks.env.VecEnv.step`. ``action`` (W, nq): position targets."""
        self._check_open()
        if self._state is None:
            raise CaliperError("step() before reset(): call reset() first")
        W, nq = self.num_envs, self.layout.nq
        action = np.asarray(action)
        if action.shape != (W, nq) or not np.issubdtype(action.dtype, np.number):
            raise CaliperError(f"action: expected a numeric array of shape ({W}, {nq}) (num_envs, joint "
                               f"position targets of {', '.join(self.task_scene.model.joint_names)}), got "
                               f"{action.dtype} {action.shape}")
        self._state = st = self.jit_step(self._state, jnp.asarray(action, self._gdtype))
        info = self._host_info(st)
        i = st.info
        info["final_obs"] = np.asarray(i["final_obs"])
        info["unstable"] = np.asarray(i["unstable"])
        R.check_finite(info["reward_terms"], " (world index)")
        if self.cameras:
            info["final_images"] = {k: np.asarray(v) for k, v in i["final_images"].items()}
        info["episode"].update(final_success=np.asarray(i["final_success"]),
                               final_return=np.asarray(i["final_return"], np.float64),
                               final_length=np.asarray(i["final_length"]))
        return (np.asarray(st.obs), np.asarray(st.reward), np.asarray(st.terminated),
                np.asarray(st.truncated), info)

    def _host_info(self, st: State) -> dict:
        i = st.info
        out = {"success": np.asarray(i["success"]), "final_success": np.asarray(i["final_success"]),
               "held": np.asarray(st.held), "gate_flags": np.asarray(i["gate_flags"]),
               "randomization": {k: np.asarray(v) for k, v in i["randomization"].items()},
               "episode": {"index": np.asarray(st.episode), "tick": np.asarray(st.tick),
                           "return": np.asarray(st.ret, np.float64)},
               "reward_terms": {k: np.asarray(v) for k, v in i["reward_terms"].items()}}
        if self.cameras:
            out["images"] = {k: np.asarray(v) for k, v in i["images"].items()}
        return out

    # ---- lifecycle -----------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise CaliperError("this MjxEnv is closed")

    def close(self) -> None:
        """Drop the held state (idempotent)."""
        self._closed, self._state = True, None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return f"MjxEnv({self.task.name!r}, num_envs={self.num_envs})"


def _stateful(policy) -> bool:
    return callable(getattr(policy, "init", None)) and callable(getattr(policy, "step", None))


def jax_fold(key, world, episode):
    """The key of episode ``episode`` of world ``world``: ``fold_in(fold_in(key, world), episode)``."""

    return jax.random.fold_in(jax.random.fold_in(key, world), episode)


__all__ = ["MjxEnv", "State", "Transition"]

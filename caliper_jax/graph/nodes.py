"""The node registry: every node type's typed ports, its parameters and its run function.

Each COMPUTE node is a thin call of one engine function (no math here); its run function takes
``(inputs, params, ctx)`` -- input port values, the parameters with defaults filled in, and the run
context (``ctx.out_dir`` for nodes that write files) -- and returns ``{output port: value}``.

Port types and the Python values that travel on them:

=========== ===========================================================================
Model       :class:`caliper_jax.model.Model`
Config      joint positions, NumPy (nq,)
Pose        4x4 row-major ``T_world_frame``, NumPy (4, 4)
Path        joint-space waypoints, NumPy (n, nq)
Trajectory  a timed motion: the engine's Trajectory / SplineTrajectory (``.sample``, ``.duration``)
Samples     rows ``{"times" (n,), "q" (n, nq), ...}`` of NumPy arrays (a rollout, a sampled motion)
Dataset     the root directory of a LeRobot v3 dataset (str)
Report      a JSON-able dict (findings, summaries)
Scalar      float; ``Bool`` bool; ``Text`` str
Any         (sink inputs only) accepts every type
=========== ===========================================================================
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

PORT_TYPES = ("Model", "Config", "Pose", "Path", "Trajectory", "Samples", "Dataset", "Report", "Scalar",
              "Bool", "Text", "Any")
REQUIRED = object()   # the default of a parameter that must be given


@dataclass(frozen=True)
class ParamSpec:
    """A parameter: ``kind`` (robot, str, float, int, bool, vector, pose, choice, boxes, spheres,
    path), its ``default`` (``REQUIRED``: must be given; None: optional), a range ``low``..``high``
    (``positive``: > 0), ``choices`` and a fixed vector ``length``."""

    kind: str
    default: object = None
    doc: str = ""
    low: float | None = None
    high: float | None = None
    positive: bool = False
    choices: tuple = ()
    length: int | None = None

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


@dataclass(frozen=True)
class NodeSpec:
    """A node type: ``inputs`` / ``outputs`` {port: type}, ``optional`` inputs, ``params``,
    ``category`` (source, compute, sink), ``doc`` and ``run``. ``needs(params)`` -> the
    optional inputs that the given parameters make required."""

    inputs: dict
    outputs: dict
    params: dict
    run: Callable
    category: str = "compute"
    doc: str = ""
    optional: frozenset = frozenset()
    needs: Callable | None = None
    engine: str = ""

    def required_inputs(self, params: dict) -> list[str]:
        extra = set(self.needs(params)) if self.needs else set()
        return [p for p in self.inputs if p not in self.optional or p in extra]

    def describe(self) -> dict:
        """JSON-able: the Studio's palette."""
        return {"category": self.category, "doc": self.doc, "engine": self.engine,
                "inputs": dict(self.inputs), "outputs": dict(self.outputs), "optional": sorted(self.optional),
                "params": {k: {"kind": p.kind, "required": p.required,
                               "default": None if p.required else _jsonable(p.default), "doc": p.doc,
                               **({"choices": list(p.choices)} if p.choices else {})}
                           for k, p in self.params.items()}}


def _jsonable(v):
    if isinstance(v, tuple):
        return list(v)
    return v


# ---- parameter checks --------------------------------------------------------------------------

def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _numbers(value, n: int | None) -> bool:
    return (isinstance(value, list) and (n is None or len(value) == n) and len(value) > 0
            and all(_is_number(x) for x in value))


def check_param(spec: ParamSpec, value) -> str | None:
    """Why ``value`` is not a valid value of ``spec`` (None: it is)."""
    kind = spec.kind
    if kind in ("str", "path"):
        if not isinstance(value, str) or (kind == "path" and not value):
            return f"expected a {'non-empty ' if kind == 'path' else ''}string, got {value!r}"
    elif kind == "robot":
        if not isinstance(value, str) or not value:
            return f"expected a registry robot name or a robot file path, got {value!r}"
        import robots

        if not Path(value).is_file() and robots.canonical(value) not in robots.names():
            import difflib

            close = difflib.get_close_matches(value.lower(), robots.names(), n=3, cutoff=0.6)
            hint = f"did you mean {' or '.join(close)}? " if close else ""
            return (f"unknown robot {value!r}: not a file and not a registry name ({hint}known: "
                    f"{', '.join(robots.names())})")
    elif kind == "bool":
        if not isinstance(value, bool):
            return f"expected true or false, got {value!r}"
    elif kind in ("float", "int"):
        if not _is_number(value) or (kind == "int" and (not isinstance(value, int))):
            return f"expected {'an integer' if kind == 'int' else 'a finite number'}, got {value!r}"
        if spec.positive and not value > 0:
            return f"must be > 0, got {value!r}"
        if spec.low is not None and value < spec.low:
            return f"must be >= {spec.low:g}, got {value!r}"
        if spec.high is not None and value > spec.high:
            return f"must be <= {spec.high:g}, got {value!r}"
    elif kind == "choice":
        if value not in spec.choices:
            return f"expected one of {', '.join(map(str, spec.choices))}, got {value!r}"
    elif kind == "vector":
        if not _numbers(value, spec.length):
            size = f"{spec.length} " if spec.length else ""
            return f"expected a list of {size}finite numbers, got {value!r}"[:200]
    elif kind == "pose":
        nested = isinstance(value, list) and len(value) == 4 and all(isinstance(r, list) for r in value)
        rows = value if nested else None
        flat = [x for r in rows for x in r] if rows else value
        if not _numbers(flat, 16):
            return f"expected 16 numbers (row-major 4x4 T_world_frame) or a 4x4 list, got {value!r}"[:200]
        T = np.asarray(flat, np.float64).reshape(4, 4)
        R = T[:3, :3]
        if (np.abs(T[3] - [0, 0, 0, 1]).max() > 1e-9 or np.abs(R @ R.T - np.eye(3)).max() > 1e-6
                or np.linalg.det(R) < 0):
            return "not a rigid transform (rotation not orthonormal or last row not 0 0 0 1)"
    elif kind in ("boxes", "spheres"):
        n = 6 if kind == "boxes" else 4
        layout = "[cx, cy, cz, hx, hy, hz]" if kind == "boxes" else "[cx, cy, cz, r]"
        if not isinstance(value, list) or not all(_numbers(v, n) for v in value):
            return f"expected a list of {layout} lists, got {value!r}"[:200]
        if any(x <= 0 for v in value for x in v[3:]):
            return f"sizes must be > 0 ({layout})"
    return None


# ---- run helpers -------------------------------------------------------------------------------

def _pose(value) -> np.ndarray:
    return np.asarray(value, np.float64).reshape(4, 4)


def _limits(model):
    from caliper_jax.motion import MotionLimits

    return MotionLimits.from_model(model)


def _frame(model, params):
    from caliper_jax.ik.api import resolve_frame

    return resolve_frame(model, params.get("frame"))


def _config(model, value, what: str) -> np.ndarray:
    from caliper_jax.errors import CaliperError

    q = np.asarray(value, np.float64)
    if q.shape != (model.nq,) or not np.all(np.isfinite(q)):
        raise CaliperError(f"{what}: expected {model.nq} finite values for {model.name!r}, "
                           f"got shape {q.shape}")
    return q


# ---- sources -----------------------------------------------------------------------------------

def run_load_robot(inputs, params, ctx):
    from caliper_jax.loading import load

    return {"model": load(params["robot"], mimic=params["mimic"])}


def run_start_config(inputs, params, ctx):
    model = inputs["model"]
    return {"q": _config(model, params["q"], "param q")}


def run_named_config(inputs, params, ctx):
    from caliper_jax.configuration import neutral
    from caliper_jax.ik import default_seed

    model = inputs["model"]
    name = params["name"]
    if name == "neutral":
        q = np.asarray(neutral(model), np.float64)
    elif name == "mid":
        q = np.asarray(default_seed(model), np.float64)
    else:   # neutral clipped into the joint limits (what ``caliper move`` starts from)
        q = np.clip(np.asarray(neutral(model), np.float64), _limits(model).lower, _limits(model).upper)
    return {"q": q}


def run_goal_pose(inputs, params, ctx):
    from caliper_jax import api

    if params.get("pose") is not None:
        T = _pose(params["pose"])
    else:
        model = inputs["model"]
        frame_idx, _ = _frame(model, params)
        T = api.fk(model, _config(model, inputs["q"], "input q"))[frame_idx]
    T = np.array(T, np.float64)
    T[:3, 3] += np.asarray(params["offset"], np.float64)
    return {"pose": T}


def run_load_dataset(inputs, params, ctx):
    from caliper_jax.dataset.reader import LeRobotReader

    root = ctx.resolve(params["path"], "param path")
    LeRobotReader(root)   # fails now (naming the node) when it is not a dataset
    return {"dataset": str(root)}


# ---- compute -----------------------------------------------------------------------------------

def run_fk(inputs, params, ctx):
    from caliper_jax import api

    model = inputs["model"]
    frame_idx, _ = _frame(model, params)
    return {"pose": api.fk(model, _config(model, inputs["q"], "input q"))[frame_idx]}


def run_ik(inputs, params, ctx):
    from caliper_jax import ik as ik_pkg
    from caliper_jax.errors import CaliperError

    model = inputs["model"]
    seed_q = inputs.get("seed")
    sol = ik_pkg.ik(model, inputs["target"], frame=params.get("frame"), seed_q=seed_q, key=params["seed"],
                    position_only=params["position_only"])
    if params["require_success"] and not bool(sol.success):
        raise CaliperError(f"IK did not converge (residual {float(sol.pos_residual):.3g} m / "
                           f"{float(sol.rot_residual):.3g} rad); set require_success false to pass it on")
    return {"q": np.asarray(sol.q), "success": bool(sol.success),
            "residual": float(sol.pos_residual)}


def run_move_j(inputs, params, ctx):
    from caliper_jax.motion import move_j

    model = inputs["model"]
    start = _config(model, inputs["start"], "input start")
    traj = move_j(start, _config(model, inputs["goal"], "input goal"), _limits(model), params.get("duration"))
    return {"trajectory": traj, "duration": float(traj.duration)}


def run_move_l(inputs, params, ctx):
    from caliper_jax.motion import move_l

    model = inputs["model"]
    start = _config(model, inputs["start"], "input start")
    mv = move_l(model, start, inputs["target"], frame=params.get("frame"), screw=params["screw"],
                position_only=params["position_only"], dt=params["dt"])
    return {"trajectory": mv.trajectory, "duration": float(mv.report.duration), "report": mv.report.to_dict()}


def _collision_model(model, params):
    from caliper_jax.collision import build_collision_model
    from caliper_jax.collision.geometry import box, ground, sphere

    obstacles = [box(b[:3], b[3:], name=f"box{i}") for i, b in enumerate(params["boxes"])]
    obstacles += [sphere(s[:3], s[3], name=f"sphere{i}") for i, s in enumerate(params["spheres"])]
    if params.get("ground") is not None:
        obstacles.append(ground(params["ground"]))
    return build_collision_model(model, obstacles, srdf=None)


def run_plan(inputs, params, ctx):
    from caliper_jax.errors import CaliperError
    from caliper_jax.planning import plan

    model = inputs["model"]
    res = plan(model, _collision_model(model, params), _config(model, inputs["goal"], "input goal"),
               _config(model, inputs["start"], "input start"), planner=params["planner"], seed=params["seed"],
               resolution=params["resolution"], margin=params["margin"], step=params["step"],
               max_iterations=params.get("max_iterations"), smooth=params["smooth"])
    if not res.success:
        raise CaliperError(f"{res.status}: {res.reason}")
    return {"path": res.waypoints, "length": float(res.length), "report": res.to_dict()}


def run_collision_check(inputs, params, ctx):
    from caliper_jax.collision import api as collision_api

    model = inputs["model"]
    q = _config(model, inputs["q"], "input q")
    report = collision_api.check(model, _collision_model(model, params), q, margin=params["margin"])
    distance = report["min_distance"]
    return {"in_collision": bool(report["in_collision"]), "report": report,
            "min_distance": float("inf") if distance is None else float(distance)}


def run_retime(inputs, params, ctx):
    from caliper_jax.planning import plan_trajectory

    traj = plan_trajectory(inputs["model"], inputs["path"], method=params["method"])
    return {"trajectory": traj, "duration": float(traj.duration)}


def _rows(trajectory, dt: float, what: str = "param dt"):
    """``trajectory.sample_uniform(dt)`` after its row count (duration / dt) is checked against the
    steps budget -- a dt of 1e-12 is refused before a single row is allocated."""
    from caliper_jax import limits

    duration = float(trajectory.duration)
    limits.check("steps", duration / dt + 1, f"{what} {dt:g} over a {duration:g} s trajectory (rows)")
    return trajectory.sample_uniform(dt)


def run_sample(inputs, params, ctx):
    rows = _rows(inputs["trajectory"], params["dt"])
    times, q, qd, qdd = (np.asarray(x, np.float64) for x in rows)
    return {"samples": {"times": times, "q": q, "qd": qd, "qdd": qdd}}


def run_lint(inputs, params, ctx):
    from caliper_jax.motion import lint_model_path

    model = inputs["model"]
    rows = _rows(inputs["trajectory"], params["dt"])
    times, q, qd, qdd = (np.asarray(x, np.float64) for x in rows)
    report, findings, _ = lint_model_path(model, times, q, qd, qdd, frame=params.get("frame"))
    errors = sum(1 for f in findings if f.severity == "Error")
    return {"report": {"path": report.to_dict(), "findings": [f.to_dict() for f in findings]},
            "errors": float(errors), "ok": errors == 0}


def run_simulate(inputs, params, ctx):
    from caliper_jax import api

    model = inputs["model"]
    from caliper_jax import limits

    limits.check("steps", params["duration"] / params["dt"], "param duration / dt (simulation steps)")
    t, qs, vs, energy = api.simulate_passive(model, _config(model, inputs["q0"], "input q0"), None,
                                             params["duration"], params["dt"], params["integrator"])
    return {"samples": {"times": t, "q": qs, "v": vs, "energy": energy}, "q_final": qs[-1],
            "energy_drift": float(np.max(np.abs(energy - energy[0])))}


def _control_setup(model, params):
    from caliper_jax import control

    gains = {k: params[k] for k in ("kp", "kd") if params.get(k) is not None}
    return control.control_params(model, dt=params["dt"], **gains), control.safety_params(model, params["dt"])


def run_control(inputs, params, ctx):
    from caliper_jax import control

    model = inputs["model"]
    start = _config(model, inputs["start"], "input start")
    goal = _config(model, inputs["goal"], "input goal")
    cparams, safety = _control_setup(model, params)
    source = control.goal_source(start, goal, _limits(model))
    res = control.simulate(model, source, start, params["ticks"], params=cparams, safety=safety,
                           seed=params["seed"])
    samples = {"times": res.times, "q": res.q, "v": res.v, "command": res.command, "tau": res.tau}
    return {"samples": samples, "q_final": np.asarray(res.q_final), "estopped": bool(res.estopped),
            "report": {"warnings": res.warnings(), "estopped": bool(res.estopped),
                       "max_abs_tau": np.asarray(res.max_abs_tau).tolist()}}


def run_record(inputs, params, ctx):
    import jax

    from caliper_jax import control

    model = inputs["model"]
    start = _config(model, inputs["start"], "input start")
    goal = _config(model, inputs["goal"], "input goal")
    root = ctx.resolve(params["out"], "param out")
    cparams, safety = _control_setup(model, params)
    source = jax.vmap(lambda a, b: control.goal_source(a, b, _limits(model)))(start[None], goal[None])
    res = control.record(root, model, source, start[None], params["ticks"], params["fps"], params=cparams,
                         safety=safety, task=params["task"], seed=params["seed"], source_batched=True,
                         progress=False)
    return {"dataset": str(root), "q_final": np.asarray(res.q_final[0])}


def run_dataset_doctor(inputs, params, ctx):
    from doctors.dataset.doctor import diagnose

    report = diagnose(inputs["dataset"], progress=False)
    out = report.to_dict()
    errors = sum(1 for f in report.findings if f.severity == "Error")
    return {"report": out, "errors": float(errors), "ok": errors == 0}


# ---- sinks -------------------------------------------------------------------------------------

def run_report(inputs, params, ctx):
    return {"value": inputs["value"]}


def run_scope(inputs, params, ctx):
    from caliper_jax.errors import CaliperError

    samples = inputs["samples"]
    signal = params["signal"]
    if signal not in samples:
        raise CaliperError(f"param signal: {signal!r} is not in the samples (have {', '.join(samples)})")
    values = np.asarray(samples[signal])
    j = params["joint"]
    if values.ndim == 2:
        if not 0 <= j < values.shape[1]:
            raise CaliperError(f"param joint: {j} is out of range (0..{values.shape[1] - 1})")
        values = values[:, j]
    return {"times": np.asarray(samples["times"]), "values": values}


# ---- the registry ------------------------------------------------------------------------------

P = ParamSpec
_FRAME = P("str", None, "frame name (default: the robot's tool frame)")


_OBSTACLES = {"boxes": P("boxes", [], "box obstacles [cx, cy, cz, hx, hy, hz]"),
              "spheres": P("spheres", [], "sphere obstacles [cx, cy, cz, r]"),
              "ground": P("float", None, "ground plane height (m)")}


_GAINS = {"dt": P("float", 1e-3, "control period (s)", positive=True),
          "kp": P("float", None, "position gain (default: the engine's)", low=0.0),
          "kd": P("float", None, "velocity gain (default: the engine's)", low=0.0)}


def _goal_pose_needs(params):
    return () if params.get("pose") is not None else ("model", "q")


NODE_TYPES: dict[str, NodeSpec] = {
    "LoadRobot": NodeSpec(
        {}, {"model": "Model"},
        {"robot": P("robot", REQUIRED, "registry name (caliper info) or a .urdf / MJCF path"),
         "mimic": P("bool", True, "honour mimic joints")},
        run_load_robot, "source", "Load a robot into a Model.", engine="caliper_jax.load"),
    "StartConfig": NodeSpec(
        {"model": "Model"}, {"q": "Config"}, {"q": P("vector", REQUIRED, "nq joint positions")},
        run_start_config, "source", "A configuration given as numbers."),
    "NamedConfig": NodeSpec(
        {"model": "Model"}, {"q": "Config"},
        {"name": P("choice", "neutral", "neutral (zeros), mid (mid-range), clipped (neutral inside the "
                   "limits)", choices=("neutral", "mid", "clipped"))},
        run_named_config, "source", "A named configuration of the robot.",
        engine="caliper_jax.neutral / caliper_jax.ik.default_seed"),
    "GoalPose": NodeSpec(
        {"model": "Model", "q": "Config"}, {"pose": "Pose"},
        {"pose": P("pose", None, "absolute T_world_frame (16 numbers); else the FK pose of frame at q"),
         "frame": _FRAME, "offset": P("vector", [0.0, 0.0, 0.0], "world translation added (m)", length=3)},
        run_goal_pose, "source", "A target pose: given, or the frame's pose at q shifted by offset.",
        optional=frozenset({"model", "q"}), needs=_goal_pose_needs, engine="caliper_jax.api.fk"),
    "LoadDataset": NodeSpec(
        {}, {"dataset": "Dataset"}, {"path": P("path", REQUIRED, "LeRobot v3 root (relative: to the run's "
                                              "directory)")},
        run_load_dataset, "source", "Open a LeRobot v3 dataset.", engine="caliper_jax.dataset.LeRobotReader"),
    "FK": NodeSpec(
        {"model": "Model", "q": "Config"}, {"pose": "Pose"}, {"frame": _FRAME},
        run_fk, "compute", "Forward kinematics of one frame.", engine="caliper_jax.api.fk"),
    "IK": NodeSpec(
        {"model": "Model", "target": "Pose", "seed": "Config"},
        {"q": "Config", "success": "Bool", "residual": "Scalar"},
        {"frame": _FRAME, "position_only": P("bool", False, "ignore the target rotation"),
         "seed": P("int", 0, "PRNG seed of the restarts", low=0, high=2**32 - 1),
         "require_success": P("bool", True, "fail the run when IK does not converge")},
        run_ik, "compute", "Numerical IK (damped least squares with restarts).", optional=frozenset({"seed"}),
        engine="caliper_jax.ik.ik"),
    "MoveJ": NodeSpec(
        {"model": "Model", "start": "Config", "goal": "Config"},
        {"trajectory": "Trajectory", "duration": "Scalar"},
        {"duration": P("float", None, "ask for a longer move (s)", positive=True)},
        run_move_j, "compute", "Jerk-limited joint move (MOVE_J) under the model's limits.",
        engine="caliper_jax.motion.move_j"),
    "MoveL": NodeSpec(
        {"model": "Model", "start": "Config", "target": "Pose"},
        {"trajectory": "Trajectory", "duration": "Scalar", "report": "Report"},
        {"frame": _FRAME, "screw": P("bool", False, "screw motion instead of a straight line"),
         "position_only": P("bool", False, "orientation free (arms with < 6 dof)"),
         "dt": P("float", 0.01, "IK sample spacing (s)", positive=True)},
        run_move_l, "compute", "Straight-line Cartesian move (MOVE_L).", engine="caliper_jax.motion.move_l"),
    "PlanRrt": NodeSpec(
        {"model": "Model", "start": "Config", "goal": "Config"},
        {"path": "Path", "length": "Scalar", "report": "Report"},
        {"planner": P("choice", "rrtconnect", "sampling planner", choices=("rrtconnect", "rrtstar", "prm")),
         "seed": P("int", 0, "PRNG seed", low=0, high=2**32 - 1),
         **_OBSTACLES,
         "resolution": P("float", 0.02, "edge-check step", positive=True),
         "margin": P("float", 0.0, "required clearance (m)", low=0.0),
         "step": P("float", 0.3, "tree extension step", positive=True),
         "max_iterations": P("int", None, "search budget", low=1, high=10**6),
         "smooth": P("bool", True, "shortcut-smooth the path")},
        run_plan, "compute", "Collision-free joint-space path (seeded).", engine="caliper_jax.planning.plan"),
    "CollisionCheck": NodeSpec(
        {"model": "Model", "q": "Config"},
        {"in_collision": "Bool", "min_distance": "Scalar", "report": "Report"},
        {**_OBSTACLES, "margin": P("float", 0.0, "report pairs closer than this (m)", low=0.0)},
        run_collision_check, "compute", "Self and world collision distances at one configuration.",
        engine="caliper_jax.collision.api.check"),
    "Retime": NodeSpec(
        {"model": "Model", "path": "Path"}, {"trajectory": "Trajectory", "duration": "Scalar"},
        {"method": P("choice", "scurve", "scurve (jerk-limited) or topp (time-optimal)",
                     choices=("scurve", "topp"))},
        run_retime, "compute", "Time a waypoint path.", engine="caliper_jax.planning.plan_trajectory"),
    "Sample": NodeSpec(
        {"trajectory": "Trajectory"}, {"samples": "Samples"},
        {"dt": P("float", 0.01, "row spacing (s)", positive=True)},
        run_sample, "compute", "Rows (times, q, qd, qdd) every dt.", engine="Trajectory.sample_uniform"),
    "Lint": NodeSpec(
        {"model": "Model", "trajectory": "Trajectory"},
        {"report": "Report", "errors": "Scalar", "ok": "Bool"},
        {"dt": P("float", 0.01, "row spacing (s)", positive=True), "frame": _FRAME},
        run_lint, "compute", "Path report and trajectory lint (T001-T007).",
        engine="caliper_jax.motion.lint_model_path"),
    "GravityDrop": NodeSpec(
        {"model": "Model", "q0": "Config"},
        {"samples": "Samples", "q_final": "Config", "energy_drift": "Scalar"},
        {"duration": P("float", 0.5, "seconds", positive=True, high=60.0),
         "dt": P("float", 1e-3, "step (s)", positive=True),
         "integrator": P("choice", "rk4", "integrator", choices=("euler", "rk4", "implicit"))},
        run_simulate, "compute", "Unactuated, contact-free rollout from rest.",
        engine="caliper_jax.api.simulate_passive"),
    "Control": NodeSpec(
        {"model": "Model", "start": "Config", "goal": "Config"},
        {"samples": "Samples", "q_final": "Config", "estopped": "Bool", "report": "Report"},
        {"ticks": P("int", 1000, "control ticks", low=1, high=10**6), **_GAINS,
         "seed": P("int", 0, "seed", low=0, high=2**32 - 1)},
        run_control, "compute", "Computed-torque tracking of a MOVE_J (safety gate on), tick-driven.",
        engine="caliper_jax.control.simulate"),
    "Record": NodeSpec(
        {"model": "Model", "start": "Config", "goal": "Config"}, {"dataset": "Dataset", "q_final": "Config"},
        {"out": P("path", REQUIRED, "dataset root to create (relative: to the run's directory)"),
         "ticks": P("int", 500, "control ticks", low=1, high=10**6),
         "fps": P("int", 50, "frames per second", low=1, high=1000),
         **_GAINS,
         "task": P("str", "reach the goal", "task text"), "seed": P("int", 0, "seed", low=0, high=2**32 - 1)},
        run_record, "compute", "Computed-torque MOVE_J rollout recorded to LeRobot v3.",
        engine="caliper_jax.control.record"),
    "DatasetDoctor": NodeSpec(
        {"dataset": "Dataset"}, {"report": "Report", "errors": "Scalar", "ok": "Bool"}, {},
        run_dataset_doctor, "compute", "The dataset doctor's findings.",
        engine="doctors.dataset.doctor.diagnose"),
    "Report": NodeSpec(
        {"value": "Any"}, {"value": "Any"}, {"title": P("str", "", "label")},
        run_report, "sink", "Show a value (the run's outputs keep it)."),
    "Scope": NodeSpec(
        {"samples": "Samples"}, {"times": "Any", "values": "Any"},
        {"signal": P("str", "q", "which series (q, qd, qdd, v, energy)"),
         "joint": P("int", 0, "column of a per-joint series", low=0)},
        run_scope, "sink", "One signal over time."),
}


def describe_all() -> dict:
    """{type: NodeSpec.describe()}: what a palette or ``caliper graph nodes`` lists."""
    return {name: spec.describe() for name, spec in NODE_TYPES.items()}


@dataclass
class RunContext:
    """What a run gives its nodes: ``out_dir`` (relative file parameters resolve against it)."""

    out_dir: Path = field(default_factory=Path.cwd)

    def resolve(self, path: str, what: str = "path parameter") -> Path:
        """``path`` inside ``out_dir`` (symlinks followed); an escape (``../x``, ``/abs``, a link
        pointing out) raises :class:`caliper_jax.limits.PathEscapeError`."""
        from caliper_jax.limits import inside

        return inside(self.out_dir, path, what)


def path_escape(value: str) -> str | None:
    """Why a path parameter cannot stay inside the run's folder, read from its text alone (an
    absolute path, a ``..`` part); None when it can. Symlinks are checked when the node runs."""
    p = Path(value)
    if p.is_absolute():
        return f"{value!r} is an absolute path; paths in a graph are relative to the run's --out folder"
    if ".." in p.parts:
        return f"{value!r} climbs out with '..'; paths in a graph must stay inside the run's --out folder"
    return None

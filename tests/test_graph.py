"""The dataflow graph (GraphDoc): schema round trip, validation of a planted set of invalid
documents (each refused naming the node and port), the deterministic executor, parity of every
shipped example with direct calls of the same engine functions (bit for bit), and the CLI.

float64 throughout (``pytestmark``), like ``caliper graph run``.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import jax
import numpy as np
import pytest

from caliper_jax.graph import (
    NODE_TYPES,
    GraphDoc,
    GraphError,
    dumps,
    examples,
    from_dict,
    load_graph,
    run_graph,
    to_dict,
    topological_order,
    validate,
)

pytestmark = pytest.mark.x64

EXAMPLES = examples()


def _same(a, b) -> bool:
    """Bit-for-bit equality of two port values (arrays, pytrees, dicts, scalars)."""
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    if ta != tb or len(la) != len(lb):
        return False
    for x, y in zip(la, lb, strict=True):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape or x.dtype != y.dtype or x.tobytes() != y.tobytes():
            return False
    return True


def _small():
    """The fast shipped example (a fresh dict): load -> start / neutral -> FK, MoveJ -> Sample -> Scope."""
    return json.loads(EXAMPLES["fk_movej"].read_text())


# ---- schema ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_round_trips_exactly(name):
    path = EXAMPLES[name]
    data = json.loads(path.read_text())
    doc = load_graph(path)
    assert to_dict(doc) == data
    assert load_graph(json.loads(dumps(doc))) == doc
    assert dumps(load_graph(json.loads(dumps(doc)))) == dumps(doc)
    assert validate(doc) == []


def test_load_by_name_path_and_dict_agree():
    name = "ik_movel"
    from_text = load_graph(json.loads(EXAMPLES[name].read_text()))
    assert load_graph(name) == load_graph(EXAMPLES[name]) == from_text
    doc = load_graph(_small())
    assert isinstance(doc, GraphDoc) and doc.node("show").ui == {"x": 660, "y": 300}


@pytest.mark.parametrize("data, field", [
    ([], "expected a JSON object"),
    ({"nodes": 3}, "nodes: expected a list"),
    ({"nodes": [], "edges": {}}, "edges: expected a list"),
    ({"nodes": [], "version": 2}, "version"),
    ({"nodes": [], "format": "other"}, "format"),
    ({"nodes": [], "extra": 1}, "unknown top-level field(s) extra"),
    ({"nodes": [{"id": "a"}]}, "nodes[0].type: expected a string"),
    ({"nodes": [{"id": "a.b", "type": "FK"}]}, "nodes[0].id"),
    ({"nodes": [{"id": "a", "type": "FK", "params": []}]}, "nodes[0].params: expected an object"),
    ({"nodes": [{"id": "a", "type": "FK", "colour": 1}]}, "nodes[0]: unknown field(s) colour"),
    ({"nodes": [], "edges": [{"from": "a", "to": "b.c"}]}, "edges[0].from: expected 'node.port'"),
    ({"nodes": [], "edges": [{"from": "a.b"}]}, "edges[0]"),
])
def test_malformed_documents_are_refused_naming_the_field(data, field):
    with pytest.raises(GraphError) as exc:
        from_dict(data)
    assert str(exc.value).startswith("graph") and field in str(exc.value)
    if isinstance(data, dict):
        with pytest.raises(GraphError, match=re.escape(field)):
            load_graph(data)


def test_unreadable_files_are_graph_errors(tmp_path):
    bad = tmp_path / "bad.caliper-graph.json"
    bad.write_text("{not json")
    with pytest.raises(GraphError, match=r"bad.caliper-graph.json: not valid JSON: .*line 1"):
        load_graph(bad)
    with pytest.raises(GraphError, match="no such file, and not a shipped example"):
        load_graph(tmp_path / "missing.json")
    with pytest.raises(GraphError, match="is a directory|is not a file"):
        load_graph(tmp_path)


# ---- validation: the planted set --------------------------------------------------------------

def _edit(fn):
    data = _small()
    fn(data)
    return data


def _node(data, node_id):
    return next(n for n in data["nodes"] if n["id"] == node_id)


def _set(data, node_id, **params):
    _node(data, node_id)["params"].update(params)


# (kind, edit, expected code, node, port)
PLANTED = [
    ("duplicate id", lambda d: d["nodes"].append({"id": "fk", "type": "FK", "params": {}}),
     "duplicate_id", "fk", None),
    ("unknown node type", lambda d: _node(d, "fk").update(type="ForwardKin"), "unknown_type", "fk", None),
    ("unknown parameter", lambda d: _set(d, "move", speed=2.0), "unknown_param", "move", "speed"),
    ("missing required parameter", lambda d: _node(d, "start").update(params={}),
     "missing_param", "start", "q"),
    ("parameter of the wrong type", lambda d: _set(d, "rows", dt="fast"), "bad_param", "rows", "dt"),
    ("parameter out of range", lambda d: _set(d, "rows", dt=-0.1), "bad_param", "rows", "dt"),
    ("robot not in the registry", lambda d: _set(d, "robot", robot="pandaa"), "bad_param", "robot", "robot"),
    ("choice not allowed", lambda d: _set(d, "home", name="home"), "bad_param", "home", "name"),
    ("vector of the wrong length", lambda d: _set(d, "start", q="0.6 1.4"), "bad_param", "start", "q"),
    ("edge from a missing node", lambda d: d["edges"].append({"from": "ghost.q", "to": "show.value"}),
     "unknown_node", "ghost", "q"),
    ("edge into an unknown port", lambda d: d["edges"].append({"from": "start.q", "to": "fk.joints"}),
     "unknown_port", "fk", "joints"),
    ("edge out of an input port", lambda d: d["edges"].__setitem__(9, {"from": "fk.q", "to": "show.value"}),
     "unknown_port", "fk", "q"),
    ("port type mismatch", lambda d: d["edges"].__setitem__(3, {"from": "robot.model", "to": "fk.q"}),
     "type_mismatch", "fk", "q"),
    ("two edges into one input", lambda d: d["edges"].append({"from": "home.q", "to": "fk.q"}),
     "multiple_edges", "fk", "q"),
    ("dangling required input", lambda d: d["edges"].pop(4), "dangling_input", "move", "model"),
    ("dangling input made required by a parameter", lambda d: d["nodes"].append(
        {"id": "target", "type": "GoalPose", "params": {}}), "dangling_input", "target", "model"),
    ("cycle", lambda d: (d["nodes"].append({"id": "again", "type": "MoveJ", "params": {}}),
                         d["edges"].extend([{"from": "robot.model", "to": "again.model"},
                                            {"from": "home.q", "to": "again.start"},
                                            {"from": "fk.pose", "to": "again.goal"}]),
                         d["edges"].__setitem__(3, {"from": "again.duration", "to": "fk.q"})),
     "cycle", "again", "goal"),
]


@pytest.mark.parametrize("kind, edit, code, node, port", PLANTED, ids=[p[0] for p in PLANTED])
def test_planted_invalid_document_is_refused_naming_node_and_port(kind, edit, code, node, port):
    data = _edit(edit)
    findings = validate(data)
    hits = [f for f in findings if f["code"] == code]
    assert hits, f"{kind}: expected a {code} finding, got {findings}"
    f = hits[0]
    assert (f["node"], f["port"]) == (node, port), f
    assert node in f["message"] and (port is None or port in f["message"]), f["message"]
    with pytest.raises(GraphError) as exc:      # the executor refuses it before running anything
        run_graph(data)
    assert exc.value.findings == findings and exc.value.node == findings[0]["node"]


def test_planted_set_covers_ten_kinds():
    assert len({p[2] for p in PLANTED}) >= 10 and len(PLANTED) >= 15


def test_cycle_names_every_node_on_it():
    data = {"nodes": [{"id": n, "type": "Report", "params": {}} for n in ("c", "a", "b", "z")],
            "edges": [{"from": "a.value", "to": "b.value"}, {"from": "b.value", "to": "c.value"},
                      {"from": "c.value", "to": "a.value"}]}
    cyc = [f for f in validate(data) if f["code"] == "cycle"]
    assert len(cyc) == 1 and "a -> b -> c -> a" in cyc[0]["message"]
    with pytest.raises(GraphError, match="a -> b -> c -> a"):
        topological_order(load_graph(data))


def test_topological_order_breaks_ties_by_id():
    data = {"nodes": [{"id": n, "type": "Report", "params": {}} for n in ("d", "b", "c", "a")],
            "edges": [{"from": "d.value", "to": "a.value"}]}
    assert topological_order(load_graph(data)) == ["b", "c", "d", "a"]
    data["nodes"].reverse()
    assert topological_order(load_graph(data)) == ["b", "c", "d", "a"]


def test_every_node_type_is_well_formed():
    from caliper_jax.graph import PORT_TYPES

    for name, spec in NODE_TYPES.items():
        for port, t in {**spec.inputs, **spec.outputs}.items():
            assert t in PORT_TYPES, (name, port, t)
        assert spec.optional <= set(spec.inputs), name
        json.dumps(spec.describe())


# ---- the executor ---------------------------------------------------------------------------------

def test_example_fk_movej_equals_direct_calls_and_is_deterministic():
    from caliper_jax import api
    from caliper_jax.configuration import neutral
    from caliper_jax.loading import load
    from caliper_jax.motion import MotionLimits, move_j

    res = run_graph(_small())
    assert res.order == ["robot", "home", "start", "fk", "move", "rows", "scope", "show"]
    model = load("pendulum2")
    q = np.array([0.6, 1.4])
    home = np.asarray(neutral(model), np.float64)
    traj = move_j(home, q, MotionLimits.from_model(model))
    rows = traj.sample_uniform(0.05)
    out = res.outputs
    assert _same(out["start"]["q"], q) and _same(out["home"]["q"], home)
    assert _same(out["fk"]["pose"], api.fk(model, q)[model.frame_id("tip")])
    assert _same(out["move"]["trajectory"], traj)
    assert _same(out["scope"]["values"], np.asarray(rows.qd, np.float64)[:, 1])
    assert out["show"]["value"] == float(traj.duration)
    again = run_graph(_small())
    assert all(_same(out[k], again.outputs[k]) for k in out if k != "robot")
    summary = res.to_dict()
    json.dumps(summary, allow_nan=False)
    assert summary["outputs"]["robot"]["model"]["name"] == "pendulum2"


def test_failing_node_is_named():
    data = _small()
    _set(data, "start", q=[0.6, 1.4, 0.0])            # valid as a vector, wrong length for the robot
    with pytest.raises(GraphError, match=r"node 'start' \(StartConfig\): param q: expected 2 finite") as exc:
        run_graph(data)
    assert exc.value.node == "start"


def test_load_dataset_and_doctor_equal_direct_calls(tmp_path):
    from caliper_jax.dataset.synthetic import write_synthetic
    from doctors.dataset.doctor import diagnose

    write_synthetic(tmp_path / "data", episodes=3, length=30)
    data = {"name": "doctor", "nodes": [
        {"id": "data", "type": "LoadDataset", "params": {"path": "data"}},
        {"id": "doctor", "type": "DatasetDoctor", "params": {}},
        {"id": "show", "type": "Report", "params": {}}],
        "edges": [{"from": "data.dataset", "to": "doctor.dataset"},
                  {"from": "doctor.report", "to": "show.value"}]}
    out = run_graph(data, out_dir=tmp_path).outputs
    direct = diagnose(tmp_path / "data", progress=False)
    assert out["show"]["value"] == direct.to_dict()
    assert out["doctor"]["errors"] == 0.0 and out["doctor"]["ok"]
    data["nodes"][0]["params"]["path"] = "missing"
    with pytest.raises(GraphError, match="node 'data' \\(LoadDataset\\)") as exc:
        run_graph(data, out_dir=tmp_path)
    assert exc.value.node == "data"


def test_goal_pose_given_absolutely_needs_no_inputs():
    T = np.eye(4)
    T[:3, 3] = [0.1, 0.2, 0.3]
    params = {"pose": T.tolist(), "offset": [0, 0, 0.5]}
    data = {"nodes": [{"id": "goal", "type": "GoalPose", "params": params}]}
    assert validate(data) == []
    T[2, 3] += 0.5
    assert _same(run_graph(data).outputs["goal"]["pose"], T)
    data["nodes"][0]["params"]["pose"] = [[2.0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
    f = validate(data)
    assert [(x["code"], x["node"], x["port"]) for x in f] == [("bad_param", "goal", "pose")]
    assert "not a rigid transform" in f[0]["message"]


# ---- parity of the shipped examples with direct calls -----------------------------------------

def _ex(name, tmp_path):
    return run_graph(EXAMPLES[name], out_dir=tmp_path).outputs


@pytest.mark.slow   # ~18 s under load (the RK4 rollout compiles); fast parity: test_example_fk_movej_...
def test_example_fk_drop_equals_direct_calls(tmp_path):
    from caliper_jax import api
    from caliper_jax.loading import load

    out = _ex("fk_drop", tmp_path)
    model = load("pendulum2")
    q = np.array([0.6, 1.4])
    assert _same(out["fk"]["pose"], api.fk(model, q)[model.frame_id("tip")])
    t, qs, vs, energy = api.simulate_passive(model, q, None, 0.5, 0.001, "rk4")
    assert _same(out["drop"]["samples"], {"times": t, "q": qs, "v": vs, "energy": energy})
    assert _same(out["scope"]["values"], qs[:, 0])
    assert out["drift"]["value"] == float(np.max(np.abs(energy - energy[0])))


@pytest.mark.slow   # ~45 s under load (IK and MOVE_L compiles); fast parity: test_example_fk_movej_...
def test_example_ik_movel_equals_direct_calls(tmp_path):
    from caliper_jax import api, ik
    from caliper_jax.loading import load
    from caliper_jax.motion import MotionLimits, lint_model_path, move_j, move_l

    out = _ex("ik_movel", tmp_path)
    model = load("pendulum2")
    q0 = np.array([0.6, 1.4])
    T = api.fk(model, q0)[model.frame_id("tip")].copy()
    T[:3, 3] += [-0.15, 0.0, -0.1]
    assert _same(out["goal"]["pose"], T)
    sol = ik.ik(model, T, frame="tip", seed_q=q0, key=0, position_only=True)
    assert bool(sol.success) and _same(out["ik"]["q"], np.asarray(sol.q))
    traj = move_j(q0, sol.q, MotionLimits.from_model(model), None)
    assert _same(out["movej"]["trajectory"], traj)
    mv = move_l(model, q0, T, frame="tip", screw=False, position_only=True, dt=0.01)
    assert _same(out["movel"]["trajectory"], mv.trajectory) and out["movel"]["report"] == mv.report.to_dict()
    for key, tr in (("lint_j", traj), ("lint_l", mv.trajectory)):
        rows = [np.asarray(x, np.float64) for x in tr.sample_uniform(0.01)]
        report, findings, _ = lint_model_path(model, *rows, frame="tip")
        assert out[key]["report"] == {"path": report.to_dict(), "findings": [f.to_dict() for f in findings]}


@pytest.mark.slow   # ~50 s under load (planning); fast parity: test_example_fk_movej_...
def test_example_plan_retime_lint_equals_direct_calls(tmp_path):
    from caliper_jax.collision import api as collision_api
    from caliper_jax.collision import build_collision_model
    from caliper_jax.collision.geometry import box
    from caliper_jax.configuration import neutral
    from caliper_jax.loading import load
    from caliper_jax.motion import MotionLimits, lint_model_path
    from caliper_jax.planning import plan, plan_trajectory

    out = _ex("plan_retime_lint", tmp_path)
    model = load("collide_arm")
    lim = MotionLimits.from_model(model)
    start = np.clip(np.asarray(neutral(model), np.float64), lim.lower, lim.upper)
    cm = build_collision_model(model, [box([0.3, 0.0, 0.3], [0.05, 0.05, 0.05], name="box0")], srdf=None)
    check = collision_api.check(model, cm, np.array([1.0, 0.5, 0.2]), margin=0.01)
    assert out["goal_check"]["report"] == check and out["clearance"]["value"] == check["min_distance"]
    res = plan(model, cm, np.array([1.0, 0.5, 0.2]), start, planner="rrtconnect", seed=0, resolution=0.02,
               margin=0.0, step=0.3, max_iterations=None, smooth=True)
    assert res.success and _same(out["plan"]["path"], res.waypoints)
    traj = plan_trajectory(model, res.waypoints, method="scurve")
    assert _same(out["retime"]["trajectory"], traj)
    rows = [np.asarray(x, np.float64) for x in traj.sample_uniform(0.01)]
    report, findings, _ = lint_model_path(model, *rows)
    assert out["lint"]["report"] == {"path": report.to_dict(), "findings": [f.to_dict() for f in findings]}


def _tree_bytes(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow   # ~20 s under load (control rollout compile); record itself: tests/test_record.py
def test_example_record_doctor_equals_direct_calls(tmp_path):
    from caliper_jax import control
    from caliper_jax.configuration import neutral
    from caliper_jax.loading import load
    from caliper_jax.motion import MotionLimits
    from doctors.dataset.doctor import diagnose

    out = _ex("record_doctor", tmp_path / "graph")
    model = load("pendulum2")
    lim = MotionLimits.from_model(model)
    start = np.clip(np.asarray(neutral(model), np.float64), lim.lower, lim.upper)
    goal = np.array([0.6, 1.4])
    root = tmp_path / "direct" / "pendulum2_reach"
    source = jax.vmap(lambda a, b: control.goal_source(a, b, lim))(start[None], goal[None])
    params = control.control_params(model, dt=1e-3)
    res = control.record(root, model, source, start[None], 1000, 50, params=params,
                         safety=control.safety_params(model, 1e-3), task="reach the goal", seed=0,
                         source_batched=True, progress=False)
    assert _same(out["record"]["q_final"], np.asarray(res.q_final[0]))
    roll = control.simulate(model, control.goal_source(start, goal, lim), start, 1000, params=params,
                            safety=control.safety_params(model, 1e-3), seed=0)
    rows = {"times": roll.times, "q": roll.q, "v": roll.v, "command": roll.command, "tau": roll.tau}
    assert _same(out["track"]["samples"], rows)
    assert _same(out["scope"]["values"], roll.q[:, 1]) and out["gate"]["value"]["warnings"] == roll.warnings()
    assert _tree_bytes(Path(out["record"]["dataset"])) == _tree_bytes(root)
    direct = diagnose(root, progress=False).to_dict()
    graph = dict(out["doctor"]["report"])
    graph.pop("dataset")
    direct.pop("dataset")
    assert graph == direct


# ---- the CLI ----------------------------------------------------------------------------------------

def _cli(capsys, *argv):
    from caliper_jax import cli

    code = cli.main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_cli_check(capsys, tmp_path):
    code, out, _ = _cli(capsys, "graph", "check", "ik_movel", "--json")
    rep = json.loads(out)
    assert code == 0 and rep["valid"] and rep["order"][0] == "robot"
    bad = tmp_path / "bad.caliper-graph.json"
    bad.write_text(json.dumps(_edit(lambda d: d["edges"].pop(4))))
    code, out, _ = _cli(capsys, "graph", "check", bad, "--json")
    rep = json.loads(out)
    assert code == 1 and rep["findings"][0]["code"] == "dangling_input"
    code, out, _ = _cli(capsys, "graph", "check", bad)
    assert code == 1 and "[dangling_input] move.model" in out
    bad.write_text("[1, 2")
    code, out, err = _cli(capsys, "graph", "check", bad, "--json")
    assert code == 2 and json.loads(out)["error"]["code"] == "bad_input"
    assert err.count("\n") == 1 and "not valid JSON" in err


def test_cli_run_json_and_out(capsys, tmp_path):
    path = tmp_path / "small.caliper-graph.json"
    path.write_text(json.dumps(_small()))
    code, out, _ = _cli(capsys, "graph", "run", path, "--json", "--out", tmp_path / "o")
    rep = json.loads(out)
    assert code == 0 and rep["ok"] and rep["order"][-1] == "show"
    assert json.loads((tmp_path / "o" / "result.json").read_text())["outputs"] == rep["outputs"]
    failing = _edit(lambda d: _set(d, "start", q=[0.0, 0.0, 0.0]))
    path.write_text(json.dumps(failing))
    code, out, _ = _cli(capsys, "graph", "run", path, "--json")
    rep = json.loads(out)
    assert code == 1 and rep["failed_node"] == "start"
    code, out, _ = _cli(capsys, "graph", "list", "--json")
    assert code == 0 and set(json.loads(out)["examples"]) == set(EXAMPLES)


def test_examples_ship_inside_the_package():
    import caliper_jax.graph as g

    root = Path(g.__file__).parent / "examples"
    assert set(EXAMPLES) == {"fk_drop", "fk_movej", "ik_movel", "plan_retime_lint", "record_doctor"}
    assert all(p.parent == root for p in EXAMPLES.values())

"""The hostile corpus, round two (issue 35): the verbs added since the first corpus -- task, learn,
graph, identify, render, terrain, studio's arguments, data coverage -- and every kind of failure
the issue found: path escapes, deep nesting, sizes over the budgets, library noise, outputs left
behind or discovered unwritable after the work, newcomer frictions. Same :class:`Case` format
and outcome classes as :mod:`cases` (which appends :data:`CASES` here to its own).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

# imported here, once: set-ups run in two threads at once, and a first import of the dataset
# package from both at the same time sees it partially initialised
import caliper_jax.dataset.atomic  # noqa: E402, F401
import caliper_jax.dataset.synthetic  # noqa: E402, F401

ROOT = Path(__file__).resolve().parents[2]
ZOO = ROOT / "tasks" / "zoo"
GRAPHS = ROOT / "caliper_jax" / "graph" / "examples"
GRIPPER = ROOT / "robots" / "gripper_arm.urdf"


def _task(tmp: Path, name: str, edit=None, text: str | None = None) -> None:
    data = json.loads((ZOO / "01_lift.caliper-task.json").read_text())
    data["robot"] = str(GRIPPER)
    if edit is not None:
        edit(data)
    (tmp / f"{name}.caliper-task.json").write_text(text if text is not None else json.dumps(data))


def tasks(tmp: Path) -> None:
    """Task files: 3000-deep all_of, deeply nested arrays, a 1e30 m prop, a robot path escape."""
    data = json.loads((ZOO / "01_lift.caliper-task.json").read_text())
    data["robot"] = str(GRIPPER)
    leaf = json.dumps(data["success"])
    deep = '{"kind": "all_of", "terms": [' * 3000 + leaf + "]}" * 3000
    data["success"] = "@@"
    (tmp / "deep.caliper-task.json").write_text(json.dumps(data).replace('"@@"', deep))
    data = json.loads((ZOO / "01_lift.caliper-task.json").read_text())
    data["robot"] = str(GRIPPER)
    data["q0"] = "@@"
    nested = "[" * 50_000 + "]" * 50_000
    (tmp / "deeparr.caliper-task.json").write_text(json.dumps(data).replace('"@@"', nested))

    def huge(d):
        d["scene"]["props"][0]["halfExtents"] = [1e30, 1e30, 1e30]

    _task(tmp, "huge", huge)


def _graph(path: Path, name: str, edit) -> None:
    data = json.loads((GRAPHS / f"{name}.caliper-graph.json").read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _set(type_: str, key: str, value):
    def edit(data):
        for node in data["nodes"]:
            if node["type"] == type_:
                node["params"][key] = value
    return edit


def graphs(tmp: Path) -> None:
    """Graphs that escape --out (.., absolute, a symlink), nest deep, are huge or sample at 1e-12 s."""
    _graph(tmp / "up.caliper-graph.json", "record_doctor", _set("Record", "out", "../../../x"))
    _graph(tmp / "abs.caliper-graph.json", "record_doctor", _set("Record", "out", str(tmp / "absolute")))
    _graph(tmp / "link.caliper-graph.json", "record_doctor", _set("Record", "out", "lnk/ds"))
    (tmp / "out").mkdir()
    (tmp / "elsewhere").mkdir()
    os.symlink(tmp / "elsewhere", tmp / "out" / "lnk")
    _graph(tmp / "dt.caliper-graph.json", "fk_movej", _set("Sample", "dt", 1e-12))
    _graph(tmp / "ui.caliper-graph.json", "fk_movej", lambda d: d["nodes"][0].update(ui="@@"))
    text = (tmp / "ui.caliper-graph.json").read_text()
    (tmp / "ui.caliper-graph.json").write_text(text.replace('"@@"', "[" * 5000 + "]" * 5000))
    nodes = [{"id": f"n{i}", "type": "LoadRobot", "params": {"robot": "pendulum2"}} for i in range(100_000)]
    (tmp / "big.caliper-graph.json").write_text(json.dumps({"format": "caliper-graph", "version": 1,
                                                            "nodes": nodes, "edges": []}))


def escapes(tmp: Path) -> None:
    """Datasets whose own files point outside them: a commit log, a data_path template."""
    from caliper_jax.dataset.atomic import TXN_NAME
    from caliper_jax.dataset.synthetic import write_synthetic

    write_synthetic(tmp / "txn", episodes=2, length=8, dim=2)
    (tmp / "victim.txt").write_text("must survive")
    (tmp / "txn" / TXN_NAME).write_text(json.dumps({"renames": [], "deletes": ["../victim.txt"]}))
    write_synthetic(tmp / "datapath", episodes=2, length=8, dim=2)
    info = json.loads((tmp / "datapath" / "meta" / "info.json").read_text())
    info["data_path"] = "../../../../../../etc/{chunk_index}-{file_index}.parquet"
    (tmp / "datapath" / "meta" / "info.json").write_text(json.dumps(info))


def learn_data(tmp: Path) -> None:
    """A small synthetic dataset to train on."""
    from caliper_jax.dataset.synthetic import write_synthetic

    write_synthetic(tmp / "ds", episodes=3, length=12, dim=3)


def bomb(tmp: Path) -> None:
    """An .npz whose qpos header declares (1000, 900001, 1) float64 (6.9 GB): 40 KB on disk."""
    import io
    import zipfile

    import numpy as np

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False,
                                                  "shape": (1000, 900_001, 1)})
    with zipfile.ZipFile(tmp / "bomb.npz", "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("qpos.npy", "w", force_zip64=True) as f:
            f.write(header.getvalue())
            f.write(b"\0" * (32 << 20))          # a truncated body: never decompressed
    np.savez(tmp / "noqpos.npz", q=np.zeros((3, 2)))
    np.savez(tmp / "objects.npz", qpos=np.array([{"a": 1}], dtype=object))


SETUPS = {"tasks": tasks, "graphs": graphs, "escapes": escapes, "learn_data": learn_data, "bomb": bomb}


def _cases(C):
    OUT_PROC = "/proc/caliper-x"
    return [
        # -- path escapes (security) ------------------------------------------------------------------
        C("graph-escape-dotdot", "graph run {tmp}/up.caliper-graph.json --out {tmp}/out", "error",
          "climbs out", setup="graphs", quick=True),
        C("graph-escape-absolute", "graph run {tmp}/abs.caliper-graph.json --out {tmp}/out", "error",
          "absolute path", setup="graphs"),
        C("graph-escape-symlink", "graph run {tmp}/link.caliper-graph.json --out {tmp}/out", "error",
          "outside", setup="graphs", quick=True),
        C("graph-check-escape", "graph check {tmp}/up.caliper-graph.json", "finding", "path_escape",
          setup="graphs"),
        C("data-recover-log-escape", "data recover {tmp}/txn", "error", "outside", setup="escapes",
          quick=True),
        C("data-doctor-data-path-escape", "data doctor {tmp}/datapath", "finding", "outside",
          setup="escapes"),
        # -- deep nesting -----------------------------------------------------------------------------
        C("task-show-deep-all-of", "task show {tmp}/deep.caliper-task.json", "error", "levels deep",
          setup="tasks", quick=True),
        C("task-check-deep-all-of", "task check {tmp}/deep.caliper-task.json", "error", "levels deep",
          setup="tasks"),
        C("task-witness-deep-all-of", "task witness {tmp}/deep.caliper-task.json", "error", "levels deep",
          setup="tasks"),
        C("task-show-deep-arrays", "task show {tmp}/deeparr.caliper-task.json", "error", "levels deep",
          setup="tasks"),
        C("graph-check-deep", "graph check {tmp}/ui.caliper-graph.json", "error", "levels deep",
          setup="graphs", quick=True),
        C("learn-train-config-deep", ["learn", "train", "{tmp}/ds", "--out", "{tmp}/run",
                                      "--config", "[" * 10_000 + "]" * 10_000], "error", "levels deep",
          setup="learn_data"),
        # -- budgets before work ----------------------------------------------------------------------
        C("learn-profile-ticks", "learn profile scripted --task lift-cube --ticks 1000000000000", "error",
          "--ticks", quick=True),
        C("learn-profile-worlds", "learn profile scripted --task lift-cube --worlds 100000000", "error",
          "--worlds"),
        C("learn-debug-probes", "learn debug {tmp}/nothing --probes 10000000000", "error", "--probes"),
        C("learn-autopsy-episodes", "learn autopsy {tmp}/nothing {tmp}/ds --episodes 10000000000", "error",
          "--episodes"),
        C("learn-sweep-episodes", "learn sweep scripted --task lift-cube --episodes 100000000", "error",
          "--episodes"),
        C("learn-sweep-runs", ["learn", "sweep", "scripted", "--task", "lift-cube", "--episodes", "60000",
                               "--seeds", "1", "2", "3"], "error", "--seeds"),
        C("learn-train-chunk-1e9", ["learn", "train", "{tmp}/ds", "--out", "{tmp}/run", "--policy", "act",
                                    "--config", '{"chunk_size": 1e9}'], "error", "chunk_size",
          setup="learn_data"),
        C("learn-train-chunk-huge", ["learn", "train", "{tmp}/ds", "--out", "{tmp}/run", "--policy", "act",
                                     "--config", '{"chunk_size": 1000000}'], "error", "chunk_size",
          setup="learn_data", quick=True),
        C("learn-train-activations", ["learn", "train", "{tmp}/ds", "--out", "{tmp}/run", "--policy", "act",
                                      "--batch-size", "60000", "--config", '{"chunk_size": 60000}'], "error",
          "activations", setup="learn_data"),
        C("learn-train-hidden-huge", ["learn", "train", "{tmp}/ds", "--out", "{tmp}/run",
                                      "--config", '{"hidden": [100000000]}'], "error", "hidden",
          setup="learn_data"),
        C("learn-train-lr-overflow", "learn train {tmp}/ds --out {tmp}/run --lr 1e308", "error", "--lr",
          setup="learn_data"),
        C("learn-train-lr-nan", "learn train {tmp}/ds --out {tmp}/run --lr nan", "error", "--lr",
          setup="learn_data"),
        C("graph-sample-dt-tiny", "graph run {tmp}/dt.caliper-graph.json --out {tmp}/out", "error", "steps",
          setup="graphs", quick=True),
        C("graph-100k-nodes", "graph check {tmp}/big.caliper-graph.json", "error", "nodes", setup="graphs"),
        C("identify-npz-bomb", "identify {tmp}/bomb.npz --task sysid:swing", "error", "MiB", setup="bomb",
          quick=True),
        C("identify-object-npz", "identify {tmp}/objects.npz --task sysid:swing", "error", "numeric",
          setup="bomb"),
        C("data-coverage-episodes-huge", "data coverage {tmp}/ds --out {tmp}/cov --episodes 1000000000",
          "error", "--episodes", setup="learn_data"),
        C("render-camera-huge", "render lift-cube --camera front:100000x100000 --out {tmp}/x.png", "error",
          "--camera"),
        C("terrain-frames-huge", "terrain run --frames 1000000000 --out {tmp}/t", "error", "frames"),
        # -- noise: one line, the error's --------------------------------------------------------------
        C("identify-no-qpos", "identify {tmp}/noqpos.npz --task sysid:swing", "error", "qpos", setup="bomb",
          quick=True),
        C("identify-no-qpos-json", "identify {tmp}/noqpos.npz --task sysid:swing --json", "error", "qpos",
          setup="bomb"),
        # -- outputs validated before work, never left behind ----------------------------------------------
        C("data-coverage-plot-proc", f"data coverage {{tmp}}/ds --out {{tmp}}/cov --plot {OUT_PROC}.png",
          "error", "--plot", setup="learn_data", quick=True),
        C("data-coverage-out-proc", f"data coverage {{tmp}}/ds --out {OUT_PROC}/cov", "error", "--out",
          setup="learn_data"),
        C("demo-full-out-proc", f"demo --full --out {OUT_PROC}/d", "error", "--out", quick=True),
        C("learn-train-out-proc", f"learn train {{tmp}}/ds --out {OUT_PROC}/run", "error", "--out",
          setup="learn_data"),
        C("learn-train-png-proc", f"learn train {{tmp}}/ds --out {{tmp}}/run --png {OUT_PROC}.png", "error",
          "--png", setup="learn_data"),
        C("learn-sweep-png-proc", f"learn sweep scripted --task lift-cube --png {OUT_PROC}.png", "error",
          "--png"),
        C("task-demo-out-proc", f"task demo lift-cube --episodes 1 --out {OUT_PROC}/ds", "error", "--out"),
        C("terrain-out-proc", f"terrain run --frames 2 --out {OUT_PROC}/t", "error", "--out"),
        C("graph-run-out-proc", f"graph run fk_movej --out {OUT_PROC}/g", "error", "--out"),
        C("render-out-proc", f"render lift-cube --out {OUT_PROC}.png", "error", "--out"),
        C("task-check-huge-prop", "task check {tmp}/huge.caliper-task.json --no-sim", "finding", "K003",
          setup="tasks"),
        C("task-demo-huge-prop", "task demo {tmp}/huge.caliper-task.json --episodes 1 --out {tmp}/d", "error",
          "K003", setup="tasks", quick=True),
        C("task-rollout-huge-prop", "task rollout {tmp}/huge.caliper-task.json --episodes 1", "error", "K003",
          setup="tasks"),
        C("learn-eval-huge-prop", "learn eval scripted --task {tmp}/huge.caliper-task.json --episodes 1",
          "error", "K003", setup="tasks"),
        C("learn-train-diverges", ["learn", "train", "{tmp}/ds", "--out", "{tmp}/run", "--steps", "6",
                                   "--lr", "1e30", "--config", '{"hidden": [8]}', "--train-config",
                                   '{"warmup": 1, "eval_every": 3, "log_every": 3}'], "error", "diverged",
          setup="learn_data"),
        # -- newcomer frictions ----------------------------------------------------------------------
        C("demo-full-panda", "demo --full panda", "error", "gripper_arm", quick=True),
        C("task-show-other-case", "task show LIFT-CUBE", "ok", "lift-cube", quick=True),
        C("task-show-typo", "task show lift-cub", "error", "did you mean 'lift-cube'"),
        C("graph-example-typo", "graph check ik_movl", "error", "did you mean ik_movel", quick=True),
        C("learn-eval-task-typo", "learn eval scripted --task LIFT-CUB", "error", "did you mean 'lift-cube'"),
        # -- the new verbs' ordinary bad input ----------------------------------------------------------
        C("task-list", "task list", "ok", "lift-cube"),
        C("task-show-missing-file", "task show {tmp}/none.caliper-task.json", "error", "no such task file"),
        C("task-demo-episodes-0", "task demo lift-cube --episodes 0 --out {tmp}/d", "error", "--episodes"),
        C("task-rollout-worlds-0", "task rollout lift-cube --worlds 0", "error", "--worlds"),
        C("task-resim-missing", "task resim {tmp}/nothing", "error", "nothing"),
        C("graph-list", "graph list", "ok", "ik_movel"),
        C("graph-check-example", "graph check ik_movel", "ok", "valid"),
        C("graph-run-missing", "graph run {tmp}/none.caliper-graph.json", "error", "none"),
        C("learn-eval-missing-ckpt", "learn eval {tmp}/nothing --task lift-cube --episodes 1", "error",
          "nothing"),
        C("learn-train-missing-ds", "learn train {tmp}/nothing --out {tmp}/run", "error", "nothing"),
        C("learn-train-unknown-key", ["learn", "train", "{tmp}/ds", "--out", "{tmp}/run", "--config",
                                      '{"chunks": 3}'], "error", "chunks", setup="learn_data"),
        C("learn-train-config-list", ["learn", "train", "{tmp}/ds", "--out", "{tmp}/run", "--config", "[1]"],
          "error", "--config", setup="learn_data"),
        C("identify-missing", "identify {tmp}/nothing.npz --task sysid:swing", "error", "nothing"),
        C("identify-inertial-no-robot", "identify {tmp}/noqpos.npz --mode inertial", "error", "--robot",
          setup="bomb"),
        C("render-unknown-camera", "render lift-cube --camera ceiling --out {tmp}/x.png", "error", "ceiling"),
        C("render-bad-q", "render pendulum2 --q 1,2,3,4,5 --out {tmp}/x.png", "error", "--q"),
        C("terrain-unknown-scene", "terrain run --scene moon --out {tmp}/t", "error", "moon"),
        C("terrain-resolution-0", "terrain run --resolution 0 --out {tmp}/t", "error", "resolution"),
        C("studio-port-negative", "studio --port -1 --once", "error", "--port"),
        C("studio-unknown-robot", "studio nosuchrobot --once", "error", "nosuchrobot", quick=True),
        C("studio-missing-dataset", "studio --dataset {tmp}/nothing --once", "error", "nothing"),
        C("studio-unknown-task", "studio --task nosuch --once", "error", "nosuch"),
        C("data-coverage-missing", "data coverage {tmp}/nothing --out {tmp}/cov", "error", "nothing"),
    ]

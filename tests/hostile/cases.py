"""The hostile-input corpus: what a hostile new user types, and what ``caliper`` must answer.

Each :class:`Case` is one command line (run as a subprocess by ``tests/test_cli_hostile.py``
under a memory and a time limit), an optional set-up that writes files into the case's own
scratch folder (``{tmp}`` in the argv), and the expected outcome class:

* ``"error"``: exit 2, stderr exactly one line starting ``caliper: error:`` (containing ``match``);
* ``"ok"``: exit 0 (stdout containing ``match``);
* ``"finding"``: exit 0 or 1 with an explicit finding in stdout (containing ``match``): a warning,
  a ``PROBLEM:`` line, a doctor finding, ``goal_reached: false``...;
* ``"any"``: exit 0, 1 or 2 -- only the universal rules below.

Universal rules (every case): never exit 3 (internal error), never killed (time or memory),
never a traceback, never ``nan`` in stdout with exit 0, on exit 2 stderr is exactly one line.

``quick=True`` marks the fixed, representative subset run by default; the whole corpus is
``pytest -m slow tests/test_cli_hostile.py``.
"""
from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "robots"


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple
    expect: str                       # "error" | "ok" | "finding" | "any"
    match: str | None = None          # substring of stderr (error) or stdout (ok / finding)
    setup: str | None = None          # a key of SETUPS, run in the case's scratch folder first
    env: dict = field(default_factory=dict)
    quick: bool = False               # in the default (fast) subset
    check: Callable | None = None     # extra check of stdout (e.g. parsed JSON) -> assert


# ---- set-ups: files written into the case's scratch folder ------------------------------------

def _write(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)


def _sparse(path: Path, mib: int) -> None:
    """A file that *claims* ``mib`` MiB (sparse: no disk used, created instantly)."""
    with open(path, "wb") as f:
        f.truncate(mib * 2**20)


LINK = '<link name="{n}"><inertial><mass value="1"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" ' \
       'iyz="0" izz="0.01"/></inertial></link>'


def _urdf(joints: str, links=("base", "l1"), name="bad") -> str:
    return f'<robot name="{name}">' + "".join(LINK.format(n=n) for n in links) + joints + "</robot>"


def _chain(n: int) -> str:
    parts = ['<robot name="chain">', '<link name="l0"/>']
    for i in range(1, n + 1):
        parts.append(f'<link name="l{i}"/><joint name="j{i}" type="revolute"><parent link="l{i - 1}"/>'
                     f'<child link="l{i}"/><origin xyz="0 0 0.01"/><axis xyz="0 0 1"/>'
                     '<limit lower="-1" upper="1" effort="1" velocity="1"/></joint>')
    parts.append("</robot>")
    return "".join(parts)


REVOLUTE = ('<joint name="j1" type="revolute"><parent link="base"/><child link="l1"/>'
            '<origin xyz="{xyz}"/><axis xyz="{axis}"/><limit lower="-1" upper="1" effort="1" '
            'velocity="1"/></joint>')


def files(tmp: Path) -> None:
    """Malformed robot descriptions and odd file system objects."""
    _write(tmp / "empty.urdf", "")
    _write(tmp / "blank.urdf", "   \n\t\n")
    _write(tmp / "binary.urdf", bytes(range(256)) * 16)
    _write(tmp / "trunc.urdf", '<robot name="x"><link name="a"/>')
    _write(tmp / "notrobot.urdf", "<sdf><model/></sdf>")
    _write(tmp / "entity.urdf", '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "aaaaaaaaaa">'
                                '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]><robot name="&b;"/>')
    _write(tmp / "nolinks.urdf", '<robot name="nothing"/>')
    _write(tmp / "nan.urdf", _urdf(REVOLUTE.format(xyz="nan 0 0", axis="0 0 1")))
    _write(tmp / "inf.urdf", _urdf(REVOLUTE.format(xyz="0 0 1e999", axis="0 0 1")))
    _write(tmp / "zeroaxis.urdf", _urdf(REVOLUTE.format(xyz="0 0 0", axis="0 0 0")))
    _write(tmp / "words.urdf", _urdf(REVOLUTE.format(xyz="one two three", axis="0 0 1")))
    _write(tmp / "badtype.urdf", _urdf(REVOLUTE.replace("revolute", "wobbly").format(xyz="0 0 0",
                                                                                        axis="0 0 1")))
    _write(tmp / "noparent.urdf", _urdf(REVOLUTE.replace('link="base"', 'link="ghost"').format(
        xyz="0 0 0", axis="0 0 1")))
    _write(tmp / "cycle.urdf", _urdf(
        '<joint name="a" type="revolute"><parent link="l1"/><child link="l2"/><axis xyz="0 0 1"/>'
        '<limit lower="-1" upper="1" effort="1" velocity="1"/></joint>'
        '<joint name="b" type="revolute"><parent link="l2"/><child link="l1"/><axis xyz="0 0 1"/>'
        '<limit lower="-1" upper="1" effort="1" velocity="1"/></joint>', links=("l1", "l2")))
    _write(tmp / "inverted.urdf", _urdf(REVOLUTE.replace('lower="-1" upper="1"', 'lower="1" upper="-1"')
                                        .format(xyz="0 0 0", axis="0 0 1")))
    _write(tmp / "negmass.urdf", _urdf(REVOLUTE.format(xyz="0 0 0", axis="0 0 1")).replace(
        '<mass value="1"/>', '<mass value="-5"/>'))
    _write(tmp / "garbage.xml", "<mujoco><worldbody><body><joint type='hinge'/></body></mujoco")
    _write(tmp / "empty.xml", "")
    _write(tmp / "arm.xacro", '<robot xmlns:xacro="http://www.ros.org/wiki/xacro" name="x"/>')
    _write(tmp / "deep.urdf", _chain(12_000))
    (tmp / "dir.urdf").mkdir()
    (tmp / "dir.xml").mkdir()
    _sparse(tmp / "big.urdf", 100)
    _sparse(tmp / "big.xml", 100)
    os.mkfifo(tmp / "fifo.urdf")
    os.symlink("/dev/zero", tmp / "zero.urdf")
    os.symlink("/dev/zero", tmp / "zero.xml")
    os.symlink(tmp / "nowhere.urdf", tmp / "dangling.urdf")
    _write(tmp / "bin.srdf", bytes(range(256)) * 4)
    _write(tmp / "wrongroot.srdf", "<notrobot/>")
    _sparse(tmp / "big.srdf", 100)
    (tmp / "existing.txt").write_text("mine")


def npz(tmp: Path) -> None:
    """Calibration data files, broken in every way."""
    import numpy as np

    np.savez(tmp / "noarrays.npz")
    _write(tmp / "zerobyte.npz", b"")
    _write(tmp / "text.npz", "q,T\n1,2\n")
    np.savez(tmp / "object.npz", q=np.array([{"a": 1}, None], dtype=object), T=np.zeros((2, 4, 4)))
    np.savez(tmp / "shape.npz", q=np.zeros((3, 5)), T=np.zeros((3, 4, 4)))
    np.savez(tmp / "nan.npz", q=np.full((3, 2), np.nan), T=np.tile(np.eye(4), (3, 1, 1)))
    np.savez(tmp / "rows0.npz", q=np.zeros((0, 2)), T=np.zeros((0, 4, 4)))
    np.savez(tmp / "onlyq.npz", q=np.zeros((3, 2)))
    np.savez(tmp / "strings.npz", q=np.array([["a", "b"]]), T=np.zeros((1, 4, 4)))
    np.savez(tmp / "mismatch.npz", q=np.zeros((5, 2)), T=np.tile(np.eye(4), (3, 1, 1)))
    np.savez(tmp / "badT.npz", q=np.zeros((3, 2)), T=np.ones((3, 4, 4)))
    np.savez(tmp / "scalar.npz", q=np.float64(3.0), T=np.float64(1.0))
    _write(tmp / "bad.json", "{not json")
    _write(tmp / "list.json", "[1, 2, 3]")
    _write(tmp / "ragged.json", json.dumps({"q": [[0, 1], [2]], "T": [[1]]}))
    _write(tmp / "words.json", json.dumps({"q": "zero", "T": "identity"}))
    _write(tmp / "deep.json", "[" * 100_000 + "]" * 100_000)
    _write(tmp / "emptyobj.json", "{}")
    _write(tmp / "emptyq.json", json.dumps({"q": [], "T": []}))
    _write(tmp / "frame5.json", json.dumps({"q": [[0, 0]], "T": [np.eye(4).tolist()], "frame": 5}))
    _write(tmp / "ghostframe.json", json.dumps({"q": [[0, 0]], "T": [np.eye(4).tolist()], "frame": "ghost"}))
    _write(tmp / "latin1.json", b'{"q": "\xe9"}')
    _write(tmp / "huge_numbers.json", json.dumps({"q": [[1e308, 1e308]], "T": [np.eye(4).tolist()]}))
    _sparse(tmp / "big.npz", 100)
    (tmp / "dir.npz").mkdir()
    os.symlink("/dev/zero", tmp / "zero.npz")


def calib_ok(tmp: Path) -> None:
    """Consistent pendulum2 observations (q, T of its tool frame) for a clean calibration."""
    import jax
    import numpy as np

    from caliper_jax import api
    from caliper_jax.ik.api import default_frame
    from caliper_jax.loading import load

    with jax.enable_x64(True):
        model = load("pendulum2")
        frame = default_frame(model)
        qs = np.random.default_rng(0).uniform(-1, 1, (12, 2))
        T = np.stack([api.fk(model, q)[model.frame_id(frame)] for q in qs])
    _write(tmp / "obs.json", json.dumps({"q": qs.tolist(), "T": T.tolist(), "frame": frame}))


def _dataset(tmp: Path, name: str = "ds") -> Path:
    from caliper_jax.dataset.synthetic import write_synthetic

    write_synthetic(tmp / name, episodes=3, length=12, dim=3)
    return tmp / name


def _info(root: Path, **changes) -> None:
    path = root / "meta" / "info.json"
    info = json.loads(path.read_text())
    info.update(changes)
    path.write_text(json.dumps(info))


def _rewrite_column(root: Path, column: str, edit) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = sorted((root / "data").glob("*/*.parquet"))[0]
    table = pq.read_table(path)
    i = table.schema.get_field_index(column)
    kind = table.schema.field(column).type
    values = table.column(column).to_pylist()
    values = edit(values)
    table = table.set_column(i, column, pa.array(values, kind))
    pq.write_table(table, path)
    del np


def datasets(tmp: Path) -> None:
    """A healthy dataset and broken copies of it (one breakage each)."""
    good = _dataset(tmp)

    def copy(name):
        shutil.copytree(good, tmp / name)
        return tmp / name

    _info(copy("fps0"), fps=0)
    _info(copy("fpsneg"), fps=-30)
    _info(copy("fpsstr"), fps="thirty")
    _info(copy("fpsfrac"), fps=29.97)
    _info(copy("fpsbool"), fps=True)
    _info(copy("fpsnull"), fps=None)
    _info(copy("negeps"), total_episodes=-1)
    _info(copy("featlist"), features=["a", "b"])
    _info(copy("shapestr"), features={"action": {"dtype": "float32", "shape": "six"}})
    _info(copy("v2"), codebase_version="v2.1")
    (copy("noinfo") / "meta" / "info.json").unlink()
    (copy("bininfo") / "meta" / "info.json").write_bytes(bytes(range(256)))
    (copy("listinfo") / "meta" / "info.json").write_text("[]")
    root = copy("dirinfo")
    (root / "meta" / "info.json").unlink()
    (root / "meta" / "info.json").mkdir()
    root = copy("zeroinfo")
    (root / "meta" / "info.json").unlink()
    os.symlink("/dev/zero", root / "meta" / "info.json")
    root = copy("biginfo")
    (root / "meta" / "info.json").unlink()
    _sparse(root / "meta" / "info.json", 100)
    shutil.rmtree(copy("noepisodes") / "meta" / "episodes")
    (copy("notasks") / "meta" / "tasks.parquet").unlink()
    (copy("nostats") / "meta" / "stats.json").unlink()
    (copy("badstats") / "meta" / "stats.json").write_text("{oops")
    for path in (copy("garbagedata") / "data").glob("*/*.parquet"):
        path.write_bytes(b"PAR1 this is not parquet")
    shutil.rmtree(copy("nodata") / "data")

    def backwards(ts):
        ts = list(ts)
        ts[5] = ts[2] - 0.5
        return ts

    _rewrite_column(copy("backts"), "timestamp", backwards)
    _rewrite_column(copy("stillts"), "timestamp", lambda ts: [0.0] * len(ts))

    def poison(rows):
        rows = list(rows)
        rows[3] = [float("nan")] * len(rows[3])
        return rows

    _rewrite_column(copy("nanstate"), "observation.state", poison)
    _write(tmp / "notes.txt", "not a dataset")


SETUPS: dict[str, Callable[[Path], None]] = {
    "files": files, "npz": npz, "calib_ok": calib_ok, "datasets": datasets,
}


# ---- checks of stdout ----------------------------------------------------------------------

def _held_gripper(out: str) -> None:
    """trajopt on gripper_arm holds the finger it was not asked to move, exactly."""
    rep = json.loads(out)
    assert rep["held_joints"] == ["gripper"], rep["held_joints"]
    assert {round(w[2], 12) for w in rep["waypoints"]} == {0.02}, "the gripper moved"


def _load_floating(out: str) -> None:
    rep = json.loads(out)
    assert rep["joints"][0]["type"] == "free" and rep["joints"][0]["nq"] == 7
    assert len(rep["qpos_lower"]) == rep["nq"] == sum(j["nq"] for j in rep["joints"])


def _goal_missed(out: str) -> None:
    rep = json.loads(out)
    assert rep["goal_reached"] is False and "goal not reached" in rep["problem"]


def _limit_warning(out: str) -> None:
    rep = json.loads(out)
    assert any("panda_finger_joint1" in w for w in rep["limit_warnings"]), rep["limit_warnings"]


# ---- the corpus ---------------------------------------------------------------------------------

P2 = "pendulum2"
Q_OUT = "10 10"
STEPS = "CALIPER_MAX_STEPS"
BATCH = "CALIPER_MAX_BATCH"
PANDA_FINGER_OUT = "0 0 0 -1.5 0 1.5 0.5 10"      # the finger at 10 m (limit 0.04)
PANDA_Q = "0 0 0 -1.5 0 1.5 0.5 0.02"
SOLO_Q0 = " ".join(["0"] * 19)                      # a zero quaternion for the free base


def C(id, argv, expect, match=None, **kw):
    argv = tuple(argv.split()) if isinstance(argv, str) else tuple(argv)
    return Case(id, argv, expect, match, **kw)


CASES: list[Case] = [
    # -- top level, info ----------------------------------------------------------------------
    C("no-command", [], "error", "caliper: error:"),
    C("unknown-command", "frobnicate pendulum2", "error", "frobnicate"),
    C("info", "info", "ok", "pendulum2", quick=True),
    C("info-json", "info --json", "ok", '"robots"'),
    C("info-extra-arg", "info pendulum2", "error", "unrecognized"),
    C("fk-missing-robot", "fk", "error", "robot"),
    C("env-steps-garbage", f"sim {P2}", "error", STEPS, env={STEPS: "lots"}, quick=True),
    C("env-steps-negative", f"sim {P2}", "error", STEPS, env={STEPS: "-5"}),
    C("env-steps-tiny", f"sim {P2}", "error", STEPS, env={STEPS: "10"}),
    C("env-batch-garbage", "record pendulum2 --goal 1,0 --out {tmp}/r", "error", BATCH, env={BATCH: "x"}),
    C("env-file-tiny", f"load {FIXTURE}/pendulum2.urdf", "error", "CALIPER_MAX_FILE_MB",
      env={"CALIPER_MAX_FILE_MB": "0"}),
    C("env-bodies-tiny", "load panda", "error", "CALIPER_MAX_BODIES", env={"CALIPER_MAX_BODIES": "3"},
      quick=True),

    # -- demo -----------------------------------------------------------------------------------
    C("demo", "demo", "ok", "energy"),
    C("demo-toy", "demo toy", "error", "inertial data"),
    C("demo-duration-0", "demo --duration 0", "error", "--duration"),
    C("demo-duration-neg", "demo --duration -1", "error", "--duration"),
    C("demo-duration-nan", "demo --duration nan", "error", "--duration"),
    C("demo-duration-inf", "demo --duration inf", "error", "--duration"),
    C("demo-duration-huge", "demo --duration 1e9", "error", STEPS),
    C("demo-duration-words", "demo --duration long", "error", "--duration"),
    C("demo-unknown-robot", "demo nosuchrobot", "error", "nosuchrobot"),
    C("demo-q0-count", "demo --q0 1,2,3", "error", "--q0"),

    # -- load -----------------------------------------------------------------------------------
    C("load-dev-zero", "load /dev/zero", "error", "not a regular file", quick=True),
    C("load-dev-null", "load /dev/null", "error", "not a regular file"),
    C("load-dev-urandom", "load /dev/urandom", "error", "not a regular file"),
    C("load-symlink-zero", "load {tmp}/zero.urdf", "error", "not a regular file", setup="files"),
    C("load-symlink-zero-mjcf", "load {tmp}/zero.xml", "error", "not a regular file", setup="files"),
    C("load-fifo", "load {tmp}/fifo.urdf", "error", "FIFO", setup="files", quick=True),
    C("load-directory", "load {tmp}/dir.urdf", "error", "directory", setup="files"),
    C("load-directory-mjcf", "load {tmp}/dir.xml", "error", "directory", setup="files"),
    C("load-tmp-dir", "load {tmp}", "error", "directory", setup="files"),
    C("load-big", "load {tmp}/big.urdf", "error", "MiB", setup="files", quick=True),
    C("load-big-mjcf", "load {tmp}/big.xml", "error", "MiB", setup="files"),
    C("load-empty", "load {tmp}/empty.urdf", "error", "empty.urdf", setup="files"),
    C("load-blank", "load {tmp}/blank.urdf", "error", "blank.urdf", setup="files"),
    C("load-binary", "load {tmp}/binary.urdf", "error", "binary.urdf", setup="files", quick=True),
    C("load-truncated", "load {tmp}/trunc.urdf", "error", "well-formed", setup="files"),
    C("load-not-robot", "load {tmp}/notrobot.urdf", "error", "<robot>", setup="files"),
    C("load-entities", "load {tmp}/entity.urdf", "error", "entity", setup="files"),
    C("load-no-links", "load {tmp}/nolinks.urdf", "error", "nolinks.urdf", setup="files"),
    C("load-nan-origin", "load {tmp}/nan.urdf", "error", "non-finite", setup="files"),
    C("load-inf-origin", "load {tmp}/inf.urdf", "error", "non-finite", setup="files"),
    C("load-zero-axis", "load {tmp}/zeroaxis.urdf", "error", "axis", setup="files"),
    C("load-words-origin", "load {tmp}/words.urdf", "error", "origin", setup="files"),
    C("load-bad-joint-type", "load {tmp}/badtype.urdf", "error", "wobbly", setup="files"),
    C("load-missing-parent", "load {tmp}/noparent.urdf", "error", "ghost", setup="files"),
    C("load-cycle", "load {tmp}/cycle.urdf", "error", "cycle.urdf", setup="files"),
    C("load-inverted-limits", "load {tmp}/inverted.urdf", "error", "j1", setup="files"),
    C("load-negative-mass", "load {tmp}/negmass.urdf", "error", "mass", setup="files"),
    C("load-garbage-mjcf", "load {tmp}/garbage.xml", "error", "garbage.xml", setup="files"),
    C("load-empty-mjcf", "load {tmp}/empty.xml", "error", "empty.xml", setup="files"),
    C("load-xacro", "load {tmp}/arm.xacro", "error", "xacro", setup="files"),
    C("load-dangling-symlink", "load {tmp}/dangling.urdf", "error", "dangling", setup="files"),
    C("load-deep-chain", "load {tmp}/deep.urdf", "error", "CALIPER_MAX_BODIES", setup="files"),
    C("load-unknown", "load nosuchrobot", "error", "nosuchrobot"),
    C("load-empty-name", ["load", ""], "error", "caliper: error:"),
    C("load-solo12", "load solo12", "ok", "free", quick=True),
    C("load-solo12-json", "load solo12 --json", "ok", check=_load_floating),
    C("load-anymal", "load anymal_c", "ok", "free"),
    C("load-panda", "load panda", "ok", "panda_finger_joint1"),
    C("load-floating", f"load {P2} --floating", "ok", "free"),
    C("load-no-mimic", "load panda --no-mimic", "ok", "panda_finger_joint2"),

    # -- fk -------------------------------------------------------------------------------------
    C("fk", f"fk {P2}", "ok", "tip"),
    C("fk-nan", [ "fk", P2, "--joints", "nan 0"], "error", "--joints", quick=True),
    C("fk-inf", ["fk", P2, "--joints", "inf 0"], "error", "--joints"),
    C("fk-overflow", ["fk", P2, "--joints", "1e400 0"], "error", "--joints"),
    C("fk-count", ["fk", P2, "--joints", "1 2 3"], "error", "expected 2 values"),
    C("fk-empty", ["fk", P2, "--joints", ""], "error", "--joints"),
    C("fk-words", ["fk", P2, "--joints", "a b"], "error", "--joints"),
    C("fk-hex", ["fk", P2, "--joints", "0x10 0"], "error", "--joints"),
    C("fk-outside", ["fk", P2, "--joints", Q_OUT], "finding", "outside its limits"),
    C("fk-finger-10m", ["fk", "panda", "--joints", PANDA_FINGER_OUT], "finding", "panda_finger_joint1",
      quick=True),
    C("fk-finger-10m-json", ["fk", "panda", "--joints", PANDA_FINGER_OUT, "--json"], "finding",
      check=_limit_warning),
    C("fk-frame-unknown", f"fk {P2} --frame nosuch", "error", "--frame"),
    C("fk-solo12", "fk solo12", "ok", "base"),
    C("fk-solo12-zero-quaternion", ["fk", "solo12", "--joints", SOLO_Q0], "error", "unit quaternion"),
    C("sim-solo12-zero-quaternion", ["sim", "solo12", "--q0", SOLO_Q0], "error", "unit quaternion"),
    C("fk-toy-json", "fk toy --json", "ok", '"frames"'),
    C("fk-commas", ["fk", P2, "--joints", "0.1,0.2"], "ok", "tip"),
    C("fk-unknown-flag", f"fk {P2} --jionts 0,0", "error", "--jionts"),

    # -- sim ------------------------------------------------------------------------------------
    C("sim", f"sim {P2}", "ok", "energy"),
    C("sim-toy-massless", "sim toy", "error", "l1, l2", quick=True),
    C("sim-duration-huge", f"sim {P2} --duration 1e9", "error", STEPS, quick=True),
    C("sim-tiny-dt", f"sim {P2} --duration 5 --dt 1e-6", "error", STEPS),
    C("sim-dt-0", f"sim {P2} --dt 0", "error", "--dt"),
    C("sim-dt-neg", f"sim {P2} --dt -1", "error", "--dt"),
    C("sim-dt-nan", f"sim {P2} --dt nan", "error", "--dt"),
    C("sim-dt-inf", f"sim {P2} --dt inf", "error", "--dt"),
    C("sim-dt-gt-duration", f"sim {P2} --dt 2", "error", "--dt"),
    C("sim-duration-0", f"sim {P2} --duration 0", "error", "--duration"),
    C("sim-duration-nan", f"sim {P2} --duration nan", "error", "--duration"),
    C("sim-integrator", f"sim {P2} --integrator leapfrog", "error", "--integrator"),
    C("sim-damping-neg", f"sim {P2} --damping -1", "error", "--damping"),
    C("sim-damping-nan", f"sim {P2} --damping nan", "error", "--damping"),
    C("sim-q0-outside", ["sim", P2, "--q0", "100 100"], "finding", "outside its limits"),
    C("sim-q0-count", ["sim", P2, "--q0", "1"], "error", "--q0"),
    C("sim-euler-coarse", f"sim {P2} --integrator euler --dt 0.5 --duration 500", "any"),
    C("sim-gripper-arm", "sim gripper_arm --duration 0.2", "ok", "energy"),
    C("sim-contact-huge", f"sim {P2} --contact --duration 1e9", "error", STEPS),

    # -- ik, analyze -----------------------------------------------------------------------------
    C("ik-position", ["ik", P2, "--position", "0 0 0.6"], "ok", "converged"),
    C("ik-unreachable", ["ik", P2, "--position", "0 0 10"], "finding", "NOT converged", quick=True),
    C("ik-both", ["ik", P2, "--position", "0 0 1", "--target", "1 0 0 0 0 1 0 0 0 0 1 0 0 0 0 1"],
      "error", "exactly one"),
    C("ik-neither", f"ik {P2}", "error", "--target"),
    C("ik-target-short", ["ik", P2, "--target", "1 2 3"], "error", "--target"),
    C("ik-target-nan", ["ik", P2, "--target", "1 0 0 nan 0 1 0 0 0 0 1 0 0 0 0 1"], "error", "--target"),
    C("ik-target-bottom", ["ik", P2, "--target", "1 0 0 0 0 1 0 0 0 0 1 0 5 5 5 5"], "error", "--target"),
    C("ik-target-scaled", ["ik", P2, "--target", "2 0 0 0 0 2 0 0 0 0 2 0 0 0 0 1"], "error", "--target"),
    C("ik-position-nan", ["ik", P2, "--position", "nan 0 0"], "error", "--position"),
    C("ik-restarts-0", ["ik", P2, "--position", "0 0 0.6", "--restarts", "0"], "error", "--restarts"),
    C("ik-restarts-huge", ["ik", P2, "--position", "0 0 0.6", "--restarts", "1000000000"], "error",
      BATCH),
    C("ik-iters-0", ["ik", P2, "--position", "0 0 0.6", "--max-iters", "0"], "error", "--max-iters"),
    C("ik-iters-huge", ["ik", P2, "--position", "0 0 0.6", "--max-iters", "100000000"], "error", STEPS),
    C("ik-tol-nan", ["ik", P2, "--position", "0 0 0.6", "--tol", "nan"], "error", "--tol"),
    C("ik-tol-neg", ["ik", P2, "--position", "0 0 0.6", "--tol", "-1"], "error", "--tol"),
    C("ik-lock-unknown", ["ik", P2, "--position", "0 0 0.6", "--lock", "nosuch"], "error", "nosuch"),
    C("ik-frame-unknown", ["ik", P2, "--position", "0 0 0.6", "--frame", "nosuch"], "error", "nosuch"),
    C("ik-q0-outside", ["ik", P2, "--position", "0 0 0.6", "--q0", Q_OUT], "finding", "outside its limits"),
    C("ik-seed-huge", ["ik", P2, "--position", "0 0 0.6", "--seed", "99999999999999999999999"], "error",
      "--seed"),
    C("ik-seed-neg", ["ik", P2, "--position", "0 0 0.6", "--seed=-1"], "error", "--seed"),
    C("plan-seed-huge", ["plan", P2, "--goal", "1 0", "--seed", "99999999999999999999999"], "error",
      "--seed"),
    C("record-seed-neg", ["record", P2, "--goal", "1 0", "--out", "{tmp}/r", "--seed=-3"], "error", "--seed"),
    C("data-doctor-seed", "data doctor {tmp}/ds --seed=-1", "error", "--seed", setup="datasets"),
    C("analyze", f"analyze {P2}", "ok", "manipulability"),
    C("analyze-outside", ["analyze", P2, "--joints", "1e300 0"], "finding", "outside its limits"),
    C("analyze-nan", ["analyze", P2, "--joints", "nan 0"], "error", "--joints"),
    C("analyze-frame", f"analyze {P2} --frame nosuch", "error", "nosuch"),
    C("analyze-toy", "analyze toy", "ok", "manipulability"),

    # -- calibrate ---------------------------------------------------------------------------------
    C("cal-missing", f"calibrate {P2} --data {{tmp}}/missing.npz", "error", "no such file", setup="npz"),
    C("cal-dev-zero", f"calibrate {P2} --data /dev/zero", "error", "--data"),
    C("cal-symlink-zero", f"calibrate {P2} --data {{tmp}}/zero.npz", "error", "not a regular file",
      setup="npz", quick=True),
    C("cal-directory", f"calibrate {P2} --data {{tmp}}/dir.npz", "error", "directory", setup="npz"),
    C("cal-big", f"calibrate {P2} --data {{tmp}}/big.npz", "error", "MiB", setup="npz"),
    C("cal-no-arrays", f"calibrate {P2} --data {{tmp}}/noarrays.npz", "error", "--data", setup="npz",
      quick=True),
    C("cal-zero-byte", f"calibrate {P2} --data {{tmp}}/zerobyte.npz", "error", "--data", setup="npz"),
    C("cal-text-npz", f"calibrate {P2} --data {{tmp}}/text.npz", "error", "not a readable .npz", setup="npz"),
    C("cal-object-array", f"calibrate {P2} --data {{tmp}}/object.npz", "error", "not a numeric array",
      setup="npz"),
    C("cal-strings", f"calibrate {P2} --data {{tmp}}/strings.npz", "error", "not a numeric array",
      setup="npz"),
    C("cal-shape", f"calibrate {P2} --data {{tmp}}/shape.npz", "error", "q", setup="npz"),
    C("cal-nan", f"calibrate {P2} --data {{tmp}}/nan.npz", "error", "non-finite", setup="npz"),
    C("cal-zero-rows", f"calibrate {P2} --data {{tmp}}/rows0.npz", "error", "observations", setup="npz"),
    C("cal-missing-T", f"calibrate {P2} --data {{tmp}}/onlyq.npz", "error", "needs field(s) T", setup="npz"),
    C("cal-row-mismatch", f"calibrate {P2} --data {{tmp}}/mismatch.npz", "error", "T", setup="npz"),
    C("cal-bad-poses", f"calibrate {P2} --data {{tmp}}/badT.npz", "error", "T", setup="npz"),
    C("cal-scalars", f"calibrate {P2} --data {{tmp}}/scalar.npz", "error", "q", setup="npz"),
    C("cal-dynamic-missing", f"calibrate {P2} --mode dynamic --data {{tmp}}/onlyq.npz", "error", "qd",
      setup="npz"),
    C("cal-bad-json", f"calibrate {P2} --data {{tmp}}/bad.json", "error", "not valid JSON", setup="npz"),
    C("cal-list-json", f"calibrate {P2} --data {{tmp}}/list.json", "error", "JSON object", setup="npz"),
    C("cal-ragged-json", f"calibrate {P2} --data {{tmp}}/ragged.json", "error", "numeric array", setup="npz"),
    C("cal-words-json", f"calibrate {P2} --data {{tmp}}/words.json", "error", "numeric array", setup="npz"),
    C("cal-deep-json", f"calibrate {P2} --data {{tmp}}/deep.json", "error", "--data", setup="npz"),
    C("cal-empty-json", f"calibrate {P2} --data {{tmp}}/emptyobj.json", "error", "needs field", setup="npz"),
    C("cal-frame-number", f"calibrate {P2} --data {{tmp}}/frame5.json", "error", "frame", setup="npz"),
    C("cal-frame-unknown", f"calibrate {P2} --data {{tmp}}/ghostframe.json", "error", "ghost", setup="npz"),
    C("cal-latin1", f"calibrate {P2} --data {{tmp}}/latin1.json", "error", "UTF-8", setup="npz"),
    C("cal-huge-numbers", f"calibrate {P2} --data {{tmp}}/huge_numbers.json", "any", setup="npz"),
    C("cal-suffix", f"calibrate {P2} --data {{tmp}}/existing.txt", "error", ".npz", setup="files"),
    C("cal-mode", f"calibrate {P2} --data x.npz --mode magic", "error", "--mode"),
    C("cal-ok", f"calibrate {P2} --data {{tmp}}/obs.json", "ok", "converged", setup="calib_ok"),

    # -- move, report ------------------------------------------------------------------------------
    C("move", ["move", P2, "--goal", "1 0"], "ok", "MOVE_J"),
    C("move-dt-tiny", ["move", P2, "--goal", "1 0", "--dt", "1e-9"], "error", STEPS, quick=True),
    C("move-dt-0", ["move", P2, "--goal", "1 0", "--dt", "0"], "error", "--dt"),
    C("move-dt-nan", ["move", P2, "--goal", "1 0", "--dt", "nan"], "error", "--dt"),
    C("move-dt-neg", ["move", P2, "--goal", "1 0", "--dt", "-0.01"], "error", "--dt"),
    C("move-goal-outside", ["move", P2, "--goal", Q_OUT], "error", "j1 = 10 is outside its limits",
      quick=True),
    C("move-q0-outside", ["move", P2, "--q0", Q_OUT, "--goal", "0 0"], "error", "--q0: joint j1"),
    C("move-goal-count", ["move", P2, "--goal", "1"], "error", "--goal"),
    C("move-goal-nan", ["move", P2, "--goal", "nan 0"], "error", "--goal"),
    C("move-nothing", f"move {P2}", "error", "--goal"),
    C("move-both", ["move", P2, "--goal", "1 0", "--target", "0 0 1"], "error", "--target"),
    C("move-unreachable", ["move", P2, "--target", "0 0 10"], "finding", "PROBLEM", quick=True),
    C("move-linear-dt-tiny", ["move", P2, "--target", "0 0 0.5", "--linear", "--position-only", "--dt",
                              "1e-9"], "error", STEPS),
    C("move-max-jump", ["move", P2, "--target", "0 0 0.5", "--linear", "--max-jump", "-1"], "error",
      "--max-jump"),
    C("move-via-alone", ["move", P2, "--goal", "1 0", "--via", "0 0 1"], "error", "--via"),
    C("move-out-nodir", ["move", P2, "--goal", "1 0", "--out", "{tmp}/nodir/x.json"], "error", "--out"),
    C("move-out-suffix", ["move", P2, "--goal", "1 0", "--out", "{tmp}/x.txt"], "error", "--out"),
    C("move-out-dir", ["move", P2, "--goal", "1 0", "--out", "{tmp}"], "error", "--out"),
    C("move-out-csv", ["move", P2, "--goal", "1 0", "--out", "{tmp}/rows.csv"], "ok", "wrote rows"),
    C("move-multi", ["move", P2, "--goal", "1 0", "--goal=-1,0.5"], "ok", "2 segment"),
    C("move-frame", ["move", P2, "--target", "0 0 0.5", "--frame", "nosuch"], "error", "nosuch"),
    C("report", ["report", P2, "--goal", "1 0"], "ok", "LINT: 0 error(s)"),
    C("report-samples-1", ["report", P2, "--goal", "1 0", "--samples", "1"], "error", "--samples"),
    C("report-samples-neg", ["report", P2, "--goal", "1 0", "--samples", "-5"], "error", "--samples"),
    C("report-samples-huge", ["report", P2, "--goal", "1 0", "--samples", "1000000000"], "error", STEPS),
    C("report-clearance-nan", ["report", P2, "--goal", "1 0", "--clearance", "nan"], "error", "--clearance"),
    C("report-clearance-neg", ["report", P2, "--goal", "1 0", "--clearance", "-1"], "error", "--clearance"),
    C("report-ground-nan", ["report", P2, "--goal", "1 0", "--ground", "nan"], "error", "--ground"),
    C("report-goal-outside", ["report", P2, "--goal", Q_OUT], "finding", "joint j1 passes its upper"),
    C("report-goal-outside-strict", ["report", P2, "--goal", Q_OUT, "--strict"], "finding", "[T001]"),

    # -- check, plan, trajopt --------------------------------------------------------------------------
    C("check", "check collide_arm", "ok", "self pairs"),
    C("check-outside", ["check", P2, "--joints", Q_OUT], "finding", "outside its limits"),
    C("check-finger-10m", ["check", "panda", "--joints", PANDA_FINGER_OUT], "finding", "panda_finger_joint1"),
    C("check-box-short", ["check", P2, "--box", "1,2"], "error", "--box"),
    C("check-box-words", ["check", P2, "--box", "a,b,c,d,e,f"], "error", "--box"),
    C("check-box-negative", ["check", P2, "--box", "0,0,0,-1,1,1"], "error", "--box"),
    C("check-box-nan", ["check", P2, "--box", "0,0,0,nan,1,1"], "error", "--box"),
    C("check-sphere-neg", ["check", P2, "--sphere", "0,0,0,-1"], "error", "--sphere"),
    C("check-sphere-inf", ["check", P2, "--sphere", "0,0,inf,1"], "error", "--sphere"),
    C("check-top-neg", f"check {P2} --top -1", "error", "--top"),
    C("check-margin-nan", f"check {P2} --margin nan", "error", "--margin"),
    C("check-margin-neg", f"check {P2} --margin -1", "error", "--margin"),
    C("check-ground-inf", f"check {P2} --ground inf", "error", "--ground"),
    C("check-srdf-zero", f"check {P2} --srdf /dev/zero", "error", "--srdf", quick=True),
    C("check-srdf-missing", f"check {P2} --srdf {{tmp}}/missing.srdf", "error", "--srdf", setup="files"),
    C("check-srdf-binary", f"check {P2} --srdf {{tmp}}/bin.srdf", "error", "bin.srdf", setup="files"),
    C("check-srdf-root", f"check {P2} --srdf {{tmp}}/wrongroot.srdf", "error", "wrongroot", setup="files"),
    C("check-srdf-big", f"check {P2} --srdf {{tmp}}/big.srdf", "error", "MiB", setup="files"),
    C("check-srdf-dir", f"check {P2} --srdf {{tmp}}", "error", "directory", setup="files"),
    C("check-collision-strict", ["check", "collide_arm", "--box", "0,0,0,2,2,2", "--strict"], "finding",
      "IN COLLISION"),
    C("plan", ["plan", P2, "--goal", "1 0"], "ok", "path found"),
    C("plan-goal-outside", ["plan", P2, "--goal", Q_OUT], "finding", "joint j1 goal 10 is beyond",
      quick=True),
    C("plan-start-outside", ["plan", P2, "--goal", "1 0", "--start", Q_OUT], "finding", "start: joint j1"),
    C("plan-iterations-huge", ["plan", P2, "--goal", "1 0", "--max-iterations", "1000000000"], "error",
      STEPS),
    C("plan-iterations-0", ["plan", P2, "--goal", "1 0", "--max-iterations", "0"], "error",
      "--max-iterations"),
    C("plan-step-0", ["plan", P2, "--goal", "1 0", "--step", "0"], "error", "--step"),
    C("plan-step-nan", ["plan", P2, "--goal", "1 0", "--step", "nan"], "error", "--step"),
    C("plan-resolution-0", ["plan", P2, "--goal", "1 0", "--resolution", "0"], "error", "--resolution"),
    C("plan-resolution-tiny", ["plan", P2, "--goal", "1 0", "--resolution", "1e-12"], "error", STEPS),
    C("plan-batch-0", ["plan", P2, "--goal", "1 0", "--batch", "0"], "error", "--batch"),
    C("plan-batch-huge", ["plan", P2, "--goal", "1 0", "--batch", "1000000000"], "error", BATCH),
    C("plan-planner", ["plan", P2, "--goal", "1 0", "--planner", "astar"], "error", "--planner"),
    C("plan-retime", ["plan", P2, "--goal", "1 0", "--retime", "magic"], "error", "--retime"),
    C("plan-clearance-neg", ["plan", P2, "--goal", "1 0", "--clearance", "-1"], "error", "--clearance"),
    C("plan-margin-neg", ["plan", P2, "--goal", "1 0", "--margin", "-1"], "error", "--margin"),
    C("trajopt-goal-outside", ["trajopt", P2, "--start", "0 0", "--goal", Q_OUT], "error",
      "--goal: joint j1"),
    C("trajopt-start-outside", ["trajopt", P2, "--start", Q_OUT, "--goal", "0 0"], "error", "--start"),
    C("trajopt-waypoints-2", ["trajopt", P2, "--start", "0 0", "--goal", "1 0", "--waypoints", "2"], "error",
      "--waypoints"),
    C("trajopt-waypoints-huge", ["trajopt", P2, "--start", "0 0", "--goal", "1 0", "--waypoints",
                                 "1000000000"], "error", BATCH, quick=True),
    C("trajopt-iterations-neg", ["trajopt", P2, "--start", "0 0", "--goal", "1 0", "--iterations", "-1"],
      "error", "--iterations"),
    C("trajopt-iterations-huge", ["trajopt", P2, "--start", "0 0", "--goal", "1 0", "--iterations",
                                  "1000000000"], "error", STEPS),
    C("trajopt-inits-0", ["trajopt", P2, "--start", "0 0", "--goal", "1 0", "--inits", "0"], "error",
      "--inits"),
    C("trajopt-inits-huge", ["trajopt", P2, "--start", "0 0", "--goal", "1 0", "--inits", "1000000000"],
      "error", BATCH),
    C("trajopt-lr-nan", ["trajopt", P2, "--start", "0 0", "--goal", "1 0", "--learning-rate", "nan"],
      "error", "--learning-rate"),
    C("trajopt-lr-0", ["trajopt", P2, "--start", "0 0", "--goal", "1 0", "--learning-rate", "0"], "error",
      "--learning-rate"),
    C("trajopt-resolution-tiny", ["trajopt", P2, "--start", "0 0", "--goal", "1 0", "--resolution", "1e-12"],
      "error", STEPS),
    C("trajopt-free-unknown", ["trajopt", P2, "--start", "0 0", "--goal", "1 0", "--free", "nosuch"],
      "error", "--free"),
    C("trajopt-holds-gripper", ["trajopt", "gripper_arm", "--start", "0 0 0.02", "--goal", "1 0.5 0.02",
                                "--iterations", "20", "--inits", "2", "--json"], "ok", check=_held_gripper,
      quick=True),

    # -- control, record -----------------------------------------------------------------------
    C("control", ["control", P2, "--goal", "1 0"], "ok", "goal reached"),
    C("control-ticks-short", ["control", P2, "--goal", "1 0", "--ticks", "50"], "finding", "goal not reached",
      quick=True),
    C("control-ticks-short-json", ["control", P2, "--goal", "1 0", "--ticks", "50", "--json"], "finding",
      check=_goal_missed),
    C("control-ticks-huge", ["control", P2, "--goal", "1 0", "--ticks", "100000000"], "error", STEPS,
      quick=True),
    C("control-ticks-0", ["control", P2, "--goal", "1 0", "--ticks", "0"], "error", "--ticks"),
    C("control-ticks-neg", ["control", P2, "--goal", "1 0", "--ticks", "-1"], "error", "--ticks"),
    C("control-ticks-float", ["control", P2, "--goal", "1 0", "--ticks", "1.5"], "error", "--ticks"),
    C("control-dt-0", ["control", P2, "--goal", "1 0", "--dt", "0"], "error", "--dt"),
    C("control-dt-nan", ["control", P2, "--goal", "1 0", "--dt", "nan"], "error", "--dt"),
    C("control-kp-neg", ["control", P2, "--goal", "1 0", "--kp", "-1"], "error", "--kp"),
    C("control-kd-inf", ["control", P2, "--goal", "1 0", "--kd", "inf"], "error", "--kd"),
    C("control-toy", ["control", "toy", "--goal", "1 0"], "error", "inertial data"),
    C("control-floating", ["control", "solo12", "--goal", " ".join(["0"] * 19)], "error", "free or ball"),
    C("control-goal-outside", ["control", P2, "--goal", Q_OUT], "finding", "clamped by the gate"),
    C("control-q0-outside", ["control", P2, "--goal", "1 0", "--q0", Q_OUT], "finding", "outside its limits"),
    C("control-goal-count", ["control", P2, "--goal", "1"], "error", "--goal"),
    C("control-plot-nodir", ["control", P2, "--goal", "1 0", "--plot", "{tmp}/nodir/q.png"], "error",
      "--plot"),
    C("record", ["record", P2, "--goal", "1 0", "--out", "{tmp}/rec", "--ticks", "600"], "ok", "recorded"),
    C("record-short", ["record", P2, "--goal", "1 0", "--out", "{tmp}/rec", "--ticks", "100"], "finding",
      "did not reach the goal"),
    C("record-worlds-0", ["record", P2, "--goal", "1 0", "--out", "{tmp}/r", "--worlds", "0"], "error",
      "--worlds"),
    C("record-worlds-huge", ["record", P2, "--goal", "1 0", "--out", "{tmp}/r", "--worlds", "100000000"],
      "error", BATCH),
    C("record-world-ticks", ["record", P2, "--goal", "1 0", "--out", "{tmp}/r", "--worlds", "1000",
                             "--ticks", "10000"], "error", STEPS),
    C("record-fps-0", ["record", P2, "--goal", "1 0", "--out", "{tmp}/r", "--fps", "0"], "error", "--fps"),
    C("record-fps-neg", ["record", P2, "--goal", "1 0", "--out", "{tmp}/r", "--fps", "-5"], "error", "--fps"),
    C("record-fps-nondivisor", ["record", P2, "--goal", "1 0", "--out", "{tmp}/r", "--fps", "30"], "error",
      "fps 30"),
    C("record-dt-tiny", ["record", P2, "--goal", "1 0", "--out", "{tmp}/r", "--dt", "1e-12", "--fps", "7"],
      "error", STEPS, quick=True),
    C("record-out-file", ["record", P2, "--goal", "1 0", "--out", "{tmp}/existing.txt"], "error",
      "existing.txt", setup="files"),
    C("record-out-dev-zero", ["record", P2, "--goal", "1 0", "--out", "/dev/zero"], "error", "/dev/zero"),
    C("record-spread-nan", ["record", P2, "--goal", "1 0", "--out", "{tmp}/r", "--spread", "nan"], "error",
      "--spread"),
    C("record-spread-neg", ["record", P2, "--goal", "1 0", "--out", "{tmp}/r", "--spread", "-1"], "error",
      "--spread"),
    C("record-ticks-huge", ["record", P2, "--goal", "1 0", "--out", "{tmp}/r", "--ticks", "100000000"],
      "error", STEPS),

    # -- mjcf, contact ------------------------------------------------------------------------------
    C("mjcf", f"mjcf {P2}", "ok", "<mujoco"),
    C("mjcf-out-nodir", f"mjcf {P2} --out {{tmp}}/nodir/x.xml", "error", "--out"),
    C("mjcf-timestep-neg", f"mjcf {P2} --timestep -1", "error", "--timestep"),
    C("mjcf-toy-check", "mjcf toy --check", "error", "inertials"),
    C("mjcf-prop-bad", ["mjcf", P2, "--prop", "box:1@0,0,0"], "error", "--prop"),
    C("mjcf-prop-json", ["mjcf", P2, "--prop", "{bad"], "error", "--prop"),
    C("mjcf-prop-nan", ["mjcf", P2, "--prop", "sphere:0.05@0,0,nan"], "error", "--prop"),
    C("mjcf-prop-kind", ["mjcf", P2, "--prop", "donut:1@0,0,0"], "error", "--prop"),
    C("mjcf-material", f"mjcf {P2} --material cheese", "error", "cheese"),
    C("mjcf-dev-zero", "mjcf /dev/zero", "error", "not a regular file"),
    C("mjcf-ground-nan", f"mjcf {P2} --ground nan", "error", "--ground"),
    C("contact-sim", f"contact-sim {P2} --duration 0.05", "ok", "MuJoCo steps"),
    C("contact-sim-duration-huge", f"contact-sim {P2} --duration 1e9", "error", STEPS, quick=True),
    C("contact-sim-duration-0", f"contact-sim {P2} --duration 0", "error", "--duration"),
    C("contact-sim-timestep-tiny", f"contact-sim {P2} --timestep 1e-12", "error", STEPS),
    C("contact-sim-timestep-nan", f"contact-sim {P2} --timestep nan", "error", "--timestep"),
    C("contact-sim-integrator", f"contact-sim {P2} --integrator magic --duration 0.01", "error", "magic"),
    C("contact-sim-toy", "contact-sim toy", "error", "inertials"),
    C("contact-sim-q0-outside", ["contact-sim", P2, "--q0", Q_OUT, "--duration", "0.01"], "finding",
      "outside its limits"),
    C("contact-sim-q0-nan", ["contact-sim", P2, "--q0", "nan 0"], "error", "--q0"),
    C("contact-lint", f"contact-lint {P2}", "ok", "contact lint"),
    C("contact-lint-timestep-tiny", f"contact-lint {P2} --timestep 1e-9", "error", STEPS),
    C("contact-lint-timestep-long", f"contact-lint {P2} --timestep 1", "error", "--timestep"),
    C("contact-sim-timestep-long", f"contact-sim {P2} --timestep 5", "error", "--duration"),
    C("move-goal-unicode", ["move", P2, "--goal", "1\u00a00 \u2212"], "error", "--goal"),
    C("cal-empty-arrays", f"calibrate {P2} --data {{tmp}}/emptyq.json", "error", "q", setup="npz"),
    C("contact-lint-toy", "contact-lint toy", "error", "inertials"),
    C("contact-lint-material", f"contact-lint {P2} --material cheese", "error", "cheese"),

    # -- asset doctor ---------------------------------------------------------------------------------
    C("doctor", f"doctor {FIXTURE}/pendulum2.urdf", "ok", "pendulum2"),
    C("doctor-toy", f"doctor {FIXTURE}/toy.urdf", "finding", "A0"),
    C("doctor-dev-zero", "doctor /dev/zero", "error", "not a regular file", quick=True),
    C("doctor-fifo", "doctor {tmp}/fifo.urdf", "error", "not a regular file", setup="files"),
    C("doctor-dir", "doctor {tmp}/dir.urdf", "error", "dir.urdf", setup="files"),
    C("doctor-missing", "doctor {tmp}/missing.urdf", "error", "missing.urdf", setup="files"),
    C("doctor-empty", "doctor {tmp}/empty.urdf", "error", "empty", setup="files"),
    C("doctor-binary", "doctor {tmp}/binary.urdf", "error", "binary.urdf", setup="files"),
    C("doctor-big", "doctor {tmp}/big.urdf", "error", "MiB", setup="files"),
    C("doctor-entities", "doctor {tmp}/entity.urdf", "error", "entity", setup="files"),
    C("doctor-out-alone", f"doctor {FIXTURE}/pendulum2.urdf --out {{tmp}}/x.urdf", "error", "--repair"),
    C("doctor-density-neg", f"doctor {FIXTURE}/toy.urdf --repair --density -1 --out {{tmp}}/t.urdf", "error",
      "density"),
    C("doctor-fix-unknown", f"doctor {FIXTURE}/toy.urdf --fix magic", "error", "magic"),

    # -- datasets --------------------------------------------------------------------------------------
    C("data-info", "data info {tmp}/ds", "ok", "3 episodes", setup="datasets"),
    C("data-doctor", "data doctor {tmp}/ds", "ok", "no findings", setup="datasets"),
    C("data-info-fps0", "data info {tmp}/fps0", "error", "'fps'", setup="datasets", quick=True),
    C("data-doctor-fps0", "data doctor {tmp}/fps0", "error", "'fps'", setup="datasets", quick=True),
    C("data-doctor-fps-neg", "data doctor {tmp}/fpsneg", "error", "'fps'", setup="datasets"),
    C("data-info-fps-str", "data info {tmp}/fpsstr", "error", "'fps'", setup="datasets"),
    C("data-info-fps-frac", "data info {tmp}/fpsfrac", "error", "'fps'", setup="datasets"),
    C("data-info-fps-bool", "data info {tmp}/fpsbool", "error", "'fps'", setup="datasets"),
    C("data-info-fps-null", "data info {tmp}/fpsnull", "error", "'fps'", setup="datasets"),
    C("data-info-neg-episodes", "data info {tmp}/negeps", "error", "total_episodes", setup="datasets"),
    C("data-info-features-list", "data info {tmp}/featlist", "error", "features", setup="datasets"),
    C("data-info-shape-str", "data info {tmp}/shapestr", "error", "shape", setup="datasets"),
    C("data-info-v2", "data info {tmp}/v2", "error", "v2.1", setup="datasets"),
    C("data-info-no-info", "data info {tmp}/noinfo", "error", "info.json", setup="datasets"),
    C("data-info-binary-info", "data info {tmp}/bininfo", "error", "info.json", setup="datasets"),
    C("data-info-list-info", "data info {tmp}/listinfo", "error", "info.json", setup="datasets"),
    C("data-info-dir-info", "data info {tmp}/dirinfo", "error", "directory", setup="datasets"),
    C("data-info-zero-info", "data info {tmp}/zeroinfo", "error", "not a regular file", setup="datasets",
      quick=True),
    C("data-info-big-info", "data info {tmp}/biginfo", "error", "MiB", setup="datasets"),
    C("data-info-no-episodes", "data info {tmp}/noepisodes", "error", "meta/episodes", setup="datasets",
      quick=True),
    C("data-doctor-no-episodes", "data doctor {tmp}/noepisodes", "error", "meta/episodes", setup="datasets"),
    C("data-info-no-tasks", "data info {tmp}/notasks", "error", "tasks", setup="datasets"),
    C("data-doctor-no-stats", "data doctor {tmp}/nostats", "finding", "D002", setup="datasets"),
    C("data-doctor-bad-stats", "data doctor {tmp}/badstats", "any", setup="datasets"),
    C("data-doctor-garbage-data", "data doctor {tmp}/garbagedata", "finding", "D019", setup="datasets"),
    C("data-doctor-no-data", "data doctor {tmp}/nodata", "finding", "D019", setup="datasets"),
    C("data-doctor-backwards", "data doctor {tmp}/backts", "finding", "(error) episode 0: timestamps go "
      "backwards", setup="datasets", quick=True),
    C("data-doctor-standstill", "data doctor {tmp}/stillts", "finding", "(error)", setup="datasets"),
    C("data-doctor-nan", "data doctor {tmp}/nanstate", "finding", "D016", setup="datasets"),
    C("data-doctor-nan-json", "data doctor {tmp}/nanstate --json", "finding", "D016", setup="datasets"),
    C("data-info-dev-zero", "data info /dev/zero", "error", "not a directory"),
    C("data-info-missing", "data info {tmp}/nosuch", "error", "nosuch", setup="datasets"),
    C("data-info-file", "data info {tmp}/notes.txt", "error", "not a directory", setup="datasets"),
    C("data-doctor-window-0", "data doctor {tmp}/ds --window 0", "error", "--window", setup="datasets"),
    C("data-delete-words", "data delete {tmp}/ds --episodes a", "error", "--episodes", setup="datasets"),
    C("data-delete-neg", "data delete {tmp}/ds --episodes=-1", "error", "--episodes", setup="datasets"),
    C("data-delete-empty", ["data", "delete", "{tmp}/ds", "--episodes", ","], "error", "--episodes",
      setup="datasets"),
    C("data-delete-range", "data delete {tmp}/ds --episodes 99", "error", "99", setup="datasets"),
    C("data-delete-ok", "data delete {tmp}/ds --episodes 1", "ok", "2 episodes", setup="datasets"),
    C("data-split-range", "data split {tmp}/ds --episode 99 --frame 1", "error", "99", setup="datasets"),
    C("data-split-frame", "data split {tmp}/ds --episode 0 --frame=-1", "error", "frame", setup="datasets"),
    C("data-merge-same", "data merge {tmp}/ds --first 0 --second 0", "error", "merge", setup="datasets"),
    C("data-tag-range", "data tag {tmp}/ds --episode 99 --add x", "error", "99", setup="datasets"),
    C("data-recover", "data recover {tmp}/ds", "ok", setup="datasets"),
    C("data-unknown-action", "data explode {tmp}/ds", "error", "explode"),
]


# round two (issue 35): the verbs added since, and the kinds of failure found there
from hostile import cases_verbs  # noqa: E402

SETUPS.update(cases_verbs.SETUPS)
CASES += cases_verbs._cases(C)


def by_id() -> dict[str, Case]:
    out = {}
    for case in CASES:
        assert case.id not in out, f"duplicate case id {case.id}"
        assert case.expect in ("error", "ok", "finding", "any"), case.id
        out[case.id] = case
    return out


QUICK = [c for c in CASES if c.quick]

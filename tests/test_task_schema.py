"""The task artifact loader: strict keys at every level (with the key path), one-line errors naming
the file and key for every bad-input class, the zoo (loads, round-trips, unique names, relative and
resolvable robots) and zoo discovery."""
from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tasks
from caliper_jax.errors import CaliperError
from tasks.schema import (
    ZOO_DIR,
    AllOf,
    GripperSpec,
    Lifted,
    PlacedInZone,
    Zone,
    find_task,
    load_task,
    parse_task,
    predicate_from_dict,
    predicate_to_dict,
    task_to_dict,
    zoo_files,
    zoo_names,
)

ROOT = Path(__file__).resolve().parent.parent
URDF = ROOT / "robots" / "gripper_arm.urdf"
ZOO = ["lift-cube", "place-cube", "hold-cube-high", "sort-blocks", "precise-place"]

BASE = {
    "version": 1,
    "name": "t",
    "robot": "robots/gripper_arm.urdf",
    "q0": [0.0, 0.0, 0.02],
    "scene": {
        "ground": 0.0,
        "props": [{"name": "cube", "kind": "box", "halfExtents": [0.05, 0.05, 0.05], "pos": [0, 0, 0.05],
                   "mass": 0.05, "rgba": [1, 0, 0, 1], "material": "wood"}],
        "zones": [{"name": "bin", "center": [-0.15, 0, 0.05], "half": [0.07, 0.07, 0.06]}],
    },
    "gripper": {"joint": "gripper", "closed": "lo"},
    "success": {"kind": "all_of", "terms": [
        {"kind": "lifted", "prop": "cube", "height": 0.08},
        {"kind": "placed_in_zone", "prop": "cube", "zone": "bin", "settled_speed": 0.01}]},
    "horizonS": 8.0,
    "fps": 50,
}


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "robots").mkdir()
    shutil.copy(URDF, tmp_path / "robots" / "gripper_arm.urdf")
    return tmp_path


def _write(folder: Path, data, name="t.caliper-task.json") -> Path:
    path = folder / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def _error(folder: Path, data) -> str:
    """The loader's message for ``data``: one line, starting with the file path."""
    path = _write(folder, data)
    with pytest.raises(CaliperError) as info:
        load_task(path)
    msg = str(info.value)
    assert "\n" not in msg, msg
    assert msg.startswith(f"{path}: "), msg
    return msg[len(f"{path}: "):]


def _with(edit):
    data = copy.deepcopy(BASE)
    edit(data)
    return data


def _at(data, path: str):
    """The object at a dotted key path like ``scene.props[0]`` ('' is the top)."""
    node = data
    for part in path.replace("]", "").replace("[", ".").split(".") if path else ():
        node = node[int(part)] if part.isdigit() else node[part]
    return node


def test_base_loads(folder):
    task = load_task(_write(folder, BASE))
    assert task.name == "t" and task.robot == (folder / "robots" / "gripper_arm.urdf").resolve()
    assert task.gripper == GripperSpec("gripper", "lo") and task.fps == 50 and task.horizon_s == 8.0
    assert isinstance(task.success, AllOf) and task.success.terms[0] == Lifted("cube", 0.08, "initial")
    placed = task.success.terms[1]
    assert isinstance(placed, PlacedInZone) and placed.zone is task.zones[0]   # stored resolved


# ---- unknown keys at every level --------------------------------------------------------------------

@pytest.mark.parametrize("path, typo, real", [
    ("", "vesion", "version"),
    ("scene", "prop", "props"),
    ("scene.props[0]", "halfExtnts", "halfExtents"),
    ("scene.props[0].material", "frction", "friction"),
    ("scene.zones[0]", "centre", "center"),
    ("gripper", "jiont", "joint"),
    ("success", "termz", "terms"),
    ("success.terms[0]", "heigth", "height"),
    ("success.terms[1]", "settled_sped", "settled_speed"),
])
def test_unknown_key_rejected_with_its_path(folder, path, typo, real):
    def edit(data):
        if path.endswith("material"):
            data["scene"]["props"][0]["material"] = {"solref": [0.01, 1], "solimp": [0.9, 0.95, 0.001],
                                                     "friction": [1, 0.01, 0.001]}
        _at(data, path)[typo] = 1
    msg = _error(folder, _with(edit))
    key = f"{path}.{typo}" if path else typo
    assert msg == f"{key}: unknown key (did you mean {real!r}?)"


def test_unknown_key_without_a_close_match(folder):
    msg = _error(folder, _with(lambda d: d["scene"].update(lighting="bright")))
    assert msg == "scene.lighting: unknown key"


# ---- every other bad-input class: one line naming the file and the key -------------------------------

def _set(path: str, key, value):
    def edit(data):
        if value is _DELETE:
            del _at(data, path)[key]
        else:
            _at(data, path)[key] = value
    return edit


_DELETE = object()
_NAN = float("nan")

BAD = [
    # version
    ("version-3", _set("", "version", 3), "version", "unsupported schema version 3"),
    ("version-string", _set("", "version", "1"), "version", "expected the integer 1 or 2"),
    ("version-missing", _set("", "version", _DELETE), "version", "missing"),
    # wrong types
    ("name-number", _set("", "name", 5), "name", "non-empty string"),
    ("name-empty", _set("", "name", ""), "name", "non-empty string"),
    ("q0-string", _set("", "q0", "zeros"), "q0", "expected a list"),
    ("q0-bool-entry", _set("", "q0", [0, True, 0]), "q0[1]", "expected a number"),
    ("scene-list", _set("", "scene", []), "scene", "expected an object"),
    ("props-object", _set("scene", "props", {}), "scene.props", "expected a list"),
    ("prop-not-object", _set("scene", "props", [3]), "scene.props[0]", "expected an object"),
    ("pos-string", _set("scene.props[0]", "pos", [0, "0", 0]), "scene.props[0].pos[1]", "expected a number"),
    ("pos-length", _set("scene.props[0]", "pos", [0, 0]), "scene.props[0].pos", "expected 3 numbers"),
    ("kind-unknown", _set("scene.props[0]", "kind", "boxx"), "scene.props[0].kind", "did you mean 'box'"),
    ("radius-on-box", _set("scene.props[0]", "radius", 0.1), "scene.props[0].radius", "not used by a box"),
    ("mass-zero", _set("scene.props[0]", "mass", 0), "scene.props[0].mass", "must be > 0"),
    ("material-unknown", _set("scene.props[0]", "material", "wod"), "scene.props[0].material",
     "did you mean 'wood'"),
    ("material-number", _set("scene.props[0]", "material", 3), "scene.props[0].material", "preset name"),
    ("gripper-joint-number", _set("gripper", "joint", 1), "gripper.joint", "non-empty string"),
    ("success-not-object", _set("", "success", "lifted"), "success", "expected a predicate object"),
    ("terms-not-list", _set("success", "terms", {}), "success.terms", "expected a list"),
    ("terms-empty", _set("success", "terms", []), "success.terms", "at least one term"),
    ("kind-predicate-unknown", _set("success", "kind", "all"), "success.kind", "not one of"),
    ("zone-number", _set("success.terms[1]", "zone", 3), "success.terms[1].zone",
     "zone name or a zone object"),
    # missing required fields
    ("name-missing", _set("", "name", _DELETE), "name", "missing"),
    ("robot-missing", _set("", "robot", _DELETE), "robot", "missing"),
    ("scene-missing", _set("", "scene", _DELETE), "scene", "missing"),
    ("prop-kind-missing", _set("scene.props[0]", "kind", _DELETE), "scene.props[0].kind", "missing"),
    ("prop-size-missing", _set("scene.props[0]", "halfExtents", _DELETE), "scene.props[0].halfExtents",
     "missing"),
    ("zone-half-missing", _set("scene.zones[0]", "half", _DELETE), "scene.zones[0].half", "missing"),
    ("zone-name-missing", _set("scene.zones[0]", "name", _DELETE), "scene.zones[0].name", "missing"),
    ("predicate-kind-missing", _set("success.terms[0]", "kind", _DELETE), "success.terms[0].kind", "missing"),
    ("lifted-height-missing", _set("success.terms[0]", "height", _DELETE), "success.terms[0].height",
     "missing"),
    # non-finite numbers
    ("pos-nan", _set("scene.props[0]", "pos", [0, _NAN, 0]), "scene.props[0].pos[1]", "finite"),
    ("horizon-inf", _set("", "horizonS", float("inf")), "horizonS", "finite"),
    ("ground-nan", _set("scene", "ground", _NAN), "scene.ground", "finite"),
    # zone half <= 0
    ("zone-half-zero", _set("scene.zones[0]", "half", [0.1, 0.0, 0.1]), "scene.zones[0].half", "> 0"),
    ("zone-half-negative", _set("scene.zones[0]", "half", [-0.1, 0.1, 0.1]), "scene.zones[0].half", "> 0"),
    # duplicates
    ("duplicate-prop", lambda d: d["scene"]["props"].append(dict(d["scene"]["props"][0])),
     "scene.props[1].name", "duplicate prop name 'cube'"),
    ("duplicate-zone", lambda d: d["scene"]["zones"].append(dict(d["scene"]["zones"][0])),
     "scene.zones[1].name", "duplicate zone name 'bin'"),
    # references
    ("missing-prop", _set("success.terms[0]", "prop", "cub"), "success.terms[0].prop",
     "no prop 'cub' in scene.props (did you mean 'cube'?)"),
    ("missing-zone", _set("success.terms[1]", "zone", "bni"), "success.terms[1].zone", "no zone 'bni'"),
    # lifted
    ("lifted-ref", _set("success.terms[0]", "ref", "relative"), "success.terms[0].ref", "initial, absolute"),
    ("lifted-height-zero", _set("success.terms[0]", "height", 0), "success.terms[0].height", "must be > 0"),
    ("lifted-height-negative", _set("success.terms[0]", "height", -0.1), "success.terms[0].height", "> 0"),
    # settled speed, horizon, fps, gripper
    ("settled-negative", _set("success.terms[1]", "settled_speed", -0.01), "success.terms[1].settled_speed",
     "must be >= 0"),
    ("lifted-held-string", _set("success.terms[0]", "held", "yes"), "success.terms[0].held", "true or false"),
    ("placed-released-int", _set("success.terms[1]", "released", 1), "success.terms[1].released",
     "true or false"),
    ("dwell-negative", _set("", "successDwellS", -0.5), "successDwellS", "must be >= 0"),
    ("dwell-string", _set("", "successDwellS", "1s"), "successDwellS", "expected a number"),
    ("horizon-zero", _set("", "horizonS", 0), "horizonS", "must be > 0"),
    ("horizon-negative", _set("", "horizonS", -1.0), "horizonS", "must be > 0"),
    ("fps-zero", _set("", "fps", 0), "fps", "positive integer"),
    ("fps-float", _set("", "fps", 50.5), "fps", "positive integer"),
    ("fps-whole-float", _set("", "fps", 50.0), "fps", "positive integer"),
    ("fps-bool", _set("", "fps", True), "fps", "positive integer"),
    ("gripper-closed", _set("gripper", "closed", "shut"), "gripper.closed", "lo, hi"),
    # robot
    ("robot-not-found", _set("", "robot", "robots/nope.urdf"), "robot", "'robots/nope.urdf' not found"),
]


@pytest.mark.parametrize("edit, key, fragment", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_naming_file_and_key(folder, edit, key, fragment):
    msg = _error(folder, _with(edit))
    assert msg.startswith(f"{key}: "), msg
    assert fragment in msg, msg


def test_bad_json_reports_line_and_column(folder):
    msg = _error(folder, '{\n  "version": 1,\n  "name": "t",,\n}')
    assert msg.startswith("not valid JSON") and "line 3, column 15" in msg, msg


def test_duplicate_json_key_rejected(folder):
    msg = _error(folder, '{"version": 1, "name": "a", "name": "b"}')
    assert msg.startswith("name: key given twice"), msg


def test_missing_file_and_folder(folder):
    with pytest.raises(CaliperError, match="no such task file"):
        load_task(folder / "absent.caliper-task.json")
    with pytest.raises(CaliperError, match="is a directory"):
        load_task(folder)


def test_absolute_robot_path(folder):
    task = load_task(_write(folder, _with(_set("", "robot", str(URDF)))))
    assert task.robot == URDF


def test_robot_resolves_against_task_folder_not_cwd(folder, monkeypatch):
    (folder / "sub").mkdir()
    path = _write(folder / "sub", _with(_set("", "robot", "../robots/gripper_arm.urdf")))
    monkeypatch.chdir(ROOT)
    assert load_task(path).robot == (folder / "robots" / "gripper_arm.urdf").resolve()


def test_optional_fields_default(folder):
    minimal = {"version": 1, "name": "m", "robot": "robots/gripper_arm.urdf", "scene": {}}
    task = load_task(_write(folder, minimal))
    assert (task.q0, task.ground, task.props, task.zones) == (None, 0.0, (), ())
    assert (task.gripper, task.success, task.horizon_s, task.fps) == (None, None, None, None)
    assert task.success_dwell_s == 0.0 and "successDwellS" not in task_to_dict(task)
    assert parse_task(task_to_dict(task), source=task.source) == task


def test_prop_kinds_and_custom_material_round_trip(folder):
    custom = {"solref": [0.01, 1.0], "solimp": [0.9, 0.95, 0.001], "friction": [1.0, 0.01, 0.001]}
    props = [
        {"name": "ball", "kind": "sphere", "radius": 0.04, "pos": [0.1, 0, 0.04], "material": custom},
        {"name": "can", "kind": "cylinder", "radius": 0.03, "length": 0.1, "pos": [0.2, 0, 0.05],
         "quat": [1, 0, 0, 0], "material": "Steel"},
    ]
    task = load_task(_write(folder, _with(lambda d: d["scene"]["props"].extend(props))))
    ball, can = task.props[1:]
    assert ball.size == (0.04,) and ball.material.solref == (0.01, 1.0) and ball.mass == 0.1
    assert can.size == (0.03, 0.05) and can.material.name == "steel"
    assert parse_task(json.loads(json.dumps(task_to_dict(task))), source=task.source) == task


def test_rotated_props_round_trip_exactly(folder):
    rng = np.random.default_rng(0)
    props = [{"name": f"p{i}", "kind": "box", "halfExtents": [0.02, 0.03, 0.04], "pos": [0.1, 0, 0.04],
              "quat": (rng.normal(size=4) * rng.uniform(0.1, 10)).tolist()} for i in range(300)]
    task = load_task(_write(folder, _with(lambda d: d["scene"]["props"].extend(props))))
    assert parse_task(json.loads(json.dumps(task_to_dict(task))), source=task.source) == task


def test_cylinder_needs_length(folder):
    prop = {"name": "can", "kind": "cylinder", "radius": 0.03}
    msg = _error(folder, _with(lambda d: d["scene"]["props"].append(prop)))
    assert msg.startswith("scene.props[1].length: missing"), msg


def test_inline_zone_is_stored_resolved_and_written_inline(folder):
    inline = {"center": [0.3, 0, 0.1], "half": [0.05, 0.05, 0.05]}
    task = load_task(_write(folder, _with(_set("success.terms[1]", "zone", inline))))
    zone = task.success.terms[1].zone
    assert zone == Zone("cube-zone", (0.3, 0.0, 0.1), (0.05, 0.05, 0.05))
    written = task_to_dict(task)["success"]["terms"][1]["zone"]
    assert isinstance(written, dict) and written["center"] == [0.3, 0.0, 0.1]
    assert task_to_dict(load_task(_write(folder, BASE)))["success"]["terms"][1]["zone"] == "bin"
    assert parse_task(task_to_dict(task), source=task.source) == task


def test_predicate_dict_round_trip():
    zones = [Zone("bin", (0.0, 0.0, 0.0), (0.1, 0.1, 0.1))]
    d = {"kind": "any_of", "terms": [{"kind": "placed_in_zone", "prop": "a", "zone": "bin"},
                                     {"kind": "lifted", "prop": "b", "height": 0.2, "ref": "absolute"}]}
    pred = predicate_from_dict(d, zones, "success")
    assert pred.terms[0].zone is zones[0]
    assert predicate_to_dict(pred, zones) == d
    assert predicate_from_dict(predicate_to_dict(pred), (), "success") == pred   # inline without zones
    with pytest.raises(CaliperError, match=r"^goal\.terms\[1\]\.kind: "):
        predicate_from_dict({"kind": "any_of", "terms": [d, {"kind": "lift"}]}, zones, "goal")
    # the grasp conditions: written only when on, so a v1 predicate round-trips to itself
    tight = {"kind": "all_of", "terms": [{**d["terms"][0], "released": True},
                                         {**d["terms"][1], "held": True}]}
    pred = predicate_from_dict(tight, zones, "success")
    assert pred.terms[0].released and pred.terms[1].held and predicate_to_dict(pred, zones) == tight
    assert not predicate_from_dict(d, zones, "success").terms[0].released
    pushed = {**d["terms"][0], "settled_speed": 0.01, "pushed": True}
    pred = predicate_from_dict(pushed, zones, "success")
    assert pred.pushed and not pred.released and predicate_to_dict(pred, zones) == pushed


def test_pushed_and_released_exclude_each_other():
    """A placed_in_zone cannot want the prop both never carried and carried (issue 31). Planted bug
    caught: the loader accepting both, a predicate no episode can meet."""
    zones = [Zone("bin", (0.0, 0.0, 0.0), (0.1, 0.1, 0.1))]
    both = {"kind": "placed_in_zone", "prop": "a", "zone": "bin", "released": True, "pushed": True}
    with pytest.raises(CaliperError, match=r"^success\.terms\[0\]\.pushed: cannot be true together with "
                                           r"released \(") as exc:
        predicate_from_dict({"kind": "all_of", "terms": [both]}, zones, "success")
    assert "\n" not in str(exc.value)
    with pytest.raises(CaliperError, match=r"^success\.pushed: expected true or false"):
        predicate_from_dict({**both, "released": False, "pushed": "yes"}, zones, "success")


# ---- the zoo ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def zoo():
    return [load_task(f) for f in zoo_files()]


def test_zoo_names_and_files():
    assert zoo_names() == ZOO
    assert [f.name for f in zoo_files()] == ["01_lift.caliper-task.json", "02_place.caliper-task.json",
                                             "03_hold_high.caliper-task.json", "04_sort.caliper-task.json",
                                             "05_precise_place.caliper-task.json"]


def test_zoo_loads_and_round_trips(zoo):
    assert [t.name for t in zoo] == ZOO and len(set(t.name for t in zoo)) == len(zoo)
    for task in zoo:
        d = task_to_dict(task)
        assert parse_task(json.loads(json.dumps(d)), source=task.source) == task, task.name
        assert task_to_dict(parse_task(d, source=task.source)) == d


def test_zoo_robot_paths_relative_and_resolvable(zoo):
    for f, task in zip(zoo_files(), zoo, strict=True):
        raw = json.loads(f.read_text())["robot"]
        assert raw == "../../robots/gripper_arm.urdf" and not Path(raw).is_absolute()
        assert task.robot.is_file() and task.robot == (f.parent / raw).resolve()
        assert task_to_dict(task)["robot"] == raw


def test_zoo_common_settings(zoo):
    for task in zoo:
        assert task.q0 == (0.0, 0.0, 0.02) and task.fps == 50 and task.ground == 0.0
        assert task.gripper == GripperSpec("gripper", "lo") and task.success is not None
    assert [t.horizon_s for t in zoo] == [8.0, 15.0, 15.0, 30.0, 20.0]
    assert [t.success_dwell_s for t in zoo] == [1.0, 0.5, 0.5, 0.5, 0.5]
    assert [[p.material.name for p in t.props] for t in zoo] == [
        ["wood"], ["wood"], ["steel"], ["wood", "rubber"], ["foam"]]
    assert [[p.mass for p in t.props] for t in zoo] == [[0.05], [0.05], [0.15], [0.08, 0.06], [0.04]]


def test_find_task_by_name_and_path(zoo):
    for task in zoo:
        assert find_task(task.name) == task.source
        assert find_task(task.source) == task.source
        assert find_task(str(task.source)) == task.source


def test_find_task_unknown_name_lists_the_zoo():
    with pytest.raises(CaliperError) as info:
        find_task("lift-cub")
    msg = str(info.value)
    assert "did you mean 'lift-cube'?" in msg and all(n in msg for n in ZOO) and "\n" not in msg
    with pytest.raises(CaliperError, match="no such task file"):
        find_task("nowhere/absent.caliper-task.json")


def test_zoo_discovered_next_to_the_package():
    assert ZOO_DIR == Path(tasks.__file__).resolve().parent / "zoo"
    assert tasks.ZOO_DIR == ZOO_DIR and tasks.zoo_names() == ZOO
    assert all(f.parent == ZOO_DIR for f in zoo_files())


def test_importing_tasks_does_not_import_jax():
    code = ("import sys, tasks, tasks.schema; tasks.load_task; tasks.describe; import tasks.predicates; "
            "assert 'jax' not in sys.modules, 'jax imported'")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr

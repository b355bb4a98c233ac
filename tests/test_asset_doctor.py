"""Asset doctor: one planted-defect fixture per A-code, repair of the fixable ones, report and CLI."""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from caliper_jax.cli import doctor as doctor_cli
from caliper_jax.errors import CaliperError
from doctors.asset import FIXES, Finding, Report, diagnose, repair

DATA = Path(__file__).parent / "data" / "asset"
CLEAN = (DATA / "clean.urdf").read_text()
XACRO_ROBOT = '<robot name="clean_arm" xmlns:xacro="http://www.ros.org/wiki/xacro">'

# code -> edits of clean.urdf (old, new) that plant exactly that defect
PLANTED = {
    "A001": [('<mass value="0.5"/>', '<mass value="0"/>')],
    "A002": [('izz="0.0016"', 'izz="0.01"')],
    "A003": [("meshes/cube.stl", "meshes/missing.stl")],
    "A004": [("meshes/cube.obj", "meshes/a/part.stl"), ("meshes/cube.stl", "meshes/b/part.stl")],
    "A005": [('<collision><geometry><sphere radius="0.03"/></geometry></collision>', "")],
    "A006": [("meshes/cube.stl", "meshes/ball.stl")],
    "A007": [('<limit lower="-2.5" upper="2.5" effort="20" velocity="3"/>', "")],
    "A008": [('<axis xyz="0 1 0"/>', '<axis xyz="0 0 0"/>')],
    "A009": [('<axis xyz="0 1 0"/>', '<axis xyz="0 2 0"/>')],
    "A010": [('<mass value="2"/>', '<mass value="0"/>')],
    "A011": [('<mimic joint="j3"', '<mimic joint="nope"')],
    "A012": [('<mimic joint="j3"', '<mimic joint="j4"')],
    "A013": [('<robot name="clean_arm">', XACRO_ROBOT + '\n  <xacro:property name="r" value="0.03"/>'),
             ('<sphere radius="0.03"/>', '<sphere radius="${r}"/>')],
    "A014": [('effort="10" velocity="2"', 'effort="10"')],
    "A015": [('<joint name="tool_joint"', '<joint name="j1"')],
    "A016": [('lower="-1.5" upper="1.5"', 'lower="-1.5rad" upper="1.5"')],
}
FIXABLE = {"A001", "A004", "A007", "A009", "A013", "A014", "A016"}


def uv_sphere(radius: float, rings: int, segments: int) -> np.ndarray:
    """Closed, outward-wound UV sphere as (m, 3, 3) triangles."""
    theta = np.linspace(0, np.pi, rings + 1)[1:-1]
    phi = np.linspace(0, 2 * np.pi, segments, endpoint=False)
    ring = np.stack([np.outer(np.sin(theta), np.cos(phi)), np.outer(np.sin(theta), np.sin(phi)),
                     np.outer(np.cos(theta), np.ones_like(phi))], axis=-1).reshape(-1, 3)
    points = radius * np.vstack([[0, 0, 1], ring, [0, 0, -1]])
    idx = lambda r, s: 1 + r * segments + s % segments
    faces = [(0, idx(0, s), idx(0, s + 1)) for s in range(segments)]
    for r in range(rings - 2):
        for s in range(segments):
            a, b, c, d = idx(r, s), idx(r + 1, s), idx(r + 1, s + 1), idx(r, s + 1)
            faces += [(a, b, c), (a, c, d)]
    south = len(points) - 1
    faces += [(south, idx(rings - 2, s + 1), idx(rings - 2, s)) for s in range(segments)]
    return points[np.array(faces)]


def write_binary_stl(path: Path, triangles: np.ndarray) -> None:
    records = np.zeros(len(triangles), dtype=[("n", "<f4", (3,)), ("v", "<f4", (3, 3)), ("a", "<u2")])
    records["v"] = triangles
    path.write_bytes(b"\0" * 80 + np.uint32(len(triangles)).tobytes() + records.tobytes())


def planted(tmp_path: Path, code: str | None, text: str | None = None) -> Path:
    """Write clean.urdf (edited to plant ``code``) with its meshes into ``tmp_path``."""
    shutil.copytree(DATA / "meshes", tmp_path / "meshes", dirs_exist_ok=True)
    write_binary_stl(tmp_path / "meshes" / "ball.stl", uv_sphere(0.05, 24, 48))
    text = CLEAN if text is None else text
    for old, new in PLANTED.get(code, []):
        assert old in text, (code, old)
        text = text.replace(old, new)
    path = tmp_path / "robot.urdf"
    path.write_text(text)
    return path


def test_clean_fixture_has_no_findings(tmp_path):
    report = diagnose(planted(tmp_path, None))
    assert report.clean and report.findings == [] and report.counts == {"Error": 0, "Warning": 0, "Info": 0}


@pytest.mark.parametrize("code", sorted(PLANTED))
def test_planted_defect_raises_exactly_its_code(tmp_path, code):
    report = diagnose(planted(tmp_path, code))
    assert set(report.codes) == {code}, report.to_text()
    finding = report.findings[0]
    assert finding.message and finding.hint
    assert finding.auto_fixable == (code in FIXABLE)
    assert finding.link or finding.joint or finding.file


@pytest.mark.parametrize("code", sorted(FIXABLE))
def test_repair_fixes_auto_fixable_code(tmp_path, code):
    path = planted(tmp_path, code)
    original = path.read_bytes()
    result = repair(path)
    assert path.read_bytes() == original
    assert Path(result.out) == tmp_path / "robot.repaired.urdf"
    assert code in result.before.codes
    assert result.after.clean, result.after.to_text()
    assert result.applied and not [s for s in result.skipped if s["reason"] != "fix not requested"]
    assert diagnose(result.out).clean


@pytest.mark.parametrize("code", sorted(set(PLANTED) - FIXABLE))
def test_repair_leaves_non_fixable_code(tmp_path, code):
    result = repair(planted(tmp_path, code))
    assert code in result.after.codes
    assert result.applied == []


def test_a001_fixed_from_geometry_at_density(tmp_path):
    result = repair(planted(tmp_path, "A001"), density=2700.0)
    assert result.after.clean
    text = Path(result.out).read_text()
    assert "computed from 1 collision geometry element(s) at 2700 kg/m^3" in text
    mass = 2700.0 * 0.04 * 0.04 * 0.2
    assert f'<mass value="{mass:.12g}"' in text
    assert result.applied[0]["fix"] == "compute_inertials" and "link `fore`" in result.applied[0]["target"]


def test_a001_without_geometry_is_not_fixable(tmp_path):
    text = CLEAN.replace('<mass value="0.01"/>', '<mass value="-1"/>')
    report = diagnose(planted(tmp_path, None, text))
    assert report.codes == ["A001"] and not report.findings[0].auto_fixable
    result = repair(tmp_path / "robot.urdf")
    assert result.skipped == [{"fix": "compute_inertials", "target": "link `tool`",
                               "reason": "the link has no geometry"}]
    assert result.after.codes == ["A001"]


def test_a003_visual_is_warning_and_lists_every_tried_path(tmp_path):
    text = CLEAN.replace("meshes/cube.obj", "package://arm_description/meshes/gone.obj")
    report = diagnose(planted(tmp_path, None, text), mesh_roots=[tmp_path / "extra"])
    (finding,) = report.findings
    assert (finding.code, finding.severity) == ("A003", "Warning")
    for candidate in (tmp_path / "arm_description" / "meshes" / "gone.obj",
                      tmp_path / "extra" / "arm_description" / "meshes" / "gone.obj"):
        assert str(candidate) in finding.message


def test_package_urls_resolve_against_ancestors_and_roots(tmp_path):
    pkg = tmp_path / "ws" / "arm_description"
    shutil.copytree(DATA / "meshes", pkg / "meshes")
    text = CLEAN.replace("meshes/cube.stl", "package://arm_description/meshes/cube.stl")
    (pkg / "urdf").mkdir()
    (pkg / "urdf" / "arm.urdf").write_text(text.replace("meshes/cube.obj", "../meshes/cube.obj"))
    assert diagnose(pkg / "urdf" / "arm.urdf").clean  # ancestor named like the package
    elsewhere = tmp_path / "elsewhere.urdf"
    elsewhere.write_text(text.replace("meshes/cube.obj", "package://arm_description/meshes/cube.obj"))
    assert diagnose(elsewhere).codes == ["A003", "A003"]
    assert diagnose(elsewhere, mesh_roots=[tmp_path / "ws"]).clean


def test_a003_unloadable_mesh(tmp_path):
    path = planted(tmp_path, None)
    (tmp_path / "meshes" / "cube.stl").write_bytes(b"\x00\x01garbage")
    (finding,) = diagnose(path).findings
    assert finding.code == "A003" and finding.severity == "Error" and "cannot be loaded" in finding.message


def test_a007_degenerate_range_and_repair(tmp_path):
    text = CLEAN.replace('lower="-2.5" upper="2.5"', 'lower="1" upper="1"')
    report = diagnose(planted(tmp_path, None, text))
    assert report.codes == ["A007"] and "lower 1 >= upper 1" in report.findings[0].message
    assert repair(tmp_path / "robot.urdf").after.clean


def test_a013_without_namespace_is_error(tmp_path):
    text = CLEAN.replace("<link name=\"base\">", '<xacro:property name="r" value="1"/><link name="base">')
    (finding,) = diagnose(planted(tmp_path, None, text)).findings
    assert (finding.code, finding.severity, finding.auto_fixable) == ("A013", "Error", False)


def test_a016_origin_is_not_fixable(tmp_path):
    text = CLEAN.replace('<origin xyz="0 0 0.1" rpy="0 0 0"/>', '<origin xyz="0 0 abc" rpy="0 0 0"/>')
    (finding,) = diagnose(planted(tmp_path, None, text)).findings
    assert finding.code == "A016" and not finding.auto_fixable and 'xyz="0 0 abc"' in finding.message
    assert repair(tmp_path / "robot.urdf").after.codes == ["A016"]


def test_a015_duplicate_links_are_repaired_positionally(tmp_path):
    text = CLEAN.replace('<mass value="0.05"/>', '<mass value="0"/>').replace(
        '<inertial><mass value="0.01"/>', '<visual><geometry><box size="0.1 0.1 0.1"/></geometry></visual>'
        '<collision><geometry><box size="0.1 0.1 0.1"/></geometry></collision><inertial><mass value="0"/>')
    text = text.replace('link name="tool"', 'link name="finger"').replace('link="tool"', 'link="finger"')
    path = planted(tmp_path, None, text)
    assert sorted(set(diagnose(path).codes)) == ["A001", "A015"]
    result = repair(path)
    assert result.after.codes == ["A015"]
    masses = [a["detail"].split()[1] for a in result.applied]
    assert masses == [f"{1000 * 0.01 * 0.01 * 0.04:.6g}", f"{1000 * 0.1**3:.6g}"]
    assert [a["target"] for a in result.applied] == ["link `finger` (link #5 in the file)",
                                                     "link `finger` (link #6 in the file)"]


def test_repair_subset_skips_the_rest_with_reasons(tmp_path):
    text = CLEAN.replace('<axis xyz="0 1 0"/>', '<axis xyz="0 3 0"/>')
    text = text.replace('effort="10" velocity="2"', 'effort="10"')
    result = repair(planted(tmp_path, None, text), fixes=["normalize_axes"], out=tmp_path / "fixed.urdf")
    assert [a["fix"] for a in result.applied] == ["normalize_axes"]
    assert result.skipped == [{"fix": "inject_limits", "target": "joint `j2`", "reason": "fix not requested"}]
    assert result.after.codes == ["A014"] and Path(result.out).name == "fixed.urdf"


def test_repair_to_another_folder_keeps_meshes_resolving(tmp_path):
    path = planted(tmp_path, "A009")
    (tmp_path / "out").mkdir()
    result = repair(path, out=tmp_path / "out" / "arm.urdf")
    assert result.after.clean
    assert 'filename="../meshes/cube.stl"' in (tmp_path / "out" / "arm.urdf").read_text()


def test_repair_dedupe_copies_the_later_file(tmp_path):
    result = repair(planted(tmp_path, "A004"), fixes=["dedupe_mesh_basenames"])
    copy = tmp_path / "meshes" / "b" / "m2__part.stl"
    assert result.mesh_copies == [{"from": str(tmp_path / "meshes" / "b" / "part.stl"), "to": str(copy)}]
    assert copy.read_bytes() == (tmp_path / "meshes" / "b" / "part.stl").read_bytes()
    assert 'filename="meshes/b/m2__part.stl"' in Path(result.out).read_text()


def test_repair_refuses_bad_requests(tmp_path):
    path = planted(tmp_path, None)
    with pytest.raises(CaliperError, match="unknown repair fix"):
        repair(path, fixes=["make_it_work"])
    with pytest.raises(CaliperError, match="density"):
        repair(path, density=float("nan"))
    with pytest.raises(CaliperError, match="overwrite the input"):
        repair(path, out=path)
    assert not list(tmp_path.glob("*.tmp")) and not (tmp_path / "robot.repaired.urdf").exists()


def test_xacro_input_repairs_to_plain_urdf(tmp_path):
    planted(tmp_path, None)
    xacro = tmp_path / "arm.urdf.xacro"
    text = CLEAN.replace('<robot name="clean_arm">', XACRO_ROBOT + '<xacro:property name="m" value="0.25"/>')
    xacro.write_text(text.replace('<mass value="0.5"/>', '<mass value="${m * 0}"/>'))
    report = diagnose(xacro)
    assert report.codes == ["A001"]
    result = repair(xacro)
    assert Path(result.out) == tmp_path / "arm.repaired.urdf" and result.after.clean
    assert "xacro" not in Path(result.out).read_text()


def test_report_is_sorted_counted_and_json_ready(tmp_path):
    text = CLEAN.replace('<axis xyz="0 1 0"/>', '<axis xyz="0 2 0"/>').replace(
        '<mass value="2"/>', '<mass value="0"/>').replace('<mimic joint="j3"', '<mimic joint="zz"')
    report = diagnose(planted(tmp_path, None, text))
    assert report.codes == ["A011", "A009", "A010"]
    assert report.counts == {"Error": 1, "Warning": 1, "Info": 1}
    data = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert (data["errors"], data["warnings"], data["infos"], data["clean"]) == (1, 1, 1, False)
    a009 = report.findings[1]
    assert data["findings"][1] == {"code": "A009", "severity": "warning", "message": a009.message,
                                   "fix_hint": a009.hint, "auto_fixable": True, "joint": "j2"}
    text_report = report.to_text()
    assert text_report.startswith("asset doctor: 1 error(s), 1 warning(s), 1 info(s)")
    assert text_report.index("ERROR (1)") < text_report.index("WARNING (1)") < text_report.index("INFO (1)")


def test_findings_are_plain_data():
    finding = Finding("A005", "Warning", "m", "h", link="l")
    assert finding.to_dict() == {"code": "A005", "severity": "warning", "message": "m", "fix_hint": "h",
                                 "auto_fixable": False, "link": "l"}
    assert Report("x", [finding]).counts["Warning"] == 1


# ---------------------------------------------------------------- CLI


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="caliper")
    doctor_cli.register(parser.add_subparsers())
    args = parser.parse_args(argv)
    code = args.func(args)
    return code, capsys.readouterr().out


def test_cli_findings_do_not_change_exit_code(tmp_path, capsys):
    path = planted(tmp_path, "A002")
    code, out = run_cli(["doctor", str(path)], capsys)
    assert code == 0 and "[A002]" in out and out.startswith("asset doctor: 1 error(s)")
    code, out = run_cli(["doctor", str(path), "--json"], capsys)
    assert code == 0 and json.loads(out)["findings"][0]["code"] == "A002"


def test_cli_repair_json(tmp_path, capsys):
    path = planted(tmp_path, "A014")
    code, out = run_cli(["doctor", str(path), "--repair", "--density", "500", "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["findings"][0]["code"] == "A014"
    assert data["repair"]["after"]["clean"] and Path(data["repair"]["out"]).is_file()
    argv = ["doctor", str(path), "--fix", "normalize_axes", "--out", str(tmp_path / "o.urdf")]
    code, out = run_cli(argv, capsys)
    assert code == 0 and "skipped inject_limits on joint `j2`: fix not requested" in out


def test_cli_rejects_uninspectable_input_and_stray_options(tmp_path, capsys):
    with pytest.raises(CaliperError, match="cannot read file"):
        run_cli(["doctor", str(tmp_path / "nope.urdf")], capsys)
    with pytest.raises(CaliperError, match="--repair"):
        run_cli(["doctor", str(planted(tmp_path, None)), "--out", "x.urdf"], capsys)
    assert set(FIXES) == {"compute_inertials", "normalize_axes", "dedupe_mesh_basenames", "inject_limits"}


def test_cli_is_wired_into_caliper(tmp_path, capsys):
    from caliper_jax import cli as caliper_cli

    parser = caliper_cli.build_parser()
    assert caliper_cli.main(["doctor", str(planted(tmp_path, "A005"))]) == 0
    assert "[A005]" in capsys.readouterr().out
    assert caliper_cli.main(["doctor", str(tmp_path / "missing.urdf")]) == 2
    assert parser.parse_args(["doctor", "x.urdf"]).func is doctor_cli.handler


def test_doctor_never_imports_jax():
    code = ("import sys, doctors.asset, doctors.asset.checks, doctors.asset.repair; "
            "assert 'jax' not in sys.modules, 'jax imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[1])

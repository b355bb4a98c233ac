"""The asset doctor and the loader agree: every URDF that ``caliper load`` refuses (one-line
CaliperError) is reported by ``caliper doctor`` as an Error-severity A-code finding, or is
uninspectable for the doctor too (unreadable, not XML, not a tree of named links and joints).

One malformed URDF per error the loader raises (caliper_jax/io/urdf.py, io/robot_xml.py,
loading.py, model.py), each a small edit of one clean robot.
"""
from __future__ import annotations

from pathlib import Path

import pytest

import robots
from caliper_jax.errors import CaliperError
from caliper_jax.io.urdf import read_urdf
from caliper_jax.loading import load
from doctors.asset import diagnose

_INERTIAL = ('<inertial><origin xyz="0 0 0"/><mass value="{m}"/>'
             '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>')
CLEAN = f"""<?xml version="1.0"?>
<robot name="agree">
  <link name="base">{_INERTIAL.format(m=2)}
    <collision><origin xyz="0 0 0" rpy="0 0 0"/><geometry><box size="0.1 0.1 0.1"/></geometry></collision>
  </link>
  <link name="arm">{_INERTIAL.format(m=1)}
    <collision><geometry><cylinder radius="0.02" length="0.3"/></geometry></collision>
    <visual><geometry><mesh filename="missing_but_only_a_warning.stl" scale="1 1 1"/></geometry></visual>
  </link>
  <link name="tip">{_INERTIAL.format(m=0.5)}
    <collision><geometry><sphere radius="0.03"/></geometry></collision>
  </link>
  <link name="tip2">{_INERTIAL.format(m=0.5)}
    <collision><geometry><sphere radius="0.025"/></geometry></collision>
  </link>
  <link name="tool">{_INERTIAL.format(m=0.1)}</link>
  <joint name="j1" type="revolute">
    <parent link="base"/><child link="arm"/><origin xyz="0 0 0.1" rpy="0 0 0"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="10" velocity="2"/><dynamics damping="0.1" friction="0"/>
  </joint>
  <joint name="j2" type="prismatic">
    <parent link="arm"/><child link="tip"/><origin xyz="0 0 0.3"/><axis xyz="1 0 0"/>
    <limit lower="0" upper="0.1" effort="10" velocity="1"/>
  </joint>
  <joint name="j3" type="prismatic">
    <parent link="arm"/><child link="tip2"/><origin xyz="0 0 0.3"/><axis xyz="-1 0 0"/>
    <limit lower="0" upper="0.1" effort="10" velocity="1"/><mimic joint="j2" multiplier="1" offset="0"/>
  </joint>
  <joint name="tool_joint" type="fixed"><parent link="tip"/><child link="tool"/></joint>
</robot>
"""

UNINSPECTABLE = "uninspectable"

# id -> ([(old, new) edits of CLEAN] or a whole text, the doctor's code or UNINSPECTABLE)
CASES = {
    # robot_xml.py / read_text / parse_robot_xml
    "empty file": ("", UNINSPECTABLE),
    "not well-formed": ([("</robot>", "")], UNINSPECTABLE),
    "xml entities": ([('<?xml version="1.0"?>', '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "b">]>')],
                     UNINSPECTABLE),
    "root is not robot": ([("<robot name", "<mujoco name"), ("</robot>", "</mujoco>")], UNINSPECTABLE),
    "not utf-8 and undeclared": (b"<robot name='r\xe9'><link name='base'/></robot>", UNINSPECTABLE),
    # urdf.py: structure
    "link without name": ([('<link name="tip2">', "<link>")], UNINSPECTABLE),
    "duplicate link name": ([('<link name="tip2">', '<link name="tip2"/><link name="tip2">')], "A015"),
    "no links": ('<robot name="empty"></robot>', "A018"),
    "joint without name": ([('<joint name="tool_joint" type="fixed">', '<joint type="fixed">')],
                           UNINSPECTABLE),
    "duplicate joint name": ([('<joint name="tool_joint"', '<joint name="j1"')], "A015"),
    "unsupported joint type": ([('name="j2" type="prismatic"', 'name="j2" type="planar"')], "A017"),
    "misspelt joint type": ([('name="j1" type="revolute"', 'name="j1" type="revolut"')], "A017"),
    "joint without type": ([('<joint name="tool_joint" type="fixed">', '<joint name="tool_joint">')], "A017"),
    "joint without parent": ([('<parent link="tip"/>', "")], UNINSPECTABLE),
    "joint with undefined child": ([('<child link="tool"/>', '<child link="nowhere"/>')], UNINSPECTABLE),
    "link with two parents": ([('<parent link="tip"/><child link="tool"/>', '<parent link="tip"/>'
                                '<child link="tip2"/>')], UNINSPECTABLE),
    "stray root and a cycle": ([('<link name="tool">', '<link name="unused">'),
                             ('<parent link="tip"/><child link="tool"/>', '<parent link="tip"/>'
                              '<child link="base"/>')], UNINSPECTABLE),
    "every link has a parent": ([("</robot>", '<joint name="back" type="fixed"><parent link="tool"/>'
                                              '<child link="base"/></joint></robot>')], UNINSPECTABLE),
    "loop beside the tree": ([('<parent link="tip"/><child link="tool"/>', '<parent link="tool"/>'
                               '<child link="tool"/>')], UNINSPECTABLE),
    "two roots": ([('<joint name="tool_joint" type="fixed"><parent link="tip"/><child link="tool"/></joint>',
                    "")], "A018"),
    # urdf.py: numbers and elements
    "joint origin not three numbers": ([('<origin xyz="0 0 0.1" rpy="0 0 0"/>', '<origin xyz="0 0.1"/>')],
                                       "A016"),
    "joint origin nan": ([('<origin xyz="0 0 0.1" rpy="0 0 0"/>', '<origin xyz="0 0 0.1" rpy="nan 0 0"/>')],
                         "A016"),
    "axis zero length": ([('<axis xyz="0 0 1"/>', '<axis xyz="0 0 0"/>')], "A008"),
    "axis not numbers": ([('<axis xyz="0 0 1"/>', '<axis xyz="z"/>')], "A008"),
    "limit lower not a number": ([('lower="-1" upper="1"', 'lower="-1 deg" upper="1"')], "A016"),
    "limit velocity not finite": ([('effort="10" velocity="2"', 'effort="10" velocity="inf"')], "A016"),
    "revolute range inverted": ([('lower="-1" upper="1"', 'lower="1" upper="-1"')], "A007"),
    "prismatic range inverted": ([('name="j2" type="prismatic">', 'name="j2" type="prismatic">'
                                   '<limit lower="0.2" upper="0.1" effort="1" velocity="1"/>'),
                                  ('<limit lower="0" upper="0.1" effort="10" velocity="1"/>\n  </joint>\n'
                                   '  <joint name="j3"', '</joint>\n  <joint name="j3"')], "A007"),
    "prismatic upper below default lower": ([('<limit lower="0" upper="0.1" effort="10" velocity="1"/>\n'
                                              '  </joint>\n  <joint name="j3"',
                                              '<limit upper="-0.1" effort="10" velocity="1"/>\n'
                                              '  </joint>\n  <joint name="j3"')], "A007"),
    "dynamics damping not a number": ([('damping="0.1"', 'damping="0.1x"')], "A016"),
    "mimic without joint": ([('<mimic joint="j2"', "<mimic")], "A011"),
    "mimic of unknown joint": ([('<mimic joint="j2"', '<mimic joint="j9"')], "A011"),
    "mimic of itself": ([('<mimic joint="j2"', '<mimic joint="j3"')], "A012"),
    "mimic chain": ([('<limit lower="0" upper="0.1" effort="10" velocity="1"/>\n  </joint>\n'
                      '  <joint name="j3"', '<limit lower="0" upper="0.1" effort="10" velocity="1"/>'
                      '<mimic joint="j1"/>\n  </joint>\n  <joint name="j3"')], "A012"),
    "mimic of a fixed joint": ([('<mimic joint="j2"', '<mimic joint="tool_joint"')], "A011"),
    "mimic of a floating joint": ([('<joint name="tool_joint" type="fixed">', '<joint name="tool_joint" '
                                    'type="floating">'), ('<mimic joint="j2"', '<mimic joint="tool_joint"')],
                                  "A011"),
    "mimic multiplier not a number": ([('multiplier="1"', 'multiplier="-"')], "A016"),
    "negative mass": ([('<mass value="1"/>', '<mass value="-1"/>')], "A001"),
    "negative root mass": ([('<mass value="2"/>', '<mass value="-2"/>')], "A001"),
    "root mass not a number": ([('<mass value="2"/>', '<mass value="two"/>')], "A001"),
    "root mass without value": ([('<mass value="2"/>', "<mass/>")], "A001"),
    "mass without value": ([('<mass value="1"/>', "<mass/>")], "A001"),
    "inertia entry not a number": ([('<mass value="1"/><inertia ixx="0.01"', '<mass value="1"/><inertia '
                                     'ixx="1e999"')], "A002"),
    "inertial origin not numbers": ([('<inertial><origin xyz="0 0 0"/><mass value="1"/>',
                                      '<inertial><origin xyz="0 0 a"/><mass value="1"/>')], "A016"),
    "collision origin not numbers": ([('<collision><origin xyz="0 0 0" rpy="0 0 0"/>',
                                       '<collision><origin xyz="0 0 0" rpy="0 0"/>')], "A016"),
    "empty geometry": ([('<geometry><sphere radius="0.03"/></geometry>', "<geometry/>")], "A019"),
    "no geometry element": ([('<collision><geometry><sphere radius="0.03"/></geometry></collision>',
                              "<collision/>")], "A019"),
    "unsupported shape": ([('<box size="0.1 0.1 0.1"/>', '<plane normal="0 0 1"/>')], "A019"),
    "box without size": ([('<box size="0.1 0.1 0.1"/>', "<box/>")], "A019"),
    "box size two numbers": ([('<box size="0.1 0.1 0.1"/>', '<box size="0.1 0.1"/>')], "A016"),
    "sphere radius not a number": ([('<sphere radius="0.03"/>', '<sphere radius="r"/>')], "A016"),
    "cylinder without length": ([('<cylinder radius="0.02" length="0.3"/>', '<cylinder radius="0.02"/>')],
                                "A019"),
    "mesh scale not numbers": ([('scale="1 1 1"', 'scale="1 1"')], "A016"),
}


def _write(tmp_path: Path, spec) -> Path:
    path = tmp_path / "robot.urdf"
    if isinstance(spec, bytes):
        path.write_bytes(spec)
    elif isinstance(spec, str):
        path.write_text(spec)
    else:
        text = CLEAN
        for old, new in spec:
            assert text.count(old) == 1, old
            text = text.replace(old, new)
        path.write_text(text)
    return path


def test_clean_robot_loads_and_has_no_errors(tmp_path):
    path = _write(tmp_path, [])
    model = load(path)
    assert (model.nq, model.nbody) == (2, 3) and model.has_mimic
    report = diagnose(path)
    assert report.counts["Error"] == 0, report.to_text()


@pytest.mark.parametrize("case", sorted(CASES))
def test_what_load_refuses_the_doctor_reports(tmp_path, case):
    spec, code = CASES[case]
    path = _write(tmp_path, spec)
    with pytest.raises(CaliperError) as refused:
        load(path)
    message = str(refused.value)
    assert message and "\n" not in message and str(path) in message
    if code == UNINSPECTABLE:
        with pytest.raises(CaliperError) as doctor:
            diagnose(path)
        assert "\n" not in str(doctor.value) and str(path) in str(doctor.value)
        return
    report = diagnose(path)
    errors = [f for f in report.findings if f.severity == "Error"]
    assert code in {f.code for f in errors}, f"load: {message}\ndoctor:\n{report.to_text()}"


def test_other_encodings_load_as_the_doctor_reads_them(tmp_path):
    """Valid XML that is not UTF-8 (declared latin-1, UTF-16 with a BOM, UTF-8 with a BOM) is
    read by both, not refused by the loader alone."""
    body = '<robot name="r\u00e9"><link name="base"/></robot>'
    for name, data in (("latin", b'<?xml version="1.0" encoding="latin-1"?>' + body.encode("latin-1")),
                       ("utf16", ('<?xml version="1.0" encoding="UTF-16"?>' + body).encode("utf-16")),
                       ("bom", b"\xef\xbb\xbf" + body.encode("utf-8"))):
        path = tmp_path / f"{name}.urdf"
        path.write_bytes(data)
        assert read_urdf(path).name == "r\u00e9"
        assert diagnose(path).counts["Error"] == 0


def test_xacro_is_the_one_deliberate_difference(tmp_path):
    """The loader refuses .xacro by design and points at the doctor, which expands it."""
    path = tmp_path / "arm.urdf.xacro"
    path.write_text('<robot name="arm" xmlns:xacro="http://www.ros.org/wiki/xacro">'
                    '<xacro:property name="m" value="1"/><link name="base"/></robot>')
    with pytest.raises(CaliperError, match="caliper doctor .* --repair"):
        load(path)
    assert diagnose(path).clean


ERD = robots.example_robot_data_dir()


@pytest.mark.skipif(ERD is None, reason="example-robot-data not installed")
def test_every_example_robot_data_urdf_the_loader_refuses_has_an_error_finding():
    refused = []
    for path in sorted(ERD.rglob("*.urdf")):
        try:
            read_urdf(path)
        except CaliperError as exc:
            refused.append(path.name)
            assert "\n" not in str(exc)
            assert diagnose(path).counts["Error"] > 0, str(exc)
    assert refused  # ur3.urdf (no links) and alex_psyonic_hands.urdf (mimic of an unknown joint)


def test_missing_files_and_folders_are_refused_by_both(tmp_path):
    for path in (tmp_path / "missing.urdf", tmp_path):
        with pytest.raises(CaliperError) as refused:
            load(path)
        with pytest.raises(CaliperError) as doctor:
            diagnose(path)
        assert "\n" not in str(refused.value) + str(doctor.value)


def test_doctor_cli_accepts_registry_names(capsys, tmp_path):
    """`caliper doctor gripper_arm` (and `panda` with example-robot-data) resolves like `caliper load`."""
    from caliper_jax import cli

    names = ["gripper_arm"] + (["panda"] if ERD is not None else [])
    for name in names:
        assert cli.main(["doctor", name, "--json"]) == 0
        out = capsys.readouterr().out
        assert f"{name}.urdf" in out and '"findings"' in out
    assert cli.main(["doctor", "gripper_arm", "--repair"]) == 2          # never beside the package
    assert "give --out PATH" in capsys.readouterr().err
    out = tmp_path / "g.urdf"
    assert cli.main(["doctor", "gripper_arm", "--repair", "--out", str(out)]) == 0 and out.is_file()
    assert cli.main(["doctor", "no_such_bot"]) == 2
    assert "unknown robot 'no_such_bot'" in capsys.readouterr().err

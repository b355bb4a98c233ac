"""Asset doctor: the in-process, bounded xacro expander and its safe expression evaluator."""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from caliper_jax.errors import CaliperError
from doctors.asset import diagnose
from doctors.asset.expr import evaluate
from doctors.asset.loader import load_document

HEAD = '<robot name="r" xmlns:xacro="http://www.ros.org/wiki/xacro">'


def expand(tmp_path: Path, body: str, name: str = "r.urdf.xacro") -> ET.Element:
    path = tmp_path / name
    path.write_text(f"{HEAD}{body}</robot>")
    return load_document(path).root


def test_properties_and_expressions(tmp_path):
    root = expand(tmp_path, """
      <xacro:property name="w" value="0.2"/>
      <xacro:property name="h" value="${w * 2}"/>
      <xacro:property name="label" value="arm"/>
      <link name="${label}_link"><visual><geometry>
        <box size="${w} ${h} ${radians(180) / pi}"/></geometry></visual></link>
      <link name="esc" note="$${not_expanded}"/>""")
    link = root.find("link")
    assert link.get("name") == "arm_link"
    assert link.find("visual/geometry/box").get("size") == "0.2 0.4 1.0"
    assert root.findall("link")[1].get("note") == "${not_expanded}"
    assert not [e for e in root.iter() if "xacro" in str(e.tag)]


def test_macros_defaults_blocks_and_conditionals(tmp_path):
    root = expand(tmp_path, """
      <xacro:property name="side" value="1"/>
      <xacro:macro name="limb" params="name length:=0.3 side:=^ *shape **extras">
        <link name="${name}">
          <visual><xacro:insert_block name="shape"/></visual>
          <xacro:insert_block name="extras"/>
          <xacro:if value="${length > 0.5}"><long/></xacro:if>
          <xacro:unless value="${side == 1}"><mirrored/></xacro:unless>
          <len value="${length * side}"/>
        </link>
      </xacro:macro>
      <xacro:limb name="a"><geometry><sphere radius="0.1"/></geometry>
        <extras><tag k="1"/><tag k="2"/></extras></xacro:limb>
      <xacro:limb name="b" length="0.8" side="-1"><geometry/><extras/></xacro:limb>
      <xacro:call macro="limb" name="c"><geometry/><extras/></xacro:call>""")
    a, b, c = root.findall("link")
    assert a.find("visual/geometry/sphere").get("radius") == "0.1"
    assert [t.get("k") for t in a.findall("tag")] == ["1", "2"]
    assert (a.find("long"), a.find("mirrored"), a.find("len").get("value")) == (None, None, "0.3")
    assert (b.find("long") is not None, b.find("mirrored") is not None, b.find("len").get("value")) == \
        (True, True, "-0.8")
    assert c.get("name") == "c"


def test_include_find_and_args(tmp_path):
    pkg = tmp_path / "arm_description"
    (pkg / "urdf").mkdir(parents=True)
    (pkg / "urdf" / "parts.xacro").write_text(
        f'{HEAD}<xacro:macro name="part" params="n"><link name="part_${{n}}"/></xacro:macro></robot>')
    (pkg / "urdf" / "more.xacro").write_text(f'{HEAD}<link name="more"/></robot>')
    (pkg / "urdf" / "arm.urdf.xacro").write_text(f"""{HEAD}
      <xacro:arg name="prefix" default="left_"/>
      <xacro:include filename="$(find arm_description)/urdf/parts.xacro"/>
      <xacro:include filename="more.xacro"/>
      <xacro:part n="$(arg prefix)x"/>
      <link name="dir" path="$(dirname)"/>
    </robot>""")
    root = load_document(pkg / "urdf" / "arm.urdf.xacro").root
    assert [link.get("name") for link in root.findall("link")] == ["more", "part_left_x", "dir"]
    assert root.findall("link")[2].get("path") == str(pkg / "urdf")


def test_xacro_file_is_diagnosed_without_a013(tmp_path):
    path = tmp_path / "r.xacro"
    path.write_text(f"""{HEAD}<xacro:property name="m" value="1"/>
      <link name="base"/><joint name="j" type="continuous"><parent link="base"/><child link="l"/></joint>
      <link name="l"><inertial><mass value="${{m}}"/><inertia ixx="1" iyy="1" izz="1"/></inertial></link>
    </robot>""")
    assert diagnose(path).codes == ["A010"]


@pytest.mark.parametrize("body, match", [
    ('<link name="${nope}"/>', "undefined name `nope`"),
    ('<xacro:property name="a" value="${b}"/><xacro:property name="b" value="${a}"/><l v="${a}"/>', "itself"),
    ('<xacro:macro name="m" params=""><xacro:m/></xacro:macro><xacro:m/>', "nesting deeper"),
    ('<xacro:macro name="m" params="x"/><xacro:m/>', "without parameter `x`"),
    ('<xacro:macro name="m" params=""/><xacro:m y="1"/>', "no parameter `y`"),
    ('<xacro:unknown/>', "unknown macro"),
    ('<xacro:include filename="missing.xacro"/>', "not found"),
    ('<xacro:include filename="r.urdf.xacro"/>', "include cycle"),
    ('<xacro:if value="maybe"><a/></xacro:if>', "not a boolean"),
    ('<l v="${1 +}"/>', "cannot parse"),
    ('<l v="${unterminated"/>', "unterminated"),
    ('<l v="$(find no_such_package_here)"/>', "package not found"),
    ('<l v="$(arg undeclared)"/>', "argument not declared"),
    ('<l v="$(rospack list)"/>', "unsupported substitution"),
])
def test_expansion_errors_are_one_line(tmp_path, body, match):
    with pytest.raises(CaliperError, match=match) as info:
        expand(tmp_path, body)
    assert "\n" not in str(info.value) and "r.urdf.xacro" in str(info.value)


def test_exponential_macros_hit_the_size_bound_fast(tmp_path):
    body = '<xacro:macro name="m0" params=""><e/></xacro:macro>'
    body += "".join(f'<xacro:macro name="m{i}" params=""><xacro:m{i - 1}/><xacro:m{i - 1}/></xacro:macro>'
                    for i in range(1, 40))
    with pytest.raises(CaliperError, match="more than"):  # 2^39 elements if unbounded
        expand(tmp_path, body + "<xacro:m39/>")


def test_evaluator_supports_math():
    lookup = {"a": 2, "s": "ab"}.__getitem__
    assert evaluate("a ** 3 + math.sqrt(16) - abs(-1)", lookup) == 11.0
    assert evaluate("sin(pi / 2) if a > 1 else 0", lookup) == 1.0
    assert evaluate("[1, 2, 3][a] + len(s) + max(1, a)", lookup) == 7
    assert evaluate("not (a == 2 and s in 'xaby')", lookup) is False
    assert evaluate("radians(180)", lookup) == pytest.approx(math.pi)


@pytest.mark.parametrize("source", [
    "__import__('os').system('true')", "().__class__.__bases__", "(lambda: 1)()", "open('/etc/passwd')",
    "[x for x in range(3)]", "globals()", "math.__dict__", "a.__class__", "9 ** 9 ** 9 ** 9", "'a' * 10 ** 9",
    "[0] * 10 ** 9", "round(5, -10 ** 9)", "10 ** 400 * 10 ** 400", "(-8) ** 0.5", "1 / 0", "exp(10000)",
    "-" * 5000 + "1", "(" * 300 + "1" + ")" * 300, "x" * 20000,
])
def test_evaluator_refuses_unsafe_or_runaway_input(source):
    with pytest.raises(CaliperError):
        evaluate(source, {"a": 1}.__getitem__)

"""Asset doctor robustness: malformed inputs give findings or one CaliperError, never a crash or hang."""
from __future__ import annotations

import random
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from caliper_jax.errors import CaliperError
from doctors.asset import Report, diagnose, repair

DATA = Path(__file__).parent / "data" / "asset"
CLEAN = (DATA / "clean.urdf").read_text()
XACRO_HEAD = '<robot name="r" xmlns:xacro="http://www.ros.org/wiki/xacro">'
LAUGHS = ('<?xml version="1.0"?><!DOCTYPE robot [<!ENTITY a "hahahahahahahaha">'
          + "".join(f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(9))
          + ']><robot name="&j;"/>')

DEEP_IF = XACRO_HEAD + '<xacro:if value="1">' * 3000 + "</xacro:if>" * 3000 + "</robot>"
RECURSIVE_MACRO = (XACRO_HEAD + '<xacro:macro name="m" params="n"><a><xacro:m n="${n+1}"/></a></xacro:macro>'
                   '<xacro:m n="0"/></robot>')
PROPERTY_CHAIN = (XACRO_HEAD + "".join(f'<xacro:property name="p{i}" value="${{p{i - 1} + 1}}"/>'
                                       for i in range(1, 5000))
                  + '<xacro:property name="p0" value="0"/><l v="${p4999}"/></robot>')
HUGE = CLEAN.replace('izz="0.0016"', 'izz="1e308"').replace('<mass value="1"/>', '<mass value="1e308"/>')
JOINT_ORIGIN = '<origin xyz="0 0 0.2"/>'
DECLARATION = '<?xml version="1.0"?>'

# name -> (file name, content, expected: "error" | "clean" | "findings" | a code the report must contain)
CORPUS = {
    "empty": ("r.urdf", "", "error"),
    "whitespace": ("r.urdf", " \n\t ", "error"),
    "binary_garbage": ("r.urdf", bytes(random.Random(3).getrandbits(8) for _ in range(4096)), "error"),
    "truncated": ("r.urdf", CLEAN[: len(CLEAN) // 2], "error"),
    "not_a_robot": ("r.urdf", "<sdf version='1.6'><model/></sdf>", "error"),
    "nameless_link": ("r.urdf", "<robot><link/></robot>", "error"),
    "billion_laughs": ("r.urdf", LAUGHS, "error"),
    "external_entity": ("r.urdf", '<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><robot name="&x;"/>',
                        "error"),
    "undefined_entity": ("r.urdf", '<robot name="&x;"/>', "error"),
    "cycle": ("r.urdf", CLEAN.replace('<parent link="base"/>', '<parent link="tool"/>'), "error"),
    "missing_parent": ("r.urdf", CLEAN.replace('<parent link="upper"/>', '<parent link="ghost"/>'), "error"),
    "joint_without_child": ("r.urdf", CLEAN.replace('<child link="hand"/>', ""), "error"),
    "two_parents": ("r.urdf", CLEAN.replace('<child link="tool"/>', '<child link="hand"/>'), "error"),
    "deep_plain_xml": ("r.urdf", "<robot>" + "<a>" * 50000 + "</a>" * 50000 + "</robot>", "error"),
    "deep_xacro_if": ("r.xacro", DEEP_IF, "error"),
    "recursive_macro": ("r.xacro", RECURSIVE_MACRO, "error"),
    "property_chain": ("r.xacro", PROPERTY_CHAIN, "error"),
    "nan_mass": ("r.urdf", CLEAN.replace('<mass value="0.5"/>', '<mass value="nan"/>'), "A001"),
    "inf_inertia": ("r.urdf", CLEAN.replace('izz="0.0016"', 'izz="inf"'), "A002"),
    "nan_origin": ("r.urdf", CLEAN.replace(JOINT_ORIGIN, '<origin xyz="nan 0 0.2"/>'), "A016"),
    "nan_axis": ("r.urdf", CLEAN.replace('<axis xyz="0 1 0"/>', '<axis xyz="NaN 1 0"/>'), "A008"),
    "inf_limit": ("r.urdf", CLEAN.replace('upper="2.5"', 'upper="-inf"'), "A016"),
    "huge_finite": ("r.urdf", HUGE, "A002"),
    "huge_overflow": ("r.urdf", CLEAN.replace(JOINT_ORIGIN, '<origin xyz="1e400 0 0"/>'), "A016"),
    "huge_digits": ("r.urdf", CLEAN.replace('velocity="3"', 'velocity="' + "9" * 100000 + '"'), "findings"),
    "huge_axis": ("r.urdf", CLEAN.replace('<axis xyz="0 1 0"/>', '<axis xyz="0 1e300 1e300"/>'), "A009"),
    "tiny_axis": ("r.urdf", CLEAN.replace('<axis xyz="0 1 0"/>', '<axis xyz="0 1e-320 0"/>'), "A008"),
    "mesh_garbage": ("r.urdf", CLEAN.replace("meshes/cube.stl", "meshes/cube.obj.stl"), "A003"),
    "weird_scheme": ("r.urdf", CLEAN.replace("meshes/cube.stl", "http://example.com/x.stl"), "A003"),
    "empty_geometry": ("r.urdf", CLEAN.replace('<sphere radius="0.03"/>', ""), "A019"),  # load refuses it
    "unknown_encoding": ("r.urdf", CLEAN.replace(DECLARATION, '<?xml version="1.0" encoding="x"?>'), "error"),
    "multibyte_encoding": ("r.urdf", CLEAN.replace(DECLARATION, '<?xml version="1.0" encoding="sjis"?>'),
                           "error"),
    "long_mesh_name": ("r.urdf", CLEAN.replace("meshes/cube.stl", "m" * 5000 + ".stl"), "A003"),
    "latin1": ("r.urdf", CLEAN.replace(DECLARATION, '<?xml version="1.0" encoding="latin-1"?>')
               .replace("clean_arm", "cl\u00e9an").encode("latin-1"), "clean"),
}


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    shutil.copytree(DATA / "meshes", tmp_path / "meshes", dirs_exist_ok=True)
    (tmp_path / "meshes" / "cube.obj.stl").write_bytes(b"solid x\n facet normal 0 0 1\n vertex 1 2\n")
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def inspect_safely(path: Path) -> Report | CaliperError:
    try:
        return diagnose(path)
    except CaliperError as exc:
        return exc


@pytest.mark.parametrize("case", sorted(CORPUS))
def test_malformed_corpus(tmp_path, case):
    name, content, expected = CORPUS[case]
    path = write(tmp_path, name, content)
    outcome = inspect_safely(path)
    if expected == "error":
        assert isinstance(outcome, CaliperError), outcome
        message = str(outcome)
        assert "\n" not in message and str(path) in message and len(message) < 2000
    else:
        assert isinstance(outcome, Report), outcome
        if expected == "clean":
            assert outcome.clean, outcome.to_text()
        else:
            assert outcome.findings and (expected == "findings" or expected in outcome.codes)


def test_unreadable_inputs(tmp_path):
    with pytest.raises(CaliperError, match="not a regular file"):
        diagnose(tmp_path)
    with pytest.raises(CaliperError, match="cannot read file"):
        diagnose(tmp_path / "missing.urdf")


def test_repair_of_malformed_numbers_stays_safe(tmp_path):
    path = write(tmp_path, "r.urdf", HUGE.replace('<mass value="0.5"/>', '<mass value="x"/>'))
    result = repair(path)
    assert "A002" in result.after.codes and "A001" not in result.after.codes


# ---------------------------------------------------------------- fuzzing


NASTY_VALUES = ["", " ", "nan", "-inf", "-1", "0", "1e400", "9" * 400, "a" * 5000, "0 0", "1 2 3 4", "${x}",
                "$(find y)", "package://", "package:///x/y.stl", "file://", "/", "..", "\u00e9\u4e2d", "j1",
                "base"]


def mutate(text: str, rng: random.Random) -> str:
    """One random byte flip, attribute-value swap or replacement, or element deletion."""
    kind = rng.choice(("flip", "swap", "value", "delete"))
    if kind == "flip":
        data = bytearray(text.encode())
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return data.decode("utf-8", "replace")
    if kind == "swap":
        values = list(re.finditer(r'="([^"]*)"', text))
        a, b = rng.sample(values, 2)
        if a.start() > b.start():
            a, b = b, a
        return text[: a.start(1)] + b.group(1) + text[a.end(1): b.start(1)] + a.group(1) + text[b.end(1):]
    if kind == "value":
        value = rng.choice(list(re.finditer(r'="([^"]*)"', text)))
        return text[: value.start(1)] + rng.choice(NASTY_VALUES) + text[value.end(1):]
    root = ET.fromstring(text)
    parents = [(p, c) for p in root.iter() for c in p]
    parent, child = rng.choice(parents)
    parent.remove(child)
    return ET.tostring(root, encoding="unicode")


@pytest.mark.parametrize("base, suffix, count", [("urdf", ".urdf", 2000), ("xacro", ".xacro", 1000)])
def test_fuzzed_mutations_never_crash(tmp_path, base, suffix, count):
    write(tmp_path, "seed.txt", "")
    text = CLEAN if base == "urdf" else CLEAN.replace(
        '<robot name="clean_arm">', XACRO_HEAD.replace('"r"', '"clean_arm"') +
        '<xacro:property name="r" value="0.03"/><xacro:macro name="limb" params="n s:=1 *g">'
        '<link name="${n}"><visual><xacro:insert_block name="g"/></visual></link></xacro:macro>'
        '<xacro:if value="${r > 0}"><xacro:limb n="extra"><geometry><box size="${r} ${r*2} 1"/></geometry>'
        '</xacro:limb></xacro:if>').replace('<sphere radius="0.03"/>', '<sphere radius="${r}"/>')
    assert isinstance(inspect_safely(write(tmp_path, "base" + suffix, text)), Report)
    rng = random.Random(20240611)
    path = tmp_path / ("fuzz" + suffix)
    outcomes = {"report": 0, "error": 0}
    for i in range(count):
        mutated = mutate(text, rng)
        path.write_text(mutated)
        try:
            outcome = inspect_safely(path)
        except Exception as exc:  # noqa: BLE001 - the failure message must show the input
            raise AssertionError(f"mutation {i} crashed with {exc!r}:\n{mutated}") from exc
        outcomes["report" if isinstance(outcome, Report) else "error"] += 1
        if isinstance(outcome, Report):
            outcome.to_dict()
    assert outcomes["report"] > count // 4 and outcomes["error"] > 0

"""The core subcommands: --json reports, one-line errors with exit code 2, no tracebacks."""
import json
import subprocess
import sys

import numpy as np
import pytest

from caliper_jax import cli


def run(capsys, *argv):
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_fk_json_lists_every_frame_as_row_major_4x4(capsys):
    code, out, _ = run(capsys, "fk", "toy", "--joints", "0.3,-0.4", "--json")
    assert code == 0
    report = json.loads(out)
    assert set(report["frames"]) == {"base", "j1", "l1", "j2", "l2", "tool_joint", "tool"}
    T = np.array(report["frames"]["tool"])
    assert T.shape == (4, 4) and np.allclose(T[3], [0, 0, 0, 1])
    # toy: j1 about Z at z=0.1, j2 about Y at x=0.2, tool 0.2 further along x
    c1, s1, c2, s2 = np.cos(0.3), np.sin(0.3), np.cos(-0.4), np.sin(-0.4)
    expected = np.array([0.2 * c1 + 0.2 * c2 * c1, 0.2 * s1 + 0.2 * c2 * s1, 0.1 - 0.2 * s2])
    np.testing.assert_allclose(T[:3, 3], expected, atol=1e-12)


def test_load_sim_info_demo_json(capsys):
    code, out, _ = run(capsys, "load", "gripper_arm", "--json")
    assert code == 0 and json.loads(out)["nq"] == 3
    code, out, _ = run(capsys, "sim", "pendulum2", "--q0", "1 0.5", "--duration", "0.5", "--json")
    report = json.loads(out)
    assert code == 0 and report["steps"] == 500 and abs(report["energy_drift_relative"]) < 1e-6
    code, out, _ = run(capsys, "sim", "pendulum2", "--q0", "1 0.5", "--duration", "0.5", "--damping", "0.5",
                       "--json")
    assert json.loads(out)["energy_drift"] < -0.01
    code, out, _ = run(capsys, "info", "--json")
    assert code == 0 and "pendulum2" in json.loads(out)["robots"]
    code, out, _ = run(capsys, "demo", "--duration", "0.2", "--json")
    assert code == 0 and abs(json.loads(out)["sim"]["energy_drift"]) < 1e-6


@pytest.mark.parametrize("argv,needle", [
    (["fk", "toy", "--joints", "0.1"], "--joints: expected 2 values"),
    (["fk", "toy", "--joints", "a,b"], "not a list of numbers"),
    (["fk", "toy", "--joints", "nan,0"], "non-finite"),
    (["fk", "nosuchbot"], "unknown robot 'nosuchbot'"),
    (["fk", "toy", "--frame", "nope"], "no frame named 'nope'"),
    (["sim", "pendulum2", "--duration", "-1"], "duration must be a positive"),
    (["sim", "pendulum2", "--integrator", "magic"], "unknown integrator 'magic'"),
    (["sim", "pendulum2", "--damping", "-3"], "--damping must be"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, needle):
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_console_script_bad_file_has_no_traceback(tmp_path):
    bad = tmp_path / "broken.urdf"
    bad.write_text("<robot name='x'><link name='a'>")
    proc = subprocess.run([sys.executable, "-m", "caliper_jax.cli", "load", str(bad)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "broken.urdf" in proc.stderr and "Traceback" not in proc.stderr


def test_sim_contact_rests_on_the_ground(capsys):
    code, out, _ = run(capsys, "sim", "collide_arm", "--contact", "--ground", "-0.2", "--q0", "1.5 0 0",
                       "--duration", "1", "--json")
    report = json.loads(out)
    assert code == 0 and report["contacts"] > 0
    assert max(abs(x) for x in report["v_final"]) < 1e-3  # at rest on the plane


def test_every_parser_formats_its_help():
    """`caliper ... --help` works on every verb and sub-verb (argparse %-formats help texts: a bare
    '%' crashed `caliper task --help`). Planted bug caught: 'Wilson 95% interval' as a help text."""
    import argparse

    from caliper_jax.cli import build_parser

    seen, todo = 0, [build_parser()]
    while todo:
        parser = todo.pop()
        parser.format_help()
        seen += 1
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(action.choices.values())
    assert seen > 40

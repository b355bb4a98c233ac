"""The faces: `caliper ik | analyze | calibrate` and the NumPy API. The pose layout is one: what
`caliper fk --json` prints is what `caliper ik --target` reads (the spec's transpose trap, where
fk output parsed as ik input silently solves the transposed pose, must not exist here)."""
import json

import jax.numpy as jnp
import numpy as np
import pytest

from caliper_jax import api as core_api
from caliper_jax import cli
from caliper_jax.errors import CaliperError
from caliper_jax.ik import analytic_ik, analyze
from caliper_jax.ik.poses import as_poses, parse_pose_text
from caliper_jax.loading import load

ROBOT = "ur5"


def run(capsys, *argv):
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_fk_json_output_is_ik_input(capsys):
    q = [0.3, -1.2, 1.0, -0.5, 1.2, 0.4]
    rc, out, _ = run(capsys, "fk", ROBOT, "--joints", ",".join(map(str, q)), "--frame", "tool0", "--json")
    assert rc == 0
    T = json.loads(out)["frames"]["tool0"]                 # nested rows, exactly as printed
    for text in (json.dumps(T), " ".join(repr(x) for row in T for x in row)):
        rc, out, _ = run(capsys, "ik", ROBOT, "--target", text, "--frame", "tool0",
                         "--q0", "0.2,-1,0.9,-0.4,1,0.3", "--json")
        report = json.loads(out)
        assert rc == 0 and report["success"]
        np.testing.assert_allclose(report["T"], T, atol=1e-9)
        assert report["pos_residual"] < 1e-9 and report["rot_residual"] < 1e-9
        assert report["layout"].startswith("T_world_frame, 4x4 row-major")
    # the transposed matrix is refused loudly, never solved as a different target
    rc, _, err = run(capsys, "ik", ROBOT, "--target", json.dumps(np.array(T).T.tolist()))
    assert rc == 2 and "transposed" in err and "--target" in err


def test_ik_position_and_text_output(capsys):
    rc, out, _ = run(capsys, "ik", ROBOT, "--position", "0.3,0.2,0.4", "--seed", "1")
    assert rc == 0 and "converged" in out and "p = [0.3 0.2 0.4]" in out


@pytest.mark.parametrize("argv,needle", [
    (["--target", "1,2,3"], "expected 16 numbers"),
    (["--target", "1,0,0,0, 0,1,0,0, 0,0,2,0, 0,0,0,1"], "not a rotation"),
    (["--position", "1,2"], "--position"),
    (["--target", " ".join(["0"] * 16), "--position", "1,2,3"], "exactly one"),
    (["--position", "0.3,0.2,0.4", "--frame", "nope"], "no frame named"),
    (["--position", "0.3,0.2,0.4", "--lock", "elbow"], "did you mean"),
])
def test_ik_errors_are_one_line(capsys, argv, needle):
    rc, _, err = run(capsys, "ik", ROBOT, *argv)
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1


@pytest.mark.x64     # the command line computes in float64: compare with the API at the same precision
def test_analyze_matches_the_api(capsys):
    q = "0.3,-1.2,1.0,-0.5,1.2,0.4"
    rc, out, _ = run(capsys, "analyze", ROBOT, "--joints", q, "--json")
    report = json.loads(out)
    ref = analyze(load(ROBOT, dtype=jnp.float64), np.array([float(x) for x in q.split(",")]))
    assert rc == 0 and report["frame"] == "tool0" and report["rank"] == 6
    np.testing.assert_allclose(report["singular_values"], ref["singular_values"], rtol=1e-12)
    np.testing.assert_allclose(report["escape_direction"], ref["escape_direction"], rtol=1e-10, atol=1e-14)
    rc, out, _ = run(capsys, "analyze", ROBOT, "--json")     # q = 0: exactly singular, still valid JSON
    assert rc == 0 and json.loads(out)["manipulability"] < 1e-12


@pytest.mark.x64     # observations made in float64, as the float64 command line reads them
def test_calibrate_from_npz_and_json(capsys, tmp_path):
    # panda, 40 observations of the hand after planted joint offsets
    model = load("panda", dtype=jnp.float64)
    rng = np.random.default_rng(0)
    lo, hi = np.asarray(model.qpos_lower), np.asarray(model.qpos_upper)
    qs = rng.uniform(lo, hi, (40, model.nq))
    delta = np.zeros(model.nq)
    delta[:7] = rng.uniform(-0.03, 0.03, 7)
    T = core_api.fk(model, qs + delta)[:, model.frame_id("panda_hand_tcp")]
    np.savez(tmp_path / "obs.npz", q=qs, T=T, frame="panda_hand_tcp")
    rc, out, _ = run(capsys, "calibrate", "panda", "--data", str(tmp_path / "obs.npz"), "--json")
    report = json.loads(out)
    assert rc == 0 and report["converged"] and report["frame"] == "panda_hand_tcp"
    np.testing.assert_allclose(report["offsets"], delta, atol=1e-9)
    assert report["joints"]["panda_finger_joint1"]["identifiable"] is False
    (tmp_path / "obs.json").write_text(json.dumps({"q": qs.tolist(), "T": T.tolist()}))
    rc, out, _ = run(capsys, "calibrate", "panda", "--data", str(tmp_path / "obs.json"))
    assert rc == 0 and "joint-offset calibration (panda_hand_tcp" in out      # default tool frame
    (tmp_path / "bad.json").write_text(json.dumps({"q": qs.tolist()}))
    rc, _, err = run(capsys, "calibrate", "panda", "--data", str(tmp_path / "bad.json"))
    assert rc == 2 and "needs field(s) T" in err
    rc, _, err = run(capsys, "calibrate", "panda", "--data", str(tmp_path / "missing.npz"))
    assert rc == 2 and "no such file" in err


@pytest.mark.x64     # torques made in float64, as the float64 command line reads them
def test_calibrate_dynamic_mode(capsys, tmp_path):
    model = load("pendulum2", dtype=jnp.float64)
    rng = np.random.default_rng(1)
    q, qd, qdd = rng.uniform(-2, 2, (30, 2)), rng.normal(size=(30, 2)), rng.normal(size=(30, 2))
    tau = core_api.inverse_dynamics(model, q, qd, qdd)
    np.savez(tmp_path / "dyn.npz", q=q, qd=qd, qdd=qdd, tau=tau)
    rc, out, _ = run(capsys, "calibrate", "pendulum2", "--data", str(tmp_path / "dyn.npz"),
                     "--mode", "dynamic", "--json")
    report = json.loads(out)
    assert rc == 0 and report["rms_torque_after"] < 1e-10 and report["rank"] >= 3


def test_pose_layout_helpers():
    T = np.eye(4)
    T[:3, 3] = [0.1, 0.2, 0.3]
    assert np.array_equal(as_poses(T.reshape(16)), T)
    assert np.array_equal(parse_pose_text(json.dumps(T.tolist())), T)
    with pytest.raises(CaliperError, match="transposed"):
        as_poses(T.T)
    with pytest.raises(CaliperError, match="4x4"):
        as_poses(np.zeros((3, 3)))


def test_api_shapes_follow_the_batch():
    model = load(ROBOT)
    q = np.array([0.3, -1.2, 1.0, -0.5, 1.2, 0.4])
    T = core_api.fk(model, q)[model.frame_id("tool0")]
    sol = analytic_ik(model, np.broadcast_to(T, (200, 4, 4)))     # test_ik_analytic's shape
    assert sol.q.shape == (200, 8, 6) and sol.valid.shape == (200, 8) and sol.frame == "tool0"
    toy = load("toy")
    out = analyze(toy, np.zeros((1, 2, toy.nq)))
    assert out["frame"] == "tool" and out["singular_values"].shape == (1, 2, toy.nv)
    assert out["ellipsoid_axes"].shape == (1, 2, 6, 6) and out["nullspace_projector"].shape == (1, 2, 2, 2)

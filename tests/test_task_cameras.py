"""Task cameras (tasks.cameras): placement, rendering in the VecEnv (both engines), recorded video
features and the ``caliper render`` / ``task demo --camera`` faces.

One scene is built per module -- lift-cube cut to a 0.1 s horizon (5 ticks) -- so every env shares
its compiled tick and camera functions. Images are small (32x32, 48x48) and worlds 1-2.
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import json

import jax
import numpy as np
import pytest

from caliper_jax.errors import CaliperError
from caliper_jax.rays import PinholeCamera, camera_pose, poses, render, scene_from_mujoco
from tasks.cameras import (
    NAMES,
    camera_record,
    exclude_body,
    parse_camera,
    resolve_cameras,
    scene_cameras,
)
from tasks.env import VecEnv
from tasks.scene import build_scene
from tasks.schema import find_task, load_task

W = 2
render_jit = jax.jit(render, static_argnums=1, static_argnames=("exclude_body",))


@pytest.fixture(scope="module")
def ts():
    return build_scene(dataclasses.replace(load_task(find_task("lift-cube")), horizon_s=0.1))


@pytest.fixture(scope="module")
def rays(ts):
    return scene_from_mujoco(ts.scene.mj)


def cube_geom(ts) -> int:
    return int(ts.scene.layout.prop_geom["cube"])


def direct(rays, cam, data):
    """A plain caliper_jax.rays.render of one MjData (the reference for the env's images)."""
    out = render_jit(rays, cam, poses(data), exclude_body=exclude_body(cam))
    return {k: np.asarray(v) for k, v in out.items()}


def mj_ray_check(ts, cam, d, frame, n=48, seed=0):
    """The render against an independent reference, MuJoCo's own ``mj_ray``, at ``n`` sampled
    pixels of ``frame`` (a render of MjData ``d``): the same geom, and the optical-axis depth to
    2e-4 m, on every pixel whose 3x3 neighbourhood is one geom (a silhouette pixel's ray can
    graze either side). Returns the number of pixels compared."""
    import mujoco

    pos, R = (np.asarray(x, np.float64) for x in camera_pose(cam, poses(d)))
    rng = np.random.default_rng(seed)
    rows, cols = rng.integers(1, cam.height - 1, n), rng.integers(1, cam.width - 1, n)
    fx, fy, cx, cy = cam.intrinsics()          # pixel centres, MuJoCo's camera frame (looks along -z)
    local = np.stack([(cols + 0.5 - cx) / fx, (cy - rows - 0.5) / fy, -np.ones(n)], axis=-1)
    local /= np.linalg.norm(local, axis=-1, keepdims=True)
    world = local @ R.T
    seg, depth = frame["segmentation"], frame["depth"]
    gid = np.zeros(1, np.int32)
    compared = 0
    for k in range(n):
        r, c = rows[k], cols[k]
        if (seg[r - 1:r + 2, c - 1:c + 2] != seg[r, c]).any():
            continue
        dist = mujoco.mj_ray(ts.scene.mj, d, pos, world[k], None, 1, exclude_body(cam), gid, None)
        ref_depth = dist * -local[k, 2] if gid[0] >= 0 else np.inf
        if not cam.min_range <= ref_depth <= cam.max_range:
            ref_depth, gid[0] = np.inf, -1
        assert seg[r, c] == gid[0], (cam.name, r, c, seg[r, c], gid[0])
        if gid[0] >= 0:
            assert abs(depth[r, c] - ref_depth) < 2e-4, (cam.name, r, c, depth[r, c], ref_depth)
        compared += 1
    return compared


class Lift:
    """Close the gripper and swing the arm from tick 1 (open loop, per world; the gate's rate
    limit makes the jaw travel ~2 cm a tick)."""

    def __init__(self, env):
        self.q0, self.L = np.asarray(env.task_scene.q0, np.float64), env.layout

    def act(self, obs, info):
        ticks = np.asarray(info["episode"]["tick"])
        a = np.tile(self.q0, (len(ticks), 1))
        a[:, self.L.gripper_q] = np.where(ticks >= 1, self.L.gripper_closed, self.L.gripper_open)
        a[:, 0] = np.where(ticks >= 1, 1.0, 0.0)
        return a


def test_scene_cameras_are_pinhole_cameras_and_see_the_cube(ts, rays):
    cams = scene_cameras(ts, size=(48, 48))
    assert tuple(cams) == NAMES and all(isinstance(c, PinholeCamera) for c in cams.values())
    assert all(c.body == -1 for n, c in cams.items() if n != "wrist")
    from tasks.env_spec import jaw_body

    assert cams["wrist"].body == jaw_body(ts)                # carried by the gripper joint's body
    import mujoco

    d = mujoco.MjData(ts.scene.mj)
    d.qpos[:] = ts.qpos(ts.q0)
    mujoco.mj_kinematics(ts.scene.mj, d)
    # the cube's geom id appears; from the top only a rim shows around the arm standing on it
    top = dataclasses.replace(cams["top"], width=96, height=96)
    for cam in (cams["front"], top, cams["wrist"]):
        seg = direct(rays, cam, d)["segmentation"]
        assert (seg == cube_geom(ts)).sum() >= 8, cam.name
    front = direct(rays, cams["front"], d)
    assert (front["segmentation"] == 0).mean() > 0.5         # mostly ground; the scene in the middle
    # the wrist camera does not see the jaw it sits on
    jaw_geoms = np.flatnonzero(np.asarray(ts.scene.mj.geom_bodyid) == cams["wrist"].body)
    assert not np.isin(direct(rays, cams["wrist"], d)["segmentation"], jaw_geoms).any()
    rec = camera_record(cams["wrist"], ts.scene.mj)
    assert rec["frame"] == rec["body"] == rec["excludes_body"] == "jaw"
    assert rec["intrinsics"]["cx"] == 24.0 and np.allclose(np.linalg.det(rec["R"]), 1.0)


def test_env_images_equal_a_direct_render_and_the_wrist_camera_moves_with_its_body(ts, rays):
    with VecEnv(ts, W, seed=4, cameras=("front:32x32", "wrist:48x32")) as env:
        front, wrist = env.cameras
        assert (wrist.width, wrist.height) == (48, 32)
        obs, info = env.reset()
        assert info["images"]["front"].shape == (W, 32, 32, 3)
        assert info["images"]["wrist"].shape == (W, 32, 48, 3)
        assert info["images"]["front"].dtype == np.uint8 and obs.shape == (W, env.obs_dim)
        policy = Lift(env)
        poses_seen = []
        compared = 0
        for _ in range(4):                                      # ticks 0..3 (the episode ends at 5)
            for w in range(W):
                d = env.world_data(w)
                for cam in env.cameras:
                    frame = direct(rays, cam, d)
                    np.testing.assert_array_equal(info["images"][cam.name][w], frame["rgb"])
                    compared += mj_ray_check(ts, cam, d, frame, n=12, seed=w)
            d0 = env.world_data(0)
            pos, R = (np.asarray(x, np.float64) for x in camera_pose(wrist, poses(d0)))
            b = wrist.body
            bR = d0.xmat[b].reshape(3, 3)
            np.testing.assert_allclose(pos, d0.xpos[b] + bR @ np.array(wrist.pos), atol=1e-6)
            np.testing.assert_allclose(bR.T @ R, np.reshape(wrist.R, (3, 3)), atol=1e-6)
            poses_seen.append(pos)
            obs, _, _, _, info = env.step(policy.act(obs, info))
        assert np.linalg.norm(poses_seen[-1] - poses_seen[0]) > 0.01     # the arm swung: the camera moved
        assert compared >= 100                                  # most sampled pixels are not silhouettes


def test_auto_reset_images_are_the_new_episodes_first_frames(ts, rays):
    """At the tick that ends an episode, images are the next episode's first frame (as a fresh
    reset of the same stream draws it) and final_images the frame of final_obs."""
    from tasks.env_spec import observation_parts

    cams = ("front:32x32",)
    with VecEnv(ts, W, seed=7, cameras=cams) as env, VecEnv(ts, W, seed=7, cameras=cams) as ref:
        obs, info = env.reset()
        policy = Lift(env)
        for _ in range(env.horizon):
            obs, _, term, trunc, info = env.step(policy.act(obs, info))
        assert (term | trunc).all()
        ref.reset()
        _, second = ref.reset()                                  # every world's episode 1
        np.testing.assert_array_equal(info["images"]["front"], second["images"]["front"])
        final = info["final_images"]["front"]
        assert (final != info["images"]["front"]).any(axis=-1).mean() > 0.02   # the arm moved
        # final_images render the state of final_obs (rebuilt from its float32 q and prop pose)
        import mujoco

        mj, lay = ts.scene.mj, ts.scene.layout
        parts = observation_parts(env.layout, info["final_obs"].astype(np.float64))
        for w in range(W):
            d = mujoco.MjData(mj)
            qpos = lay.qpos_from_q(parts["q"][w][None], base=mj.qpos0)[0]
            adr = lay.prop_qposadr["cube"]
            qpos[adr:adr + 3], qpos[adr + 3:adr + 7] = parts["prop_pos"][w, 0], parts["prop_quat"][w, 0]
            d.qpos[:] = qpos
            mujoco.mj_kinematics(mj, d)
            again = direct(rays, env.cameras[0], d)["rgb"]
            assert (again != final[w]).any(axis=-1).mean() < 0.01   # float32 obs: a silhouette pixel at most


def test_frozen_worlds_keep_their_images(ts):
    with VecEnv(ts, W, seed=1, cameras=("front:32x32",)) as env:
        obs, info = env.reset()
        policy = Lift(env)
        first = info["images"]["front"].copy()
        for _ in range(2):
            obs, _, _, _, info = env.step(policy.act(obs, info), active=np.array([True, False]))
        np.testing.assert_array_equal(info["images"]["front"][1], first[1])
        assert (info["images"]["front"][0] != first[0]).any()


def test_camera_arguments_are_checked(ts):
    assert parse_camera("front", NAMES) == ("front", 96, 96)
    assert parse_camera("wrist:64x48", NAMES) == ("wrist", 64, 48)
    for bad, words in (("front:0x5", "size"), ("nope", "no camera 'nope'"), ("front:12", "NAME:WxH")):
        with pytest.raises(CaliperError, match=words):
            parse_camera(bad, NAMES)
    named = PinholeCamera(width=8, height=8, name="mine", pos=(1.0, 0.0, 1.0))
    assert resolve_cameras(ts, None) == () and resolve_cameras(ts, named) == (named,)
    assert [c.name for c in resolve_cameras(ts, ["top:40x30", named])] == ["top", "mine"]
    for bad, words in (([PinholeCamera()], "needs a name"), (["front", "front:32x32"], "given twice"),
                       ([3], "expected a camera name"), (["side:9"], r"cameras\[0\]"),
                       ([PinholeCamera(name="x", body=99)], "not in the scene")):
        with pytest.raises(CaliperError, match=words):
            resolve_cameras(ts, bad)
    with pytest.raises(CaliperError, match="cameras"):
        VecEnv(ts, 1, cameras=["bogus"])


def test_cpu_and_mjx_images_agree_at_reset(ts):
    """Same seed, same start states: every pixel equal (both render float32 poses of the same
    qpos; MJX's float32 kinematics and MuJoCo's float64 ones agree to ~1e-7 m)."""
    cams = ("front:48x48", "wrist:32x32")
    with VecEnv(ts, W, seed=3, cameras=cams) as cpu, VecEnv(ts, W, engine="mjx", seed=3, cameras=cams) as mjx:
        _, a = cpu.reset()
        _, b = mjx.reset()
    for name in ("front", "wrist"):
        differ = (a["images"][name] != b["images"][name]).any(axis=-1)
        assert differ.mean() <= 0.002, (name, differ.mean())


@pytest.mark.slow
def test_mjx_images_come_out_of_the_episode_scan(ts):
    """Covered by default by test_cpu_and_mjx_images_agree_at_reset (the same render inside the
    jitted reset); this one compiles the MJX step (~1 min on the CPU)."""
    from tasks.env_mjx import MjxEnv

    env = MjxEnv(ts, W, seed=3, cameras=("front:32x32",))
    state = env.jit_reset(jax.random.PRNGKey(3))
    q0 = jax.numpy.asarray(np.tile(ts.q0, (W, 1)), env._gdtype)
    final, tr = env.rollout(state, lambda obs: q0, 3)
    assert tr.images["front"].shape == (3, W, 32, 32, 3)
    np.testing.assert_array_equal(tr.images["front"][0], state.info["images"]["front"])
    np.testing.assert_array_equal(final.info["images"]["front"], final.info["final_images"]["front"])
    with VecEnv(ts, W, seed=3, cameras=("front:32x32",)) as cpu:
        _, info = cpu.reset()
        obs, _, _, _, info = cpu.step(np.tile(ts.q0, (W, 1)))
    differ = (np.asarray(tr.images["front"][1]) != info["images"]["front"]).any(axis=-1)
    assert differ.mean() <= 0.01


def test_recorded_cameras_are_video_features_decoded_within_tolerance(ts, tmp_path):
    pytest.importorskip("av")
    from caliper_jax.dataset import LeRobotReader
    from tasks.demo import DEMOS_PATH, run_episodes, write_demos
    from tasks.resim import resimulate

    with VecEnv(ts, W, seed=2, cameras=("front:48x48", "wrist:32x32")) as env:
        eps, _ = run_episodes(env, 2, policy=Lift)
        write_demos(env, eps, tmp_path / "ds", seed=2)
    r = LeRobotReader(tmp_path / "ds")
    feat = r.features["observation.images.front"]
    assert feat["dtype"] == "video" and feat["shape"] == [48, 48, 3]
    assert feat["names"] == ["height", "width", "channels"]
    for i, ep in enumerate(eps):
        assert ep.images["front"].shape == (len(ep.state), 48, 48, 3)
        for name in ("front", "wrist"):
            got = r.video_frames(i, f"observation.images.{name}").astype(np.float64)
            assert got.shape == ep.images[name].shape
            mae = np.abs(got - ep.images[name]).mean(axis=(1, 2, 3))
            assert mae.max() < 10.0, (name, mae)          # libsvtav1 crf 30 on 32-48 px: measured 1.5-4.5
    side = json.loads((tmp_path / "ds" / DEMOS_PATH).read_text())
    assert [c["name"] for c in side["cameras"]] == ["front", "wrist"]
    assert side["cameras"][1]["body"] == "jaw" and side["cameras"][0]["feature"] == "observation.images.front"
    assert resimulate(tmp_path / "ds", 1).identical               # the record still replays (images ignored)


def test_record_demos_refuses_cameras_too_small_for_video(ts, tmp_path):
    from tasks.demo import record_demos

    with pytest.raises(CaliperError, match="32..16384 px"):
        record_demos(ts, 1, tmp_path / "ds", num_envs=1, cameras=("front:16x16",))
    assert not (tmp_path / "ds").exists() or not any((tmp_path / "ds").iterdir())


def run_cli(*argv):
    from caliper_jax.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_caliper_render_writes_pngs_and_reports(tmp_path):
    from PIL import Image

    code, out, err = run_cli("render", "gripper_arm", "--camera", "wrist:40x32", "--q", "0.3,-0.2,0.02",
                             "--out", str(tmp_path / "c.png"), "--depth", str(tmp_path / "d.png"),
                             "--segmentation", str(tmp_path / "s.png"), "--json")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["kind"] == "robot" and rep["camera"]["name"] == "wrist" and rep["camera"]["body"] == "jaw"
    assert np.asarray(Image.open(tmp_path / "c.png")).shape == (32, 40, 3)
    depth = np.asarray(Image.open(tmp_path / "d.png"))
    assert depth.dtype == np.uint16 and depth.shape == (32, 40)
    assert rep["hit_fraction"] == pytest.approx((depth > 0).mean())
    assert np.asarray(rep["camera"]["T_world_camera"]).shape == (4, 4)
    code, out, err = run_cli("render", "lift-cube", "--camera", "top:32x32", "--out", str(tmp_path / "t.png"),
                             "--json")
    assert code == 0, err
    assert "cube" in [g["name"] for g in json.loads(out)["visible_geoms"]]


@pytest.mark.parametrize("argv, words", [
    (("render", "lift-cube", "--camera", "front:9", "--out", "{tmp}/x.png"), "NAME:WxH"),
    (("render", "no-such-thing", "--out", "{tmp}/x.png"), "neither a task"),
    (("render", "pendulum2", "--camera", "wrist", "--out", "{tmp}/x.png"), "no gripper"),
    (("render", "lift-cube", "--q", "1,2", "--out", "{tmp}/x.png"), "--q: expected 3 values"),
    (("render", "lift-cube", "--out", "{tmp}/x.jpg"), "must end in .png"),
    (("task", "demo", "lift-cube", "--camera", "front:16x16", "--out", "{tmp}/ds"), "32..16384"),
    (("task", "demo", "lift-cube", "--camera", "side:9x", "--out", "{tmp}/ds"), "--camera 'side:9x'"),
])
def test_cli_camera_errors_are_one_line(argv, words, tmp_path):
    code, out, err = run_cli(*(a.replace("{tmp}", str(tmp_path)) for a in argv))
    assert code == 2 and err.count("\n") == 1 and words in err, err
    assert not list(tmp_path.iterdir())

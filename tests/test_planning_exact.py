"""The exact validation stage of planning (issue 34): MuJoCo's collision pipeline on the
CollisionModel's colliders agrees with coal (Pinocchio) on the panda's collision meshes, and a
path through a thin obstacle that the sphere cover misses between its samples is rejected."""
import numpy as np
import pytest

from caliper_jax.collision import box, build_collision_model, ground
from caliper_jax.loading import load
from caliper_jax.planning import BLOCKED, plan
from caliper_jax.planning.exact import MujocoEngine, _quat
from caliper_jax.planning.planner import exact_checker, exact_fine_checker, fast_checker


def test_quaternions_round_trip_every_branch():
    from scipy.spatial.transform import Rotation

    R = Rotation.random(200, random_state=3).as_matrix()
    R[:4] = np.array([np.eye(3), np.diag([1, -1, -1]), np.diag([-1, 1, -1]), np.diag([-1, -1, 1])])
    q = _quat(R)
    back = Rotation.from_quat(q[:, [1, 2, 3, 0]]).as_matrix()
    assert np.abs(back - R).max() < 1e-12


def test_mujoco_engine_agrees_with_coal_on_the_panda_meshes():
    pin = pytest.importorskip("pinocchio")
    coal = pytest.importorskip("coal")
    import robots

    root = robots.example_robot_data_dir()
    urdf, srdf = root / "panda_description/urdf/panda.urdf", root / "panda_description/srdf/panda.srdf"
    model = load("panda")
    obstacles = [box([0.5, 0.0, 0.45], [0.08, 0.25, 0.08], name="bar"), ground(-0.01)]
    cm = build_collision_model(model, obstacles, srdf=srdf)
    engine = MujocoEngine(model, cm)
    pm = pin.buildModelFromUrdf(str(urdf))
    gm = pin.buildGeomFromUrdf(pm, str(urdf), pin.GeometryType.COLLISION,
                               package_dirs=[str(root.parent.parent)])
    robot = len(gm.geometryObjects)
    bar = gm.addGeometryObject(pin.GeometryObject("bar", 0, 0, pin.SE3(np.eye(3), np.array([0.5, 0, 0.45])),
                                                  coal.Box(0.16, 0.5, 0.16)))
    floor = gm.addGeometryObject(pin.GeometryObject("ground", 0, 0, pin.SE3.Identity(),
                                                    coal.Halfspace(np.array([0.0, 0, 1]), -0.01)))
    gm.addAllCollisionPairs()
    pin.removeCollisionPairs(pm, gm, str(srdf))
    keep = [cp for cp in gm.collisionPairs if not (gm.geometryObjects[cp.first].parentJoint == 0
                                                   and gm.geometryObjects[cp.second].parentJoint == 0)]
    gm.removeAllCollisionPairs()
    for cp in keep:
        gm.addCollisionPair(cp)
    assert robot == bar < floor
    pd, gd = pm.createData(), pin.GeometryData(gm)
    rng = np.random.default_rng(5)
    qs = rng.uniform(np.asarray(model.qpos_lower), np.asarray(model.qpos_upper), (400, model.nq))
    ref = np.array([pin.computeCollisions(pm, pd, gm, gd, np.r_[q, q[-1]], True) for q in qs])
    ours = engine.collides(qs)
    assert 0.1 < ref.mean() < 0.6                       # both verdicts occur
    assert np.array_equal(ours, ref), np.flatnonzero(ours != ref)


def test_thin_obstacle_between_the_samples_is_rejected_by_the_exact_stage():
    """collide_arm swinging its straight arm from 0 to 1 rad: a 2 cm cube sits inside the last
    link only at 0.25 rad. At a 0.5 rad resolution the edge is sampled at 0.5 and 1.0, where the
    sphere cover clears it; the exact stage checks every 0.125 rad and finds the cube."""
    model = load("collide_arm")
    c = 0.85 * np.array([np.sin(0.25), 0.0, np.cos(0.25)])
    cm = build_collision_model(model, [box(c, [0.01, 0.01, 0.01], name="plate"), ground(-0.1)])
    q0, q1 = np.zeros(3), np.array([1.0, 0.0, 0.0])
    exact = exact_checker(model, cm, resolution=0.5)
    cover = fast_checker(model, cm)
    coarse = np.concatenate([q0[None], exact.samples(q0, q1)])
    assert coarse.shape[0] == 3 and cover.valid_np(coarse, exact.cover_params).all()   # the cover misses it
    assert exact.engine.collides(np.array([[0.25, 0.0, 0.0]]))[0]
    fine = exact_fine_checker(exact)
    assert fine.resolution == 0.125 and not fine.path_valid(np.stack([q0, q1]))
    res = plan(model, cm, q1, q0, resolution=0.5, planner="vrrtconnect", seed=0)
    assert res.status == BLOCKED and "exact check" in res.reason, res.reason
    res = plan(model, cm, q1, q0, resolution=0.5, seed=0)       # auto: the host fallback is checked too
    assert res.status == BLOCKED or fine.path_valid(res.waypoints), res.reason

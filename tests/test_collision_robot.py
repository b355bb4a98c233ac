"""Robot-level collision: the collide_arm fixture, allow-lists (tree + SRDF), uncovered links,
gradients through kinematics, the sphere approximation's cover, and the ``caliper check`` face."""
import json
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from caliper_jax.collision import api, box, build_collision_model, build_sphere_model, ground, query
from caliper_jax.collision.srdf import disabled_pairs_from_string
from caliper_jax.loading import load

FOLDED = np.array([0.0, np.pi, np.pi])
# float32 distances on a ~1 m arm: coordinates carry eps32 * 1 m of rounding; measured errors are
# below 0.3 eps (2.98e-8 m), so 8 eps * 1 m (~1e-6 m) is the gate
TOL = 8 * float(np.finfo(np.float32).eps) * 1.0


@pytest.fixture(scope="module")
def arm():
    return load("collide_arm", dtype=jnp.float32)


@pytest.fixture(scope="module")
def scene(arm):
    return build_collision_model(arm, [box([0.35, 0.0, 0.55], [0.06, 0.2, 0.06]), ground(-0.1)])


def test_collide_arm_folded_collides_and_straight_is_clear(arm, scene):
    folded = api.check(arm, scene, FOLDED)
    assert folded["in_collision"]
    hit = folded["colliding"][0]
    assert {hit["a"], hit["b"]} == {"l1", "l3"} and hit["kind"] == "self"
    # l3 folds back onto l1: the boxes coincide, the minimum translation is their 0.12 width
    assert hit["distance"] == pytest.approx(-0.12, abs=TOL)
    straight = api.check(arm, scene, np.zeros(3))
    assert not straight["in_collision"]
    d = {(r["a"], r["b"]): r["distance"] for r in straight["pairs"]}
    assert d[("l1", "l3")] == pytest.approx(0.3, abs=TOL)            # z gap 0.3 -> 0.6
    assert d[("l1", "ground")] == pytest.approx(0.1, abs=TOL)
    flags = api.collision_flags(arm, scene, np.stack([FOLDED, np.zeros(3)]), chunk=256, fixed=True)
    assert flags[0].any() and not flags[1].any()


def test_pure_jax_core_agrees_with_the_batched_api(arm, scene):
    """``query.contacts`` (one configuration, EPA inline, differentiable) and ``api.contacts``
    (batched, EPA gathered on the host) are the same computation."""
    qs = np.array([FOLDED, np.zeros(3), [0.2, 2.5, 2.9], [0.3, -1.2, 0.8]])
    batched = api.contacts(arm, scene, qs)
    one = jax.jit(lambda q: query.contacts(arm, scene, q))
    for k, q in enumerate(qs):
        c = one(jnp.asarray(q))
        np.testing.assert_allclose(np.asarray(c.distance), batched["distance"][k], atol=TOL)
        np.testing.assert_allclose(np.asarray(c.point_a), batched["point_a"][k], atol=TOL)
    assert batched["distance"][2].min() == pytest.approx(-0.12, abs=TOL)   # folded over: slide out sideways


def test_allow_list_and_uncovered(arm, scene):
    assert scene.allowed == (("l1", "l2"), ("l2", "l3"))
    assert scene.pair_names()[0] == ("l1", "l3") and sum(scene.pair_self) == 1
    assert [(u.link, u.reason) for u in scene.uncovered] == [("base", "no collision geometry")]
    srdf = '<robot name="collide_arm"><disable_collisions link1="l1" link2="l3" reason="Never"/></robot>'
    assert disabled_pairs_from_string(srdf) == [("l1", "l3")]
    cm = build_collision_model(arm, disabled_pairs=[("l3", "l1")])
    assert cm.npair == 0


def test_uncovered_links_are_reported(tmp_path):
    urdf = textwrap.dedent("""\
        <robot name="holes">
          <link name="base"/>
          <link name="a"><collision><geometry><mesh filename="missing.stl"/></geometry></collision></link>
          <link name="b"><visual><geometry><box size="0.1 0.1 0.1"/></geometry></visual></link>
          <link name="c"><collision><geometry><capsule radius="0.05" length="0.2"/></geometry>
            </collision></link>
          <joint name="j1" type="revolute"><parent link="base"/><child link="a"/><axis xyz="0 0 1"/>
            <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
          <joint name="j2" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/>
            <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
          <joint name="j3" type="revolute"><parent link="b"/><child link="c"/><axis xyz="0 0 1"/>
            <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
        </robot>""")
    path = tmp_path / "holes.urdf"
    path.write_text(urdf)
    model = load(path)
    cm = build_collision_model(model)
    reasons = {u.link: u.reason for u in cm.uncovered}
    assert "cannot be resolved" in reasons["a"] and "missing.stl" in reasons["a"]
    assert reasons["b"] == "visual geometry only, no collision geometry"
    assert reasons["base"] == "no collision geometry"
    assert "c" not in reasons and cm.kinds == ("segment",)


def test_panda_hulls_srdf_and_uncovered():
    import robots

    panda = load("panda")
    srdf = robots.example_robot_data_dir() / "panda_description/srdf/panda.srdf"
    plain = build_collision_model(panda)
    with_srdf = build_collision_model(panda, srdf=srdf)
    assert plain.kinds.count("hull") == 9 and plain.hull_verts.shape[1] == 152
    assert sum(with_srdf.pair_self) < sum(plain.pair_self)
    assert ("panda_link5", "panda_link7") in with_srdf.allowed
    assert {u.link for u in plain.uncovered} == {"panda_link8", "panda_hand_tcp"}


@pytest.mark.x64           # central differences with h = 1e-6 need float64
def test_min_distance_gradient_matches_finite_differences(arm):
    """jax.grad through FK and the certificate equals central differences of the solver."""
    arm = arm.astype(jnp.float64)
    scene = build_collision_model(arm, [box([0.35, 0.0, 0.55], [0.06, 0.2, 0.06]), ground(-0.1)])
    g = jax.jit(jax.grad(lambda q: query.min_distance(arm, scene, q, depth=False)))
    eps = 1e-6
    for q in ([-0.3, 0.5, -0.4], [-0.8, 1.1, 0.9], [0.2, -0.3, 2.6]):
        assert api.distances(arm, scene, q).min() > 0.01         # apart: no EPA needed
        probes = np.asarray(q) + np.concatenate([np.eye(3), -np.eye(3)]) * eps
        d = api.distances(arm, scene, probes).min(axis=1)
        fd = (d[:3] - d[3:]) / (2 * eps)
        grad = np.asarray(g(jnp.asarray(q)))
        assert np.all(np.isfinite(grad))
        np.testing.assert_allclose(grad, fd, atol=1e-9)        # measured 5.2e-11 (was 1e-6)


def test_sphere_approximation_is_conservative(arm, scene):
    obstacles = [box([0.35, 0.0, 0.55], [0.06, 0.2, 0.06]), ground(-0.1)]
    spheres, fits = build_sphere_model(arm, obstacles)
    assert [f.count for f in fits] == [3, 3, 3] and all(0 < f.excess < 0.06 for f in fits)
    qs = np.random.default_rng(3).uniform(-3.3, 3.3, (32, 3))
    exact = api.distances(arm, scene, qs)
    approx = api.distances(arm, spheres, qs)
    for (a, b) in set(scene.pair_names()):
        ke = [k for k, p in enumerate(scene.pair_names()) if p == (a, b)]
        ks = [k for k, p in enumerate(spheres.pair_names()) if p == (a, b)]
        da, de = approx[:, ks].min(axis=1), exact[:, ke].min(axis=1)
        assert np.all(da <= de + 1e-9)
        # apart, the spheres reach at most each link's stated over-approximation beyond it
        slack = sum(next(f.excess for f in fits if f.name == n) for n in (a, b) if n.startswith("l"))
        assert np.all((da >= de - slack - 1e-9) | (de <= 0))


def test_sphere_filtered_checks_give_the_same_answers(arm, scene):
    """The planners' filtered path (sphere cover, then GJK on what it cannot clear) answers exactly
    like GJK on every pair."""
    qs = np.random.default_rng(4).uniform(-3.3, 3.3, (32, 3))
    filt = api.SphereFilter(scene)
    assert filt.spheres.npair > scene.npair and filt.starts[0] == 0
    for margin in (0.0, 0.05):
        plain = api.in_collision(arm, scene, qs, margin, chunk=256, fixed=True)
        assert 0 < plain.mean() < 1
        filtered = api.filtered_in_collision(arm, filt, qs, margin, chunk=256, fixed=True)
        np.testing.assert_array_equal(filtered, plain)


def test_check_cli(capsys):
    from caliper_jax.cli import main

    rc = main(["check", "collide_arm", "--joints", "0,3.14159265,3.14159265", "--json", "--strict",
               "--ground", "-0.1", "--box", "0.35,0,0.55,0.06,0.2,0.06"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 1 and report["in_collision"] and report["colliding"][0]["a"] == "l1"
    assert report["uncovered"] == [{"link": "base", "reason": "no collision geometry"}]
    assert report["world_pairs"] == 6 and report["obstacles"][-1] == "ground"
    rc = main(["check", "collide_arm", "--joints", "0,0,0", "--ground", "-0.1",
               "--box", "1,1,1,0.1,0.1,0.1"])
    out = capsys.readouterr().out
    assert rc == 0 and "clear" in out and "uncovered: base" in out
    for bad, field in ((["--joints", "0,0"], "--joints"), (["--box", "1,2,3"], "--box"),
                       (["--sphere", "0,0,0,-1"], "radius"), (["--srdf", "/nonexistent/x.srdf"], "SRDF"),
                       (["--margin", "-1"], "margin")):
        assert main(["check", "collide_arm", *bad]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("caliper: error:") and "\n" not in err and field in err, err

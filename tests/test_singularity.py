"""Singularity metrics against NumPy's SVD on the same Jacobian, the ellipsoid and nullspace, and
the escape direction (finite and manipulability-increasing, including at exact singularities).

The comparisons with NumPy's float64 SVD, exact singularities and finite differences run in
float64 (x64); ``test_float32_metrics_match_float64`` checks the analysis at the user's precision."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from caliper_jax import api as core_api
from caliper_jax.ik import analyze
from caliper_jax.ik import singularity as S
from caliper_jax.loading import load

CASES = {"panda": "panda_hand_tcp", "ur5": "tool0"}
EPS32 = float(np.finfo(np.float32).eps)


def random_qs(model, n, seed):
    """Uniform within the limits (+-pi where unbounded), drawn on the host."""
    lo, hi = np.asarray(model.qpos_lower), np.asarray(model.qpos_upper)
    lo, hi = np.where(np.isfinite(lo), lo, -np.pi), np.where(np.isfinite(hi), hi, np.pi)
    return np.random.default_rng(seed).uniform(lo, hi, (n, model.nq))


@pytest.fixture(scope="module", params=list(CASES))
def analysed(request):
    """float64 (built under x64: the module fixture is shared by the x64 tests below)."""
    with jax.enable_x64(True):
        model = load(request.param, dtype=jnp.float64)
        frame = CASES[request.param]
        qs = random_qs(model, 32, 2)
        out, J = analyze(model, qs, frame=frame), core_api.jacobian(model, qs, frame)
        return model, frame, qs, out, J, request.param


def test_float32_metrics_match_float64(analysed):
    _, frame, qs, ref, _, name = analysed
    out = analyze(load(name, dtype=jnp.float32), qs, frame=frame)
    smax = float(ref["singular_values"].max())
    # a float32 Jacobian's singular values are good to a few eps of the largest (measured 1.7e-6
    # relative on the smallest, i.e. < 2 eps of sigma_max)
    np.testing.assert_allclose(out["singular_values"], ref["singular_values"], rtol=0, atol=16 * EPS32 * smax)
    np.testing.assert_allclose(out["translation_singular_values"], ref["translation_singular_values"], rtol=0,
                               atol=16 * EPS32 * smax)
    assert np.all(out["rank"] == ref["rank"])


@pytest.mark.x64
def test_scalar_metrics_equal_numpy_svd(analysed):
    model, _, _, out, J, _ = analysed
    s = np.linalg.svd(J, compute_uv=False)
    np.testing.assert_allclose(out["singular_values"], s, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(out["manipulability"], np.prod(s, axis=-1), rtol=1e-10)
    np.testing.assert_allclose(out["manipulability"], np.sqrt(np.linalg.det(J @ np.swapaxes(J, -1, -2))),
                               rtol=1e-7)
    np.testing.assert_allclose(out["condition_number"], np.linalg.cond(J), rtol=1e-8)
    st = np.linalg.svd(J[:, :3], compute_uv=False)
    np.testing.assert_allclose(out["translation_singular_values"], st, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(out["translation_manipulability"], np.prod(st, axis=-1), rtol=1e-10)
    np.testing.assert_allclose(out["translation_condition_number"], np.linalg.cond(J[:, :3]), rtol=1e-8)
    assert np.all(out["rank"] == np.linalg.matrix_rank(J))


@pytest.mark.x64
def test_ellipsoid_and_nullspace(analysed):
    model, _, _, out, J, _ = analysed
    A, r = out["ellipsoid_axes"], out["ellipsoid_radii"]
    eye = np.broadcast_to(np.eye(6), A.shape)
    np.testing.assert_allclose(np.swapaxes(A, -1, -2) @ A, eye, atol=1e-12)
    JJt = J @ np.swapaxes(J, -1, -2)
    np.testing.assert_allclose(JJt @ A, A * r[:, None, :] ** 2, atol=1e-10)
    At, rt = out["translation_ellipsoid_axes"], out["translation_ellipsoid_radii"]
    Jt = J[:, :3]
    np.testing.assert_allclose(Jt @ np.swapaxes(Jt, -1, -2) @ At, At * rt[:, None, :] ** 2, atol=1e-10)
    N = out["nullspace_projector"]
    np.testing.assert_allclose(J @ N, 0.0, atol=1e-10)
    np.testing.assert_allclose(N @ N, N, atol=1e-10)
    np.testing.assert_allclose(np.trace(N, axis1=-2, axis2=-1), model.nv - out["rank"], atol=1e-8)


@pytest.mark.x64
def test_escape_direction_increases_manipulability(analysed):
    model, frame, qs, out, _, _ = analysed
    g = out["escape_direction"]
    assert np.all(np.isfinite(g))
    step = 1e-4 * g / np.linalg.norm(g, axis=-1, keepdims=True)
    after = analyze(model, qs + step, frame=frame)["manipulability"]
    assert np.all(after > out["manipulability"])
    # and it is the gradient: directional finite difference
    f = model.frame_id(frame)
    w = jax.jit(lambda q: S.manipulability_at(model, q, f))
    q0, d = jnp.asarray(qs[0]), jnp.asarray(g[0] / np.linalg.norm(g[0]))
    fd = (w(q0 + 1e-6 * d) - w(q0 - 1e-6 * d)) / 2e-6
    np.testing.assert_allclose(fd, np.linalg.norm(g[0]), rtol=1e-5)


@pytest.mark.x64
def test_exact_singularity_is_nan_free_and_escapable():
    model = load("ur5", dtype=jnp.float64)
    qs = random_qs(model, 32, 2)       # the fixture's batch shape: no new compile
    qs[0] = 0.0                         # stretched out: elbow (and wrist) singular
    qs[1] = [0.3, -1.0, 1.5, -0.7, 0.0, 0.4]   # wrist singular only (q5 = 0)
    out = analyze(model, qs, frame="tool0")
    assert out["singular_values"][0, -1] < 1e-12 and out["manipulability"][:2].max() < 1e-12
    for key, value in out.items():
        if key != "frame":
            assert not np.any(np.isnan(value)), key
    g = out["escape_direction"][1]
    assert np.linalg.norm(g) > 1e-3
    qs[1] += 1e-3 * g / np.linalg.norm(g)
    assert analyze(model, qs, frame="tool0")["manipulability"][1] > 1e-6


@pytest.mark.x64
def test_jacobian_level_functions_vmap_and_differentiate():
    J = jnp.asarray(np.random.default_rng(0).normal(size=(5, 6, 7)))
    np.testing.assert_allclose(jax.vmap(S.singular_values)(J), np.linalg.svd(np.asarray(J), compute_uv=False),
                               rtol=1e-12)
    # custom JVP of the manipulability against central differences, and finite at rank loss
    grad = jax.grad(S.manipulability)(J[0])
    E = np.random.default_rng(1).normal(size=(6, 7))
    fd = (S.manipulability(J[0] + 1e-6 * E) - S.manipulability(J[0] - 1e-6 * E)) / 2e-6
    np.testing.assert_allclose(jnp.sum(grad * E), fd, rtol=1e-6)
    singular = J[0].at[5].set(J[0][4])
    assert np.all(np.isfinite(jax.grad(S.manipulability)(singular)))
    assert np.isinf(S.condition_number(jnp.zeros((6, 7)).at[0, 0].set(1.0)))
    assert np.all(np.isfinite(jax.grad(lambda x: S.inverse_condition_number(x))(singular)))

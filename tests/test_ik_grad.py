"""Implicit-function derivatives of IK (caliper_jax.ik.implicit) against central differences of the
solve itself, in float64, on UR5 (6R: the solution is locally unique, so a re-solve from the same
seed follows q*(theta) and central differences are meaningful): with respect to the target
(position and orientation, as a twist in the target's axes) and to a joint placement (link length
``jnt_p``). One compiled function serves every case (regular, singular, locked, unreachable):
forward mode, reverse mode and the perturbed re-solves are one jit. Then the compaction loop on
device (``compact="device"`` / ``numerical.solve_compacting``) against the host path, float32."""
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest

from caliper_jax import api as core_api
from caliper_jax.ik import default_seed, ik, ik_sensitivity, implicit, numerical
from caliper_jax.ik.chain import for_jit
from caliper_jax.loading import load

H = 1e-6
# tol 1e-12 (floored at 100 eps = 2.2e-14): the re-solves' convergence error stays well below the
# central-difference truncation error (~H^2 times the third derivative)
OPTS = numerical.IKOptions(tol=1e-12)
BODY = 2          # jnt_p[2]: the upper-arm link (shoulder-to-elbow placement)


def _hat(xi):
    w = xi[3:]
    G = jnp.zeros((4, 4), xi.dtype).at[:3, 3].set(xi[:3])
    return G.at[:3, :3].set(jnp.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]]))


@pytest.fixture(scope="module")
def ur5():
    with jax.enable_x64(True):             # the module also holds float32 tests
        model = for_jit(load("ur5", dtype=jnp.float64))
    f = model.frame_id("tool0")
    key = jax.random.PRNGKey(0)

    def q_of(params, T, seed, free_v, free_q):
        """params (9,): a target twist xi (6,) [v; w] (T* exp(xi)) and an offset of jnt_p[BODY];
        returns [q* (6,), success] (7,)."""
        m = model.replace(jnt_p=model.jnt_p.at[BODY].add(params[6:]))
        res = implicit.solve_diff(m, T @ jsl.expm(_hat(params[:6])), seed, key, free_v, free_q,
                                  frame=f, opts=OPTS)
        return jnp.concatenate([res.q, res.success.astype(res.q.dtype)[None]])

    def everything(T, seed, free_v, free_q):
        """The 18 perturbed solves and the unperturbed one are one vmapped solve; its linearisation
        gives forward mode (jvp) and, transposed, reverse mode (vjp) -- one loop to compile."""
        P = jnp.concatenate([jnp.eye(9), -jnp.eye(9), jnp.zeros((1, 9))]) * H
        out, lin = jax.linearize(jax.vmap(lambda p: q_of(p, T, seed, free_v, free_q)), P)
        fd = (out[:9, :6] - out[9:18, :6]).T / (2 * H)                           # (nq, 9)
        at0 = lambda k: jnp.zeros((19, 9)).at[18, k].set(1.0)
        jf = jax.vmap(lambda k: lin(at0(k))[18, :6], out_axes=1)(jnp.arange(9))   # (nq, 9)
        vjp = jax.linear_transpose(lin, P)
        ct = lambda i: jnp.zeros((19, 7)).at[18, i].set(1.0)
        jr = jax.vmap(lambda i: vjp(ct(i))[0][18])(jnp.arange(6))              # (nq, 9)
        return out[18, :6], out[18, 6] > 0, jnp.all(out[:, 6] > 0), fd, jf, jr

    return model, f, jax.jit(everything)


def _case(ur5, q, seed, locked=()):
    model, f, run = ur5
    T = jnp.asarray(core_api.fk(model, q)[f])
    free = np.ones(6, bool)
    free[list(locked)] = False
    out = run(T, jnp.asarray(seed, jnp.float64), jnp.asarray(free), jnp.asarray(free))
    return [np.asarray(x) for x in out]


@pytest.mark.x64
def test_gradient_wrt_target_and_link_length(ur5):
    q_true = np.array([0.3, -1.2, 1.0, -0.5, 1.2, 0.4])
    q0, ok, ok_fd, fd, jf, jr = _case(ur5, q_true, q_true + 0.05)
    assert ok and ok_fd and np.allclose(q0, q_true, atol=1e-10)
    assert np.abs(fd[:, 3:6]).max() > 0.1 and np.abs(fd[:, 6:]).max() > 0.1      # non-trivial
    # measured: max |jf - fd| 2.2e-8 against entries up to 5.1 (reverse vs forward: 2e-15)
    np.testing.assert_allclose(jf, fd, rtol=0, atol=1e-6)
    np.testing.assert_allclose(jr, jf, rtol=0, atol=1e-12)   # reverse = transposed forward


@pytest.mark.x64
def test_singular_locked_and_unreachable(ur5):
    # stretched-out elbow (q3 = 0: the arm at its reach boundary) with the wrist singular (q5 = 0)
    q_sing = np.array([0.2, -0.7, 0.0, 0.0, 0.0, 0.3])
    q0, ok, _, fd, jf, jr = _case(ur5, q_sing, q_sing + 0.02)
    assert ok and np.all(np.isfinite(jf)) and np.all(np.isfinite(jr))
    # locked joints: zero derivative, the rest still matches central differences
    q_true = np.array([0.3, -1.2, 1.0, -0.5, 1.2, 0.4])
    seed = q_true + 0.05
    seed[[0]] = q_true[[0]]
    q0, ok, _, fd, jf, jr = _case(ur5, q_true, seed, locked=[0])
    assert ok and q0[0] == q_true[0]
    # (a perturbed target is out of reach of the five free joints, so no central differences here)
    assert np.all(jf[0] == 0) and np.all(jr[0] == 0) and np.abs(jf[1:]).max() > 0.1
    # unreachable (the target 3 m out): no convergence -> flag False, zero derivative, no NaN
    model, f, run = ur5
    T = np.array(core_api.fk(model, q_true)[f])
    T[:3, 3] = [3.0, 0.0, 0.5]
    free = jnp.ones(6, bool)
    q0, ok, _, fd, jf, jr = [np.asarray(x) for x in run(jnp.asarray(T), jnp.asarray(seed), free, free)]
    assert not ok and np.all(np.isfinite(q0))
    assert np.all(jf == 0) and np.all(jr == 0)


@pytest.mark.x64
def test_limit_active_joint_has_zero_derivative(ur5):
    """The tangent rule at a solution that rests on a limit: that coordinate's derivative is
    zero, the others still satisfy the linearised pose equation (W J dq = dr)."""
    model, f, _ = ur5
    q = jnp.asarray([0.3, -1.2, 1.0, -0.5, 1.2, float(model.qpos_upper[5])])
    T = jnp.asarray(core_api.fk(model, np.asarray(q))[f])
    zero_model = jax.tree_util.tree_map(jnp.zeros_like, model)
    dT = jnp.zeros((4, 4)).at[0, 3].set(1.0)
    args = (jnp.ones(6), jnp.ones(6, bool), zero_model, dT)
    tangent = jax.jit(lambda q, T, *a: implicit.solution_tangent(model, q, T, jnp.asarray(True), *a, frame=f,
                                                                  opts=OPTS))
    dq = tangent(q, T, *args)
    assert float(dq[5]) == 0.0 and np.abs(np.asarray(dq[:5])).max() > 0.1
    # the same configuration just inside the limit: the joint moves
    q_in = q.at[5].add(-1e-3)
    T_in = jnp.asarray(core_api.fk(model, np.asarray(q_in))[f])
    dq_in = tangent(q_in, T_in, *args)
    assert np.all(np.isfinite(np.asarray(dq_in)))


@pytest.mark.slow   # ~60 s under load (a float64 ik compile); the tangent rule it wraps is the default tests'
@pytest.mark.x64
def test_sensitivity_face_numpy():
    """``ik_sensitivity``: NumPy in / out, dq*/dxi (..., nq, 6) equal to the pseudo-inverse of the
    local Jacobian at a regular solution."""
    model = load("ur5", dtype=jnp.float64)
    q_true = np.array([[0.3, -1.2, 1.0, -0.5, 1.2, 0.4], [-0.4, -1.0, 1.4, -1.0, 0.8, 0.1]])
    T = core_api.fk(model, q_true)[:, model.frame_id("tool0")]
    sol, dq_dxi = ik_sensitivity(model, T, frame="tool0", seed_q=q_true + 0.05, tol=1e-12)
    assert isinstance(dq_dxi, np.ndarray) and dq_dxi.shape == (2, 6, 6) and sol.success.all()
    from caliper_jax.ik.chain import frame_pose_jacobian
    for b in range(2):
        J = np.asarray(frame_pose_jacobian(model, jnp.asarray(sol.q[b]), model.frame_id("tool0"))[2])
        np.testing.assert_allclose(dq_dxi[b], np.linalg.inv(J), rtol=0, atol=1e-6)


# ---- the compaction loop on device ---------------------------------------------------------------

def _targets(model, frame, n, seed):
    lo, hi = np.asarray(model.qpos_lower), np.asarray(model.qpos_upper)
    qs = np.random.default_rng(seed).uniform(lo, hi, (n, model.nq))
    return np.array(core_api.fk(model, qs)[:, model.frame_id(frame)])


def test_device_compaction_equals_host_path(monkeypatch):
    """``compact="device"`` (one jitted call: lax.while_loop with on-device compaction) gives the
    host-compacting path's answers, unreachable targets included; small chunks so a 40-target
    batch takes several rounds (the 1000-target panda check is the slow test below)."""
    from caliper_jax.ik import api as ik_api
    monkeypatch.setattr(ik_api, "CHUNK", 16)
    monkeypatch.setattr(ik_api, "PASSES", 4)
    model = load("ur5", dtype=jnp.float32)
    T = _targets(model, "tool0", 40, 3)
    T[:3, :3, 3] = [[5.0, 0.0, 0.0], [0.0, 3.0, 1.0], [0.0, 0.0, -4.0]]
    host = ik_api.ik(model, T, frame="tool0", key=0, compact="host")
    dev = ik_api.ik(model, T, frame="tool0", key=0, compact="device")
    assert not host.success[:3].any() and host.success[3:].mean() > 0.9
    np.testing.assert_array_equal(dev.success, host.success)
    np.testing.assert_allclose(dev.q, host.q, rtol=0, atol=1e-5)      # measured: bytes equal
    np.testing.assert_array_equal(dev.iterations, host.iterations)


@pytest.mark.slow   # ~40 s; the default coverage is test_device_compaction_equals_host_path
def test_thousand_panda_targets_inside_jit():
    model = load("panda", dtype=jnp.float32)
    T = _targets(model, "panda_hand_tcp", 1000, 0)
    host = ik(model, T, frame="panda_hand_tcp", key=0, compact="host")
    f = model.frame_id("panda_hand_tcp")
    seeds = jnp.broadcast_to(jnp.asarray(default_seed(model), jnp.float32), (1000, model.nq))
    opts = numerical.IKOptions()
    run = jax.jit(lambda m, T, s, k: numerical.solve_compacting(m, T, s, k, frame=f, opts=opts))
    dev = run(for_jit(model), jnp.asarray(T), seeds, jax.random.PRNGKey(0))
    assert host.success.mean() >= 0.995
    np.testing.assert_array_equal(np.asarray(dev.success), host.success)
    np.testing.assert_allclose(np.asarray(dev.q), host.q, rtol=0, atol=1e-5)

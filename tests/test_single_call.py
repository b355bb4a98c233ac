"""caliper_jax.single: the batch-1 compiled calls give the normal path's results (same functions,
Model closed over as constants), accept NumPy / lists / device arrays, and reject bad input with a
one-line CaliperError. No timing here (benchmarks/bench_core.py --part latency measures it)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from caliper_jax import dynamics, kinematics
from caliper_jax.errors import CaliperError
from caliper_jax.loading import load
from caliper_jax.single import OPS, single_call

ROBOT = "gripper_arm"   # revolute and prismatic joints


def _inputs(model, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.uniform(-1, 1, n).astype(dtype) for n in (model.nq, model.nv, model.nv))


def _normal(model, op, q, v, a, frame=None, reference="world"):
    """The normal path, jitted with the Model as an argument."""
    if op == "fk":
        if frame is None:
            return jax.jit(kinematics.forward_kinematics)(model, q)
        return jax.jit(kinematics.frame_pose, static_argnums=2)(model, q, frame)
    if op == "jacobian":
        return jax.jit(kinematics.frame_jacobian, static_argnums=(2, 3))(model, q, frame, reference)
    fn = {"rnea": dynamics.rnea, "aba": dynamics.aba, "forward_dynamics": dynamics.forward_dynamics}[op]
    return jax.jit(fn)(model, q, v, a)


# slow: ABA's program is the largest (unrolled per body) and forward_dynamics' the next; each with
# the normal path's compile takes 9-11 s on 2 loaded cores. rnea exercises the same three-array path.
CASES = [("fk", {}), ("fk", {"frame": "jaw"}), ("jacobian", {"frame": "jaw"}),
         ("jacobian", {"frame": 2, "reference": "local"}), ("rnea", {}),
         pytest.param("aba", {}, marks=pytest.mark.slow),
         pytest.param("forward_dynamics", {}, marks=pytest.mark.slow)]


def _id(case):
    op, kw = case.values[:2] if hasattr(case, "values") else case
    return "-".join([op, *map(str, kw.values())])


@pytest.mark.parametrize("op,kw", CASES, ids=[_id(c) for c in CASES])
def test_matches_the_normal_path_float32(fixture_models, op, kw):
    model = fixture_models[ROBOT]
    q, v, a = _inputs(model, np.float32)
    call = single_call(model, op, **kw)
    args = (q,) if op in ("fk", "jacobian") else (q, v, a)
    out = call(*args)
    frame = model.frame_id(kw["frame"]) if isinstance(kw.get("frame"), str) else kw.get("frame")
    ref = np.asarray(_normal(model, op, q, v, a, frame, kw.get("reference", "world")))
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    assert out.shape == ref.shape
    scale = max(1.0, float(np.max(np.abs(ref))))
    np.testing.assert_allclose(out, ref, rtol=0, atol=64 * np.finfo(np.float32).eps * scale)
    assert call.compile_s > 0 and call.op == op


# slow for rnea: two float64 compiles take ~7 s on 2 loaded cores; fk covers the float64 path
@pytest.mark.x64
@pytest.mark.parametrize("op", ["fk", pytest.param("rnea", marks=pytest.mark.slow)])
def test_matches_the_normal_path_float64_and_dtype_choice(op):
    model = load(ROBOT, dtype=jnp.float32)
    q, v, a = _inputs(model, np.float64, seed=1)
    call = single_call(model, op, dtype=jnp.float64)       # model is float32: cast here
    out = call(*((q,) if op == "fk" else (q, v, a)))
    ref = np.asarray(_normal(model.astype(jnp.float64), op, q, v, a))
    assert out.dtype == np.float64 and out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-12 * max(1.0, np.max(np.abs(ref))))


def test_input_kinds_and_device_results(fixture_models):
    model = fixture_models[ROBOT]
    q = _inputs(model, np.float32, seed=2)[0]
    call = single_call(model, "fk", frame="jaw")
    expect = call(q)
    # lists, float64 arrays (cast) and device arrays all give the same answer
    for same in (q.tolist(), q.astype(np.float64), jnp.asarray(q)):
        np.testing.assert_array_equal(call(same), expect)
    raw = single_call(model, "fk", frame="jaw", device=True)
    out = raw(jax.device_put(q))
    assert isinstance(out, jax.Array)
    np.testing.assert_array_equal(np.asarray(out), expect)
    assert "'fk'" in repr(call) and call.shapes == ((model.nq,),) and expect.shape == (4, 4)


def test_errors_are_one_line_caliper_errors(fixture_models):
    model = fixture_models[ROBOT]
    fk = single_call(model, "fk")
    bad = [
        (lambda: single_call(model, "jacobain"), "op must be one of"),
        (lambda: single_call(model, "jacobian"), "needs a frame"),
        (lambda: single_call(model, "jacobian", frame="nope"), "no frame named 'nope'"),
        (lambda: single_call(model, "jacobian", frame=99), "frame: expected"),
        (lambda: single_call(model, "jacobian", frame=0, reference="body"), "reference must be"),
        (lambda: single_call(model, "rnea", frame=0), "takes no frame"),
        (lambda: fk(np.zeros(model.nq + 1)), f"q: expected shape ({model.nq},)"),
        (lambda: fk(np.zeros((1, model.nq))), "got (1, 3)"),
        (lambda: fk(["a"] * model.nq), "q: not an array of numbers"),
        (lambda: fk(), "fk takes 1 arrays (q), got 0"),
    ]
    for make, text in bad:
        with pytest.raises(CaliperError) as err:
            make()
        assert text in str(err.value) and "\n" not in str(err.value), str(err.value)
    assert set(OPS) == {"fk", "jacobian", "rnea", "aba", "forward_dynamics"}


def test_float64_without_x64_is_refused(fixture_models):
    if jax.config.jax_enable_x64:
        pytest.skip("x64 is on in this session")
    with pytest.raises(CaliperError, match="needs jax_enable_x64"):
        single_call(fixture_models[ROBOT], "fk", dtype=jnp.float64)

"""Persisted planning programs (caliper_jax.planning.aot; issue 34, compile once): an executable
stored by one Program is loaded by a fresh one with the same key and gives the same bytes; a
different closed-over value, shape or a damaged file never reuses the wrong executable."""
import jax
import numpy as np
import pytest

from caliper_jax.loading import load
from caliper_jax.planning import aot


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setattr(aot, "folder", lambda: tmp_path)
    return tmp_path


def _affine(scale):
    scale = np.asarray(scale, np.float32)
    return aot.program("test.affine", lambda x: x * scale + 1.0, lambda: (scale,)), scale


def test_an_executable_is_stored_once_and_loaded_by_a_fresh_program(store):
    x = jax.device_put(np.array([1.0, 2.0], np.float32))
    p1, scale = _affine([2.0, 3.0])
    y1 = np.asarray(p1(x))
    assert p1.compiled == 1 and p1.loaded == 0 and len(list(store.glob("*.bin"))) == 1
    np.testing.assert_array_equal(y1, np.asarray(x) * scale + 1)
    p1(x)
    assert p1.compiled == 1 and p1._cache_size() == 1            # held in memory after the first call
    p2, _ = _affine([2.0, 3.0])                                   # what a fresh process builds
    np.testing.assert_array_equal(np.asarray(p2(x)), y1)
    assert p2.loaded == 1 and p2.compiled == 0


def test_other_closed_over_values_shapes_or_a_damaged_file_compile_anew(store):
    x = jax.device_put(np.array([1.0, 2.0], np.float32))
    _affine([2.0, 3.0])[0](x)
    p, scale = _affine([20.0, 30.0])                             # same name, other constants
    np.testing.assert_array_equal(np.asarray(p(x)), np.asarray(x) * scale + 1)
    assert p.compiled == 1 and p.loaded == 0
    x3 = jax.device_put(np.array([1.0, 2.0, 3.0], np.float32))
    q, scale = _affine(2.0)
    q(x)
    np.testing.assert_array_equal(np.asarray(q(x3)), np.asarray(x3) * 2 + 1)
    assert q.compiled == 2
    for f in store.glob("*.bin"):
        f.write_bytes(b"not an executable")
    r, scale = _affine([2.0, 3.0])
    np.testing.assert_array_equal(np.asarray(r(x)), np.asarray(x) * scale + 1)
    assert r.compiled == 1 and r.loaded == 0


def test_without_a_cache_folder_a_program_is_its_jitted_function(monkeypatch, tmp_path):
    monkeypatch.setattr(aot, "folder", lambda: None)
    p, _ = _affine([2.0, 3.0])
    p(jax.device_put(np.array([1.0, 2.0], np.float32)))
    assert p.compiled == 0 and p.loaded == 0 and p.jitted._cache_size() == 1


def test_content_keys_see_the_model_and_refuse_opaque_objects():
    a, b = load("collide_arm"), load("collide_arm")
    assert aot.content_key(a) == aot.content_key(b)
    moved = b.replace(jnt_p=np.asarray(b.jnt_p) + 1e-3)
    assert aot.content_key(moved) != aot.content_key(a)
    assert aot.content_key((1, 2.0)) != aot.content_key((1, 2))
    with pytest.raises(TypeError):
        aot.content_key(object())


_FRESH = """
import json, sys
import caliper_jax
caliper_jax.enable_compile_cache(sys.argv[1])
from caliper_jax.planning import aot, plan
from caliper_jax.planning.problems import collide_arm_problems
ps = collide_arm_problems(1)
r = plan(ps.model, ps.collision_model(), ps.goals[0], ps.starts[0], seed=2, resolution=ps.resolution)
print(json.dumps({"stats": aot.STATS, "planner": r.planner, "waypoints": r.waypoints.tolist()}))
"""


@pytest.mark.slow          # two fresh processes, the first compiling the collide_arm fast path (~30-60 s)
def test_a_fresh_process_loads_the_planner_and_plans_the_same_bytes(tmp_path):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    runs = [json.loads(subprocess.run([sys.executable, "-c", _FRESH, str(tmp_path)], env=env, check=True,
                                      capture_output=True, text=True).stdout.strip().splitlines()[-1])
            for _ in range(2)]
    assert runs[0]["planner"] == "vrrtconnect" and runs[0]["stats"]["compiled"] >= 4
    first = runs[0]["stats"]
    assert runs[1]["stats"] == {"loaded": first["compiled"] + first["loaded"], "compiled": 0}
    assert runs[1]["waypoints"] == runs[0]["waypoints"]

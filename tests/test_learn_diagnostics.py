"""The learning-side verdicts: latency profiler (L001-L003), policy debugger (P001-P008) and the
autopsy. Each code fires on a case planted for it and stays silent on a healthy one; the numeric
cores are pure functions fed exact numbers, and the behavioural probes run on tiny NNX policies."""
from __future__ import annotations

import dataclasses
import json
import time
from types import SimpleNamespace

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from caliper_jax.dataset.synthetic import write_synthetic
from doctors.asset.report import Finding
from learn import autopsy as ap
from learn import debug
from learn import profile as prof
from learn.bundle import TrainedPolicy
from learn.config import BCConfig, config_to_dict
from learn.features import FeatureLayout
from learn.normalize import Normalizer
from tasks.schema import find_task, load_task

FPS = 30
DIM = 3
BUDGET = 20e6       # 50 Hz, in ns


def codes(findings):
    return [f.code for f in findings]


# -- fixtures ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("diag") / "ds"
    write_synthetic(root, episodes=4, length=40, fps=FPS, dim=DIM)
    return root


@pytest.fixture(scope="module")
def stale_dataset(tmp_path_factory):
    """A dataset whose meta/stats.json is gone: the doctor's D002 (an Error)."""
    root = tmp_path_factory.mktemp("diag") / "stale"
    write_synthetic(root, episodes=4, length=40, fps=FPS, dim=DIM)
    (root / "meta" / "stats.json").unlink()
    return root


@pytest.fixture(scope="module")
def layout():
    return FeatureLayout(("observation.state",), (DIM,), "action", DIM, FPS)


@pytest.fixture(scope="module")
def fitted(dataset, layout):
    obs, act, *_ = debug._dataset(dataset, layout)
    return debug.recompute_normalizer(obs, act)


class TinyPolicy(nnx.Module):
    """Linear map of the window's last frame to a chunk (normalised space)."""

    def __init__(self, obs_dim, action_dim, chunk=1, seed=0):
        self.obs_dim, self.action_dim, self.chunk = obs_dim, action_dim, chunk
        self.lin = nnx.Linear(obs_dim, action_dim * chunk, rngs=nnx.Rngs(seed))

    def sample(self, obs, obs_mask, key):
        return self.lin(obs[:, -1]).reshape(obs.shape[0], self.chunk, self.action_dim)


def tiny(layout, normalizer, *, config=None, edit=None, seed=0):
    config = config or BCConfig(hidden=(8,))
    model = TinyPolicy(layout.obs_dim, layout.action_dim, config.chunk_size, seed)
    if edit is not None:
        edit(model.lin)
    return TrainedPolicy(model, config, layout, normalizer)


# -- L: pure ----------------------------------------------------------------------------------------
def healthy_ticks(n=200):
    tick = np.full(n, 2e6)
    return tick, np.full(n, 0.5e6), tick.copy()


def test_latency_healthy_is_silent():
    tick, inf, period = healthy_ticks()
    assert prof.latency_findings(tick, inf, period, BUDGET) == []


def test_l001_budget_exceeded():
    tick, inf, period = healthy_ticks()
    over = tick.copy()
    over[::10] = 25e6                                   # 10% of ticks over the 20 ms budget
    f = prof.latency_findings(over, inf, period, BUDGET, np.arange(200) % 10 == 0)
    assert codes(f) == ["L001"] and f[0].severity == "Error"
    edge = tick.copy()
    edge[::20] = 25e6                                   # exactly 5%: not more than 5%
    assert prof.latency_findings(edge, inf, period, BUDGET) == []


def test_l002_inference_dominates_only_when_material():
    tick = np.full(100, 8e6)                             # 40% of the budget
    f = prof.latency_findings(tick, 0.8 * tick, tick, BUDGET)
    assert codes(f) == ["L002"] and f[0].severity == "Info"
    assert prof.latency_findings(tick, 0.5 * tick, tick, BUDGET) == []      # not dominant
    small = np.full(100, 5e3)                            # a 5 us loop that is 90% inference
    assert prof.latency_findings(small, 0.9 * small, small, BUDGET) == []


def test_l003_jitter():
    tick, inf, _ = healthy_ticks()
    period = np.where(np.arange(200) % 2 == 0, 10e6, 30e6)     # std 10 ms > max(5 ms, 1 ms)
    f = prof.latency_findings(tick, inf, period, BUDGET)
    assert codes(f) == ["L003"] and f[0].severity == "Warning"
    calm = np.where(np.arange(200) % 2 == 0, 19e6, 21e6)       # std 1 ms < 5 ms
    assert prof.latency_findings(tick, inf, calm, BUDGET) == []
    fast = 1e9 / 1000                                           # 1 kHz: the 1 ms floor governs
    jitter = np.where(np.arange(200) % 2 == 0, 0.2e6, 2.0e6)    # std 0.9 ms < 1 ms
    assert prof.latency_findings(np.full(200, 0.1e6), np.full(200, 0.01e6), jitter, fast) == []


def test_refill_detection_has_an_absolute_floor():
    inf = np.full(40, 100e3)
    inf[::5] = 2e6
    assert np.array_equal(prof.detect_refills(inf), np.arange(40) % 5 == 0)
    fast = np.full(40, 5e3)
    fast[::5] = 50e3                                    # 10x the median but only +45 us: noise
    assert not prof.detect_refills(fast).any()


def test_build_report_subtracts_scaffold_and_splits_refills():
    n = 50
    starts = np.arange(n) * 20e6
    inf = np.full(n, 1e6)
    inf[::10] = 9e6
    r = prof.build_report(50, 1, np.full(n, 0.2e6), inf, np.full(n, 1e6), starts, scaffold_ns=(1e5, 1e5, 1e5))
    assert r.refill_source == "detected" and r.split()["refill"]["count"] == 5
    assert np.allclose(r.tick_ns, 0.1e6 + (inf - 1e5) + 0.9e6)
    d = r.to_dict()
    assert d["stages_ms"]["tick"]["max"] == pytest.approx(9.9)
    assert r.findings == [] and "refill ticks (detected): 5" in r.render_text()


class _FakeEnv:
    num_envs = 1
    layout = SimpleNamespace(fps=50, obs_dim=2)

    def reset(self, seed=None):
        return np.zeros((1, 2), np.float32), {}

    def step(self, action):
        return np.zeros((1, 2), np.float32), np.zeros(1), np.zeros(1, bool), np.zeros(1, bool), {}


class _SlowChunker:
    """Runs its 'network' (25 ms, over the 20 ms budget) every 4th tick."""

    def __init__(self):
        self.tick, self.last_refilled = 0, np.zeros(1, bool)

    def reset(self, mask=None):
        self.tick = 0

    def act(self, obs):
        refill = self.tick % 4 == 0
        if refill:
            time.sleep(0.025)
        self.tick += 1
        self.last_refilled = np.array([refill])
        return np.zeros((1, 1), np.float32)


def test_profile_rollout_drives_a_deployer_and_flags_l001():
    r = prof.profile_rollout(_SlowChunker(), _FakeEnv(), ticks=20, warmup=0)
    assert r.ticks == 20 and r.refill_source == "deployer"
    sp = r.split()
    assert sp["refill"]["count"] == 5 and sp["refill"]["p50"] >= 25.0 > sp["pop"]["p95"]
    assert "L001" in codes(r.findings)                  # 25% of ticks over budget
    assert r.achievable_hz < 50
    json.dumps(r.to_dict())


# -- P: pure ----------------------------------------------------------------------------------------
def test_p008_config_findings():
    bad = debug.config_findings({"kind": "act", "chunk_size": 10, "n_action_steps": 20})
    assert [(f.code, f.severity) for f in bad] == [("P008", "Error")]
    ens = debug.config_findings({"kind": "act", "chunk_size": 10, "n_action_steps": 2,
                                 "temporal_ensemble": 0.01})
    assert [(f.code, f.severity) for f in ens] == [("P008", "Error")]
    waste = debug.config_findings({"kind": "act", "chunk_size": 10, "n_action_steps": 1})
    assert [(f.code, f.severity) for f in waste] == [("P008", "Info")]
    assert debug.config_findings({"kind": "act", "chunk_size": 10, "n_action_steps": 1,
                                  "temporal_ensemble": 0.01}) == []
    assert debug.config_findings({"kind": "act", "chunk_size": 10, "n_action_steps": 10}) == []
    assert debug.config_findings(config_to_dict(BCConfig())) == []
    # kind defaults fill missing keys: ACT's chunk_size 20 with n_action_steps 1
    assert codes(debug.config_findings({"kind": "act"})) == ["P008"]


def test_p005_fps_mismatch():
    f = debug.config_findings({"kind": "bc_mlp"}, train_fps=50, data_fps=30)
    assert [(x.code, x.severity) for x in f] == [("P005", "Error")]
    assert debug.config_findings({"kind": "bc_mlp"}, train_fps=30, data_fps=30) == []
    assert debug.config_findings({"kind": "bc_mlp"}, train_fps=50, data_fps=None) == []


def test_p001_spread():
    rng = np.random.default_rng(0)
    assert debug.spread_findings(rng.standard_normal((32, 4))) == []
    f = debug.spread_findings(np.ones((32, 4)) * 0.3 + 1e-3 * rng.standard_normal((32, 4)))
    assert codes(f) == ["P001"] and f[0].severity == "Error"


def test_p002_per_dof_collapse():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((32, 3))
    a[:, 1] = 0.7
    f = debug.per_dof_findings(a, [1.0, 1.0, 1.0], ["j0", "j1", "j2"])
    assert codes(f) == ["P002"] and "j1" in f[0].message and f[0].severity == "Warning"
    assert debug.per_dof_findings(a, [1.0, 5e-5, 1.0]) == []        # the data does not move it either


def test_p003_limit_saturation():
    a = np.zeros((100, 2))
    a[:30, 0] = 2.0                                      # 30% outside [-1, 1]
    a[:10, 1] = 2.0                                      # 10%: fine
    f = debug.limit_findings(a, [-1, -1], [1, 1], ["j0", "j1"])
    assert codes(f) == ["P003"] and "j0" in f[0].message
    assert debug.limit_findings(a, [-np.inf] * 2, [np.inf] * 2) == []    # limitless joints


def _norm(obs_mean, obs_std, act_mean=(0.0,), act_std=(1.0,)):
    return Normalizer(*(np.asarray(x, np.float32) for x in (obs_mean, obs_std, act_mean, act_std)))


def test_p004_normalizer_findings():
    ref = _norm([0.0, 1.0], [1.0, 2.0])
    assert debug.normalizer_findings(ref, ref) == []
    assert debug.normalizer_findings(_norm([0.2, 1.0], [1.0, 2.0]), ref) == []          # 0.2 sigma
    f = debug.normalizer_findings(_norm([0.3, 1.0], [1.0, 2.0]), ref, ["a", "b"])       # 0.3 sigma
    assert codes(f) == ["P004"] and f[0].severity == "Error" and "a" in f[0].message
    assert codes(debug.normalizer_findings(_norm([0.0, 1.0], [1.0, 3.1]), ref)) == ["P004"]  # ratio 1.55
    assert debug.normalizer_findings(_norm([0.0, 1.0], [1.0, 2.8]), ref) == []              # ratio 1.4
    assert codes(debug.normalizer_findings(_norm([0.0, 1.0], [1.0, 2.0], [0.0], [2.0]), ref)) == ["P004"]
    # both stds below the floor compare as equal (learn.normalize floors at STD_FLOOR)
    assert debug.normalizer_findings(_norm([0.0, 1.0], [1e-6, 2.0]), _norm([0.0, 1.0], [1e-5, 2.0])) == []


def test_p006_dead_input_and_p007_nonfinite():
    f = debug.dead_input_findings([0.5, 0.01, 0.0], [1.0, 1.0, 0.0], ["x", "y", "z"])
    assert codes(f) == ["P006"] and "y" in f[0].message            # z is constant in the data: skipped
    assert debug.dead_input_findings([0.5, 0.03], [1.0, 1.0]) == []
    assert debug.input_response(np.zeros((2, 1)), np.full((3, 2, 2, 1), 0.5)).tolist() == [0.5] * 3
    assert codes(debug.nonfinite_findings([[0.0, np.nan]])) == ["P007"]
    assert codes(debug.nonfinite_findings([[0.0, np.inf]])) == ["P007"]
    assert debug.nonfinite_findings(np.zeros((4, 2))) == []


# -- P: behavioural probes on tiny NNX policies ------------------------------------------------------
def test_healthy_random_init_policy_is_silent(dataset, layout, fitted):
    p = tiny(layout, fitted)
    assert debug.analyze_policy(p, dataset, robot_limits=([-5.0] * DIM, [5.0] * DIM)) == []
    assert debug.analyze_policy(p) == []                                   # normaliser-drawn probes


def test_p001_constant_policy(dataset, layout, fitted):
    def zero(lin):
        lin.kernel[...] = jnp.zeros_like(lin.kernel[...])
    f = debug.analyze_policy(tiny(layout, fitted, edit=zero), dataset)
    assert codes(f) == ["P001"]                                  # P002/P006 would only repeat it


def test_p002_and_p006_planted_in_the_weights(dataset, layout, fitted):
    def dead_dof(lin):
        lin.kernel[...] = lin.kernel[...].at[:, 1].set(0.0)    # action dof 1 never moves
    f = debug.analyze_policy(tiny(layout, fitted, edit=dead_dof), dataset)
    assert codes(f) == ["P002"] and "action.joint1" in f[0].message

    def dead_input(lin):
        lin.kernel[...] = lin.kernel[...].at[2, :].set(0.0)    # observation dim 2 is ignored
    f = debug.analyze_policy(tiny(layout, fitted, edit=dead_input), dataset)
    assert codes(f) == ["P006"] and "observation.state.joint2" in f[0].message


def test_p003_with_limits(dataset, layout, fitted):
    f = debug.analyze_policy(tiny(layout, fitted), dataset, robot_limits=([-0.01] * DIM, [0.01] * DIM))
    assert set(codes(f)) == {"P003"}
    model = SimpleNamespace(qpos_lower=np.full(DIM, -np.inf), qpos_upper=np.full(DIM, np.inf))
    assert debug.analyze_policy(tiny(layout, fitted), dataset, robot_limits=model) == []


def test_p004_shifted_normalizer_vs_fitted(dataset, layout, fitted):
    shifted = fitted._replace(obs_mean=fitted.obs_mean + fitted.obs_std)     # 1 sigma off
    f = debug.analyze_policy(tiny(layout, shifted), dataset)
    assert "P004" in codes(f) and f[0].code == "P004"
    assert "P004" not in codes(debug.analyze_policy(tiny(layout, fitted), dataset))


def test_p005_training_fps_vs_dataset(dataset, fitted):
    fl = FeatureLayout(("observation.state",), (DIM,), "action", DIM, 50)
    f = debug.analyze_policy(tiny(fl, fitted), dataset)
    assert codes(f) == ["P005"]


def test_p007_nan_policy_skips_the_rest(dataset, layout, fitted):
    def poison(lin):
        lin.bias[...] = lin.bias[...].at[0].set(jnp.nan)
    f = debug.analyze_policy(tiny(layout, fitted, edit=poison), dataset, robot_limits=([-1e-3] * DIM,
                                                                                       [1e-3] * DIM))
    assert codes(f) == ["P007"]


def _write_meta(folder, config):
    folder.mkdir()
    meta = {"format": "caliper-policy-checkpoint", "format_version": 1, "config": config,
            "features": {"state_keys": ["observation.state"], "state_dims": [DIM], "action_key": "action",
                         "action_dim": DIM, "fps": FPS},
            "normalizer": {}, "step": 0, "arrays": {"params": {}}}
    (folder / "caliper_checkpoint.json").write_text(json.dumps(meta))
    return folder


def test_p008_from_checkpoint_json_without_building(tmp_path, dataset):
    bad = {"kind": "act", "chunk_size": 10, "n_action_steps": 20}
    # learn.config refuses this config, and the folder holds no weights: only the JSON is read
    f = debug.analyze_policy(_write_meta(tmp_path / "ckpt", bad), dataset)
    assert [(x.code, x.severity) for x in f] == [("P008", "Error")]
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "config.json").write_text(json.dumps({"policy": {**bad, "temporal_ensemble": 0.1}}))
    assert [(x.code, x.severity) for x in debug.analyze_policy(plain)] == [("P008", "Error")] * 2


def test_saved_checkpoint_and_safetensors_load(tmp_path, dataset, layout, fitted):
    from learn.checkpoint import export_safetensors, save_checkpoint
    from learn.policies import build_policy

    cfg = BCConfig(hidden=(16,), chunk_size=4, n_action_steps=4)
    model = build_policy(cfg, DIM, DIM)
    path = save_checkpoint(tmp_path / "bc", model=model, config=cfg, train_config=None, features=layout,
                           normalizer=fitted, fingerprint=None)
    assert debug.analyze_policy(path, dataset) == []
    weights = export_safetensors(TrainedPolicy(model, cfg, layout, fitted), tmp_path / "bc.safetensors")
    assert debug.analyze_policy(str(weights), dataset, probes=8) == []
    shifted = fitted._replace(obs_std=fitted.obs_std * 2)
    weights = export_safetensors(TrainedPolicy(model, cfg, layout, shifted), tmp_path / "shifted.safetensors")
    assert codes(debug.analyze_policy(weights, dataset)) == ["P004"]


# -- autopsy ----------------------------------------------------------------------------------------
def F(code, severity):
    return Finding(code, severity, f"{code} message", f"{code} hint")


def test_autopsy_ordering_rule():
    planted = {"L": [F("L001", "Error")], "E": [F("E001", "Warning")], "P": [F("P004", "Error")],
               "D": [F("D002", "Error"), F("D001", "Warning")]}
    assert ap.order_sections(planted) == ["D", "P", "L", "E"]                 # ties toward the dataset
    assert [f.code for _, f in ap.order_findings(planted)] == ["D002", "P004", "L001", "D001", "E001"]
    worse = {"D": [F("D001", "Warning")], "P": [], "L": [F("L001", "Error")]}
    assert ap.order_sections(worse) == ["L", "D", "P"]                        # severity first
    text = ap.verdict_text(worse, {"L": {"achievable_hz": 30.0, "fps": 50}})
    assert text.startswith("Most likely cause first -- the deploy loop") and "start with L001" in text
    assert ap.verdict_text({"D": [], "P": []}).startswith("No findings")


def test_autopsy_dataset_defect_leads_over_p004(stale_dataset, layout, fitted):
    shifted = fitted._replace(act_mean=fitted.act_mean + 2 * fitted.act_std)
    r = ap.autopsy(tiny(layout, shifted), stale_dataset)
    assert "P004" in codes(r.findings["P"]) and "D002" in codes(r.findings["D"])
    assert r.order()[:2] == ["D", "P"]
    first = r.ordered_findings()[0]
    assert first[0] == "D" and first[1].code == "D002"
    assert r.verdict().startswith("Most likely cause first -- the dataset") and r.exit_code == 1
    d = r.to_dict()
    assert d["findings"][0]["code"] == "D002" and d["skipped"]["E"].startswith("no task")
    assert "dataset doctor (D)" in r.render_text()


def test_autopsy_collapsed_policy_leads_with_the_policy(dataset, layout, fitted):
    def zero(lin):
        lin.kernel[...] = jnp.zeros_like(lin.kernel[...])
    r = ap.autopsy(tiny(layout, fitted, edit=zero), dataset)
    assert r.findings["D"] == [] and codes(r.findings["P"]) == ["P001"]
    assert r.order()[0] == "P" and r.ordered_findings()[0][1].code == "P001"
    assert "the policy" in r.verdict().split(";")[0] and r.exit_code == 1


def test_autopsy_healthy_is_clean_and_deterministic(dataset, layout, fitted):
    a = ap.autopsy(tiny(layout, fitted), dataset)
    b = ap.autopsy(tiny(layout, fitted), dataset)
    assert a.exit_code == 0 and a.verdict().startswith("No findings")
    assert json.dumps(a.to_dict(timings=False), sort_keys=True) == json.dumps(b.to_dict(timings=False),
                                                                              sort_keys=True)
    assert "no findings" in a.render_text()


def test_autopsy_unbuildable_checkpoint(tmp_path, dataset):
    path = _write_meta(tmp_path / "bad", {"kind": "act", "chunk_size": 4, "n_action_steps": 8})
    r = ap.autopsy(path, dataset)
    assert codes(r.findings["P"]) == ["P008"] and r.order()[0] == "P" and r.exit_code == 1


# -- with a task: the E and L sections on the real environment and deployer ---------------------------
@pytest.fixture(scope="module")
def lift_dataset(tmp_path_factory):
    """Random but well-formed demos with the lift-cube environment's features, at its 50 fps."""
    from caliper_jax.dataset.writer import LeRobotWriter
    from tasks.demo import features as demo_features
    from tasks.env import resolve_task

    ts = resolve_task("lift-cube")
    root = tmp_path_factory.mktemp("lift") / "ds"
    rng = np.random.default_rng(0)
    with LeRobotWriter(root, 50, demo_features(ts.model, ("cube",)), robot_type="gripper_arm") as w:
        for _ in range(3):
            n = 30
            q = np.cumsum(rng.normal(0, 0.02, (n, 3)), axis=0).astype(np.float32)
            cube = np.tile(np.array([0, 0, 0.05, 1, 0, 0, 0], np.float32), (n, 1))
            cube[:, :3] += rng.normal(0, 0.01, (n, 3)).astype(np.float32)
            w.add_frames({"observation.state": q, "action": np.roll(q, -1, axis=0),
                          "observation.environment_state": cube})
            w.save_episode(task="lift the cube")
    return root


def test_autopsy_with_a_task_runs_eval_and_latency(lift_dataset):
    fl = FeatureLayout(("observation.state", "observation.environment_state"), (3, 7), "action", 3, 50)
    obs, act, *_ = debug._dataset(lift_dataset, fl)
    policy = tiny(fl, debug.recompute_normalizer(obs, act), config=BCConfig(chunk_size=4, n_action_steps=4))
    task = dataclasses.replace(load_task(find_task("lift-cube")), horizon_s=0.5)   # 25-tick episodes
    r = ap.autopsy(policy, lift_dataset, task=task, episodes=1, profile_ticks=24)   # W = 1 twice
    assert set(r.findings) == {"D", "P", "E", "L"} and r.skipped == {}
    assert r.summaries["E"]["episodes"] == 1 and set(codes(r.findings["E"])) <= {"E001", "E002", "E003"}
    lat = r.latency
    assert lat.ticks == 24 and lat.refill_source == "deployer" and lat.split()["refill"]["count"] == 6
    d = r.to_dict()
    assert d["timings"]["latency"]["ticks"] == 24 and set(d["order"]) == {"D", "P", "E", "L"}
    quiet = r.to_dict(timings=False)
    assert "timings" not in quiet and "L" not in quiet["order"] and "L" not in quiet["sections"]
    assert "deploy latency (L)" in r.render_text()

"""Deploy-loop latency profiler (L001-L003).

:func:`profile_rollout` drives a :class:`tasks.env.VecEnv` with a deployed policy and times every
control tick in three stages with ``time.perf_counter_ns``: observation build (the episode
bookkeeping -- ``Deployer.reset`` of the worlds that just finished -- and the host observation
array; :class:`learn.deploy.Deployer` maps environment observations to policy features inside
its jitted tick, so that mapping counts as inference), inference (``Deployer.act``) and the
environment step. The cost of the instrumentation itself is measured first on a loop that
does no work and subtracted, so the numbers charge the policy and the engine only.

The headline is ``achievable_hz = 1 / p95(tick)``: the rate the loop sustains on 95% of ticks.
Chunked policies run the network only on refill ticks and pop a queued action otherwise; refill
ticks come from the deployer (``last_refilled``) when it reports them, else they are detected from
the inference times (a refill tick takes more than 3x the median *and* more than the median plus
200 us, so scheduler noise on a microsecond-fast policy is never read as chunking), and their p95
is reported apart from the pops'.

The verdicts are a pure function of measured numbers (:func:`latency_findings`), so they are
testable on planted timings. Everything here is wall-clock: never part of a deterministic output.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from doctors.asset.report import SEVERITIES, Finding

STAGES = ("obs", "inference", "step")
REFILL_RATIO = 3.0            # a refill tick exceeds 3x the median inference time ...
REFILL_FLOOR_NS = 200_000     # ... and the median + 200 us
OVER_BUDGET_FRACTION = 0.05   # L001
INFERENCE_SHARE = 0.60        # L002: inference > 60% of the median tick ...
MATERIAL_TICK = 0.20          # ... and the p95 tick > 20% of the budget
JITTER_BUDGET_FRACTION = 0.25  # L003: period std > max(25% of budget, 1 ms)
JITTER_FLOOR_NS = 1_000_000


# -- pure numerics ---------------------------------------------------------------------------------
def percentiles(ns) -> dict:
    """{p50, p95, p99, max, mean} in milliseconds of durations ``ns`` (nanoseconds); zeros when empty."""
    x = np.asarray(ns, np.float64).reshape(-1)
    if x.size == 0:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0, "mean": 0.0}
    p50, p95, p99 = np.percentile(x, [50, 95, 99])
    return {"p50": p50 / 1e6, "p95": p95 / 1e6, "p99": p99 / 1e6, "max": float(x.max()) / 1e6,
            "mean": float(x.mean()) / 1e6}


def detect_refills(inference_ns) -> np.ndarray:
    """(T,) bool: ticks whose inference took > 3x the median and > median + 200 us."""
    x = np.asarray(inference_ns, np.float64).reshape(-1)
    if x.size == 0:
        return np.zeros(0, bool)
    med = float(np.median(x))
    return (x > REFILL_RATIO * med) & (x > med + REFILL_FLOOR_NS)


def latency_findings(tick_ns, inference_ns, period_ns, budget_ns, refill_mask=None) -> list[Finding]:
    """L001-L003 of per-tick totals ``tick_ns`` (T,), inference times ``inference_ns`` (T,), tick
    periods ``period_ns`` (start-to-start, T-1 or T) and the tick budget ``budget_ns`` (1/fps).
    ``refill_mask`` (T,) bool, optional, only sharpens the messages."""
    tick = np.asarray(tick_ns, np.float64).reshape(-1)
    inf = np.asarray(inference_ns, np.float64).reshape(-1)
    period = np.asarray(period_ns, np.float64).reshape(-1)
    budget = float(budget_ns)
    if tick.size == 0 or not budget > 0:
        return []
    refill = None if refill_mask is None else np.asarray(refill_mask, bool).reshape(-1)
    out = []
    p95 = float(np.percentile(tick, 95))
    over = float(np.mean(tick > budget))
    if over > OVER_BUDGET_FRACTION:
        hz = 1e9 / p95 if p95 > 0 else float("inf")
        where = ""
        if refill is not None and refill.any() and refill.size == tick.size:
            over_refill = float(np.mean(tick[refill] > budget))
            over_pop = float(np.mean(tick[~refill] > budget)) if (~refill).any() else 0.0
            where = (f" ({100 * over_refill:.0f}% of refill ticks, {100 * over_pop:.0f}% of pop ticks)")
        out.append(Finding(
            "L001", "Error",
            f"{100 * over:.1f}% of ticks exceeded the {budget / 1e6:.3f} ms budget{where}; the p95 tick "
            f"takes {p95 / 1e6:.3f} ms, so the loop holds about {hz:.0f} Hz, not {1e9 / budget:.0f} Hz -- "
            "on hardware it slips or back-pressures the controller",
            f"run at <= {hz:.0f} Hz and collect/train at that fps (train and deploy share one cadence), "
            "or cut the dominant stage"))
    med_tick = float(np.median(tick))
    med_inf = float(np.median(inf)) if inf.size else 0.0
    if med_tick > 0 and med_inf > INFERENCE_SHARE * med_tick and p95 > MATERIAL_TICK * budget:
        out.append(Finding(
            "L002", "Info",
            f"inference is {100 * med_inf / med_tick:.0f}% of the median tick ({med_inf / 1e6:.3f} of "
            f"{med_tick / 1e6:.3f} ms) and the p95 tick is {100 * p95 / budget:.0f}% of the budget: the "
            "policy, not the observation build or the engine step, is where time goes",
            "shrink the model or raise n_action_steps so a forward pass amortises over more ticks -- "
            "and watch the refill p95, that tick must still fit the budget"))
    if period.size >= 2:
        std = float(np.std(period))
        limit = max(JITTER_BUDGET_FRACTION * budget, JITTER_FLOOR_NS)
        if std > limit:
            spikes = ""
            if refill is not None and refill.any():
                spikes = f"; {int(refill.sum())} refill tick(s) of {refill.size} make periodic spikes"
            out.append(Finding(
                "L003", "Warning",
                f"tick-period std {std / 1e6:.3f} ms exceeds {limit / 1e6:.3f} ms (max of 25% of the budget "
                f"and 1 ms){spikes}: actions arrive unevenly spaced and every executed trajectory deforms",
                "look for periodic spikes first (chunk refills: see the refill/pop split), then background "
                "load and GC pauses; pin the process or lower the fps"))
    return sorted(out, key=lambda f: (SEVERITIES.index(f.severity), f.code))


# -- report ----------------------------------------------------------------------------------------
@dataclass
class LatencyReport:
    """Per-tick timings (nanoseconds, scaffold cost subtracted) and their summary."""

    fps: float
    num_envs: int
    obs_ns: np.ndarray
    inference_ns: np.ndarray
    step_ns: np.ndarray
    tick_ns: np.ndarray          # obs + inference + step
    period_ns: np.ndarray        # start-to-start, raw
    refill: np.ndarray           # (T,) bool
    refill_source: str           # "deployer" | "detected"
    scaffold_ns: float           # per-tick instrumentation cost that was subtracted
    findings: list[Finding] = field(default_factory=list)

    @property
    def ticks(self) -> int:
        return int(self.tick_ns.size)

    @property
    def budget_ns(self) -> float:
        return 1e9 / self.fps

    @property
    def achievable_hz(self) -> float:
        p95 = float(np.percentile(self.tick_ns, 95)) if self.tick_ns.size else 0.0
        return 1e9 / p95 if p95 > 0 else float("inf")

    @property
    def over_budget_fraction(self) -> float:
        return float(np.mean(self.tick_ns > self.budget_ns)) if self.tick_ns.size else 0.0

    def stages(self) -> dict:
        return {"obs": percentiles(self.obs_ns), "inference": percentiles(self.inference_ns),
                "step": percentiles(self.step_ns), "tick": percentiles(self.tick_ns)}

    def split(self) -> dict:
        """Refill vs pop ticks: count and tick-total percentiles of each."""
        r = self.refill.astype(bool)
        return {"source": self.refill_source,
                "refill": {"count": int(r.sum()), **percentiles(self.tick_ns[r])},
                "pop": {"count": int((~r).sum()), **percentiles(self.tick_ns[~r])}}

    def to_dict(self) -> dict:
        hz = self.achievable_hz
        return {"ticks": self.ticks, "fps": self.fps, "num_envs": self.num_envs,
                "budget_ms": self.budget_ns / 1e6, "scaffold_us": self.scaffold_ns / 1e3,
                "achievable_hz": None if not np.isfinite(hz) else hz,
                "over_budget_fraction": self.over_budget_fraction,
                "period_std_ms": float(np.std(self.period_ns)) / 1e6 if self.period_ns.size else 0.0,
                "stages_ms": self.stages(), "refill_split": self.split(),
                "findings": [f.to_dict() for f in self.findings]}

    def render_text(self) -> str:
        hz = self.achievable_hz
        hz_text = "unbounded" if not np.isfinite(hz) else f"~{hz:.0f} Hz"
        lines = [f"Latency profile -- {self.ticks} ticks @ {self.fps:g} Hz (budget "
                 f"{self.budget_ns / 1e6:.3f} ms/tick, {self.num_envs} world(s))",
                 f"  achievable: {hz_text} (1 / p95 tick); {100 * self.over_budget_fraction:.1f}% of ticks "
                 f"over budget; scaffold {self.scaffold_ns / 1e3:.1f} us/tick subtracted",
                 f"  {'stage':<10} {'p50':>9} {'p95':>9} {'p99':>9} {'max':>9}  (ms)"]
        for name, s in self.stages().items():
            lines.append(f"  {name:<10} {s['p50']:9.3f} {s['p95']:9.3f} {s['p99']:9.3f} {s['max']:9.3f}")
        sp = self.split()
        lines.append(f"  refill ticks ({sp['source']}): {sp['refill']['count']}, p95 "
                     f"{sp['refill']['p95']:.3f} ms; pop ticks: {sp['pop']['count']}, p95 "
                     f"{sp['pop']['p95']:.3f} ms")
        if not self.findings:
            lines.append("  no latency findings")
        for f in self.findings:
            lines += [f"[{f.severity.upper()}] {f.code}: {f.message}", f"    fix: {f.hint}"]
        return "\n".join(lines)


def build_report(fps, num_envs, obs_ns, inference_ns, step_ns, starts_ns, refill=None,
                 scaffold_ns=(0.0, 0.0, 0.0)) -> LatencyReport:
    """The report of raw per-tick stage times (ns) and tick start stamps; ``scaffold_ns`` (per stage)
    is subtracted (clamped at 0); ``refill`` None -> detected from the inference times."""
    stages = []
    for raw, cost in zip((obs_ns, inference_ns, step_ns), scaffold_ns, strict=True):
        stages.append(np.maximum(np.asarray(raw, np.float64) - float(cost), 0.0))
    obs, inf, step = stages
    tick = obs + inf + step
    starts = np.asarray(starts_ns, np.float64)
    period = np.diff(starts) if starts.size >= 2 else np.zeros(0)
    if refill is None:
        mask, source = detect_refills(inf), "detected"
    else:
        mask, source = np.asarray(refill, bool).reshape(-1), "deployer"
    budget = 1e9 / float(fps)
    return LatencyReport(float(fps), int(num_envs), obs, inf, step, tick, period, mask, source,
                         float(sum(scaffold_ns)), latency_findings(tick, inf, period, budget, mask))


# -- the driver ------------------------------------------------------------------------------------
def _scaffold_cost(n: int = 200) -> tuple[float, float, float]:
    """Median per-stage cost (ns) of the timing scaffold on a loop doing no work."""
    clock = time.perf_counter_ns
    rows = np.empty((n, 3), np.float64)
    nothing = (lambda x: x)
    for i in range(n):
        t0 = clock()
        nothing(None)
        t1 = clock()
        nothing(None)
        t2 = clock()
        nothing(None)
        t3 = clock()
        rows[i] = (t1 - t0, t2 - t1, t3 - t2)
    return tuple(float(v) for v in np.median(rows, axis=0))


def _make_env(task, policy, num_envs: int, seed: int):
    """(env, owned): ``task`` itself when it already is an environment (its cameras checked against
    a trained policy's), else a new VecEnv rendering the policy's cameras (:mod:`learn.seeing`)."""
    from learn.seeing import check_env_cameras, policy_env

    if hasattr(task, "step") and hasattr(task, "reset") and hasattr(task, "layout"):
        check_env_cameras(policy, task)
        return task, False
    return policy_env(policy, task, num_envs, seed=seed), True


def _make_deployer(policy, env, num_envs: int, seed: int):
    """A deployer of ``policy`` (an object with ``act`` is used as is). A training fps other than
    the environment's is allowed here: latency is measured at the environment's rate either way
    (the cadence mismatch itself is the debugger's P005)."""
    if hasattr(policy, "act"):
        return policy
    from learn.deploy import Deployer

    return Deployer(policy, env.layout, num_envs, seed, allow_fps_mismatch=True,
                    cameras=getattr(env, "cameras", ()))


def _act(deployer, obs, info):
    """One deploy call: with the rendered frames ``info["images"]`` when the environment has any."""
    images = info.get("images") if isinstance(info, dict) else None
    return deployer.act(obs) if images is None else deployer.act(obs, images)


def profile_rollout(policy, task, *, ticks: int = 200, num_envs: int = 1, seed: int = 0,
                    warmup: int = 3) -> LatencyReport:
    """Drive ``task`` (a VecEnv, or anything :class:`tasks.env.VecEnv` accepts) with ``policy`` (a
    :class:`learn.bundle.TrainedPolicy` or a checkpoint, deployed through
    :class:`learn.deploy.Deployer`, or any object with ``act(env_obs) -> action``) for ``ticks``
    control ticks and time each stage. ``warmup`` untimed ticks first absorb compilation (then the
    environment and the deployer restart). Budget = 1 / the environment's fps."""
    if ticks < 2:
        from caliper_jax.errors import CaliperError
        raise CaliperError(f"ticks must be >= 2, got {ticks}")
    if isinstance(policy, (str, Path)):
        from learn.debug import _load_checkpoint
        policy = _load_checkpoint(policy)
    env, owned = _make_env(task, policy, num_envs, seed)
    try:
        deployer = _make_deployer(policy, env, env.num_envs, seed)
        reset = getattr(deployer, "reset", None)
        fps = float(env.layout.fps)
        scaffold = _scaffold_cost()
        obs, info = env.reset(seed=seed)
        for _ in range(max(0, int(warmup))):
            obs, _, _, _, info = env.step(_act(deployer, np.asarray(obs, np.float32), info))
        if callable(reset):
            obs, info = env.reset(seed=seed)
            reset()
        clock = time.perf_counter_ns
        times = np.empty((ticks, 4), np.int64)
        refills, known = np.zeros(ticks, bool), hasattr(deployer, "last_refilled")
        done = np.zeros(env.num_envs, bool)
        for i in range(ticks):
            t0 = clock()
            if callable(reset) and done.any():      # episode bookkeeping + the host observation
                reset(done)
            x = np.ascontiguousarray(obs, np.float32)
            t1 = clock()
            action = _act(deployer, x, info)
            t2 = clock()
            obs, _, term, trunc, info = env.step(action)
            done = np.asarray(term, bool) | np.asarray(trunc, bool)
            t3 = clock()
            times[i] = (t0, t1 - t0, t2 - t1, t3 - t2)
            if known:
                refills[i] = bool(np.any(np.asarray(deployer.last_refilled)))
        return build_report(fps, env.num_envs, times[:, 1], times[:, 2], times[:, 3], times[:, 0],
                            refills if known else None, scaffold)
    finally:
        if owned:
            env.close()


__all__ = ["LatencyReport", "build_report", "detect_refills", "latency_findings", "percentiles",
           "profile_rollout"]

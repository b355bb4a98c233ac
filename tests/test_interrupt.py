"""Ctrl-C during the long commands: exit 130 within 2 s, one last line ``caliper: interrupted``,
no crash (no negative return code, no core dump) and no partial output (caliper_jax/cli/runtime.py).

Each run starts ``python -m caliper_jax.cli`` with arguments that keep it busy for minutes, waits
until its stage line shows on stderr (``CALIPER_PROGRESS=1``), then a little longer -- a different
delay each repetition, so the signal lands while loading, tracing, compiling (XLA) or running (XLA,
NumPy, the planner's Python loop) -- and sends SIGINT. The runs share one compilation cache, and
the cache is checked to be readable afterwards (an interrupt must not leave a truncated entry).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Arguments that run for minutes; ``out`` is a fresh folder that must be empty afterwards.
COMMANDS = {
    "control": lambda out: ["control", "pendulum2", "--goal", "1 0.5", "--ticks", "2000000",
                            "--plot", str(out / "q.png")],
    "plan": lambda out: ["plan", "collide_arm", "--goal", "1.57 0 0", "--sphere", "0.12,0,0.12,0.03",
                         "--max-iterations", "1000000"],           # the goal is walled off: no path
    "trajopt": lambda out: ["trajopt", "collide_arm", "--start", "0 0 0", "--goal", "1.5 0.5 0.5",
                            "--iterations", "200000", "--inits", "64", "--box", "0.5,0,0.5,0.1,0.1,0.1"],
    "record": lambda out: ["record", "pendulum2", "--goal", "1 0.5", "--ticks", "2000000",
                           "--out", str(out / "new" / "dataset")],
}
DELAYS = (1.0, 2.5, 0.0, 1.5, 0.5, 3.0, 2.0)   # seconds after the stage line shows
EXIT_WITHIN_S = 2.0
START_TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("jax_cache")


def _env(cache: Path) -> dict:
    env = dict(os.environ)
    env.update(CALIPER_PROGRESS="1", CALIPER_CACHE_DIR=str(cache), PYTHONUNBUFFERED="1",
               CALIPER_MAX_STEPS=str(10**10), CALIPER_MAX_MEMORY_MB=str(16384))   # long on purpose
    env.pop("CALIPER_NO_COMPILE_CACHE", None)
    env.pop("CALIPER_DEBUG", None)
    return env


def interrupt_once(verb: str, out: Path, cache: Path, delay: float) -> float:
    """Run ``verb``, SIGINT it ``delay`` s after its stage line shows; check the contract; return
    the seconds from the signal to the exit."""
    out.mkdir(parents=True)
    cmd = [sys.executable, "-m", "caliper_jax.cli", *COMMANDS[verb](out)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(cache), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = bytearray()
    seen = threading.Event()

    def read():
        while chunk := proc.stderr.read1(4096):
            err.extend(chunk)
            if f"caliper {verb}".encode() in err:
                seen.set()
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        start = time.monotonic()
        while not seen.wait(0.05) and proc.poll() is None and time.monotonic() - start < START_TIMEOUT_S:
            pass
        assert seen.is_set() and proc.poll() is None, f"{verb}: no stage line: {bytes(err)[-800:]!r}"
        time.sleep(delay)
        assert proc.poll() is None, f"{verb} finished before the signal: {bytes(err)[-500:]!r}"
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=EXIT_WITHIN_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{verb}: still running {EXIT_WITHIN_S} s after SIGINT (delay {delay} s)")
        latency = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=5)
    proc.stdout.close()
    proc.stderr.close()
    text = err.decode(errors="replace")
    assert code == 130, f"{verb}: exit {code} (delay {delay} s): {text[-800:]!r}"
    lines = text.rstrip("\n").split("\n")
    assert lines[-1] == "caliper: interrupted", f"{verb}: last line {lines[-1]!r}"
    assert text.count("caliper: interrupted") == 1
    assert "Traceback" not in text and "Segmentation" not in text and "core dumped" not in text
    left = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    assert left == [], f"{verb}: partial output left behind: {left}"
    assert not list(ROOT.glob("core*")), "a core file appeared"
    return latency


def _cache_still_readable(cache: Path) -> None:
    """A command after the interrupts reads every entry it needs without a warning."""
    proc = subprocess.run([sys.executable, "-m", "caliper_jax.cli", "check", "collide_arm"], cwd=ROOT,
                          env=_env(cache), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr.lower(), proc.stderr


def _run(verb, reps, tmp_path, cache):
    latencies = [interrupt_once(verb, tmp_path / f"run{i}", cache, DELAYS[i % len(DELAYS)])
                 for i in range(reps)]
    print(f"{verb}: SIGINT -> exit in {', '.join(f'{t * 1000:.0f}' for t in latencies)} ms")
    return latencies


@pytest.mark.parametrize("verb", sorted(COMMANDS))
def test_interrupt_exits_130_quickly_and_cleanly(verb, tmp_path, cache_dir):
    _run(verb, 2, tmp_path, cache_dir)


def test_compilation_cache_survives_the_interrupts(cache_dir, tmp_path):
    if not any(cache_dir.iterdir()):          # run alone: interrupt something first
        interrupt_once("control", tmp_path / "run", cache_dir, 2.0)
    assert any(cache_dir.iterdir()), "the interrupted runs wrote no cache entry"
    _cache_still_readable(cache_dir)


@pytest.mark.slow
@pytest.mark.parametrize("verb", sorted(COMMANDS))
def test_interrupt_twenty_times(verb, tmp_path, cache_dir):
    latencies = _run(verb, 20, tmp_path, cache_dir)
    assert max(latencies) < EXIT_WITHIN_S
    _cache_still_readable(cache_dir)

"""learn.distributed and `caliper learn train --distributed`: two local processes under jax.distributed
on the CPU backend (coordinator on 127.0.0.1) train a small BC-MLP with the loss curve of the
one-process run to float32 tolerance, write each checkpoint once, and the 2-process checkpoint resumes
in one process as the one-process checkpoint does; hostile input (a coordinator that never answers, a
process id out of range, a missing address) is one line, never a hang."""
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from caliper_jax.dataset.synthetic import write_synthetic
from caliper_jax.errors import CaliperError
from learn.distributed import resolve

ROOT = Path(__file__).resolve().parent.parent
TRAIN = ["--steps", "20", "--batch-size", "16", "--seed", "1",
         "--train-config", '{"eval_every": 10, "log_every": 1, "warmup": 5}', "--json"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _caliper(*argv):
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
    env.update(PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    return subprocess.Popen([sys.executable, "-m", "caliper_jax.cli", *map(str, argv)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _finish(procs, timeout=400):
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            outs.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    return outs


def _report(result):
    code, out, err = result
    assert code == 0, err[-3000:]
    return json.loads(out)


def test_resolve_checks_flags_and_environment(monkeypatch):
    for k in ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(CaliperError, match="--distributed needs --coordinator"):
        resolve(None, 2, 0)
    with pytest.raises(CaliperError, match="expected HOST:PORT"):
        resolve("localhost", 2, 0)
    with pytest.raises(CaliperError, match=r"--process-id 2: must be in 0..1 for --num-processes 2"):
        resolve("127.0.0.1:1234", 2, 2)
    with pytest.raises(CaliperError, match="--num-processes.*JAX_NUM_PROCESSES"):
        resolve("127.0.0.1:1234", None, 0)
    monkeypatch.setenv("JAX_COORDINATOR_ADDRESS", "10.0.0.1:999")
    monkeypatch.setenv("JAX_NUM_PROCESSES", "4")
    monkeypatch.setenv("JAX_PROCESS_ID", "3")
    assert resolve() == ("10.0.0.1:999", 4, 3)
    assert resolve(process_id=1) == ("10.0.0.1:999", 4, 1)


def test_a_coordinator_that_never_answers_times_out_in_one_line(tmp_path):
    """Process 1 of 2 with nobody at the coordinator's port: exit 2 after the timeout, one line."""
    ds = tmp_path / "ds"
    write_synthetic(ds, episodes=2, length=20)
    t0 = time.perf_counter()
    (code, out, err), = _finish([_caliper("learn", "train", ds, "--out", tmp_path / "run", "--distributed",
                                          "--coordinator", f"127.0.0.1:{_free_port()}", "--num-processes", 2,
                                          "--process-id", 1, "--coordinator-timeout", 3)], timeout=120)
    lines = [ln for ln in err.strip().splitlines() if ln.startswith("caliper:")]
    assert code == 2, err[-2000:]
    assert lines and "no answer within 3 s from the coordinator" in lines[-1], err[-2000:]
    assert "Traceback" not in err
    assert time.perf_counter() - t0 < 100


@pytest.mark.slow
def test_two_processes_train_like_one_and_resume_in_one(tmp_path):
    ds = tmp_path / "ds"
    write_synthetic(ds, episodes=4, length=40)
    port = _free_port()
    dist = ["--distributed", "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2"]
    two, one = tmp_path / "two", tmp_path / "one"
    r0, r1, single = _finish([_caliper("learn", "train", ds, "--out", two, *TRAIN, *dist, "--process-id", 0),
                              _caliper("learn", "train", ds, "--out", two, *TRAIN, *dist, "--process-id", 1),
                              _caliper("learn", "train", ds, "--out", one, *TRAIN)])
    r0, r1, single = _report(r0), _report(r1), _report(single)
    assert (r0["devices"], r1["devices"], single["devices"]) == (2, 2, 1)
    assert r0["process"] == {"id": 0, "count": 2} and r1["process"] == {"id": 1, "count": 2}
    loss = [h["loss"] for h in single["history"]]
    assert len(loss) == 20
    for r in (r0, r1):
        np.testing.assert_allclose([h["loss"] for h in r["history"]], loss, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(r["final_val_loss"], single["final_val_loss"], rtol=1e-4)
    # written once: the two step folders and nothing else (no second writer's temporary folders)
    assert sorted(p.name for p in two.iterdir()) == ["step_00000010", "step_00000020"]
    assert r0["checkpoint"] == r1["checkpoint"] == str(two / "step_00000020")
    # the 2-process checkpoint resumes in one process exactly as the 1-process one does
    more = [a if a != "20" else "30" for a in TRAIN]
    a, b = _finish([_caliper("learn", "train", ds, "--out", two, *more, "--resume"),
                    _caliper("learn", "train", ds, "--out", one, *more, "--resume")])
    a, b = _report(a), _report(b)
    assert [h["step"] for h in a["history"]] == list(range(21, 31))
    np.testing.assert_allclose([h["loss"] for h in a["history"]], [h["loss"] for h in b["history"]],
                               rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_mismatched_process_counts_end_both_processes(tmp_path):
    """Process 0 says 2 processes, process 1 says 3: process 1 stops with one line naming the count,
    and process 0 (left waiting in its first collective) ends too, never hangs."""
    ds = tmp_path / "ds"
    write_synthetic(ds, episodes=2, length=20)
    args = ["learn", "train", ds, "--out", tmp_path / "run", "--steps", 4, "--batch-size", 16,
            "--distributed", "--coordinator", f"127.0.0.1:{_free_port()}", "--coordinator-timeout", 15]
    p0 = _caliper(*args, "--num-processes", 2, "--process-id", 0)
    p1 = _caliper(*args, "--num-processes", 3, "--process-id", 1)
    (c0, _, _), (c1, _, err1) = _finish([p0, p1], timeout=200)
    assert c1 == 2 and "caliper: error: --num-processes 3: the run at" in err1 and "has 2 processes" in err1
    assert c0 != 0

"""Training over several processes / hosts with ``jax.distributed`` (``caliper learn train --distributed``).

:func:`initialize` joins the run: coordinator address, process count and process id from the
arguments or the environment variables ``JAX_COORDINATOR_ADDRESS``, ``JAX_NUM_PROCESSES`` and
``JAX_PROCESS_ID``; on the CPU backend cross-process collectives go over gloo. After it,
``jax.devices()`` is the global device list and :func:`learn.train.fit` runs its data-parallel step
over the global 1-D mesh unchanged (the batch split over every process's devices, gradients
averaged across them), so the loss curve is the single-process one to float rounding.
Checkpoints are written once, by process 0, from host copies of the replicated state
(:mod:`learn.checkpoint`); they hold no device layout, so a run resumes under any process count.

Hostile input, one line each, never a hang: a missing or malformed coordinator address, a
process id outside ``0..count-1``, a coordinator that does not answer within ``timeout_s``
seconds (processes 1.. poll its port first: the runtime aborts the process when it cannot
register), and a run whose processes disagree on the count (the joined runtime reports another).
Process 0 hosts the coordinator; when the others never join, the runtime ends it after
``timeout_s`` with its own fatal message (not catchable from Python).
"""
from __future__ import annotations

import os
import socket
import time

from caliper_jax.errors import CaliperError

ENV = {"coordinator": "JAX_COORDINATOR_ADDRESS", "num_processes": "JAX_NUM_PROCESSES",
       "process_id": "JAX_PROCESS_ID"}
DEFAULT_TIMEOUT_S = 60


def _int_from(value, flag: str, env: str) -> int:
    raw = os.environ.get(env) if value is None else value
    if raw is None:
        raise CaliperError(f"--distributed needs {flag} (or the environment variable {env})")
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise CaliperError(f"{flag} / {env}: expected an integer, got {raw!r}") from None


def resolve(coordinator=None, num_processes=None, process_id=None) -> tuple[str, int, int]:
    """(coordinator "HOST:PORT", process count, process id), checked, from arguments or environment."""
    addr = coordinator if coordinator is not None else os.environ.get(ENV["coordinator"])
    if not addr:
        raise CaliperError(f"--distributed needs --coordinator HOST:PORT (or {ENV['coordinator']})")
    host, sep, port = str(addr).rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise CaliperError(f"--coordinator {addr!r}: expected HOST:PORT (port 1..65535)")
    n = _int_from(num_processes, "--num-processes", ENV["num_processes"])
    i = _int_from(process_id, "--process-id", ENV["process_id"])
    if n < 1:
        raise CaliperError(f"--num-processes {n}: must be >= 1")
    if not 0 <= i < n:
        raise CaliperError(f"--process-id {i}: must be in 0..{n - 1} for --num-processes {n}")
    return str(addr), n, i


def _wait_for_coordinator(addr: str, timeout_s: float) -> None:
    """Poll the coordinator's port until it accepts a TCP connection; one line after ``timeout_s``.
    (The runtime itself aborts the whole process -- a C++ fatal error, no exception -- when it
    cannot register, so a process other than 0 checks before it joins.)"""
    host, _, port = addr.rpartition(":")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=max(0.1, min(1.0, timeout_s))):
                return
        except OSError:
            if time.monotonic() >= deadline:
                raise CaliperError(f"--coordinator {addr}: no answer within {timeout_s:g} s from the "
                                   f"coordinator (process 0 must be running and reachable there)") from None
            time.sleep(0.2)


def initialize(coordinator=None, num_processes=None, process_id=None, *,
               timeout_s: int = DEFAULT_TIMEOUT_S) -> tuple[int, int]:
    """Join the jax.distributed run (module doc) -> (process id, process count). Must run before
    anything touches a JAX device in this process."""
    import jax

    addr, n, i = resolve(coordinator, num_processes, process_id)
    if int(timeout_s) < 1:
        raise CaliperError(f"--coordinator-timeout {timeout_s}: must be >= 1 s")
    if i != 0:
        _wait_for_coordinator(addr, int(timeout_s))
    try:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(coordinator_address=addr, num_processes=n, process_id=i,
                                   initialization_timeout=int(timeout_s))
    except Exception as exc:  # noqa: BLE001 -- the runtime raises XlaRuntimeError/RuntimeError/ValueError
        text = " ".join(str(exc).split())
        if "DEADLINE_EXCEEDED" in text or "timed out" in text.lower():
            raise CaliperError(f"--coordinator {addr}: no answer within {int(timeout_s)} s from the "
                               f"coordinator (process 0 must be running and reachable there)") from None
        raise CaliperError(f"--distributed: joining the run at {addr} failed: {text[:300]}") from None
    if jax.process_count() != n:
        raise CaliperError(f"--num-processes {n}: the run at {addr} has {jax.process_count()} processes "
                           f"(every process must be given the same count)")
    return jax.process_index(), jax.process_count()


def barrier(name: str) -> None:
    """Wait until every process of the run reaches ``name`` (a no-op in one process)."""
    import jax

    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


__all__ = ["DEFAULT_TIMEOUT_S", "ENV", "barrier", "initialize", "resolve"]

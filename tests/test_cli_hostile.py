"""The hostile-input corpus (tests/hostile/cases.py), each case a ``caliper`` process of its own.

Each case is a child forked from a fork server (``hostile/zygote.py``) that imported jax, mujoco
and the CLI once -- start-up is not what the corpus tests, and it was half of each case's time --
so each still runs in its own process (own session, cwd, environment, memory limit, exit code,
signals); a case whose environment sets variables read at import (anything but ``CALIPER_*``)
gets a fresh interpreter instead.

Every case runs under a memory limit (``RLIMIT_DATA`` of 2 GiB -- JAX reserves far more *virtual*
address space than it uses, so ``RLIMIT_AS`` would break a healthy run, while ``RLIMIT_DATA``
counts the heap and anonymous mappings that a runaway allocation grows; the resident set is
polled as well and the process killed above 2 GiB) and a 60 s wall-clock limit. Universal rules:
never exit 3, never killed, never a traceback, never ``nan`` in stdout with exit 0, stderr exactly
one line on an error; then the case's own outcome class (see cases.py).

The default run executes the ``quick`` subset (about 50 cases: 33 of the first corpus, 17 of round
two, ``hostile/cases_verbs.py``, one per kind of failure of issue 35); ``pytest -m slow
tests/test_cli_hostile.py`` runs the whole corpus (quick cases included). Cases run two at a time
(subprocesses), in one batch per session: the first test of this module starts every selected case.
"""
from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile.cases import CASES, QUICK, SETUPS, Case, by_id  # noqa: E402

MEMORY_LIMIT = 2 * 2**30          # bytes, RLIMIT_DATA and the polled RSS
TIME_LIMIT = 60.0                 # seconds per case
WORKERS = 2
ROOT = Path(__file__).resolve().parent.parent
NAN = re.compile(r"(?<![\w/.])nan(?![\w/])|[:\[,]\s*-?NaN\b")


@dataclass
class Outcome:
    rc: int | None
    stdout: str
    stderr: str
    seconds: float
    killed: str | None = None     # why the harness killed it (time / memory)
    peak_rss: int = 0
    setup_error: str | None = None


# The child sets its own RLIMIT_DATA, then runs ``python -m caliper_jax.cli`` (the real entry
# point): no preexec_fn, so the (multithreaded, JAX-importing) test process never forks unsafely.
BOOT = ("import resource, runpy, sys; limit = int(sys.argv.pop(1)); "
        "resource.setrlimit(resource.RLIMIT_DATA, (limit, limit)); "
        "runpy.run_module('caliper_jax.cli', run_name='__main__', alter_sys=True)")
ZYGOTE = Path(__file__).resolve().parent / "hostile" / "zygote.py"


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class _Zygote:
    """A ``hostile/zygote.py`` fork server (the CLI imported once): each case is a fresh child
    process of it, with the case's cwd, environment, files and memory limit."""

    def __init__(self):
        self.log = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen([sys.executable, str(ZYGOTE)], cwd=ROOT, text=True,
                                     env={**os.environ, "PYTHONPATH": str(ROOT)}, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log)

    def _reply(self, timeout: float | None) -> dict | None:
        if timeout is not None and not select.select([self.proc.stdout], [], [], timeout)[0]:
            return None
        line = self.proc.stdout.readline()
        if not line:
            self.log.seek(0)
            raise RuntimeError(f"the hostile zygote died (exit {self.proc.wait()}):\n"
                               f"{self.log.read()[-3000:]}")
        return json.loads(line)

    def start(self, argv, cwd: Path, env: dict, out: Path, err: Path) -> int:
        req = {"argv": argv, "cwd": str(cwd), "env": env, "stdout": str(out), "stderr": str(err),
               "limit": MEMORY_LIMIT}
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        return self._reply(None)["pid"]

    def wait(self, timeout: float | None) -> int | None:
        """The child's exit code (negative: its signal), None if still running after ``timeout``."""
        reply = self._reply(timeout)
        return None if reply is None else reply["rc"]

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


_local = threading.local()
_zygotes: list[_Zygote] = []


def _zygote() -> _Zygote:
    """This thread's fork server (a case runs on the thread that asked for it)."""
    z = getattr(_local, "zygote", None)
    if z is None or z.proc.stdin.closed:
        z = _local.zygote = _Zygote()
        with _lock:
            _zygotes.append(z)
    return z


def run_case(case: Case, fresh: bool = False) -> Outcome:
    """Run one case; ``fresh``: in a new interpreter rather than a child of the fork server."""
    tmp = Path(tempfile.mkdtemp(prefix="caliper-hostile-"))
    try:
        return _run_in(case, tmp, fresh or _needs_fresh_process(case))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _needs_fresh_process(case: Case) -> bool:
    """Variables read at import (JAX_*, XLA_*, ...) need a new interpreter; caliper reads its own
    CALIPER_* limits when a command runs."""
    return any(not k.startswith("CALIPER_") for k in case.env)


def _run_in(case: Case, tmp: Path, fresh: bool) -> Outcome:
    if case.setup:
        try:
            SETUPS[case.setup](tmp)
        except Exception as exc:  # a broken set-up is reported as such, not as a caliper failure
            return Outcome(None, "", "", 0.0, setup_error=f"{type(exc).__name__}: {exc}")
    argv = [a.replace("{tmp}", str(tmp)) for a in case.argv]
    env = {**os.environ, **case.env, "PYTHONPATH": str(ROOT)}
    env.pop("CALIPER_DEBUG", None)
    io_dir = Path(tempfile.mkdtemp(prefix="caliper-hostile-io-"))    # outside {tmp}: not the case's files
    out_path, err_path = io_dir / "stdout", io_dir / "stderr"
    start = time.monotonic()
    if fresh:
        with open(out_path, "w") as out_f, open(err_path, "w") as err_f:
            proc = subprocess.Popen([sys.executable, "-c", BOOT, str(MEMORY_LIMIT), *argv], cwd=tmp, env=env,
                                    stdin=subprocess.DEVNULL, stdout=out_f, stderr=err_f,
                                    start_new_session=True)                      # own process group
        pid = proc.pid

        def wait(timeout):
            try:
                return proc.wait(timeout)
            except subprocess.TimeoutExpired:
                return None
    else:
        zygote = _zygote()
        pid = zygote.start(argv, tmp, env, out_path, err_path)                   # own session and group
        wait = zygote.wait
    killed, peak, rc = None, 0, None
    try:
        while True:
            rc = wait(0.25)
            if rc is not None:
                break
            peak = max(peak, _rss(pid))
            elapsed = time.monotonic() - start
            if peak > MEMORY_LIMIT:
                killed = f"resident set {peak / 2**30:.2f} GiB > {MEMORY_LIMIT / 2**30:g} GiB"
            elif elapsed > TIME_LIMIT:
                killed = f"ran past {TIME_LIMIT:g} s"
            if killed:
                os.killpg(pid, signal.SIGKILL)
                rc = wait(None)
                break
        out = out_path.read_text(errors="replace")
        err = err_path.read_text(errors="replace")
    finally:
        shutil.rmtree(io_dir, ignore_errors=True)
    out, err = out.replace(str(tmp), "{tmp}"), err.replace(str(tmp), "{tmp}")   # paths are not output
    return Outcome(rc, out, err, time.monotonic() - start, killed, peak)


def check_outcome(case: Case, o: Outcome) -> None:
    """The universal rules, then the case's outcome class."""
    assert o.setup_error is None, f"set-up failed: {o.setup_error}"
    where = f"caliper {' '.join(case.argv)}\n--- exit {o.rc}\n--- stdout:\n{o.stdout[-2000:]}\n" \
            f"--- stderr:\n{o.stderr[-3000:]}"
    assert o.killed is None, f"killed: {o.killed}\n{where}"
    assert o.rc is not None and o.rc >= 0, f"died of a signal\n{where}"
    assert o.rc != 3, f"internal error\n{where}"
    assert "Traceback" not in o.stderr and "Traceback" not in o.stdout, f"traceback\n{where}"
    if o.rc == 0:
        found = NAN.search(o.stdout)
        assert found is None, f"non-finite number {found.group(0)!r} printed with exit 0\n{where}"
    err_lines = o.stderr.strip().splitlines()
    if o.rc == 2:
        assert len(err_lines) == 1 and err_lines[0].startswith("caliper: error: "), \
            f"an error must be one stderr line 'caliper: error: ...'\n{where}"
    if case.expect == "error":
        assert o.rc == 2, f"expected exit 2 (bad input)\n{where}"
        if case.match:
            assert case.match in o.stderr, f"stderr should name {case.match!r}\n{where}"
    elif case.expect == "ok":
        assert o.rc == 0, f"expected exit 0\n{where}"
        if case.match:
            assert case.match in o.stdout, f"stdout should contain {case.match!r}\n{where}"
    elif case.expect == "finding":
        assert o.rc in (0, 1), f"expected exit 0 or 1 with a finding\n{where}"
        if case.match:
            assert case.match in o.stdout, f"stdout should report {case.match!r}\n{where}"
    else:
        assert o.rc in (0, 1, 2), f"unexpected exit code\n{where}"
    if case.check is not None and o.rc in (0, 1):
        case.check(o.stdout)


# ---- one batch per session: every selected case, two at a time ----------------------------------

_results: dict[str, Outcome] = {}
_lock = threading.Lock()


@pytest.fixture(scope="module")
def outcomes(request):
    """Run every case selected in this session (two at a time, children of two fork servers), once."""
    wanted = []
    for item in request.session.items:
        spec = getattr(item, "callspec", None)
        if item.module is request.module and spec is not None and "case_id" in spec.params:
            wanted.append(spec.params["case_id"])
    cases = by_id()
    todo = [cases[i] for i in dict.fromkeys(wanted) if i not in _results]
    try:
        with ThreadPoolExecutor(WORKERS) as pool:
            for case, outcome in zip(todo, pool.map(run_case, todo), strict=True):
                with _lock:
                    _results[case.id] = outcome
        yield _results
    finally:
        while _zygotes:
            _zygotes.pop().close()


def _outcome(outcomes, case_id) -> Outcome:
    if case_id not in outcomes:        # selected after the batch (e.g. a rerun): run it now
        outcomes[case_id] = run_case(by_id()[case_id])
    return outcomes[case_id]


def test_corpus_is_large_and_covers_every_verb():
    cases = by_id()
    assert len(cases) >= 200
    verbs = {c.argv[0] if c.argv[0] != "data" else f"data {c.argv[1]}" for c in CASES if c.argv}
    for verb in ("info", "demo", "load", "fk", "sim", "ik", "analyze", "calibrate", "move", "report", "check",
                 "plan", "trajopt", "control", "record", "mjcf", "contact-sim", "contact-lint", "doctor",
                 "data info", "data doctor", "data delete", "data split", "data merge", "data tag",
                 "data recover",
                 # round two (issue 35)
                 "task", "learn", "graph", "identify", "render", "terrain", "studio", "data coverage"):
        assert verb in verbs, verb
    assert 25 <= len(QUICK) <= 55
    assert {c.expect for c in QUICK} >= {"error", "ok", "finding"}


@pytest.mark.parametrize("case_id", [c.id for c in QUICK])
def test_hostile_quick(outcomes, case_id):
    check_outcome(by_id()[case_id], _outcome(outcomes, case_id))


@pytest.mark.slow
@pytest.mark.parametrize("case_id", [c.id for c in CASES])
def test_hostile_corpus(outcomes, case_id):
    check_outcome(by_id()[case_id], _outcome(outcomes, case_id))

"""The CLI's runtime (caliper_jax/cli/__init__.py, caliper_jax/cli/runtime.py): the one error path,
usage errors on one line, did-you-mean for commands and robots, --version, warnings on one line,
partial outputs, the persistent compilation cache and progress. In-process through ``cli.main``
where possible; a subprocess where the behaviour is process-wide (signals, the cache)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from caliper_jax import __version__, cli, progress
from caliper_jax.cli import runtime

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _plain_env(monkeypatch):
    for name in (progress.ENV, "CALIPER_DEBUG", runtime.NO_CACHE_ENV):
        monkeypatch.delenv(name, raising=False)


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1, err
    assert lines[0].startswith("caliper: error: "), err
    return lines[0]


# ---- usage errors, did-you-mean, --version -------------------------------------------------------

def test_version(capsys):
    code, out, err = run(capsys, "--version")
    assert code == 0 and out.strip() == f"caliper {__version__}" and err == ""


def test_help_exits_zero(capsys):
    code, out, _ = run(capsys, "control", "--help")
    assert code == 0 and "--goal" in out


@pytest.mark.parametrize("argv, expected", [
    ((), "the following arguments are required: COMMAND (see caliper --help)"),
    (("control", "pendulum2"), "the following arguments are required: --goal (see caliper control --help)"),
    (("control", "pendulum2", "--goal", "1 0", "--ticks", "abc"),
     "argument --ticks: invalid int value: 'abc' (see caliper control --help)"),
    (("fk", "pendulum2", "--bogus"), "unrecognized arguments: --bogus (see caliper fk --help)"),
    (("data", "info", "x", "--bogus"), "unrecognized arguments: --bogus (see caliper data info --help)"),
    (("contact-sim", "pendulum2", "--actuators", "motr"),
     "argument --actuators: invalid choice 'motr'; did you mean motor? (see caliper contact-sim --help)"),
    (("fkk", "pendulum2"), "unknown command 'fkk'; did you mean fk? (see caliper --help)"),
    (("data", "doctr", "x"), "unknown command 'doctr'; did you mean doctor? (see caliper data --help)"),
    (("frobnicate",), "unknown command 'frobnicate' (see caliper --help)"),
])
def test_usage_errors_are_one_line(capsys, argv, expected):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert one_error_line(err) == f"caliper: error: {expected}"


def test_usage_error_under_json_is_a_json_object(capsys):
    code, out, err = run(capsys, "control", "pendulum2", "--goal", "1 0", "--ticks", "abc", "--json")
    assert code == 2
    assert json.loads(out) == {"error": {"code": "bad_input", "message": one_error_line(err)[16:]}}


def test_commands_are_case_insensitive(capsys):
    code, out, err = run(capsys, "FK", "pendulum2", "--json")
    assert code == 0 and json.loads(out)["robot"] == "pendulum2", err
    code, out, _ = run(capsys, "Data", "INFO", "/nonexistent/dataset")
    assert code == 2                      # reached the data info handler: the dataset is missing


def test_robot_names_are_case_insensitive_with_suggestions(capsys):
    code, out, err = run(capsys, "fk", "Collide_Arm", "--json")
    assert code == 0 and json.loads(out)["robot"] == "collide_arm", err
    code, out, err = run(capsys, "fk", "pendulm2")
    line = one_error_line(err)
    assert code == 2 and "unknown robot 'pendulm2'" in line and "did you mean pendulum2" in line
    code, out, err = run(capsys, "fk", "pendulm2", "--json")
    assert code == 2 and json.loads(out)["error"]["code"] == "not_found"


def test_registry_resolver():
    import robots
    from caliper_jax.errors import NotFoundError

    assert robots.resolve("PENDULUM2") == robots.resolve("pendulum2")
    assert robots.canonical("Solo12") == "solo12" and robots.is_floating("SOLO12")
    with pytest.raises(NotFoundError, match="did you mean toy"):
        robots.resolve("tyo")


# ---- the one error path ----------------------------------------------------------------------------

def _handler(monkeypatch, body):
    """Make ``caliper info`` run ``body(args)`` instead (the parser binds cmd_info at build time)."""
    from caliper_jax.cli import core

    monkeypatch.setattr(core, "cmd_info", body)


@pytest.mark.parametrize("exc, code, status", [
    (ValueError("bad\nvalue"), "bad_input", 2),
    (FileNotFoundError(2, "No such file or directory", "/x/y.urdf"), "not_found", 2),
    (PermissionError(13, "Permission denied", "/x"), "io_error", 2),
    (KeyError("no frame 'tool'"), "bad_input", 2),
    (RuntimeError("boom"), "internal", 3),
])
def test_every_failure_is_one_line_and_a_json_object(capsys, monkeypatch, exc, code, status):
    def body(args):
        raise exc

    _handler(monkeypatch, body)
    got, out, err = run(capsys, "info")
    assert got == status and out == ""
    line = err.strip("\n")
    head = "caliper: error: " if status == 2 else "caliper: internal error: "
    assert "\n" not in line and line.startswith(head)
    got, out, err = run(capsys, "info", "--json")
    obj = json.loads(out)
    assert got == status and obj["error"]["code"] == code and "\n" not in obj["error"]["message"]
    if isinstance(exc, FileNotFoundError):
        assert obj["error"]["message"] == "/x/y.urdf: No such file or directory"


def test_keyboard_interrupt_in_process_removes_partial_output(capsys, monkeypatch, tmp_path):
    target = tmp_path / "new" / "out.bin"

    def body(args):
        with runtime.partial_output(target):
            target.parent.mkdir(parents=True)
            target.write_bytes(b"half")
            raise KeyboardInterrupt

    _handler(monkeypatch, body)
    code, out, err = run(capsys, "info", "--json")
    assert code == 130 and err.strip() == "caliper: interrupted"
    assert json.loads(out)["error"]["code"] == "interrupted"
    assert not (tmp_path / "new").exists()


def test_in_process_main_leaves_process_state_alone(capsys):
    before = signal.getsignal(signal.SIGINT), signal.pthread_sigmask(signal.SIG_BLOCK, [])
    shown = warnings.showwarning
    assert run(capsys, "fk", "pendulum2")[0] == 0
    assert (signal.getsignal(signal.SIGINT), signal.pthread_sigmask(signal.SIG_BLOCK, [])) == before
    assert warnings.showwarning is shown


def test_warnings_are_one_line(capsys, monkeypatch):
    def body(args):
        warnings.warn("XML Error: something odd\n  <geom type='mesh'/>\nline 12", UserWarning, stacklevel=1)
        print("report")
        return 0

    _handler(monkeypatch, body)
    code, out, err = run(capsys, "info")
    assert code == 0 and out == "report\n"
    assert err == "caliper: warning: XML Error: something odd <geom type='mesh'/> line 12 (UserWarning)\n"


# ---- partial outputs -----------------------------------------------------------------------------

def test_partial_output_keeps_what_existed(tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep").write_text("x")
    empty = tmp_path / "empty"
    empty.mkdir()
    called = []
    with pytest.raises(KeyboardInterrupt):
        with runtime.partial_output(full, cleanup=lambda: called.append(1)), runtime.partial_output(empty):
            (full / "new").write_text("y")
            (empty / "new").write_text("y")
            raise KeyboardInterrupt
    assert called == [1] and (full / "keep").exists() and list(empty.iterdir()) == []
    with runtime.partial_output(tmp_path / "done.txt") as path:      # a finished output stays
        path.write_text("ok")
    assert (tmp_path / "done.txt").read_text() == "ok"
    assert runtime._outputs == {}


INTERRUPT_DURING_WRITE = textwrap.dedent("""
    import os, signal, sys, time
    from pathlib import Path
    from caliper_jax.cli import runtime
    runtime.install_interrupts()
    runtime.set_json(True)
    out, write_s = Path(sys.argv[1]), float(sys.argv[2])
    try:                                                # as the CLI's entry point does
        with runtime.partial_output(out):
            with runtime.writing():
                out.mkdir()
                os.kill(os.getpid(), signal.SIGINT)      # arrives in the middle of the write
                t0 = time.monotonic()
                while time.monotonic() - t0 < write_s:   # the writer keeps going after the grace
                    (out / f"f{int((time.monotonic() - t0) * 100)}").write_text("x")
                    time.sleep(0.01)
                print("write finished", flush=True)     # still inside the write
            time.sleep(30)                              # the watcher ends the process before this
    except OSError as exc:                              # the output vanished under the writer
        sys.exit(runtime.fail("io", str(exc), want_json=True))
    print("not interrupted", flush=True)
""")


@pytest.mark.parametrize("write_s", [0.3, 1.8])
def test_interrupt_waits_for_a_write_then_removes_the_output(tmp_path, write_s):
    """A short write finishes, then the output is removed; a write longer than WRITE_GRACE_S is
    cut short (the exit stays within 2 s) and the output is still removed."""
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", INTERRUPT_DURING_WRITE, str(out), str(write_s)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.splitlines()[-1] == "caliper: interrupted"
    assert ("write finished" in proc.stdout) == (write_s < runtime.WRITE_GRACE_S)
    assert json.loads(proc.stdout.splitlines()[-1])["error"]["code"] == "interrupted"   # --json
    assert not out.exists()


# ---- the persistent compilation cache -------------------------------------------------------------

def test_compile_cache_location(tmp_path):
    assert runtime.compile_cache_dir({}) == Path.home() / ".cache" / "caliper_jax" / "jax"
    assert runtime.compile_cache_dir({"XDG_CACHE_HOME": "/xdg"}) == Path("/xdg/caliper_jax/jax")
    assert runtime.compile_cache_dir({"CALIPER_CACHE_DIR": "/c", "XDG_CACHE_HOME": "/xdg"}) == Path("/c")
    assert runtime.compile_cache_dir({"CALIPER_CACHE_DIR": "/c", "CALIPER_NO_COMPILE_CACHE": "1"}) is None
    assert runtime.compile_cache_dir({"CALIPER_NO_COMPILE_CACHE": "0", "XDG_CACHE_HOME": "/x"}) == \
        Path("/x/caliper_jax/jax")
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    assert runtime.enable_compile_cache(blocked / "jax") is None      # unusable: no cache, no error


ATOMIC_CACHE_WRITES = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    from caliper_jax.cli import runtime
    folder = Path(sys.argv[1])
    assert runtime.enable_compile_cache(folder) == folder
    from jax._src import lru_cache
    writes = []
    real_replace = os.replace
    os.replace = lambda a, b: (writes.append((os.path.basename(a), os.path.basename(b))), real_replace(a, b))
    lru_cache.LRUCache(str(folder), max_size=-1).put("k1", b"x" * 1000)
    os.replace = real_replace
    print(json.dumps({"renames": writes, "entries": sorted(p.name for p in folder.iterdir())}))
""")


def test_cache_entries_are_written_atomically(tmp_path):
    """A process killed mid-write must not leave a truncated entry (jax never rewrites a key)."""
    proc = subprocess.run([sys.executable, "-c", ATOMIC_CACHE_WRITES, str(tmp_path / "c")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    [(tmp, final)] = got["renames"]                     # written beside, then renamed into place
    assert tmp.startswith(".k1.") and tmp.endswith(runtime.TMP_SUFFIX) and final == "k1-cache"
    assert got["entries"] == ["k1-cache"]


def _caliper(*argv, env=None):
    return subprocess.run([sys.executable, "-m", "caliper_jax.cli", *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={**os.environ, **(env or {})})


def test_compile_cache_on_by_default_with_opt_outs(tmp_path):
    cache = tmp_path / "cache"
    proc = _caliper("fk", "pendulum2", env={runtime.CACHE_ENV: str(cache)})
    assert proc.returncode == 0, proc.stderr
    entries = sorted(p.name for p in cache.iterdir())
    assert entries, "no compiled program was cached"
    proc = _caliper("fk", "pendulum2", env={runtime.CACHE_ENV: str(cache)})    # warm: reads, adds nothing
    assert proc.returncode == 0 and proc.stderr == "" and sorted(p.name for p in cache.iterdir()) == entries
    off = tmp_path / "off"
    env = {runtime.CACHE_ENV: str(off)}
    assert _caliper("--no-compile-cache", "fk", "pendulum2", env=env).returncode == 0
    assert _caliper("fk", "pendulum2", env={**env, runtime.NO_CACHE_ENV: "1"}).returncode == 0
    assert not off.exists()


# ---- progress ---------------------------------------------------------------------------------

def test_progress_forced_on_shows_a_bar_and_json_stays_clean(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv(progress.ENV, "1")
    code, out, err = run(capsys, "record", "pendulum2", "--goal", "0.5 0", "--ticks", "400",
                         "--out", str(tmp_path / "ds"), "--json")
    assert code == 0 and json.loads(out)["ticks"] == 400                # stdout is the JSON alone
    assert "record: 100%" in err and "400/400" in err
    monkeypatch.delenv(progress.ENV)
    code, out, err = run(capsys, "record", "pendulum2", "--goal", "0.5 0", "--ticks", "400",
                         "--out", str(tmp_path / "ds2"), "--json")
    assert code == 0 and err == ""                                     # not a TTY: silent


def test_stage_line_on_slow_commands():
    proc = _caliper("check", "collide_arm", env={progress.ENV: "1", runtime.NO_CACHE_ENV: "1"})
    assert proc.returncode == 0, proc.stderr
    assert "caliper check" in proc.stderr and "[00:0" in proc.stderr
    assert proc.stdout.startswith("collide_arm q =")


def test_report_on_the_same_terminal_ends_the_stage_line(monkeypatch):
    import io
    import time

    class Tty(io.StringIO):
        def isatty(self):
            return True

    out, err = Tty(), Tty()
    monkeypatch.setattr(sys, "stdout", out)
    with progress.stage("caliper plan", stream=err) as set_text:
        time.sleep(progress._Stage.DELAY + 0.4)
        set_text("planning")
        assert "caliper plan: planning" in err.getvalue() and progress.line_open()
        print("report")                          # the first write to stdout clears the line first
        assert progress._stage is None and not progress.line_open()
        drawn = err.getvalue()
    assert out.getvalue() == "report\n" and err.getvalue() == drawn and drawn.endswith("\r")
    assert sys.stdout is out


PYTHON_CACHE = textwrap.dedent("""
    import json, sys
    import caliper_jax as cj
    folder = cj.enable_compile_cache(sys.argv[1])
    import jax, jax.numpy as jnp
    jax.jit(lambda x: jnp.sin(x) * 3.0 + 1.0)(jnp.ones(7)).block_until_ready()
    print(json.dumps({"folder": str(folder), "entries": len(list(folder.iterdir()))}))
""")


def test_python_call_turns_on_the_compile_cache(tmp_path):
    """`caliper_jax.enable_compile_cache(path)`: the CLI's cache for a Python session (issue 32)."""
    proc = subprocess.run([sys.executable, "-c", PYTHON_CACHE, str(tmp_path / "py")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["folder"] == str(tmp_path / "py") and got["entries"] >= 1

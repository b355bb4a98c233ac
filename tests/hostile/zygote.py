"""A fork server for the hostile-input harness: import ``caliper_jax.cli`` once, fork per case.

Start-up (importing jax, numpy, mujoco and the CLI: ~2 s of CPU) is not what the hostile corpus
tests, and it dominated the quick subset (about 50 cases). This process imports the CLI once --
before any JAX backend exists, so forking is safe (no XLA threads yet; checked below) -- then for
every request forks a child that becomes the case's own process: a new session (the harness
kills its process group), the case's scratch folder as cwd, the case's environment, stdout and
stderr to files, ``RLIMIT_DATA`` set, then ``python -m caliper_jax.cli`` run through ``runpy`` as
the real entry point does. The child exits as the interpreter would (``SystemExit`` code, ``1``
with the traceback printed on an uncaught exception, ``atexit`` handlers run).

Protocol (one JSON object per line): request ``{"argv", "cwd", "env", "stdout", "stderr",
"limit"}`` on stdin; replies ``{"pid": N}`` once forked, then ``{"rc": N}`` when it exited (a
negative ``rc``: killed by that signal, as :class:`subprocess.Popen` reports it).
"""
from __future__ import annotations

import atexit
import json
import os
import resource
import runpy
import sys
import traceback


def _child(req: dict) -> None:
    """Become the case's process; never returns."""
    code = 1
    try:
        os.setsid()
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                                (1, req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                (2, req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
            new = os.open(path, flags, 0o600)
            os.dup2(new, fd)
            os.close(new)
        limit = int(req["limit"])
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
        sys.argv = ["caliper", *req["argv"]]
        try:
            runpy.run_module("caliper_jax.cli", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except BaseException:  # noqa: B036 -- the interpreter's own handling of an uncaught exception
            traceback.print_exc()
            code = 1
        atexit._run_exitfuncs()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code & 0xFF)


#: imported once, before the first fork: what most quick cases import (measured: mujoco in 43 of 49,
#: the kinematics/dynamics core in ~20); the rest each case imports itself, as a fresh process would
PRELOAD = ("jax", "jax.numpy", "jax.scipy.linalg", "numpy", "mujoco", "multiprocessing", "caliper_jax.cli",
           "caliper_jax.api", "caliper_jax.io", "caliper_jax.ik", "caliper_jax.motion", "robots",
           "doctors.trajectory")


def main() -> None:
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    from jax._src import xla_bridge

    if xla_bridge._backends:        # a backend's threads would not survive a fork
        raise SystemExit("zygote: a JAX backend was initialised at import; cannot fork safely")
    reply = sys.stdout
    sys.stdout = sys.stderr          # nothing but replies on the protocol pipe
    for line in sys.stdin:
        req = json.loads(line)
        reply.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            sys.stdout = reply       # the child's fd 1 is redirected before anything is printed
            _child(req)
        reply.write(json.dumps({"pid": pid}) + "\n")
        reply.flush()
        _, status = os.waitpid(pid, 0)
        reply.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n")
        reply.flush()


if __name__ == "__main__":
    main()

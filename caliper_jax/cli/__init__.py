"""The ``caliper`` command line: one entry point, thin subcommands over the Python API.

Each subcommand module exposes ``register(subparsers)``; it adds its parsers and sets
``func=handler`` where ``handler(args) -> int`` returns the exit code. Reports honour
``--json``.

One error path (:func:`main`): every failure is one line ``caliper: error: ...`` on stderr with exit
code 2 -- bad input (``ValueError``/``CaliperError``, ``OSError``, ``KeyError``) and bad command
lines alike (a usage error names the flag and ends ``(see caliper COMMAND --help)``); under
``--json`` the same error is also printed on stdout as ``{"error": {"code", "message"}}`` with
code ``bad_input``, ``not_found``, ``io_error``, ``interrupted`` or ``internal``. A bug is
``caliper: internal error: ...`` with exit 3 (``CALIPER_DEBUG=1`` re-raises it); Ctrl-C is
``caliper: interrupted`` with exit 130. Process-wide set-up (interrupt watcher, persistent
compilation cache) happens only when ``main()`` is the process's entry point: see
:mod:`caliper_jax.cli.runtime`.
"""
from __future__ import annotations

import argparse
import ast
import difflib
import importlib
import os
import re
import sys
from contextlib import nullcontext

from caliper_jax.cli import runtime

# Modules that contribute subcommands, in help order.
SUBCOMMAND_MODULES = (
    "caliper_jax.cli.core",
    "caliper_jax.cli.control",
    "caliper_jax.cli.ik",
    "caliper_jax.cli.plan",
    "caliper_jax.cli.motion",
    "caliper_jax.cli.doctor",
    "caliper_jax.cli.data",
    "caliper_jax.cli.contact",
    "caliper_jax.cli.task",
    "caliper_jax.cli.learn",
    "caliper_jax.cli.terrain",
    "caliper_jax.cli.render",
    "caliper_jax.cli.studio",
    "caliper_jax.cli.graph",
    "caliper_jax.cli.identify",
)

# Commands that can take more than a couple of seconds (compiling, long rollouts): a stage line
# with a spinner and the elapsed time on stderr while they run (a TTY only; see caliper_jax.progress).
STAGED = frozenset({"demo", "sim", "fk", "ik", "analyze", "calibrate", "move", "report", "check", "plan",
                    "trajopt", "control", "record", "contact-sim", "contact-lint", "mjcf", "task", "learn",
                    "terrain", "render", "graph", "identify"})


# Command groups that never import JAX (no compilation cache to set up, no JAX import to pay for),
# except subcommands that set ``uses_jax`` (``data coverage``).
JAX_FREE = frozenset({"data", "doctor"})


class UsageError(Exception):
    """A bad command line (raised instead of argparse's print-usage-and-exit)."""


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: the message names the flag, then ``(see PROG --help)``."""

    def error(self, message):
        match = re.match(r"argument (\S+): invalid choice: (.+) \(choose from (.*)\)$", message)
        if match:
            flag, value, choices = match.groups()
            message = _invalid_choice(flag, value, choices)
        elif message.startswith("unrecognized arguments") and getattr(self, "verb_prog", None):
            raise UsageError(f"{message} (see {self.verb_prog} --help)")
        raise UsageError(f"{message} (see {self.prog} --help)")


def _literal(text: str) -> str:
    try:
        return str(ast.literal_eval(text))
    except (ValueError, SyntaxError):
        return text


def _invalid_choice(flag: str, value: str, choices: str) -> str:
    value = _literal(value)
    options = [_literal(c.strip()) for c in choices.split(",") if c.strip()]
    close = _suggest(value, options)
    hint = f"; did you mean {' or '.join(close)}?" if close else f" (choose from {', '.join(options)})"
    return f"argument {flag}: invalid choice {value!r}{hint}"


def _suggest(word: str, options) -> list[str]:
    options = list(options)
    lower = {o.lower(): o for o in options}
    if word.lower() in lower:
        return [lower[word.lower()]]
    return [lower[m] for m in difflib.get_close_matches(word.lower(), list(lower), n=3, cutoff=0.6)]


def build_parser() -> argparse.ArgumentParser:
    from caliper_jax import __version__

    parser = Parser(prog="caliper", description="JAX-native robotics stack for serial-arm robots.")
    parser.add_argument("--version", action="version", version=f"caliper {__version__}")
    parser.add_argument("--no-compile-cache", action="store_true",
                        help="do not read or write the persistent compilation cache (also: "
                             f"{runtime.NO_CACHE_ENV}=1; location: ${runtime.CACHE_ENV} or "
                             "~/.cache/caliper_jax/jax)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def _subparsers(parser) -> argparse._SubParsersAction | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def _normalize_commands(parser, argv: list[str]) -> list[str]:
    """Case-insensitive command names (``caliper FK`` is ``caliper fk``, ``data INFO`` is ``data
    info``); an unknown command is a usage error with the closest names. Sets ``verb_prog`` on the
    top parser (``caliper data doctor``) for its "unrecognized arguments" error."""
    top, argv = parser, list(argv)
    i = 0
    while True:
        top.verb_prog = parser.prog
        action = _subparsers(parser)
        if action is None:
            return argv
        while i < len(argv) and argv[i].startswith("-"):
            if argv[i] == "--":
                return argv
            i += 1
        if i >= len(argv):
            return argv
        word, choices = argv[i], action.choices
        if word not in choices:
            close = _suggest(word, choices)
            if len(close) == 1 and close[0].lower() == word.lower():
                argv[i] = word = close[0]
            else:
                hint = f"; did you mean {' or '.join(close)}?" if close else ""
                raise UsageError(f"unknown command {word!r}{hint} (see {parser.prog} --help)")
        parser = choices[word]
        i += 1


def _code(exc: BaseException) -> str:
    from caliper_jax.errors import NotFoundError

    if isinstance(exc, (NotFoundError, FileNotFoundError)):
        return "not_found"
    if isinstance(exc, OSError):
        return "io_error"
    return "bad_input"


def _message(exc: BaseException) -> str:
    if isinstance(exc, KeyError) and exc.args:
        return str(exc.args[0])
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    return str(exc) or type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    """Run one command; return its exit status. ``argv=None`` (the console script, ``python -m
    caliper_jax.cli``) also sets up the process: interrupt watcher and compilation cache."""
    entry = argv is None
    if entry:
        runtime.install_interrupts()        # first: before any library can start a thread
        argv = sys.argv[1:]
    argv = list(argv)
    want_json = "--json" in argv
    try:
        parser = build_parser()
        args = parser.parse_args(_normalize_commands(parser, argv))
    except UsageError as exc:
        return runtime.fail("bad_input", str(exc), want_json=want_json)
    except SystemExit as exc:               # --help, --version
        return exc.code if isinstance(exc.code, int) else 0
    want_json = bool(getattr(args, "json", False))
    from caliper_jax import progress

    progress.set_quiet(want_json)
    staged = progress.stage(f"caliper {args.command}") if args.command in STAGED else nullcontext()
    from caliper_jax import notices

    notices.clear()
    try:
        with runtime.one_line_warnings(), notices.filtered_stdout() if entry else nullcontext(), staged:
            if entry:
                runtime.set_json(want_json)
                uses_jax = args.command not in JAX_FREE or getattr(args, "uses_jax", False)
                if uses_jax:
                    notices.install_mujoco()      # MuJoCo's C warnings: counted, not printed
                if uses_jax and not args.no_compile_cache:
                    runtime.enable_compile_cache(runtime.compile_cache_dir())
            status = int(args.func(args) or 0)
        runtime.library_warnings(notices.drain())
        return status
    except BrokenPipeError:                 # `caliper ... | head`: the reader left; say nothing
        if entry:
            runtime.silence_stdout()
        return 141
    except (ValueError, OSError, KeyError) as exc:
        return runtime.fail(_code(exc), _message(exc), want_json=want_json)
    except KeyboardInterrupt:
        return _interrupted(want_json)
    except Exception as exc:  # a bug, not bad input: still one line unless asked for more
        if os.environ.get("CALIPER_DEBUG"):
            raise
        return runtime.fail("internal", f"{type(exc).__name__}: {exc} (set CALIPER_DEBUG=1 for a traceback)",
                            want_json=want_json, status=3, label="internal error")
    finally:
        notices.clear()                       # after an error the error line stays the only line
        progress.set_quiet(False)


def _interrupted(want_json: bool) -> int:
    from caliper_jax import progress

    progress.message("caliper: interrupted")
    if want_json:
        print(runtime.error_json("interrupted", "interrupted"), flush=True)
    return 130

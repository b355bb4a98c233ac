"""The ``caliper`` command line: one entry point, thin subcommands over the Python API.

Each subcommand module exposes ``register(subparsers)``; it adds its parsers and sets
``func=handler`` where ``handler(args) -> int`` returns the exit code. Reports honour
``--json``. Bad input raises ``ValueError``/``OSError`` (``CaliperError`` preferred) and is
printed as one line ``caliper: error: ...`` with exit code 2 -- never a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

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
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="caliper", description="JAX-native robotics stack for serial-arm robots."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, OSError, KeyError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"caliper: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("caliper: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug, not bad input: still one line unless asked for more
        if os.environ.get("CALIPER_DEBUG"):
            raise
        print(f"caliper: internal error: {type(exc).__name__}: {exc} (set CALIPER_DEBUG=1 for a traceback)",
              file=sys.stderr)
        return 3



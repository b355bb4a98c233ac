"""The ``caliper`` command line: one entry point, thin subcommands over the Python API.

Each subcommand module exposes ``register(subparsers)``; it adds its parsers and sets
``func=handler`` where ``handler(args) -> int`` returns the exit code. Reports honour
``--json``. Bad input raises ``ValueError``/``OSError`` (``CaliperError`` preferred) and is
printed as one line ``caliper: error: ...`` with exit code 2 -- never a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys

# Modules that contribute subcommands, in help order.
SUBCOMMAND_MODULES = (
    "caliper_jax.cli_core",
    "caliper_jax.cli_control",
    "caliper_jax.cli_ik",
    "caliper_jax.cli_plan",
    "caliper_jax.cli_motion",
    "doctors.asset.cli",
    "caliper_jax.dataset.cli",
    "mjx_backend.cli",
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


def emit(args: argparse.Namespace, report: dict, text: str) -> None:
    """Print ``report`` as JSON when ``--json`` was given, else the human ``text``."""
    if getattr(args, "json", False):
        print(json.dumps(report, indent=2, sort_keys=False, allow_nan=False))
    else:
        print(text)


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


if __name__ == "__main__":
    sys.exit(main())

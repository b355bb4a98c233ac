"""``caliper doctor ROBOT``: diagnose a URDF/xacro and optionally write a repaired copy.

Findings never change the exit code; only an uninspectable input is an error.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from caliper_jax.cli.common import emit
from caliper_jax.errors import CaliperError
from doctors.asset.checks import diagnose
from doctors.asset.repair import DEFAULT_DENSITY, FIXES, repair


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "doctor", help="diagnose a URDF/xacro (A001-A019) and optionally repair a copy",
        description="Diagnose a robot description; --repair writes <stem>.repaired.urdf beside it "
                    "(the input is never modified) and re-diagnoses the copy.")
    parser.add_argument("robot", metavar="ROBOT",
                        help="path to a .urdf or .xacro file, or a registry name (caliper info)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--repair", action="store_true", help="apply every repair: " + ", ".join(FIXES))
    parser.add_argument("--fix", action="append", choices=FIXES, metavar="NAME",
                        help="apply only this repair (repeatable): " + ", ".join(FIXES))
    parser.add_argument("--density", type=float, metavar="KG_M3",
                        help=f"uniform density for computed inertials (default {DEFAULT_DENSITY:g})")
    parser.add_argument("--out", metavar="PATH", help="where to write the repaired copy")
    parser.add_argument("--mesh-root", action="append", default=[], dest="mesh_roots", metavar="DIR",
                        help="extra folder to resolve package:// meshes against (repeatable)")
    parser.set_defaults(func=handler)


def _resolve(robot: str, writes: bool, out) -> str:
    """A registry name (no such file, no suffix, no folder) -> its URDF, as ``caliper load`` does."""
    path = Path(robot)
    if path.exists() or path.suffix or len(path.parts) != 1:
        return robot
    import robots

    found = str(robots.resolve(robot))
    if writes and out is None:
        raise CaliperError(f"{robot} is a registry robot: give --out PATH for the repaired copy "
                           "(it is not written beside the installed package)")
    return found


def handler(args: argparse.Namespace) -> int:
    fixes = FIXES if args.repair else tuple(args.fix or ())
    args.robot = _resolve(args.robot, bool(fixes), args.out)
    if not fixes:
        if args.out is not None or args.density is not None:
            raise CaliperError("--out and --density apply only with --repair or --fix")
        report = diagnose(args.robot, args.mesh_roots)
        emit(args, report.to_dict(), report.to_text())
        return 0
    density = DEFAULT_DENSITY if args.density is None else args.density
    result = repair(args.robot, fixes, density=density, out=args.out, mesh_roots=args.mesh_roots)
    emit(args, {**result.before.to_dict(), "repair": result.to_dict()},
         result.before.to_text() + "\n\n" + result.to_text())
    return 0

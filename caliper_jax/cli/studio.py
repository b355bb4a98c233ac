"""``caliper studio [ROBOT] [--dataset D] [--task T] [--port P] [--host H] [--json] [--once]``.

Starts the browser studio (viser; ``pip install 'caliper-jax[studio]'``) on a local port, prints
its URL (with ``--json`` one JSON line: url, host, port, robot) and serves until interrupted
(Ctrl-C). ``--once`` starts it, prints the URL and stops (a smoke test). Works offline: viser
serves its bundled client.
"""

from __future__ import annotations

import json
import time

from caliper_jax.errors import CaliperError


def register(subparsers) -> None:
    p = subparsers.add_parser("studio", help="the browser studio: jog, motion, simulate, data, graph")
    p.add_argument(
        "robot",
        nargs="?",
        default="gripper_arm",
        help="registry name or .urdf / MJCF file (default gripper_arm)",
    )
    p.add_argument("--dataset", default=None, help="a LeRobot v3 dataset root to open in the Data tab")
    p.add_argument("--task", default=None, help="a zoo task name or task file for the Simulate tab")
    p.add_argument("--port", type=int, default=8080, help="TCP port (default 8080; 0 picks a free one)")
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    p.add_argument("--json", action="store_true", help="print the URL as one JSON line")
    p.add_argument("--once", action="store_true", help="start, print the URL and exit")
    p.set_defaults(func=cmd_studio)


def check_inputs(args) -> None:
    """The robot, dataset and task are checked *before* the server starts: a bad one is the one
    error line, not a server banner, an error and a shutdown notice."""
    from caliper_jax.graph.nodes import ParamSpec, check_param

    problem = check_param(ParamSpec("robot"), args.robot)
    if problem:
        raise CaliperError(f"ROBOT: {problem}")
    if args.dataset is not None:
        from caliper_jax.dataset.reader import LeRobotReader

        LeRobotReader(args.dataset)
    if args.task is not None:
        from tasks.schema import find_task, load_task

        load_task(find_task(args.task))


def cmd_studio(args) -> int:
    from caliper_jax.studio.app import StudioApp

    if not 0 <= args.port < 65536:
        raise CaliperError(f"--port must be in [0, 65535], got {args.port}")
    check_inputs(args)
    app = StudioApp(args.robot, dataset=args.dataset, task=args.task, host=args.host, port=args.port)
    try:
        if args.json:
            print(
                json.dumps({"url": app.url, "host": args.host, "port": app.port, "robot": args.robot}),
                flush=True,
            )
        else:
            print(f"caliper studio: {app.url} (Ctrl-C to stop)", flush=True)
        while not args.once:
            time.sleep(3600)
    finally:
        app.close()
    return 0

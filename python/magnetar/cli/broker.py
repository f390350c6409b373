"""``magnetar broker start|stop|status|run|fetch``: the project's local test broker, the same as
``python -m magnetar.testing`` (whose command line this hands its arguments to)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register", "run"]

EXAMPLES = """examples:
  magnetar broker start              # in the background; prints service_url=... and more
  magnetar broker start --port 0     # on a free port
  magnetar broker status             # exit status 0 when running
  magnetar broker stop
  magnetar broker status --data-dir /tmp/broker   # state of a broker started with that --data-dir
  magnetar broker start --help       # every option of start
"""


def register(commands: Any) -> None:
    p = commands.add_parser("broker", help="start, stop or check the local test broker",
                            description="Run a local Apache Pulsar standalone broker (python -m magnetar.testing).",
                            epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=("start", "stop", "status", "run", "fetch"))
    p.add_argument("args", nargs=argparse.REMAINDER, help="passed on (see magnetar broker ACTION --help)")
    p.set_defaults(run=run)


# Options the testing command line takes before the action; here they may come anywhere.
GLOBAL_FLAGS = {"--cache-dir": True, "--data-dir": True, "-v": False, "--verbose": False}


def testing_argv(action: str, rest: list[str]) -> list[str]:
    """``rest`` for ``python -m magnetar.testing``: its global options moved before ``action``."""
    front: list[str] = []
    after: list[str] = []
    i = 0
    while i < len(rest):
        name = rest[i].split("=", 1)[0]
        takes_value = GLOBAL_FLAGS.get(name)
        if takes_value is None:
            after.append(rest[i])
        elif takes_value and "=" not in rest[i] and i + 1 < len(rest):
            front += rest[i:i + 2]
            i += 1
        else:
            front.append(rest[i])
        i += 1
    return [*front, action, *after]


def run(args: argparse.Namespace) -> int:
    from magnetar.testing.__main__ import main as testing_main

    return testing_main(testing_argv(args.action, args.args))

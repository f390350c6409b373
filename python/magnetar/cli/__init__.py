"""The ``magnetar`` command line (``magnetar --help``).

Each command lives in its own module with a ``register(subparsers)`` that adds its parser and
sets ``run``; this module assembles them and turns every failure into one line on stderr
(``MAGNETAR_TRACEBACK=1`` shows the traceback instead)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ._common import CliError, Parser

__all__ = ["main", "build_parser"]

EXIT_ERROR = 1
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # what a shell reports for a process killed by SIGPIPE


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__
    from . import admin, broker, consume, perf, produce, topic

    parser = Parser(prog="magnetar", description="A Pulsar client on the command line.",
                    epilog="Run `magnetar COMMAND --help` for a command's options.")
    parser.add_argument("--version", action="version", version=f"magnetar {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in (produce, consume, topic, perf, broker, admin):
        module.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status."""
    try:
        args = build_parser().parse_args(argv)
        status: int = args.run(args)
        return status
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`magnetar consume ... | head`): no message, and no second
        # error when Python flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Exception as e:
        if os.environ.get("MAGNETAR_TRACEBACK"):
            raise
        return _report(e)


def _report(error: BaseException) -> int:
    text = " ".join(str(error).split()) or type(error).__name__
    from ..exceptions import PulsarError

    if not isinstance(error, (CliError, PulsarError, TypeError, ValueError, OSError)):
        text = f"{type(error).__name__}: {text}"  # unexpected: the type says more than the text
    print(f"magnetar: error: {text}", file=sys.stderr)
    return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())

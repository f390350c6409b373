"""The ``magnetar`` command line (``magnetar --help``)."""

from __future__ import annotations

import argparse
import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Runs the command line; returns the exit status."""
    from .. import __version__

    parser = argparse.ArgumentParser(prog="magnetar", description="A Pulsar client on the command line.")
    parser.add_argument("--version", action="version", version=f"magnetar {__version__}")
    parser.parse_args(argv)
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Operating-system helpers of the test broker: external tools, loopback ports, process liveness."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Self

from ._errors import StandaloneError

__all__ = ["find_tool", "free_ports", "pick_ports", "pid_alive", "port_free", "run_tool", "set_pdeathsig",
           "wait_port_free"]


def find_tool(name: str, purpose: str) -> str:
    """The path of the program ``name``; raises :class:`StandaloneError` if it is not on PATH."""
    path = shutil.which(name)
    if path is None:
        raise StandaloneError(f"`{name}` is needed {purpose} but is not on PATH")
    return path


def run_tool(cmd: Sequence[str], what: str, cwd: Path | None = None) -> str:
    """Run ``cmd`` to completion and return its stdout; on failure raise :class:`StandaloneError`
    with its output's tail."""
    proc = subprocess.run(list(cmd), cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise StandaloneError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n{tail}")
    return proc.stdout


def port_free(port: int) -> bool:
    """Whether a server could listen on ``127.0.0.1:port`` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # Like the JVM's servers: a TIME_WAIT leftover is no obstacle, a listener is.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def wait_port_free(port: int, timeout: float) -> None:
    """Waits up to ``timeout`` seconds for ``port`` to become free (returns either way)."""
    deadline = time.monotonic() + timeout
    while not port_free(port) and time.monotonic() < deadline:
        time.sleep(0.1)


def pick_ports(wanted: Sequence[tuple[int | None, int]]) -> list[int]:
    """Resolve (requested, default) pairs: None -> default if free; 0 -> any free port."""
    # Every socket bound for "any free port" stays open until all are picked, so no two
    # picks can be the same port.
    held: list[socket.socket] = []
    out: list[int] = []
    try:
        for req, default in wanted:
            if req is None and port_free(default) and default not in out:
                out.append(default)
            elif req:
                out.append(req)
            else:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.bind(("127.0.0.1", 0))
                held.append(s)
                out.append(s.getsockname()[1])
    finally:
        for s in held:
            s.close()
    return out


def free_ports(n: int) -> list[int]:
    """``n`` distinct loopback ports that were free a moment ago."""
    return pick_ports([(0, 0)] * n)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and has not exited (a zombie has)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        with contextlib.suppress(PermissionError):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return False
        return True


def set_pdeathsig() -> None:
    """Have the kernel SIGTERM this process when the thread that forked it exits.

    Runs in the child between fork and exec.
    """
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


# Launchers running in this process, stopped at exit unless detached.
_RUNNING: set[Service] = set()


@atexit.register
def _stop_all() -> None:
    for service in list(_RUNNING):
        with contextlib.suppress(Exception):
            service.stop()


class Service:
    """What a launcher is as a context manager: started on entry, stopped on exit, and stopped
    at interpreter exit while it runs (``_running``/``_stopped`` say when)."""

    def _running(self) -> None:
        _RUNNING.add(self)

    def _stopped(self) -> None:
        """Stopped, or detached to outlive this process: no stop at exit."""
        _RUNNING.discard(self)

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

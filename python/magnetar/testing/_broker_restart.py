"""Kill -9 and restart of a :class:`~magnetar.testing.Standalone` broker, keeping its data."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import Any

from ._process import free_ports, wait_port_free
from .standalone import Standalone

__all__ = ["can_store", "kill9", "restart", "restartable_broker"]


def restartable_broker(**kwargs: Any) -> Any:
    """A :class:`~magnetar.testing.Standalone` that survives :func:`kill9` + :func:`restart`:
    fixed binary, HTTP and bookie ports (a bookie is known by its address, so its ledgers are
    only readable again on the same port) and data kept in its directory. Pass any other
    Standalone option; it is not started."""
    port, http_port, bk_port = free_ports(3)
    kwargs.setdefault("port", port)
    kwargs.setdefault("http_port", http_port)
    kwargs.setdefault("bookkeeper_port", bk_port)
    kwargs.setdefault("keep_data", True)
    return Standalone(**kwargs)


def kill9(broker: Any, timeout: float = 10.0) -> float:
    """SIGKILLs the broker's process group (no shutdown hooks, no flush) and waits for it to
    exit; returns the seconds it took."""
    t0 = time.monotonic()
    pid = broker.pid
    if pid is None:
        return 0.0
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    proc = getattr(broker, "_proc", None)
    if proc is not None:
        with contextlib.suppress(Exception):
            proc.wait(timeout)
    deadline = t0 + timeout
    while broker.is_running() and time.monotonic() < deadline:
        time.sleep(0.05)
    if broker.is_running():
        raise RuntimeError(f"broker pid {pid} survived SIGKILL for {timeout} s")
    # Forget the dead process the way Standalone does after a stop, but keep the data.
    broker._proc = None
    broker.pid = None
    broker._stopped()
    wait_port_free(broker.port, timeout)
    if getattr(broker, "bookkeeper_port", 0):
        # The restarted bookie must get its own address back, or its ledgers are unreadable.
        wait_port_free(broker.bookkeeper_port, timeout)
    return time.monotonic() - t0


def restart(broker: Any, attempts: int = 3) -> float:
    """Starts a killed broker again on the same ports and data; returns the start-up seconds.

    The admin API answering does not prove the bookie is back: a write is tried, and a broker
    whose bookie did not come back (its port was briefly taken, say) is killed and started
    again, up to ``attempts`` times."""
    if broker.is_running():
        raise RuntimeError("the broker is still running; kill9() it first")
    broker.wipe_data = False
    t0 = time.monotonic()
    for attempt in range(attempts):
        broker.start()
        if can_store(broker.service_url) or attempt + 1 == attempts:
            break
        kill9(broker)
    return time.monotonic() - t0


def can_store(service_url: str) -> bool:
    """Whether a message can be stored now (the broker and its bookie work).

    The probe writes to a topic of its own each time: a topic that is already loaded keeps
    writing to its open ledger, and would pass while every new ledger is refused ("Not enough
    non-faulty bookies")."""
    import uuid

    import magnetar

    client = magnetar.Client(service_url, operation_timeout=15, connect_timeout=10)
    try:
        client.create_producer(f"persistent://public/default/__restart-probe-{os.getpid()}-{uuid.uuid4().hex[:12]}", batching=False,
                               send_timeout=15).send(b"probe")
        return True
    except magnetar.PulsarError:
        return False
    finally:
        client.close()

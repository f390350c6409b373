"""Watching a client's connection state for an ``on_state_change`` listener."""

from __future__ import annotations

import logging
import threading
from typing import Callable

from . import _core

__all__ = ["StateWatcher"]

_log = logging.getLogger("magnetar")


class StateWatcher:
    """Calls ``listener(state)`` from a daemon thread whenever the client's state changes
    (``"idle"``, ``"connecting"``, ``"connected"``, ``"closed"``). A listener that raises is
    logged and kept."""

    def __init__(self, core: _core._Client, listener: Callable[[str], object], period: float = 0.1) -> None:
        self._core = core
        self._listener = listener
        self._period = period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="magnetar-state", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        last = None
        while True:
            state = self._core.state
            if state != last:
                last = state
                try:
                    self._listener(state)
                except Exception:
                    _log.exception("exception in the on_state_change listener (ignored)")
            if state == "closed" or self._stop.wait(self._period):
                return

    def stop(self) -> None:
        self._stop.set()

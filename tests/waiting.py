"""Waiting in tests without hanging them: a call bounded in time, and polling for a condition."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

__all__ = ["bounded", "wait_until"]


def bounded(fn: Callable[[], Any], timeout: float, what: str) -> Any:
    """Runs ``fn`` in a thread; fails the test (instead of hanging it) after ``timeout`` s."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed back to the caller
            box["error"] = e

    t = threading.Thread(target=run, daemon=True, name=f"bounded {what}")
    t.start()
    t.join(timeout)
    if t.is_alive():
        pytest.fail(f"{what} did not return within {timeout} s (hang)")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def wait_until(pred: Callable[[], bool], timeout: float, period: float = 0.05) -> bool:
    """Polls ``pred`` every ``period`` s; whether it held within ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(period)
    return pred()

"""The errors of the test broker: every failure to fetch, start, stop or administer it."""

from __future__ import annotations

__all__ = ["AdminError", "ClusterError", "StandaloneError"]


class StandaloneError(RuntimeError):
    """The broker could not be fetched, started or stopped."""


class AdminError(StandaloneError):
    """An admin REST call returned an HTTP error; ``status`` and ``body`` hold the reply."""

    def __init__(self, method: str, url: str, status: int, body: str) -> None:
        super().__init__(f"{method} {url} -> HTTP {status}: {body.strip()[:500]}")
        self.status = status
        self.body = body


class ClusterError(StandaloneError):
    """A :class:`~magnetar.testing.Cluster` could not be started, stopped or administered."""

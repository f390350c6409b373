"""The admin API's errors: an HTTP status and the broker's reason, as :class:`AdminError`
subclasses, each a :class:`magnetar.PulsarError`."""

from __future__ import annotations

import contextlib
import http
import json

from ..exceptions import PulsarError

__all__ = [
    "AdminError",
    "BadRequest",
    "Conflict",
    "NotAuthorized",
    "NotFound",
    "PreconditionFailed",
    "ServiceUnavailable",
    "error_for",
]


class AdminError(PulsarError):
    """An admin call the broker refused. ``status`` is the HTTP status, ``reason`` the broker's
    own words, ``method`` and ``path`` the call."""

    status: int
    reason: str
    method: str
    path: str

    def __init__(self, method: str, path: str, status: int, reason: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {reason}")
        self.method, self.path, self.status, self.reason = method, path, status, reason


class BadRequest(AdminError):
    """400: the broker refused the arguments (a bad name, a policy out of range)."""


class NotAuthorized(AdminError):
    """401 or 403: no credential, a refused one, or a role without the permission."""


class NotFound(AdminError):
    """404: no such tenant, namespace, topic, subscription or schema."""


class Conflict(AdminError):
    """409: it exists already, or is in a state that forbids the call (a tenant that still
    has namespaces, a namespace that still has topics)."""


class PreconditionFailed(AdminError):
    """412: a precondition of the call does not hold (a partitioned topic's name that ends in
    ``-partition-N``, a topic with connected clients deleted without ``force``)."""


class ServiceUnavailable(AdminError):
    """503: the broker stayed unavailable through every retry."""


_BY_STATUS: dict[int, type[AdminError]] = {
    400: BadRequest,
    401: NotAuthorized,
    403: NotAuthorized,
    404: NotFound,
    409: Conflict,
    412: PreconditionFailed,
    503: ServiceUnavailable,
}


def reason_of(status: int, body: bytes) -> str:
    """The broker's reason: ``{"reason": ...}`` from Pulsar's REST resources, ``{"message":
    ...}`` from its web server's filters, else the start of the body; with no body (the
    authentication filter's refusal), the status's own phrase."""
    text = body.decode("utf-8", "replace").strip()
    with contextlib.suppress(ValueError):
        answer = json.loads(text)
        if isinstance(answer, dict):
            for key in ("reason", "message"):
                if isinstance(answer.get(key), str) and answer[key]:
                    return str(answer[key])
    if text:
        return text[:500]
    with contextlib.suppress(ValueError):
        return http.HTTPStatus(status).phrase
    return "no reason given"


def error_for(method: str, path: str, status: int, body: bytes) -> AdminError:
    """The error of a refused call, by its status (any other status is a plain AdminError)."""
    return _BY_STATUS.get(status, AdminError)(method, path, status, reason_of(status, body))

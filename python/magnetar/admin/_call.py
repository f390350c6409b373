"""What the sync and asyncio admin share: calls written once as generators that yield
:class:`Request` and receive :class:`Answer`, driven by :class:`Admin` (blocking) or
:class:`AsyncAdmin` (awaiting the engine's future), with the same redirects, retries and errors.

The transport is the engine's web request (``_core._Client.web_request``): the HTTP over hyper
that lookups use, with the client's authentication providers and TLS, so the admin API takes
every option :class:`magnetar.Client` takes and adds no dependency.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Concatenate, Generator, NoReturn, ParamSpec, TypeVar

from .. import _build, _core
from .._aio import call as _aio_call
from ..exceptions import InvalidConfiguration
from ._errors import error_for

if TYPE_CHECKING:
    from typing import Unpack

    from .._options import ConnectionOptions

__all__ = ["Answer", "Request", "Steps", "admin_op", "namespace_path", "topic_path", "topic_name"]

T = TypeVar("T")
P = ParamSpec("P")
S = TypeVar("S", bound="_Resource")

#: Attempts of a call the broker answers 503 (ServiceUnavailable: a bundle being loaded or
#: unloaded, metadata not ready), and the first delay, doubled after each attempt.
RETRIES_ON_503 = 5
FIRST_DELAY = 0.2


@dataclass(frozen=True)
class Request:
    """One admin call: ``json`` is sent as the JSON body (``None``: no body)."""

    method: str
    path: str
    json: Any = None
    query: dict[str, Any] = field(default_factory=dict)
    #: Statuses that are an answer rather than an error (404 where absence is the answer).
    accept: tuple[int, ...] = ()

    def target(self) -> str:
        q = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in self.query.items() if v is not None}
        return self.path + ("?" + urllib.parse.urlencode(q) if q else "")

    def wire(self) -> tuple[str, str, list[tuple[str, str]], bytes]:
        """``web_request``'s arguments."""
        if self.json is None:
            return self.method, self.target(), [], b""
        return self.method, self.target(), [("content-type", "application/json")], json.dumps(self.json).encode()


@dataclass(frozen=True)
class Answer:
    """The broker's answer: status, headers (lower-case names) and body."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body as JSON; None when empty."""
        return json.loads(self.body) if self.body.strip() else None


#: An admin call: yields requests, receives their answers, returns the result.
Steps = Generator[Request, Answer, T]


def _checked(req: Request, status: int, headers: list[tuple[str, str]], body: bytes) -> Answer | None:
    """The answer of a request; None when it is to be retried; raises the call's error."""
    if 200 <= status < 300 or status in req.accept:
        return Answer(status, dict(headers), body)
    if status == 503:
        return None
    raise error_for(req.method, req.target(), status, body)


class _Base:
    """The engine client and the options of an admin handle."""

    def __init__(self, service_url: str, **options: Unpack[ConnectionOptions]) -> None:
        if not isinstance(service_url, str) or not service_url.startswith(("http://", "https://")):
            raise InvalidConfiguration(
                f"the admin API needs the broker's web service URL (http://host:8080 or https://host:8443), not {service_url!r}"
            )
        self.service_url = service_url
        self._core = _core._Client(service_url.rstrip("/"), _build.connection(dict(options)))

    def __repr__(self) -> str:
        return f"<magnetar.admin.{type(self).__name__} {self.service_url!r}>"

    def __reduce__(self) -> NoReturn:
        raise TypeError(f"magnetar.admin.{type(self).__name__} cannot be pickled: it owns network connections. "
                        "Make one in each process from its URL and options.")


class SyncCore(_Base):
    """Runs calls blocking (the engine releases the GIL while it waits)."""

    def run(self, steps: Steps[T]) -> T:
        try:
            req = next(steps)
            while True:
                req = steps.send(self._send(req))
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def _send(self, req: Request) -> Answer:
        delay = FIRST_DELAY
        for attempt in range(RETRIES_ON_503):
            if attempt:
                time.sleep(delay)  # backoff before retrying a 503, not a wait for an event
                delay *= 2
            status, headers, body = self._core.web_request(*req.wire())
            answer = _checked(req, status, headers, body)
            if answer is not None:
                return answer
        raise error_for(req.method, req.target(), status, body)

    def close(self) -> None:
        self._core.close()


class AsyncCore(_Base):
    """Runs calls on the event loop: the engine resolves an asyncio future, nothing blocks."""

    async def run(self, steps: Steps[T]) -> T:
        try:
            req = next(steps)
            while True:
                req = steps.send(await self._send(req))
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def _send(self, req: Request) -> Answer:
        delay = FIRST_DELAY
        for attempt in range(RETRIES_ON_503):
            if attempt:
                await asyncio.sleep(delay)
                delay *= 2
            status, headers, body = await _aio_call(self._core.web_request, *req.wire())
            answer = _checked(req, status, headers, body)
            if answer is not None:
                return answer
        raise error_for(req.method, req.target(), status, body)

    async def close(self) -> None:
        await _aio_call(self._core.close)


class _Resource:
    """A group of calls (``admin.topics``, ``admin.namespaces``, ...) on one admin handle."""

    def __init__(self, core: SyncCore | AsyncCore) -> None:
        self._core = core


def admin_op(fn: Callable[Concatenate[S, P], Steps[T]]) -> Callable[Concatenate[S, P], T]:
    """Makes a call written as steps a method: blocking on :class:`Admin`, a coroutine on
    :class:`AsyncAdmin` (whose resources are typed as awaiting the same results)."""

    @functools.wraps(fn)
    def method(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._core.run(fn(self, *args, **kwargs))  # type: ignore[return-value]

    return method


# Names


def _q(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def topic_name(topic: str) -> tuple[str, str, str, str]:
    """``(domain, tenant, namespace, local name)`` of ``persistent://t/ns/x``, ``t/ns/x`` or
    ``x`` (in ``public/default``), as the clients read topic names."""
    if not isinstance(topic, str):
        raise InvalidConfiguration(f"a topic name must be a str, not {topic!r}")
    domain, sep, rest = topic.partition("://")
    if not sep:
        domain, rest = "persistent", topic
    parts = rest.split("/", 2) if rest.count("/") >= 2 else rest.split("/")
    if len(parts) == 1:
        parts = ["public", "default", parts[0]]
    if domain not in ("persistent", "non-persistent") or len(parts) != 3 or not all(parts):
        raise InvalidConfiguration(f"{topic!r} is not a topic name (persistent://tenant/namespace/topic)")
    return domain, parts[0], parts[1], parts[2]


def topic_path(topic: str, suffix: str = "", prefix: str = "/admin/v2") -> str:
    """``{prefix}/{domain}/{tenant}/{namespace}/{topic}{suffix}``, each part encoded."""
    d, t, ns, name = topic_name(topic)
    return f"{prefix}/{d}/{_q(t)}/{_q(ns)}/{_q(name)}{suffix}"


def namespace_path(namespace: str) -> str:
    """``tenant/namespace`` encoded for a path."""
    parts = namespace.split("/") if isinstance(namespace, str) else []
    if len(parts) != 2 or not all(parts):
        raise InvalidConfiguration(f"{namespace!r} is not a namespace name (tenant/namespace)")
    return f"{_q(parts[0])}/{_q(parts[1])}"


def segment(name: str, what: str) -> str:
    """One name (tenant, cluster, subscription) encoded for a path."""
    if not isinstance(name, str) or not name:
        raise InvalidConfiguration(f"{what} must be a non-empty str, not {name!r}")
    return _q(name)

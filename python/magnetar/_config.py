"""A picklable description of a client: :class:`ClientConfig`.

A :class:`magnetar.Client` owns sockets and threads and refuses to pickle. A ``ClientConfig``
is a frozen, hashable, picklable value holding the same arguments, so it can travel to
another process (a PySpark executor, a ``multiprocessing`` worker) and build the client
there::

    conf = magnetar.ClientConfig("pulsar://127.0.0.1:6650", operation_timeout=10.0,
                                 authentication=magnetar.Authentication.token(jwt))
    with conf.create() as client:
        ...
"""

from __future__ import annotations

import dataclasses
from dataclasses import InitVar, dataclass, field
from typing import TYPE_CHECKING, Any

from ._options import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_KEEPALIVE_INTERVAL,
    DEFAULT_MEMORY_LIMIT,
    DEFAULT_OPERATION_TIMEOUT,
    Authentication,
    client_options,
)
from .exceptions import InvalidConfiguration

if TYPE_CHECKING:
    from ._async import AsyncClient
    from ._client import Client

__all__ = ["ClientConfig"]


@dataclass(frozen=True)
class ClientConfig:
    """The arguments of :class:`magnetar.Client`, as a frozen, hashable, picklable value.

    ``service_url`` is positional, every option is a keyword with the same name and default
    as in :class:`magnetar.Client`. Credentials are kept as ``auth_method`` + ``auth_data``
    (pass ``authentication=`` for convenience); :attr:`authentication` rebuilds the
    :class:`~magnetar.Authentication`. Options are validated at construction and raise
    :class:`~magnetar.InvalidConfiguration`.

    Equal configurations compare and hash equal, which is what per-process client caches
    (:func:`magnetar.spark.client`) key on.
    """

    service_url: str
    operation_timeout: float = field(default=DEFAULT_OPERATION_TIMEOUT, kw_only=True)
    connect_timeout: float = field(default=DEFAULT_CONNECT_TIMEOUT, kw_only=True)
    keepalive_interval: float = field(default=DEFAULT_KEEPALIVE_INTERVAL, kw_only=True)
    memory_limit: int = field(default=DEFAULT_MEMORY_LIMIT, kw_only=True)
    initial_backoff: float = field(default=0.1, kw_only=True)
    max_backoff: float = field(default=60.0, kw_only=True)
    auth_method: str | None = field(default=None, kw_only=True)
    auth_data: bytes | None = field(default=None, kw_only=True, repr=False)
    authentication: InitVar[Authentication | None] = field(default=None, kw_only=True)

    def __post_init__(self, authentication: Authentication | None) -> None:
        if not isinstance(self.service_url, str) or not self.service_url.strip():
            raise InvalidConfiguration(f"service_url must be a non-empty string, not {self.service_url!r}")
        if authentication is not None:
            if not isinstance(authentication, Authentication):
                raise InvalidConfiguration("authentication must be a magnetar.Authentication")
            if self.auth_method is not None or self.auth_data is not None:
                raise InvalidConfiguration("give authentication or auth_method/auth_data, not both")
            object.__setattr__(self, "auth_method", authentication.method)
            object.__setattr__(self, "auth_data", authentication.data)
        if self.auth_data is not None:
            if isinstance(self.auth_data, str):
                object.__setattr__(self, "auth_data", self.auth_data.encode())
            elif not isinstance(self.auth_data, bytes):
                object.__setattr__(self, "auth_data", bytes(self.auth_data))
            if self.auth_method is None:
                raise InvalidConfiguration("auth_data needs an auth_method")
        # Same validation as the Client constructor, so a bad value fails here, in the
        # process that built the configuration, and not later on a remote worker.
        client_options(self.operation_timeout, self.connect_timeout, self.keepalive_interval,
                       self.memory_limit, self._authentication(), self.initial_backoff, self.max_backoff)
        if isinstance(self.memory_limit, bool) or not isinstance(self.memory_limit, int) or self.memory_limit < 0:
            raise InvalidConfiguration(f"memory_limit must be a non-negative int, not {self.memory_limit!r}")

    def _authentication(self) -> Authentication | None:
        if self.auth_method is None:
            return None
        return Authentication(self.auth_method, self.auth_data or b"")

    def client_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :class:`magnetar.Client` (without ``service_url``)."""
        return {
            "operation_timeout": self.operation_timeout,
            "connect_timeout": self.connect_timeout,
            "keepalive_interval": self.keepalive_interval,
            "memory_limit": self.memory_limit,
            "authentication": self._authentication(),
            "initial_backoff": self.initial_backoff,
            "max_backoff": self.max_backoff,
        }

    def replace(self, **changes: Any) -> ClientConfig:
        """A copy with some fields changed. ``authentication=`` replaces the credentials."""
        if changes.get("authentication") is not None:
            changes.setdefault("auth_method", None)
            changes.setdefault("auth_data", None)
        else:
            changes["authentication"] = None
        return dataclasses.replace(self, **changes)

    def create(self) -> Client:
        """A new :class:`magnetar.Client` (the caller closes it)."""
        from ._client import Client

        return Client(self.service_url, **self.client_kwargs())

    def create_async(self) -> AsyncClient:
        """A new :class:`magnetar.AsyncClient` (the caller closes it)."""
        from ._async import AsyncClient

        return AsyncClient(self.service_url, **self.client_kwargs())


# ``authentication`` is an init-only argument of the dataclass; once the class is built, the
# same name reads the stored credentials back as an Authentication (or None).
ClientConfig.authentication = property(  # type: ignore[attr-defined]
    ClientConfig._authentication, doc="The credentials as a :class:`~magnetar.Authentication`, or None."
)

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

from . import _build
from ._core import _check_client_options
from ._options import Authentication, ConnectionOptions, declared
from .exceptions import InvalidConfiguration

if TYPE_CHECKING:
    from ._async import AsyncClient
    from ._client import Client

__all__ = ["ClientConfig"]

_DECLARED = declared(ConnectionOptions)
# Kept as auth_method/auth_data (fixed data) or auth_plugin/auth_params (the rest).
_CREDENTIALS = ("authentication", "auth_plugin", "auth_params")


def _default(name: str) -> Any:
    return field(default=_DECLARED[name].default, kw_only=True)


@dataclass(frozen=True)
class ClientConfig:
    """The arguments of :class:`magnetar.Client`, as a frozen, hashable, picklable value.

    ``service_url`` is positional, every option is a keyword with the same name and default
    as in :class:`magnetar.Client`, TLS options included (``tls_trust_certs_file_path``,
    ``tls_allow_insecure_connection``, ``tls_validate_hostname``, ``tls_certificate_file_path``,
    ``tls_private_key_file_path``; paths are kept as ``str`` and must exist where the client is
    created). Credentials are kept as ``auth_method`` + ``auth_data`` when they are fixed data, else
    in their text form ``auth_plugin`` + ``auth_params`` (pass ``authentication=`` for
    convenience; a callable token supplier cannot travel); :attr:`authentication` rebuilds the
    :class:`~magnetar.Authentication`. Options are validated at construction and raise
    :class:`~magnetar.InvalidConfiguration`.

    Equal configurations compare and hash equal, which is what per-process client caches
    (:func:`magnetar.spark.client`) key on.
    """

    service_url: str
    operation_timeout: float | None = _default("operation_timeout")
    connect_timeout: float | None = _default("connect_timeout")
    keepalive_interval: float | None = _default("keepalive_interval")
    memory_limit: int = _default("memory_limit")
    initial_backoff: float = _default("initial_backoff")
    max_backoff: float = _default("max_backoff")
    stats_interval: float | None = _default("stats_interval")
    enable_transaction: bool = _default("enable_transaction")
    auth_method: str | None = field(default=None, kw_only=True)
    auth_data: bytes | None = field(default=None, kw_only=True, repr=False)
    auth_plugin: str | None = _default("auth_plugin")
    """Credentials that are not fixed data (a token file, TLS, OAuth2), in their text form."""
    auth_params: str | None = field(default=None, kw_only=True, repr=False)
    listener_name: str | None = _default("listener_name")
    proxy_url: str | None = _default("proxy_url")
    """A proxy routing TLS connections by SNI (with ``proxy_protocol="sni"``)."""
    proxy_protocol: str | None = _default("proxy_protocol")
    tls_trust_certs_file_path: str | None = _default("tls_trust_certs_file_path")
    """PEM file of the CA certificates that sign the brokers' certificates (``pulsar+ssl://``)."""
    tls_allow_insecure_connection: bool = _default("tls_allow_insecure_connection")
    """Accept any broker certificate: encrypted, but the broker is not authenticated."""
    tls_validate_hostname: bool = _default("tls_validate_hostname")
    """Check that the broker's certificate names the host in the URL (``False``: chain only)."""
    tls_certificate_file_path: str | None = _default("tls_certificate_file_path")
    """PEM client certificate for mutual TLS (with ``tls_private_key_file_path``)."""
    tls_private_key_file_path: str | None = _default("tls_private_key_file_path")
    """PEM private key of ``tls_certificate_file_path``."""
    authentication: InitVar[Authentication | None] = field(default=None, kw_only=True)

    def __post_init__(self, authentication: Authentication | None) -> None:
        if not isinstance(self.service_url, str) or not self.service_url.strip():
            raise InvalidConfiguration(f"service_url must be a non-empty string, not {self.service_url!r}")
        if self.auth_plugin is not None or self.auth_params is not None:
            if authentication is not None or self.auth_method is not None:
                raise InvalidConfiguration("give authentication, auth_method/auth_data or auth_plugin/auth_params, not two")
            authentication = _build._authentication(None, self.auth_plugin, self.auth_params)
            object.__setattr__(self, "auth_plugin", None)
            object.__setattr__(self, "auth_params", None)
        if authentication is not None:
            if not isinstance(authentication, Authentication):
                raise InvalidConfiguration("authentication must be a magnetar.Authentication")
            if self.auth_method is not None or self.auth_data is not None:
                raise InvalidConfiguration("give authentication or auth_method/auth_data, not both")
            if authentication._kind == "static":
                object.__setattr__(self, "auth_method", authentication.method)
                object.__setattr__(self, "auth_data", authentication.data)
            else:
                text = authentication.params()
                if text is None:
                    raise InvalidConfiguration("a ClientConfig cannot carry a callable token supplier (it must travel "
                                               "as text); use Authentication.token_file or Authentication.oauth2")
                object.__setattr__(self, "auth_plugin", text[0])
                object.__setattr__(self, "auth_params", text[1])
        if self.auth_data is not None:
            if isinstance(self.auth_data, str):
                object.__setattr__(self, "auth_data", self.auth_data.encode())
            elif not isinstance(self.auth_data, bytes):
                object.__setattr__(self, "auth_data", bytes(self.auth_data))
            if self.auth_method is None:
                raise InvalidConfiguration("auth_data needs an auth_method")
        engine = _build.connection(self.client_kwargs(), "ClientConfig")
        for name in ("tls_trust_certs_file_path", "tls_certificate_file_path", "tls_private_key_file_path"):
            object.__setattr__(self, name, engine[name])
        # The engine's own checks, so a bad value fails here, in the process that built the
        # configuration, and not later on a remote worker.
        _check_client_options(engine)
        if isinstance(self.memory_limit, bool) or not isinstance(self.memory_limit, int) or self.memory_limit < 0:
            raise InvalidConfiguration(f"memory_limit must be a non-negative int, not {self.memory_limit!r}")

    def _authentication(self) -> Authentication | None:
        if self.auth_plugin is not None:
            return Authentication.from_params(self.auth_plugin, self.auth_params)
        if self.auth_method is None:
            return None
        return Authentication(self.auth_method, self.auth_data or b"")

    def client_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :class:`magnetar.Client` (without ``service_url``)."""
        kwargs = {name: getattr(self, name) for name in _DECLARED if name not in _CREDENTIALS}
        kwargs["authentication"] = self._authentication()
        return kwargs

    def replace(self, **changes: Any) -> ClientConfig:
        """A copy with some fields changed. ``authentication=`` replaces the credentials."""
        if changes.get("authentication") is not None or changes.get("auth_plugin") is not None:
            for name in ("auth_method", "auth_data", "auth_plugin", "auth_params"):
                changes.setdefault(name, None)
        if changes.get("authentication") is None:
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

"""A client given a ``ServiceInfoProvider``: it starts on the provider's initial cluster, and
each ``ServiceInfo`` the provider reports moves it there through
:meth:`magnetar.Client.switch_service` (the C++ client's ``ClientImpl::updateServiceInfo``)."""

from __future__ import annotations

import logging
import weakref
from typing import Any, Protocol

from .._auth import Authentication as _NativeAuth
from ._config import Authentication, ServiceInfo, ServiceInfoProvider
from .exceptions import AlreadyClosed, mapped

__all__ = ["Following"]

_log = logging.getLogger("magnetar")


class _Client(Protocol):
    """What an update changes in the compat ``Client``, seen by its shape so that this module
    stays below the client that follows a provider."""

    _client: Any
    _clusters: list[ServiceInfo]
    _refused: str | None


def _checked(info: Any, what: str) -> ServiceInfo:
    if not isinstance(info, ServiceInfo):
        raise ValueError(f"{what} must be a pulsar.ServiceInfo, not {type(info).__name__}")
    return info


def _credentials(auth: Authentication | None) -> tuple[_NativeAuth | None, str | None]:
    """The native credential of ``auth``, and why connecting will be refused (as
    ``Client.__init__`` works them out for its own ``authentication``)."""
    if auth is None:
        return None, None
    try:
        options = auth._options()
    except Exception as e:
        return None, f"cannot get the authentication data: {e}"
    if "tls_certificate_file_path" in options:
        return _NativeAuth.tls(options["tls_certificate_file_path"], options["tls_private_key_file_path"]), \
            auth._refused
    return options.get("authentication"), auth._refused


class Following:
    """A client's link to its provider: the initial cluster, the updates, the closing."""

    def __init__(self, provider: ServiceInfoProvider) -> None:
        self.provider = provider
        self.initial = _checked(provider.initial_service_info(), "initial_service_info()")
        self._closed = False

    def start(self, client: _Client) -> None:
        """Hands the provider the callback that switches ``client`` (held weakly: the provider
        does not keep the client alive, as in the C++ client)."""
        client._clusters = [self.initial]
        ref = weakref.ref(client)

        def on_service_info_update(info: ServiceInfo) -> None:
            info = _checked(info, "the service info")
            target = ref()
            if target is None:
                return
            auth, refused = _credentials(info._auth)
            try:
                with mapped():
                    target._client.switch_service(info.service_url, authentication=auth,
                                                  tls_trust_certs_file_path=info.tls_trust_certs_file_path)
            except AlreadyClosed:
                # As the C++ client: an update after close is logged and dropped.
                _log.error("the client is closed: not switching to %s", info.service_url)
                return
            target._clusters, target._refused = [info], refused

        self.provider.initialize(on_service_info_update)

    def close(self) -> None:
        """Closes the provider, once; an exception it raises is logged (the C++ client prints it)."""
        if self._closed:
            return
        self._closed = True
        try:
            self.provider.close()
        except Exception:
            _log.exception("ServiceInfoProvider.close() raised")

"""The official client's helper objects: authentication, policies, loggers, service infos.
Each turns into magnetar's native options (or says clearly what magnetar cannot do)."""

from __future__ import annotations

import json
import logging
from typing import Any, Callable, Optional

from .. import exceptions as _nexc
from .._auth import read_params
from .._crypto import CryptoKeyReader as _NativeKeyReader
from .._oauth2 import ClientCredentials
from .._options import Authentication as _NativeAuth
from ._pulsar import KeySharedMode, LoggerLevel
from .exceptions import InvalidConfiguration

__all__ = [
    "Authentication", "AuthenticationAthenz", "AuthenticationBasic", "AuthenticationOauth2", "AuthenticationTLS",
    "AuthenticationToken", "AutoClusterFailover", "ConsoleLogger", "ConsumerBatchReceivePolicy",
    "ConsumerDeadLetterPolicy", "ConsumerKeySharedPolicy", "CryptoKeyReader", "FileLogger", "ServiceInfo",
    "ServiceInfoProvider", "check_type", "check_type_or_none",
]


def check_type(var_type: Any, var: Any, name: str) -> None:
    # The official client raises ValueError, not TypeError, for a wrong argument type.
    if not isinstance(var, var_type) or (var_type is int and isinstance(var, bool)):
        raise ValueError(f"Argument {name} is expected to be of type '{getattr(var_type, '__name__', var_type)}'"
                         f" and not '{type(var).__name__}'")


def check_type_or_none(var_type: Any, var: Any, name: str) -> None:
    if var is not None:
        check_type(var_type, var, name)


class Authentication:
    """Credentials. ``Authentication(plugin, params)`` takes the official plugin names
    (``tls``, ``token``, ``basic`` or their Java class names) with their parameter strings.
    magnetar's addition: ``params`` may be a function returning the current parameter string
    of a ``token`` or ``basic`` plugin, called on every connect and every challenge, so renewed
    credentials are used without a restart."""

    def __init__(self, dynamicLibPath: str, authParamsString: str | Callable[[], str]) -> None:  # noqa: N803
        check_type(str, dynamicLibPath, "dynamicLibPath")
        self._native: _NativeAuth | None = None
        self._tls: tuple[str, str] | None = None
        self._refused: str | None = None
        plugin = dynamicLibPath.rsplit(".", 1)[-1].lower()
        if callable(authParamsString):
            self._native = _supplied(_SHORT.get(plugin, plugin), authParamsString)
            return
        check_type(str, authParamsString, "authParamsString")
        try:
            kind, params = read_params(_SHORT.get(plugin, plugin), authParamsString)
        except _nexc.InvalidConfiguration:
            # The official client reads unparsable parameters as none (and fails at connect).
            kind, params = read_params(_SHORT.get(plugin, plugin), None)
        if kind == "tls":
            self._set_tls(str(params.get("tlsCertFile", "")), str(params.get("tlsKeyFile", "")))
        elif kind == "token":
            file = params.get("file")
            self._native = (_NativeAuth.token_file(file) if file is not None
                            else _NativeAuth.token(str(params.get("token", ""))))
        elif kind == "basic":
            self._native = _NativeAuth(str(params.get("method", "basic")),
                                       f"{params.get('userId', '')}:{params.get('password', '')}")
        else:
            # The official client loads a C++ plugin by path; magnetar has none to load, so
            # connecting fails as authentication does there.
            self._refused = f"unknown authentication plugin {dynamicLibPath!r}"

    def _set_tls(self, cert: str, key: str) -> None:
        check_type(str, cert, "certificate_path")
        check_type(str, key, "private_key_path")
        self._native = _NativeAuth("tls", b"")
        self._tls = (cert, key)

    def _options(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self._native is not None:
            out["authentication"] = self._native
        if self._tls is not None:
            out["tls_certificate_file_path"], out["tls_private_key_file_path"] = self._tls
        return out


def _supplied(plugin: str, params: Callable[[], str]) -> _NativeAuth:
    """Credentials whose parameter string ``params()`` gives afresh for each connect."""
    kind = read_params(plugin, None)[0]
    if kind not in ("token", "basic"):
        raise InvalidConfiguration(f"a function of authentication parameters is for the token and basic plugins, "
                                   f"not {plugin!r}")

    def data() -> str:
        fields = read_params(plugin, params())[1]
        if kind == "token":
            if "file" in fields:
                with open(fields["file"]) as f:
                    return f.read().strip()
            return str(fields.get("token", ""))
        return f"{fields.get('userId', '')}:{fields.get('password', '')}"
    return _NativeAuth(kind, data)


# The official plugin names this class takes (the last part of a path or a Java class name).
_SHORT = {"authenticationtls": "tls", "authenticationtoken": "token", "authenticationbasic": "basic"}


class AuthenticationTLS(Authentication):
    """Mutual TLS: the client certificate authenticates (needs ``pulsar+ssl://``)."""

    def __init__(self, certificate_path: str, private_key_path: str) -> None:
        self._refused = None
        self._native, self._tls = None, None
        self._set_tls(certificate_path, private_key_path)


class AuthenticationToken(Authentication):
    """A JWT, or a function returning the current one, called on every connect and every
    challenge (as the official client does)."""

    def __init__(self, token: str | Callable[[], str]) -> None:
        if not (isinstance(token, str) or callable(token)):
            raise ValueError("Argument token is expected to be of type 'str' or a function returning 'str'")
        self._refused, self._tls = None, None
        self._supplier = token if callable(token) else None
        self._native = _NativeAuth.token(token) if isinstance(token, str) else None

    def _options(self) -> dict[str, Any]:
        if self._supplier is not None:
            # Called once here so that a supplier that fails refuses the client at its first
            # operation (as before any connection), then again for every connect.
            self._supplier()
            return {"authentication": _NativeAuth.token(self._supplier)}
        return super()._options()


class AuthenticationBasic(Authentication):
    """User name and password (the broker's basic provider)."""

    def __init__(self, username: str | None = None, password: str | None = None, method: str = "basic",
                 auth_params_string: str | None = None) -> None:
        self._refused, self._tls = None, None
        if auth_params_string is not None:
            check_type(str, auth_params_string, "auth_params_string")
            try:
                p = json.loads(auth_params_string)
            except ValueError:
                # As the official client, whose C++ parser throws here.
                raise RuntimeError(f"invalid basic authentication parameters: {auth_params_string!r}") from None
            username, password, method = p.get("username"), p.get("password"), p.get("method", "basic")
        check_type(str, username, "username")
        check_type(str, password, "password")
        check_type(str, method, "method")
        self._native = _NativeAuth(method, f"{username}:{password}")
        # The official client sends a basic credential to web services as such, whatever
        # its method name.
        self._native._http_method = "basic"


class _Unsupported(Authentication):
    _what = ""

    def __init__(self, auth_params_string: str) -> None:
        check_type(str, auth_params_string, "auth_params_string")
        raise InvalidConfiguration(f"{self._what} authentication is not available in magnetar")


class AuthenticationOauth2(Authentication):
    """OAuth2 client credentials from the official parameter string: a JSON object with
    ``issuer_url``, ``private_key`` (the credentials file as a path, a ``file://`` or a
    ``data:`` URL), and optionally ``audience`` and ``scope``. Parameters that can never work
    fail as the official client's do: at the first connection, with ``AuthenticationError``."""

    def __init__(self, auth_params_string: str) -> None:
        check_type(str, auth_params_string, "auth_params_string")
        self._refused, self._tls, self._native = None, None, None
        try:
            params = json.loads(auth_params_string)
        except ValueError:
            params = None
        if not isinstance(params, dict):
            self._refused = f"OAuth2 parameters must be a JSON object: {auth_params_string!r}"
            return
        # Checked by the credentials themselves, which say what is wrong.
        issuer: Any = params.get("issuer_url")
        key: Any = params.get("private_key")
        audience, scope = params.get("audience"), params.get("scope")
        try:
            ClientCredentials(issuer, key, audience, scope).check()
            self._native = _NativeAuth.oauth2(issuer, key, audience, scope)
        except _nexc.InvalidConfiguration as e:
            self._refused = f"OAuth2: {e}"


class AuthenticationAthenz(_Unsupported):
    _what = "Athenz"


class CryptoKeyReader(_NativeKeyReader):
    """RSA key files for end-to-end encryption: the public key encrypts producers' data keys,
    the private key decrypts them in consumers (every key name gets this pair)."""

    def __init__(self, public_key_path: str, private_key_path: str) -> None:
        check_type(str, public_key_path, "public_key_path")
        check_type(str, private_key_path, "private_key_path")
        super().__init__(public_key_path, private_key_path)


class ConsumerDeadLetterPolicy:
    """Dead-lettering after ``max_redeliver_count`` deliveries."""

    def __init__(self, max_redeliver_count: int, dead_letter_topic: str | None = None,
                 initial_subscription_name: str | None = None) -> None:
        check_type(int, max_redeliver_count, "max_redeliver_count")
        if max_redeliver_count < 1:
            raise ValueError("max_redeliver_count must be greater than 0")
        check_type_or_none(str, dead_letter_topic, "dead_letter_topic")
        check_type_or_none(str, initial_subscription_name, "initial_subscription_name")
        self._max, self._topic, self._initial = max_redeliver_count, dead_letter_topic, initial_subscription_name

    @property
    def dead_letter_topic(self) -> str:
        return self._topic or ""

    @property
    def max_redeliver_count(self) -> int:
        return self._max

    @property
    def initial_subscription_name(self) -> str:
        return self._initial or ""


class ConsumerBatchReceivePolicy:
    """``batch_receive`` limits: messages, bytes, milliseconds (-1: none)."""

    def __init__(self, max_num_message: int, max_num_bytes: int, timeout_ms: int) -> None:
        for v, n in ((max_num_message, "max_num_message"), (max_num_bytes, "max_num_bytes"),
                     (timeout_ms, "timeout_ms")):
            check_type(int, v, n)
        self.max_num_message, self.max_num_bytes, self.timeout_ms = max_num_message, max_num_bytes, timeout_ms


class ConsumerKeySharedPolicy:
    """Key_Shared options. magnetar's Key_Shared consumers use auto-split hash ranges in order."""

    def __init__(self, key_shared_mode: KeySharedMode = KeySharedMode.AutoSplit,
                 allow_out_of_order_delivery: bool = False,
                 sticky_ranges: Optional[list[tuple[int, int]]] = None) -> None:
        if sticky_ranges is not None and key_shared_mode == KeySharedMode.AutoSplit:
            raise ValueError("When specifying sticky_ranges, key_shared_mode must be set to KeySharedMode.Sticky")
        if sticky_ranges is None and key_shared_mode == KeySharedMode.Sticky:
            raise ValueError("When key_shared_mode is KeySharedMode.Sticky, sticky_ranges must be specified")
        self._mode, self._ooo, self._ranges = key_shared_mode, allow_out_of_order_delivery, sticky_ranges or []

    @property
    def key_shared_mode(self) -> KeySharedMode:
        return self._mode

    @property
    def allow_out_of_order_delivery(self) -> bool:
        return self._ooo

    @property
    def sticky_ranges(self) -> list[tuple[int, int]]:
        return list(self._ranges)


_LEVELS = {LoggerLevel.Debug: logging.DEBUG, LoggerLevel.Info: logging.INFO, LoggerLevel.Warn: logging.WARNING,
           LoggerLevel.Error: logging.ERROR}


class ConsoleLogger:
    """magnetar's log (the ``magnetar`` logger) on stderr from ``log_level`` up."""

    def __init__(self, log_level: LoggerLevel = LoggerLevel.Info) -> None:
        self.log_level = log_level

    def _handler(self) -> logging.Handler:
        return logging.StreamHandler()


class FileLogger(ConsoleLogger):
    """magnetar's log (the ``magnetar`` logger) appended to ``log_file`` from ``log_level`` up."""

    def __init__(self, log_level: LoggerLevel, log_file: str) -> None:
        super().__init__(log_level)
        self.log_file = log_file

    def _handler(self) -> logging.Handler:
        return logging.FileHandler(self.log_file)


class ServiceInfo:
    """A cluster to connect to: URL, credentials and trust file."""

    def __init__(self, service_url: str, authentication: Authentication | None = None,
                 tls_trust_certs_file_path: str | None = None) -> None:
        check_type(str, service_url, "service_url")
        check_type_or_none(Authentication, authentication, "authentication")
        check_type_or_none(str, tls_trust_certs_file_path, "tls_trust_certs_file_path")
        self._url, self._auth, self._trust = service_url, authentication, tls_trust_certs_file_path

    @property
    def service_url(self) -> str:
        return self._url

    @property
    def use_tls(self) -> bool:
        return self._url.startswith(("pulsar+ssl://", "https://"))

    @property
    def tls_trust_certs_file_path(self) -> str | None:
        return self._trust

    def __repr__(self) -> str:
        return f"ServiceInfo(service_url={self._url!r})"


class ServiceInfoProvider:
    """Base class of a provider of the cluster to use: a client given one starts on
    ``initial_service_info()``, hands ``initialize`` the callback that moves it to another
    ``ServiceInfo`` (on :meth:`magnetar.Client.switch_service`), and calls ``close()`` when it
    is closed."""

    def initial_service_info(self) -> ServiceInfo:
        raise NotImplementedError

    def initialize(self, on_service_info_update: Callable[[ServiceInfo], None]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class AutoClusterFailover:
    """Failover between clusters, on :class:`magnetar.AutoClusterFailover`: probes every
    ``check_interval_ms``; ``failover_threshold`` failed probes of the cluster in use switch to
    the first reachable secondary, ``switch_back_threshold`` successful probes of the primary
    switch back. Every cluster must share the same credentials and trust file."""

    def __init__(self, primary: ServiceInfo, secondary: list[ServiceInfo], check_interval_ms: int = 5000,
                 failover_threshold: int = 1, switch_back_threshold: int = 1) -> None:
        check_type(ServiceInfo, primary, "primary")
        check_type(list, secondary, "secondary")
        if not secondary:
            raise ValueError("secondary must not be empty")
        for s in secondary:
            check_type(ServiceInfo, s, "secondary")
        for v, n in ((check_interval_ms, "check_interval_ms"), (failover_threshold, "failover_threshold"),
                     (switch_back_threshold, "switch_back_threshold")):
            check_type(int, v, n)
            if v <= 0:
                raise ValueError(f"{n} must be positive")
        self.primary, self.secondary = primary, list(secondary)
        self.check_interval_ms = check_interval_ms
        self.failover_threshold, self.switch_back_threshold = failover_threshold, switch_back_threshold

    def __repr__(self) -> str:
        return f"AutoClusterFailover(primary={self.primary!r}, secondary={self.secondary!r})"

"""Credentials: :class:`Authentication` and its text form (``auth_plugin`` + ``auth_params``).

An ``Authentication`` is a value: the kind of credential and its parameters. What the engine
gets from it (:meth:`Authentication._engine`) is fixed data, a callable it calls on every
connect and every challenge, or a token file it reads each time.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any, Callable, Union

from ._oauth2 import ClientCredentials
from .exceptions import InvalidConfiguration

__all__ = ["Authentication", "TokenSupplier"]

TokenSupplier = Callable[[], Union[str, bytes]]
"""A callable returning the current token; called for every connect and every challenge."""

_JAVA = "org.apache.pulsar.client.impl.auth."
# The official clients' plugin names, and magnetar's short ones.
_PLUGINS = {
    "token": "token", _JAVA + "authenticationtoken": "token",
    "basic": "basic", _JAVA + "authenticationbasic": "basic",
    "tls": "tls", _JAVA + "authenticationtls": "tls",
    "oauth2": "oauth2", _JAVA + "oauth2.authenticationoauth2": "oauth2",
}


def _path(value: Any, what: str) -> str:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value:
        raise InvalidConfiguration(f"{what} must be a path (str or os.PathLike[str]), not {value!r}")
    return value


class Authentication:
    """Credentials sent when connecting, and again whenever the broker asks (``AuthChallenge``).

    Make one with a class method: :meth:`token` (a JWT, or a callable returning the current
    one), :meth:`token_file`, :meth:`basic`, :meth:`tls` or :meth:`oauth2`; or from the
    official clients' text form with :meth:`from_params`. ``Authentication(method, data)``
    sends data under any method name (a custom provider of the broker): fixed ``bytes``/``str``,
    or a callable returning the current data, called on every connect and every challenge (as
    a token supplier is).

    Equal credentials compare equal; all but a callable supplier pickle.
    """

    def __init__(self, method: str, data: bytes | str | TokenSupplier = b"") -> None:
        if not method or not isinstance(method, str):
            raise InvalidConfiguration("authentication method must not be empty")
        self.method = method
        self._kind = "static"
        if callable(data):
            self.data = b""
            self._kind = "supplier"
            self._spec: tuple[Any, ...] = (data,)
        elif isinstance(data, (bytes, bytearray, memoryview, str)):
            self.data = data.encode() if isinstance(data, str) else bytes(data)
            self._spec = (method, self.data)
        else:
            raise InvalidConfiguration(f"authentication data must be bytes, str or a callable returning them, not {data!r}")
        # The header form for web services when it is not the method's (magnetar.compat's
        # basic credential under a custom method name).
        self._http_method: str | None = None

    @classmethod
    def _make(cls, method: str, kind: str, *spec: Any) -> Authentication:
        auth = cls(method)
        auth._kind, auth._spec = kind, spec
        return auth

    @classmethod
    def token(cls, token: str | TokenSupplier) -> Authentication:
        """Token authentication (the broker's ``AuthenticationProviderToken``) with a JWT, or
        with a callable returning the current JWT (``str`` or ``bytes``), called on every
        connect and every challenge, so a renewed token is used without a restart."""
        if callable(token):
            return cls._make("token", "supplier", token)
        if not isinstance(token, str) or not token:
            raise InvalidConfiguration("token must be a non-empty str or a callable returning one")
        return cls("token", token)

    @classmethod
    def token_file(cls, path: str | os.PathLike[str]) -> Authentication:
        """Token authentication with the token in a file, read again on every connect and
        every challenge (a Kubernetes projected token, a file a sidecar rotates)."""
        return cls._make("token", "token_file", _path(path, "token_file path"))

    @classmethod
    def basic(cls, user: str, password: str) -> Authentication:
        """User and password (the broker's ``AuthenticationProviderBasic``, an htpasswd file)."""
        if not isinstance(user, str) or not user or ":" in user:
            raise InvalidConfiguration("basic authentication needs a user name without ':'")
        if not isinstance(password, str):
            raise InvalidConfiguration("basic authentication needs a password (str)")
        return cls("basic", f"{user}:{password}")

    @classmethod
    def tls(cls, cert_path: str | os.PathLike[str], key_path: str | os.PathLike[str]) -> Authentication:
        """The client certificate presented in the TLS handshake is the credential (the
        broker's ``AuthenticationProviderTls``; its common name is the role). Needs a
        ``pulsar+ssl://`` URL."""
        return cls._make("tls", "tls", _path(cert_path, "tls cert_path"), _path(key_path, "tls key_path"))

    @classmethod
    def oauth2(cls, issuer_url: str, private_key: str | os.PathLike[str], audience: str | None = None,
               scope: str | None = None) -> Authentication:
        """OAuth2 client credentials, as the official clients' ``AuthenticationOauth2``.

        ``private_key`` is the credentials JSON (``client_id``, ``client_secret``) as a path,
        a ``file://`` URL or a ``data:`` URL. The token endpoint comes from the issuer's
        ``/.well-known/openid-configuration``; the token is cached and fetched again before it
        expires. ``http://`` issuers are allowed on loopback only.
        """
        creds = ClientCredentials(issuer_url, private_key, audience, scope)
        return cls._make("token", "oauth2", creds)

    # -- the text form ----------------------------------------------------------------------

    @classmethod
    def from_params(cls, plugin: str, params: str | None) -> Authentication:
        """Credentials from the official clients' text form: a plugin name (``token``,
        ``basic``, ``tls``, ``oauth2`` or the Java class name) and its parameter string
        (``token:<jwt>``, ``file:///path`` or ``{"token": <jwt>}``; ``{"userId": ..., "password": ...}``;
        ``tlsCertFile:<path>,tlsKeyFile:<path>``; ``{"issuerUrl": ..., "privateKey": ...,
        "audience": ..., "scope": ...}``)."""
        kind, fields = read_params(plugin, params)
        if kind is None:
            names = ", ".join(sorted(k for k in _PLUGINS if "." not in k))
            raise InvalidConfiguration(f"auth_plugin must be one of {names} (or the Java class name), not {plugin!r}")
        if not fields:
            raise InvalidConfiguration(f"auth_plugin {plugin!r} needs auth_params")
        if kind == "token":
            if "file" in fields:
                return cls.token_file(fields["file"])
            return cls.token(_field(fields, "token", plugin))
        if kind == "tls":
            return cls.tls(_field(fields, "tlsCertFile", plugin), _field(fields, "tlsKeyFile", plugin))
        if kind == "basic":
            return cls.basic(_field(fields, "userId", plugin), _field(fields, "password", plugin))
        return cls.oauth2(_field(fields, "issuerUrl", plugin), _field(fields, "privateKey", plugin),
                          fields.get("audience"), fields.get("scope"))

    def params(self) -> tuple[str, str] | None:
        """The text form (``auth_plugin``, ``auth_params``) of these credentials, or None for
        a callable supplier, which text cannot carry."""
        if self._kind == "supplier":
            return None
        if self._kind == "token_file":
            return "token", "file://" + self._spec[0]
        if self._kind == "tls":
            return "tls", f"tlsCertFile:{self._spec[0]},tlsKeyFile:{self._spec[1]}"
        if self._kind == "oauth2":
            return "oauth2", json.dumps(self._spec[0].params())
        if self.method == "token":
            return "token", "token:" + self.data.decode()
        if self.method == "basic":
            user, _, password = self.data.decode().partition(":")
            return "basic", json.dumps({"userId": user, "password": password})
        return None

    # -- what the engine takes --------------------------------------------------------------

    def _engine(self) -> dict[str, Any]:
        """The engine's ``auth_*`` options."""
        out: dict[str, Any] = {"auth_method": self.method, "auth_data": None, "auth_supplier": None,
                               "auth_token_file": None}
        if self._kind == "supplier":
            out["auth_supplier"] = self._spec[0]
        elif self._kind == "oauth2":
            self._spec[0].check()
            out["auth_supplier"] = self._spec[0]
        elif self._kind == "token_file":
            if not os.path.isfile(self._spec[0]):
                raise InvalidConfiguration(f"token file {self._spec[0]!r} does not exist")
            out["auth_token_file"] = self._spec[0]
        else:
            out["auth_data"] = self.data
            if self._http_method is not None:
                out["auth_http_method"] = self._http_method
        return out

    def _http_authorization(self) -> str | None:
        """The ``Authorization`` header of the admin REST API for these credentials (None for
        TLS, whose credential is the certificate, and for unknown methods)."""
        if self._kind == "supplier" and self.method != "token":
            return None
        if self._kind in ("supplier", "oauth2"):
            value = self._spec[0]()
            return "Bearer " + (value.decode() if isinstance(value, bytes) else value)
        if self._kind == "token_file":
            with open(self._spec[0]) as f:
                return "Bearer " + f.read().strip()
        if self._kind == "static" and self.method == "token":
            return "Bearer " + self.data.decode()
        if self._kind == "static" and self.method == "basic":
            return "Basic " + base64.b64encode(self.data).decode()
        return None

    @property
    def _tls_files(self) -> tuple[str, str] | None:
        return (self._spec[0], self._spec[1]) if self._kind == "tls" else None

    def _key(self) -> tuple[Any, ...]:
        return (self.method, self._kind, *self._spec)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Authentication) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        if self._kind == "static":
            return f"Authentication({self.method!r}, <{len(self.data)} bytes>)"
        shown = {"supplier": "<callable>", "token_file": repr(self._spec[0]) if self._spec else "",
                 "tls": f"{self._spec[0]!r}, {self._spec[1]!r}" if self._kind == "tls" else "",
                 "oauth2": repr(self._spec[0])}[self._kind]
        return f"Authentication.{self._kind}({shown})"


def _file_url_path(url: str) -> str:
    from urllib.parse import unquote, urlparse

    parsed = urlparse(url)
    if parsed.netloc not in ("", "localhost"):
        raise InvalidConfiguration(f"a file URL names a local path, not host {parsed.netloc!r}: {url!r}")
    return unquote(parsed.path)


def read_params(plugin: str, params: str | None) -> tuple[str | None, dict[str, Any]]:
    """The official clients' text form, read once for every caller (``Authentication.from_params``
    and ``magnetar.compat``, which differ only in what they do with missing fields): the
    plugin's kind (``token``, ``basic``, ``tls``, ``oauth2``; None for an unknown plugin) and its
    fields. A JSON object gives its fields (the only form of ``basic`` and ``oauth2``); a token
    is also ``token:<jwt>``, ``<jwt>`` or ``file:///path`` (the field ``file``); TLS also
    ``key:value,key:value``."""
    kind = _PLUGINS.get((plugin or "").strip().lower())
    text = (params or "").strip()
    if not text:
        return kind, {}
    if text.startswith("{") or kind in ("basic", "oauth2"):  # these two have only the JSON form
        try:
            fields = json.loads(text)
        except ValueError:
            fields = None
        if not isinstance(fields, dict):
            raise InvalidConfiguration(f"auth_params of {plugin!r} must be a JSON object")
        if kind == "token" and str(fields.get("token", "")).startswith("file:"):
            return kind, {"file": _file_url_path(str(fields["token"]))}
        return kind, fields
    if kind == "token":
        if text.startswith("file:"):
            return kind, {"file": _file_url_path(text)}
        return kind, {"token": text.removeprefix("token:")}
    return kind, {k.strip(): v.strip() for k, sep, v in (p.partition(":") for p in text.split(",")) if sep}


def _field(fields: dict[str, Any], name: str, plugin: str) -> Any:
    value = fields.get(name)
    if value is None or value == "":
        raise InvalidConfiguration(f"auth_params of {plugin!r} needs {name!r}")
    return value

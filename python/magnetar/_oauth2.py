"""OAuth2 client credentials (RFC 6749 section 4.4), as the official Pulsar clients'
``AuthenticationOauth2``: the issuer's discovery document names the token endpoint, the client
id and secret come from a credentials JSON, and the access token is cached until shortly
before it expires.

A :class:`ClientCredentials` is the callable the engine calls (on a blocking thread, never an
I/O thread) for every connect and every ``AuthChallenge``; HTTP goes through ``urllib``.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from .exceptions import InvalidConfiguration

__all__ = ["ClientCredentials"]

# Renew once this share of the token's lifetime is left, so the broker's refresh check never
# finds it expired; and never keep one with less than this many seconds left.
_RENEW_SHARE = 0.2
_RENEW_MIN_SECONDS = 1.0
_HTTP_TIMEOUT = 10.0


def _loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_url(url: str, what: str) -> str:
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "https" and parsed.hostname:
        return url
    if parsed.scheme == "http" and _loopback(parsed.hostname):
        return url
    raise InvalidConfiguration(f"{what} must be an https:// URL (http:// only on loopback), not {url!r}")


class ClientCredentials:
    """Fetches and caches an access token with the client credentials grant."""

    def __init__(self, issuer_url: str, private_key: Any, audience: str | None = None,
                 scope: str | None = None) -> None:
        if not isinstance(issuer_url, str):
            raise InvalidConfiguration(f"oauth2 issuer_url must be a URL, not {issuer_url!r}")
        self.issuer_url = _check_url(issuer_url.rstrip("/"), "oauth2 issuer_url")
        if isinstance(private_key, os.PathLike):
            private_key = os.fspath(private_key)
        if not isinstance(private_key, str) or not private_key:
            raise InvalidConfiguration("oauth2 private_key must be a path, a file:// URL or a data: URL")
        self.private_key = private_key
        for name, value in (("audience", audience), ("scope", scope)):
            if value is not None and not isinstance(value, str):
                raise InvalidConfiguration(f"oauth2 {name} must be a str or None, not {value!r}")
        self.audience, self.scope = audience or None, scope or None
        self._lock = threading.Lock()
        self._token: str | None = None
        self._renew_at = 0.0
        self._endpoint: str | None = None

    def params(self) -> dict[str, str]:
        """The official clients' JSON parameters of these credentials."""
        out = {"type": "client_credentials", "issuerUrl": self.issuer_url, "privateKey": self.private_key}
        if self.audience:
            out["audience"] = self.audience
        if self.scope:
            out["scope"] = self.scope
        return out

    def check(self) -> None:
        """Raises InvalidConfiguration now for credentials that can never work."""
        self._credentials()

    def _credentials(self) -> tuple[str, str]:
        key = self.private_key
        try:
            if key.startswith("data:"):
                meta, _, body = key[5:].partition(",")
                raw = base64.b64decode(body) if meta.endswith(";base64") else urllib.parse.unquote(body).encode()
            else:
                path = urllib.parse.unquote(urllib.parse.urlparse(key).path) if key.startswith("file:") else key
                with open(path, "rb") as f:
                    raw = f.read()
            doc = json.loads(raw)
        except (OSError, ValueError) as e:
            raise InvalidConfiguration(f"oauth2 private_key {self._shown_key()}: {e}") from None
        if not isinstance(doc, dict) or not doc.get("client_id") or not doc.get("client_secret"):
            raise InvalidConfiguration(f"oauth2 private_key {self._shown_key()} must hold client_id and client_secret")
        return str(doc["client_id"]), str(doc["client_secret"])

    def _shown_key(self) -> str:
        # A data: URL is the secret itself.
        return "(data: URL)" if self.private_key.startswith("data:") else repr(self.private_key)

    def __call__(self) -> str:
        """The current access token, fetched when there is none or it is about to expire."""
        with self._lock:
            if self._token is None or time.monotonic() >= self._renew_at:
                self._fetch()
            assert self._token is not None
            return self._token

    def invalidate(self) -> None:
        """Forgets the cached access token (the broker refused it: revoked, or expired early)."""
        with self._lock:
            self._token = None

    def _fetch(self) -> None:
        client_id, client_secret = self._credentials()
        if self._endpoint is None:
            discovery = _get_json(self.issuer_url + "/.well-known/openid-configuration")
            endpoint = discovery.get("token_endpoint") if isinstance(discovery, dict) else None
            if not isinstance(endpoint, str):
                raise RuntimeError(f"{self.issuer_url} names no token_endpoint in its openid-configuration")
            self._endpoint = _check_url(endpoint, "the issuer's token_endpoint")
        form = {"grant_type": "client_credentials", "client_id": client_id, "client_secret": client_secret}
        if self.audience:
            form["audience"] = self.audience
        if self.scope:
            form["scope"] = self.scope
        started = time.monotonic()
        answer = _post_form(self._endpoint, form)
        token = answer.get("access_token") if isinstance(answer, dict) else None
        if not isinstance(token, str) or not token:
            raise RuntimeError(f"the token endpoint {self._endpoint} returned no access_token")
        expires_in = answer.get("expires_in")
        self._token = token
        if isinstance(expires_in, (int, float)) and expires_in > 0:
            self._renew_at = started + max(0.0, min(expires_in * (1 - _RENEW_SHARE), expires_in - _RENEW_MIN_SECONDS))
        else:
            self._renew_at = started  # no lifetime given: ask again each time

    def __getstate__(self) -> dict[str, Any]:
        # The lock and the cached token stay in this process.
        return {k: getattr(self, k) for k in ("issuer_url", "private_key", "audience", "scope")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def _key(self) -> tuple[Any, ...]:
        return (self.issuer_url, self.private_key, self.audience, self.scope)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClientCredentials) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"{self.issuer_url!r}, {self._shown_key()}, audience={self.audience!r}, scope={self.scope!r}"


def _get_json(url: str) -> Any:
    return _exchange(urllib.request.Request(url, headers={"Accept": "application/json"}))


def _post_form(url: str, form: dict[str, str]) -> Any:
    body = urllib.parse.urlencode(form).encode()
    return _exchange(urllib.request.Request(url, data=body, method="POST", headers={
        "Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded"}))


def _exchange(req: urllib.request.Request) -> Any:
    try:
        with urllib.request.urlopen(req, timeout=_HTTP_TIMEOUT) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as e:
        detail = e.read()[:300].decode(errors="replace")
        raise RuntimeError(f"{req.full_url}: HTTP {e.code} {e.reason} {detail}".strip()) from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise RuntimeError(f"{req.full_url}: {e}") from None

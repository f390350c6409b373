"""A minimal Pulsar admin REST client (urllib only) with the helpers tests use."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from ._errors import AdminError

__all__ = ["Admin", "RedirectingAdmin"]

_REDIRECTS = (301, 302, 303, 307, 308)
_LOCAL_HOSTS = ("127.0.0.1", "localhost")


def _split_topic(topic: str) -> tuple[str, str, str, str]:
    domain, sep, rest = topic.partition("://")
    if not sep:
        domain, rest = "persistent", topic
    parts = rest.split("/")
    if len(parts) == 1:
        parts = ["public", "default", parts[0]]
    if len(parts) != 3 or domain not in ("persistent", "non-persistent"):
        raise ValueError(f"not a topic name: {topic!r}")
    return domain, parts[0], parts[1], parts[2]


def _ns_path(namespace: str) -> str:
    parts = namespace.split("/")
    if len(parts) == 1:
        parts = ["public", parts[0]]
    return "/".join(urllib.parse.quote(p, safe="") for p in parts)


def _answer(text: str) -> Any:
    """An admin call's answer: its JSON, its text when it is not JSON, None when empty."""
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


class Admin:
    """Minimal Pulsar admin REST client (urllib only) with helpers for tests.

    Topic arguments take a full name (``persistent://tenant/ns/name``), ``tenant/ns/name``
    or a short name (``persistent://public/default/<name>``). Namespaces take
    ``tenant/ns`` or ``ns`` (tenant ``public``).
    """

    def __init__(self, admin_url: str, *, timeout: float = 30.0, token: str | None = None) -> None:
        self._admin_url = admin_url.rstrip("/")
        self.timeout = timeout
        self.token = token
        """Bearer token for a broker with authentication enabled."""

    def _new_request(self, url: str, data: bytes | None = None, method: str = "GET") -> urllib.request.Request:
        req = urllib.request.Request(url, data=data, method=method)
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        return req

    @property
    def admin_url(self) -> str:
        """Base HTTP URL of the admin API, e.g. ``http://127.0.0.1:8080``."""
        return self._admin_url

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """Send ``method path`` (``path`` starts with ``/admin/...``) with an optional JSON body.

        Returns the decoded JSON reply, the raw text if it is not JSON, or None if empty.
        Raises :class:`AdminError` on an HTTP error status.
        """
        url = self.admin_url + path
        data = None if body is None else json.dumps(body).encode()
        req = self._new_request(url, data, method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                text = resp.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as exc:
            raise AdminError(method, url, exc.code, exc.read().decode("utf-8", "replace")) from None
        return _answer(text)

    def _topic(self, topic: str, suffix: str = "") -> str:
        d, t, ns, name = _split_topic(topic)
        q = urllib.parse.quote
        return f"/admin/v2/{d}/{q(t, safe='')}/{q(ns, safe='')}/{q(name, safe='')}{suffix}"

    def partitions(self, topic: str) -> int:
        """Number of partitions of ``topic`` (0 for a non-partitioned or missing topic)."""
        return int(self.request("GET", self._topic(topic, "/partitions"))["partitions"])

    def create_topic(self, topic: str) -> None:
        """Create a non-partitioned topic."""
        self.request("PUT", self._topic(topic))

    def create_partitioned_topic(self, topic: str, partitions: int) -> None:
        """Create a partitioned topic with ``partitions`` partitions."""
        self.request("PUT", self._topic(topic, "/partitions"), partitions)

    def update_partitioned_topic(self, topic: str, partitions: int) -> None:
        """Raise the partition count of a partitioned topic to ``partitions``."""
        self.request("POST", self._topic(topic, "/partitions"), partitions)

    def unload_topic(self, topic: str) -> None:
        """Unload ``topic`` (clients see a disconnect and reconnect)."""
        self.request("PUT", self._topic(topic, "/unload"))

    def terminate_topic(self, topic: str) -> Any:
        """Terminate ``topic`` (all partitions if partitioned); returns the broker's reply."""
        if self.partitions(topic) > 0:
            return self.request("POST", self._topic(topic, "/terminate/partitions"))
        return self.request("POST", self._topic(topic, "/terminate"))

    def topic_stats(self, topic: str) -> dict[str, Any]:
        """Topic stats as JSON (partitioned-stats for a partitioned topic)."""
        if self.partitions(topic) > 0:
            return self.request("GET", self._topic(topic, "/partitioned-stats"))  # type: ignore[no-any-return]
        return self.request("GET", self._topic(topic, "/stats"))  # type: ignore[no-any-return]

    def delete_topic(self, topic: str, force: bool = True) -> None:
        """Delete ``topic`` (partitioned or not); ``force`` drops producers/consumers too."""
        suffix = "/partitions" if self.partitions(topic) > 0 else ""
        self.request("DELETE", self._topic(topic, suffix) + f"?force={str(force).lower()}")

    def list_topics(self, namespace: str = "public/default") -> list[str]:
        """Persistent topics (including partitions) in ``namespace``."""
        return list(self.request("GET", f"/admin/v2/persistent/{_ns_path(namespace)}"))

    def create_namespace(self, namespace: str) -> None:
        """Create ``namespace`` (``tenant/ns``); an existing namespace is not an error."""
        try:
            self.request("PUT", f"/admin/v2/namespaces/{_ns_path(namespace)}")
        except AdminError as exc:
            if exc.status != 409:
                raise

    def set_deduplication(self, namespace: str, enabled: bool) -> None:
        """Turn message deduplication on or off for ``namespace``."""
        self.request("POST", f"/admin/v2/namespaces/{_ns_path(namespace)}/deduplication", bool(enabled))


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # urllib follows 307 only for GET and HEAD; we follow every method ourselves, alike.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


class RedirectingAdmin(Admin):
    """:class:`Admin` whose calls follow redirects for every method, to loopback only: a
    broker that does not own a topic answers 307 to the one that does."""

    def _base_url(self) -> str:
        return self.admin_url

    def request(self, method: str, path: str, body: Any = None) -> Any:
        url = self._base_url() + path
        data = None if body is None else json.dumps(body).encode()
        for _ in range(8):
            req = self._new_request(url, data, method)
            req.add_header("Accept", "application/json")
            if data is not None:
                req.add_header("Content-Type", "application/json")
            try:
                with _OPENER.open(req, timeout=self.timeout) as resp:
                    text = resp.read().decode("utf-8", "replace")
                break
            except urllib.error.HTTPError as exc:
                location = exc.headers.get("Location")
                if exc.code not in _REDIRECTS or not location:
                    raise AdminError(method, url, exc.code, exc.read().decode("utf-8", "replace")) from None
                target = urllib.parse.urljoin(url, location)
                if urllib.parse.urlsplit(target).hostname not in _LOCAL_HOSTS:
                    raise AdminError(method, url, exc.code, f"redirect off this machine: {target}") from None
                url = target
        else:
            raise AdminError(method, url, 310, "too many redirects")
        return _answer(text)

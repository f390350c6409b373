"""The admin helpers tests use, on :mod:`magnetar.admin`'s transport (the engine's HTTP, with
its redirects and 503 retries) plus a raw ``request`` for calls the tests make by path."""

from __future__ import annotations

import json
import os
import urllib.parse
import urllib.request
from typing import Any

from .. import Authentication
from ..admin import Admin as _UserAdmin
from ..admin import AdminError as _UserAdminError
from ..admin._call import Request, Steps
from ._errors import AdminError

__all__ = ["Admin", "RedirectingAdmin"]


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


def _raw(method: str, path: str, body: Any) -> Steps[Any]:
    answer = yield Request(method, path, body)
    return _answer(answer.body.decode("utf-8", "replace"))


class Admin:
    """Pulsar admin helpers for tests, over :class:`magnetar.admin.Admin`.

    Topic arguments take a full name (``persistent://tenant/ns/name``), ``tenant/ns/name``
    or a short name (``persistent://public/default/<name>``). Namespaces take
    ``tenant/ns`` or ``ns`` (tenant ``public``).
    """

    def __init__(self, admin_url: str, *, timeout: float = 30.0, token: str | None = None) -> None:
        self._admin_url = admin_url.rstrip("/")
        self.timeout = timeout
        self.token = token
        """Bearer token for a broker with authentication enabled."""
        self._admins: dict[tuple[int, str, str | None], _UserAdmin] = {}

    def _new_request(self, url: str) -> urllib.request.Request:
        """A bare urllib GET with the token: the start-up probe polls a JVM that is not
        listening yet, which the engine's connect retries would only slow down."""
        req = urllib.request.Request(url)
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        return req

    @property
    def admin_url(self) -> str:
        """Base HTTP URL of the admin API, e.g. ``http://127.0.0.1:8080``."""
        return self._admin_url

    def _base_url(self) -> str:
        return self.admin_url

    def admin(self) -> _UserAdmin:
        """The :class:`magnetar.admin.Admin` these helpers use (one per process, URL and token:
        an engine client does not survive a fork)."""
        key = (os.getpid(), self._base_url(), self.token)
        if key not in self._admins:
            auth = Authentication.token(self.token) if self.token else None
            self._admins[key] = _UserAdmin(key[1], authentication=auth, operation_timeout=self.timeout)
        return self._admins[key]

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """Send ``method path`` (``path`` starts with ``/admin/...``) with an optional JSON body,
        following redirects to the owning broker for every method.

        Returns the decoded JSON reply, the raw text if it is not JSON, or None if empty.
        Raises :class:`AdminError` on an HTTP error status.
        """
        admin = self.admin()
        try:
            return admin.run(_raw(method, path, body))
        except _UserAdminError as exc:
            raise AdminError(method, admin.service_url + path, exc.status, exc.reason) from None

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


class RedirectingAdmin(Admin):
    """:class:`Admin` whose base URL a subclass may move (``_base_url``: a cluster's first live
    broker); redirects are followed as by every :class:`Admin`."""

"""What ``magnetar.admin`` does with answers no healthy broker gives on demand: a 503 retried
with backoff, a 307 followed with the same method and body, statuses mapped to errors. A web
server on loopback plays the broker; the broker's own redirects are covered by
tests/test_cluster.py."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from magnetar.admin import AdminError, BadRequest, Conflict, NotFound, PreconditionFailed, ServiceUnavailable

from test_admin import Twin


class FakeBroker:
    """Answers each request with the next of ``script`` (status, body, headers) and records
    ``(method, path, body)``."""

    def __init__(self) -> None:
        self.script: list[tuple[int, Any, dict[str, str]]] = []
        self.seen: list[tuple[str, str, bytes]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                fake.seen.append((self.command, self.path, self.rfile.read(length)))
                status, body, headers = fake.script.pop(0) if fake.script else (200, None, {})
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = _answer  # noqa: N815 - http.server's names

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True, name="fake broker").start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake() -> Iterator[FakeBroker]:
    f = FakeBroker()
    yield f
    f.close()


def test_a_503_is_retried_with_backoff(fake: FakeBroker, api_kind: str) -> None:
    twin = Twin(api_kind, fake.url)
    try:
        fake.script = [(503, {"reason": "bundle loading"}, {})] * 2 + [(200, ["a", "b"], {})]
        assert twin.tenants.list() == ["a", "b"]
        assert len(fake.seen) == 3
        fake.seen.clear()
        fake.script = [(503, {"reason": "still loading"}, {})] * 10
        with pytest.raises(ServiceUnavailable, match="still loading"):
            twin.tenants.list()
        assert len(fake.seen) == 5
    finally:
        twin.close()


def test_a_307_is_followed_with_the_same_method_and_body(fake: FakeBroker, api_kind: str) -> None:
    owner = FakeBroker()
    twin = Twin(api_kind, fake.url)
    try:
        path = "/admin/v2/namespaces/public/ns/retention"
        fake.script = [(307, None, {"Location": f"{owner.url}{path}?authoritative=true"})]
        twin.namespaces.set_retention("public/ns", size_mb=5, time_minutes=7)
        body = {"retentionSizeInMB": 5, "retentionTimeInMinutes": 7}
        assert [(m, p, json.loads(b)) for m, p, b in fake.seen] == [("POST", path, body)]
        assert [(m, p, json.loads(b)) for m, p, b in owner.seen] == [("POST", path + "?authoritative=true", body)]
    finally:
        twin.close()
        owner.close()


@pytest.mark.parametrize("status, error", [(400, BadRequest), (404, NotFound), (409, Conflict),
                                           (412, PreconditionFailed), (500, AdminError)])
def test_statuses_map_to_errors_with_the_reason(fake: FakeBroker, status: int, error: type, api_kind: str) -> None:
    twin = Twin(api_kind, fake.url)
    try:
        fake.script = [(status, {"reason": f"because {status}"}, {})]
        with pytest.raises(AdminError) as info:
            twin.topics.delete("persistent://t/ns/x", force=True)
        assert type(info.value) is error
        assert info.value.status == status and info.value.reason == f"because {status}"
        assert str(info.value) == f"GET /admin/v2/persistent/t/ns/x/partitions: HTTP {status}: because {status}"
    finally:
        twin.close()

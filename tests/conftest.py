"""Shared fixtures: one real Pulsar standalone broker per test session, started by
magnetar's own launcher on free loopback ports."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import magnetar
from magnetar.testing import Standalone
from magnetar.testing.faults import FaultProxy, free_ports, proxied_broker_conf

from waiting import bounded


# The multi-broker cluster's scenarios start four JVMs of their own, and so does the Spark
# standalone cluster: `pytest tests` leaves them out; `scripts/dev cluster` and `scripts/dev
# spark-cluster` name the file, and a file named on the command line is collected.
collect_ignore = ["test_cluster.py", "test_cluster_migration.py", "test_spark_cluster.py"]


@pytest.fixture(scope="session")
def broker() -> Iterator[Standalone]:
    with Standalone(port=0) as b:
        yield b


# The secured broker's roles allowed everything; any other authenticated role is refused by
# authorization.
TOKEN_ROLE, BASIC_USER, TLS_ROLE, OAUTH_ROLE = "magnetar-token", "magnetar-basic", "magnetar-tls", "magnetar-oauth"
BASIC_PASSWORD = "open sesame"


@pytest.fixture(scope="session")
def secured() -> Iterator[Standalone]:
    """One broker with TLS (binary and web), the token, basic and TLS providers at once, expired
    credentials challenged every second, and two more listeners: ``external`` on 127.0.0.2 and
    ``sni``, which advertises the host name ``localhost`` (brokers behind an SNI proxy must)."""
    broker = Standalone(port=0, tls=True, tls_names=("127.0.0.1", "localhost"), auth=True,
                        auth_refresh_check_seconds=1,
                        super_users=(TOKEN_ROLE, BASIC_USER, TLS_ROLE, OAUTH_ROLE, "tool-made"),
                        basic_users={BASIC_USER: BASIC_PASSWORD},
                        listeners={"external": "127.0.0.2", "sni": "localhost"})
    with broker:
        # A JVM takes seconds to start: the tool runs while the other tests do.
        broker.tool = broker.tokens_tool("tool-made")  # type: ignore[attr-defined]
        yield broker
        broker.tool.kill()  # type: ignore[attr-defined]


# A name no resolver knows, in the second broker's certificate: only an SNI proxy reaches it.
SNI_NAME = "cluster.pulsar.test"


@pytest.fixture(scope="session")
def second_broker() -> Iterator[tuple[Standalone, FaultProxy]]:
    """A second broker, for the failover and SNI tests, and the fault proxy in front of its
    plain port, which it advertises (every plain connection of a client goes through the
    proxy). Its TLS port is advertised as ``localhost``, and its certificate names ``localhost``
    and :data:`SNI_NAME`."""
    plain, tls = free_ports(2)
    conf = proxied_broker_conf(plain)
    conf["advertisedListeners"] += f",internal:pulsar+ssl://localhost:{tls}"
    with Standalone(port=0, tls=True, tls_port=tls, tls_names=(SNI_NAME, "localhost"), extra_conf=conf) as b, \
            FaultProxy(b.port, listen_port=plain) as proxy:
        yield b, proxy


@pytest.fixture(scope="session")
def spark(broker: Standalone) -> Iterator[Any]:
    """One local[2] Spark session with the ``pulsar`` data source, shared by the Spark test
    modules (a session costs a JVM start). Stopped, and this process's cached data-source
    clients closed, before the broker stops."""
    import magnetar.spark as ms
    from jvm import local_spark

    session = local_spark(2, "magnetar-tests")
    session.dataSource.register(ms.PulsarDataSource)
    yield session
    session.stop()
    ms.close_all()


@pytest.fixture
def conf(service_url: str) -> Any:
    """The data source's client configuration for the suite's broker (a ``ClientConfig``)."""
    from magnetar.spark import ClientConfig

    return ClientConfig(service_url, operation_timeout=20.0)


@pytest.fixture(scope="session")
def service_url(broker: Standalone) -> str:
    return broker.service_url


@pytest.fixture
def topic() -> str:
    """A fresh topic name."""
    return f"persistent://public/default/t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def client(service_url: str) -> Iterator[magnetar.Client]:
    c = magnetar.Client(service_url, operation_timeout=20.0)
    yield c
    c.close()


@pytest.fixture
def clients() -> Iterator[Callable[..., magnetar.Client]]:
    """Makes clients (short timeouts and backoff, so injected faults resolve quickly) and closes
    them all at the end, each close bounded."""
    made: list[magnetar.Client] = []

    def make(url: str, **kw: Any) -> magnetar.Client:
        kw.setdefault("operation_timeout", 10.0)
        kw.setdefault("connect_timeout", 5.0)
        kw.setdefault("max_backoff", 1.0)
        c = magnetar.Client(url, **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        bounded(c.close, 30, "client.close()")


@pytest.fixture(params=["sync", "async"])
def api(request: Any, service_url: str) -> Iterator["Api"]:
    """The same operations through `Client` and through `AsyncClient`."""
    a = Api(request.param, service_url)
    yield a
    a.close()


class Api:
    """A tiny facade over both twins: each method runs the sync call, or the async one on a
    private event loop, so a test states a behaviour once and checks it in both styles."""

    def __init__(self, kind: str, url: "str | magnetar.AutoClusterFailover", **options: Any) -> None:
        self.kind = kind
        self.loop = asyncio.new_event_loop() if kind == "async" else None
        options.setdefault("operation_timeout", 20.0)
        if kind == "sync":
            self.client: Any = magnetar.Client(url, **options)
        else:
            self.client = self.run(_make_async_client(url, options))

    @classmethod
    def of(cls, client: magnetar.Client) -> "Api":
        """A blocking facade around a client the test made (and closes) itself."""
        api = cls.__new__(cls)
        api.kind, api.loop, api.client = "sync", None, client
        return api

    def run(self, coro: Any) -> Any:
        assert self.loop is not None
        return self.loop.run_until_complete(coro)

    def call(self, obj: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        result = getattr(obj, method)(*args, **kwargs)
        if self.kind == "async" and asyncio.iscoroutine(result):
            return self.run(result)
        return result

    def close(self) -> None:
        self.call(self.client, "close")
        if self.loop is not None:
            self.loop.close()


async def _make_async_client(url: "str | magnetar.AutoClusterFailover", options: dict[str, Any]) -> magnetar.AsyncClient:
    return magnetar.AsyncClient(url, **options)


@pytest.fixture(params=["sync", "async"])
def api_kind(request: Any) -> str:
    """"sync" or "async", for tests that build their own :class:`Api` with client options."""
    return str(request.param)


def pytest_report_header(config: Any) -> str:
    return f"magnetar {magnetar.__version__}, pid {os.getpid()}"

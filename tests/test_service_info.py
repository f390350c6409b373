"""Switching a client to another cluster by the application: ``Client.switch_service``, and
``magnetar.compat``'s ``ServiceInfoProvider`` on top of it.

The client starts on ``primary``, the suite's second broker (conftest ``second_broker``) behind
its fault proxy, and switches to ``secondary``, the suite's broker behind a proxy of its own
that counts the connections the client opens to it (the fixtures of tests/test_failover.py).
The secured broker checks per-cluster credentials.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable

import pytest

import magnetar
from magnetar.testing import Standalone
from magnetar.testing.faults import FaultProxy

from conftest import TOKEN_ROLE, Api
from test_failover import primary, read_all, secondary  # noqa: F401



def new_topic() -> str:
    return f"persistent://public/default/switch-{uuid.uuid4().hex[:10]}"


def test_producers_and_consumers_move_to_the_new_cluster(primary: FaultProxy, secondary: FaultProxy, broker: Standalone,
                                                         api_kind: str) -> None:
    topic = new_topic()
    twin = Api(api_kind, primary.service_url, connect_timeout=5, max_backoff=0.5)
    sent: dict[str, list[bytes]] = {}
    received: list[bytes] = []
    try:
        producer = twin.call(twin.client, "create_producer", topic, batching=False)
        consumer = twin.call(twin.client, "subscribe", topic, "s", initial_position="earliest")

        def send_and_receive(phase: str) -> None:
            sent[phase] = [f"{phase}-{i}".encode() for i in range(5)]
            for payload in sent[phase]:
                twin.call(producer, "send", payload)
            for _ in sent[phase]:
                msg = twin.call(consumer, "receive", timeout=15)
                received.append(msg.data)
                twin.call(consumer, "ack", msg)

        send_and_receive("before")
        assert secondary.accepted == 0
        twin.client.switch_service(secondary.service_url)
        assert twin.client.service_url == secondary.service_url
        send_and_receive("after")  # the producer and the consumer reattach on the secondary cluster
        assert secondary.accepted > 0
    finally:
        twin.close()
    # Every message exactly once, in order, on the cluster in use when it was sent.
    assert received == sent["before"] + sent["after"]
    assert read_all(primary.service_url, topic) == sent["before"]
    assert read_all(broker.service_url, topic) == sent["after"]


def test_pending_messages_are_resent_on_the_new_cluster(primary: FaultProxy, broker: Standalone) -> None:
    topic = new_topic()
    with magnetar.Client(primary.service_url, operation_timeout=20, connect_timeout=5, max_backoff=0.5) as client:
        producer = client.create_producer(topic, batching=False)
        producer.send(b"primary")
        # The primary cluster hears nothing more, so these are pending when the client switches.
        primary.blackhole(direction="up")
        futures = [producer.send_async(f"pending-{i}".encode()) for i in range(5)]
        client.switch_service(broker.service_url)
        ids = [f.result(timeout=20) for f in futures]
    # The silenced path dies with what it holds: healed as it is, the proxy would still hand
    # the primary broker the sends it held (their connection open upstream), which is a late
    # delivery by the network, not something the client did.
    primary.drop_connections("rst")
    primary.heal()
    assert len(set(ids)) == 5
    assert read_all(broker.service_url, topic) == [f"pending-{i}".encode() for i in range(5)]
    assert read_all(primary.service_url, topic) == [b"primary"]


def test_switching_connects_nothing_until_something_needs_it(primary: FaultProxy, secondary: FaultProxy) -> None:
    before = primary.accepted  # its proxy serves the whole session
    with magnetar.Client(primary.service_url) as client:
        client.switch_service(secondary.service_url)
        assert client.state == "idle"
        assert client.stats()["connections_opened"] == 0
        client.create_producer(new_topic()).send(b"x")
        assert primary.accepted == before, "the first cluster was dialled after the switch"
        assert secondary.accepted >= 1


def test_credentials_and_trust_file_are_per_cluster(broker: Standalone, secured: Standalone) -> None:
    topic = new_topic()
    with magnetar.Client(broker.service_url) as client:
        client.create_producer(topic).send(b"plain")
        client.switch_service(secured.service_url_tls,
                              authentication=magnetar.Authentication.token(secured.make_token(TOKEN_ROLE)),
                              tls_trust_certs_file_path=str(secured.ca_cert_path))
        assert client.service_url == secured.service_url_tls
        client.create_producer(topic).send(b"secured")
        # Back to the plain cluster without credentials.
        client.switch_service(broker.service_url, authentication=None, tls_trust_certs_file_path=None)
        client.create_producer(topic).send(b"plain again")
    assert read_all(broker.service_url, topic) == [b"plain", b"plain again"]


@pytest.mark.parametrize("switch, error, message", [
    (lambda c: c.switch_service("ftp://elsewhere"), magnetar.InvalidConfiguration, "ftp://"),
    (lambda c: c.switch_service(None), magnetar.InvalidConfiguration, "service_url"),
    (lambda c: c.switch_service("pulsar+ssl://127.0.0.1:6651", tls_trust_certs_file_path="/no/such/ca.pem"),
     magnetar.InvalidConfiguration, "ca.pem"),
    (lambda c: c.switch_service("pulsar://127.0.0.1:6650", memory_limit=0), TypeError, "memory_limit"),
])
def test_a_bad_switch_raises_and_leaves_the_client_where_it_was(switch: Callable[[Any], None], error: type,
                                                                message: str, broker: Standalone) -> None:
    with magnetar.Client(broker.service_url) as client:
        with pytest.raises(error, match=message):
            switch(client)
        assert client.service_url == broker.service_url
        client.create_producer(new_topic()).send(b"still here")


def test_a_failover_client_and_a_closed_one_refuse_to_switch(broker: Standalone) -> None:
    clusters = magnetar.AutoClusterFailover(broker.service_url, ["pulsar://127.0.0.1:1"], check_interval=60)
    with magnetar.Client(clusters) as client:
        with pytest.raises(magnetar.InvalidConfiguration, match="AutoClusterFailover"):
            client.switch_service("pulsar://127.0.0.1:2")
    client = magnetar.Client(broker.service_url)
    client.close()
    with pytest.raises(magnetar.AlreadyClosed):
        client.switch_service("pulsar://127.0.0.1:2")


class Provider:
    """A ``ServiceInfoProvider`` whose updates the test pushes (the suite's own shape)."""

    def __init__(self, initial: Any) -> None:
        import magnetar.compat as pulsar

        class _Provider(pulsar.ServiceInfoProvider):
            def initial_service_info(inner) -> Any:  # noqa: N805
                return initial

            def initialize(inner, on_service_info_update: Callable[[Any], None]) -> None:  # noqa: N805
                self.callback = on_service_info_update

            def close(inner) -> None:  # noqa: N805
                self.closed += 1

        self.provider = _Provider()
        self.callback: Callable[[Any], None] | None = None
        self.closed = 0


def test_the_compat_provider_moves_the_client(primary: FaultProxy, broker: Standalone) -> None:
    import magnetar.compat as pulsar

    topic = new_topic()
    provider = Provider(pulsar.ServiceInfo(primary.service_url))
    client = pulsar.Client(provider.provider, operation_timeout_seconds=20)
    try:
        assert client.get_service_info().service_url == primary.service_url
        producer = client.create_producer(topic)
        producer.send(b"on the primary")
        assert provider.callback is not None
        with pytest.raises(ValueError):
            provider.callback("pulsar://not-a-service-info")
        target = pulsar.ServiceInfo(broker.service_url)
        provider.callback(target)
        assert client.get_service_info() is target
        producer.send(b"on the secondary")
    finally:
        client.close()
    assert provider.closed == 1
    provider.callback(pulsar.ServiceInfo(primary.service_url))  # after close: logged, ignored
    assert read_all(broker.service_url, topic) == [b"on the secondary"]
    assert read_all(primary.service_url, topic) == [b"on the primary"]


def test_the_compat_client_refuses_an_invalid_provider() -> None:
    import magnetar.compat as pulsar

    class Invalid(pulsar.ServiceInfoProvider):
        def initial_service_info(self) -> Any:
            return "pulsar://127.0.0.1:6650"

        def initialize(self, on_service_info_update: Callable[[Any], None]) -> None:
            pass

    with pytest.raises(ValueError, match="ServiceInfo"):
        pulsar.Client(Invalid())


def test_the_official_suites_provider_test_passes(broker: Standalone) -> None:
    """The conformance test ``test_service_info_provider_client``, on this suite's broker."""
    import magnetar.compat as pulsar

    provider = Provider(pulsar.ServiceInfo(broker.service_url))
    client = pulsar.Client(provider.provider)
    assert client.get_service_info().service_url == broker.service_url
    assert provider.callback is not None
    provider.callback(pulsar.ServiceInfo("pulsar://127.0.0.1:1"))
    assert client.get_service_info().service_url == "pulsar://127.0.0.1:1"
    client.close()
    assert provider.closed == 1

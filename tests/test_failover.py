"""Automatic cluster failover between two real brokers.

The primary is the suite's second broker (conftest ``second_broker``), reached through a fault
proxy (the broker advertises the proxy, so every connection of the client to that cluster goes
through it): refusing and
dropping the proxy's connections makes the primary unreachable, and letting them through again
brings it back, without the cost of restarting a JVM. The secondary is the suite's broker,
also behind a proxy of its own, which counts the connections the client opens to it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import magnetar
from magnetar.testing import Standalone
from magnetar.testing.faults import FaultProxy

from conftest import Api
from waiting import wait_until


@pytest.fixture
def primary(second_broker: tuple[Standalone, FaultProxy]) -> Iterator[FaultProxy]:
    proxy = second_broker[1]
    yield proxy
    proxy.heal()


@pytest.fixture
def secondary(broker: Standalone) -> Iterator[FaultProxy]:
    with FaultProxy(broker.port) as proxy:
        yield proxy


def read_all(url: str, topic: str) -> list[bytes]:
    with magnetar.Client(url, operation_timeout=20) as client:
        reader = client.create_reader(topic, start=magnetar.MessageId.earliest)
        got = []
        while reader.has_message_available():
            got.append(reader.read_next(timeout=15).data)
        return got


def test_producers_follow_the_failover_and_back(primary: FaultProxy, secondary: FaultProxy, broker: Standalone,
                                                api_kind: str) -> None:
    topic = f"persistent://public/default/failover-{uuid.uuid4().hex[:10]}"
    clusters = magnetar.AutoClusterFailover(primary.service_url, [secondary.service_url], check_interval=0.1,
                                            failover_delay=0.3, switch_back_delay=0.3)
    twin = Api(api_kind, clusters, operation_timeout=20, connect_timeout=2, max_backoff=0.5)
    try:
        producer = twin.call(twin.client, "create_producer", topic, batching=False)
        sent: dict[str, list[bytes]] = {}

        def send(phase: str) -> None:
            sent[phase] = [f"{phase}-{i}".encode() for i in range(5)]
            for payload in sent[phase]:
                twin.call(producer, "send", payload)

        send("before")
        assert twin.client.service_url == primary.service_url
        # The primary answers its probes, and the secondary is left alone meanwhile.
        probes = primary.accepted
        assert primary.wait_for(lambda p: p.accepted >= probes + 3, timeout=10)
        assert secondary.accepted == 0

        primary.refuse(True)
        primary.drop_connections()
        send("during")  # waits for the switch: the producer reconnects to the secondary
        assert wait_until(lambda: twin.client.service_url == secondary.service_url, 10)
        send("after")

        primary.refuse(False)
        assert wait_until(lambda: twin.client.service_url == primary.service_url, 10)
        send("back")
    finally:
        twin.close()
    on_primary = read_all(primary.service_url, topic)
    on_secondary = read_all(broker.service_url, topic)
    # Every message exactly once, in order, on the cluster that was in use when it was sent.
    assert on_primary == sent["before"] + sent["back"]
    assert on_secondary == sent["during"] + sent["after"]


def test_a_consumer_moves_with_the_client(primary: FaultProxy, secondary: FaultProxy, broker: Standalone) -> None:
    topic = f"persistent://public/default/failover-{uuid.uuid4().hex[:10]}"
    clusters = magnetar.AutoClusterFailover(primary.service_url, [secondary.service_url], check_interval=0.1,
                                            failover_delay=0.3, switch_back_delay=60)
    with magnetar.Client(clusters, operation_timeout=20, connect_timeout=2, max_backoff=0.5) as client:
        consumer = client.subscribe(topic, "s", initial_position="earliest")
        primary.refuse(True)
        primary.drop_connections()
        try:
            assert wait_until(lambda: client.service_url == secondary.service_url, 10)
            with magnetar.Client(broker.service_url) as other:
                other.create_producer(topic).send(b"on the secondary")
            assert consumer.receive(timeout=15).data == b"on the secondary"
            assert client.service_url == secondary.service_url  # switch_back_delay not reached
        finally:
            primary.refuse(False)


@pytest.mark.parametrize("build, message", [
    (lambda: magnetar.AutoClusterFailover("pulsar://a:6650", []), "secondaries"),
    (lambda: magnetar.AutoClusterFailover("pulsar://a:6650", "pulsar://b:6650"), "secondaries"),
    (lambda: magnetar.AutoClusterFailover("", ["pulsar://b:6650"]), "primary"),
    (lambda: magnetar.AutoClusterFailover("pulsar://a:6650", ["pulsar://b"], check_interval=0), "check_interval"),
    (lambda: magnetar.AutoClusterFailover("pulsar://a:6650", ["pulsar://b"], failover_delay=-1), "failover_delay"),
    (lambda: magnetar.Client(magnetar.AutoClusterFailover("pulsar://a:6650", ["ftp://b"])), "ftp://b"),
])
def test_bad_failover_settings_are_configuration_errors(build: Any, message: str) -> None:
    with pytest.raises(magnetar.InvalidConfiguration, match=message):
        build()


def test_the_compat_client_fails_over_too(primary: FaultProxy, secondary: FaultProxy) -> None:
    import magnetar.compat as pulsar

    failover = pulsar.AutoClusterFailover(pulsar.ServiceInfo(primary.service_url),
                                          [pulsar.ServiceInfo(secondary.service_url)], check_interval_ms=100)
    client = pulsar.Client(failover)
    try:
        assert client.get_service_info().service_url == primary.service_url
        primary.refuse(True)
        primary.drop_connections()
        assert wait_until(lambda: client.get_service_info().service_url == secondary.service_url, 10)
        primary.refuse(False)
        assert wait_until(lambda: client.get_service_info().service_url == primary.service_url, 10)
    finally:
        primary.refuse(False)
        client.close()

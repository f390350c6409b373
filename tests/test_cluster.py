"""Smoke scenarios on a real two-broker cluster (magnetar.testing.Cluster): the multi-host
service URL, a topic moved between brokers, its owner killed.

Runs only through ``scripts/dev cluster`` (conftest.py leaves it out of the main suite); the
longer cluster scenarios belong here too. ``MAGNETAR_CLUSTER_LOAD_MANAGER=extensible`` runs them
on the extensible load manager instead of the modular one.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator

import pytest

import magnetar
import magnetar.admin
from magnetar.testing import AdminError, Cluster

from waiting import bounded, wait_until

NAMESPACE = "public/cluster-smoke"

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=2, load_manager=os.environ.get("MAGNETAR_CLUSTER_LOAD_MANAGER", "modular")) as c:
        c.create_namespace(NAMESPACE)
        # A producer resending what a killed broker had already written must not duplicate it.
        c.set_deduplication(NAMESPACE, True)
        yield c


@pytest.fixture
def client(cluster: Cluster) -> Iterator[magnetar.Client]:
    c = magnetar.Client(cluster.service_url, operation_timeout=30.0, connect_timeout=5.0, max_backoff=1.0)
    yield c
    bounded(c.close, 30, "client.close()")


def _topic(prefix: str) -> str:
    return f"persistent://{NAMESPACE}/{prefix}-{uuid.uuid4().hex[:10]}"


def _payloads(start: int, stop: int) -> list[bytes]:
    return [b"m%04d" % i for i in range(start, stop)]


def _receive(consumer: magnetar.Consumer, n: int, timeout: float = 120.0) -> list[bytes]:
    """Up to ``n`` payloads, each acked as it comes, within ``timeout`` s."""
    got: list[bytes] = []

    def more() -> bool:
        for msg in consumer.receive_many(n - len(got), timeout=0.5):
            consumer.ack(msg)
            got.append(msg.data)
        return len(got) >= n

    wait_until(more, timeout, period=0)
    return got


def _owner_is(cluster: Cluster, topic: str, index: int) -> bool:
    try:
        return cluster.owner(topic) == index
    except (AdminError, OSError):  # a lookup while ownership changes hands
        return False


def test_round_trip_through_the_multi_host_service_url(cluster: Cluster, client: magnetar.Client) -> None:
    assert cluster.service_url == "pulsar://" + ",".join(f"127.0.0.1:{b.port}" for b in cluster.brokers)
    topic = _topic("round-trip")
    consumer = client.subscribe(topic, "sub", initial_position="earliest")
    producer = client.create_producer(topic)
    producer.send_many(_payloads(0, 20))
    assert _receive(consumer, 20) == _payloads(0, 20)


def test_a_transaction_commits_through_the_cluster_coordinator(cluster: Cluster, client: magnetar.Client) -> None:
    topic = _topic("txn")
    consumer = client.subscribe(topic, "sub", initial_position="earliest")
    producer = client.create_producer(topic)
    txn = client.new_transaction(timeout=60)
    producer.send_many(_payloads(0, 10), txn=txn)
    txn.commit()
    assert txn.state == "committed"
    assert _receive(consumer, 10) == _payloads(0, 10)


def test_admin_calls_to_the_non_owner_follow_its_redirect(cluster: Cluster) -> None:
    topic = _topic("redirect")
    cluster.create_topic(topic)
    other = cluster.brokers[1 - cluster.owner(topic)]
    unload = urllib.request.Request(other.web_url + other._topic(topic, "/unload"), method="PUT")
    with pytest.raises(urllib.error.HTTPError) as answer:  # urllib follows 307 for GET only
        urllib.request.urlopen(unload, timeout=30)
    assert answer.value.code == 307
    other.unload_topic(topic)  # the same PUT through the helper, which follows it
    # magnetar.admin at the broker that does not own the topic: a PUT with a body, a GET and a
    # DELETE, each redirected to the owner.
    other = cluster.brokers[1 - cluster.owner(topic)]
    with magnetar.admin.Admin(other.web_url) as admin:
        admin.topics.create_subscription(topic, "via-redirect", start=magnetar.MessageId.earliest)
        assert admin.topics.subscriptions(topic) == ["via-redirect"]
        admin.topics.delete_subscription(topic, "via-redirect")
        assert admin.topics.subscriptions(topic) == []


def test_a_topic_unloaded_to_the_other_broker_loses_and_repeats_nothing(
        cluster: Cluster, client: magnetar.Client) -> None:
    topic = _topic("move")
    consumer = client.subscribe(topic, "sub", initial_position="earliest")
    producer = client.create_producer(topic, name="mover")
    producer.send_many(_payloads(0, 200))
    source = cluster.owner(topic)
    cluster.unload(topic, to=1 - source)
    assert cluster.owner(topic) == 1 - source
    producer.send_many(_payloads(200, 400))
    assert _receive(consumer, 400) == _payloads(0, 400)
    assert consumer.receive_many(10, timeout=1.0) == []  # nothing twice
    assert producer.name == "mover"


def test_the_survivor_takes_over_from_a_killed_owner_and_nothing_is_lost(
        cluster: Cluster, client: magnetar.Client) -> None:
    topic = _topic("kill")
    consumer = client.subscribe(topic, "sub", initial_position="earliest")
    producer = client.create_producer(topic, name="survivor", send_timeout=90.0)
    producer.send_many(_payloads(0, 200))
    victim = cluster.owner(topic)
    try:
        # Some of these are in flight when the owner dies, the rest wait for the survivor.
        receipts = [producer.send_async(p) for p in _payloads(200, 300)]
        cluster.kill(victim)
        receipts += [producer.send_async(p) for p in _payloads(300, 400)]
        bounded(producer.flush, 120, "producer.flush() after the owner's kill")
        assert [r.exception() for r in receipts] == [None] * 200
        assert wait_until(lambda: _owner_is(cluster, topic, 1 - victim), 60, period=0.5)
        assert _receive(consumer, 400) == _payloads(0, 400)
        assert consumer.receive_many(10, timeout=1.0) == []
    finally:
        cluster.restart(victim)
    assert cluster.brokers[victim].alive


def test_a_producer_and_consumer_follow_a_transfer_to_the_owner_the_broker_names(
        cluster: Cluster, client: magnetar.Client) -> None:
    """The extensible load manager's broker names the new owner when it closes a producer and a
    consumer for a transfer (``assignedBrokerServiceUrl``): both go straight there, without a
    lookup. The modular one names none, and both look the topic up again."""
    topic = _topic("assigned")
    consumer = client.subscribe(topic, "sub", initial_position="earliest")
    producer = client.create_producer(topic, name="assigned")
    producer.send_many(_payloads(0, 50))
    assert _receive(consumer, 50) == _payloads(0, 50)
    before = client.stats()["lookups"]
    source = cluster.owner(topic)
    cluster.unload(topic, to=1 - source)
    producer.send_many(_payloads(50, 100))
    assert _receive(consumer, 50) == _payloads(50, 100)
    lookups = client.stats()["lookups"] - before
    if cluster.load_manager == "extensible":
        assert lookups == 0, "the producer or the consumer looked the topic up instead of going to the named owner"
    else:
        assert lookups >= 2, "a modular transfer names no owner: both must have looked the topic up"

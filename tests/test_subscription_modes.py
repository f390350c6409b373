"""Key_Shared sticky ranges and out-of-order delivery, pattern subscriptions over persistent and
non-persistent topics, and compat's message router and listener name, on the real broker."""

from __future__ import annotations

import uuid
from typing import Any, Iterator

import pytest

import magnetar
import magnetar.compat as pulsar
from magnetar.testing import Standalone


@pytest.fixture
def compat(service_url: str) -> Iterator[pulsar.Client]:
    c = pulsar.Client(service_url)
    yield c
    c.close()


def drain(consumer: Any, receive: Any) -> list[Any]:
    """Every message the consumer has until none comes for a second."""
    out: list[Any] = []
    while True:
        try:
            msg = receive(consumer)
        except (magnetar.Timeout, pulsar.Timeout):
            return out
        out.append(msg)


# -- Key_Shared ----------------------------------------------------------------------------------


def test_sticky_ranges_split_keys_between_consumers(client: magnetar.Client, topic: str, broker: Standalone) -> None:
    # Uneven ranges: the broker's auto split would halve the hash space instead.
    ranges = [[(0, 9999), (40000, 49999)], [(10000, 39999), (50000, 65535)]]
    consumers = [client.subscribe(topic, "ks", subscription_type="key_shared", key_shared_mode="sticky",
                                  key_shared_ranges=r, allow_out_of_order_delivery=True) for r in ranges]
    producer = client.create_producer(topic, batching=False)
    for i in range(60):
        producer.send(f"{i}".encode(), key=f"key-{i % 20}")
    got = [drain(c, lambda c: c.receive(1.0)) for c in consumers]
    assert sorted(int(m.data) for ms in got for m in ms) == list(range(60))
    for mine, msgs in zip(ranges, got):
        # The broker places a key by Murmur3_32 of the key modulo 65536.
        hashes = {magnetar._core._key_hash(m.key, "murmur3") % 65536 for m in msgs}
        assert hashes and all(any(a <= h <= b for a, b in mine) for h in hashes), (mine, hashes)
    sub = broker.topic_stats(topic)["subscriptions"]["ks"]
    assert sub["keySharedMode"] == "STICKY" and sub["allowOutOfOrderDelivery"] is True


def test_sticky_ranges_another_consumer_holds_are_refused(client: magnetar.Client, topic: str) -> None:
    client.subscribe(topic, "ks", subscription_type="key_shared", key_shared_mode="sticky",
                     key_shared_ranges=[(0, 1000)])
    with pytest.raises(magnetar.PulsarError):
        client.subscribe(topic, "ks", subscription_type="key_shared", key_shared_mode="sticky",
                         key_shared_ranges=[(500, 2000)])


@pytest.mark.parametrize("options", [
    dict(subscription_type="key_shared", key_shared_mode="sticky"),
    dict(subscription_type="key_shared", key_shared_ranges=[(0, 10)]),
    dict(subscription_type="key_shared", key_shared_mode="sticky", key_shared_ranges=[(0, 65536)]),
    dict(subscription_type="key_shared", key_shared_mode="sticky", key_shared_ranges=[(10, 5)]),
    dict(subscription_type="key_shared", key_shared_mode="sticky", key_shared_ranges=[(0, 10), (10, 20)]),
    dict(subscription_type="key_shared", key_shared_mode="sticky", key_shared_ranges="0-10"),
    dict(subscription_type="shared", allow_out_of_order_delivery=True),
    dict(subscription_type="key_shared", key_shared_mode="round_robin"),
])
def test_key_shared_options_are_checked(client: magnetar.Client, topic: str, options: dict[str, Any]) -> None:
    with pytest.raises(magnetar.InvalidConfiguration):
        client.subscribe(topic, "ks", **options)


def test_compat_sticky_key_shared_policy(compat: pulsar.Client, topic: str, broker: Standalone) -> None:
    """The official API's sticky ranges reach the broker: each consumer gets exactly the keys
    whose hash falls in its own (uneven, so unlike any automatic split) ranges."""
    ranges = [[(0, 9999), (40000, 49999)], [(10000, 39999), (50000, 65535)]]

    def policy(mine: list[tuple[int, int]]) -> pulsar.ConsumerKeySharedPolicy:
        return pulsar.ConsumerKeySharedPolicy(key_shared_mode=pulsar.KeySharedMode.Sticky,
                                              allow_out_of_order_delivery=True, sticky_ranges=mine)

    consumers = [compat.subscribe(topic, "ks", consumer_type=pulsar.ConsumerType.KeyShared, key_shared_policy=policy(r))
                 for r in ranges]
    producer = compat.create_producer(topic)
    for i in range(60):
        producer.send(b"%d" % i, partition_key=f"key-{i % 20}")
    got = [drain(c, lambda c: c.receive(1000)) for c in consumers]
    assert sorted(int(m.data()) for ms in got for m in ms) == list(range(60))
    for mine, msgs in zip(ranges, got):
        # The broker places a key by Murmur3_32 of the key modulo 65536.
        hashes = {magnetar._core._key_hash(m.partition_key(), "murmur3") % 65536 for m in msgs}
        assert hashes and all(any(a <= h <= b for a, b in mine) for h in hashes), (mine, hashes)
    assert broker.topic_stats(topic)["subscriptions"]["ks"]["keySharedMode"] == "STICKY"


# -- pattern subscriptions -----------------------------------------------------------------------


@pytest.mark.parametrize("mode, wanted", [("persistent", {"p"}), ("non_persistent", {"np"}), ("all", {"p", "np"})])
def test_pattern_topics_pick_the_domains(client: magnetar.Client, mode: str, wanted: set[str]) -> None:
    base = f"rx-{uuid.uuid4().hex[:8]}"
    topics = {"p": f"persistent://public/default/{base}-p", "np": f"non-persistent://public/default/{base}-np"}
    # The topics exist (the non-persistent one only while a producer is on it) before the
    # pattern is resolved; messages to a non-persistent topic reach only attached consumers.
    producers = {k: client.create_producer(t, batching=False) for k, t in topics.items()}
    consumer = client.subscribe(f"{base}-.*", "rx", pattern=True, pattern_topics=mode, subscription_type="shared")
    for k, p in producers.items():
        p.send(k.encode())
    got = {m.data.decode(): m.topic for m in drain(consumer, lambda c: c.receive(1.0))}
    assert set(got) == wanted
    assert all(got[k] == topics[k] for k in wanted)


def test_compat_regex_subscription_modes(compat: pulsar.Client) -> None:
    import re

    base = f"rx-{uuid.uuid4().hex[:8]}"
    topics = {"p": f"persistent://public/default/{base}-p", "np": f"non-persistent://public/default/{base}-np"}
    producers = {k: compat.create_producer(t) for k, t in topics.items()}
    modes = {pulsar.RegexSubscriptionMode.AllTopics: {"p", "np"},
             pulsar.RegexSubscriptionMode.PersistentOnly: {"p"},
             pulsar.RegexSubscriptionMode.NonPersistentOnly: {"np"}}
    consumers = {mode: compat.subscribe(re.compile(f"public/default/{base}-.*"), f"rx-{mode.name}",
                                        consumer_type=pulsar.ConsumerType.Shared, regex_subscription_mode=mode)
                 for mode in modes}
    for k, p in producers.items():
        p.send(k.encode())
    for mode, wanted in modes.items():
        got = {m.data().decode(): m.topic_name() for m in drain(consumers[mode], lambda c: c.receive(1000))}
        assert set(got) == wanted, mode
        assert all(got[k] == topics[k] for k in wanted)


# -- compat message router and listener name -----------------------------------------------------


def test_compat_message_router_sees_the_message(compat: pulsar.Client, broker: Standalone) -> None:
    topic = f"persistent://public/default/router-{uuid.uuid4().hex[:8]}"
    broker.create_partitioned_topic(topic, 4)

    def router(msg: pulsar.Message, partitions: int) -> int:
        assert msg.data() == msg.value()
        return 3 if msg.value().startswith(b"three") else 1

    producer = compat.create_producer(topic, message_router=router)
    consumer = compat.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    for payload in (b"three-a", b"one-a", b"three-b"):
        producer.send(payload)
    got = {m.data(): m.message_id().partition() for m in drain(consumer, lambda c: c.receive(1000))}
    assert got == {b"three-a": 3, b"one-a": 1, b"three-b": 3}


def test_compat_message_router_with_a_schema(compat: pulsar.Client, broker: Standalone) -> None:
    from magnetar.compat.schema import StringSchema

    topic = f"persistent://public/default/router-{uuid.uuid4().hex[:8]}"
    broker.create_partitioned_topic(topic, 2)
    seen: list[Any] = []

    def router(msg: pulsar.Message, partitions: int) -> int:
        seen.append(msg.value())
        return 1

    producer = compat.create_producer(topic, schema=StringSchema(), message_router=router)
    assert producer.send("text").partition() == 1
    assert seen == ["text"]


def test_compat_listener_name_reaches_the_lookup(service_url: str, topic: str) -> None:
    # The test broker advertises no listener of that name, so the lookup fails: the name was sent.
    client = pulsar.Client(service_url, listener_name="no-such-listener", operation_timeout_seconds=5)
    try:
        with pytest.raises(pulsar.PulsarException):
            client.create_producer(topic)
    finally:
        client.close()

"""Redelivery as the Java client offers it, against a real broker: the retry letter topic
(``enable_retry``, ``reconsume_later``, shared with a Java consumer), redelivery backoff
(``nack_backoff``, ``ack_timeout_backoff``), a consumer that nacks without stalling, the
zero-queue consumer, the receiver queue shared across partitions, and a consumer that starts
paused. Each behaviour is checked through ``Client`` and ``AsyncClient`` (the ``api`` fixture)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

import magnetar
from jvm import java_program
from waiting import wait_until

INTEROP_DIR = __import__("pathlib").Path(__file__).with_name("interop")


def _sub() -> str:
    return f"s-{uuid.uuid4().hex[:8]}"


def _drain(api: Any, consumer: Any, timeout: float = 1.0) -> list[Any]:
    out = []
    while True:
        try:
            out.append(api.call(consumer, "receive", timeout=timeout))
        except magnetar.Timeout:
            return out


# --------------------------------------------------------------------------- retry letter topic


def test_reconsume_later_retries_through_the_retry_topic_then_dead_letters(api, topic):
    sub = _sub()
    dlq = api.call(api.client, "subscribe", f"{topic}-{sub}-DLQ", "dlq", initial_position="earliest")
    producer = api.call(api.client, "create_producer", topic, batching=False)
    consumer = api.call(api.client, "subscribe", topic, sub, subscription_type="shared",
                        initial_position="earliest", enable_retry=True, max_redeliver_count=2)
    assert f"{topic}-{sub}-RETRY" in consumer.topics
    first_id = api.call(producer, "send", b"again", key="k", properties={"app": "x"})
    msg = api.call(consumer, "receive", timeout=10)
    assert msg.message_id == first_id
    origin = f"{first_id.ledger_id}:{first_id.entry_id}:{first_id.partition}"
    for attempt in (1, 2):
        sent_at = time.monotonic()
        api.call(consumer, "reconsume_later", msg, delay=0.5, properties={"why": f"try {attempt}"})
        msg = api.call(consumer, "receive", timeout=30)
        # Delivered after the delay (deliverAfter): never sooner.
        assert time.monotonic() - sent_at >= 0.45
        assert msg.topic == f"{topic}-{sub}-RETRY"
        assert msg.data == b"again" and msg.key == "k"
        assert msg.properties == {"app": "x", "why": f"try {attempt}", "RECONSUMETIMES": str(attempt),
                                  "DELAY_TIME": "500", "REAL_TOPIC": topic, "ORIGIN_MESSAGE_ID": origin,
                                  "ORIGIN_MESSAGE_IDY_TIME": origin}
    # The third retry is one too many: dead-lettered at once, the copy acknowledged.
    api.call(consumer, "reconsume_later", msg, delay=0.5)
    dead = api.call(dlq, "receive", timeout=10)
    assert dead.data == b"again"
    assert dead.properties["RECONSUMETIMES"] == "3" and dead.properties["REAL_TOPIC"] == topic
    assert _drain(api, consumer) == []
    api.call(consumer, "close")
    # Everything was acknowledged: the original and each retry copy.
    again = api.call(api.client, "subscribe", topic, sub, subscription_type="shared", enable_retry=True)
    assert _drain(api, again) == []


def test_retry_topic_names_and_refusals(client, topic):
    sub = _sub()
    named = client.subscribe(topic, sub, enable_retry=True, retry_letter_topic=topic + "-mine",
                             subscription_type="shared")
    assert set(named.topics) == {topic, topic + "-mine"}
    named.close()
    plain = client.subscribe(topic, _sub())
    client.create_producer(topic, batching=False).send(b"x")
    with pytest.raises(magnetar.InvalidConfiguration, match="enable_retry"):
        plain.reconsume_later(plain.receive(timeout=10), delay=1.0)
    with pytest.raises(magnetar.InvalidConfiguration, match="enable_retry"):
        client.subscribe(topic, _sub(), retry_letter_topic=topic + "-r")
    with pytest.raises(magnetar.InvalidConfiguration, match="pattern"):
        client.subscribe("persistent://public/default/t-.*", _sub(), pattern=True, enable_retry=True)


@pytest.fixture(scope="module")
def java_retry(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return java_program(tmp_path_factory.mktemp("java-retry"), INTEROP_DIR / "RetryInterop.java")


@pytest.mark.interop
def test_a_java_consumer_and_magnetar_share_a_retry_topic(broker, client, topic, java_retry):
    """magnetar retries a message, the Java client (default retry topic, same subscription)
    receives the copy from the retry topic and retries it again, and magnetar receives that:
    the names and properties agree both ways."""
    sub = _sub()
    producer = client.create_producer(topic, batching=False)
    first_id = producer.send(b"shared", properties={"app": "x"})
    origin = f"{first_id.ledger_id}:{first_id.entry_id}:{first_id.partition}"
    consumer = client.subscribe(topic, sub, subscription_type="shared", initial_position="earliest",
                                enable_retry=True)
    consumer.reconsume_later(consumer.receive(timeout=10), delay=0.2)
    consumer.close()

    out = java_retry("reconsume", broker.service_url, topic, sub, "1", "300")
    rows = [line.split("\t") for line in out if line.startswith("MSG\t")]
    assert len(rows) == 1, out
    _, java_topic, payload, props = rows[0]
    assert java_topic == f"{topic}-{sub}-RETRY" and payload == "shared"
    seen = dict(kv.split("=", 1) for kv in props.split(","))
    assert seen["RECONSUMETIMES"] == "1" and seen["DELAY_TIME"] == "200"
    assert seen["REAL_TOPIC"] == topic and seen["ORIGIN_MESSAGE_ID"] == origin and seen["app"] == "x"

    consumer = client.subscribe(topic, sub, subscription_type="shared", enable_retry=True)
    back = consumer.receive(timeout=30)
    assert back.topic == f"{topic}-{sub}-RETRY" and back.data == b"shared"
    assert back.properties["RECONSUMETIMES"] == "2" and back.properties["DELAY_TIME"] == "300"
    assert back.properties["REAL_TOPIC"] == topic and back.properties["ORIGIN_MESSAGE_ID"] == origin
    consumer.ack(back)
    consumer.close()


# --------------------------------------------------------------------------- backoff


def test_backoff_is_a_checked_value():
    b = magnetar.Backoff(min_delay=0.1, max_delay=10.0, multiplier=2.0)
    assert [b.delay(n) for n in range(4)] == [0.1, 0.2, 0.4, 0.8]
    assert b.delay(100) == 10.0 and b.delay(10_000) == 10.0
    assert magnetar.Backoff() == magnetar.Backoff(10.0, 600.0, 2.0)
    with pytest.raises(AttributeError):
        b.min_delay = 1.0  # type: ignore[misc]
    for bad in ({"min_delay": -1}, {"max_delay": 1.0, "min_delay": 2.0}, {"multiplier": 0.5},
                {"multiplier": float("nan")}, {"min_delay": "1"}):
        with pytest.raises(magnetar.InvalidConfiguration):
            magnetar.Backoff(**bad)


def test_backoff_options_are_checked(client, topic):
    with pytest.raises(magnetar.InvalidConfiguration, match="nack_backoff"):
        client.subscribe(topic, _sub(), nack_backoff=(0.1, 1.0, 2.0))
    with pytest.raises(magnetar.InvalidConfiguration, match="ack_timeout"):
        client.subscribe(topic, _sub(), ack_timeout_backoff=magnetar.Backoff(1.0, 2.0))


def test_nack_backoff_grows_with_the_redelivery_count(api, topic):
    """Each redelivery of a negatively acked message waits min_delay * 2**count (within
    max_delay): 0.3, 0.6, 1.2, then 1.5 s. The broker's delivery adds its own latency, so each
    gap is checked from below, and against the next step of the backoff from above."""
    backoff = magnetar.Backoff(min_delay=0.3, max_delay=1.5, multiplier=2.0)
    producer = api.call(api.client, "create_producer", topic, batching=False)
    consumer = api.call(api.client, "subscribe", topic, _sub(), subscription_type="shared",
                        initial_position="earliest", nack_backoff=backoff, nack_redelivery_delay=60.0)
    api.call(producer, "send", b"n")
    msg = api.call(consumer, "receive", timeout=10)
    gaps = []
    for count in range(4):
        assert msg.redelivery_count == count
        t0 = time.monotonic()
        api.call(consumer, "nack", msg)
        msg = api.call(consumer, "receive", timeout=30)
        gaps.append(time.monotonic() - t0)
    api.call(consumer, "ack", msg)
    for count, gap in enumerate(gaps):
        want = backoff.delay(count)
        assert want * 0.9 <= gap < want + 1.0, (count, gaps)


def test_ack_timeout_backoff_adds_its_delay_to_the_ack_timeout(api, topic):
    backoff = magnetar.Backoff(min_delay=0.5, max_delay=2.0, multiplier=4.0)
    producer = api.call(api.client, "create_producer", topic, batching=False)
    consumer = api.call(api.client, "subscribe", topic, _sub(), subscription_type="shared",
                        initial_position="earliest", ack_timeout=1.0, ack_timeout_backoff=backoff)
    api.call(producer, "send", b"slow")
    api.call(consumer, "receive", timeout=10)
    gaps = []
    for count in (1, 2):
        t0 = time.monotonic()
        msg = api.call(consumer, "receive", timeout=30)
        gaps.append(time.monotonic() - t0)
        assert msg.redelivery_count == count
    api.call(consumer, "ack", msg)
    # 1 s timeout + 0.5 s for the first delivery; 1 s + 2 s (0.5 * 4, the maximum) for the next.
    assert 1.4 <= gaps[0] < 1.5 + 1.5, gaps
    assert 2.9 <= gaps[1] < 3.0 + 1.5, gaps


# --------------------------------------------------------------------------- the nack stall


def test_a_nacked_message_does_not_hold_back_the_rest_of_its_batches(client, topic):
    """With batch-index acks (the broker's acknowledgmentAtBatchIndexLevelEnabled, on in the
    test broker) a batch whose one message is nacked no longer counts against the broker's
    unacked limit: a Shared consumer that nacks one message per batch receives far more than
    maxUnackedMessagesPerConsumer (50,000) messages while the nacked ones wait."""
    n = 60_000
    with client.create_producer(topic, batch_max_messages=1000) as producer:
        producer.send_many([b"%d" % i for i in range(n)])
    consumer = client.subscribe(topic, _sub(), subscription_type="shared", initial_position="earliest",
                                batch_index_ack=True, nack_redelivery_delay=300.0)
    got = nacked = 0
    while got < n:
        msgs = consumer.receive_many(max_messages=1000, timeout=20)
        assert msgs, f"stalled after {got} of {n} messages ({nacked} nacked)"
        acks = []
        for m in msgs:
            got += 1
            if m.message_id.batch_index == 500:
                consumer.nack(m)
                nacked += 1
            else:
                acks.append(m)
        consumer.ack_many(acks)
    assert nacked >= 55
    consumer.close()


# --------------------------------------------------------------------------- zero queue


def test_a_zero_queue_consumer_never_prefetches(api, topic):
    producer = api.call(api.client, "create_producer", topic, batching=False)
    sub = _sub()
    zero = api.call(api.client, "subscribe", topic, sub, subscription_type="shared", receiver_queue_size=0)
    other = api.call(api.client, "subscribe", topic, sub, subscription_type="shared", receiver_queue_size=0)
    for i in range(10):
        api.call(producer, "send", b"%d" % i)
    first = api.call(zero, "receive", timeout=10)
    api.call(zero, "ack", first)
    # The first consumer asked for one message only: the other takes all the rest.
    rest = [api.call(other, "receive", timeout=10) for _ in range(9)]
    assert sorted(m.data for m in [first, *rest]) == sorted(b"%d" % i for i in range(10))
    with pytest.raises(magnetar.Timeout):
        api.call(zero, "receive", timeout=0.5)
    api.call(producer, "send", b"late")
    assert api.call(zero, "receive", timeout=10).data == b"late"


def test_a_zero_queue_consumer_refuses_batches_and_several_topics(client, topic):
    with pytest.raises(magnetar.InvalidConfiguration, match="one topic"):
        client.subscribe([topic, topic + "-b"], _sub(), receiver_queue_size=0)
    with pytest.raises(magnetar.InvalidConfiguration, match="reader"):
        client.create_reader(topic, receiver_queue_size=0)
    zero = client.subscribe(topic, _sub(), receiver_queue_size=0)
    client.create_producer(topic, batching=True).send(b"batched")
    with pytest.raises(magnetar.InvalidConfiguration, match="batched"):
        zero.receive(timeout=10)


# --------------------------------------------------------------------------- queue across partitions


def test_the_receiver_queue_is_shared_across_partitions(client, broker):
    topic = f"persistent://public/default/p-{uuid.uuid4().hex[:10]}"
    broker.create_partitioned_topic(topic, 4)
    sub = _sub()
    consumer = client.subscribe(topic, sub, receiver_queue_size=1000,
                                max_total_receiver_queue_size_across_partitions=40)
    with client.create_producer(topic, batching=False) as producer:
        for i in range(200):
            producer.send(b"%d" % i, key=str(i))
    # Each of the 4 partitions was given 40 / 4 = 10 permits: 40 queued, and the broker
    # holds the rest back (no permits left on any partition).
    assert wait_until(lambda: consumer.stats()[0]["queued"] == 40, 10)
    stats = consumer.stats()
    assert [s["available_permits"] for s in stats] == [0, 0, 0, 0]
    assert stats[0]["queued"] == 40
    got = 0
    while got < 200:
        msgs = consumer.receive_many(max_messages=100, timeout=10)
        assert msgs
        consumer.ack_many(msgs)
        got += len(msgs)


# --------------------------------------------------------------------------- start paused


def test_a_consumer_started_paused_gets_nothing_until_resumed(api, topic):
    producer = api.call(api.client, "create_producer", topic, batching=False)
    consumer = api.call(api.client, "subscribe", topic, _sub(), initial_position="earliest", start_paused=True)
    api.call(producer, "send", b"held")
    with pytest.raises(magnetar.Timeout):
        api.call(consumer, "receive", timeout=1.0)
    consumer.resume()
    assert api.call(consumer, "receive", timeout=10).data == b"held"


# --------------------------------------------------------------------------- compat


def test_compat_honours_a_zero_queue_and_the_total_queue(broker, topic):
    import magnetar.compat as pulsar

    c = pulsar.Client(broker.service_url)
    try:
        sub = _sub()
        zero = c.subscribe(topic, sub, consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=0)
        other = c.subscribe(topic, sub, consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=0)
        producer = c.create_producer(topic, batching_enabled=False)
        for i in range(5):
            producer.send(b"%d" % i)
        first = zero.receive(10_000)
        rest = [other.receive(10_000) for _ in range(4)]
        assert sorted(m.data() for m in [first, *rest]) == [b"%d" % i for i in range(5)]
    finally:
        c.close()

"""Interceptors, the consumer event listener, non-durable consumers and reader listeners,
against the broker, through the blocking and the asyncio client alike (the ``api`` fixture)."""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Any

import pytest

import magnetar
from magnetar import _interceptors
from magnetar._client import Consumer, Producer

from conftest import Api
from jvm import java_program
from waiting import wait_until

WAIT = 30.0


class ProducerRecorder(magnetar.ProducerInterceptor):
    """Marks every payload and property, and records the outcomes."""

    def __init__(self) -> None:
        self.before: list[bytes] = []
        self.outcomes: list[tuple[bytes, Any, Any]] = []
        self.lock = threading.Lock()

    def before_send(self, producer: Any, data: Any, fields: dict[str, Any]) -> Any:
        self.before.append(data)
        fields["properties"] = {**(fields.get("properties") or {}), "seen": "yes"}
        return data + b"!"

    def on_send_acknowledgement(self, producer: Any, data: Any, fields: Any, message_id: Any, error: Any) -> None:
        with self.lock:
            self.outcomes.append((data, message_id, error))


class Raising(magnetar.ProducerInterceptor, magnetar.ConsumerInterceptor):
    """Every hook raises: logged, never in the way."""

    def before_send(self, *args: Any) -> Any:
        raise RuntimeError("before_send")

    def on_send_acknowledgement(self, *args: Any) -> None:
        raise RuntimeError("on_send_acknowledgement")

    def before_consume(self, *args: Any) -> Any:
        raise RuntimeError("before_consume")

    def on_acknowledge(self, *args: Any) -> None:
        raise RuntimeError("on_acknowledge")

    def on_negative_acks_send(self, *args: Any) -> None:
        raise RuntimeError("on_negative_acks_send")

    def on_ack_timeout_send(self, *args: Any) -> None:
        raise RuntimeError("on_ack_timeout_send")


class ConsumerRecorder(magnetar.ConsumerInterceptor):
    def __init__(self) -> None:
        self.consumed: list[Any] = []
        self.acked: list[tuple[Any, Any]] = []
        self.cumulative: list[Any] = []
        self.nacks_sent: list[Any] = []
        self.timed_out: list[Any] = []

    def before_consume(self, consumer: Any, message: Any) -> Any:
        self.consumed.append(message.message_id)
        return message

    def on_acknowledge(self, consumer: Any, message_id: Any, error: Any) -> None:
        self.acked.append((message_id, error))

    def on_acknowledge_cumulative(self, consumer: Any, message_id: Any, error: Any) -> None:
        self.cumulative.append(message_id)

    def on_negative_acks_send(self, consumer: Any, message_ids: Any) -> None:
        self.nacks_sent.extend(message_ids)

    def on_ack_timeout_send(self, consumer: Any, message_ids: Any) -> None:
        self.timed_out.extend(message_ids)


def test_handles_without_interceptors_are_the_plain_classes(client: magnetar.Client, topic: str) -> None:
    with client.create_producer(topic) as p, client.subscribe(topic, "s") as c:
        assert type(p) is Producer and type(c) is Consumer
    with client.create_producer(topic, interceptors=[ProducerRecorder()]) as p:
        assert type(p) is not Producer and isinstance(p, Producer) and type(p).__name__ == "Producer"


def test_producer_interceptors_see_every_send_and_its_receipt(api: Api, topic: str,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    rec = ProducerRecorder()
    consumer = api.call(api.client, "subscribe", topic, "s", initial_position="earliest")
    producer = api.call(api.client, "create_producer", topic, interceptors=[Raising(), rec])
    with caplog.at_level(logging.ERROR, logger="magnetar"):
        ids = [api.call(producer, "send", b"a", key="k")]
        ids += api.call(producer, "send_many", [b"b", b"c"], keys=["k", None])
        if api.kind == "sync":
            ids.append(producer.send_async(b"d").result(WAIT))
        assert wait_until(lambda: len(rec.outcomes) == len(ids), WAIT)
    sent = [b"a", b"b", b"c", b"d"][:len(ids)]
    assert rec.before == sent
    assert sorted((d, i) for d, i, _ in rec.outcomes) == sorted(zip([s + b"!" for s in sent], ids))
    assert all(e is None for _, _, e in rec.outcomes)
    got = [api.call(consumer, "receive", WAIT) for _ in ids]
    assert [m.data for m in got] == [s + b"!" for s in sent]
    assert all(m.properties == {"seen": "yes"} for m in got)
    assert got[0].key == "k"
    assert "interceptor" in caplog.text and "before_send" in caplog.text
    api.call(producer, "close")
    api.call(consumer, "close")


def test_a_failed_send_reaches_the_interceptor(api: Api, topic: str) -> None:
    rec = ProducerRecorder()
    producer = api.call(api.client, "create_producer", topic, interceptors=[rec])
    api.call(producer, "close")
    with pytest.raises(magnetar.AlreadyClosed):
        api.call(producer, "send", b"late")
    assert [(d, i, type(e)) for d, i, e in rec.outcomes] == [(b"late!", None, magnetar.AlreadyClosed)]


def test_consumer_interceptors_see_receives_acks_nacks_and_ack_timeouts(api: Api, topic: str) -> None:
    rec = ConsumerRecorder()
    consumer = api.call(api.client, "subscribe", topic, "s", subscription_type="shared", initial_position="earliest",
                        interceptors=[Raising(), rec], ack_timeout=1.0, nack_redelivery_delay=0.1)
    producer = api.call(api.client, "create_producer", topic, batching=False)
    ids = [api.call(producer, "send", p) for p in (b"acked", b"nacked", b"forgotten")]
    got = [api.call(consumer, "receive", WAIT) for _ in ids]
    assert sorted(m.message_id for m in got) == sorted(ids)
    assert rec.consumed == [m.message_id for m in got]
    by_data = {m.data: m for m in got}
    api.call(consumer, "ack", by_data[b"acked"])
    api.call(consumer, "nack", by_data[b"nacked"])
    # The nacked message comes back once its delay ends, the forgotten one after the ack
    # timeout: each reported once asked for again (Java's onNegativeAcksSend/onAckTimeoutSend).
    assert wait_until(lambda: ids[1] in rec.nacks_sent and ids[2] in rec.timed_out, WAIT)
    assert rec.acked == [(ids[0], None)]
    again = {api.call(consumer, "receive", WAIT).message_id for _ in range(2)}
    assert again == {ids[1], ids[2]}
    api.call(consumer, "close")
    api.call(producer, "close")


def test_cumulative_acks_and_receipts_reach_the_interceptor(api: Api, topic: str) -> None:
    rec = ConsumerRecorder()
    consumer = api.call(api.client, "subscribe", topic, "s", initial_position="earliest", interceptors=[rec])
    # Unbatched: a message of a batch is confirmed only with its whole batch.
    producer = api.call(api.client, "create_producer", topic, batching=False)
    ids = api.call(producer, "send_many", [b"1", b"2", b"3"])
    got = api.call(consumer, "receive_many", 3, WAIT)
    while len(got) < 3:
        got += api.call(consumer, "receive_many", 3 - len(got), WAIT)
    api.call(consumer, "ack_with_receipt", got[0])
    api.call(consumer, "ack_cumulative", got[2])
    assert rec.consumed == ids
    assert rec.acked == [(ids[0], None)]
    assert rec.cumulative == [ids[2]]
    api.call(consumer, "close")
    api.call(producer, "close")


def test_a_listener_consumer_is_intercepted(api: Api, topic: str) -> None:
    rec = ConsumerRecorder()
    seen: list[bytes] = []
    if api.kind == "sync":
        def listener(msg: Any) -> None:
            seen.append(msg.data)
    else:
        async def listener(msg: Any) -> None:  # type: ignore[misc]
            seen.append(msg.data)
    consumer = api.call(api.client, "subscribe", topic, "s", initial_position="earliest", interceptors=[rec],
                        listener=listener)
    producer = api.call(api.client, "create_producer", topic)
    ids = api.call(producer, "send_many", [b"1", b"2"])
    if api.kind == "sync":
        assert wait_until(lambda: len(rec.acked) == 2, WAIT)
    else:
        api.run(_until(lambda: len(rec.acked) == 2))
    assert seen == [b"1", b"2"] and rec.consumed == ids and [i for i, _ in rec.acked] == ids
    api.call(consumer, "close")
    api.call(producer, "close")


async def _until(pred: Any) -> None:
    """Lets the event loop run (the asyncio listener's tasks) until ``pred`` holds."""
    async def poll() -> None:
        while not pred():
            await asyncio.sleep(0.02)
    await asyncio.wait_for(poll(), WAIT)


def test_interceptors_must_be_interceptor_objects(client: magnetar.Client, topic: str) -> None:
    with pytest.raises(magnetar.InvalidConfiguration, match="interceptors"):
        client.create_producer(topic, interceptors=[object()])  # type: ignore[list-item]
    with pytest.raises(magnetar.InvalidConfiguration, match="interceptors"):
        client.subscribe(topic, "s", interceptors=[magnetar.ProducerInterceptor()])  # type: ignore[list-item]
    with pytest.raises(magnetar.InvalidConfiguration, match="consumer_event_listener"):
        client.subscribe(topic, "s", consumer_event_listener=print)  # type: ignore[arg-type]


class Events(magnetar.ConsumerEventListener):
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def became_active(self, consumer: Any, partition: int) -> None:
        self.calls.append(("active", partition))

    def became_inactive(self, consumer: Any, partition: int) -> None:
        self.calls.append(("inactive", partition))


def test_failover_consumers_hear_who_is_active(api: Api, topic: str) -> None:
    """As the Java client's ConsumerEventListener: a lone consumer of a Failover subscription
    hears it is active; once a second one joins, the broker makes one of them active (on a
    topic that is not partitioned it picks by a hash of the names) and tells each; when the
    active one leaves, the other hears it became active. (The broker may repeat a notice, as
    it does to the Java client.)"""
    first, second = Events(), Events()
    c1 = api.call(api.client, "subscribe", topic, "fo", subscription_type="failover", consumer_name="a",
                  consumer_event_listener=first)
    assert wait_until(lambda: first.calls[-1:] == [("active", -1)], WAIT)
    c2 = api.call(api.client, "subscribe", topic, "fo", subscription_type="failover", consumer_name="b",
                  consumer_event_listener=second)
    states = lambda: {first.calls[-1][0], second.calls[-1][0] if second.calls else None}  # noqa: E731
    assert wait_until(lambda: states() == {"active", "inactive"}, WAIT), (first.calls, second.calls)
    if first.calls[-1][0] == "active":
        active, standby, standby_events = c1, c2, second
    else:
        active, standby, standby_events = c2, c1, first
    api.call(active, "close")
    assert wait_until(lambda: standby_events.calls[-1:] == [("active", -1)], WAIT), standby_events.calls
    api.call(standby, "close")


def test_failover_events_name_the_partition(client: magnetar.Client, broker: Any, topic: str) -> None:
    broker.create_partitioned_topic(topic, 2)
    events = Events()
    consumer = client.subscribe(topic, "fo", subscription_type="failover", consumer_event_listener=events)
    assert wait_until(lambda: set(events.calls) == {("active", 0), ("active", 1)}, WAIT)
    consumer.close()


def test_a_non_durable_subscription_ends_with_its_consumer(api: Api, broker: Any, topic: str) -> None:
    producer = api.call(api.client, "create_producer", topic)
    consumer = api.call(api.client, "subscribe", topic, "nd", subscription_mode="non_durable")
    api.call(producer, "send", b"old")
    assert api.call(consumer, "receive", WAIT).data == b"old"  # taken, never acked
    assert broker.topic_stats(topic)["subscriptions"]["nd"]["isDurable"] is False
    api.call(consumer, "close")
    assert wait_until(lambda: "nd" not in broker.topic_stats(topic)["subscriptions"], WAIT)
    # Made again at the latest position: the unacknowledged message did not stay behind.
    consumer = api.call(api.client, "subscribe", topic, "nd", subscription_mode=magnetar.SubscriptionMode.NON_DURABLE)
    api.call(producer, "send", b"new")
    assert api.call(consumer, "receive", WAIT).data == b"new"
    api.call(consumer, "close")
    api.call(producer, "close")


def test_a_reader_listener_gets_every_message_in_order(api: Api, topic: str) -> None:
    seen: list[bytes] = []

    def record(msg: Any) -> None:
        seen.append(msg.data)
        if msg.data == b"1":
            raise RuntimeError("a reader listener that raises is logged; reading goes on")

    if api.kind == "sync":
        listener: Any = record
    else:
        async def listener(msg: Any) -> None:
            record(msg)
    producer = api.call(api.client, "create_producer", topic)
    api.call(producer, "send_many", [b"1", b"2"])
    reader = api.call(api.client, "create_reader", topic, magnetar.MessageId.earliest, listener=listener,
                      subscription_role_prefix="role")
    api.call(producer, "send", b"3")
    if api.kind == "sync":
        assert wait_until(lambda: len(seen) == 3, WAIT)
    else:
        api.run(_until(lambda: len(seen) == 3))
    assert seen == [b"1", b"2", b"3"]
    api.call(reader, "close")
    api.call(producer, "close")


def test_the_reader_subscription_takes_the_role_prefix(client: magnetar.Client, broker: Any, topic: str) -> None:
    client.create_producer(topic).close()
    with client.create_reader(topic, subscription_role_prefix="team"):
        names = list(broker.topic_stats(topic)["subscriptions"])
    assert len(names) == 1 and names[0].startswith("team-reader-")


def test_hooks_wait_for_the_handle_they_report_on() -> None:
    """Events that arrive while ``subscribe`` is still making the handle are delivered when it
    is bound, in order, before later ones."""
    events = Events()
    hooks = _interceptors.ConsumerHooks((), events)
    hooks("active", "persistent://public/default/t-partition-3", None)
    assert events.calls == []

    class Handle:
        pass
    handle = Handle()
    assert hooks.bind(handle) is handle
    hooks("inactive", "persistent://public/default/t-partition-3", None)
    assert events.calls == [("active", 3), ("inactive", 3)]


@pytest.fixture(scope="module")
def java_events(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return java_program(tmp_path_factory.mktemp("java-events"), Path(__file__).with_name("interop") / "FailoverEvents.java")


@pytest.mark.interop
def test_failover_events_match_the_java_clients(client: magnetar.Client, broker: Any, topic: str,
                                                java_events: Any) -> None:
    """The Java client's consumers "a" and "b", then magnetar's of the same names, on the same
    Failover subscription: each hears the same state, and the same one takes over when the
    active one leaves."""
    java = java_events("events", broker.service_url, topic, "fo")
    want = [line for line in java if line.startswith(("STATE", "AFTER"))]
    first, second = Events(), Events()
    c1 = client.subscribe(topic, "fo", subscription_type="failover", consumer_name="a", consumer_event_listener=first)
    assert wait_until(lambda: first.calls[-1:] == [("active", -1)], WAIT)
    c2 = client.subscribe(topic, "fo", subscription_type="failover", consumer_name="b", consumer_event_listener=second)
    states = lambda: (first.calls[-1][0], second.calls[-1][0] if second.calls else None)  # noqa: E731
    assert wait_until(lambda: None not in states() and len(set(states())) == 2, WAIT), (first.calls, second.calls)
    a_state, b_state = states()
    a_active = a_state == "active"
    standby, standby_events = ("b", second) if a_active else ("a", first)
    (c1 if a_active else c2).close()
    assert wait_until(lambda: standby_events.calls[-1:] == [("active", -1)], WAIT), standby_events.calls
    (c2 if a_active else c1).close()
    assert [f"STATE a {a_state}", f"STATE b {b_state}", f"AFTER {standby} active"] == want

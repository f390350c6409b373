"""Client-side statistics: ``Producer.stats()``, the ``"client"`` entry of ``Consumer.stats()``,
``Client.stats()``, ``Client(stats_interval=...)``'s periodic log line, and the per-component
loggers of the engine's records."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from typing import Any

import pytest

import magnetar
from conftest import Api
from waiting import wait_until


def test_producer_stats_count_sends_and_latency(api: Api, topic: str) -> None:
    producer = api.call(api.client, "create_producer", topic, batching=False)
    empty = producer.stats()
    assert (empty["pending"], empty["sent"], empty["failed"]) == (0, 0, 0)
    assert empty["latency_ms"]["count"] == 0
    for i in range(5):
        api.call(producer, "send", f"m{i}".encode())
    api.call(producer, "send_many", [b"a", b"bb", b"ccc"])
    s = producer.stats()
    assert s["sent"] == 8
    assert s["failed"] == 0
    assert s["pending"] == 0
    assert s["sent_bytes"] >= 2 * 5 + 6
    lat = s["latency_ms"]
    assert lat["count"] == 8
    assert 0 < lat["p50"] <= lat["p99"] <= lat["max"] * 1.25 + 0.001
    assert sum(n for _, n in lat["buckets"]) == 8
    api.call(producer, "close")


def test_producer_stats_count_failures(client: magnetar.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching=False)
    producer.send(b"ok")
    futures = [producer.send_async(b"x") for _ in range(3)]
    client.close()  # closes the producer; what was pending either settles or fails
    for f in futures:
        f.exception(timeout=30)
    s = producer.stats()
    assert s["sent"] + s["failed"] == 4
    assert s["pending"] == 0


def test_consumer_stats_keep_broker_figures_and_add_the_clients(api: Api, topic: str) -> None:
    producer = api.call(api.client, "create_producer", topic)
    consumer = api.call(api.client, "subscribe", topic, "s", initial_position="earliest", subscription_type="shared",
                        nack_redelivery_delay=0.05)
    api.call(producer, "send_many", [b"one", b"two", b"three"])
    msgs = [api.call(consumer, "receive", timeout=10) for _ in range(3)]
    api.call(consumer, "ack", msgs[0])
    api.call(consumer, "ack_many", msgs[1:2])
    api.call(consumer, "nack", msgs[2])
    again = api.call(consumer, "receive", timeout=10)
    assert again.redelivery_count >= 1
    api.call(consumer, "ack", again)
    stats = api.call(consumer, "stats")
    assert isinstance(stats, list) and stats
    entry = stats[0]
    assert "msg_backlog" in entry and "available_permits" in entry  # the broker's figures stay
    mine = entry["client"]
    assert mine["received"] == 4
    assert mine["received_bytes"] == len(b"onetwothree") + len(again.data)
    assert mine["redelivered"] == 1
    assert mine["acked"] == 3
    assert mine["nacked"] == 1
    assert mine["dead_lettered"] == 0
    api.call(consumer, "close")
    api.call(producer, "close")


def test_consumer_stats_wait_for_a_reattach(api: Api, topic: str) -> None:
    """A seek makes the broker drop the consumer, which then subscribes again: stats asked for
    in between are the reattached consumer's, not a "not connected" error."""
    producer = api.call(api.client, "create_producer", topic)
    consumer = api.call(api.client, "subscribe", topic, "s", initial_position="earliest")
    api.call(producer, "send", b"one")
    api.call(consumer, "seek", magnetar.MessageId.earliest)
    stats = api.call(consumer, "stats")
    assert stats[0]["msg_backlog"] == 1
    assert api.call(consumer, "receive", timeout=10).data == b"one"
    api.call(consumer, "close")
    api.call(producer, "close")


def test_the_dead_letter_topic_is_created_with_its_initial_subscription(api: Api, topic: str) -> None:
    """A subscription made at ``latest`` after the dead letter was sent still gets it: the
    dead letter producer created the topic with that subscription."""
    producer = api.call(api.client, "create_producer", topic)
    consumer = api.call(api.client, "subscribe", topic, "dl", subscription_type="shared",
                        initial_position="earliest", max_redeliver_count=1, nack_redelivery_delay=0.05,
                        dead_letter_topic=f"{topic}-DLQ", dead_letter_initial_subscription="kept")
    api.call(producer, "send", b"poison")
    for _ in range(2):
        api.call(consumer, "nack", api.call(consumer, "receive", timeout=10))
    assert wait_until(lambda: api.call(consumer, "stats")[0]["client"]["dead_lettered"] == 1, 20)
    kept = api.call(api.client, "subscribe", f"{topic}-DLQ", "kept")  # latest, the default
    assert api.call(kept, "receive", timeout=10).data == b"poison"
    api.call(kept, "close")
    api.call(consumer, "close")
    api.call(producer, "close")


def test_dead_letters_are_counted(client: magnetar.Client, topic: str) -> None:
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "dl", subscription_type="shared", initial_position="earliest",
                                max_redeliver_count=1, nack_redelivery_delay=0.05,
                                dead_letter_topic=f"{topic}-DLQ")
    dlq = client.subscribe(f"{topic}-DLQ", "dl-check", initial_position="earliest")
    producer.send(b"poison")
    for _ in range(2):
        consumer.nack(consumer.receive(timeout=10))
    assert dlq.receive(timeout=20).data == b"poison"
    assert wait_until(lambda: consumer.stats()[0]["client"]["dead_lettered"] == 1, 10)


def test_client_stats_count_connections_and_lookups(clients: Any, service_url: str, topic: str) -> None:
    client = clients(service_url)
    assert client.stats()["connections_opened"] == 0
    client.create_producer(topic)
    s = client.stats()
    assert s["connections_opened"] >= 1
    assert s["connections_open"] >= 1
    assert s["connections_failed"] == 0
    assert s["lookups"] >= 1 and s["lookups_failed"] == 0
    assert s["lookup_duration_ms"]["count"] == s["lookups"]
    assert s["metadata_lookups"] >= 1
    client.close()
    closed = client.stats()
    assert closed["connections_closed"] == closed["connections_opened"]


def test_failed_connections_are_counted(clients: Any) -> None:
    client = clients("pulsar://127.0.0.1:1", connect_timeout=0.5, operation_timeout=1.0)
    with pytest.raises(magnetar.PulsarError):
        client.create_producer("persistent://public/default/nowhere")
    assert client.stats()["connections_failed"] >= 1


def test_stats_interval_logs_a_line_per_producer_and_consumer(
        clients: Any, service_url: str, topic: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="magnetar")
    client = clients(service_url, stats_interval=0.2)
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "logged", initial_position="earliest")
    producer.send(b"x")
    consumer.ack(consumer.receive(timeout=10))

    def logged(name: str, text: str) -> bool:
        return any(r.name == name and text in r.getMessage() for r in caplog.records)

    assert wait_until(lambda: logged("magnetar.producer", "sent 1") and logged("magnetar.consumer", "received 1"), 10)
    line = next(r for r in caplog.records if r.name == "magnetar.producer")
    assert topic in line.getMessage() and "latency ms p50" in line.getMessage()


def test_stats_interval_is_off_by_default(clients: Any, service_url: str, topic: str,
                                         caplog: pytest.LogCaptureFixture) -> None:
    """A client left at its defaults logs no statistics line, while a client beside it with
    ``stats_interval=0.2``, doing the same, logs one for its producer several times over."""
    with pytest.raises(magnetar.InvalidConfiguration):
        magnetar.Client(service_url, stats_interval=-1)
    magnetar.Client(service_url, stats_interval=None).close()
    magnetar.Client(service_url, stats_interval=0).close()
    caplog.set_level(logging.INFO, logger="magnetar")
    quiet_topic, logged_topic = topic + "-default", topic + "-logged"
    for c, t in ((clients(service_url), quiet_topic), (clients(service_url, stats_interval=0.2), logged_topic)):
        producer = c.create_producer(t)
        consumer = c.subscribe(t, "s", initial_position="earliest")
        producer.send(b"x")
        consumer.ack(consumer.receive(timeout=10))

    def stats_lines(t: str) -> list[str]:
        """The periodic lines ("producer NAME on TOPIC: ...", "consumer SUB on TOPIC: ...")."""
        return [r.getMessage() for r in caplog.records
                if r.name in ("magnetar.producer", "magnetar.consumer") and f" on {t}: " in r.getMessage()]

    # several periods of the logging client: its producer and consumer have logged 3 times each
    assert wait_until(lambda: len(stats_lines(logged_topic)) >= 6, 30), stats_lines(logged_topic)
    assert stats_lines(quiet_topic) == []


_COMPONENTS = r"""
import json, logging, sys, time
names = []

class Collect(logging.Handler):
    def emit(self, record):
        names.append(record.name)

logging.getLogger().addHandler(Collect(level=logging.DEBUG))
logging.getLogger("magnetar").setLevel(logging.WARNING)
logging.getLogger("magnetar.connection").setLevel(logging.DEBUG)
logging.getLogger("magnetar.consumer").setLevel(logging.INFO)  # witnesses the stats ticks
import magnetar

def until(pred):
    deadline = time.monotonic() + 20
    while not pred() and time.monotonic() < deadline:
        time.sleep(0.02)

client = magnetar.Client(sys.argv[1], stats_interval=0.05)
producer = client.create_producer(sys.argv[2])
consumer = client.subscribe(sys.argv[2], "components")
producer.send(b"x")
# The producer's line is logged just before the consumer's, in the same tick.
until(lambda: names.count("magnetar.consumer") >= 3)
client.close()
until(lambda: "magnetar.connection" in names)
print(json.dumps(sorted(set(names))))
"""


def test_component_loggers_are_separate(service_url: str, topic: str) -> None:
    """The engine's records go to ``magnetar.connection``, ``magnetar.producer``,
    ``magnetar.consumer`` or ``magnetar.client``: with ``magnetar`` at WARNING and
    ``magnetar.connection`` at DEBUG, the connection's records come and the producer's INFO
    stats lines don't. (A fresh interpreter: the engine caches logger levels for a second.)"""
    out = subprocess.run([sys.executable, "-c", _COMPONENTS, service_url, topic], capture_output=True,
                         text=True, timeout=120, check=True)
    names = json.loads(out.stdout.strip().splitlines()[-1])
    assert "magnetar.connection" in names and "magnetar.consumer" in names, out.stderr
    assert "magnetar.producer" not in names
    assert "magnetar.client" not in names

"""PIP-188 (blue-green) topic migration between two real clusters: the broker of a cluster marked
migrated sends ``TopicMigrated`` naming the other cluster, and producers and consumers follow
there without losing a message.

Two standalone brokers, cluster ``blue`` and cluster ``green``, on loopback ports. Runs only
through ``scripts/dev cluster`` (conftest.py leaves it out of the main suite, like the other
multi-broker files).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest

import magnetar
from magnetar.testing import Standalone

from waiting import bounded, wait_until

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def clusters() -> Iterator[tuple[Standalone, Standalone]]:
    # The blue broker checks every second whether its cluster was marked migrated.
    with Standalone(port=0, extra_conf={"clusterName": "green"}) as green, \
            Standalone(port=0, extra_conf={"clusterName": "blue", "clusterMigrationCheckDurationSeconds": "1"}) as blue:
        yield blue, green


def _has_producer(admin: Standalone, topic: str) -> bool:
    try:
        return bool(admin.topic_stats(topic).get("publishers"))
    except Exception:  # noqa: BLE001 - not there (yet)
        return False


def _subs(admin: Standalone, topic: str) -> object:
    try:
        st = admin.topic_stats(topic)
    except Exception as e:  # noqa: BLE001 - for the failure message
        return repr(e)
    return {"in": st.get("msgInCounter"), "publishers": len(st.get("publishers", [])),
            "subscriptions": {k: {"consumers": len(v.get("consumers", [])), "backlog": v.get("msgBacklog"),
                                  "out": v.get("msgOutCounter")} for k, v in st.get("subscriptions", {}).items()}}


def test_producer_and_consumer_follow_a_topic_migrated_to_another_cluster(
        clusters: tuple[Standalone, Standalone]) -> None:
    blue, green = clusters
    topic = f"persistent://public/default/migrated-{uuid.uuid4().hex[:10]}"
    client = magnetar.Client(blue.service_url, operation_timeout=30.0, max_backoff=1.0)
    got: list[bytes] = []
    errors: list[BaseException] = []
    stop = threading.Event()
    try:
        # Earliest: the subscription the consumer makes on green must hold what the producer
        # sent there before the consumer arrived.
        consumer = client.subscribe(topic, "s", initial_position="earliest")
        producer = client.create_producer(topic)

        def consume() -> None:
            # Waiting in receive while the topic migrates, as an application does.
            while not stop.is_set():
                try:
                    msg = consumer.receive(timeout=0.5)
                except magnetar.Timeout:
                    continue
                except BaseException as e:  # noqa: BLE001 - the test's finding
                    errors.append(e)
                    return
                got.append(msg.data)
                consumer.ack(msg)

        rx = threading.Thread(target=consume, daemon=True)
        rx.start()
        before = [b"blue-%03d" % i for i in range(50)]
        for p in before:
            producer.send(p)
        assert wait_until(lambda: len(got) >= len(before) or bool(errors), 60)

        blue.request("POST", "/admin/v2/clusters/blue/migrate?migrated=true",
                     {"serviceUrl": f"http://127.0.0.1:{green.http_port}", "brokerServiceUrl": green.service_url})
        # The producer re-registers on green (the topic is served there now).
        assert wait_until(lambda: _has_producer(green, topic), 60), "the producer never reached the green cluster"
        after = [b"green-%03d" % i for i in range(50)]
        for p in after:
            producer.send(p)
        assert wait_until(lambda: len(got) >= len(before) + len(after) or bool(errors), 60), (
            f"received {len(got)} of {len(before) + len(after)}; green {_subs(green, topic)}; blue {_subs(blue, topic)}")
        stop.set()
        rx.join(10)
        assert not errors, f"the consumer's receive failed during the migration: {errors!r}"
        assert got == before + after
        green_stats = green.topic_stats(topic)
        assert green_stats["msgInCounter"] == len(after)
        assert green_stats["subscriptions"]["s"]["consumers"], "the consumer is on green"
        assert blue.topic_stats(topic)["msgInCounter"] == len(before), "nothing went to blue after the migration"
    finally:
        stop.set()
        bounded(client.close, 30, "client.close()")

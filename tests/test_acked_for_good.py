"""A message the application acknowledged is never handed to it again within the consumer's
life, even when the broker that confirmed the ack dies before storing it.

A broker confirms an ack at once and stores the subscription's position later (at most
``managedLedgerDefaultMarkDeleteRateLimit`` times a second): killed in between, it sends the
acked messages again when it comes back. Here the broker stores the position rarely (after its
first store, once per 1,000 s), so the acks confirmed before the kill are lost by the broker:
the test can only pass if the client remembers what it acked.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import magnetar
from magnetar.testing.faults import kill9, restart, restartable_broker

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def forgetful_broker() -> Iterator[Any]:
    # One store of each subscription's position per 1,000 s: nothing acked here is stored.
    broker = restartable_broker(extra_conf={"managedLedgerDefaultMarkDeleteRateLimit": "0.001"}, keep_data=False)
    with broker:
        yield broker


def test_messages_acked_before_a_broker_kill_are_not_handed_again(forgetful_broker: Any) -> None:
    topic = f"persistent://public/default/acked-{uuid.uuid4().hex[:8]}"
    with magnetar.Client(forgetful_broker.service_url, operation_timeout=60.0) as client:
        consumer = client.subscribe(topic, "s", subscription_type="shared", initial_position="earliest")
        producer = client.create_producer(topic, batching=False, send_timeout=None)
        for i in range(20):
            producer.send(b"%d" % i)
        for i in range(10):
            msg = consumer.receive(timeout=30)
            consumer.ack_with_receipt(msg)  # the broker confirmed it
        kill9(forgetful_broker)
        restart(forgetful_broker)
        # Back, the broker sends all 20 again (the acks of the first 10 were never stored).
        # The application gets the 10 it did not ack, once each, and no other.
        rest = [consumer.receive(timeout=60) for _ in range(10)]
        assert [m.data for m in rest] == [b"%d" % i for i in range(10, 20)]
        with pytest.raises(magnetar.Timeout):
            consumer.receive(timeout=2)
        # Each copy of an acked message the broker sent again was dropped and counted (the
        # broker may have stored its first position at once: then the first ack is not lost).
        assert consumer.stats()[0]["client"]["acked_before"] >= 9, "the broker did not lose the acks"
        # ... and acked them again, so the broker has them now.
        for m in rest:
            consumer.ack_with_receipt(m)
        consumer.close()
        again = client.subscribe(topic, "s", subscription_type="shared")
        with pytest.raises(magnetar.Timeout):
            again.receive(timeout=2)

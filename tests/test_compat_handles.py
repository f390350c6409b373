"""The accessors the compat blocking and asyncio handles share (magnetar.compat._handles)."""

from __future__ import annotations

import asyncio

import magnetar.compat as pulsar
from magnetar.compat import asyncio as pulsar_asyncio


def test_blocking_and_asyncio_handles_answer_alike(service_url: str, topic: str) -> None:
    client = pulsar.Client(service_url)
    try:
        producer = client.create_producer(topic, producer_name="p-sync")
        consumer = client.subscribe(topic, "s-sync", consumer_name="c-sync")
        producer.send(b"x")
        blocking = (producer.topic(), producer.producer_name(), producer.last_sequence_id(), producer.is_connected(),
                    consumer.topic(), consumer.subscription_name(), consumer.consumer_name(), consumer.is_connected())
    finally:
        client.close()

    async def main() -> tuple[object, ...]:
        aclient = pulsar_asyncio.Client(service_url)
        try:
            aproducer = await aclient.create_producer(topic, producer_name="p-async")
            aconsumer = await aclient.subscribe(topic, "s-async", consumer_name="c-async",
                                                initial_position=pulsar.InitialPosition.Earliest)
            await aproducer.send(b"y")  # the first of this producer name: sequence id 0
            first = await aconsumer.receive()
            # Seek takes the official id, as the blocking twin does; the floor skips up to it.
            await aconsumer.seek(first.message_id())
            assert (await aconsumer.receive()).data() == b"y"
            return (aproducer.topic(), aproducer.producer_name(), aproducer.last_sequence_id(),
                    aproducer.is_connected(), aconsumer.topic(), aconsumer.subscription_name(),
                    aconsumer.consumer_name(), aconsumer.is_connected())
        finally:
            await aclient.close()

    aio = asyncio.run(main())
    assert blocking == (topic, "p-sync", 0, True, topic, "s-sync", "c-sync", True)
    assert aio == (topic, "p-async", 0, True, topic, "s-async", "c-async", True)

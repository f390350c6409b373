"""A seek while the consumer is reattaching (the broker detaches it after every seek) waits for
the reattach instead of failing with "not connected"."""

from __future__ import annotations

import magnetar


def test_seeks_back_to_back_on_a_reader(client: magnetar.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching=False)
    ids = [producer.send(b"%d" % i) for i in range(5)]
    # Latest, inclusive: the reader seeks to the last message itself while it is created.
    reader = client.create_reader(topic, magnetar.MessageId.latest, start_inclusive=True)
    reader.seek(ids[1])
    reader.seek(ids[3])  # the broker is still detaching the reader after the first seek
    assert reader.read_next(10).data == b"3"
    reader.close()

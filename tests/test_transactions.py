"""Transactions against the real broker (its transaction coordinator is on in the test
broker's standalone.conf): isolation of sends, acks undone by abort, the coordinator's
timeout, the first transaction right after a broker starts, use after the end, resuming by id,
the asyncio twin, and the official client reading what a magnetar transaction committed."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import magnetar
import pytest
from magnetar.testing import Standalone
from magnetar.testing._broker_restart import kill9, restart, restartable_broker

from waiting import wait_until

import pulsar  # noqa: E402 - a hard test dependency (requirements-dev.txt): fail, never skip

# How long a receive waits to show that nothing is delivered: the messages in question are
# already stored, so a broker that breaks isolation delivers them well within it.
QUIET = 1.0


@pytest.fixture
def sub() -> str:
    return f"s-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def pair(client: magnetar.Client, topic: str, sub: str) -> Iterator[tuple[magnetar.Producer, magnetar.Consumer]]:
    consumer = client.subscribe(topic, sub, subscription_type="shared", initial_position="earliest")
    producer = client.create_producer(topic)
    yield producer, consumer
    producer.close()
    consumer.close()


def test_messages_of_an_open_transaction_are_invisible_until_commit(
    client: magnetar.Client, pair: tuple[magnetar.Producer, magnetar.Consumer]
) -> None:
    producer, consumer = pair
    txn = client.new_transaction(timeout=60)
    assert txn.state == "open"
    most, least = txn.id
    assert most >= 0 and least >= 0
    producer.send(b"a", txn=txn)
    producer.send_async(b"b", txn=txn)
    with pytest.raises(magnetar.Timeout):
        consumer.receive(timeout=QUIET)
    txn.commit()
    assert txn.state == "committed"
    got = [consumer.receive(timeout=10).data for _ in range(2)]
    assert got == [b"a", b"b"]


@pytest.mark.parametrize("partitions", [0, 3])
def test_send_many_in_a_transaction(client: magnetar.Client, broker: Standalone, topic: str, sub: str,
                                    partitions: int) -> None:
    """send_many(txn=...): every message in the transaction (the one-partition fast path
    included), invisible until commit, dropped by abort."""
    if partitions:
        broker.create_partitioned_topic(topic, partitions)
    consumer = client.subscribe(topic, sub, initial_position="earliest")
    producer = client.create_producer(topic)
    dropped = client.new_transaction()
    producer.send_many([b"x%d" % i for i in range(50)], keys=[f"k{i}" for i in range(50)], txn=dropped)
    dropped.abort()
    txn = client.new_transaction()
    ids = producer.send_many([b"m%d" % i for i in range(50)], keys=[f"k{i}" for i in range(50)], txn=txn)
    assert len(ids) == 50
    assert not client.create_reader(topic if not partitions else f"{topic}-partition-0").has_message_available()
    txn.commit()
    got = sorted(consumer.receive(timeout=10).data for _ in range(50))
    assert got == sorted(b"m%d" % i for i in range(50))
    producer.send(b"end")
    assert consumer.receive(timeout=10).data == b"end"


def test_aborted_messages_never_appear(client: magnetar.Client, pair: tuple[magnetar.Producer, magnetar.Consumer]) -> None:
    producer, consumer = pair
    with pytest.raises(RuntimeError, match="boom"):
        with client.new_transaction() as txn:
            producer.send(b"dropped", txn=txn)
            raise RuntimeError("boom")
    assert txn.state == "aborted"
    producer.send(b"after")
    # Delivery is in order and stops at an open transaction: "after" comes first only if the
    # aborted message is gone for good.
    assert consumer.receive(timeout=10).data == b"after"
    with pytest.raises(magnetar.Timeout):
        consumer.receive(timeout=QUIET)


def test_acks_in_an_aborted_transaction_are_undone(
    client: magnetar.Client, pair: tuple[magnetar.Producer, magnetar.Consumer]
) -> None:
    producer, consumer = pair
    producer.send(b"m")
    msg = consumer.receive(timeout=10)
    txn = client.new_transaction()
    consumer.ack(msg, txn=txn)
    txn.abort()
    again = consumer.receive(timeout=10)
    assert again.data == b"m" and again.message_id == msg.message_id


def test_acks_in_a_committed_transaction_stand(
    client: magnetar.Client, topic: str, sub: str, pair: tuple[magnetar.Producer, magnetar.Consumer]
) -> None:
    producer, consumer = pair
    producer.send(b"m")
    msg = consumer.receive(timeout=10)
    with client.new_transaction() as txn:
        consumer.ack(msg, txn=txn)
    consumer.close()
    producer.send(b"next")
    # A new consumer on the subscription gets everything not acknowledged: only "next".
    again = client.subscribe(topic, sub, subscription_type="shared")
    assert again.receive(timeout=10).data == b"next"
    again.close()


def test_consume_transform_produce_with_cumulative_acks(client: magnetar.Client, topic: str, sub: str) -> None:
    out_topic = f"{topic}-out"
    source = client.create_producer(topic, batching=True, batch_max_delay=0.05)
    source.send_many([b"1", b"2", b"3"])
    consumer = client.subscribe(topic, sub, subscription_type="failover", initial_position="earliest")
    sink = client.create_producer(out_topic)
    reader = client.subscribe(out_topic, "check", initial_position="earliest")
    msgs = [consumer.receive(timeout=10) for _ in range(3)]
    txn = client.new_transaction()
    for m in msgs:
        sink.send(m.data * 2, txn=txn)
    consumer.ack_cumulative(msgs[-1], txn=txn)
    txn.abort()
    # Aborted: nothing written, and the batch comes again from its first message.
    redelivered = [consumer.receive(timeout=10) for _ in range(3)]
    assert [m.data for m in redelivered] == [b"1", b"2", b"3"]
    with client.new_transaction() as txn:
        for m in redelivered:
            sink.send(m.data * 2, txn=txn)
        consumer.ack_cumulative(redelivered[-1], txn=txn)
    assert [reader.receive(timeout=10).data for _ in range(3)] == [b"11", b"22", b"33"]
    with pytest.raises(magnetar.Timeout):
        reader.receive(timeout=QUIET)


def _one_batch(client: magnetar.Client, topic: str, n: int) -> None:
    """``n`` messages ``b"0"``.. stored as one batch entry."""
    client.create_producer(topic, batching=True, batch_max_delay=1.0).send_many([b"%d" % i for i in range(n)])


def _entry_of(msgs: list[magnetar.Message]) -> tuple[int, int]:
    entries = {(m.message_id.ledger_id, m.message_id.entry_id) for m in msgs}
    assert len(entries) == 1, f"the messages are not one batch: {entries}"
    return entries.pop()


def test_a_cumulative_ack_of_batch_indexes_a_committed_transaction_acked_conflicts(
    client: magnetar.Client, topic: str, sub: str
) -> None:
    """Part of a batch acknowledged cumulatively by a committed transaction leaves the cursor's
    mark-delete position before the batch; acknowledging those messages again in another
    transaction must be refused (the broker takes a cumulative ack at face value there: it is
    sent as individual acks of the batch indexes, which it checks)."""
    _one_batch(client, topic, 10)
    consumer = client.subscribe(topic, sub, subscription_type="failover", initial_position="earliest")
    first = [consumer.receive(timeout=10) for _ in range(5)]
    _entry_of(first)
    with client.new_transaction() as txn:
        consumer.ack_cumulative(first[-1], txn=txn)
    for stale in (first[-1], first[2]):
        txn = client.new_transaction()
        consumer.ack_cumulative(stale, txn=txn)
        with pytest.raises(magnetar.TransactionError) as refused:
            txn.commit()
        assert "TransactionConflict" in str(refused.value)
        assert refused.value.code == 23  # ServerError.TransactionConflict, the refused ack's
        assert txn.state == "aborted"
    # Each abort has everything unacknowledged delivered again: the rest of the batch only.
    rest = [consumer.receive(timeout=10) for _ in range(5)]
    assert [m.data for m in rest] == [b"5", b"6", b"7", b"8", b"9"]
    with client.new_transaction() as txn:
        consumer.ack_cumulative(rest[2], txn=txn)
    with client.new_transaction() as txn:
        consumer.ack_cumulative(rest[-1], txn=txn)
    consumer.close()
    again = client.subscribe(topic, sub, subscription_type="failover", initial_position="earliest")
    with pytest.raises(magnetar.Timeout):
        again.receive(timeout=QUIET)


def test_the_kill_loops_interleaving_delivers_nothing_twice(client: magnetar.Client, topic: str, sub: str) -> None:
    """The interleaving that made the Failover kill loop write out-192..out-199 twice
    (docs/transactions.md), worker by worker on one batch of 200, each worker's last
    transaction left open as a killed worker leaves it. Once the first open one aborts, the
    next worker must get its five messages and nothing else. The broker's ack set for the
    batch then ends at word 2 (its BitSet drops the all-acknowledged word 3): 192-199 were read
    as unacknowledged, delivered again, and acknowledged again by a second transaction, which
    the broker's conflict check (it compares only the words it has) let through."""
    _one_batch(client, topic, 200)

    def worker(expected: range, commit_through: int, hold: range = range(0)) -> magnetar.Transaction | None:
        consumer = client.subscribe(topic, sub, subscription_type="failover", initial_position="earliest")
        got = [consumer.receive(timeout=10) for _ in expected]
        assert [m.data for m in got] == [b"%d" % i for i in expected]
        assert consumer.receive_many(200, timeout=0) == []  # the rest of the entry was filtered
        by_index = {int(m.data): m for m in got}
        # The held acks go first: the broker applies a subscription's transactional acks in
        # the order they come, so the commit below returning means these are in place too.
        held = client.new_transaction(timeout=120) if hold else None
        for i in hold:
            consumer.ack(by_index[i], txn=held)  # type: ignore[arg-type]
        with client.new_transaction() as txn:
            consumer.ack_cumulative(by_index[commit_through], txn=txn)
        consumer.close()
        return held

    dead_1 = worker(range(200), 144, range(145, 150))
    dead_2 = worker(range(150, 200), 184, range(185, 190))
    worker(range(190, 200), 199)
    assert dead_1 is not None and dead_2 is not None
    dead_1.abort()  # the coordinator's timeout, in the loop
    worker(range(145, 150), 149)
    dead_2.abort()
    worker(range(185, 190), 189)


def test_enable_transaction_frees_what_a_crashed_processs_transaction_held_across_a_broker_restart() -> None:
    """A process dies with a transaction open that acknowledged messages, and the broker is
    killed -9 and restarted: it recovers those pending acks, but only a loaded coordinator
    aborts the transaction at its timeout, and a broker loads one only when a client opens a
    session with it. A consumer whose input is all held never opens a transaction itself, so
    without ``enable_transaction`` it waits for ever (checked first, for the transaction's
    timeout and more); with it, the client opens the sessions and the messages come."""
    topic = f"persistent://public/default/held-{uuid.uuid4().hex[:8]}"
    with restartable_broker() as broker:
        with magnetar.Client(broker.service_url, operation_timeout=20) as crashed:
            crashed.create_producer(topic, batching=False).send_many([b"%d" % i for i in range(5)])
            consumer = crashed.subscribe(topic, "s", subscription_type="shared", initial_position="earliest")
            msgs = [consumer.receive(timeout=10) for _ in range(5)]
            held = crashed.new_transaction(timeout=2)
            for m in msgs:
                consumer.ack(m, txn=held)
            tenant_ns_topic = topic.split("://", 1)[1]

            def pending(m: magnetar.Message) -> bool:
                path = (f"/admin/v3/transactions/positionStatsInPendingAck/{tenant_ns_topic}/s/"
                        f"{m.message_id.ledger_id}/{m.message_id.entry_id}")
                return bool(broker.request("GET", path)["state"] == "PendingAck")

            assert wait_until(lambda: all(pending(m) for m in msgs), 10), "the acks never reached the broker"
        kill9(broker)
        restart(broker)
        with magnetar.Client(broker.service_url, operation_timeout=20) as plain:
            waiting = plain.subscribe(topic, "s", subscription_type="shared")
            with pytest.raises(magnetar.Timeout):
                waiting.receive(timeout=8)
            waiting.close()
        with magnetar.Client(broker.service_url, operation_timeout=20, enable_transaction=True) as client:
            consumer = client.subscribe(topic, "s", subscription_type="shared")
            assert sorted(consumer.receive(timeout=30).data for _ in range(5)) == [b"%d" % i for i in range(5)]


def test_a_second_copy_of_a_message_a_committed_transaction_acked_is_refused(
    client: magnetar.Client, topic: str, sub: str
) -> None:
    """After a transaction's abort the broker sends a Shared consumer a batch entry's
    unacknowledged messages again, also those still waiting in its queue, so the consumer can
    hold two copies of one message (the kill loop's Shared runs wrote 75-90 outputs twice this
    way). Acknowledging the second copy of a message that a committed transaction acknowledged
    must fail the transaction. The broker checks only the words of its record of the batch:
    with index 0 alone unacknowledged its record is one word, and an index past 63 passes."""
    _one_batch(client, topic, 200)
    consumer = client.subscribe(topic, sub, subscription_type="shared", initial_position="earliest")
    first = [consumer.receive(timeout=10) for _ in range(200)]
    _entry_of(first)
    txn = client.new_transaction()
    consumer.ack(first[0], txn=txn)
    txn.abort()  # the broker sends the entry's unacknowledged messages again: all 200
    second = [consumer.receive(timeout=10) for _ in range(200)]
    # In any order: the broker may send the aborted message's copy before the consumer hears
    # of the abort; held back then (the transaction still held it), it is asked for again.
    assert sorted(m.data for m in second) == sorted(m.data for m in first)
    assert all(m.redelivery_count >= 1 for m in second)
    with client.new_transaction() as txn:
        for m in first[1:]:
            consumer.ack(m, txn=txn)
    txn = client.new_transaction()
    consumer.ack(second[150], txn=txn)
    with pytest.raises(magnetar.TransactionError) as refused:
        txn.commit()
    assert refused.value.code == 23  # TransactionConflict


def test_a_cumulative_ack_in_a_transaction_never_covers_what_still_waits_in_the_queue(
    client: magnetar.Client, topic: str, sub: str
) -> None:
    """The kill loop's Failover `missing 5`: a dead worker's transaction held 5-9 of a batch;
    when it aborted, the broker sent the entry's unacknowledged messages again, and 5-9 were
    queued behind messages the consumer already had. The next cumulative ack (through 19)
    acknowledged 5-9 too, as they were received and before 19, though the application had
    never taken them: they were lost. A cumulative ack covers what the application took. The
    entry sent again also carried second copies of 10-19, which the consumer drops: it holds
    them already (processed twice, their second acks are taken past the broker's record)."""
    _one_batch(client, topic, 20)
    first = client.subscribe(topic, sub, subscription_type="failover", initial_position="earliest")
    got = [first.receive(timeout=10) for _ in range(20)]
    _entry_of(got)
    dead = client.new_transaction(timeout=120)
    for m in got[5:10]:
        first.ack(m, txn=dead)
    with client.new_transaction() as txn:  # applied after the held acks (see above)
        first.ack_cumulative(got[4], txn=txn)
    first.close()
    consumer = client.subscribe(topic, sub, subscription_type="failover")
    taken = [consumer.receive(timeout=10) for _ in range(5)]
    assert [m.data for m in taken] == [b"%d" % i for i in range(10, 15)]
    dead.abort()
    # The broker sends the entry again: 5-9, freed, and 10-19, not yet acknowledged. The
    # consumer keeps 5-9 only: 10-14 the application holds, 15-19 wait in the queue already.
    assert wait_until(lambda: consumer.stats()[0]["queued"] >= 10, 10), consumer.stats()
    with client.new_transaction() as txn:
        consumer.ack_cumulative(taken[-1], txn=txn)
        rest = [consumer.receive(timeout=10) for _ in range(5)]
        assert [m.data for m in rest] == [b"%d" % i for i in range(15, 20)]
        consumer.ack_cumulative(rest[-1], txn=txn)
    assert [m.data for m in consumer.receive_many(20, timeout=0)] == [b"%d" % i for i in range(5, 10)]
    consumer.close()
    # 5-9 were never taken, so never acknowledged: a new consumer gets them, and only them.
    again = client.subscribe(topic, sub, subscription_type="failover")
    assert sorted(again.receive(timeout=10).data for _ in range(5)) == [b"%d" % i for i in range(5, 10)]
    assert again.receive_many(20, timeout=0) == []


def test_the_coordinator_aborts_a_transaction_at_its_timeout(
    client: magnetar.Client, pair: tuple[magnetar.Producer, magnetar.Consumer]
) -> None:
    producer, consumer = pair
    txn = client.new_transaction(timeout=1)
    producer.send(b"late", txn=txn)
    producer.send(b"after")
    # Delivery waits behind the open transaction, and resumes when the coordinator aborts it.
    assert consumer.receive(timeout=30).data == b"after"
    with pytest.raises(magnetar.TransactionError):
        txn.commit()


def test_a_finished_transaction_refuses_everything(
    client: magnetar.Client, pair: tuple[magnetar.Producer, magnetar.Consumer]
) -> None:
    producer, consumer = pair
    producer.send(b"m")
    msg = consumer.receive(timeout=10)
    txn = client.new_transaction()
    txn.commit()
    with pytest.raises(magnetar.TransactionError, match="committed"):
        producer.send(b"x", txn=txn)
    with pytest.raises(magnetar.TransactionError):
        producer.send_async(b"x", txn=txn).result(timeout=10)
    with pytest.raises(magnetar.TransactionError):
        consumer.ack(msg, txn=txn)
    with pytest.raises(magnetar.TransactionError):
        txn.commit()
    with pytest.raises(magnetar.TransactionError):
        txn.abort()
    assert isinstance(magnetar.TransactionError("x"), magnetar.PulsarError)
    with pytest.raises(TypeError, match="txn must be a transaction"):
        producer.send(b"x", txn="not a transaction")  # type: ignore[arg-type]
    with pytest.raises(magnetar.InvalidConfiguration):
        client.new_transaction(timeout=0)


def test_a_transaction_resumed_by_id_commits_what_another_client_sent(
    client: magnetar.Client, service_url: str, pair: tuple[magnetar.Producer, magnetar.Consumer]
) -> None:
    producer, consumer = pair
    txn = client.new_transaction()
    producer.send(b"from afar", txn=txn)
    with magnetar.Client(service_url, operation_timeout=20.0) as other:
        resumed = other.transaction_from_id(txn.id)
        assert resumed.id == txn.id
        resumed.commit()
    assert consumer.receive(timeout=10).data == b"from afar"


def test_asyncio_transactions(service_url: str, topic: str, sub: str) -> None:
    async def main() -> list[bytes]:
        async with magnetar.AsyncClient(service_url, operation_timeout=20.0) as client:
            consumer = await client.subscribe(topic, sub, initial_position="earliest")
            producer = await client.create_producer(topic)
            txn = await client.new_transaction(timeout=30)
            assert isinstance(txn, magnetar.AsyncTransaction)
            await producer.send(b"aborted", txn=txn)
            await txn.abort()
            async with client.new_transaction() as txn:
                await asyncio.gather(*(producer.send(b"%d" % i, txn=txn) for i in range(3)))
            assert txn.state == "committed"
            got = sorted([(await consumer.receive()).data for _ in range(3)])
            with pytest.raises(magnetar.TransactionError):
                await txn.commit()
            return got

    assert asyncio.run(main()) == [b"0", b"1", b"2"]


def test_the_official_client_reads_what_a_magnetar_transaction_committed(
    client: magnetar.Client, service_url: str, topic: str
) -> None:
    producer = client.create_producer(topic, batching=True, batch_max_delay=0.05)
    official = pulsar.Client(service_url)
    try:
        consumer = official.subscribe(topic, "official", initial_position=pulsar.InitialPosition.Earliest)
        with client.new_transaction() as txn:
            futures = [producer.send_async(b"p%d" % i, key=f"k{i}", properties={"i": str(i)}, txn=txn)
                       for i in range(5)]
        got = []
        for _ in range(5):
            m = consumer.receive(timeout_millis=10_000)
            got.append((m.data(), m.partition_key(), m.properties()))
            consumer.acknowledge(m)
        assert len({f.result(timeout=10) for f in futures}) == 5
        assert got == [(b"p%d" % i, f"k{i}", {"i": str(i)}) for i in range(5)]
    finally:
        official.close()


def test_the_first_transaction_right_after_a_broker_starts_succeeds() -> None:
    """The coordinator loads after the broker accepts connections: the first
    ``new_transaction`` waits for it rather than failing."""
    with Standalone(port=0) as broker:
        with magnetar.Client(broker.service_url, operation_timeout=60.0) as client:
            with client.new_transaction() as txn:
                assert txn.state == "open"
            assert txn.state == "committed"

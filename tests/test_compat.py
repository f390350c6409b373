"""magnetar.compat: the official client's API on magnetar (the conformance suite, run by
``scripts/dev conformance``, is the contract; these are the project's own checks)."""

from __future__ import annotations

import asyncio
import pickle
import threading
from datetime import timedelta
from enum import Enum
from pathlib import Path
from typing import Any, Iterator

import pytest

import magnetar
import magnetar.compat as pulsar
from magnetar.compat import _pulsar
from magnetar.testing.faults import FaultProxy
from magnetar.compat.schema import AvroSchema, CustomEnum, Integer, JsonSchema, Record, String, StringSchema
from test_fake_peer import SEND, FakePeer
from waiting import wait_until


@pytest.fixture
def compat(service_url: str) -> Iterator[pulsar.Client]:
    c = pulsar.Client(service_url)
    yield c
    c.close()


def test_receive_timeout_is_in_milliseconds(compat: pulsar.Client, topic: str) -> None:
    consumer = compat.subscribe(topic, "s")
    with pytest.raises(pulsar.Timeout):
        consumer.receive(100)  # 100 ms, not 100 s: the test would hang otherwise
    assert issubclass(pulsar.Timeout, pulsar.PulsarException)


def test_send_receive_with_methods_not_properties(compat: pulsar.Client, topic: str) -> None:
    consumer = compat.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
    producer = compat.create_producer(topic, producer_name="p1")
    msg_id = producer.send(b"hello", properties={"a": "1"}, partition_key="k", ordering_key="o",
                           event_timestamp=1234)
    msg = consumer.receive(10_000)
    assert msg.data() == b"hello" and msg.value() == b"hello"
    assert msg.properties() == {"a": "1"}
    assert msg.partition_key() == "k" and msg.ordering_key() == "o"
    assert msg.event_timestamp() == 1234
    assert msg.producer_name() == "p1"
    assert msg.message_id() == msg_id
    assert msg.topic_name().endswith(topic)
    consumer.acknowledge(msg)
    assert producer.producer_name() == "p1" and producer.last_sequence_id() == 0


def test_send_async_callback_gets_result_and_id(compat: pulsar.Client, topic: str) -> None:
    producer = compat.create_producer(topic)
    got: list[tuple[Any, Any]] = []
    done = threading.Event()

    def callback(result: pulsar.Result, msg_id: pulsar.MessageId) -> None:
        got.append((result, msg_id))
        if len(got) == 3:
            done.set()

    for i in range(3):
        producer.send_async(b"m%d" % i, callback)
    producer.flush()
    assert done.wait(10)
    assert [r for r, _ in got] == [pulsar.Result.Ok] * 3
    assert all(isinstance(i, pulsar.MessageId) for _, i in got)


def test_send_async_callback_gets_the_failures_result(broker: Any, topic: str) -> None:
    """A send that fails reaches its callback as the official ``Result`` of the error, with no
    id: here the link goes silent (nothing reaches the broker, nothing comes back), so the send
    times out."""
    with FaultProxy(broker.port, max_lifetime=120) as proxy:
        client = pulsar.Client(proxy.service_url, operation_timeout_seconds=10)
        try:
            producer = client.create_producer(topic, send_timeout_millis=1000, batching_enabled=False)
            proxy.blackhole(True)
            got: list[tuple[Any, Any]] = []
            done = threading.Event()

            def callback(result: pulsar.Result, msg_id: Any) -> None:
                got.append((result, msg_id))
                done.set()

            producer.send_async(b"never confirmed", callback)
            assert done.wait(30), "the callback never ran"
            assert got == [(pulsar.Result.Timeout, None)]
        finally:
            proxy.heal()
            client.close()


def test_blocking_producer_does_not_batch_by_default(compat: pulsar.Client, topic: str) -> None:
    producer = compat.create_producer(topic)
    ids = [producer.send(b"x") for _ in range(2)]
    assert [i.batch_index() for i in ids] == [-1, -1]
    assert ids[0] < ids[1]


def test_message_id_positional_order_is_partition_first() -> None:
    mid = pulsar.MessageId(2, 10, 20, 3)
    assert (mid.partition(), mid.ledger_id(), mid.entry_id(), mid.batch_index()) == (2, 10, 20, 3)
    assert pulsar.MessageId.deserialize(mid.serialize()) == mid
    assert pulsar.MessageId.deserialize(pulsar.MessageId.earliest.serialize()) == pulsar.MessageId.earliest
    assert mid._id == magnetar.MessageId(10, 20, partition=2, batch_index=3)
    assert _pulsar.MessageId is pulsar.MessageId


def test_message_id_pickles_hashes_and_compares_as_the_official_id() -> None:
    native = magnetar.MessageId(10, 20, partition=2, batch_index=3, batch_size=5, topic="persistent://a/b/c")
    mid = pulsar.MessageId.wrap(native)
    assert pulsar.MessageId.wrap(mid) is mid
    copy = pickle.loads(pickle.dumps(mid))
    assert type(copy) is pulsar.MessageId and copy == mid
    assert (copy._id.batch_size, copy._id.topic) == (5, "persistent://a/b/c")  # what serialize() keeps too
    assert str(mid) == repr(mid) == "(10,20,2,3)"
    assert hash(mid) == hash(native) and len({mid, copy}) == 1
    assert mid != native and not (mid == native)  # the two APIs' ids are not mixed
    assert pulsar.MessageId(2, 10, 20, 2) < mid <= copy
    with pytest.raises(TypeError):
        assert mid < native  # type: ignore[operator]
    with pytest.raises(ValueError, match="not a message id"):
        pulsar.MessageId.wrap(3)
    assert str(pulsar.MessageId.earliest) == "(-1,-1,-1,-1)"


def test_received_message_fields(compat: pulsar.Client, topic: str) -> None:
    consumer = compat.subscribe(topic, "s")
    producer = compat.create_producer(topic)
    producer.send(b"abc", ordering_key="o")
    producer.send(None, partition_key="gone")
    msg, null = consumer.receive(10_000), consumer.receive(10_000)
    assert type(msg) is pulsar.Message
    assert str(msg) == f"Message(topic={msg.topic_name()!r}, id={msg.message_id()}, 3 bytes)"
    assert (msg.partition_key(), msg.event_timestamp(), msg.schema_version()) == ("", 0, "")
    assert msg.publish_timestamp() > 0 and msg.redelivery_count() == 0 and msg.encryption_context() is None
    assert not msg.has_null_value()
    assert null.has_null_value() and null.value() == b"" and null.partition_key() == "gone"
    with pytest.raises(ValueError, match="timeout_millis is expected to be of type 'int' and not 'float'"):
        consumer.receive(1.5)  # type: ignore[arg-type]
    with pytest.raises(pulsar.InvalidConfiguration, match="must not be negative"):
        consumer.receive(-5)  # the official class, as any other receive error
    consumer.acknowledge(msg.message_id())
    consumer.acknowledge(null)
    with pytest.raises(TypeError):
        pickle.dumps(msg)


def test_listener_does_not_ack_for_the_user(compat: pulsar.Client, topic: str) -> None:
    seen: list[bytes] = []

    def listener(consumer: pulsar.Consumer, msg: pulsar.Message) -> None:
        seen.append(msg.data())  # no ack: the official listener leaves that to the user

    consumer = compat.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared, message_listener=listener,
                                unacked_messages_timeout_ms=None)
    producer = compat.create_producer(topic)
    producer.send(b"one")
    assert wait_until(lambda: seen == [b"one"], 10)
    consumer.close()
    # Still unacknowledged: a new consumer of the subscription gets it again.
    again = compat.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared)
    assert again.receive(10_000).data() == b"one"


def test_negative_ack_delay_in_milliseconds(compat: pulsar.Client, topic: str) -> None:
    consumer = compat.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=200)
    compat.create_producer(topic).send(b"x")
    msg = consumer.receive(10_000)
    consumer.negative_acknowledge(msg)
    again = consumer.receive(10_000)  # 0.2 s, not 200 s
    assert again.data() == b"x" and again.redelivery_count() == 1


def test_reader_and_seek(compat: pulsar.Client, topic: str) -> None:
    producer = compat.create_producer(topic)
    ids = [producer.send(b"m%d" % i) for i in range(3)]
    reader = compat.create_reader(topic, ids[0], start_message_id_inclusive=True)
    assert [reader.read_next(10_000).data() for _ in range(3)] == [b"m0", b"m1", b"m2"]
    assert not reader.has_message_available()
    reader.seek(ids[1])  # inclusive, as the reader was created
    assert reader.read_next(10_000).data() == b"m1"
    with pytest.raises(ValueError):
        reader.seek(1.0)
    reader.close()
    assert not reader.is_connected()


class Color(Enum):
    red = 1
    blue = 2


class Order(Record):
    id = Integer()
    note = String()
    color = CustomEnum(Color)


def test_record_schemas_round_trip(compat: pulsar.Client, topic: str) -> None:
    assert Order.schema() == {"type": "record", "name": "Order", "fields": [
        {"name": "id", "type": ["null", "int"]}, {"name": "note", "type": ["null", "string"]},
        {"name": "color", "type": ["null", {"type": "enum", "name": "Color", "symbols": ["red", "blue"]}]}]}
    for kind in (AvroSchema, JsonSchema):
        t = f"{topic}-{kind.__name__}"
        consumer = compat.subscribe(t, "s", schema=kind(Order))
        compat.create_producer(t, schema=kind(Order)).send(Order(id=1, note="n", color="blue"))
        value = consumer.receive(10_000).value()
        assert value == Order(id=1, note="n", color=Color.blue)
    with pytest.raises(TypeError):
        JsonSchema(Order).encode("not a record")
    with pytest.raises(TypeError):
        Order(id="x")


def test_wrong_argument_types_raise_value_error(compat: pulsar.Client, topic: str) -> None:
    with pytest.raises(ValueError):
        pulsar.Client(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        compat.create_producer(topic, send_timeout_millis="x")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        compat.subscribe(topic, "s", consumer_type=None)  # type: ignore[arg-type]
    producer = compat.create_producer(topic)
    with pytest.raises(TypeError):
        producer.send(5)
    with pytest.raises(ValueError):
        producer.send(b"x", deliver_after=5)  # type: ignore[arg-type]


def test_what_magnetar_lacks_is_refused_clearly(compat: pulsar.Client, topic: str) -> None:
    with pytest.raises(pulsar.CryptoError, match="no-such-key.pem"):  # a key that cannot be read
        compat.create_producer(topic, encryption_key="k", crypto_key_reader=pulsar.CryptoKeyReader("no-such-key.pem", "b"))


def test_errors_map_to_official_classes(service_url: str, topic: str) -> None:
    client = pulsar.Client(service_url)
    producer = client.create_producer(topic)
    client.close()
    with pytest.raises(pulsar.AlreadyClosed):
        producer.send(b"x")


def test_messages_with_replication_fields_are_stored_and_delivered(compat: pulsar.Client, topic: str, service_url: str) -> None:
    """Messages carrying the per-message geo-replication fields are taken by the broker, which
    stores and delivers them locally whatever their replication list (the suite's broker has
    one cluster, ``standalone``); the native API has the same names. That the fields are on the
    wire is test_replication_fields_are_on_the_wire's."""
    consumer = compat.subscribe(topic, "s")
    producer = compat.create_producer(topic)
    producer.send(b"listed", replication_clusters=["standalone"])
    producer.send(b"local", disable_replication=True)
    producer.send(b"both", replication_clusters=["standalone"], disable_replication=True)
    assert [consumer.receive(10_000).data() for _ in range(3)] == [b"listed", b"local", b"both"]
    with pytest.raises(ValueError):
        producer.send(b"x", replication_clusters="standalone")  # type: ignore[arg-type]
    with magnetar.Client(service_url) as native:
        p = native.create_producer(topic)
        p.send(b"native", replication_clusters=["standalone"])
        p.send(b"native-local", disable_replication=True)
        with pytest.raises(magnetar.InvalidConfiguration, match="not both"):
            p.send(b"x", replication_clusters=["standalone"], disable_replication=True)
        with pytest.raises(magnetar.InvalidConfiguration, match="list of cluster names"):
            p.send(b"x", replication_clusters=[1])  # type: ignore[list-item]
    assert [consumer.receive(10_000).data() for _ in range(2)] == [b"native", b"native-local"]


def test_replication_fields_are_on_the_wire() -> None:
    """What the broker above accepts, read on the wire: the fields land in each message's
    metadata (``replicate_to``, field 7; ``disable_replication`` is the ``__local__`` the
    Java and C++ clients send), for the compat and the native API. The suite's one-cluster
    broker shows no trace of them, so a peer that records the frames reads them here."""
    with FakePeer(lambda conn: _serve(conn)) as peer:
        compat = pulsar.Client(peer.url, operation_timeout_seconds=10)
        try:
            producer = compat.create_producer("t", batching_enabled=False)
            producer.send(b"listed", replication_clusters=["east", "west"])
            producer.send(b"local", disable_replication=True)
            producer.send(b"plain")
        finally:
            compat.close()
        with magnetar.Client(peer.url, operation_timeout=10) as native:
            p = native.create_producer("t", batching=False)
            p.send(b"native", replication_clusters=["east"])
            p.send(b"native-local", disable_replication=True)
    sends = [meta for type_, meta in peer.metadata if type_ == SEND]
    assert [[c.decode() for c in meta.get(7, [])] for meta in sends] == [
        ["east", "west"], ["__local__"], [], ["east"], ["__local__"]]


async def _serve(conn: Any) -> None:
    if await conn.handshake():
        await conn.serve()


def test_unreadable_tls_files_fail_at_first_use_as_connect_error(topic: str) -> None:
    """As in the official client (its test_tls_encryption_with_other_auth): the client is made,
    and the first operation raises ConnectError with the reason."""
    testdata = Path(__file__).resolve().parent.parent / "src" / "net" / "testdata"
    swapped: dict[str, Any] = {"tls_certificate_file_path": str(testdata / "client.key.pem"),
               "tls_private_key_file_path": str(testdata / "client.cert.pem")}
    client = pulsar.Client("pulsar+ssl://127.0.0.1:6651", **swapped)
    with pytest.raises(pulsar.ConnectError, match="client certificate"):
        client.create_producer(topic)
    client.close()

    from magnetar.compat.asyncio import Client, PulsarException

    async def main() -> None:
        client = Client("pulsar+ssl://127.0.0.1:6651", **swapped)
        with pytest.raises(PulsarException) as info:
            await client.create_producer(topic)
        assert info.value.error() == pulsar.Result.ConnectError
        await client.close()

    asyncio.run(main())


def test_string_schema_and_deliver_after(compat: pulsar.Client, topic: str) -> None:
    consumer = compat.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared, schema=StringSchema())
    compat.create_producer(topic, schema=StringSchema()).send("hi", deliver_after=timedelta(milliseconds=10))
    assert consumer.receive(10_000).value() == "hi"


def test_asyncio_api(service_url: str, topic: str) -> None:
    from magnetar.compat.asyncio import Client, PulsarException

    async def main() -> None:
        client = Client(service_url)
        producer = await client.create_producer(topic)
        consumer = await client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        ids = await asyncio.gather(*(producer.send(b"m%d" % i) for i in range(3)))
        # The asyncio producer batches by default: one entry.
        assert sorted(i.batch_index() for i in ids) == [0, 1, 2]
        assert len({(i.ledger_id(), i.entry_id()) for i in ids}) == 1
        msgs = [await consumer.receive() for _ in range(3)]
        assert sorted(m.data() for m in msgs) == [b"m0", b"m1", b"m2"]
        await consumer.acknowledge_cumulative(msgs[-1])
        await producer.close()
        with pytest.raises(PulsarException) as e:
            await producer.send(b"late")
        assert e.value.error() == pulsar.Result.AlreadyClosed
        await client.close()

    asyncio.run(main())


def test_dead_letter_initial_subscription_is_created(compat: pulsar.Client, topic: str, broker: Any) -> None:
    """As the Java client: the dead letter producer creates the topic with the subscription, so
    it holds the dead letter for whoever subscribes there later."""
    dlq = f"{topic}-dlq"
    consumer = compat.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=50,
                                dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(1, dlq, "keeper"))
    compat.create_producer(topic).send(b"poison")
    for _ in range(2):
        consumer.negative_acknowledge(consumer.receive(10_000))
    assert wait_until(lambda: "keeper" in _subscriptions(broker, dlq), 20)
    assert broker.topic_stats(dlq)["subscriptions"]["keeper"]["msgBacklog"] == 1


def _subscriptions(broker: Any, topic: str) -> Any:
    try:
        return broker.topic_stats(topic)["subscriptions"]
    except Exception:  # noqa: BLE001 - the topic is not there yet
        return {}


def test_txn_in_the_java_clients_shape(compat: pulsar.Client, topic: str) -> None:
    """new_transaction(timeout_ms=...), send/send_async/acknowledge/acknowledge_cumulative with
    txn=: invisible until commit, undone by abort, refused once finished."""
    out = topic + "-out"
    compat.create_producer(topic).send(b"in-1")
    consumer = compat.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    check = compat.subscribe(out, "check", initial_position=pulsar.InitialPosition.Earliest)
    producer = compat.create_producer(out)

    msg = consumer.receive(10_000)
    txn = compat.new_transaction(timeout_ms=30_000)
    assert txn.state() == "OPEN" and len(txn.txn_id()) == 2
    producer.send(b"out-1", txn=txn)
    sent = threading.Event()
    producer.send_async(b"out-2", lambda result, msg_id: sent.set(), txn=txn)
    consumer.acknowledge(msg, txn=txn)
    assert sent.wait(10)
    assert not compat.create_reader(out, pulsar.MessageId.earliest).has_message_available()  # before the commit
    txn.commit()
    assert txn.state() == "COMMITTED"
    assert sorted(check.receive(10_000).data() for _ in range(2)) == [b"out-1", b"out-2"]
    with pytest.raises(pulsar.PulsarException):
        producer.send(b"late", txn=txn)

    # An aborted transaction's messages never appear and its cumulative ack is undone.
    compat.create_producer(topic).send(b"in-2")
    msg2 = consumer.receive(10_000)
    aborted = compat.new_transaction()
    producer.send(b"dropped", txn=aborted)
    consumer.acknowledge_cumulative(msg2, txn=aborted)
    aborted.abort()
    assert aborted.state() == "ABORTED"
    consumer.redeliver_unacknowledged_messages()
    assert consumer.receive(10_000).data() == b"in-2"
    producer.send(b"after")
    assert check.receive(10_000).data() == b"after"
    with pytest.raises(TypeError):
        producer.send(b"x", txn="not a transaction")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        compat.new_transaction(timeout_ms=0)


def test_txn_commit_after_a_conflicting_ack_raises_transaction_conflict(compat: pulsar.Client, topic: str) -> None:
    """An ack the broker refuses (its message was acknowledged by a committed transaction) makes
    commit() abort and raise the official class of the broker's code."""
    compat.create_producer(topic).send(b"once")
    consumer = compat.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    msg = consumer.receive(10_000)
    first = compat.new_transaction()
    consumer.acknowledge(msg, txn=first)
    first.commit()
    again = compat.new_transaction()
    consumer.acknowledge(msg, txn=again)
    with pytest.raises(pulsar.TransactionConflict):
        again.commit()
    assert again.state() == "ABORTED"


def test_txn_in_the_asyncio_api(service_url: str, topic: str) -> None:
    from magnetar.compat.asyncio import Client

    async def main() -> None:
        client = Client(service_url)
        consumer = await client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        out = await client.subscribe(topic + "-out", "check", initial_position=pulsar.InitialPosition.Earliest)
        await (await client.create_producer(topic)).send(b"in")
        producer = await client.create_producer(topic + "-out")
        msg = await consumer.receive()
        txn = await client.new_transaction(timeout_ms=30_000)
        await producer.send(b"dropped", txn=txn)
        await consumer.acknowledge(msg, txn=txn)
        await txn.abort()
        assert txn.state() == "ABORTED"
        consumer.redeliver_unacknowledged_messages()
        msg = await consumer.receive()
        assert msg.data() == b"in"
        txn = await client.new_transaction()
        await producer.send(b"kept", txn=txn)
        await consumer.acknowledge_cumulative(msg, txn=txn)
        await txn.commit()
        assert txn.state() == "COMMITTED"
        assert (await out.receive()).data() == b"kept"
        await client.close()

    asyncio.run(main())

"""Wire compatibility with the reference clients, against the real broker.

magnetar must interoperate with the official Python client (``pulsar-client`` on PyPI, ``import
pulsar``) and with the Java client on the same topics (DESIGN.md, "Wire compatibility"):

* messages produced by one client are consumed by the other with identical payloads, keys,
  ordering keys, properties, event times and sequence ids, with batching on and off and with
  every compression codec (and the Java client decodes magnetar's messages the same way);
* on partitioned topics nothing is lost or duplicated either way;
* acknowledgements made by one client are respected by the other on a shared subscription;
* serialized message ids are understood both ways;
* a keyed message lands on the same partition as with the Java client (JavaStringHash by
  default, Murmur3_32Hash when selected), also when it carries an ordering key.

The Java side is ``tests/interop/PulsarInterop.java``, compiled at test time with ``javac``
against the jars of the broker distribution.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import magnetar
import pytest
from jvm import java_program
from magnetar import _core

import pulsar  # noqa: E402 - a hard test dependency (requirements-dev.txt): fail, never skip


CODECS: dict[str | None, Any] = {
    None: pulsar.CompressionType.NONE,
    "lz4": pulsar.CompressionType.LZ4,
    "zlib": pulsar.CompressionType.ZLib,
    "zstd": pulsar.CompressionType.ZSTD,
    "snappy": pulsar.CompressionType.SNAPPY,
}
CODEC_IDS = ["none", "lz4", "zlib", "zstd", "snappy"]
BATCHING_IDS = ["unbatched", "batched"]

RECEIVE_TIMEOUT = 15.0  # seconds a message that should come may take
QUIET_TIMEOUT = 0.5  # seconds of silence that prove nothing more comes (all is prefetched by then)

INTEROP_DIR = Path(__file__).with_name("interop")


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def official(service_url: str) -> Iterator[Any]:
    """A client of the official ``pulsar-client`` package."""
    c = pulsar.Client(service_url, operation_timeout_seconds=30,
                      logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    yield c
    c.close()


def fresh_topic() -> str:
    return f"persistent://public/default/interop-{uuid.uuid4().hex[:12]}"


# --------------------------------------------------------------------------- messages


def make_messages(n: int = 30, seed: int = 7) -> list[dict[str, Any]]:
    """Messages that exercise every field: empty, large compressible and random payloads,
    ASCII and non-ASCII keys (some absent), ordering keys, properties with non-ASCII and empty
    values (some absent), event times (some absent) and explicit, gapped sequence ids."""
    rng = random.Random(seed)
    msgs = []
    for i in range(n):
        if i == 0:
            payload = b""
        elif i == 1:
            payload = f"the quick brown fox jumps over the lazy dog {i}\n".encode() * 900  # ~40 KB
        elif i == 2:
            payload = rng.randbytes(3000)
        else:
            payload = f"msg-{i}-".encode() * (i % 7 + 1) + bytes(range(256))[: i * 3]
        key = None if i % 5 == 0 else (f"key-{i}" if i % 2 else f"ключ-{i}-鍵-🔑")
        ordering_key = f"order-{i % 4}-é" if i % 3 == 0 else None
        if i % 4 == 3:
            properties: dict[str, str] = {}
        else:
            properties = {"i": str(i), "ünï": "çødé ✓", "empty": "", f"p{i % 3}": "x" * (i % 10)}
        event_time = 1_700_000_000_000 + i if i % 2 == 0 else None
        msgs.append({"payload": payload, "key": key, "ordering_key": ordering_key, "properties": properties,
                     "event_time": event_time, "sequence_id": 1000 + 7 * i})
    return msgs


def payload_bytes(msgs: list[dict[str, Any]]) -> int:
    return sum(len(m["payload"]) for m in msgs)


def official_send_all(producer: Any, msgs: list[dict[str, Any]]) -> list[Any]:
    """send_async every message (so batches fill up), flush, and return the receipts in order."""
    results: list[Any] = [None] * len(msgs)
    done = threading.Semaphore(0)

    def callback_for(i: int) -> Any:
        def cb(res: Any, msg_id: Any) -> None:
            results[i] = (res, msg_id)
            done.release()
        return cb

    for i, m in enumerate(msgs):
        kwargs: dict[str, Any] = {"properties": m["properties"] or None}
        if m["key"] is not None:
            kwargs["partition_key"] = m["key"]
        if m["ordering_key"] is not None:
            kwargs["ordering_key"] = m["ordering_key"]
        if m["event_time"] is not None:
            kwargs["event_timestamp"] = m["event_time"]
        if m.get("sequence_id") is not None:
            kwargs["sequence_id"] = m["sequence_id"]
        producer.send_async(m["payload"], callback_for(i), **kwargs)
    producer.flush()
    for _ in msgs:
        assert done.acquire(timeout=30), "the official producer did not confirm every message"
    assert all(r[0] == pulsar.Result.Ok for r in results), [r[0] for r in results]
    return [r[1] for r in results]


def magnetar_send_all(producer: magnetar.Producer, msgs: list[dict[str, Any]]) -> list[magnetar.MessageId]:
    futures = [
        producer.send_async(m["payload"], key=m["key"], properties=m["properties"] or None,
                            event_time=m["event_time"], ordering_key=m["ordering_key"],
                            sequence_id=m.get("sequence_id"))
        for m in msgs
    ]
    producer.flush()
    return [f.result(timeout=30) for f in futures]


def magnetar_receive(consumer: magnetar.Consumer, n: int) -> list[magnetar.Message]:
    return [consumer.receive(timeout=RECEIVE_TIMEOUT) for _ in range(n)]


def official_receive(consumer: Any, n: int) -> list[Any]:
    return [consumer.receive(timeout_millis=int(RECEIVE_TIMEOUT * 1000)) for _ in range(n)]


def assert_magnetar_quiet(consumer: magnetar.Consumer) -> None:
    with pytest.raises(magnetar.Timeout):
        extra = consumer.receive(timeout=QUIET_TIMEOUT)
        pytest.fail(f"unexpected extra message {extra.data[:40]!r} ({extra.message_id})")


def assert_official_quiet(consumer: Any) -> None:
    try:
        extra = consumer.receive(timeout_millis=int(QUIET_TIMEOUT * 1000))
    except pulsar.Timeout:
        return
    pytest.fail(f"unexpected extra message {extra.data()[:40]!r} ({extra.message_id()})")


def entries_of(ids: list[tuple[int, int, int, int]]) -> Counter[tuple[int, int, int]]:
    """How many messages each entry (ledger, entry, partition) holds, from (l, e, p, batch_index)."""
    return Counter(i[:3] for i in ids)


def check_batching(ids: list[tuple[int, int, int, int]], batching: bool) -> None:
    """With batching, entries are batches (batch_index >= 0) and some hold several messages;
    without, every message is its own entry (batch_index -1)."""
    if batching:
        assert all(i[3] >= 0 for i in ids), ids
        assert max(entries_of(ids).values()) > 1, f"batching on, yet no entry holds two messages: {ids}"
    else:
        assert all(i[3] == -1 for i in ids), ids
        assert max(entries_of(ids).values()) == 1, ids


def check_compression(broker: Any, topic: str, codec: str | None, msgs: list[dict[str, Any]]) -> None:
    """The bytes the broker took in show whether the payloads really went out compressed (the
    ~40 KB text payload shrinks to a few hundred bytes with every codec)."""
    stats = broker.topic_stats(topic)
    bytes_in = stats["bytesInCounter"]
    raw = payload_bytes(msgs)
    if codec is None:
        assert bytes_in >= raw, f"{bytes_in} bytes in for {raw} payload bytes"
    else:
        assert bytes_in < raw / 3, f"{bytes_in} bytes in for {raw} payload bytes: not {codec}-compressed?"


def magnetar_id_tuple(mid: magnetar.MessageId) -> tuple[int, int, int, int]:
    return (mid.ledger_id, mid.entry_id, mid.partition, mid.batch_index)


def official_id_tuple(mid: Any) -> tuple[int, int, int, int]:
    return (mid.ledger_id(), mid.entry_id(), mid.partition(), mid.batch_index())


# --------------------------------------------------------------------------- 1. message fields


@pytest.mark.interop
@pytest.mark.parametrize("codec", list(CODECS), ids=CODEC_IDS)
@pytest.mark.parametrize("batching", [False, True], ids=BATCHING_IDS)
def test_official_producer_to_magnetar_consumer(broker, official, client, topic, batching, codec):
    msgs = make_messages()
    producer = official.create_producer(
        topic, batching_enabled=batching, batching_max_publish_delay_ms=50, compression_type=CODECS[codec],
        block_if_queue_full=True, producer_name=f"official-{uuid.uuid4().hex[:6]}",
    )
    receipts = official_send_all(producer, msgs)
    consumer = client.subscribe(topic, "interop", initial_position="earliest")
    got = magnetar_receive(consumer, len(msgs))
    assert_magnetar_quiet(consumer)

    for m, msg, receipt in zip(msgs, got, receipts, strict=True):
        assert msg.data == m["payload"]
        assert msg.key == m["key"]
        assert msg.ordering_key == (None if m["ordering_key"] is None else m["ordering_key"].encode())
        assert msg.properties == m["properties"]
        assert msg.event_time == m["event_time"]
        assert msg.sequence_id == m["sequence_id"]
        assert msg.producer_name == producer.producer_name()
        assert msg.topic == topic
        assert magnetar_id_tuple(msg.message_id) == official_id_tuple(receipt)
    check_batching([magnetar_id_tuple(m.message_id) for m in got], batching)
    check_compression(broker, topic, codec, msgs)
    consumer.close()
    producer.close()


@pytest.mark.interop
@pytest.mark.parametrize("codec", list(CODECS), ids=CODEC_IDS)
@pytest.mark.parametrize("batching", [False, True], ids=BATCHING_IDS)
def test_magnetar_producer_to_official_consumer(broker, official, client, topic, batching, codec):
    msgs = make_messages()
    if codec == "zlib" and not batching:
        # The official (C++) client cannot inflate a zlib-compressed empty payload, not even its
        # own (it inflates into a zero-size buffer: "Failed to decompress zlib buffer: -2").
        # The Java client reads magnetar's in test_java_client_decodes_magnetar_messages.
        msgs[0]["payload"] = b"\0"
    producer = client.create_producer(topic, batching=batching, batch_max_delay=0.05, compression=codec)
    receipts = magnetar_send_all(producer, msgs)
    consumer = official.subscribe(topic, "interop", initial_position=pulsar.InitialPosition.Earliest)
    got = official_receive(consumer, len(msgs))
    assert_official_quiet(consumer)

    # The official Python client does not expose sequence ids; the Java client checks them in
    # test_java_client_decodes_magnetar_messages.
    for m, msg, receipt in zip(msgs, got, receipts, strict=True):
        assert msg.data() == m["payload"]
        assert msg.partition_key() == (m["key"] or "")
        assert msg.ordering_key() == (m["ordering_key"] or "")
        assert msg.properties() == m["properties"]
        assert msg.event_timestamp() == (m["event_time"] or 0)
        assert msg.producer_name() == producer.name
        assert msg.topic_name() == topic
        assert official_id_tuple(msg.message_id()) == magnetar_id_tuple(receipt)
    check_batching([official_id_tuple(m.message_id()) for m in got], batching)
    check_compression(broker, topic, codec, msgs)
    consumer.close()
    producer.close()


@pytest.mark.interop
@pytest.mark.parametrize("batching", [False, True], ids=BATCHING_IDS)
def test_default_sequence_ids_cross_clients(official, client, topic, batching):
    """Without explicit sequence ids both clients number messages 0, 1, 2, ...; magnetar reads
    the official client's numbers (the reverse is checked by the Java client)."""
    msgs: list[dict[str, Any]] = [{"payload": f"s{i}".encode(), "key": None, "ordering_key": None, "properties": {},
             "event_time": None, "sequence_id": None} for i in range(10)]
    producer = official.create_producer(topic, batching_enabled=batching, block_if_queue_full=True)
    official_send_all(producer, msgs)
    consumer = client.subscribe(topic, "interop", initial_position="earliest")
    got = magnetar_receive(consumer, len(msgs))
    assert [m.data for m in got] == [m["payload"] for m in msgs]
    assert [m.sequence_id for m in got] == list(range(10))
    assert all(m.event_time is None and m.key is None and m.ordering_key is None and m.properties == {} for m in got)
    consumer.close()
    producer.close()


# --------------------------------------------------------------------------- Java


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Compiles tests/interop/PulsarInterop.java against the broker distribution's jars and
    returns ``run(*args) -> stdout lines``."""
    return java_program(tmp_path_factory.mktemp("java-interop"), INTEROP_DIR / "PulsarInterop.java")


def _unhex_str(h: str) -> str | None:
    return None if h == "-" else bytes.fromhex(h).decode()


@pytest.mark.interop
def test_java_client_decodes_magnetar_messages(broker, client, java):
    """The reference Java client reads every field of magnetar's messages, sequence ids
    included, for batching on and off and every codec."""
    cases: list[tuple[str, bool, str | None, list[dict[str, Any]]]] = []
    for batching in (False, True):
        for codec in CODECS:
            cases.append((fresh_topic(), batching, codec, make_messages(20, seed=len(cases))))
        # default sequence ids: 0, 1, 2, ...
        auto = [{**m, "sequence_id": None} for m in make_messages(8, seed=99)]
        cases.append((fresh_topic(), batching, "lz4", auto))
    receipts = {}
    for topic, batching, codec, msgs in cases:
        with client.create_producer(topic, batching=batching, batch_max_delay=0.05, compression=codec) as p:
            receipts[topic] = magnetar_send_all(p, msgs)

    out = java("consume", broker.service_url, *[f"{t}={len(m)}" for t, _, _, m in cases])
    assert not [line for line in out if line.startswith("EXTRA")], out
    seen: dict[str, list[list[str]]] = defaultdict(list)
    for line in out:
        if line.startswith("MSG\t"):
            f = line.split("\t")
            seen[f[1]].append(f)

    for topic, batching, codec, msgs in cases:
        rows = seen[topic]
        label = f"{topic} batching={batching} codec={codec}"
        assert len(rows) == len(msgs), label
        for i, (m, f, receipt) in enumerate(zip(msgs, rows, receipts[topic], strict=True)):
            _, _, seq, key, okey, event_time, payload, props, mid = f
            expected_seq = m["sequence_id"] if m["sequence_id"] is not None else i
            assert int(seq) == expected_seq, f"{label} message {i}: sequence id"
            assert _unhex_str(key) == m["key"], f"{label} message {i}: key"
            assert _unhex_str(okey) == m["ordering_key"], f"{label} message {i}: ordering key"
            assert int(event_time) == (m["event_time"] or 0), f"{label} message {i}: event time"
            assert bytes.fromhex(payload) == m["payload"], f"{label} message {i}: payload"
            decoded = {} if props == "-" else {
                bytes.fromhex(k).decode(): bytes.fromhex(v).decode()
                for k, v in (kv.split("=") for kv in props.split(","))}
            assert decoded == m["properties"], f"{label} message {i}: properties"
            assert tuple(int(x) for x in mid.split(":")) == magnetar_id_tuple(receipt), f"{label} message {i}: id"


# --------------------------------------------------------------------------- 2. partitioned topics


def partitioned_messages(n: int = 200) -> list[dict[str, Any]]:
    return [{"payload": f"p-{i}".encode(), "key": None if i % 4 == 0 else f"key-{i % 40}-ü",
             "ordering_key": None, "properties": {"i": str(i)}, "event_time": None, "sequence_id": None}
            for i in range(n)]


def check_partitioned_delivery(sent: list[dict[str, Any]], got: list[tuple[bytes, str | None, dict[str, str], int]],
                               n_partitions: int) -> None:
    """got: (payload, key, properties, partition) per received message, in arrival order."""
    payloads = [g[0] for g in got]
    dupes = [p for p, c in Counter(payloads).items() if c > 1]
    assert not dupes, f"duplicated: {dupes[:10]}"
    missing = {m["payload"] for m in sent} - set(payloads)
    assert not missing, f"lost {len(missing)}: {sorted(missing)[:10]}"
    assert len(payloads) == len(sent)
    by_payload = {m["payload"]: m for m in sent}
    key_partition: dict[str, int] = {}
    order: dict[str, list[int]] = defaultdict(list)
    for payload, key, props, partition in got:
        m = by_payload[payload]
        assert key == m["key"] and props == m["properties"], payload
        assert 0 <= partition < n_partitions
        if key is not None:
            assert key_partition.setdefault(key, partition) == partition, f"key {key!r} on two partitions"
            order[key].append(int(props["i"]))
    assert len({g[3] for g in got}) == n_partitions, "messages did not spread over every partition"
    for key, seq in order.items():
        assert seq == sorted(seq), f"key {key!r} out of order: {seq}"


@pytest.mark.interop
@pytest.mark.parametrize("batching", [False, True], ids=BATCHING_IDS)
def test_partitioned_official_to_magnetar(broker, official, client, topic, batching):
    broker.create_partitioned_topic(topic, 4)
    msgs = partitioned_messages()
    consumer = client.subscribe(topic, "interop", initial_position="earliest")
    producer = official.create_producer(topic, batching_enabled=batching, block_if_queue_full=True)
    official_send_all(producer, msgs)
    got = magnetar_receive(consumer, len(msgs))
    assert_magnetar_quiet(consumer)
    for msg in got:
        assert msg.topic == f"{topic}-partition-{msg.message_id.partition}"
    check_partitioned_delivery(msgs, [(m.data, m.key, m.properties, m.message_id.partition) for m in got], 4)
    consumer.close()
    producer.close()


@pytest.mark.interop
@pytest.mark.parametrize("batching", [False, True], ids=BATCHING_IDS)
def test_partitioned_magnetar_to_official(broker, official, client, topic, batching):
    broker.create_partitioned_topic(topic, 4)
    msgs = partitioned_messages()
    consumer = official.subscribe(topic, "interop", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching=batching)
    magnetar_send_all(producer, msgs)
    got = official_receive(consumer, len(msgs))
    assert_official_quiet(consumer)
    for msg in got:
        assert msg.topic_name() == f"{topic}-partition-{msg.message_id().partition()}"
    check_partitioned_delivery(
        msgs, [(m.data(), m.partition_key() or None, m.properties(), m.message_id().partition()) for m in got], 4)
    consumer.close()
    producer.close()


# --------------------------------------------------------------------------- 3. acknowledgements


class _Side:
    """One client's subscribe / receive / ack / close on the shared subscription."""

    def __init__(self, kind: str, client: magnetar.Client, official: Any, topic: str, batching: bool) -> None:
        self.kind, self.client, self.official, self.topic, self.batching = kind, client, official, topic, batching

    def subscribe(self) -> Any:
        if self.kind == "magnetar":
            return self.client.subscribe(self.topic, "S", subscription_type=magnetar.SubscriptionType.SHARED,
                                         initial_position="earliest", batch_index_ack=self.batching)
        return self.official.subscribe(self.topic, "S", consumer_type=pulsar.ConsumerType.Shared,
                                       initial_position=pulsar.InitialPosition.Earliest,
                                       batch_index_ack_enabled=self.batching)

    def receive_all(self, consumer: Any, first_timeout: float = RECEIVE_TIMEOUT) -> list[Any]:
        """Every message that comes before a second of silence (the first one may take
        ``first_timeout`` seconds)."""
        got: list[Any] = []
        while True:
            timeout = QUIET_TIMEOUT if got else first_timeout
            try:
                if self.kind == "magnetar":
                    got.append(consumer.receive(timeout=timeout))
                else:
                    got.append(consumer.receive(timeout_millis=int(timeout * 1000)))
            except (magnetar.Timeout, pulsar.Timeout):
                return got

    def data(self, msg: Any) -> bytes:
        return msg.data if self.kind == "magnetar" else msg.data()

    def ack(self, consumer: Any, msg: Any) -> None:
        if self.kind == "magnetar":
            consumer.ack(msg)
        else:
            consumer.acknowledge(msg)

    def produce(self, payloads: list[bytes]) -> None:
        msgs: list[dict[str, Any]] = [
            {"payload": p, "key": None, "ordering_key": None, "properties": {}, "event_time": None} for p in payloads
        ]
        if self.kind == "magnetar":
            with self.client.create_producer(self.topic, batching=self.batching, batch_max_delay=0.05) as p:
                magnetar_send_all(p, msgs)
        else:
            p = self.official.create_producer(self.topic, batching_enabled=self.batching,
                                              batching_max_publish_delay_ms=50, block_if_queue_full=True)
            official_send_all(p, msgs)
            p.close()


@pytest.mark.interop
@pytest.mark.parametrize("batching", [False, True], ids=["unbatched", "batched-batch-index-ack"])
@pytest.mark.parametrize("first", ["magnetar", "official"], ids=["magnetar-acks-first", "official-acks-first"])
def test_acks_respected_across_clients(official, client, topic, first, batching):
    """The first client receives everything on shared subscription S, acks the even messages
    and closes; the second client then gets exactly the odd ones, acks them and closes; the
    first client, subscribing again, gets nothing. The messages come from the second client's
    producer. Batched messages are acked one by one with batch-index acknowledgement on both
    sides (the broker has acknowledgmentAtBatchIndexLevelEnabled)."""
    second = "official" if first == "magnetar" else "magnetar"
    a = _Side(first, client, official, topic, batching)
    b = _Side(second, client, official, topic, batching)
    payloads = [f"m{i:02d}".encode() for i in range(20)]

    consumer = a.subscribe()  # creates S at the start of the topic
    b.produce(payloads)
    got = a.receive_all(consumer)
    assert [a.data(m) for m in got] == payloads
    for i, m in enumerate(got):
        if i % 2 == 0:
            a.ack(consumer, m)
    consumer.close()

    consumer = b.subscribe()
    got = b.receive_all(consumer)
    assert sorted(b.data(m) for m in got) == payloads[1::2], f"{second} after {first} acked the even half"
    for m in got:
        b.ack(consumer, m)
    consumer.close()

    consumer = a.subscribe()
    got = a.receive_all(consumer, first_timeout=2.0)  # a redelivery would come at once
    assert [a.data(m) for m in got] == [], f"{first} after {second} acked the odd half"
    consumer.close()


# --------------------------------------------------------------------------- 4. message ids


@pytest.mark.interop
def test_message_id_bytes_interoperate(broker, official, client):
    plain, batched, parted = fresh_topic(), fresh_topic(), fresh_topic()
    broker.create_partitioned_topic(parted, 4)
    msgs: list[dict[str, Any]] = [{"payload": f"id-{i}".encode(), "key": f"k{i}", "ordering_key": None, "properties": {},
             "event_time": None} for i in range(12)]

    # magnetar ids -> official
    m_ids: list[magnetar.MessageId] = []
    for topic, batching in ((plain, False), (batched, True), (parted, True)):
        with client.create_producer(topic, batching=batching, batch_max_delay=0.05) as p:
            ids = magnetar_send_all(p, msgs)
        m_ids += ids
        consumer = official.subscribe(topic, "ids", initial_position=pulsar.InitialPosition.Earliest)
        received = {m.data(): official_id_tuple(m.message_id()) for m in official_receive(consumer, len(msgs))}
        consumer.close()
        for m, mid in zip(msgs, ids, strict=True):
            o = pulsar.MessageId.deserialize(mid.serialize())
            assert official_id_tuple(o) == magnetar_id_tuple(mid), (topic, mid)
            assert received[m["payload"]] == magnetar_id_tuple(mid), (topic, mid)
    assert any(i.batch_index > 0 for i in m_ids) and any(i.partition > 0 for i in m_ids)
    assert any(i.batch_index == -1 and i.partition == -1 for i in m_ids)

    # official ids -> magnetar
    o_msgs = [{**m, "payload": b"o" + m["payload"]} for m in msgs]
    o_ids: list[Any] = []
    for topic, batching in ((plain, False), (batched, True), (parted, True)):
        p = official.create_producer(topic, batching_enabled=batching, batching_max_publish_delay_ms=50,
                                     block_if_queue_full=True)
        ids = official_send_all(p, o_msgs)
        p.close()
        o_ids += ids
        consumer = client.subscribe(topic, "ids-m", initial_position="earliest")
        # the topic holds magnetar's messages from above, then the official client's
        received_ids = {m.data: m.message_id for m in magnetar_receive(consumer, len(msgs) + len(o_msgs))}
        consumer.close()
        for m, oid in zip(o_msgs, ids, strict=True):
            mid = magnetar.MessageId.deserialize(oid.serialize())
            assert magnetar_id_tuple(mid) == official_id_tuple(oid), (topic, str(oid))
            assert received_ids[m["payload"]] == mid, (topic, str(oid))
    assert any(i.batch_index() > 0 for i in o_ids) and any(i.partition() > 0 for i in o_ids)

    # earliest / latest
    for m_id, o_id in ((magnetar.MessageId.earliest, pulsar.MessageId.earliest),
                       (magnetar.MessageId.latest, pulsar.MessageId.latest)):
        assert official_id_tuple(pulsar.MessageId.deserialize(m_id.serialize())) == official_id_tuple(o_id)
        assert magnetar.MessageId.deserialize(o_id.serialize()) == m_id

    # A deserialized id positions a reader of the other client on that very message.
    target_m = m_ids[5]  # the 6th message magnetar sent to `plain`
    reader = official.create_reader(plain, pulsar.MessageId.deserialize(target_m.serialize()),
                                    start_message_id_inclusive=True)
    assert reader.read_next(timeout_millis=int(RECEIVE_TIMEOUT * 1000)).data() == b"id-5"
    reader.close()
    target_o = o_ids[7]  # the 8th message the official client sent to `plain`
    with client.create_reader(plain, magnetar.MessageId.deserialize(target_o.serialize()),
                              start_inclusive=True) as mreader:
        msg = mreader.read_next(timeout=RECEIVE_TIMEOUT)
        assert msg.data == b"oid-7" and magnetar_id_tuple(msg.message_id) == official_id_tuple(target_o)


# --------------------------------------------------------------------------- 5. key routing


def routing_keys() -> list[str]:
    """200 distinct keys: ASCII, Cyrillic, CJK, astral-plane (surrogate pairs in Java), long
    ones (whose String.hashCode overflows, often negative before masking)."""
    keys = []
    for i in range(200):
        kind = i % 6
        if kind == 0:
            keys.append(f"key-{i}")
        elif kind == 1:
            keys.append(f"ключ-{i}")
        elif kind == 2:
            keys.append(f"鍵{i}番")
        elif kind == 3:
            keys.append(f"🔑{i}-émoji-𝄞")
        elif kind == 4:
            keys.append(f"user:{i * 7919}:" + "long-key-" * (i % 13))
        else:
            keys.append(f"{i}")
    assert len(set(keys)) == 200
    return keys


def partition_of_each_key(client: magnetar.Client, topic: str, n: int, keys: list[str]) -> dict[str, int]:
    """Which partition each key's message sits on, learned by subscribing to every partition
    topic on its own (payload = the key's UTF-8 bytes)."""
    consumers = [client.subscribe(f"{topic}-partition-{i}", "where", initial_position="earliest") for i in range(n)]
    where: dict[str, int] = {}
    deadline = time.monotonic() + 30
    try:
        while len(where) < len(keys) and time.monotonic() < deadline:
            for i, c in enumerate(consumers):
                for msg in c.receive_many(1000, timeout=0.05):
                    key = msg.data.decode()
                    assert msg.key == key, f"{topic}: key {msg.key!r} on a message for {key!r}"
                    assert key not in where, f"{topic}: key {key!r} twice"
                    where[key] = i
    finally:
        for c in consumers:
            c.close()
    assert set(where) == set(keys), f"{topic}: {len(where)} of {len(keys)} keys arrived"
    return where


def ordering_key_for(key: str) -> str:
    """The ordering key PulsarInterop.java gives a keyed message in "+ordering_key" mode."""
    return "ok:" + key[::-1]


ROUTING_PARTITIONS = 7  # not a power of two, so the hash's high bits and the sign mask matter
# (hashing scheme, whether each message also carries an unrelated ordering key)
ROUTING_VARIANTS = [("java_string", False), ("murmur3", False), ("java_string", True)]


@pytest.fixture(scope="module")
def java_routing(broker: Any, service_url: str, java: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[Any, dict[str, int]]:
    """The partition the Java client sends each routing key to, per variant: one JVM run sends
    the keys to a partitioned topic per variant with default settings, then every partition is
    read on its own."""
    n, keys = ROUTING_PARTITIONS, routing_keys()
    keys_file = tmp_path_factory.mktemp("routing") / "keys.txt"
    keys_file.write_text("".join(k.encode().hex() + "\n" for k in keys))
    topics = {v: fresh_topic() for v in ROUTING_VARIANTS}
    for t in topics.values():
        broker.create_partitioned_topic(t, n)
    out = java("produce", service_url, str(keys_file),
               *[f"{s}{'+ordering_key' if ok else ''}={t}" for (s, ok), t in topics.items()])
    receipts: dict[str, dict[str, int]] = defaultdict(dict)
    for line in out:
        if line.startswith("SENT "):
            _, t, key_hex, partition = line.split(" ")
            receipts[t][bytes.fromhex(key_hex).decode()] = int(partition)
    result = {}
    with magnetar.Client(service_url, operation_timeout=20.0) as c:
        for v, t in topics.items():
            result[v] = where = partition_of_each_key(c, t, n, keys)
            # the test's own sanity: the Java client's receipts agree with where the messages sit
            assert where == receipts[t], v
            assert len(set(where.values())) == n, v
    return result


def magnetar_routing(client: magnetar.Client, broker: Any, scheme: str, with_ordering_key: bool) -> dict[str, int]:
    """Where a magnetar producer with default settings (and ``hashing_scheme``) sends each key."""
    n, keys = ROUTING_PARTITIONS, routing_keys()
    topic = fresh_topic()
    broker.create_partitioned_topic(topic, n)
    with client.create_producer(topic, hashing_scheme=scheme) as p:
        futures = [p.send_async(k.encode(), key=k, ordering_key=ordering_key_for(k) if with_ordering_key else None)
                   for k in keys]
        p.flush()
        for f in futures:
            f.result(timeout=30)
    return partition_of_each_key(client, topic, n, keys)


@pytest.mark.interop
@pytest.mark.parametrize("scheme", ["java_string", "murmur3"])
def test_key_routing_matches_java_client(broker, client, java_routing, scheme):
    """Keyed messages land on the partition the Java client picks, with its default
    JavaStringHash and with Murmur3_32Hash: magnetar's hash function and a real magnetar
    producer both agree with the Java client on every key."""
    n, keys = ROUTING_PARTITIONS, routing_keys()
    java_where = java_routing[(scheme, False)]
    hashed = {k: _core._key_hash(k, scheme) % n for k in keys}
    wrong = [(k, java_where[k], hashed[k]) for k in keys if hashed[k] != java_where[k]]
    assert not wrong, (f"magnetar._core._key_hash(key, {scheme!r}) % {n} differs from the Java client's partition "
                       f"for {len(wrong)} of {len(keys)} keys, (key, java, magnetar): {wrong[:5]}")
    where = magnetar_routing(client, broker, scheme, False)
    wrong = [(k, java_where[k], where[k]) for k in keys if where[k] != java_where[k]]
    assert not wrong, (f"a magnetar producer routes {len(wrong)} of {len(keys)} keys to another partition than "
                       f"the Java client, (key, java, magnetar): {wrong[:5]}")


@pytest.mark.interop
def test_key_routing_with_ordering_key_matches_java_client(broker, client, java_routing):
    """The Java client routes by the key alone: a message that also carries an ordering key
    lands on its key's partition. A magnetar producer must do the same, or the same key sent
    by the two clients ends up on different partitions."""
    keys = routing_keys()
    java_where = java_routing[("java_string", True)]
    assert java_where == java_routing[("java_string", False)], "the Java client ignores ordering keys when routing"
    where = magnetar_routing(client, broker, "java_string", True)
    wrong = [(k, ordering_key_for(k), java_where[k], where[k]) for k in keys if where[k] != java_where[k]]
    assert not wrong, (f"with an ordering key on every message, a magnetar producer routes {len(wrong)} of "
                       f"{len(keys)} keys to another partition than the Java client, "
                       f"(key, ordering key, java, magnetar): {wrong[:5]}")

"""OpenTelemetry against the real broker, read with the SDK's in-memory exporters: the engine's
counters as metrics (semantic-convention and PIP-342 names), and send/receive spans whose
context travels in the messages' ``traceparent`` property."""

from __future__ import annotations

import asyncio
from typing import Any, Iterator

import pytest

import magnetar
from conftest import Api
from magnetar.testing.faults import free_port
from waiting import wait_until

# opentelemetry-sdk is a hard test dependency (requirements-dev.txt): missing, this module fails; it never skips.
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind  # noqa: E402

from magnetar import telemetry  # noqa: E402
from test_interop import java  # noqa: E402,F401  (the compiled Java client harness)


class Otel:
    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.meters = MeterProvider(metric_readers=[self.reader])
        self.spans = InMemorySpanExporter()
        self.tracers = TracerProvider()
        self.tracers.add_span_processor(SimpleSpanProcessor(self.spans))

    def finished(self) -> list[Any]:
        return list(self.spans.get_finished_spans())

    def points(self, name: str, **attrs: Any) -> list[Any]:
        """The data points of metric ``name`` whose attributes include ``attrs``."""
        data = self.reader.get_metrics_data()
        found: list[Any] = []
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == name:
                        points: list[Any] = list(m.data.data_points)
                        found += [p for p in points
                                  if all(p.attributes.get(k) == v for k, v in attrs.items())]
        return found


@pytest.fixture
def otel() -> Iterator[Otel]:
    o = Otel()
    telemetry.enable(meter_provider=o.meters, tracer_provider=o.tracers)
    assert telemetry.is_enabled()
    yield o
    telemetry.disable()
    o.meters.shutdown()


def _value(points: list[Any]) -> int:
    return sum(p.value for p in points)


def test_metrics_under_both_names(otel: Otel, api: Api, topic: str) -> None:
    producer = api.call(api.client, "create_producer", topic, batching=False)
    consumer = api.call(api.client, "subscribe", topic, "otel", initial_position="earliest",
                        nack_redelivery_delay=0.05)
    api.call(producer, "send_many", [b"a", b"bb", b"ccc"])
    api.call(producer, "send", b"dddd")
    msgs = [api.call(consumer, "receive", timeout=10) for _ in range(4)]
    for m in msgs[:3]:
        api.call(consumer, "ack", m)
    api.call(consumer, "nack", msgs[3])
    api.call(consumer, "ack", api.call(consumer, "receive", timeout=10))

    dest = {"messaging.destination.name": topic}
    sent = otel.points("messaging.client.sent.messages", **dest, **{"messaging.operation.name": "send"})
    assert _value([p for p in sent if "error.type" not in p.attributes]) == 4
    assert all(p.attributes["messaging.system"] == "pulsar" for p in sent)
    assert _value(otel.points("pulsar.client.producer.message.send.size", **dest)) >= 10
    assert _value(otel.points("pulsar.client.producer.message.pending.count", **dest)) == 0
    for name in ("pulsar.client.producer.message.send.duration", "messaging.client.operation.duration"):
        (hist,) = otel.points(name, **dest)
        assert hist.count == 4 and hist.sum > 0, name
    assert _value(otel.points("messaging.client.consumed.messages", **dest)) == 5
    sub = {**dest, "pulsar.subscription": "otel"}
    assert _value(otel.points("pulsar.client.consumer.message.received.count", **sub)) == 5
    assert _value(otel.points("pulsar.client.consumer.message.received.size", **sub)) == 10 + 4
    assert _value(otel.points("pulsar.client.consumer.message.ack", **sub)) == 4
    assert _value(otel.points("pulsar.client.consumer.message.nack", **sub)) == 1
    assert _value(otel.points("pulsar.client.consumer.message.dlq", **sub)) == 0
    assert _value(otel.points("pulsar.client.connection.opened")) >= 1
    # A connection that fails is counted: a client with nothing listening at its address.
    failed_before = _value(otel.points("pulsar.client.connection.failed"))
    with magnetar.Client(f"pulsar://127.0.0.1:{free_port()}", connect_timeout=1.0, operation_timeout=2.0) as nowhere:
        with pytest.raises(magnetar.ConnectError):
            nowhere.create_producer(topic)
        assert _value(otel.points("pulsar.client.connection.failed")) > failed_before
    lookups = otel.points("pulsar.client.lookup.duration", **{"pulsar.lookup.type": "topic"})
    assert sum(p.count for p in lookups) >= 1
    # A later collection adds only what happened since.
    api.call(producer, "send", b"e")
    (hist,) = otel.points("pulsar.client.producer.message.send.duration", **dest)
    assert hist.count == 5
    api.call(consumer, "close")
    api.call(producer, "close")


def test_trace_continues_from_producer_to_consumer(otel: Otel, api: Api, topic: str) -> None:
    producer = api.call(api.client, "create_producer", topic)
    consumer = api.call(api.client, "subscribe", topic, "traced", initial_position="earliest")
    api.call(producer, "send", b"one", properties={"mine": "kept"})
    api.call(producer, "send_many", [b"two", b"three"])
    got = [api.call(consumer, "receive", timeout=10) for _ in range(3)]
    rest = api.call(consumer, "receive_many", 10, 0.2)
    assert rest == []

    spans = otel.finished()
    sends = [s for s in spans if s.kind == SpanKind.PRODUCER]
    receives = [s for s in spans if s.kind == SpanKind.CONSUMER]
    assert [s.name for s in sends] == [f"send {topic}"] * 3
    assert [s.name for s in receives] == [f"receive {topic}"] * 3
    assert got[0].properties["mine"] == "kept"
    for msg, send, receive in zip(got, sends, receives):
        trace_id = f"{send.context.trace_id:032x}"
        assert msg.properties["traceparent"].split("-")[1] == trace_id
        assert receive.context.trace_id == send.context.trace_id
        assert receive.parent is not None and receive.parent.span_id == send.context.span_id
        assert receive.links and receive.links[0].context.span_id == send.context.span_id
        assert send.attributes["messaging.system"] == "pulsar"
        assert send.attributes["messaging.destination.name"] == topic
        assert send.attributes["messaging.operation.type"] == "send"
        assert send.attributes["messaging.message.id"] == str(msg.message_id)
        assert receive.attributes["messaging.consumer.group.name"] == "traced"
    api.call(consumer, "close")
    api.call(producer, "close")


def test_listener_handles_each_message_in_a_process_span(otel: Otel, api: Api, topic: str) -> None:
    """A listener's handler runs inside a ``process`` span that continues the producer's trace,
    so the handler's own spans join it; a handler that raises leaves the error on its span."""
    tracer = otel.tracers.get_tracer("app")
    handled: list[str] = []

    def work(msg: magnetar.Message) -> None:
        with tracer.start_as_current_span("handler work"):
            handled.append(msg.data.decode())
        if msg.data == b"bad" and handled.count("bad") == 1:
            raise ValueError("once")

    async def work_async(msg: magnetar.Message) -> None:
        work(msg)

    consumer = api.call(api.client, "subscribe", topic, "listening", initial_position="earliest",
                        listener=work if api.kind == "sync" else work_async, nack_redelivery_delay=0.1)
    producer = api.call(api.client, "create_producer", topic)
    api.call(producer, "send", b"good")
    api.call(producer, "send", b"bad")
    def all_handled() -> bool:
        return handled.count("bad") == 2 and "good" in handled

    async def in_loop() -> bool:  # the asyncio listener runs only while its loop does
        for _ in range(600):
            if all_handled():
                return True
            await asyncio.sleep(0.05)
        return all_handled()

    assert wait_until(all_handled, 30) if api.kind == "sync" else api.run(in_loop())
    api.call(consumer, "close")

    spans = otel.finished()
    sends = {s.attributes["messaging.message.id"]: s for s in spans if s.kind == SpanKind.PRODUCER}
    processes = [s for s in spans if s.name == f"process {topic}"]
    assert len(processes) == 3
    for p in processes:
        send = sends[p.attributes["messaging.message.id"]]
        assert p.kind == SpanKind.CONSUMER and p.context.trace_id == send.context.trace_id
        assert p.parent is not None and p.parent.span_id == send.context.span_id
        assert p.attributes["messaging.consumer.group.name"] == "listening"
        assert p.attributes["messaging.operation.type"] == "process"
    work_spans = [s for s in spans if s.name == "handler work"]
    assert len(work_spans) == 3
    assert {w.parent.span_id for w in work_spans} == {p.context.span_id for p in processes}
    failed = [p for p in processes if not p.status.is_ok]
    assert len(failed) == 1 and any(e.name == "exception" for e in failed[0].events)
    api.call(producer, "close")


def test_send_async_span_ends_with_its_future(otel: Otel, client: magnetar.Client, topic: str) -> None:
    producer = client.create_producer(topic)
    futures = [producer.send_async(f"m{i}".encode()) for i in range(3)]
    ids = [f.result(timeout=30) for f in futures]
    # The spans end in the futures' callbacks, on the client's dispatch thread.
    assert wait_until(lambda: len([s for s in otel.finished() if s.kind == SpanKind.PRODUCER]) == 3, 10)
    sends = [s for s in otel.finished() if s.kind == SpanKind.PRODUCER]
    assert sorted(s.attributes["messaging.message.id"] for s in sends) == sorted(str(i) for i in ids)


def test_handles_made_before_tracing_is_on_are_traced_until_it_is_off(api: Api, topic: str) -> None:
    """Tracing turned on reaches producers, consumers and readers that already exist (their
    sends and every way of taking a message), and turned off leaves them plain again."""
    producer = api.call(api.client, "create_producer", topic)
    consumer = api.call(api.client, "subscribe", topic, "late", initial_position="earliest")
    reader = api.call(api.client, "create_reader", topic, magnetar.MessageId.earliest)
    o = Otel()
    telemetry.enable(tracer_provider=o.tracers, metrics=False)
    try:
        api.call(producer, "send", b"one")
        api.call(producer, "send_many", [b"two", b"three"])
        assert api.call(consumer, "receive", timeout=10).data == b"one"
        assert [m.data for m in _receive_all(api, consumer, "receive_many", 2)] == [b"two", b"three"]
        assert api.call(reader, "read_next", timeout=10).data == b"one"
        assert [m.data for m in _receive_all(api, reader, "read_many", 2)] == [b"two", b"three"]
        spans = o.finished()
        assert [s.name for s in spans if s.kind == SpanKind.PRODUCER] == [f"send {topic}"] * 3
        receives = [s for s in spans if s.kind == SpanKind.CONSUMER]
        assert len(receives) == 6
        assert sum(1 for s in receives if s.attributes.get("messaging.consumer.group.name") == "late") == 3
        assert type(producer).__name__ in ("Producer", "AsyncProducer")
    finally:
        telemetry.disable()
    before = len(o.finished())
    api.call(producer, "send", b"four")
    assert api.call(consumer, "receive", timeout=10).data == b"four"
    assert api.call(reader, "read_next", timeout=10).data == b"four"
    assert len(o.finished()) == before, "spans made after tracing was turned off"
    for handle in (producer, consumer, reader):
        assert type(handle).__module__ != "magnetar._traced"
        api.call(handle, "close")


def _receive_all(api: Api, handle: Any, method: str, n: int) -> list[Any]:
    got: list[Any] = []
    while len(got) < n:
        got += api.call(handle, method, n - len(got), 1.0)
    return got


def test_nothing_is_added_while_disabled(client: magnetar.Client, topic: str) -> None:
    telemetry.disable()
    assert not telemetry.is_enabled()
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "plain", initial_position="earliest")
    producer.send(b"x", properties={"a": "b"})
    assert consumer.receive(timeout=10).properties == {"a": "b"}


def test_java_style_traceparent_is_read(otel: Otel, client: magnetar.Client, topic: str) -> None:
    """A message from another client carrying a W3C traceparent continues that trace."""
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "foreign", initial_position="earliest")
    telemetry.disable()
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    producer.send(b"x", properties={"traceparent": parent})
    telemetry.enable(meter_provider=otel.meters, tracer_provider=otel.tracers)
    consumer.receive(timeout=10)
    (receive,) = [s for s in otel.finished() if s.kind == SpanKind.CONSUMER]
    assert f"{receive.context.trace_id:032x}" == "0af7651916cd43dd8448eb211c80319c"
    assert f"{receive.parent.span_id:016x}" == "b7ad6b7169203331"


@pytest.mark.interop
def test_java_consumer_sees_the_same_trace(otel: Otel, broker: Any, client: magnetar.Client, topic: str,
                                           java: Any) -> None:
    """The Java client (tests/interop/PulsarInterop.java, ``consume`` mode) reads the
    ``traceparent`` magnetar's send span put in the message, and it names that span's trace."""
    with client.create_producer(topic) as producer:
        producer.send(b"traced", properties={"app": "x"})
    (send,) = [s for s in otel.finished() if s.kind == SpanKind.PRODUCER]
    out = java("consume", broker.service_url, f"{topic}=1")
    (row,) = [line.split("\t") for line in out if line.startswith("MSG\t")]
    props = {bytes.fromhex(k).decode(): bytes.fromhex(v).decode()
             for k, v in (kv.split("=") for kv in row[7].split(","))}
    version, trace_id, span_id, flags = props["traceparent"].split("-")
    assert version == "00" and int(flags, 16) & 1  # sampled
    assert trace_id == f"{send.context.trace_id:032x}"
    assert span_id == f"{send.context.span_id:016x}"
    assert props["app"] == "x"

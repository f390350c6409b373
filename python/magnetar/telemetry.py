"""OpenTelemetry for magnetar: metrics read from the engine's counters, and spans for publish
and receive with the W3C trace context carried in message properties.

::

    import magnetar.telemetry
    magnetar.telemetry.enable()                     # the global meter and tracer providers
    magnetar.telemetry.enable(meter_provider=mp, tracer_provider=tp, tracing=False)
    magnetar.telemetry.disable()

Off by default, and free while off: the engine counts anyway (atomic adds, read by
``Producer.stats()``), and the handles' sends and receives have no tracing in them: turning
tracing on switches every live handle to its traced twin (:mod:`magnetar._traced`). ``opentelemetry-api``
is needed only once :func:`enable` is called (``pip install magnetar[otel]``). See
``docs/telemetry.md`` for the metric names and attributes.
"""

from __future__ import annotations

import threading
import time
import weakref
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence

from . import _core

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider, Observation
    from opentelemetry.trace import Span, Tracer, TracerProvider

__all__ = ["disable", "enable", "is_enabled"]

SYSTEM = "pulsar"
SCOPE = "magnetar"

#: The tracer while tracing is enabled, else None: the one attribute the hot path reads.
_tracer: Tracer | None = None
_metrics_on = False
_lock = threading.Lock()
#: Every live handle (producers, consumers, readers, clients), whichever world created it.
_live: weakref.WeakSet[Any] = weakref.WeakSet()
#: Meter providers whose instruments are already registered (instruments cannot be removed).
_instrumented: list[Any] = []
#: Each handle class's traced twin (:mod:`magnetar._traced` fills it in): while tracing is on,
#: every live handle of such a class is switched to its twin, and back when it is turned off.
TRACED: dict[type, type] = {}


def register(handle: object) -> None:
    """Follows a handle for the metrics and tracing (called by every handle's constructor)."""
    _live.add(handle)
    if _tracer is not None:
        _retype(handle, traced=True)


def _retype(handle: object, *, traced: bool) -> None:
    cls = type(handle)
    if traced:
        twin = TRACED.get(cls)
    else:
        twin = next((base for base, t in TRACED.items() if t is cls), None)
    if twin is not None:
        handle.__class__ = twin


def is_enabled() -> bool:
    """Whether metrics or tracing is on."""
    return _metrics_on or _tracer is not None


def enable(meter_provider: MeterProvider | None = None, tracer_provider: TracerProvider | None = None,
           *, metrics: bool = True, tracing: bool = True) -> None:
    """Turns on OpenTelemetry for every client of the process, existing ones included.

    ``meter_provider`` and ``tracer_provider`` default to OpenTelemetry's global providers.
    With ``metrics``, observable instruments report the engine's counters at each collection;
    with ``tracing``, each send makes a ``send <topic>`` PRODUCER span and puts its context in
    the message's ``traceparent``/``tracestate`` properties, and each received message makes a
    ``receive <topic>`` CONSUMER span, child of (and linked to) the context the message carries.
    Raises ImportError when ``opentelemetry-api`` is missing (``pip install magnetar[otel]``).
    """
    global _tracer, _metrics_on
    from opentelemetry import metrics as otel_metrics, trace

    with _lock:
        if metrics:
            provider = meter_provider or otel_metrics.get_meter_provider()
            if not any(p is provider for p in _instrumented):
                _instruments(provider.get_meter(SCOPE, _core.__version__))
                _instrumented.append(provider)
            _metrics_on = True
        if tracing:
            provider_t = tracer_provider or trace.get_tracer_provider()
            _tracer = provider_t.get_tracer(SCOPE, _core.__version__)
            for handle in list(_live):
                _retype(handle, traced=True)


def disable() -> None:
    """Turns metrics and tracing off again (instruments stay registered but report nothing)."""
    global _tracer, _metrics_on
    with _lock:
        _tracer = None
        _metrics_on = False
        for handle in list(_live):
            _retype(handle, traced=False)


# ---------------------------------------------------------------------------------------------
# Metrics


def _topic_attrs(topic: str) -> dict[str, str]:
    """The attributes of a topic: the messaging conventions' and PIP-342's."""
    base = topic.split("-partition-")[0] if "-partition-" in topic else topic
    attrs = {"messaging.system": SYSTEM, "messaging.destination.name": base, "pulsar.topic": base}
    path = base.split("://", 1)[-1].split("/")
    if len(path) >= 3:
        attrs["pulsar.tenant"] = path[0]
        attrs["pulsar.namespace"] = f"{path[0]}/{path[1]}"
    return attrs


def _handles(cls: type) -> Iterator[Any]:
    if not _metrics_on:
        return
    for h in list(_live):
        core: Any = getattr(h, "_core", None)
        if isinstance(core, cls) and not getattr(core, "closed", True):
            yield h


def _producers() -> Iterator[tuple[dict[str, str], dict[str, Any], Any]]:
    for h in _handles(_core._Producer):
        yield _topic_attrs(h._core.topic), _core._producer_stats(h._core), h


def _consumers() -> Iterator[tuple[dict[str, str], dict[str, Any], Any]]:
    for h in _handles(_core._Consumer):
        topics = sorted({_topic_attrs(t)["messaging.destination.name"] for t in h._core.topics})
        attrs = _topic_attrs(topics[0]) if len(topics) == 1 else {"messaging.system": SYSTEM,
                                                                   "messaging.destination.name": ",".join(topics)}
        sub = h._core.subscription
        attrs.update({"messaging.consumer.group.name": sub, "messaging.destination.subscription.name": sub,
                      "pulsar.subscription": sub})
        yield attrs, _core._consumer_stats(h._core), h


def _clients() -> Iterator[tuple[dict[str, str], dict[str, Any], Any]]:
    for h in _handles(_core._Client):
        yield {"messaging.system": SYSTEM}, _core._client_stats(h._core), h


def _observe(source: Callable[[], Iterable[tuple[dict[str, str], dict[str, Any], Any]]], key: str,
             extra: Mapping[str, str] | None = None) -> Callable[[Any], Iterator[Observation]]:
    from opentelemetry.metrics import Observation

    def callback(_options: Any) -> Iterator[Observation]:
        for attrs, stats, _h in source():
            yield Observation(stats[key], {**attrs, **extra} if extra else attrs)

    return callback


def _replay(histograms: Sequence[tuple[Any, Mapping[str, str]]],
            source: Callable[[], Iterable[tuple[dict[str, str], dict[str, Any], Any]]],
            key: str) -> Callable[[Any], Iterator[Observation]]:
    """A callback (of an instrument that reports nothing itself) that records in
    ``histograms`` what each engine histogram gained since the last collection: one value per
    sample, the upper bound of its bucket (at most 19% above the true value), in seconds."""
    # What each live handle's histogram held at this meter's last collection.
    seen: weakref.WeakKeyDictionary[Any, dict[float, int]] = weakref.WeakKeyDictionary()

    def callback(_options: Any) -> Iterator[Observation]:
        for attrs, stats, h in source():
            hist = stats[key]
            before = seen.setdefault(h, {})
            for bound_ms, count in hist["buckets"]:
                new = count - before.get(bound_ms, 0)
                if new <= 0:
                    continue
                before[bound_ms] = count
                for instrument, extra in histograms:
                    a = {**attrs, **extra}
                    for _ in range(new):
                        instrument.record(bound_ms / 1000.0, a)
        return iter(())

    return callback


_SEND = {"messaging.operation.name": "send", "messaging.operation.type": "send"}
_RECEIVE = {"messaging.operation.name": "receive", "messaging.operation.type": "receive"}

# Observable counters: name, unit, description, and what feeds it as (handles, engine counter,
# extra attributes). The messaging semantic conventions first, then the Java client's names
# (PIP-342).
_COUNTERS: list[tuple[str, str, str, list[tuple[Callable[[], Iterator[Any]], str, dict[str, str]]]]] = [
    ("messaging.client.sent.messages", "{message}", "Messages the broker acknowledged (error.type: failed ones).", [(_producers, "sent", _SEND), (_producers, "failed", {**_SEND, "error.type": "_OTHER"})]),
    ("messaging.client.consumed.messages", "{message}", "Messages delivered to the application.", [(_consumers, "received", _RECEIVE)]),
    ("pulsar.client.producer.message.send.size", "By", "Bytes published.", [(_producers, "sent_bytes", {})]),
    ("pulsar.client.producer.message.pending.count", "{message}", "Messages waiting for the broker's receipt.", [(_producers, "pending", {})]),
    ("pulsar.client.consumer.message.received.count", "{message}", "Messages received by the application.", [(_consumers, "received", {})]),
    ("pulsar.client.consumer.message.received.size", "By", "Payload bytes received by the application.", [(_consumers, "received_bytes", {})]),
    ("pulsar.client.consumer.receive_queue.count", "{message}", "Messages in the receiver queue.", [(_consumers, "queued", {})]),
    ("pulsar.client.consumer.message.ack", "{message}", "Acknowledged messages.", [(_consumers, "acked", {})]),
    ("pulsar.client.consumer.message.nack", "{message}", "Negatively acknowledged messages.", [(_consumers, "nacked", {})]),
    ("pulsar.client.consumer.message.dlq", "{message}", "Messages sent to the dead-letter topic.", [(_consumers, "dead_lettered", {})]),
    ("pulsar.client.consumer.message.redelivered", "{message}", "Received messages that were delivered before.", [(_consumers, "redelivered", {})]),
    ("pulsar.client.connection.opened", "{connection}", "Connections opened.", [(_clients, "connections_opened", {})]),
    ("pulsar.client.connection.closed", "{connection}", "Connections closed.", [(_clients, "connections_closed", {})]),
    ("pulsar.client.connection.failed", "{connection}", "Failed connection attempts.", [(_clients, "connections_failed", {"pulsar.failure.type": "tcp-failed"})]),
]
# The counts that go down as well as up.
_UP_DOWN = {"pulsar.client.producer.message.pending.count", "pulsar.client.consumer.receive_queue.count"}


def _instruments(meter: Any) -> None:
    for name, unit, description, feeds in _COUNTERS:
        up_down = name in _UP_DOWN
        create = meter.create_observable_up_down_counter if up_down else meter.create_observable_counter
        create(name, [_observe(source, key, extra) for source, key, extra in feeds],
               unit=unit, description=description)
    op_duration = meter.create_histogram("messaging.client.operation.duration", unit="s",
                                         description="Send duration, from the write to the broker's receipt.")
    send_duration = meter.create_histogram("pulsar.client.producer.message.send.duration", unit="s",
                                           description="Publish latency, from the write to the receipt.")
    lookup = meter.create_histogram("pulsar.client.lookup.duration", unit="s",
                                    description="Topic lookup duration (redirects included).")
    # Histograms are fed from the engine's buckets by one callback per collection.
    meter.create_observable_gauge("magnetar.telemetry.collect", [
        _replay([(op_duration, _SEND), (send_duration, {})], _producers, "receipt_latency_ms"),
        _replay([(lookup, {"pulsar.lookup.type": "topic"})], _clients, "lookup_duration_ms"),
    ], description="Reports nothing: feeds the histograms.")


# ---------------------------------------------------------------------------------------------
# Tracing: called only while `_tracer` is set.


def _span_attrs(topic: str, operation: str) -> dict[str, Any]:
    # The conventions' attributes only: the SDK's cost grows with each one.
    base = topic.split("-partition-")[0] if "-partition-" in topic else topic
    return {"messaging.system": SYSTEM, "messaging.destination.name": base,
            "messaging.operation.name": operation, "messaging.operation.type": operation}


def start_send(topic: str, fields: Mapping[str, Any] | None, size: int) -> tuple[Span, dict[str, Any]]:
    """Starts a send's span; returns it and the message fields with the trace context added."""
    from opentelemetry import propagate, trace

    assert _tracer is not None
    attrs = _span_attrs(topic, "send")
    attrs["messaging.message.body.size"] = size
    span = _tracer.start_span(f"send {attrs['messaging.destination.name']}", kind=trace.SpanKind.PRODUCER,
                              attributes=attrs)
    out = dict(fields or {})
    properties = dict(out.get("properties") or {})
    propagate.inject(properties, context=trace.set_span_in_context(span))
    out["properties"] = properties
    return span, out


def end_send(span: Span, message_id: object = None, error: BaseException | None = None) -> None:
    from opentelemetry.trace import Status, StatusCode

    if error is not None:
        span.record_exception(error)
        span.set_status(Status(StatusCode.ERROR, str(error)))
        span.set_attribute("error.type", type(error).__name__)
    elif message_id is not None:
        span.set_attribute("messaging.message.id", str(message_id))
    span.end()


@contextmanager
def _ended_on_error(spans: Sequence[Span]) -> Iterator[None]:
    """Ends ``spans`` with the error that leaves the block, and lets it go on."""
    try:
        yield
    except BaseException as e:
        for span in spans:
            end_send(span, error=e)
        raise


def send(core: Any, data: Any, fields: Mapping[str, Any] | None) -> Any:
    """A blocking send with its span."""
    span, traced = start_send(core.topic, fields, _size(data))
    with _ended_on_error([span]):
        msg_id = core.send(data, traced)
    end_send(span, msg_id)
    return msg_id


def send_async(core: Any, data: Any, fields: Mapping[str, Any] | None) -> Any:
    """A queued send whose span ends when its future completes."""
    span, traced = start_send(core.topic, fields, _size(data))
    with _ended_on_error([span]):
        fut = core.send_async(data, traced)

    def done(f: Any) -> None:
        e = f.exception()
        end_send(span, None if e else f.result(), e)

    fut.add_done_callback(done)
    return fut


def _many(topic: str, payloads: Sequence[Any], columns: Mapping[str, Any]) -> tuple[list[Span], dict[str, Any]]:
    """One span per message of a ``send_many``, with each message's properties traced."""
    given = columns.get("properties") or [None] * len(payloads)
    spans, properties = [], []
    for data, props in zip(payloads, given):
        span, traced = start_send(topic, {"properties": props}, _size(data))
        spans.append(span)
        properties.append(traced["properties"])
    return spans, {**columns, "properties": properties}


def _end_many(spans: Sequence[Span], ids: Sequence[Any]) -> None:
    for span, msg_id in zip(spans, ids):
        end_send(span, msg_id)


def send_many(core: Any, payloads: Sequence[Any], columns: Mapping[str, Any]) -> Any:
    """A blocking ``send_many`` with a span per message."""
    spans, traced = _many(core.topic, payloads, columns)
    with _ended_on_error(spans):
        ids = core.send_many(payloads, **traced)
    _end_many(spans, ids)
    return ids


async def send_awaited(core: Any, data: Any, fields: Mapping[str, Any] | None) -> Any:
    """The asyncio send with its span."""
    from ._aio import call

    span, traced = start_send(core.topic, fields, _size(data))
    with _ended_on_error([span]):
        msg_id = await call(core.send, data, traced)
    end_send(span, msg_id)
    return msg_id


async def send_many_awaited(core: Any, payloads: Sequence[Any], columns: Mapping[str, Any]) -> Any:
    """The asyncio ``send_many`` with a span per message."""
    from ._aio import call

    spans, traced = _many(core.topic, payloads, columns)
    with _ended_on_error(spans):
        ids = await call(core.send_many, payloads, **traced)
    _end_many(spans, ids)
    return ids


def _size(data: Any) -> int:
    try:
        return len(data)
    except TypeError:
        return 0


def _consumer_span_args(message: Any, subscription: str | None, operation: str) -> dict[str, Any]:
    """The parent (the producer's span, from ``traceparent``), link and attributes of a
    consumer-side span of ``message``."""
    from opentelemetry import propagate, trace

    props = message.properties
    parent = propagate.extract(props) if "traceparent" in props else None
    links = []
    if parent is not None:
        sc = trace.get_current_span(parent).get_span_context()
        if sc.is_valid:
            links.append(trace.Link(sc))
    attrs = _span_attrs(message.topic, operation)
    attrs["messaging.message.id"] = str(message.message_id)
    attrs["messaging.message.body.size"] = len(message.data)
    if subscription:
        attrs["messaging.consumer.group.name"] = subscription
    return {"name": f"{operation} {attrs['messaging.destination.name']}", "context": parent,
            "kind": trace.SpanKind.CONSUMER, "attributes": attrs, "links": links}


def received(message: Any, subscription: str | None) -> None:
    """Records the receive span of a message, child of (and linked to) its producer's span."""
    tracer = _tracer
    if tracer is None:
        return
    now = time.time_ns()
    span = tracer.start_span(start_time=now, **_consumer_span_args(message, subscription, "receive"))
    span.end(end_time=now)


@contextmanager
def processing(message: Any, subscription: str | None) -> Iterator[None]:
    """A listener's handling of ``message`` as a ``process`` span, current while the handler
    runs (so the handler's own spans continue the producer's trace); an exception the handler
    raises is recorded on it."""
    tracer = _tracer
    if tracer is None:
        yield
        return
    with tracer.start_as_current_span(**_consumer_span_args(message, subscription, "process")):
        yield


def received_many(messages: Sequence[Any], subscription: str | None) -> None:
    for m in messages:
        received(m, subscription)

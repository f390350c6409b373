"""The Python surface: validation, errors, MessageId, pickling, fork safety, Ctrl-C and
asyncio cancellation."""

from __future__ import annotations

import asyncio
import os
import pickle
import signal
import socket
import sys
import threading
import time

import pytest

import magnetar
from magnetar import exceptions

from waiting import bounded, wait_until


def test_exported_names_are_sorted_and_complete():
    assert magnetar.__all__ == sorted(magnetar.__all__)
    for name in magnetar.__all__:
        assert hasattr(magnetar, name), name


def test_every_engine_error_kind_maps_to_an_exception_class():
    for name in magnetar._core._error_class_names():
        cls = getattr(exceptions, name)
        assert issubclass(cls, magnetar.PulsarError)
    assert issubclass(magnetar.Timeout, TimeoutError)
    assert issubclass(magnetar.ConnectError, ConnectionError)
    assert issubclass(magnetar.InvalidConfiguration, ValueError)


@pytest.mark.parametrize("url", ["", "ftp://x:1", "pulsar://", "pulsar://h:99999", "pulsar://a:1,,b:2"])
def test_invalid_service_urls(url):
    with pytest.raises(magnetar.InvalidConfiguration):
        magnetar.Client(url)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"operation_timeout": 0},
        {"operation_timeout": -1},
        {"connect_timeout": "soon"},
        {"keepalive_interval": float("nan")},
        {"memory_limit": -1},
    ],
)
def test_invalid_client_options(kwargs):
    with pytest.raises(magnetar.InvalidConfiguration):
        magnetar.Client("pulsar://127.0.0.1:6650", **kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"compression": "gzip"},
        {"batch_max_messages": 0},
        {"max_pending": 0},
        {"send_timeout": -1},
        {"access_mode": "mine"},
        {"routing_mode": "random"},
        {"hashing_scheme": "md5"},
        {"name": ""},
        {"properties": {"a": 1}},
    ],
)
def test_invalid_producer_options_fail_before_connecting(client, topic, kwargs):
    with pytest.raises(magnetar.InvalidConfiguration):
        client.create_producer(topic, **kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"subscription_type": "fanout"},
        {"initial_position": "middle"},
        {"receiver_queue_size": -1},
        {"ack_timeout": 0.5},
        {"max_redeliver_count": 0},
    ],
)
def test_invalid_consumer_options(client, topic, kwargs):
    with pytest.raises(magnetar.InvalidConfiguration):
        client.subscribe(topic, "s", **kwargs)


@pytest.mark.parametrize("name", ["", "a b", "http://x/y/z", "persistent://t/ns/", "persistent://a/b/c/d", "a/b"])
def test_invalid_topic_names(client, name):
    with pytest.raises(magnetar.InvalidConfiguration):
        client.create_producer(name)
    with pytest.raises(magnetar.InvalidConfiguration):
        client.subscribe(name, "s")


def test_empty_subscription_name(client, topic):
    with pytest.raises(magnetar.InvalidConfiguration):
        client.subscribe(topic, "")


def test_missing_namespace_fails_at_creation(client):
    with pytest.raises(magnetar.PulsarError) as info:
        client.create_producer("persistent://public/no-such-ns/t")
    assert info.value.code is not None


@pytest.mark.parametrize("closing", ["each_handle", "the_client_closes_its_handles"])
def test_use_after_close(service_url, topic, closing):
    client = magnetar.Client(service_url)
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "s")
    if closing == "each_handle":
        producer.close()
        consumer.close()
    else:
        client.close()
    with pytest.raises(magnetar.AlreadyClosed):
        producer.send(b"x")
    with pytest.raises(magnetar.AlreadyClosed):
        producer.send_async(b"x").result(timeout=5)
    with pytest.raises(magnetar.AlreadyClosed):
        consumer.receive(timeout=1)
    with pytest.raises(magnetar.AlreadyClosed):
        consumer.ack(magnetar.MessageId(1, 1))
    client.close()
    with pytest.raises(magnetar.AlreadyClosed):
        client.create_producer(topic)
    client.close()  # idempotent


def test_connect_error_when_nothing_listens():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Refused is final: a ConnectError, not retries until the operation timeout (120 s, past
    # the bound).
    client = magnetar.Client(f"pulsar://127.0.0.1:{port}", connect_timeout=1.0, operation_timeout=120.0)
    with pytest.raises(magnetar.ConnectError):
        bounded(lambda: client.create_producer("t"), 30, "create_producer with nothing listening")
    client.close()


def test_message_too_large_without_chunking(client, topic):
    producer = client.create_producer(topic, batching=False)
    with pytest.raises(magnetar.MessageTooLarge):
        producer.send(b"x" * (6 * 1024 * 1024))
    assert producer.send(b"small")  # the producer is still usable


def test_queue_full_without_blocking(client, topic):
    producer = client.create_producer(topic, max_pending=1, block_if_full=False, batching=True, batch_max_delay=5.0)
    first = producer.send_async(b"a")
    second = producer.send_async(b"b")
    with pytest.raises(magnetar.ProducerQueueFull):
        second.result(timeout=5)
    producer.flush()
    assert first.result(timeout=5)


def test_exclusive_producer_access(api, topic):
    first = api.call(api.client, "create_producer", topic, access_mode="exclusive")
    with pytest.raises(magnetar.ProducerBusy):
        api.call(api.client, "create_producer", topic, access_mode="exclusive")
    api.call(first, "close")
    api.call(api.call(api.client, "create_producer", topic, access_mode="exclusive"), "close")


def test_a_fenced_producer_fails_at_once_and_stops_reconnecting(client, topic, caplog):
    # No send timeout: the send can only end by the broker's fencing reaching it.
    fenced = client.create_producer(topic, access_mode="exclusive", send_timeout=None, batching=False)
    fenced.send(b"before")
    owner = client.create_producer(topic, access_mode="exclusive_with_fencing")
    caplog.set_level("INFO", logger="magnetar")
    with pytest.raises(magnetar.ProducerBusy, match="ProducerFenced"):
        fenced.send(b"after")
    with pytest.raises(magnetar.ProducerBusy, match="ProducerFenced"):
        fenced.send(b"again")
    assert not fenced.is_connected
    assert not [r for r in caplog.records if "retrying" in r.getMessage() and "ProducerFenced" in r.getMessage()]
    owner.send(b"owner")
    owner.close()


def test_explicit_and_initial_sequence_ids(client, topic):
    producer = client.create_producer(topic, batching=False, initial_sequence_id=100)
    consumer = client.subscribe(topic, "s", initial_position="earliest")
    producer.send(b"a")
    producer.send(b"b", sequence_id=0)
    got = [consumer.receive(timeout=10) for _ in range(2)]
    assert [m.sequence_id for m in got] == [100, 0]
    assert producer.last_sequence_id >= 100


def test_delayed_delivery(api, topic):
    """A message sent with ``deliver_after=1.5`` is held back by the broker: messages published
    after it, up to a second later by the broker's clock, reach the consumer before it. (Sent
    without the delay it would come first, before any of them.)"""
    producer = api.call(api.client, "create_producer", topic, batching=False)
    consumer = api.call(api.client, "subscribe", topic, "s", subscription_type="shared", initial_position="earliest")
    api.call(producer, "send", b"later", deliver_after=1.5)
    got: list[magnetar.Message] = []
    while not any(m.data == b"later" for m in got):
        assert len(got) < 600, "the delayed message never came"
        api.call(producer, "send", b"tick")
        got += api.call(consumer, "receive_many", 100, timeout=0.05)
    at = next(i for i, m in enumerate(got) if m.data == b"later")
    late = got[at]
    before = [m.publish_time - late.publish_time for m in got[:at]]
    assert before and max(before) >= 1000, f"published after it, received before it (ms): {before}"


def test_message_id_value_semantics():
    a = magnetar.MessageId(1, 2)
    b = magnetar.MessageId(1, 2, batch_index=3, batch_size=5)
    assert a == magnetar.MessageId(1, 2) and hash(a) == hash(magnetar.MessageId(1, 2))
    assert magnetar.MessageId.earliest < a < b < magnetar.MessageId.latest
    assert magnetar.MessageId.deserialize(b.serialize()) == b
    assert pickle.loads(pickle.dumps(b)) == b
    assert pickle.loads(pickle.dumps(b)).batch_size == 5
    assert str(a) == "1:2:-1:-1"
    with pytest.raises(magnetar.InvalidConfiguration):
        magnetar.MessageId.deserialize(b"\xff\xff\xff")
    assert len({a, magnetar.MessageId(1, 2), b}) == 2


def test_handles_refuse_to_pickle(client, topic):
    producer = client.create_producer(topic)
    for obj in (client, producer):
        with pytest.raises(TypeError, match="cannot be pickled"):
            pickle.dumps(obj)


def test_payload_types(client, topic):
    producer = client.create_producer(topic)
    consumer = client.subscribe(topic, "s", initial_position="earliest")
    for payload in (b"bytes", "text", bytearray(b"ba"), memoryview(b"mv")):
        producer.send(payload)
    assert [consumer.receive(timeout=10).data for _ in range(4)] == [b"bytes", b"text", b"ba", b"mv"]
    with pytest.raises(TypeError):
        producer.send(12345)  # type: ignore[arg-type]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork does not exist here (Windows): no child process "
                    "can inherit a client, so there is nothing for the fork guard to refuse")
def test_fork_child_cannot_use_parent_client_but_can_make_its_own(service_url, topic):
    parent = magnetar.Client(service_url)
    parent.create_producer(topic).send(b"from parent")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            try:
                parent.create_producer(topic)
                code = 10
            except magnetar.AlreadyClosed:
                pass
            child = magnetar.Client(service_url)
            child.create_producer(topic).send(b"from child")
            child.close()
        except BaseException:
            code = 20
        os.write(w, bytes([code]))
        os._exit(0)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    result = os.read(r, 1)
    os.close(r)
    assert result == b"\x00", f"child reported {result!r}"
    consumer = parent.subscribe(topic, "s", initial_position="earliest")
    assert sorted(consumer.receive(timeout=10).data for _ in range(2)) == [b"from child", b"from parent"]
    parent.close()


def test_blocking_receive_is_interrupted_by_ctrl_c(client, topic):
    consumer = client.subscribe(topic, "s")
    main = threading.main_thread().ident
    assert main is not None

    left_receive = threading.Event()

    def ctrl_c_once_receive_waits() -> None:
        # A SIGINT that lands before the main thread is inside receive() would interrupt
        # whatever it was doing instead: wait until receive is its innermost Python frame.
        while sys._current_frames()[main].f_code.co_name != "receive":
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)
        # The receive ends by the signal, within a bound far short of its own 60 s timeout (a
        # receive deaf to the signal would go on waiting, and raise KeyboardInterrupt only as
        # it returned at that timeout).
        if wait_until(lambda: sys._current_frames()[main].f_code.co_name != "receive", 30, 0.01):
            left_receive.set()

    # Python's own Ctrl-C handler, as in a terminal: a suite started in the background by a
    # shell without job control inherits SIGINT ignored, and Python then keeps ignoring it.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    ctrl_c = threading.Thread(target=ctrl_c_once_receive_waits, daemon=True)
    try:
        with pytest.raises(KeyboardInterrupt):
            ctrl_c.start()
            consumer.receive(timeout=60)
    finally:
        signal.signal(signal.SIGINT, previous)
    ctrl_c.join(60)
    assert left_receive.is_set(), "receive went on waiting after Ctrl-C"
    # Nothing was lost: the consumer still works.
    client.create_producer(topic).send(b"after")
    assert consumer.receive(timeout=10).data == b"after"


def test_cancelled_async_receive_loses_nothing(service_url, topic):
    """A receive cancelled while it waits, and one cancelled after its messages arrived but
    before it ran again, take nothing: both messages come next, in order."""
    async def main() -> list[bytes]:
        with magnetar.Client(service_url) as blocking:
            producer = blocking.create_producer(topic)
            async with magnetar.AsyncClient(service_url) as client:
                return await receive_around_cancels(client, producer)

    async def receive_around_cancels(client: magnetar.AsyncClient, producer: magnetar.Producer) -> list[bytes]:
        consumer = await client.subscribe(topic, "s")
        idle = asyncio.ensure_future(consumer.receive())
        await suspended(idle)
        idle.cancel()
        with pytest.raises(asyncio.CancelledError):
            await idle
        late = asyncio.ensure_future(consumer.receive())
        await suspended(late)
        # The loop is held here (blocking calls) until both messages are queued: the
        # waiting receive wakes, but can take only once the loop runs, after the cancel.
        producer.send(b"first")
        producer.send(b"second")
        assert wait_until(lambda: consumer._core.queued == 2, timeout=10)
        late.cancel()
        with pytest.raises(asyncio.CancelledError):
            await late
        return [(await consumer.receive(timeout=10)).data for _ in range(2)]

    assert asyncio.run(main()) == [b"first", b"second"]


async def suspended(task: "asyncio.Task[object]") -> None:
    """Runs the loop until ``task`` waits on the engine's future (its coroutine is suspended at
    that await), within a bound."""
    for _ in range(10_000):
        if getattr(task.get_coro(), "cr_await", None) is not None:
            return
        await asyncio.sleep(0)
    pytest.fail("the receive never started waiting")


def test_async_receive_timeout(service_url, topic):
    async def main() -> None:
        async with magnetar.AsyncClient(service_url) as client:
            consumer = await client.subscribe(topic, "s")
            with pytest.raises(magnetar.Timeout):
                await consumer.receive(timeout=0.2)

    asyncio.run(main())


def test_logging_goes_to_the_magnetar_logger(service_url, topic, caplog):
    """Engine records reach the ``magnetar`` loggers; a level set in Python applies within a
    second (the engine caches levels so that records below them cost no GIL)."""
    import logging
    import time

    caplog.set_level(logging.DEBUG, logger="magnetar")
    until = time.monotonic() + 5
    while not any(r.name.startswith("magnetar") for r in caplog.records) and time.monotonic() < until:
        with magnetar.Client(service_url) as client:  # a new connection logs "connected" at debug
            client.create_producer(topic).close()
    assert any(r.name.startswith("magnetar") for r in caplog.records)


def test_connection_state_is_observable(service_url, topic):
    seen: list[str] = []
    client = magnetar.Client(service_url, on_state_change=seen.append)
    assert client.state == "idle"
    producer = client.create_producer(topic)
    assert client.state == "connected"
    producer.close()
    client.close()
    assert client.state == "closed"
    assert wait_until(lambda: "closed" in seen, 5), seen
    assert seen[0] == "idle" and seen[-1] == "closed"


def test_client_memory_limit(service_url, topic):
    client = magnetar.Client(service_url, memory_limit=1000)
    try:
        producer = client.create_producer(topic, block_if_full=False, batch_max_delay=5.0)
        first = producer.send_async(b"x" * 600)
        second = producer.send_async(b"y" * 600)
        with pytest.raises(magnetar.ProducerQueueFull, match="memory"):
            second.result(timeout=5)
        producer.flush()
        assert first.result(timeout=5)
        # Once acknowledged, the memory is free again.
        assert producer.send(b"z" * 600)
    finally:
        client.close()


def test_an_engine_panic_is_a_pulsar_error_not_a_crash(monkeypatch):
    monkeypatch.setenv("MAGNETAR_TEST_HOOKS", "1")
    with pytest.raises(magnetar.PulsarError, match="internal error in the engine"):
        magnetar._core._panic_in_engine()
    # The runtime survives: the engine still works.
    assert magnetar.MessageId(1, 2).serialize()


def test_the_panic_hook_is_off_unless_asked_for(monkeypatch):
    """The wheel users install carries the hook, inert: without ``MAGNETAR_TEST_HOOKS=1`` at
    the call it refuses, and nothing panics."""
    monkeypatch.delenv("MAGNETAR_TEST_HOOKS", raising=False)
    with pytest.raises(magnetar.InvalidConfiguration, match="MAGNETAR_TEST_HOOKS=1"):
        magnetar._core._panic_in_engine()
    monkeypatch.setenv("MAGNETAR_TEST_HOOKS", "0")
    with pytest.raises(magnetar.InvalidConfiguration, match="MAGNETAR_TEST_HOOKS=1"):
        magnetar._core._panic_in_engine()

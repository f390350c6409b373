"""What users pass as options: durations read one way everywhere (the engine's
``convert::span``), and credentials that never show in a ``repr``."""

from __future__ import annotations

import datetime as _dt
import math
import threading
import time
from typing import Any

import pytest

import magnetar
from conftest import Api

NO_LIMIT: list[Any] = [None, math.inf, 2**40, 2**1000]
NOT_DURATIONS: list[Any] = [-1, -0.001, math.nan, -(2**1000), "5", True]


def _ids(values: list[Any]) -> list[str]:
    return [repr(v)[:12] for v in values]


def _send_later(client: magnetar.Client, topic: str, payload: bytes, delay: float = 0.5) -> threading.Timer:
    producer = client.create_producer(topic)
    timer = threading.Timer(delay, producer.send, (payload,))
    timer.start()
    return timer


# -- call arguments ----------------------------------------------------------------------------


@pytest.mark.parametrize("timeout", NO_LIMIT, ids=_ids(NO_LIMIT))
def test_receive_without_limit_waits_for_the_next_message(api, client, topic, timeout):
    consumer = api.call(api.client, "subscribe", topic, "s")
    timer = _send_later(client, topic, b"later")
    started = time.monotonic()
    assert api.call(consumer, "receive", timeout=timeout).data == b"later"
    assert time.monotonic() - started >= 0.3  # it really waited
    timer.join()
    api.call(consumer, "close")


@pytest.mark.parametrize("timeout", NOT_DURATIONS, ids=_ids(NOT_DURATIONS))
def test_receive_refuses_a_negative_or_nan_timeout(api, topic, timeout):
    consumer = api.call(api.client, "subscribe", topic, "s")
    for method, args in (("receive", ()), ("receive_many", (10,))):
        with pytest.raises(magnetar.InvalidConfiguration, match="timeout"):
            api.call(consumer, method, *args, timeout=timeout)
    api.call(consumer, "close")


def test_receive_many_without_limit_and_a_timedelta(api, client, topic):
    consumer = api.call(api.client, "subscribe", topic, "s")
    timer = _send_later(client, topic, b"many")
    assert [m.data for m in api.call(consumer, "receive_many", 10, timeout=math.inf)] == [b"many"]
    timer.join()
    started = time.monotonic()
    with pytest.raises(magnetar.Timeout):
        api.call(consumer, "receive", timeout=_dt.timedelta(milliseconds=200))
    # A floor only: the wait is never shorter than asked (load can only lengthen it); that it
    # ends at all is the Timeout above.
    assert time.monotonic() - started >= 0.15
    api.call(consumer, "close")


def test_reader_and_send_future_timeouts(client, topic):
    producer = client.create_producer(topic)
    future = producer.send_async(b"x")
    for timeout in NO_LIMIT:
        assert future.result(timeout=timeout) == future.result()
    for timeout in NOT_DURATIONS:
        with pytest.raises(magnetar.InvalidConfiguration):
            future.result(timeout=timeout)
        with pytest.raises(magnetar.InvalidConfiguration):
            future.exception(timeout=timeout)
    reader = client.create_reader(topic)
    assert reader.read_next(timeout=2**40).data == b"x"
    with pytest.raises(magnetar.InvalidConfiguration):
        reader.read_next(timeout=math.nan)


@pytest.mark.parametrize("after", [math.inf, 2**40, -1, math.nan], ids=["inf", "2**40", "-1", "nan"])
def test_deliver_after_must_be_a_finite_delay(api, topic, after):
    producer = api.call(api.client, "create_producer", topic)
    with pytest.raises(magnetar.InvalidConfiguration, match="deliver_after"):
        api.call(producer, "send", b"x", deliver_after=after)
    api.call(producer, "close")


# -- options -----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", NO_LIMIT, ids=_ids(NO_LIMIT))
def test_no_limit_where_it_makes_sense(api_kind, service_url, topic, value):
    twin = Api(api_kind, service_url, operation_timeout=value, connect_timeout=value, keepalive_interval=value)
    try:
        producer = twin.call(twin.client, "create_producer", topic, send_timeout=value,
                             partitions_update_interval=value)
        consumer = twin.call(twin.client, "subscribe", topic, "s", initial_position="earliest",
                             ack_timeout=value, discovery_period=value)
        twin.call(producer, "send", b"unlimited")
        msg = twin.call(consumer, "receive", timeout=value)
        assert msg.data == b"unlimited"
        twin.call(consumer, "ack", msg)
        twin.call(consumer, "close")
        twin.call(producer, "close")
    finally:
        twin.close()


@pytest.mark.parametrize("value", NOT_DURATIONS, ids=_ids(NOT_DURATIONS))
@pytest.mark.parametrize("option", ["operation_timeout", "connect_timeout", "keepalive_interval",
                                    "initial_backoff", "max_backoff"])
def test_client_refuses_negative_or_nan_durations(service_url, option, value):
    for make in (magnetar.Client, magnetar.AsyncClient, magnetar.ClientConfig):
        with pytest.raises(magnetar.InvalidConfiguration, match=option):
            make(service_url, **{option: value})


@pytest.mark.parametrize("value", NOT_DURATIONS[:3], ids=_ids(NOT_DURATIONS[:3]))
def test_producer_and_consumer_refuse_negative_or_nan_durations(api, topic, value):
    for option in ("send_timeout", "batch_max_delay", "partitions_update_interval"):
        with pytest.raises(magnetar.InvalidConfiguration, match=option):
            api.call(api.client, "create_producer", topic, **{option: value})
    for option in ("ack_timeout", "ack_group_time", "nack_redelivery_delay", "discovery_period"):
        with pytest.raises(magnetar.InvalidConfiguration, match=option):
            api.call(api.client, "subscribe", topic, "s", **{option: value})


@pytest.mark.parametrize("value", [None, math.inf, 2**40], ids=["None", "inf", "2**40"])
def test_delays_that_would_never_end_are_refused_with_the_reason(api, topic, value):
    with pytest.raises(magnetar.InvalidConfiguration, match="batching=False"):
        api.call(api.client, "create_producer", topic, batch_max_delay=value)
    with pytest.raises(magnetar.InvalidConfiguration, match="ack_group_time.*use 0"):
        api.call(api.client, "subscribe", topic, "s", ack_group_time=value)
    with pytest.raises(magnetar.InvalidConfiguration, match="nack_redelivery_delay.*never come back"):
        api.call(api.client, "subscribe", topic, "s", nack_redelivery_delay=value)
    with pytest.raises(magnetar.InvalidConfiguration, match="max_backoff.*never be retried"):
        magnetar.Client("pulsar://127.0.0.1:6650", max_backoff=value)


def test_durations_travel_in_client_config_and_spark_options(service_url, topic):
    conf = magnetar.ClientConfig(service_url, operation_timeout=None, connect_timeout=math.inf,
                                 keepalive_interval=_dt.timedelta(seconds=20))  # type: ignore[arg-type]
    with conf.create() as client:
        client.create_producer(topic).send(b"conf")
    from magnetar.spark._options import SourceOptions

    opts = SourceOptions.parse({"service_url": service_url, "topic": topic, "client.operation_timeout": "inf"})
    assert opts.client.operation_timeout == math.inf
    with pytest.raises(magnetar.InvalidConfiguration, match="operation_timeout"):
        SourceOptions.parse({"service_url": service_url, "topic": topic, "client.operation_timeout": "nan"})
    huge = SourceOptions.parse({"service_url": service_url, "topic": topic, "pollTimeoutMs": str(10**400)})
    assert huge.poll_timeout_ms / 1000.0 == 2**31  # no limit, and no OverflowError on the way


# -- secrets -----------------------------------------------------------------------------------

TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJzZWNyZXQifQ.c2lnbmF0dXJl"


def _printed(obj: object) -> str:
    return repr(obj) + str(obj)


def test_no_repr_shows_a_token(service_url):
    auth = magnetar.Authentication.token(TOKEN)
    conf = magnetar.ClientConfig(service_url, authentication=auth)
    raw = magnetar.ClientConfig(service_url, auth_method="token", auth_data=TOKEN.encode())
    from magnetar.spark._options import SourceOptions

    spark = SourceOptions.parse({"service_url": service_url, "topic": "t", "authToken": TOKEN})
    other = SourceOptions.parse({"service_url": service_url, "topic": "t", "authMethod": "basic",
                                 "authData": TOKEN})
    with magnetar.Client(service_url, authentication=auth) as client:
        shown = [_printed(o) for o in (auth, conf, raw, conf.authentication,  # type: ignore[attr-defined]
                                       spark, other, client, client._core)]
    for text in shown:
        assert TOKEN not in text and TOKEN.encode().hex() not in text, text
        assert TOKEN[:20] not in text, text
    assert "token" in _printed(auth)  # the method still shows


def test_no_repr_of_an_async_client_shows_a_token(service_url):
    async def make() -> str:
        client = magnetar.AsyncClient(service_url, authentication=magnetar.Authentication.token(TOKEN))
        try:
            return _printed(client) + _printed(client._core)
        finally:
            await client.close()

    import asyncio

    assert TOKEN not in asyncio.run(make())

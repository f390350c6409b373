"""``magnetar.compat`` honours every official option or refuses it by name (docs/migrating.md,
"Every option"): the ones that used to be accepted and dropped."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import magnetar
import magnetar.compat as pulsar
import magnetar.compat.asyncio as pulsar_asyncio
from magnetar import _core

from conftest import TOKEN_ROLE
from waiting import wait_until

WAIT = 30.0


@pytest.mark.parametrize("options, named", [
    ({"concurrent_lookup_requests": 10}, "concurrent_lookup_requests"),
    ({"log_conf_file_path": "/etc/log4cxx.conf"}, "log_conf_file_path"),
    ({"use_tls": True}, "use_tls"),
])
def test_client_options_magnetar_cannot_honour_are_refused_by_name(service_url: str, options: dict[str, Any],
                                                                   named: str) -> None:
    with pytest.raises(pulsar.InvalidConfiguration, match=named):
        pulsar.Client(service_url, **options)


def test_the_defaults_of_the_refused_options_are_accepted(service_url: str) -> None:
    pulsar.Client(service_url, concurrent_lookup_requests=50000, log_conf_file_path=None, use_tls=False).close()


def test_io_threads_sizes_the_engine_or_says_it_cannot(service_url: str, caplog: pytest.LogCaptureFixture) -> None:
    running = _core._io_threads(1)  # the engine is running in this test process already
    other = running + 1
    with caplog.at_level("WARNING", logger="magnetar"):
        pulsar.Client(service_url, io_threads=other).close()
    assert f"io_threads={other}" in caplog.text


def test_lazy_start_of_partitioned_producers_is_refused_by_name(service_url: str, topic: str) -> None:
    client = pulsar.Client(service_url)
    try:
        with pytest.raises(pulsar.InvalidConfiguration, match="lazy_start_partitioned_producers"):
            client.create_producer(topic, lazy_start_partitioned_producers=True)
        client.create_producer(topic, lazy_start_partitioned_producers=False).close()
    finally:
        client.close()


def test_a_key_shared_policy_needs_a_key_shared_subscription(service_url: str, topic: str) -> None:
    client = pulsar.Client(service_url)
    try:
        with pytest.raises(pulsar.InvalidConfiguration, match="key_shared_policy"):
            client.subscribe(topic, "s", consumer_type=pulsar.ConsumerType.Shared,
                             key_shared_policy=pulsar.ConsumerKeySharedPolicy())
    finally:
        client.close()


def test_max_pending_across_partitions_reaches_the_engine(service_url: str, broker: Any, topic: str) -> None:
    broker.create_partitioned_topic(topic, 4)
    client = pulsar.Client(service_url)
    try:
        producer = client.create_producer(topic, max_pending_messages_across_partitions=8)
        producer.send(b"x")
        producer.close()
        with pytest.raises(magnetar.InvalidConfiguration, match="max_pending_across_partitions"):
            magnetar.Client(service_url).create_producer(topic, max_pending_across_partitions=0)
    finally:
        client.close()


def test_message_listener_threads_bounds_the_listeners_running_at_once(service_url: str, topic: str) -> None:
    """With one listener thread (the official default) two consumers' listeners take turns."""
    client = pulsar.Client(service_url, message_listener_threads=1)
    running, most, seen = [0], [0], []
    lock = threading.Lock()

    def listener(consumer: Any, msg: Any) -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.005)  # widens the window in which an unbounded second listener would overlap
        with lock:
            running[0] -= 1
            seen.append(msg.data())
        consumer.acknowledge(msg)

    try:
        for sub in ("a", "b"):
            client.subscribe(topic, sub, message_listener=listener, initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic)
        for i in range(20):
            producer.send(b"%d" % i)
        assert wait_until(lambda: len(seen) == 40, WAIT)
        assert most[0] == 1
    finally:
        client.close()


def _expired_then_fresh(secured: Any, form: str = "{}") -> Any:
    """A supplier whose first answer expired a minute ago and whose later ones are valid: a
    client gets through only if it asks again (as for a renewed credential)."""
    calls: list[int] = []

    def supplier() -> str:
        calls.append(1)
        return form.format(secured.make_token(TOKEN_ROLE, -60 if len(calls) == 1 else 600))
    supplier.calls = calls  # type: ignore[attr-defined]
    return supplier


def test_custom_authentication_takes_a_supplier_of_fresh_data(secured: Any, topic: str) -> None:
    supplier = _expired_then_fresh(secured)
    with magnetar.Client(secured.service_url, authentication=magnetar.Authentication("token", supplier)) as client:
        client.create_producer(topic).close()
    assert len(supplier.calls) >= 2


@pytest.mark.parametrize("make, form", [
    (pulsar.AuthenticationToken, "{}"),
    (lambda s: pulsar.Authentication("org.apache.pulsar.client.impl.auth.AuthenticationToken", s), "token:{}"),
], ids=["AuthenticationToken", "Authentication"])
def test_compat_credential_functions_are_called_for_fresh_data(secured: Any, topic: str, make: Any,
                                                              form: str) -> None:
    """The official AuthenticationToken(function), and magnetar's Authentication(plugin,
    function of the parameter string)."""
    supplier = _expired_then_fresh(secured, form)
    client = pulsar.Client(secured.service_url, authentication=make(supplier))
    try:
        client.create_producer(topic).close()
    finally:
        client.close()
    assert len(supplier.calls) >= 2  # the expired answer was not the last


def test_the_asyncio_client_refuses_a_reader_listener_and_keeps_its_positional_order(service_url: str) -> None:
    client = pulsar_asyncio.Client(service_url)
    try:
        with pytest.raises(ValueError, match="reader_listener"):
            client.create_reader("t", pulsar.MessageId.earliest, reader_listener=lambda r, m: None)
        with pytest.raises(TypeError, match="multiple values"):
            client.subscribe("t", "s", pulsar.ConsumerType.Shared, consumer_type=pulsar.ConsumerType.Shared)
    finally:
        client._client._core.close()

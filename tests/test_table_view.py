"""Null values (tombstones) and table views, native and compat, on the real broker."""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass
from typing import Any, Iterator

import pytest

import magnetar
import magnetar.compat as pulsar
from magnetar import schema
from magnetar.compat.schema import StringSchema
from magnetar.testing import Standalone
from waiting import wait_until


@dataclass
class Count:
    n: int


@pytest.fixture
def compat(service_url: str) -> Iterator[pulsar.Client]:
    c = pulsar.Client(service_url)
    yield c
    c.close()


# -- null values ---------------------------------------------------------------------------------


@pytest.mark.parametrize("batching", [False, True])
def test_a_null_value_is_not_an_empty_payload(client: magnetar.Client, topic: str, batching: bool) -> None:
    consumer = client.subscribe(topic, "s", initial_position="earliest")
    producer = client.create_producer(topic, batching=batching)
    futures = [producer.send_async(b"", key="empty"), producer.send_async(None, key="gone", properties={"a": "1"}),
               producer.send_async(b"x", key="x")]
    producer.flush()
    [f.result() for f in futures]
    empty, null, x = (consumer.receive(10) for _ in range(3))
    assert (empty.key, empty.null_value, empty.data, empty.value) == ("empty", False, b"", b"")
    assert (null.key, null.null_value, null.data, null.value) == ("gone", True, b"", None)
    assert null.properties == {"a": "1"}
    assert (x.null_value, x.value) == (False, b"x")


def test_a_null_value_skips_the_schema(client: magnetar.Client, topic: str) -> None:
    consumer = client.subscribe(topic, "s", initial_position="earliest", schema=schema.StringSchema())
    producer = client.create_producer(topic, schema=schema.StringSchema())
    producer.send(None, key="k")
    producer.send("v", key="k")
    assert consumer.receive(10).value is None
    assert consumer.receive(10).value == "v"


def test_compat_null_values_as_the_official_client(compat: pulsar.Client, topic: str) -> None:
    producer = compat.create_producer(topic)
    consumer = compat.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
    producer.send(b"", partition_key="k1")
    producer.send(None, partition_key="k2", properties={"action": "delete"})
    empty, null = consumer.receive(10_000), consumer.receive(10_000)
    assert not empty.has_null_value() and empty.data() == b""
    assert null.has_null_value() and null.data() == b"" and null.value() == b""
    assert null.partition_key() == "k2" and null.properties() == {"action": "delete"}


# -- native table views --------------------------------------------------------------------------


def test_table_view_loads_to_the_end_before_returning(client: magnetar.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching=False)
    for i in range(20):
        producer.send(f"v{i}".encode(), key=f"k{i % 5}")
    producer.send(None, key="k0")  # a tombstone removes its key
    producer.send(b"", key="k1")  # so does an empty value, as in the Java client
    producer.send(b"keyless")  # and a message without a key is not in the view
    with client.create_table_view(topic) as view:
        assert dict(view) == {"k2": b"v17", "k3": b"v18", "k4": b"v19"}
        assert len(view) == 3 and "k2" in view and "k0" not in view
        assert view.get("k0") is None and view["k4"] == b"v19"


def test_table_view_follows_updates_and_tells_listeners(client: magnetar.Client, topic: str) -> None:
    producer = client.create_producer(topic, batching=False)
    producer.send(b"a0", key="a")
    view = client.create_table_view(topic)
    seen: list[tuple[str, Any]] = []
    view.for_each_and_listen(lambda k, v: seen.append((k, v)))
    assert seen == [("a", b"a0")]
    producer.send(b"b0", key="b")
    producer.send(b"a1", key="a")
    producer.send(None, key="b")
    assert wait_until(lambda: len(seen) == 4, 10), seen
    assert seen[1:] == [("b", b"b0"), ("a", b"a1"), ("b", None)]
    assert dict(view) == {"a": b"a1"}
    view.close()
    producer.send(b"a2", key="a")
    producer.flush()
    assert view["a"] == b"a1"  # a closed view keeps what it held


def test_table_view_covers_every_partition_with_a_schema(client: magnetar.Client, broker: Standalone) -> None:
    topic = f"persistent://public/default/tv-parts-{threading.get_ident()}"
    broker.create_partitioned_topic(topic, 3)
    producer = client.create_producer(topic, schema=schema.JsonSchema(Count), batching=True)
    for i in range(30):
        producer.send_async(Count(i), key=f"k{i % 10}")
    producer.flush()
    with client.create_table_view(topic, schema=schema.JsonSchema(Count)) as view:
        assert dict(view) == {f"k{i}": Count(20 + i) for i in range(10)}
        got: dict[str, Any] = {}
        view.for_each(got.__setitem__)
        assert got == dict(view)


def test_table_view_reads_the_compacted_topic(client: magnetar.Client, topic: str, broker: Standalone) -> None:
    producer = client.create_producer(topic, batching=False)
    for key, value in [("k1", b"1"), ("k1", None), ("k2", b"2"), ("k2", b"22"), ("k3", b"3")]:
        producer.send(value, key=key)
    producer.close()
    path = broker._topic(topic, "/compaction")
    broker.request("PUT", path)
    assert wait_until(lambda: json.dumps(broker.request("GET", path)).find("RUNNING") < 0, 60)
    assert "SUCCESS" in json.dumps(broker.request("GET", path))
    with client.create_table_view(topic) as view:
        assert dict(view) == {"k2": b"22", "k3": b"3"}


def test_async_table_view(service_url: str, topic: str) -> None:
    async def main() -> None:
        async with magnetar.AsyncClient(service_url) as client:
            producer = await client.create_producer(topic, batching=False)
            await producer.send(b"1", key="k")
            view = await client.create_table_view(topic)
            assert isinstance(view, magnetar.AsyncTableView) and dict(view) == {"k": b"1"}
            changed = asyncio.Event()
            view.listen(lambda k, v: changed.set())
            await producer.send(None, key="k")
            await asyncio.wait_for(changed.wait(), 10)
            assert len(view) == 0
            await view.close()

    asyncio.run(main())


def test_table_view_options_are_checked(client: magnetar.Client, topic: str) -> None:
    with pytest.raises(TypeError, match="schema"):
        client.create_table_view(topic, shema=None)  # type: ignore[call-arg]
    with client.create_table_view(topic) as view:
        with pytest.raises(magnetar.InvalidConfiguration):
            view.listen("not callable")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            view["missing"] = b"x"  # type: ignore[index]


# -- compat table views --------------------------------------------------------------------------


def test_compat_table_view(compat: pulsar.Client, topic: str) -> None:
    producer = compat.create_producer(topic, schema=StringSchema())
    producer.send("v0", partition_key="k0")
    view = compat.create_table_view(topic, schema=StringSchema())
    assert len(view) == 1 and view.get("k0") == "v0" and view.get("missing") is None
    assert str(view) == f"TableView(topic={topic})"
    seen: dict[str, Any] = {}
    view.for_each_and_listen(seen.__setitem__)
    producer.send(None, partition_key="k0")
    producer.send("v1", partition_key="k1")
    # The official listener gets a removed key's empty payload, decoded.
    assert wait_until(lambda: seen == {"k0": "", "k1": "v1"}, 10), seen
    assert view.get("k0") is None and len(view) == 1
    view.close()


def test_compat_asyncio_table_view(service_url: str, topic: str) -> None:
    from magnetar.compat import asyncio as pulsar_asyncio

    async def main() -> None:
        client = pulsar_asyncio.Client(service_url)
        producer = await client.create_producer(topic)
        await producer.send(b"x", partition_key="k")
        view = await client.create_table_view(topic)
        assert view.get("k") == b"x" and len(view) == 1
        await view.close()
        await client.close()

    asyncio.run(main())


def test_the_blocking_and_asyncio_views_are_twins() -> None:
    import inspect

    from test_twins import public, shape

    b, a = public(magnetar.TableView), public(magnetar.AsyncTableView)
    assert set(b) - {"__enter__", "__exit__"} == set(a) - {"__aenter__", "__aexit__"}
    for name in set(b) & set(a):
        assert shape(b[name]) == shape(a[name]), name
    # Only close waits (on the broker); reading the view never does.
    assert sorted(n for n, m in a.items() if inspect.iscoroutinefunction(m)) == ["__aenter__", "__aexit__", "close"]

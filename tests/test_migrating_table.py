"""docs/migrating.md's table of every option against the code: every parameter of the official
client's calls has a row, every row names a parameter ``magnetar.compat`` takes, and every
native name it gives is a declared option. The official signatures come from the installed
``pulsar-client`` package; nothing is listed here twice."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest

import magnetar.compat
import magnetar.compat.asyncio
from magnetar import _options
from magnetar._table_view import TableViewOptions

pulsar = pytest.importorskip("pulsar")
pulsar_asyncio = pytest.importorskip("pulsar.asyncio")

DOC = Path(__file__).resolve().parent.parent / "docs" / "migrating.md"
ROW = re.compile(r"^\| `([\w.]+)` \| `(\w+)` \| ([^|]+) \| ([^|]+) \|$")
STATUS = re.compile(r"^(honoured|refused|n/a)\b")
# The options of issue 30's part A, built alongside this table under the names the issue fixed.
PART_A = {"enable_retry", "retry_letter_topic", "nack_backoff", "ack_timeout_backoff",
          "max_total_receiver_queue_size_across_partitions", "start_paused"}


def rows(section: str) -> list[tuple[str, str, str, str]]:
    text = DOC.read_text()
    body = text.split(f"### {section}", 1)[1].split("\n### ", 1)[0]
    found = [m.groups() for m in map(ROW.match, body.splitlines()) if m]
    assert found, section
    return [tuple(g.strip() for g in row) for row in found]  # type: ignore[misc]


OFFICIAL = rows("The official Python client")
JAVA = rows("The Java client's builders")


def parameters(fn: Any) -> list[str]:
    return [p for p in inspect.signature(fn).parameters if p != "self"]


def official_calls() -> dict[str, list[str]]:
    calls = {"Client": parameters(pulsar.Client.__init__)}
    for name in ("create_producer", "subscribe", "create_reader", "create_table_view"):
        calls[name] = parameters(getattr(pulsar.Client, name))
    return calls


def test_every_official_option_has_a_row() -> None:
    listed = {(call, option) for call, option, _, _ in OFFICIAL}
    for call, params in official_calls().items():
        for p in params:
            assert (call, p) in listed, f"{call}({p}=) is missing from docs/migrating.md"
    for name in ("subscribe", "create_reader", "create_producer"):
        for p in parameters(getattr(pulsar_asyncio.Client, name)):
            assert (name, p) in listed or (f"asyncio.{name}", p) in listed, f"pulsar.asyncio {name}({p}=)"


def test_every_row_is_an_option_compat_takes() -> None:
    compat = {"Client": parameters(magnetar.compat.Client.__init__)}
    for name in ("create_producer", "subscribe", "create_reader", "create_table_view"):
        compat[name] = parameters(getattr(magnetar.compat.Client, name))
    for call, option, status, _ in OFFICIAL:
        assert STATUS.match(status), (call, option, status)
        if call.startswith("asyncio."):
            continue
        assert option in compat[call], f"magnetar.compat {call} has no {option}"


def test_compat_keeps_the_official_positional_orders() -> None:
    for name in ("create_producer", "subscribe", "create_reader", "create_table_view"):
        assert parameters(getattr(magnetar.compat.Client, name)) == parameters(getattr(pulsar.Client, name)), name
    assert parameters(magnetar.compat.Client.__init__) == parameters(pulsar.Client.__init__)
    orders = {"subscribe": magnetar.compat.asyncio._SUBSCRIBE_ORDER, "create_reader": magnetar.compat.asyncio._READER_ORDER}
    for name, order in orders.items():
        official = parameters(getattr(pulsar_asyncio.Client, name))
        assert list(order) == official[official.index(order[0]):], name


NATIVE = {"ClientBuilder": (_options.ClientOptions,), "ProducerBuilder": (_options.ProducerOptions,),
          "ConsumerBuilder": (_options.ConsumerOptions,), "ReaderBuilder": (_options.ReaderOptions,)}


# Native names in the tables that are calls, their arguments or the logger rather than keyword options.
CALLS = {"service_url", "switch_service", "topic", "subscription", "start", "pattern", "receive_many",
         "ack_with_receipt", "magnetar"}
DECLARED = {n for d in (_options.ClientOptions, _options.ProducerOptions, _options.ConsumerOptions,
                        _options.ReaderOptions, TableViewOptions) for n in _options.declared(d)}


@pytest.mark.parametrize("table", ["official", "java"])
def test_every_native_name_is_a_declared_option_or_a_call(table: str) -> None:
    for call, option, status, native in OFFICIAL if table == "official" else JAVA:
        assert STATUS.match(status), (call, option, status)
        for name in re.findall(r"`([a-z_]+)`", native):
            assert name in DECLARED or name in PART_A or name in CALLS, (call, option, name)


def test_the_java_names_declared_as_aliases_are_in_the_table() -> None:
    """Every Java spelling a declaration gives as an alias (what ClientConfig and Spark take)
    has its row, under the declared name."""
    listed = {(b, o): n for b, o, _, n in JAVA}
    for builder, (declaration,) in NATIVE.items():
        for name, d in _options.declared(declaration).items():
            for alias in d.aliases:
                for (b, o), native in listed.items():
                    if b == builder and o == alias:
                        assert f"`{name}`" in native, (builder, alias, name)


def test_table_view_options_cover_the_official_ones() -> None:
    assert "subscription_name" in _options.declared(TableViewOptions)

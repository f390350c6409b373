"""The blocking and asyncio twins offer the same names with the same signatures, so they cannot
drift apart; the options are declared once and the declarations are what the API takes."""

from __future__ import annotations

import asyncio
import inspect
import pickle
from typing import Any

import pytest

import magnetar
import magnetar.admin
from magnetar import _options
from magnetar._handles import COMPLETED

PAIRS = [
    (magnetar.Client, magnetar.AsyncClient),
    (magnetar.Producer, magnetar.AsyncProducer),
    (magnetar.Consumer, magnetar.AsyncConsumer),
    (magnetar.Reader, magnetar.AsyncReader),
    (magnetar.Transaction, magnetar.AsyncTransaction),
    (magnetar.admin.Admin, magnetar.admin.AsyncAdmin),
]

# What only one side has, and why: the asyncio producer's send already returns an awaitable;
# context managers and iteration are spelled differently in each world.
ONLY_BLOCKING = {"send_async", "__enter__", "__exit__", "__iter__"}
ONLY_ASYNC = {"__aenter__", "__aexit__", "__aiter__"}
# Waits, but is not a coroutine function: `AsyncClient.new_transaction()` returns an awaitable
# that is also an async context manager, so `async with client.new_transaction() as txn` works.
AWAITABLE_CONTEXTS = {"new_transaction"}
# Waits, but is not a coroutine function: `AsyncReader.arrow_stream()` returns an async
# iterator of record batches (`async for batch in reader.arrow_stream()`).
ASYNC_ITERATORS = {"arrow_stream"}


def public(cls: type) -> dict[str, Any]:
    names = {n for n in dir(cls) if not n.startswith("_")} | {
        n for n in ("__enter__", "__exit__", "__iter__", "__aenter__", "__aexit__", "__aiter__", "__repr__", "__reduce__")
        if hasattr(cls, n)
    }
    return {n: getattr(cls, n) for n in names}


def shape(member: Any) -> Any:
    """A member's parameters (names, kinds, defaults), or its kind when it is not a function."""
    if isinstance(member, property):
        return "property"
    if not callable(member):
        return type(member).__name__
    return [(p.name, p.kind, p.default) for p in inspect.signature(member).parameters.values()]


@pytest.mark.parametrize("blocking, aio", PAIRS, ids=lambda c: c.__name__)
def test_twins_have_the_same_names_and_signatures(blocking: type, aio: type) -> None:
    b, a = public(blocking), public(aio)
    assert set(b) - ONLY_BLOCKING == set(a) - ONLY_ASYNC
    for name in set(b) & set(a):
        assert shape(b[name]) == shape(a[name]), name


@pytest.mark.parametrize("blocking, aio", PAIRS, ids=lambda c: c.__name__)
def test_async_twins_wait_exactly_where_the_blocking_ones_do(blocking: type, aio: type) -> None:
    """A blocking method that waits on the broker is a coroutine function on the async twin;
    one that never waits is a plain method on both."""
    never_waits = {"ack", "ack_many", "ack_cumulative", "ack_arrow", "nack", "redeliver_unacknowledged", "pause",
                   "resume", "__repr__", "__reduce__"}
    if blocking.__name__ in ("Client", "Producer"):
        never_waits.add("stats")  # the engine's counters (Consumer.stats asks the broker)
    if blocking.__name__ == "Client":
        never_waits.add("switch_service")  # replaces the cluster and closes connections: dials nothing
    for name, member in public(aio).items():
        if not callable(member) or name in ONLY_ASYNC or isinstance(member, property):
            continue
        if name in AWAITABLE_CONTEXTS:
            assert not inspect.iscoroutinefunction(member), name
            assert {"__await__", "__aenter__", "__aexit__"} <= set(dir(magnetar._transaction.OpeningTransaction))
            continue
        if name in ASYNC_ITERATORS:
            assert inspect.isasyncgenfunction(getattr(aio, "_stream")) and not inspect.iscoroutinefunction(member)
            continue
        assert inspect.iscoroutinefunction(member) == (name not in never_waits), name


def test_every_handle_refuses_pickling_and_has_a_repr() -> None:
    for cls in [c for pair in PAIRS for c in pair]:
        assert cls.__reduce__ is not object.__reduce__, cls
        assert cls.__repr__ is not object.__repr__, cls
    for client in (magnetar.Client("pulsar://127.0.0.1:1"), magnetar.AsyncClient("pulsar://127.0.0.1:1")):
        with pytest.raises(TypeError, match="cannot be pickled"):
            pickle.dumps(client)
        assert repr(client) == f"<magnetar.{type(client).__name__} 'pulsar://127.0.0.1:1'>"


def test_completed_is_an_awaitable_that_is_already_done() -> None:
    async def main() -> str:
        await COMPLETED
        return "awaited"

    assert asyncio.run(main()) == "awaited"



@pytest.mark.parametrize(
    "declaration, method",
    [
        (_options.ProducerOptions, magnetar.Client.create_producer),
        (_options.ConsumerOptions, magnetar.Client.subscribe),
        (_options.ReaderOptions, magnetar.Client.create_reader),
        (_options.MessageFields, magnetar.Producer.send),
    ],
    ids=["producer", "consumer", "reader", "message"],
)
def test_each_declared_option_is_documented_on_its_method(declaration: type, method: Any) -> None:
    for name, d in _options.declared(declaration).items():
        assert d.doc, name
        assert f"    {name}: " in method.__doc__


def test_client_config_carries_every_connection_option_with_its_declared_default() -> None:
    config = magnetar.ClientConfig("pulsar://127.0.0.1:6650")
    for name, d in _options.declared(_options.ConnectionOptions).items():
        if name == "authentication":
            assert config.auth_method is None and config.auth_data is None
        else:
            assert getattr(config, name) == d.default, name


def test_unknown_options_raise_type_error_with_the_closest_name() -> None:
    client = magnetar.Client("pulsar://127.0.0.1:1")
    with pytest.raises(TypeError, match="did you mean 'batch_max_messages'"):
        client.create_producer("t", batch_max_mesages=10)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'timeout'"):
        magnetar.Client("pulsar://127.0.0.1:1", timeout=3)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "declaration, option, text, expected",
    [
        (_options.ConsumerOptions, "subscription_type", "Key_Shared", magnetar.SubscriptionType.KEY_SHARED),
        (_options.ConsumerOptions, "initial_position", "EARLIEST", magnetar.InitialPosition.EARLIEST),
        (_options.ProducerOptions, "compression", "lz4", magnetar.Compression.LZ4),
        (_options.ProducerOptions, "access_mode", "wait-for-exclusive", magnetar.AccessMode.WAIT_FOR_EXCLUSIVE),
    ],
)
def test_named_values_are_parsed_at_the_signature_and_strings_stay_accepted(
    declaration: type, option: str, text: str, expected: Any
) -> None:
    assert _options.resolve(declaration, {option: text}, "f")[option] is expected
    assert _options.resolve(declaration, {option: expected}, "f")[option] is expected
    with pytest.raises(magnetar.InvalidConfiguration, match=f"{option} must be one of"):
        _options.resolve(declaration, {option: "nonsense"}, "f")

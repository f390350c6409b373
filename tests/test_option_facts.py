"""Every option fact has one owner, the declarations of ``magnetar._options`` (name, type,
default, unit, value names, other spellings). The engine reads the dicts built from them with
its own key lists and value tables, and its option structs carry defaults for Rust callers: the
tests here fail when those drift from the declarations."""

from __future__ import annotations

import enum
import math
from typing import Any

import pytest

from magnetar import _core
from magnetar import _options as o

FACTS: dict[str, Any] = _core._engine_option_facts()

DECLARATIONS = {"client": o.ClientOptions, "producer": o.ProducerOptions, "consumer": o.ConsumerOptions}

# Declared options that never reach the engine under their own name, and why.
PYTHON_ONLY = {
    "client": {
        "authentication": "turned into auth_method/auth_data/auth_supplier/auth_token_file/auth_http_method",
        "auth_plugin": "the text form of authentication, parsed in magnetar._auth",
        "auth_params": "the text form of authentication, parsed in magnetar._auth",
        "on_state_change": "a watcher thread in Python",
    },
    "producer": {
        "router": "a Python callable: the partition is picked in Python and passed with each send",
        "interceptors": "Python objects called by the intercepted handle classes",
        "schema": "encoded in Python; the engine gets the schema's info separately",
    },
    "consumer": {
        "listener": "a Python thread or task pushes messages to it",
        "listener_concurrency": "the listener's own setting",
        "pattern": "chooses the engine call (subscribe by pattern), not an option of it",
        "schema": "decoded in Python; the engine gets the schema's info separately",
        "interceptors": "Python objects called by the intercepted handle classes (ack timeouts through event_hook)",
        "consumer_event_listener": "called through subscribe's event_hook",
        "subscription_mode": "turned into the engine's durable",
    },
}

# Keys the engine takes that no keyword option declares.
ENGINE_ONLY = {
    "client": {"auth_method", "auth_data", "auth_supplier", "auth_token_file", "auth_http_method"},
    "producer": set(),
    # Readers set these.
    "consumer": {"durable", "start_inclusive", "start_message_id"},
}


@pytest.mark.parametrize("kind", sorted(DECLARATIONS))
def test_the_engine_takes_exactly_the_declared_options(kind: str) -> None:
    declared = set(o.declared(DECLARATIONS[kind]))
    engine = set(FACTS["keys"][kind])
    assert set(PYTHON_ONLY[kind]) <= declared, "a Python-only option is no longer declared"
    assert declared - set(PYTHON_ONLY[kind]) == engine - ENGINE_ONLY[kind]


def test_a_readers_options_are_consumer_keys() -> None:
    declared = set(o.declared(o.ReaderOptions)) - {"reader_name", "schema", "listener", "subscription_role_prefix",
                                                    "subscription_name"}
    assert declared <= set(FACTS["keys"]["consumer"])


def _choices() -> list[tuple[str, type[enum.Enum]]]:
    out: dict[str, type[enum.Enum]] = {}
    python_only = {n for names in PYTHON_ONLY.values() for n in names}
    for decl in (*DECLARATIONS.values(), o.ReaderOptions):
        for name, d in o.declared(decl).items():
            if d.choice is not None and name not in python_only:
                out[name] = d.choice
    return sorted(out.items())


@pytest.mark.parametrize(("option", "choice"), _choices())
def test_each_choice_has_the_engines_value_names(option: str, choice: type[enum.Enum]) -> None:
    engine = FACTS["values"][option]
    # Each name the engine takes stands for its value's first name (murmur3_32 for murmur3).
    canonical = {first for _, first in engine}
    if option == "compression":
        canonical.discard("none")  # no codec is the declaration's None, not a value of the enum
    assert canonical == {c.value for c in choice}


def test_every_choice_of_the_engine_is_declared() -> None:
    assert set(FACTS["values"]) == {name for name, _ in _choices()}


@pytest.mark.parametrize("kind", sorted(DECLARATIONS))
def test_the_engines_defaults_are_the_declared_ones(kind: str) -> None:
    declared = dict(o.declared(DECLARATIONS[kind]))
    if kind == "consumer":
        declared.update(o.declared(o.ReaderOptions))  # readers are consumers to the engine
    engine: dict[str, Any] = FACTS["defaults"][kind]
    assert engine, "no defaults reported"
    for name, value in engine.items():
        d = declared[name]
        expected = d.default
        if name == "compression" and value == "none":
            value = None  # no codec is the declaration's None
        if d.choice is not None and expected is not None:
            expected = expected.value
        if d.unit == "s" and expected is None and value == 0.0:
            # The declaration's "None or 0: never" (statistics, ack timeout): 0 in the engine.
            expected = 0.0
        if isinstance(value, float) and isinstance(expected, (int, float)):
            assert math.isclose(value, expected), f"{kind} option {name}: engine {value!r}, declared {expected!r}"
        else:
            assert value == expected, f"{kind} option {name}: engine {value!r}, declared {expected!r}"

"""The options a user of the pulsar-spark connector already has: ``pulsar.client.*``,
``pulsar.producer.*`` and ``pulsar.reader.*`` with the Java client's names, units and enum
values, and ``authPluginClassName``/``authParams``. Everything here turns them into the
keywords of :mod:`magnetar._options`, the one declaration of every option."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any

from .._options import ConnectionOptions, Declared, ProducerOptions, ReaderOptions, declared
from ..exceptions import InvalidConfiguration

__all__ = ["auth_plugin", "java_kwargs", "keyword_kwargs"]


def _err(option: str, why: str) -> InvalidConfiguration:
    return InvalidConfiguration(f"pulsar data source: option '{option}': {why}")


# The Java name's suffix is its unit; magnetar's keywords take seconds.
_UNITS = (("Nanos", 1e-9), ("Micros", 1e-6), ("Millis", 1e-3), ("Ms", 1e-3), ("Seconds", 1.0))

# Java enum spellings -> magnetar's values (lower-cased lookups).
_JAVA_VALUES: dict[str, dict[str, str | None]] = {
    "compression": {"none": None, "lz4": "lz4", "zlib": "zlib", "zstd": "zstd", "snappy": "snappy"},
    "hashing_scheme": {"javastringhash": "java_string", "murmur3_32hash": "murmur3"},
    "routing_mode": {"roundrobinpartition": "round_robin", "singlepartition": "single_partition"},
    "access_mode": {"shared": "shared", "exclusive": "exclusive", "waitforexclusive": "wait_for_exclusive",
                    "exclusivewithfencing": "exclusive_with_fencing"},
    "batching_type": {"default": "default", "key_based": "key_based"},
}

# Java names of the client with no alias in the declarations (the Java client spells them so),
# and those the data source takes itself rather than passing on.
_CLIENT_EXTRA = {"operationTimeoutMs": "operation_timeout",
                 "tlsHostnameVerificationEnable": "tls_validate_hostname",
                 "tlsKeyFilePath": "tls_private_key_file_path"}
AUTH_NAMES = ("authpluginclassname", "authparams")

_DECLARATIONS: dict[str, tuple[type, tuple[str, ...]]] = {
    "client": (ConnectionOptions, ()),
    "producer": (ProducerOptions, ("properties",)),
    # The data source names its readers' subscriptions itself (``subscriptionName``).
    "reader": (ReaderOptions, ("start_inclusive", "subscription_name")),
}


def _textual(kind: str) -> dict[str, Declared]:
    declaration, skip = _DECLARATIONS[kind]
    return {n: d for n, d in declared(declaration).items() if n not in skip and d.textual}


def _convert(option: str, d: Declared, text: str, scale: float = 1.0) -> Any:
    kind = d.kind()
    t = text.strip()
    if kind is bool:
        if t.lower() in ("true", "1", "yes"):
            return True
        if t.lower() in ("false", "0", "no"):
            return False
        raise _err(option, f"expected true or false, not {text!r}")
    if kind is int:
        try:
            return int(t)
        except ValueError:
            raise _err(option, f"expected an integer, not {text!r}") from None
    if kind is float:
        try:
            return float(t) * scale
        except ValueError:
            raise _err(option, f"expected a number, not {text!r}") from None
    return t


def _unknown(option: str, name: str, known: list[str], prefix: str) -> InvalidConfiguration:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"did you mean '{prefix}{close[0]}'? " if close else ""
    return _err(option, f"unknown option; {hint}known: {', '.join(prefix + k for k in sorted(known))}")


def keyword_kwargs(kind: str, given: Mapping[str, str]) -> dict[str, Any]:
    """``client.*``/``producer.*``/``reader.*``: magnetar's keywords (snake_case, or without the
    underscores since Spark lower-cases names), durations in seconds."""
    decl = _textual(kind)
    by_key = {n.replace("_", ""): d for n, d in decl.items()}
    java = {a.lower(): a for d in decl.values() for a in d.aliases}
    out: dict[str, Any] = {}
    for option, v in given.items():
        name = option.split(".", 1)[1]
        d = by_key.get(re.sub(r"[_-]", "", name.lower()))
        if d is None:
            if name.lower() in java:  # a Java name under the keyword prefix: its unit would be wrong
                raise _err(option, f"'{java[name.lower()]}' is a Java client name: give it as "
                                   f"'pulsar.{kind}.{java[name.lower()]}' (Java units), or use the keyword")
            raise _unknown(option, name, list(decl), f"{kind}.")
        out[d.name] = _keyword_value(option, d, v)
    return out


def _keyword_value(option: str, d: Declared, text: str) -> Any:
    if d.unit == "s" and text.strip().lower() == "inf":
        return float("inf")
    return _convert(option, d, text)


def java_kwargs(kind: str, given: Mapping[str, str]) -> dict[str, Any]:
    """``pulsar.client.*``/``pulsar.producer.*``/``pulsar.reader.*``: the Java client's names,
    units (the name's suffix: ``Ms``, ``Micros``, ``Nanos``, ``Seconds``) and enum values."""
    decl = _textual(kind)
    by_alias: dict[str, tuple[Declared, str]] = {}
    for d in decl.values():
        for alias in d.aliases:
            by_alias[alias.lower()] = (d, alias)
    if kind == "client":
        for alias, name in _CLIENT_EXTRA.items():
            by_alias[alias.lower()] = (decl[name], alias)
    known = sorted({a for _, a in by_alias.values()} | ({"authPluginClassName", "authParams"} if kind == "client" else set()))
    out: dict[str, Any] = {}
    for option, v in given.items():
        name = option.split(".", 2)[2]
        hit = by_alias.get(name.lower())
        if hit is None:
            raise _unknown(option, name, known, f"pulsar.{kind}.")
        d, alias = hit
        scale = 1.0
        if d.unit == "s":
            scale = next((f for suffix, f in _UNITS if alias.endswith(suffix)), 1.0)
        values = _JAVA_VALUES.get(d.name)
        if values is not None:
            key = v.strip().lower()
            if key not in values:
                raise _err(option, f"expected one of {', '.join(sorted(values))} (any case), not {v!r}")
            out[d.name] = values[key]
        else:
            out[d.name] = _convert(option, d, v, scale)
    return out


# -- authentication ---------------------------------------------------------------------------


def auth_plugin(plugin: str, params: str | None) -> dict[str, Any]:
    """``authPluginClassName`` + ``authParams`` -> ClientConfig keywords, for every provider
    magnetar has (token, basic, TLS, OAuth2: :meth:`magnetar.Authentication.from_params`)."""
    from .._auth import Authentication

    text = (params or "").strip()
    try:
        Authentication.from_params(plugin, text)  # refused here, before the job starts
    except InvalidConfiguration as e:
        raise _err("authPluginClassName", str(e)) from None
    return {"auth_plugin": plugin.strip(), "auth_params": text}

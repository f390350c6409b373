"""The data source's options: parsed once on the driver into a picklable value, with errors that
name the option."""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import difflib
import json
import logging
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._config import ClientConfig
from .._core import MessageId
from .._options import ArrowColumns, ConnectionOptions, MetadataColumns, declared
from ..exceptions import InvalidConfiguration
from . import _javaopts

__all__ = [
    "EARLIEST",
    "INT32_MAX",
    "OffsetSpec",
    "PartitionRef",
    "SourceOptions",
    "decode_id",
    "encode_id",
    "id_key",
    "normalize_topic",
]

log = logging.getLogger("magnetar.spark")

INT32_MAX = 2**31 - 1
EARLIEST = MessageId.earliest
LATEST = MessageId.latest


def _err(option: str, why: str) -> InvalidConfiguration:
    return InvalidConfiguration(f"pulsar data source: option '{option}': {why}")


# -- topics and message ids -----------------------------------------------------------------


def normalize_topic(name: str) -> str:
    """``x`` -> ``persistent://public/default/x``; ``t/ns/x`` -> ``persistent://t/ns/x``."""
    name = name.strip()
    if "://" in name:
        return name
    parts = name.split("/")
    if len(parts) == 1:
        return f"persistent://public/default/{name}"
    if len(parts) == 3:
        return f"persistent://{name}"
    raise InvalidConfiguration(f"not a topic name: {name!r}")


@dataclass(frozen=True, order=True)
class PartitionRef:
    """One topic partition: ``index`` -1 for a non-partitioned topic."""

    topic: str
    index: int

    @property
    def name(self) -> str:
        """The name the broker serves it under."""
        return self.topic if self.index < 0 else f"{self.topic}-partition-{self.index}"


def id_key(mid: MessageId) -> tuple[int, int, int]:
    """The position of an id within its partition, as magnetar orders ids: (ledger, entry,
    batch index), a non-batched id (batch index -1) before the batch messages of its entry."""
    return (mid.ledger_id, mid.entry_id, mid.batch_index)


def encode_id(mid: MessageId, partition: int) -> str:
    """The canonical offset string of a position: hex of the serialized MessageId."""
    return MessageId(mid.ledger_id, mid.entry_id, partition, mid.batch_index).serialize().hex()


_HEX = set(string.hexdigits)


def decode_id(value: Any, option: str = "offsets") -> MessageId | str:
    """A MessageId from an offset value: hex or base64 of a serialized id, a list of its bytes
    (pulsar-spark), or ``"earliest"``/``"latest"`` (also -2/-1 as in Spark's Kafka source);
    those two are returned as the strings."""
    if isinstance(value, bool):
        raise _err(option, f"not a message id: {value!r}")
    if value in (-2, "earliest"):
        return "earliest"
    if value in (-1, "latest"):
        return "latest"
    if isinstance(value, list) and all(isinstance(b, int) and 0 <= b < 256 for b in value):
        raw = bytes(value)
    elif isinstance(value, str) and value:
        if len(value) % 2 == 0 and set(value) <= _HEX:
            raw = bytes.fromhex(value)
        else:
            try:
                raw = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raise _err(option, f"not a message id (hex or base64 of MessageId.serialize()): {value!r}") from None
    else:
        raise _err(option, f"not a message id: {value!r}")
    try:
        return MessageId.deserialize(raw)
    except Exception as e:  # noqa: BLE001 - whatever the parser raises
        raise _err(option, f"not a serialized message id: {value!r} ({e})") from None


OffsetSpec = Any  # "earliest" | "latest" | {topic: {partition: MessageId | "earliest" | "latest"}}


def parse_offsets(option: str, text: str | None, allowed: tuple[str, ...]) -> OffsetSpec:
    if text is None:
        return None
    t = text.strip()
    if t.lower() in allowed:
        return t.lower()
    if not t.startswith("{"):
        raise _err(option, f"expected {' or '.join(repr(a) for a in allowed)} or a JSON object, not {text!r}")
    try:
        data = json.loads(t)
    except json.JSONDecodeError as e:
        raise _err(option, f"malformed JSON ({e.msg} at char {e.pos}): {text!r}") from None
    if not isinstance(data, dict) or not data:
        raise _err(option, 'expected a JSON object {"topic": {"partition": "message id", ...}, ...}')
    out: dict[str, dict[int, Any]] = {}
    for topic, parts in data.items():
        try:
            name = normalize_topic(str(topic))
        except InvalidConfiguration as e:
            raise _err(option, str(e)) from None
        if not isinstance(parts, dict):  # a non-partitioned topic may map to its id directly
            parts = {"-1": parts}
        entries: dict[int, Any] = {}
        for p, v in parts.items():
            try:
                idx = int(p)
            except (TypeError, ValueError):
                raise _err(option, f"partition {p!r} of {topic!r} is not an integer") from None
            if idx < -1:
                raise _err(option, f"partition {p!r} of {topic!r} is negative")
            entries[idx] = decode_id(v, option)
        out[name] = entries
    return out


def parse_time(option: str, text: str | None) -> int | None:
    """Milliseconds since the epoch from digits or an ISO-8601 datetime with a time zone."""
    if text is None:
        return None
    t = text.strip()
    if re.fullmatch(r"\d+", t):
        return int(t)
    try:
        d = _dt.datetime.fromisoformat(t)
    except ValueError:
        raise _err(option, f"expected milliseconds since the epoch or an ISO-8601 time, not {text!r}") from None
    if d.tzinfo is None:
        raise _err(option, f"an ISO-8601 time needs a time zone (e.g. 'Z'): {text!r}")
    return int(d.timestamp() * 1000)


def _parse_bool(option: str, text: str) -> bool:
    t = text.strip().lower()
    if t in ("true", "1", "yes"):
        return True
    if t in ("false", "0", "no"):
        return False
    raise _err(option, f"expected true or false, not {text!r}")


def _parse_int(option: str, text: str | None, minimum: int = 1) -> int | None:
    if text is None:
        return None
    try:
        v = int(text.strip())
    except ValueError:
        raise _err(option, f"expected an integer, not {text!r}") from None
    if v < minimum:
        raise _err(option, f"must be at least {minimum}, not {v}")
    return v


# -- the options ----------------------------------------------------------------------------

# The TLS option names of the official Pulsar clients and connectors (the declarations' Java
# aliases), and the Client keyword each one sets; the flags take true or false.
_TLS = {alias: name for name, d in declared(ConnectionOptions).items() if name.startswith("tls_")
        for alias in d.aliases}
_TLS_FLAGS = {alias for alias, name in _TLS.items() if declared(ConnectionOptions)[name].kind() is bool}

# Every option of the data source: its canonical spelling, and the other spellings taken
# (Spark lower-cases option names, so lookups are by lower case).
_OPTIONS: dict[str, tuple[str, ...]] = {
    "service.url": ("service_url", "serviceUrl"),
    "admin.url": ("admin_url", "adminUrl"),
    "topic": (),
    "topics": (),
    "topicsPattern": (),
    "startingOffsets": (),
    "endingOffsets": (),
    "startingTime": (),
    "endingTime": (),
    "maxMessagesPerTrigger": (),
    "maxBytesPerTrigger": (),
    "failOnDataLoss": (),
    "pollTimeoutMs": (),
    "subscriptionName": ("predefinedSubscription",),
    "subscriptionPrefix": (),
    "maxEntriesPerSplit": (),
    "recordsPerBatch": (),
    "metadataColumns": (),
    "allowDifferentTopicSchemas": (),
    "waitingForNonExistedTopic": (),
    "exactlyOnce": (),
    "transactionTimeoutMs": (),
    "writeId": (),
    "writeLog": (),
    "authToken": ("auth_token",),
    "authMethod": ("auth_method",),
    "authData": ("auth_data",),
    "authPluginClassName": (),
    "authParams": (),
    **{k: () for k in _TLS},
}
_CANONICAL = {alias.lower(): name for name, aliases in _OPTIONS.items() for alias in (name, *aliases)}
# Options Spark itself puts among a data source's options.
_SPARK = {"path", "checkpointlocation", "queryname", "outputmode"}
_PREFIXES = ("client.", "producer.", "reader.", "pulsar.client.", "pulsar.producer.", "pulsar.reader.")
METADATA_NAMINGS = tuple(c.value for c in MetadataColumns)


def _check_names(original: Mapping[str, str]) -> None:
    """Every option must be ours (or Spark's own): a misspelt or unsupported option is an error
    with the closest known name, never silently dropped."""
    known = sorted(_OPTIONS)
    for k, name in original.items():
        if k in _CANONICAL or k in _SPARK or k.startswith(_PREFIXES):
            continue
        if k.startswith("pulsar.consumer."):
            raise _err(name, "the data source reads with readers, not consumers: use 'pulsar.reader.*'")
        close = difflib.get_close_matches(k, [n.lower() for n in known] + list(_CANONICAL), n=1, cutoff=0.6)
        hint = f"did you mean {_CANONICAL[close[0]]!r}? " if close else ""
        raise _err(name, f"unknown option; {hint}(the options are listed in docs/spark.md)")


def _auth(get: Any, opts: Mapping[str, str]) -> dict[str, Any]:
    """The credentials, given one of three ways: ``authToken``; ``authMethod``/``authData``
    (any plugin by its wire name); or the connector's ``authPluginClassName``/``authParams``
    (also as ``pulsar.client.*``)."""
    plugin = get("authPluginClassName") or opts.get("pulsar.client.authpluginclassname")
    params = get("authParams") or opts.get("pulsar.client.authparams")
    token, method = get("authToken"), get("authMethod")
    given = [n for n, v in (("authToken", token), ("authMethod", method), ("authPluginClassName", plugin)) if v]
    if len(given) > 1:
        raise _err(given[1], f"give one way of authenticating, not {' and '.join(given)}")
    if params and not plugin:
        raise _err("authParams", "needs authPluginClassName")
    if get("authData") and not method:
        raise _err("authData", "needs authMethod")
    if token is not None:
        return {"auth_method": "token", "auth_data": token.strip().encode()}
    if method is not None:
        return {"auth_method": method.strip(), "auth_data": (get("authData") or "").encode()}
    if plugin:
        return _javaopts.auth_plugin(plugin, params)
    return {}


@dataclass(frozen=True)
class SourceOptions:
    """Every option of the ``pulsar`` data source, parsed and validated."""

    client: ClientConfig
    admin_url: str | None = None
    topic: str | None = None
    topics: tuple[str, ...] = ()
    topics_pattern: str | None = None
    starting_offsets: OffsetSpec = None
    ending_offsets: OffsetSpec = None
    starting_time: int | None = None
    ending_time: int | None = None
    max_messages_per_trigger: int | None = None
    max_bytes_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = 120_000
    subscription_name: str | None = None
    subscription_prefix: str = "magnetar-spark"
    max_entries_per_split: int | None = None
    records_per_batch: int = 10_000
    metadata_columns: str = declared(ArrowColumns)["metadata_columns"].default.value
    allow_different_topic_schemas: bool = False
    waiting_for_non_existed_topic: bool = False
    exactly_once: bool = False
    transaction_timeout_ms: int = 120_000
    write_id: str | None = None
    write_log: str | None = None
    checkpoint_location: str | None = None
    producer_options: tuple[tuple[str, Any], ...] = ()
    reader_options: tuple[tuple[str, Any], ...] = ()
    raw: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        opts = {str(k).lower(): ("" if v is None else str(v)) for k, v in options.items()}
        original = {str(k).lower(): str(k) for k in options}
        _check_names(original)

        def get(name: str) -> str | None:
            """The value of an option by its canonical name, under any of its spellings."""
            given = [(a, opts[a.lower()]) for a in (name, *_OPTIONS[name])
                     if a.lower() in opts and opts[a.lower()].strip() != ""]
            if len({v for _, v in given}) > 1:
                raise _err(name, f"given twice with different values ({', '.join(a for a, _ in given)})")
            return given[0][1] if given else None

        def flag(name: str, default: bool) -> bool:
            value = get(name)
            return default if value is None else _parse_bool(name, value)

        def prefixed(prefix: str) -> dict[str, str]:
            return {original[k]: v for k, v in opts.items()
                    if k.startswith(prefix) and not (prefix.count(".") == 1 and k.startswith("pulsar."))}

        url = get("service.url")
        if url is None:
            raise _err("service.url", "required, e.g. .option('service.url', 'pulsar://localhost:6650')")

        java_client = {k: v for k, v in prefixed("pulsar.client.").items()
                       if k.lower()[len("pulsar.client."):] not in _javaopts.AUTH_NAMES}
        client_kw: dict[str, Any] = _javaopts.java_kwargs("client", java_client)
        for k, v in _javaopts.keyword_kwargs("client", prefixed("client.")).items():
            if k in client_kw and client_kw[k] != v:
                raise _err(f"client.{k}", "also given as a pulsar.client.* option, with another value")
            client_kw[k] = v
        for option, kw in _TLS.items():
            value = get(option)
            if value is not None:
                client_kw[kw] = _parse_bool(option, value) if option in _TLS_FLAGS else value.strip()
        client_kw.update(_auth(get, opts))
        try:
            conf = ClientConfig(url.strip(), **client_kw)
        except InvalidConfiguration as e:
            raise InvalidConfiguration(f"pulsar data source: client options: {e}") from None

        topic = get("topic")
        topics = tuple(t for t in (get("topics") or "").split(",") if t.strip())
        pattern = get("topicsPattern")
        try:
            topic = normalize_topic(topic) if topic else None
            topics = tuple(normalize_topic(t) for t in topics)
        except InvalidConfiguration as e:
            raise _err("topic" if topic else "topics", str(e)) from None
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as e:
                raise _err("topicsPattern", f"not a regular expression: {e}") from None

        max_per_trigger = _parse_int("maxMessagesPerTrigger", get("maxMessagesPerTrigger"))
        max_bytes = _parse_int("maxBytesPerTrigger", get("maxBytesPerTrigger"))
        # Past 2**31 s a duration means "no limit" everywhere; capping there keeps the ms to
        # seconds division from overflowing a float on absurdly large values.
        poll = min(_parse_int("pollTimeoutMs", get("pollTimeoutMs")) or cls.poll_timeout_ms, 2**31 * 1000)
        split = _parse_int("maxEntriesPerSplit", get("maxEntriesPerSplit"))
        per_batch = _parse_int("recordsPerBatch", get("recordsPerBatch")) or cls.records_per_batch
        fail = flag("failOnDataLoss", cls.fail_on_data_loss)
        naming = (get("metadataColumns") or cls.metadata_columns).strip().lower()
        if naming not in METADATA_NAMINGS:
            raise _err("metadataColumns", f"expected 'magnetar' (the default) or 'connector' (pulsar-spark's "
                                          f"__key, __topic, ...), not {naming!r}")

        starting = parse_offsets("startingOffsets", get("startingOffsets"), ("earliest", "latest"))
        ending = parse_offsets("endingOffsets", get("endingOffsets"), ("latest",))
        start_time = parse_time("startingTime", get("startingTime"))
        end_time = parse_time("endingTime", get("endingTime"))
        if starting is not None and start_time is not None:
            raise _err("startingTime", "give startingOffsets or startingTime, not both")
        if start_time is not None and end_time is not None and end_time <= start_time:
            raise _err("endingTime", f"must be after startingTime ({end_time} <= {start_time})")

        exactly_once = flag("exactlyOnce", cls.exactly_once)
        txn_timeout = _parse_int("transactionTimeoutMs", get("transactionTimeoutMs"))
        if txn_timeout is not None and not exactly_once:
            raise _err("transactionTimeoutMs", "only with exactlyOnce=true (writes without it use no transactions)")
        write_id, write_log = get("writeId"), get("writeLog")
        if write_id is not None:
            write_id = write_id.strip()
            if not exactly_once:
                raise _err("writeId", "only with exactlyOnce=true (it names the write's record of committed "
                                      "transactions)")
            if not re.fullmatch(r"[A-Za-z0-9._-]{1,200}", write_id):
                raise _err("writeId", f"{write_id!r}: use letters, digits, '.', '_' and '-' (it names a file)")
            if write_log is None:
                raise _err("writeId", "needs writeLog, the directory where the write's committed transactions "
                                      "are recorded")
        elif write_log is not None:
            raise _err("writeLog", "only with writeId")

        producer_kw = _javaopts.java_kwargs("producer", prefixed("pulsar.producer."))
        producer_kw.update(_javaopts.keyword_kwargs("producer", prefixed("producer.")))
        reader_kw = _javaopts.java_kwargs("reader", prefixed("pulsar.reader."))
        reader_kw.update(_javaopts.keyword_kwargs("reader", prefixed("reader.")))
        admin = get("admin.url")
        return cls(
            client=conf, admin_url=admin.strip().rstrip("/") if admin else None, topic=topic, topics=topics,
            topics_pattern=pattern, starting_offsets=starting, ending_offsets=ending, starting_time=start_time,
            ending_time=end_time, max_messages_per_trigger=max_per_trigger, max_bytes_per_trigger=max_bytes,
            fail_on_data_loss=fail, poll_timeout_ms=poll, subscription_name=get("subscriptionName"),
            subscription_prefix=get("subscriptionPrefix") or cls.subscription_prefix, max_entries_per_split=split,
            records_per_batch=per_batch, metadata_columns=naming,
            allow_different_topic_schemas=flag("allowDifferentTopicSchemas", cls.allow_different_topic_schemas),
            waiting_for_non_existed_topic=flag("waitingForNonExistedTopic", cls.waiting_for_non_existed_topic),
            exactly_once=exactly_once, transaction_timeout_ms=txn_timeout or cls.transaction_timeout_ms,
            write_id=write_id, write_log=write_log.strip() if write_log else None,
            checkpoint_location=(opts.get("checkpointlocation") or "").strip() or None,
            producer_options=tuple(sorted(producer_kw.items())),
            reader_options=tuple(sorted(reader_kw.items())), raw=tuple(sorted(opts.items())),
        )

    # -- checks per use ---------------------------------------------------------------------

    def check_read(self, streaming: bool | None) -> None:
        """Raises unless the options describe a read: a batch read (``streaming`` False), a
        streaming read (True), or either (None)."""
        given = [n for n, v in (("topic", self.topic), ("topics", self.topics), ("topicsPattern", self.topics_pattern)) if v]
        if self.exactly_once:
            raise _err("exactlyOnce", "only for writes (reads are replayed from their offsets, exactly once already)")
        if not given:
            raise _err("topic", "a read needs one of 'topic', 'topics' or 'topicsPattern'")
        if len(given) > 1:
            raise _err(given[1], f"give only one of 'topic', 'topics', 'topicsPattern' (got {', '.join(given)})")
        if streaming is None:
            for name, spec in (("startingOffsets", self.starting_offsets), ("endingOffsets", self.ending_offsets)):
                if isinstance(spec, dict):
                    self._check_offset_topics(name, spec)
        elif streaming:
            if self.ending_offsets is not None:
                raise _err("endingOffsets", "only for batch reads")
            if self.ending_time is not None:
                raise _err("endingTime", "only for batch reads")
            if self.starting_offsets is not None and self.starting_offsets not in ("earliest", "latest"):
                self._check_offset_topics("startingOffsets", self.starting_offsets)
        else:
            for name, value in (("maxMessagesPerTrigger", self.max_messages_per_trigger),
                                ("maxBytesPerTrigger", self.max_bytes_per_trigger)):
                if value is not None:
                    raise _err(name, "only for streaming reads")
            for name, spec in (("startingOffsets", self.starting_offsets), ("endingOffsets", self.ending_offsets)):
                if isinstance(spec, dict):
                    self._check_offset_topics(name, spec)
            if self.starting_offsets == "latest":
                raise _err("startingOffsets", "'latest' is not allowed for batch reads (the result would be empty)")

    def check_stream_write(self) -> None:
        """Raises unless the options fit a streaming write."""
        if self.write_id is not None:
            raise _err("writeId", "only for batch writes: a stream's commits are recorded in its checkpoint, "
                                  "per micro-batch")
        if self.exactly_once and self.checkpoint_location is None:
            raise _err("exactlyOnce", "a stream needs .option('checkpointLocation', ...) on its writeStream: the "
                                      "sink records there what each micro-batch committed (a location set only "
                                      "with spark.sql.streaming.checkpointLocation does not reach the sink)")

    def _check_offset_topics(self, name: str, spec: dict[str, Any]) -> None:
        listed = set(self.topics) | ({self.topic} if self.topic else set())
        if listed:
            extra = sorted(set(spec) - listed)
            if extra:
                raise _err(name, f"names topics that are not read: {extra}")

    def read_topics(self) -> list[str]:
        if self.topic:
            return [self.topic]
        return list(self.topics)

    @property
    def producer_kwargs(self) -> dict[str, Any]:
        return dict(self.producer_options)

    @property
    def reader_kwargs(self) -> dict[str, Any]:
        return dict(self.reader_options)

"""The Rust engine (built by maturin). Private: use the names re-exported by ``magnetar``."""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Iterable, Mapping, Sequence, final

__all__ = [
    "CompatMessage",
    "CompatMessageId",
    "EncryptionContext",
    "Message",
    "MessageId",
    "SendFuture",
    "_Arrival",
    "_ArrowBatch",
    "_ArrowLayout",
    "_AvroCodec",
    "_Client",
    "_CompatProducer",
    "_CompatReceiving",
    "_Consumer",
    "_Producer",
    "_RangeScan",
    "_Receipts",
    "_Transaction",
    "_ValueEncoder",
    "_ValueSchema",
    "__version__",
    "_at_exit",
    "_check_client_options",
    "_client_stats",
    "_consumer_stats",
    "_duration_seconds",
    "_engine_option_facts",
    "_error_class_names",
    "_inject_actor_panic",
    "_io_threads",
    "_key_hash",
    "_panic_in_engine",
    "_producer_stats",
    "_protocol_version",
    "_register_asyncio",
    "_register_compat",
]

__version__: str

@final
class MessageId:
    """Where a message sits in a topic. Ordered, hashable, picklable; ``serialize()`` gives
    the same bytes as the Java and C++ clients."""

    earliest: MessageId
    """Before the first message of a topic."""
    latest: MessageId
    """After the last message of a topic."""

    def __new__(
        cls,
        ledger_id: int,
        entry_id: int,
        partition: int = -1,
        batch_index: int = -1,
        batch_size: int = 0,
        topic: str | None = None,
    ) -> MessageId: ...
    @property
    def ledger_id(self) -> int:
        """Ledger id (-1 for the earliest sentinel)."""
    @property
    def entry_id(self) -> int:
        """Entry id within the ledger."""
    @property
    def partition(self) -> int:
        """Partition index, -1 for a non-partitioned topic."""
    @property
    def batch_index(self) -> int:
        """Index in the batch, -1 when not batched."""
    @property
    def batch_size(self) -> int:
        """Messages in the batch, 0 when unknown or not batched."""
    @property
    def topic(self) -> str | None:
        """The topic the id belongs to, when known."""
    def serialize(self) -> bytes:
        """The id as bytes (a ``MessageIdData`` protobuf)."""
    @classmethod
    def deserialize(cls, data: bytes, topic: str | None = None) -> MessageId:
        """Parses bytes from ``serialize()`` of any Pulsar client."""
    def __lt__(self, other: object, /) -> bool: ...
    def __le__(self, other: object, /) -> bool: ...
    def __gt__(self, other: object, /) -> bool: ...
    def __ge__(self, other: object, /) -> bool: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __reduce__(self) -> tuple[Any, ...]: ...

@final
class Message:
    """A received message. ``memoryview(msg)`` reads the payload without copying it."""

    @property
    def data(self) -> bytes:
        """The payload."""
    def text(self) -> str:
        """The payload decoded as UTF-8."""
    @property
    def key(self) -> str | None:
        """The partition key."""
    @property
    def ordering_key(self) -> bytes | None:
        """The ordering key."""
    @property
    def properties(self) -> dict[str, str]:
        """User properties."""
    @property
    def message_id(self) -> MessageId:
        """The message's id."""
    @property
    def first_chunk_message_id(self) -> MessageId | None:
        """For a message reassembled from chunks, the id of its first chunk (``message_id`` is the last chunk's)."""
    @property
    def topic(self) -> str:
        """The topic (partition) it came from."""
    @property
    def publish_time(self) -> int:
        """Publish time, milliseconds since the epoch."""
    @property
    def event_time(self) -> int | None:
        """Event time in milliseconds since the epoch, or None."""
    @property
    def redelivery_count(self) -> int:
        """Times the broker delivered this message before."""
    @property
    def producer_name(self) -> str:
        """Name of the producer that published it."""
    @property
    def sequence_id(self) -> int:
        """Sequence id assigned by the producer."""
    @property
    def null_value(self) -> bool:
        """Whether the message has a null value (a tombstone, sent as ``send(None)``): ``value``
        is None and ``data`` empty. An empty payload is not a null value."""
    @property
    def value(self) -> Any:
        """The payload decoded by the consumer's schema (the payload bytes without one); None for
        a null value; raises :class:`~magnetar.SchemaDecodeError` when it cannot be decoded."""
    @property
    def schema_version(self) -> bytes | None:
        """The registry's version of the schema the message was written with, or None."""
    def _writer_schema(self) -> tuple[str, int, bytes, dict[str, str], bytes] | None:
        """The writer schema of this message's version, fetched from the registry once."""
    @property
    def encryption(self) -> EncryptionContext | None:
        """How the message was encrypted end to end, or None when it was not."""
    @property
    def _key_b64(self) -> bool:
        """Whether the key is the base64 of bytes (a KeyValue SEPARATED key)."""
    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...
    def __release_buffer__(self, buffer: memoryview, /) -> None: ...

@final
class CompatMessageId:
    """``magnetar.compat.MessageId``: the official client's message id (its Python name is
    ``MessageId``). Equal only to compat ids; hashes as the native id."""

    earliest: CompatMessageId
    """Before the first message of a topic."""
    latest: CompatMessageId
    """After the last message of a topic."""

    def __new__(cls, partition: int = -1, ledger_id: int = -1, entry_id: int = -1,
                batch_index: int = -1) -> CompatMessageId: ...
    @classmethod
    def _of(cls, native: MessageId) -> CompatMessageId:
        """The compat id of a native id."""
    @classmethod
    def wrap(cls, msg_id: Any) -> CompatMessageId:
        """The id itself (a native id: its compat id)."""
    @property
    def _id(self) -> MessageId:
        """The native id."""
    def ledger_id(self) -> int: ...
    def entry_id(self) -> int: ...
    def batch_index(self) -> int: ...
    def partition(self) -> int: ...
    def serialize(self) -> bytes:
        """The id as bytes (a ``MessageIdData`` protobuf)."""
    @staticmethod
    def deserialize(message_id_bytes: bytes, topic: str | None = None) -> CompatMessageId:
        """Parses bytes from ``serialize()``."""
    def __lt__(self, other: object, /) -> bool: ...
    def __le__(self, other: object, /) -> bool: ...
    def __gt__(self, other: object, /) -> bool: ...
    def __ge__(self, other: object, /) -> bool: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __reduce__(self) -> tuple[Any, ...]: ...

@final
class CompatMessage:
    """``magnetar.compat.Message``: a received message whose fields are methods (its Python
    name is ``Message``)."""

    @classmethod
    def _of(cls, native: Message) -> CompatMessage:
        """The compat message of a native message."""
    @property
    def _id(self) -> MessageId:
        """The native id of the message."""
    def data(self) -> bytes: ...
    def value(self) -> Any:
        """The payload decoded by the schema (a null value: the empty payload decoded)."""
    def properties(self) -> dict[str, str]: ...
    def partition_key(self) -> str: ...
    def ordering_key(self) -> str: ...
    def publish_timestamp(self) -> int: ...
    def event_timestamp(self) -> int: ...
    def message_id(self) -> CompatMessageId: ...
    def topic_name(self) -> str: ...
    def redelivery_count(self) -> int: ...
    def schema_version(self) -> str: ...
    def producer_name(self) -> str: ...
    def has_null_value(self) -> bool: ...
    def encryption_context(self) -> Any:
        """``magnetar.compat.EncryptionContext``, or None when not encrypted."""

@final
class EncryptionContext:
    """How a received message was encrypted end to end (``Message.encryption``)."""

    @property
    def keys(self) -> list[tuple[str, bytes, dict[str, str]]]:
        """The encrypted data keys: (key name, RSA-encrypted data key, the key's metadata)."""
    @property
    def param(self) -> bytes:
        """The AES-GCM IV (``encryption_param``)."""
    @property
    def algorithm(self) -> str:
        """``encryption_algo`` as the producer set it ("" when unset, as the Java and C++ clients leave it)."""
    @property
    def compression(self) -> str | None:
        """The codec the payload was compressed with before encryption, or None."""
    @property
    def uncompressed_size(self) -> int:
        """The payload's size before compression (0 when uncompressed)."""
    @property
    def batch_size(self) -> int:
        """Messages in the (encrypted) batch, -1 when not batched."""
    @property
    def decryption_failed(self) -> bool:
        """True when the payload is still encrypted (``crypto_failure_action="consume"``)."""

@final
class SendFuture:
    """The outcome of ``Producer.send_async``: the ``concurrent.futures.Future`` interface."""

    def result(self, timeout: float | None = None) -> MessageId:
        """The message id, waiting up to ``timeout`` seconds; raises the send's error."""
    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The send's exception, or None."""
    def done(self) -> bool:
        """Whether the send completed."""
    def cancel(self) -> bool:
        """Queued sends cannot be cancelled: always False."""
    def cancelled(self) -> bool:
        """Always False."""
    def running(self) -> bool:
        """True while the send is pending."""
    def add_done_callback(self, func: Callable[[SendFuture], object]) -> None:
        """Calls ``func(future)`` on completion, in order, on the client's dispatch thread."""

_Future = asyncio.Future[Any]

@final
class _Client:
    """Engine handle of ``magnetar.Client`` and ``magnetar.AsyncClient``. Each waiting method
    blocks without ``future``; given an asyncio future it returns None at once and resolves it."""

    def __new__(cls, service_url: str, options: Mapping[str, Any],
                failover: tuple[list[str], float, float, float] | None = None) -> _Client:
        """``failover``: secondary service URLs, check interval, failover delay and switch-back
        delay in seconds (``magnetar.AutoClusterFailover``)."""
    def create_producer(self, topic: str, options: Mapping[str, Any], router: Callable[..., int] | None = None, schema: Any = None, *, router_payload: bool = False, future: _Future | None = None) -> Any:
        """Creates a producer: a ``_Producer``; with ``router_payload`` the router is called as
        ``router(key, payload, num_partitions)``."""
    def subscribe(self, topic: str | Sequence[str], subscription: str, options: Mapping[str, Any], pattern: bool = False, schema: Any = None, *, future: _Future | None = None, event_hook: Callable[[str, str | None, list[MessageId] | None], object] | None = None) -> Any:
        """Subscribes: a ``_Consumer``. ``event_hook(kind, topic, ids)`` is called on the
        dispatch thread with ``("active"|"inactive", topic, None)`` or
        ``("nacks_sent"|"ack_timeout", None, ids)``."""
    def partition_count(self, topic: str, *, future: _Future | None = None) -> Any:
        """Partitions of ``topic`` (0 if not partitioned)."""
    def topics_of_namespace(self, namespace: str, *, future: _Future | None = None) -> Any:
        """The persistent topics of ``tenant/namespace``, partitions listed one by one."""
    def web_request(
        self, method: str, path: str, headers: list[tuple[str, str]], body: bytes, *, future: _Future | None = None
    ) -> Any:
        """``method path`` on the web service: ``(status, headers, body)``, redirects followed."""
    def get_schema(self, topic: str, version: bytes | None = None, *, future: _Future | None = None) -> Any:
        """The registry's schema of ``topic``: ``(name, type, definition, properties, version)`` or None."""
    def new_transaction(self, timeout: float | Any, *, future: _Future | None = None) -> Any:
        """Opens a transaction aborted by its coordinator after ``timeout`` seconds: a ``_Transaction``."""
    def transaction_from_id(self, most: int, least: int, *, future: _Future | None = None) -> Any:
        """The open transaction ``(most, least)``: a ``_Transaction``."""
    def switch_service(self, service_url: str, options: Mapping[str, Any]) -> None:
        """Moves the client to ``service_url``; of ``options`` (client options as ``__new__``
        takes them) only the credentials and TLS files are used."""
    def close(self, *, future: _Future | None = None) -> None:
        """Closes everything."""
    @property
    def closed(self) -> bool:
        """Whether the client was closed."""
    @property
    def state(self) -> str:
        """"idle", "connecting", "connected" or "closed"."""
    @property
    def current_cluster(self) -> int:
        """The cluster in use: 0 for the service URL, ``i + 1`` for the ``i``-th failover secondary."""

@final
class _Transaction:
    """Engine handle of a transaction."""

    @property
    def id(self) -> tuple[int, int]:
        """``(most, least)`` significant bits of the id."""
    @property
    def state(self) -> str:
        """"open", "committing", "aborting", "committed", "aborted" or "errored"."""
    def commit(self, *, future: _Future | None = None) -> None:
        """Waits for the transaction's operations, then commits."""
    def abort(self, *, future: _Future | None = None) -> None:
        """Waits for the transaction's operations, then aborts."""

@final
class _Producer:
    """Engine handle of a producer."""

    @property
    def topic(self) -> str:
        """Topic name."""
    @property
    def name(self) -> str:
        """Producer name."""
    @property
    def last_sequence_id(self) -> int:
        """Highest acknowledged sequence id."""
    @property
    def is_connected(self) -> bool:
        """Whether attached now."""
    @property
    def partitions(self) -> int:
        """Partitions (0 if not partitioned)."""
    @property
    def closed(self) -> bool:
        """Whether closed."""
    def send(self, data: Any, fields: Mapping[str, Any] | None = None, *, future: _Future | None = None) -> Any:
        """Sends and returns the ``MessageId`` once the broker has it."""
    def send_async(self, data: Any, fields: Mapping[str, Any] | None = None) -> SendFuture:
        """Queues a message."""
    def send_many(self, payloads: Iterable[Any], keys: Sequence[str | None] | None = None, properties: Sequence[Mapping[str, str] | None] | None = None, event_times: Sequence[Any] | None = None, *, txn: Any = None, future: _Future | None = None) -> Any:
        """Sends many; every ``MessageId`` once all receipts are in."""
    def send_arrow(self, data: Any, value: str = "value", key: str | None = None, properties: str | None = None, event_time: str | None = None, txn: Any = None, encoder: _ValueEncoder | None = None) -> _Receipts:
        """Queues every row of an Arrow batch or table; its receipts once all are queued."""
    def send_arrow_ids(self, data: Any, value: str = "value", key: str | None = None, properties: str | None = None, event_time: str | None = None, txn: Any = None, encoder: _ValueEncoder | None = None, *, future: _Future | None = None) -> Any:
        """Sends every row of an Arrow batch or table; every ``MessageId`` once all receipts are in."""
    def flush(self, *, future: _Future | None = None) -> None:
        """Flushes and waits."""
    def close(self, *, future: _Future | None = None) -> None:
        """Closes."""

@final
class _Consumer:
    """Engine handle of a consumer or reader."""

    @property
    def topics(self) -> list[str]:
        """Covered topics."""
    @property
    def subscription(self) -> str:
        """Subscription name."""
    @property
    def is_connected(self) -> bool:
        """Whether attached now."""
    @property
    def corrupt_messages(self) -> int:
        """Messages discarded as corrupt."""
    @property
    def queued(self) -> int:
        """Messages in the receiver queue."""
    @property
    def closed(self) -> bool:
        """Whether closed."""
    def receive(self, timeout: float | None = None, *, future: _Future | None = None) -> Any:
        """The next message (blocking); with ``future``, None at once, and the future gets the
        message, taken on its event loop's thread only if it is still pending."""
    def try_receive(self, timeout: float | None = None) -> Message | None:
        """A queued message or None, without waiting (``timeout`` is only checked)."""
    def try_receive_many(self, max_messages: int = 100, timeout: float | None = None, max_bytes: int | None = None) -> list[Message]:
        """Up to ``max_messages`` queued messages, without waiting (``timeout`` is only checked)."""
    def receive_many(self, max_messages: int = 100, timeout: float | None = None, max_bytes: int | None = None, *, future: _Future | None = None) -> Any:
        """Up to ``max_messages`` (blocking); with ``future``, as ``receive``."""
    def receive_arrow(self, layout: _ArrowLayout, max_rows: int, timeout: float | None = None, scan: _RangeScan | None = None, *, future: _Future | None = None) -> Any:
        """Up to ``max_rows`` messages as one ``_ArrowBatch`` of ``layout``'s columns (with
        ``future``, completes it with one: what is queued once something is);
        :class:`~magnetar.SchemaDecodeError` when a payload does not decode with the layout's
        ``_ValueSchema`` (naming the topic, the message id and the schema version)."""
    def ack_arrow(self, data: Any) -> int:
        """Acknowledges every row of an Arrow batch or table by its message id column; the
        number of rows."""
    def ack(self, message: Message | MessageId, txn: Any = None) -> None:
        """Acknowledges one message (inside ``txn`` when given)."""
    def ack_many(self, messages: Iterable[Message | MessageId]) -> None:
        """Acknowledges many messages individually."""
    def ack_cumulative(self, message: Message | MessageId, txn: Any = None) -> None:
        """Acknowledges up to a message (inside ``txn`` when given)."""
    def ack_with_receipt(self, message: Message | MessageId, cumulative: bool = False, *, future: _Future | None = None) -> None:
        """Acknowledges and waits for the broker's confirmation."""
    def nack(self, message: Message | MessageId) -> None:
        """Negative acknowledgement."""
    def redeliver_unacknowledged(self) -> None:
        """Redelivers every unacked message."""
    def reconsume_later(self, message: Message, delay: Any, properties: Any = None, *,
                        future: _Future | None = None) -> None:
        """Publishes to the retry letter topic, then acknowledges."""
    def pause(self) -> None:
        """Stops granting permits."""
    def resume(self) -> None:
        """Grants permits again."""
    def seek(self, target: MessageId | int, *, future: _Future | None = None) -> None:
        """Seeks to an id or a time (ms)."""
    def last_message_ids(self, *, future: _Future | None = None) -> Any:
        """Last ``MessageId`` per covered topic."""
    def stats(self, *, future: _Future | None = None) -> Any:
        """Broker statistics per covered topic (dicts)."""
    def has_message_available(self, *, future: _Future | None = None) -> Any:
        """Whether a message is past the last one taken."""
    def unsubscribe(self, *, future: _Future | None = None) -> None:
        """Deletes the subscription."""
    def close(self, *, future: _Future | None = None) -> None:
        """Closes."""

def _error_class_names() -> list[str]:
    """Exception class names the engine's error kinds map to."""

def _protocol_version() -> int:
    """Protocol version this build speaks."""

def _key_hash(key: str, scheme: str = "java_string") -> int:
    """The default router's key hash."""

def _io_threads(threads: int) -> int:
    """Asks for ``threads`` engine I/O threads; returns the count in use (only a request before
    the engine starts takes effect)."""

def _panic_in_engine() -> None:
    """Panics inside an engine task (a test hook): raises PulsarError; InvalidConfiguration
    unless ``MAGNETAR_TEST_HOOKS=1`` is in the environment at the call."""

def _duration_seconds(value: object, what: str, unlimited_ok: bool = True) -> float | None:
    """A user's duration in seconds, read as every engine duration is: None for no limit (None,
    inf, over 2**31 s); InvalidConfiguration if negative, NaN, or unlimited and not ``unlimited_ok``."""

def _check_client_options(options: Mapping[str, Any]) -> None:
    """Validates ``_Client`` options without making a client (InvalidConfiguration)."""

def _register_compat(translate: Any, interrupted: Any, result: Any, result_of: Any,
                     encryption_context: Any) -> None:
    """Gives the engine's compat paths what they raise and hand out (``magnetar.compat`` calls
    it once, at import)."""

def _register_asyncio(resolve_many: Any) -> None:
    """Gives the engine the function that completes asyncio futures on their loop
    (``magnetar._aio`` calls it once, at import)."""

def _engine_option_facts() -> dict[str, Any]:
    """The engine's option keys, value names and struct defaults (tests/test_option_facts.py
    holds them against ``magnetar._options``)."""

def _at_exit(timeout: float) -> None:
    """Run at exit: flushes every open producer of this process within ``timeout`` seconds in
    all, logs a warning per topic whose messages failed or are still unacknowledged, then stops
    the engine's threads from calling into Python."""

def _inject_actor_panic(topic: str) -> int:
    """Makes the producer and consumer actors of ``topic`` panic; returns how many (tests only:
    needs ``MAGNETAR_TEST_HOOKS=1`` in the environment at process start)."""

@final
class _ArrowLayout:
    """The columns a bulk read fills (the fields of an Arrow schema), checked once."""

    def __new__(cls, schema: Any, topic: str, partition: int, values: _ValueSchema | None = None, *,
                per_message: bool = False) -> _ArrowLayout: ...

@final
class _ValueSchema:
    """A topic's schema as the Arrow columns of its decoded payloads."""

    @staticmethod
    def of(kind: int, definition: bytes, version: bytes, client: _Client | None = None,
           topic: str = "") -> _ValueSchema | None:
        """The columns of a schema of wire type ``kind`` (None: payloads stay bytes)."""
    def __arrow_c_schema__(self) -> Any:
        """The Arrow PyCapsule protocol: the schema of the columns."""

@final
class _ValueEncoder:
    """Encodes the rows of a write with a topic's Avro, JSON or primitive schema."""

    @staticmethod
    def of(kind: int, definition: bytes) -> _ValueEncoder | None:
        """An encoder for a schema of wire type ``kind`` (None when payloads stay bytes)."""

@final
class _RangeScan:
    """Which messages of one partition belong to a range of ids, and whether it is complete."""

    def __new__(cls, name: str, start: MessageId | None, verify: bool, end: MessageId, end_time: int | None = None,
                end_is_message: bool = False) -> _RangeScan: ...
    @property
    def done(self) -> bool:
        """Whether the range is complete."""
    @property
    def reached_end(self) -> bool:
        """Whether a message at or after the end was read."""
    @property
    def last_key(self) -> tuple[int, int, int]:
        """(ledger, entry, batch index) of the last message kept."""

@final
class _ArrowBatch:
    """Received messages as one Arrow record batch (``pyarrow.record_batch(obj)``)."""

    @property
    def num_rows(self) -> int:
        """Rows in the batch."""
    @property
    def messages_read(self) -> int:
        """Messages received, kept or not."""
    @property
    def loss(self) -> str | None:
        """What the range scan found missing, if anything."""
    def __arrow_c_array__(self, requested_schema: Any = None) -> tuple[Any, Any]:
        """The Arrow PyCapsule protocol."""

@final
class _Receipts:
    """The receipts of messages queued by ``_Producer.send_arrow``."""

    def __len__(self) -> int: ...
    def wait(self) -> int:
        """Waits for every receipt; the number sent, or raises the first failure."""

@final
class _CompatReceiving:
    """magnetar.compat's per-message calls on a consumer's or reader's engine handle."""

    def __new__(cls, consumer: _Consumer) -> _CompatReceiving: ...
    def receive(self, timeout_millis: int | None = None) -> CompatMessage:
        """``receive(timeout_millis)`` of magnetar.compat."""
    def ack(self, message: CompatMessage) -> None:
        """``acknowledge(msg)`` of magnetar.compat."""

@final
class _CompatProducer:
    """magnetar.compat's ``send_async`` on a producer's engine handle."""

    def __new__(cls, producer: _Producer) -> _CompatProducer: ...
    def send_async(self, content: Any, callback: Callable[[Any, Any], Any] | None,
                   fields: Mapping[str, Any] | None = None) -> None:
        """``send_async(content, callback)`` of magnetar.compat."""

@final
class _Arrival:
    """One asyncio receive in flight: called with its future on the event loop's thread, it
    takes what the receive wants only if the future is still pending."""

    def __call__(self, future: _Future) -> None: ...

@final
class _AvroCodec:
    """Avro binary and JSON encoding and decoding against an Avro definition (magnetar.schema)."""

    def __new__(cls, definition: str, constructors: Mapping[str, Any]) -> _AvroCodec: ...
    def encode(self, value: Any) -> bytes:
        """The Avro binary encoding of ``value``."""
    def decode(self, data: bytes) -> Any:
        """The value of Avro binary ``data``."""
    def encode_json(self, value: Any) -> bytes:
        """The JSON encoding of ``value``."""
    def decode_json(self, data: bytes) -> Any:
        """The value of JSON ``data``."""
    def check(self, data: bytes) -> None:
        """Raises ``ValueError`` unless ``data`` is one Avro binary datum of the definition."""
    def check_json(self, data: bytes) -> None:
        """Raises ``ValueError`` unless ``data`` is JSON the definition reads."""

def _producer_stats(producer: _Producer) -> dict[str, Any]:
    """A producer's client-side statistics (see ``Producer.stats``)."""

def _consumer_stats(consumer: _Consumer) -> dict[str, Any]:
    """A consumer's client-side statistics (the ``"client"`` entry of ``Consumer.stats``)."""

def _client_stats(client: _Client) -> dict[str, Any]:
    """A client's connection and lookup statistics (see ``Client.stats``)."""

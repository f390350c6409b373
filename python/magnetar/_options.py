"""Every option of the API, declared once: name, type, default, unit, other spellings and doc.

The declarations are ``TypedDict`` classes whose fields carry an :class:`Opt`. Type checkers and
editors read them through ``**options: Unpack[ProducerOptions]``; at run time :func:`resolve`
checks what a caller gave against them, turns enum strings into enums and fills in the
defaults, so the dict the engine receives is complete. The Spark data source (and any other
place that takes options as text) reads its names and types from :func:`declared`.
"""

from __future__ import annotations

import datetime as _dt
import difflib
import enum
import functools
import os
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Awaitable, Callable, Mapping, NamedTuple, Sequence, TypedDict, Union

from ._auth import Authentication
from ._backoff import Backoff
from ._crypto import CryptoKeyReader
from ._interceptors import ConsumerEventListener, ConsumerInterceptor, ProducerInterceptor
from ._core import Message, MessageId
from .exceptions import InvalidConfiguration
from ._transaction import TransactionHandle
from .schema import Schema

__all__ = [
    "AccessMode",
    "ArrowColumns",
    "ArrowSendColumns",
    "Authentication",
    "Backoff",
    "BatchingType",
    "ClientOptions",
    "ClusterOptions",
    "Compression",
    "ConnectionOptions",
    "ConsumerOptions",
    "CryptoFailureAction",
    "Declared",
    "HashingScheme",
    "InitialPosition",
    "KeySharedMode",
    "MessageFields",
    "MetadataColumns",
    "Opt",
    "ProducerOptions",
    "PatternTopics",
    "ReaderOptions",
    "SendManyColumns",
    "RoutingMode",
    "Seconds",
    "SubscriptionMode",
    "SubscriptionType",
    "TimeLike",
    "declared",
    "option_docs",
    "resolve",
]

TimeLike = Union[int, float, _dt.datetime]
"""A point in time: a ``datetime`` (naive means local time) or milliseconds since the epoch."""

Seconds = Union[float, _dt.timedelta, None]
"""A duration: seconds (int or float) or a ``timedelta``; ``None`` or ``inf``: no limit."""


class _Choice(str, enum.Enum):
    """An option with named values; the plain strings are accepted too, in any case."""

    def __str__(self) -> str:
        return self.value


class SubscriptionType(_Choice):
    """How a subscription hands messages to its consumers."""

    EXCLUSIVE = "exclusive"
    """One consumer; others are refused."""
    SHARED = "shared"
    """Messages spread round-robin over consumers; acks are individual."""
    FAILOVER = "failover"
    """One active consumer per partition; the others stand by."""
    KEY_SHARED = "key_shared"
    """Messages with the same key always go to the same consumer."""


class SubscriptionMode(_Choice):
    """Whether the broker keeps a subscription's position when its consumers leave."""

    DURABLE = "durable"
    """Kept until unsubscribed: consumers resume where acknowledgements left off."""
    NON_DURABLE = "non_durable"
    """Gone once its last consumer leaves (nothing stays in the backlog); a consumer that
    reconnects resumes after the last message it took."""


class InitialPosition(_Choice):
    """Where a new subscription starts."""

    LATEST = "latest"
    EARLIEST = "earliest"


class KeySharedMode(_Choice):
    """How a Key_Shared subscription gives keys to its consumers."""

    AUTO_SPLIT = "auto_split"
    """The broker splits the key hash space among the consumers."""
    STICKY = "sticky"
    """Each consumer takes the hash ranges it names (``key_shared_ranges``)."""


class PatternTopics(_Choice):
    """Which topics a pattern subscription covers."""

    PERSISTENT = "persistent"
    NON_PERSISTENT = "non_persistent"
    ALL = "all"


class Compression(_Choice):
    """Codec of a producer's batches (``None``: uncompressed)."""

    LZ4 = "lz4"
    ZLIB = "zlib"
    ZSTD = "zstd"
    SNAPPY = "snappy"


class AccessMode(_Choice):
    """Whether other producers may publish to the topic at the same time."""

    SHARED = "shared"
    EXCLUSIVE = "exclusive"
    WAIT_FOR_EXCLUSIVE = "wait_for_exclusive"
    EXCLUSIVE_WITH_FENCING = "exclusive_with_fencing"


class RoutingMode(_Choice):
    """How keyless messages spread over partitions (keyed ones follow their key's hash)."""

    ROUND_ROBIN = "round_robin"
    SINGLE_PARTITION = "single_partition"


class HashingScheme(_Choice):
    """The key hash that picks a partition (the Java client's default is ``java_string``)."""

    JAVA_STRING = "java_string"
    MURMUR3 = "murmur3"


class BatchingType(_Choice):
    """``key_based`` batches hold one key each, so Key_Shared consumers can take whole batches."""

    DEFAULT = "default"
    KEY_BASED = "key_based"


class CryptoFailureAction(_Choice):
    """What a consumer does with a message it cannot decrypt."""

    FAIL = "fail"
    """Do not deliver it and leave it unacknowledged, so it comes back (ack timeout, another
    consumer) once the key is there."""
    DISCARD = "discard"
    """Acknowledge it (the broker records a decryption error) and drop it."""
    CONSUME = "consume"
    """Deliver it still encrypted (and compressed); ``msg.encryption.decryption_failed`` is
    True. A batch then comes as one message."""


class MetadataColumns(_Choice):
    """The names (and types) of the metadata columns of a read into Arrow (``read_arrow``,
    ``receive_arrow``, the Spark source's ``metadataColumns``)."""

    MAGNETAR = "magnetar"
    """``key``, ``value``, ``topic``, ``partition``, ``message_id``, ``publish_time``,
    ``event_time``, ``properties``, ``producer_name``, ``sequence_id``, ``redelivery_count``."""
    CONNECTOR = "connector"
    """pulsar-spark's: ``value``, ``__key`` (bytes), ``__topic`` (the partition's name),
    ``__messageId``, ``__publishTime``, ``__eventTime``, ``__messageProperties``."""


class Opt(NamedTuple):
    """What a declaration says of one option besides its name and type."""

    default: Any
    doc: str
    unit: str | None = None
    """``"s"`` for durations (seconds or a timedelta), ``"bytes"`` for sizes."""
    aliases: tuple[str, ...] = ()
    """Other spellings taken where options arrive as text (the Java client's names)."""




class ClusterOptions(TypedDict, total=False):
    """The options of :class:`magnetar.Client` that may differ from cluster to cluster: those
    ``Client.switch_service`` takes."""

    authentication: Annotated[Union["Authentication", None], Opt(None, "Credentials sent when connecting and whenever the broker asks (see :class:`~magnetar.Authentication`).")]
    tls_trust_certs_file_path: Annotated[Union[str, "os.PathLike[str]", None], Opt(None, "PEM file of the CA certificates that sign the brokers' certificates (``pulsar+ssl://``); default: the Mozilla roots. A missing file raises InvalidConfiguration at once.", aliases=("tlsTrustCertsFilePath",))]


class ConnectionOptions(ClusterOptions, total=False):
    """Options of :class:`magnetar.Client` that a :class:`magnetar.ClientConfig` carries."""

    operation_timeout: Annotated[Seconds, Opt(30.0, "Limit of each request to a broker (lookup, create, seek...).", "s", ("operationTimeoutSeconds",))]
    connect_timeout: Annotated[Seconds, Opt(10.0, "Limit of each TCP (and TLS) connection attempt.", "s", ("connectionTimeoutMs",))]
    keepalive_interval: Annotated[Seconds, Opt(30.0, "Ping period; a broker silent for two periods is dropped.", "s", ("keepAliveIntervalSeconds",))]
    memory_limit: Annotated[int, Opt(64 * 1024 * 1024, "Bytes of pending outgoing payloads, all producers together; 0: no limit.", "bytes", ("memoryLimitBytes",))]
    auth_plugin: Annotated[Union[str, None], Opt(None, "Credentials as text, the official clients' way: ``token``, ``basic``, ``tls``, ``oauth2`` (or the Java class name), with ``auth_params``; instead of ``authentication``.", aliases=("authPluginClassName",))]
    auth_params: Annotated[Union[str, None], Opt(None, "Parameters of ``auth_plugin``: ``token:<jwt>`` or ``file:///path``; ``{\"userId\": ..., \"password\": ...}``; ``tlsCertFile:<path>,tlsKeyFile:<path>``; ``{\"issuerUrl\": ..., \"privateKey\": ..., \"audience\": ..., \"scope\": ...}``.", aliases=("authParams",))]
    initial_backoff: Annotated[float, Opt(0.1, "First wait before a reconnect, doubled up to ``max_backoff``.", "s", ("initialBackoffIntervalNanos",))]
    max_backoff: Annotated[float, Opt(60.0, "Longest wait between reconnect attempts.", "s", ("maxBackoffIntervalNanos",))]
    stats_interval: Annotated[Seconds, Opt(None, "Period of the statistics line each producer and consumer logs at INFO on ``magnetar.producer`` / ``magnetar.consumer`` (the official client's ``stats_interval_in_seconds``, 600 there); None or 0: never.", "s", ("statsIntervalSeconds",))]
    enable_transaction: Annotated[bool, Opt(False, "Keep a session with every transaction coordinator from the start, reopened after a lost connection, so a coordinator that restarted aborts its timed-out transactions (and frees the messages they held) without waiting for this client's next transaction. Transactions work without it.", aliases=("enableTransaction",))]
    listener_name: Annotated[Union[str, None], Opt(None, "The broker listener (of its ``advertisedListeners``) whose addresses lookups return: for clients on another network than the brokers' internal one.", aliases=("listenerName",))]
    proxy_url: Annotated[Union[str, None], Opt(None, "A proxy that routes TLS connections by their SNI name (``pulsar+ssl://host:port``, with ``proxy_protocol=\"sni\"``): every connection goes to it, naming its broker in SNI.", aliases=("proxyServiceUrl",))]
    proxy_protocol: Annotated[Union[str, None], Opt(None, "How ``proxy_url`` routes: ``\"sni\"`` (the only one, as the Java client's ``ProxyProtocol.SNI``).", aliases=("proxyProtocol",))]
    tls_allow_insecure_connection: Annotated[bool, Opt(False, "Accept any broker certificate: encrypted, but the broker is not authenticated (tests only).", aliases=("tlsAllowInsecureConnection",))]
    tls_validate_hostname: Annotated[bool, Opt(True, "Require the broker's certificate to name the host of the URL (the official client has this off); ``False`` checks the chain only.", aliases=("tlsValidateHostname",))]
    tls_certificate_file_path: Annotated[Union[str, "os.PathLike[str]", None], Opt(None, "PEM client certificate for mutual TLS; needs ``tls_private_key_file_path``.", aliases=("tlsCertificateFilePath",))]
    tls_private_key_file_path: Annotated[Union[str, "os.PathLike[str]", None], Opt(None, "PEM private key (PKCS#8, PKCS#1 or SEC1) of ``tls_certificate_file_path``.", aliases=("tlsPrivateKeyFilePath",))]


class ClientOptions(ConnectionOptions, total=False):
    """Every keyword option of :class:`magnetar.Client` and :class:`magnetar.AsyncClient`."""

    on_state_change: Annotated[Union[Callable[[str], object], None], Opt(None, "Called with the new state name (see ``Client.state``) from a watcher thread.")]


class ProducerOptions(TypedDict, total=False):
    """Keyword options of ``create_producer``."""

    name: Annotated[Union[str, None], Opt(None, "Producer name; the broker picks a unique one if None.", aliases=("producerName",))]
    batching: Annotated[bool, Opt(True, "Group messages into batches.", aliases=("batchingEnabled",))]
    batch_max_messages: Annotated[int, Opt(1000, "Most messages in a batch.", aliases=("batchingMaxMessages",))]
    batch_max_bytes: Annotated[int, Opt(128 * 1024, "Most payload bytes in a batch.", "bytes", ("batchingMaxBytes",))]
    batch_max_delay: Annotated[Seconds, Opt(0.01, "Longest a batch waits to fill.", "s", ("batchingMaxPublishDelayMicros",))]
    compression: Annotated[Union[Compression, str, None], Opt(None, "Batch codec: ``lz4``, ``zlib``, ``zstd``, ``snappy`` or None.", aliases=("compressionType",))]
    max_pending: Annotated[int, Opt(1000, "Messages awaiting a receipt before sends wait (or fail, see ``block_if_full``).", aliases=("maxPendingMessages",))]
    max_pending_across_partitions: Annotated[Union[int, None], Opt(None, "Of a partitioned topic: messages awaiting a receipt over all partitions, shared out when the producer starts (each partition takes ``min(max_pending, this // partitions)``); None: ``max_pending`` per partition.", aliases=("maxPendingMessagesAcrossPartitions",))]
    block_if_full: Annotated[bool, Opt(True, "Wait for room when ``max_pending`` is reached, else raise ProducerQueueFull.", aliases=("blockIfQueueFull",))]
    send_timeout: Annotated[Seconds, Opt(30.0, "A message without a receipt by then fails; None or 0: never.", "s", ("sendTimeoutMs",))]
    initial_sequence_id: Annotated[Union[int, None], Opt(None, "Sequence id of the first message (default: the broker's last + 1).", aliases=("initialSequenceId",))]
    access_mode: Annotated[Union[AccessMode, str], Opt(AccessMode.SHARED, "``shared``, ``exclusive``, ``wait_for_exclusive`` or ``exclusive_with_fencing``.", aliases=("accessMode",))]
    chunking: Annotated[bool, Opt(False, "Split messages larger than the broker's limit into chunks (needs batching off).", aliases=("chunkingEnabled",))]
    chunk_max_size: Annotated[Union[int, None], Opt(None, "With ``chunking``: most payload bytes per chunk, so messages larger are chunked even below the broker's limit (default: as large as the broker allows).", "bytes", ("chunkMaxMessageSize",))]
    properties: Annotated[Union[Mapping[str, str], None], Opt(None, "Producer metadata shown in the broker's stats.")]
    routing_mode: Annotated[Union[RoutingMode, str], Opt(RoutingMode.ROUND_ROBIN, "Where keyless messages go: ``round_robin`` or ``single_partition``.", aliases=("messageRoutingMode",))]
    hashing_scheme: Annotated[Union[HashingScheme, str], Opt(HashingScheme.JAVA_STRING, "Key hash that picks a partition: ``java_string`` or ``murmur3``.", aliases=("hashingScheme",))]
    router: Annotated[Union[Callable[[Union[str, None], int], int], None], Opt(None, "``router(key, num_partitions) -> partition`` instead of the routing mode.")]
    batching_type: Annotated[Union[BatchingType, str], Opt(BatchingType.DEFAULT, "``default`` or ``key_based`` (one key per batch).", aliases=("batcherBuilder",))]
    partitions_update_interval: Annotated[Seconds, Opt(60.0, "How often new partitions are looked for.", "s", ("autoUpdatePartitionsIntervalSeconds",))]
    schema: Annotated[Union[Schema[Any], None], Opt(None, "A :mod:`magnetar.schema` object: registered with the broker, and ``send`` takes values it encodes (default: bytes).")]
    encryption_keys: Annotated[Union[Sequence[str], None], Opt(None, "Names of the RSA public keys (from ``crypto_key_reader``) that each message's data key is encrypted for; end-to-end encryption is on when given.", aliases=("encryptionKeys",))]
    crypto_key_reader: Annotated[Union[CryptoKeyReader, None], Opt(None, "Supplies the keys of ``encryption_keys`` (see :class:`~magnetar.CryptoKeyReader`).", aliases=("cryptoKeyReader",))]
    interceptors: Annotated[Union[Sequence[ProducerInterceptor], None], Opt(None, "Each :class:`~magnetar.ProducerInterceptor` sees every message before it is sent (and may replace its payload) and its receipt or failure, in order.")]


class ReaderOptions(TypedDict, total=False):
    """Keyword options of ``create_reader``."""

    start_inclusive: Annotated[bool, Opt(False, "Read the start message itself too.", aliases=("startMessageIdInclusive",))]
    receiver_queue_size: Annotated[int, Opt(1000, "Messages fetched ahead of the application.", aliases=("receiverQueueSize",))]
    reader_name: Annotated[Union[str, None], Opt(None, "Name shown in the broker's stats.", aliases=("readerName",))]
    read_compacted: Annotated[bool, Opt(False, "Read the compacted view of the topic.", aliases=("readCompacted",))]
    schema: Annotated[Union[Schema[Any], None], Opt(None, "A :mod:`magnetar.schema` object that ``msg.value`` decodes with (default: bytes).")]
    crypto_key_reader: Annotated[Union[CryptoKeyReader, None], Opt(None, "Supplies the private keys that decrypt end-to-end encrypted messages (see :class:`~magnetar.CryptoKeyReader`).", aliases=("cryptoKeyReader",))]
    crypto_failure_action: Annotated[Union[CryptoFailureAction, str], Opt(CryptoFailureAction.FAIL, "A message that cannot be decrypted: ``fail`` (not delivered, left unacknowledged), ``discard`` (acknowledged and dropped) or ``consume`` (delivered encrypted).", aliases=("cryptoFailureAction",))]
    listener: Annotated[Union[Callable[[Message], Union[object, Awaitable[object]]], None], Opt(None, "Handler each message is pushed to, in order, on a thread of its own (a coroutine function on AsyncClient, run as a task); a handler that raises is logged and reading goes on.", aliases=("readerListener",))]
    subscription_role_prefix: Annotated[Union[str, None], Opt(None, "Prefix of the reader's subscription name (``<prefix>-reader-<random>``), for brokers whose authorization looks at it.", aliases=("subscriptionRolePrefix",))]
    subscription_name: Annotated[Union[str, None], Opt(None, "The reader's (non-durable) subscription name instead of a random one (it must not be in use on the topic).", aliases=("subscriptionName",))]


class ConsumerOptions(TypedDict, total=False):
    """Keyword options of ``subscribe``."""

    subscription_type: Annotated[Union[SubscriptionType, str], Opt(SubscriptionType.EXCLUSIVE, "``exclusive``, ``shared``, ``failover`` or ``key_shared``.", aliases=("subscriptionType",))]
    initial_position: Annotated[Union[InitialPosition, str], Opt(InitialPosition.LATEST, "Where a new subscription starts: ``latest`` or ``earliest``.", aliases=("subscriptionInitialPosition",))]
    pattern: Annotated[bool, Opt(False, "``topic`` is a regular expression; every matching topic of its namespace is consumed.")]
    consumer_name: Annotated[Union[str, None], Opt(None, "Name shown in the broker's stats.", aliases=("consumerName",))]
    receiver_queue_size: Annotated[int, Opt(1000, "Messages fetched ahead of the application; 0: none (a zero-queue consumer asks the broker for one message per receive; one topic, not partitioned).", aliases=("receiverQueueSize",))]
    max_total_receiver_queue_size_across_partitions: Annotated[int, Opt(50000, "A consumer of several partitions or topics: the receiver queues of all together; each gets ``min(receiver_queue_size, this / count)``.", aliases=("maxTotalReceiverQueueSizeAcrossPartitions",))]
    start_paused: Annotated[bool, Opt(False, "Subscribe without asking the broker for messages until ``resume()``.", aliases=("startPaused",))]
    nack_redelivery_delay: Annotated[Seconds, Opt(60.0, "Delay before a negatively acked message comes back.", "s", ("negativeAckRedeliveryDelayMicros",))]
    ack_timeout: Annotated[Seconds, Opt(0.0, "Unacked messages are redelivered after this; 0 or None: never.", "s", ("ackTimeoutMillis",))]
    ack_group_time: Annotated[Seconds, Opt(0.1, "Acks are grouped and sent within this; 0 sends each at once.", "s", ("acknowledgementsGroupTimeMicros",))]
    ack_group_max: Annotated[int, Opt(1000, "A group of acks is sent once this many are held.", aliases=("maxAcknowledgmentGroupSize",))]
    batch_index_ack: Annotated[bool, Opt(False, "Ack single messages of a batch on the broker (else the batch once all are acked).", aliases=("batchIndexAckEnabled",))]
    read_compacted: Annotated[bool, Opt(False, "Read the compacted view of the topic.", aliases=("readCompacted",))]
    replicate_subscription_state: Annotated[bool, Opt(False, "Replicate the subscription's position to the other clusters of a geo-replicated topic.", aliases=("replicateSubscriptionState",))]
    subscription_properties: Annotated[Union[Mapping[str, str], None], Opt(None, "Properties stored with a new subscription.", aliases=("subscriptionProperties",))]
    properties: Annotated[Union[Mapping[str, str], None], Opt(None, "Consumer metadata shown in the broker's stats.")]
    priority_level: Annotated[int, Opt(0, "Shared subscriptions favour consumers of lower levels.", aliases=("priorityLevel",))]
    discovery_period: Annotated[Seconds, Opt(60.0, "How often a pattern or a partitioned topic is looked at again.", "s", ("patternAutoDiscoveryPeriod",))]
    max_redeliver_count: Annotated[Union[int, None], Opt(None, "Deliveries before a message is dead-lettered (with ``dead_letter_topic``, or ``<topic>-<subscription>-DLQ``).", aliases=("maxRedeliverCount",))]
    dead_letter_topic: Annotated[Union[str, None], Opt(None, "Where messages go after ``max_redeliver_count`` deliveries, and unreadable ones.", aliases=("deadLetterTopic",))]
    dead_letter_initial_subscription: Annotated[Union[str, None], Opt(None, "A subscription the dead letter topic is created with, so that what is dead-lettered before anyone subscribes there is kept.", aliases=("initialSubscriptionName",))]
    enable_retry: Annotated[bool, Opt(False, "A retry letter topic: the consumer subscribes to it too, and ``reconsume_later(msg, delay)`` publishes the message there to come back after ``delay``, dead-lettered after ``max_redeliver_count`` retries (16 when not given).", aliases=("retryEnable",))]
    retry_letter_topic: Annotated[Union[str, None], Opt(None, "With ``enable_retry``: the retry letter topic (default ``<topic>-<subscription>-RETRY``; the dead letter topic then defaults to ``<topic>-<subscription>-DLQ`` for every topic of the consumer).", aliases=("retryLetterTopic",))]
    nack_backoff: Annotated[Union[Backoff, None], Opt(None, "A :class:`~magnetar.Backoff`: a negatively acknowledged message comes back after a delay growing with its redelivery count, instead of ``nack_redelivery_delay``.", aliases=("negativeAckRedeliveryBackoff",))]
    ack_timeout_backoff: Annotated[Union[Backoff, None], Opt(None, "A :class:`~magnetar.Backoff`: a message not acknowledged within ``ack_timeout`` (which must be on) is redelivered after a further delay growing with its redelivery count.", aliases=("ackTimeoutRedeliveryBackoff",))]
    chunk_expiry: Annotated[Seconds, Opt(60.0, "A chunked message incomplete after this is given up (its chunks acked); None: never.", "s", ("expireTimeOfIncompleteChunkedMessageMs",))]
    max_pending_chunked_messages: Annotated[int, Opt(10, "Chunked messages in progress at once; the oldest beyond is given up.", aliases=("maxPendingChunkedMessage",))]
    auto_ack_oldest_chunked_message: Annotated[bool, Opt(True, "The chunked message given up for ``max_pending_chunked_messages`` is acknowledged (True), or left unacknowledged so the broker sends it again (False, the Java client's default).", aliases=("autoAckOldestChunkedMessageOnQueueFull",))]
    subscription_mode: Annotated[Union[SubscriptionMode, str], Opt(SubscriptionMode.DURABLE, "``durable``, or ``non_durable``: the subscription ends with its last consumer and keeps no backlog.", aliases=("subscriptionMode",))]
    interceptors: Annotated[Union[Sequence[ConsumerInterceptor], None], Opt(None, "Each :class:`~magnetar.ConsumerInterceptor` sees every message received (and may replace it), every acknowledgement, negative acknowledgement and ack-timeout redelivery, in order.")]
    consumer_event_listener: Annotated[Union[ConsumerEventListener, None], Opt(None, "A :class:`~magnetar.ConsumerEventListener`: told when the broker makes this consumer the active one of a Failover subscription (per partition), and when it stops being.", aliases=("consumerEventListener",))]
    listener: Annotated[Union[Callable[[Message], Union[object, Awaitable[object]]], None], Opt(None, "Handler each message is pushed to (a coroutine function on AsyncClient); acked when it returns, negatively acked when it raises.")]
    listener_concurrency: Annotated[int, Opt(1, "Handlers running at once (in order per key).")]
    schema: Annotated[Union[Schema[Any], None], Opt(None, "A :mod:`magnetar.schema` object, sent to the broker on subscribe; ``msg.value`` decodes with it (default: bytes).")]
    crypto_key_reader: Annotated[Union[CryptoKeyReader, None], Opt(None, "Supplies the private keys that decrypt end-to-end encrypted messages (see :class:`~magnetar.CryptoKeyReader`).", aliases=("cryptoKeyReader",))]
    crypto_failure_action: Annotated[Union[CryptoFailureAction, str], Opt(CryptoFailureAction.FAIL, "A message that cannot be decrypted: ``fail`` (not delivered, left unacknowledged), ``discard`` (acknowledged and dropped) or ``consume`` (delivered encrypted).", aliases=("cryptoFailureAction",))]
    key_shared_mode: Annotated[Union[KeySharedMode, str], Opt(KeySharedMode.AUTO_SPLIT, "Key_Shared: ``auto_split`` (the broker splits the key hashes among consumers) or ``sticky`` (this consumer takes ``key_shared_ranges``).", aliases=("keySharedMode",))]
    key_shared_ranges: Annotated[Union[Sequence[tuple[int, int]], None], Opt(None, "Key_Shared ``sticky``: the inclusive ``(start, end)`` ranges of key hashes (0 to 65535) this consumer takes; the broker refuses ranges another consumer holds.")]
    allow_out_of_order_delivery: Annotated[bool, Opt(False, "Key_Shared: deliver a key's new messages to a consumer even while older ones of that key, sent to a consumer that left, are unacknowledged.", aliases=("allowOutOfOrderDelivery",))]
    pattern_topics: Annotated[Union[PatternTopics, str], Opt(PatternTopics.PERSISTENT, "With ``pattern``: ``persistent``, ``non_persistent`` or ``all`` topics (a pattern without ``domain://`` matches in those domains).", aliases=("regexSubscriptionMode", "subscriptionTopicsMode"))]


class MessageFields(TypedDict, total=False):
    """Keyword arguments of ``send`` and ``send_async``: what a message carries besides its
    payload. Each is optional; ``None`` is the same as leaving it out."""

    key: Annotated[Union[str, None], Opt(None, "Partition key: picks the partition and the Key_Shared consumer.")]
    properties: Annotated[Union[Mapping[str, str], None], Opt(None, "User properties.")]
    event_time: Annotated[Union[TimeLike, None], Opt(None, "Application time of the event (datetime or ms since the epoch).")]
    deliver_after: Annotated[Seconds, Opt(None, "Deliver no sooner than this from now (Shared subscriptions).", "s")]
    deliver_at: Annotated[Union[TimeLike, None], Opt(None, "Deliver no sooner than this time (Shared subscriptions).")]
    ordering_key: Annotated[Union[bytes, str, None], Opt(None, "Key for Key_Shared ordering only, instead of ``key``.")]
    sequence_id: Annotated[Union[int, None], Opt(None, "Explicit sequence id (deduplication); by default the next one.")]
    replication_clusters: Annotated[Union[Sequence[str], None], Opt(None, "Geo-replication: the clusters this message is replicated to, instead of all of the namespace's.")]
    disable_replication: Annotated[Union[bool, None], Opt(None, "Geo-replication: keep this message in the local cluster.")]
    txn: Annotated[Union[TransactionHandle, None], Opt(None, "A transaction (``client.new_transaction()``): the message is visible once it commits, dropped if it aborts.")]


class SendManyColumns(TypedDict, total=False):
    """Keyword arguments of ``send_many``: per-message columns, each with one entry (or None)
    per payload."""

    keys: Annotated[Union[Sequence[Union[str, None]], None], Opt(None, "Partition keys.")]
    properties: Annotated[Union[Sequence[Union[Mapping[str, str], None]], None], Opt(None, "User properties.")]
    event_times: Annotated[Union[Sequence[Union[TimeLike, None]], None], Opt(None, "Event times (datetimes or ms since the epoch).")]
    txn: Annotated[Union[TransactionHandle, None], Opt(None, "A transaction that every message is sent in (``client.new_transaction()``).")]


class ArrowColumns(TypedDict, total=False):
    """The columns of a read into Arrow (``read_arrow``, ``receive_arrow``, the readers' Arrow
    stream), as the Spark source's rows have them."""

    metadata_columns: Annotated[Union[MetadataColumns, str], Opt(MetadataColumns.MAGNETAR, "Names of the metadata columns: ``magnetar`` (``key``, ``message_id``, ``publish_time``, ...) or ``connector`` (pulsar-spark's ``__key``, ``__messageId``, ...).", aliases=("metadataColumns",))]
    schema_fields: Annotated[bool, Opt(True, "On a topic with an Avro or JSON record schema, one column per field of the decoded payload (a primitive schema: a typed ``value``) before the metadata columns; False: ``value`` stays bytes (as the Spark source with ``allowDifferentTopicSchemas``).")]
    columns: Annotated[Union[Sequence[str], None], Opt(None, "Only these columns, in this order (None: all). Acknowledging the rows (``ack_arrow``) needs the message id column.")]


class ArrowSendColumns(TypedDict, total=False):
    """Which columns of the data ``send_arrow`` sends, as the Spark source's writes name them
    (a column the data lacks is not set)."""

    value: Annotated[str, Opt("value", "The payload column: binary or string, never null. On a topic with an Avro, JSON or primitive schema, the rows' other columns (a record) or this column (a primitive) are encoded with the topic's schema instead.")]
    key: Annotated[Union[str, None], Opt("key", "The key column: string, or binary holding UTF-8.")]
    properties: Annotated[Union[str, None], Opt("properties", "The properties column: a map of string to string.")]
    event_time: Annotated[Union[str, None], Opt("event_time", "The event time column: a timestamp (one without a time zone is UTC) or milliseconds since the epoch.")]
    txn: Annotated[Union[TransactionHandle, None], Opt(None, "A transaction that every message is sent in (``client.new_transaction()``).")]


@dataclass(frozen=True)
class Declared:
    """One declared option, as :func:`declared` returns it."""

    name: str
    type: Any
    default: Any
    doc: str
    unit: str | None
    aliases: tuple[str, ...]

    @property
    def choice(self) -> type[_Choice] | None:
        """The enum of an option with named values."""
        for t in typing.get_args(self.type) or (self.type,):
            if isinstance(t, type) and issubclass(t, _Choice):
                return t
        return None

    @property
    def textual(self) -> bool:
        """Whether a text value can give this option (a command-line flag, an environment
        variable, a Spark option): not callables, mappings, credentials or transactions."""
        return not any(t in str(self.type) for t in ("Callable", "Mapping", "Sequence", "Authentication", "Schema", "Backoff",
                                                     "TransactionHandle", "CryptoKeyReader", "EventListener"))

    def kind(self) -> type:
        """The plain type a text value of this option converts to (bool, int, float or str)."""
        if self.unit == "s":
            return float
        args = set(typing.get_args(self.type) or (self.type,)) - {type(None)}
        for t in (bool, int, float):
            if t in args:
                return t
        return str


@functools.cache
def declared(options: type) -> dict[str, Declared]:
    """The options a declaration (one of the ``*Options`` classes here) holds, by name."""
    hints = typing.get_type_hints(options, include_extras=True)
    out = {}
    for name, hint in hints.items():
        base, opt = typing.get_args(hint)[0], typing.get_args(hint)[1]
        out[name] = Declared(name, base, opt.default, opt.doc, opt.unit, opt.aliases)
    return out


def resolve(options: type, given: Mapping[str, Any], call: str) -> dict[str, Any]:
    """``given`` checked against a declaration, with every default filled in and named values
    turned into their enums. An unknown name raises ``TypeError`` (as Python does for any
    function), naming the closest declared one."""
    decl = declared(options)
    out = {name: d.default for name, d in decl.items()}
    for name, value in given.items():
        d = decl.get(name)
        if d is None:
            close = difflib.get_close_matches(name, decl, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(f"{call}() got an unexpected keyword argument {name!r}{hint}")
        choice = d.choice
        if choice is not None and value is not None:
            value = _parse_choice(choice, name, value)
        out[name] = value
    return out


def _parse_choice(choice: type[_Choice], name: str, value: Any) -> _Choice:
    if isinstance(value, choice):
        return value
    if isinstance(value, str):
        try:
            return choice(value.lower().replace("-", "_"))
        except ValueError:
            pass
    names = ", ".join(repr(c.value) for c in choice)
    raise InvalidConfiguration(f"{name} must be one of {names} (or {choice.__name__}), not {value!r}")


def option_docs(*options: type) -> str:
    """An ``Options:`` section for a docstring, from declarations."""
    lines = ["Options (keyword arguments):"]
    for o in options:
        for d in declared(o).values():
            default = d.default.value if isinstance(d.default, enum.Enum) else d.default
            unit = " (seconds)" if d.unit == "s" else ""
            lines.append(f"    {d.name}: {d.doc}{unit} Default: ``{default!r}``.")
    return "\n".join(lines)


def check_topic(topic: Any) -> None:
    if isinstance(topic, str):
        return
    if isinstance(topic, Sequence) and all(isinstance(t, str) for t in topic):
        return
    raise InvalidConfiguration(f"topic must be a str or a list of str, not {topic!r}")


def time_ms(value: TimeLike, what: str) -> int:
    """Milliseconds since the epoch from a datetime or a number of milliseconds."""
    if isinstance(value, _dt.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise InvalidConfiguration(f"{what} must be a datetime or milliseconds since the epoch, not {value!r}")
    return int(value)


def seek_target(target: MessageId | TimeLike) -> MessageId | int:
    """What the engine's seek takes: a message id, or a publish time in milliseconds."""
    return target if isinstance(target, MessageId) else time_ms(target, "seek target")


def reader_start(start: MessageId | TimeLike) -> tuple[MessageId, int | None]:
    """A reader's start id, and the publish time to seek to when it starts at a time."""
    if isinstance(start, MessageId):
        return start, None
    return MessageId.earliest, time_ms(start, "start")

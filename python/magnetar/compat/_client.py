"""The official client's ``Client`` on magnetar's blocking API: names, positional orders,
millisecond units, the official defaults and exception classes. The producers, consumers and
readers it makes are in :mod:`._endpoints`, the messages they hand out in :mod:`._message`."""

from __future__ import annotations

import logging
import re
import threading
from datetime import timedelta
from typing import Any, Callable

from .. import _build, _core
from .. import _client as _native
from .._failover import AutoClusterFailover as _NativeFailover
from .._options import (AccessMode, Compression, CryptoFailureAction, PatternTopics, RoutingMode,
                        SubscriptionType)
from .._options import BatchingType as _NativeBatching
from ._config import (Authentication, AutoClusterFailover, ConsoleLogger, ConsumerBatchReceivePolicy,
                      ConsumerDeadLetterPolicy, ConsumerKeySharedPolicy, CryptoKeyReader, ServiceInfo,
                      ServiceInfoProvider, check_type, check_type_or_none)
from ._pulsar import (BatchingType, CompressionType, ConsumerCryptoFailureAction, ConsumerType, InitialPosition,
                      KeySharedMode,
                      MessageId, PartitionsRoutingMode, ProducerAccessMode, RegexSubscriptionMode, native_id)
from ._endpoints import Consumer, Producer, Reader
from ._message import Message
from ._service_info import Following
from ._table_view import TableView
from ._transaction import Transaction
from .exceptions import AuthenticationError, ConnectError, InvalidConfiguration, mapped
from .schema import BytesSchema, Schema

__all__ = ["Client"]

# The official enums in magnetar's (the names each value takes are declared once, there).
_COMPRESSION = {CompressionType.NONE: None, CompressionType.LZ4: Compression.LZ4, CompressionType.ZLib: Compression.ZLIB,
                CompressionType.ZSTD: Compression.ZSTD, CompressionType.SNAPPY: Compression.SNAPPY}
_SUBSCRIPTION = {ConsumerType.Exclusive: SubscriptionType.EXCLUSIVE, ConsumerType.Shared: SubscriptionType.SHARED,
                 ConsumerType.Failover: SubscriptionType.FAILOVER, ConsumerType.KeyShared: SubscriptionType.KEY_SHARED}
_ACCESS = {ProducerAccessMode.Shared: AccessMode.SHARED, ProducerAccessMode.Exclusive: AccessMode.EXCLUSIVE,
           ProducerAccessMode.WaitForExclusive: AccessMode.WAIT_FOR_EXCLUSIVE,
           ProducerAccessMode.ExclusiveWithFencing: AccessMode.EXCLUSIVE_WITH_FENCING}
_CRYPTO_FAILURE = {ConsumerCryptoFailureAction.FAIL: CryptoFailureAction.FAIL,
                   ConsumerCryptoFailureAction.DISCARD: CryptoFailureAction.DISCARD,
                   ConsumerCryptoFailureAction.CONSUME: CryptoFailureAction.CONSUME}
# Each regex subscription mode: the native pattern_topics, and the domains a pattern without
# one matches in.
_REGEX_MODES = {RegexSubscriptionMode.PersistentOnly: (PatternTopics.PERSISTENT, "persistent"),
                RegexSubscriptionMode.NonPersistentOnly: (PatternTopics.NON_PERSISTENT, "non-persistent"),
                RegexSubscriptionMode.AllTopics: (PatternTopics.ALL, "(?:persistent|non-persistent)")}
_BYTES = BytesSchema()
_log = logging.getLogger("magnetar")
_retype = type(re.compile("x"))


def _unsupported(what: str) -> InvalidConfiguration:
    return InvalidConfiguration(f"{what} is not available in magnetar")


def _schema_of(schema: Any) -> Schema:
    if not isinstance(schema, Schema):
        raise ValueError(f"schema must be a pulsar.schema object, not {type(schema).__name__}")
    return schema


def _native_schema(schema: Schema) -> Any:
    return None if isinstance(schema, BytesSchema) else schema


class Client:
    """``pulsar.Client``: connects lazily, as the official client; options as there."""

    def __init__(self, service_url: Any, authentication: Authentication | None = None,
                 operation_timeout_seconds: int = 30, io_threads: int = 1, message_listener_threads: int = 1,
                 concurrent_lookup_requests: int = 50000, log_conf_file_path: str | None = None,
                 stats_interval_in_seconds: int = 600, use_tls: bool = False,
                 tls_trust_certs_file_path: str | None = None, tls_allow_insecure_connection: bool = False,
                 tls_validate_hostname: bool = False, logger: Any = None, connection_timeout_ms: int = 10000,
                 listener_name: str | None = None, tls_private_key_file_path: str | None = None,
                 tls_certificate_file_path: str | None = None) -> None:
        self._clusters: list[ServiceInfo] = []
        self._provider: Following | None = None
        if isinstance(service_url, (AutoClusterFailover, ServiceInfoProvider)):
            if authentication is not None or tls_trust_certs_file_path is not None:
                raise ValueError("authentication and TLS are set per ServiceInfo with a service info provider")
            if isinstance(service_url, AutoClusterFailover):
                service_url, authentication, tls_trust_certs_file_path = self._failover(service_url)
            else:
                self._provider = Following(service_url)
                info = self._provider.initial
                service_url, authentication, tls_trust_certs_file_path = info.service_url, info._auth, info._trust
        else:
            check_type(str, service_url, "service_url")
        check_type_or_none(Authentication, authentication, "authentication")
        for value, name in ((operation_timeout_seconds, "operation_timeout_seconds"), (io_threads, "io_threads"),
                            (message_listener_threads, "message_listener_threads"),
                            (concurrent_lookup_requests, "concurrent_lookup_requests"),
                            (stats_interval_in_seconds, "stats_interval_in_seconds"),
                            (connection_timeout_ms, "connection_timeout_ms")):
            check_type(int, value, name)
        check_type_or_none(str, log_conf_file_path, "log_conf_file_path")
        check_type(bool, use_tls, "use_tls")
        check_type_or_none(str, tls_trust_certs_file_path, "tls_trust_certs_file_path")
        check_type(bool, tls_allow_insecure_connection, "tls_allow_insecure_connection")
        check_type(bool, tls_validate_hostname, "tls_validate_hostname")
        check_type_or_none(str, listener_name, "listener_name")
        _threads_and_logs(io_threads, concurrent_lookup_requests, log_conf_file_path)
        if use_tls and isinstance(service_url, str) and not service_url.startswith(("pulsar+ssl://", "https://")):
            # The URL decides TLS, here as in the official client; asking for TLS on a plain
            # URL would otherwise connect in the clear.
            raise InvalidConfiguration(f"use_tls=True needs a pulsar+ssl:// or https:// service URL, not {service_url!r}")
        # At most this many message listeners run at once, over all consumers and readers (the
        # official client's pool of listener threads).
        self._listener_slots = threading.BoundedSemaphore(max(message_listener_threads, 1))
        options: dict[str, Any] = {
            "operation_timeout": float(operation_timeout_seconds),
            "connect_timeout": connection_timeout_ms / 1000,
            "stats_interval": stats_interval_in_seconds or None,
            # The official client has no memory limit.
            "memory_limit": 0,
            "tls_trust_certs_file_path": tls_trust_certs_file_path,
            "tls_allow_insecure_connection": tls_allow_insecure_connection,
            "tls_validate_hostname": tls_validate_hostname,
            "tls_certificate_file_path": tls_certificate_file_path,
            "tls_private_key_file_path": tls_private_key_file_path,
            "listener_name": listener_name,
        }
        self._refused: str | None = None
        if authentication is not None:
            self._refused = authentication._refused
            try:
                options.update(authentication._options())
            except Exception as e:
                # A token supplier that fails: every connection attempt fails to authenticate.
                self._refused = f"cannot get the authentication data: {e}"
        _set_logger(logger)
        self._service_url = service_url
        self._live: set[Any] = set()
        self._unreachable: str | None = None
        try:
            self._client = self._connect(service_url, options)
        except InvalidConfiguration as e:
            if "TLS configuration" not in str(e):
                raise
            # The official client reads its TLS files when it connects and reports a bad one as
            # a failure to connect, at the first operation; so does this layer.
            self._unreachable = str(e)
            for name in ("tls_trust_certs_file_path", "tls_certificate_file_path", "tls_private_key_file_path"):
                options[name] = None
            self._client = self._connect(service_url, options)
        if self._provider is not None:
            self._provider.start(self)

    def _failover(self, failover: AutoClusterFailover) -> tuple[Any, Authentication | None, str | None]:
        """The native failover target, and the credentials and trust file every cluster shares."""
        self._clusters = [failover.primary, *failover.secondary]
        first = self._clusters[0]
        if any(c._auth is not first._auth or c._trust != first._trust for c in self._clusters):
            raise _unsupported("different credentials or trust files per cluster (AutoClusterFailover)")
        interval = failover.check_interval_ms / 1000
        # A threshold counts probes; the first failed (or successful) probe is the first of them.
        native = _NativeFailover(
            first.service_url, [c.service_url for c in self._clusters[1:]], check_interval=interval,
            failover_delay=(failover.failover_threshold - 1) * interval,
            switch_back_delay=(failover.switch_back_threshold - 1) * interval)
        return native, first._auth, first._trust

    def _connect(self, service_url: Any, options: dict[str, Any]) -> Any:
        with mapped():
            return _native.Client(service_url, **options)

    def _check_auth(self) -> None:
        if self._unreachable is not None:
            raise ConnectError(self._unreachable)
        if self._refused is not None:
            raise AuthenticationError(self._refused)

    def create_producer(self, topic: str, producer_name: str | None = None, schema: Schema = _BYTES,
                        initial_sequence_id: int | None = None, send_timeout_millis: int = 30000,
                        compression_type: CompressionType = CompressionType.NONE, max_pending_messages: int = 1000,
                        max_pending_messages_across_partitions: int = 50000, block_if_queue_full: bool = False,
                        batching_enabled: bool = False, batching_max_messages: int = 1000,
                        batching_max_allowed_size_in_bytes: int = 128 * 1024,
                        batching_max_publish_delay_ms: int = 10, chunking_enabled: bool = False,
                        message_routing_mode: PartitionsRoutingMode = PartitionsRoutingMode.RoundRobinDistribution,
                        lazy_start_partitioned_producers: bool = False, properties: dict[str, str] | None = None,
                        batching_type: BatchingType = BatchingType.Default, encryption_key: str | None = None,
                        crypto_key_reader: CryptoKeyReader | None = None,
                        access_mode: ProducerAccessMode = ProducerAccessMode.Shared,
                        message_router: Callable[[Message, int], int] | None = None) -> Producer:
        check_type(str, topic, "topic")
        check_type_or_none(str, producer_name, "producer_name")
        schema = _schema_of(schema)
        check_type_or_none(int, initial_sequence_id, "initial_sequence_id")
        check_type(int, send_timeout_millis, "send_timeout_millis")
        check_type(CompressionType, compression_type, "compression_type")
        check_type(int, max_pending_messages, "max_pending_messages")
        check_type(int, max_pending_messages_across_partitions, "max_pending_messages_across_partitions")
        for value, name in ((block_if_queue_full, "block_if_queue_full"), (batching_enabled, "batching_enabled"),
                            (chunking_enabled, "chunking_enabled"),
                            (lazy_start_partitioned_producers, "lazy_start_partitioned_producers")):
            check_type(bool, value, name)
        check_type(int, batching_max_messages, "batching_max_messages")
        check_type(int, batching_max_allowed_size_in_bytes, "batching_max_allowed_size_in_bytes")
        check_type(int, batching_max_publish_delay_ms, "batching_max_publish_delay_ms")
        check_type_or_none(dict, properties, "properties")
        check_type(BatchingType, batching_type, "batching_type")
        check_type_or_none(str, encryption_key, "encryption_key")
        check_type_or_none(CryptoKeyReader, crypto_key_reader, "crypto_key_reader")
        check_type(ProducerAccessMode, access_mode, "access_mode")
        if chunking_enabled and batching_enabled:
            raise ValueError("Batching and chunking of messages can't be enabled together.")
        if lazy_start_partitioned_producers:
            raise _unsupported("lazy_start_partitioned_producers=True (every partition's producer starts with "
                               "the producer)")
        self._check_auth()
        # As the official client: encryption needs both a key name and a reader.
        crypto = (dict(encryption_keys=[encryption_key], crypto_key_reader=crypto_key_reader)
                  if encryption_key and crypto_key_reader is not None else {})
        router = None
        if message_router is not None:
            def router(key: str | None, payload: bytes, partitions: int) -> int:
                return message_router(_RoutedMessage(key, payload, schema), partitions)  # type: ignore[arg-type]
        return self._new_producer(
                topic, schema, dict(name=producer_name, schema=_native_schema(schema), initial_sequence_id=initial_sequence_id,
                send_timeout=send_timeout_millis / 1000 or None, compression=_COMPRESSION[compression_type],
                max_pending=max_pending_messages, max_pending_across_partitions=max_pending_messages_across_partitions,
                block_if_full=block_if_queue_full, batching=batching_enabled,
                batch_max_messages=batching_max_messages, batch_max_bytes=batching_max_allowed_size_in_bytes,
                batch_max_delay=batching_max_publish_delay_ms / 1000, chunking=chunking_enabled,
                routing_mode=RoutingMode.SINGLE_PARTITION
                if message_routing_mode == PartitionsRoutingMode.UseSinglePartition else RoutingMode.ROUND_ROBIN,
                properties=properties, batching_type=_NativeBatching.KEY_BASED
                if batching_type == BatchingType.KeyBased else _NativeBatching.DEFAULT,
                access_mode=_ACCESS[access_mode], router=router, **crypto))

    def _new_producer(self, topic: str, schema: Schema, options: dict[str, Any]) -> Any:
        with mapped():
            args, _ = _build.producer(topic, options)
            # The official router gets the message, so the engine hands it the payload too.
            core = self._client._core.create_producer(*args, router_payload=True)
            return self._keep(Producer(_native.Producer(core), schema))

    def _keep(self, handle: Any) -> Any:
        # As in the official client, a producer or consumer lives until it or the client is
        # closed, even when the application keeps no reference to it.
        self._live.add(handle)
        handle._owner = self._live
        return handle

    def subscribe(self, topic: Any, subscription_name: str, consumer_type: ConsumerType = ConsumerType.Exclusive,
                  schema: Schema = _BYTES, message_listener: Callable[[Consumer, Message], Any] | None = None,
                  receiver_queue_size: int = 1000, max_total_receiver_queue_size_across_partitions: int = 50000,
                  consumer_name: str | None = None, unacked_messages_timeout_ms: int | None = None,
                  broker_consumer_stats_cache_time_ms: int = 30000, negative_ack_redelivery_delay_ms: int = 60000,
                  is_read_compacted: bool = False, properties: dict[str, str] | None = None,
                  pattern_auto_discovery_period: int = 60,
                  initial_position: InitialPosition = InitialPosition.Latest,
                  crypto_key_reader: CryptoKeyReader | None = None,
                  replicate_subscription_state_enabled: bool = False, max_pending_chunked_message: int = 10,
                  auto_ack_oldest_chunked_message_on_queue_full: bool = False,
                  start_message_id_inclusive: bool = False,
                  batch_receive_policy: ConsumerBatchReceivePolicy | None = None,
                  key_shared_policy: ConsumerKeySharedPolicy | None = None, batch_index_ack_enabled: bool = False,
                  regex_subscription_mode: RegexSubscriptionMode = RegexSubscriptionMode.PersistentOnly,
                  dead_letter_policy: ConsumerDeadLetterPolicy | None = None,
                  crypto_failure_action: ConsumerCryptoFailureAction = ConsumerCryptoFailureAction.FAIL) -> Consumer:
        pattern = isinstance(topic, _retype)
        check_type(RegexSubscriptionMode, regex_subscription_mode, "regex_subscription_mode")
        if pattern:
            # As the official client: a pattern without a domain matches in the domains of
            # the regex subscription mode.
            topic = topic.pattern if "://" in topic.pattern else \
                f"{_REGEX_MODES[regex_subscription_mode][1]}://{topic.pattern}"
        elif isinstance(topic, list):
            for t in topic:
                check_type(str, t, "topic")
        else:
            check_type(str, topic, "topic")
        check_type(str, subscription_name, "subscription_name")
        check_type(ConsumerType, consumer_type, "consumer_type")
        schema = _schema_of(schema)
        check_type(int, receiver_queue_size, "receiver_queue_size")
        check_type(int, max_total_receiver_queue_size_across_partitions,
                   "max_total_receiver_queue_size_across_partitions")
        check_type_or_none(str, consumer_name, "consumer_name")
        check_type_or_none(int, unacked_messages_timeout_ms, "unacked_messages_timeout_ms")
        check_type(int, broker_consumer_stats_cache_time_ms, "broker_consumer_stats_cache_time_ms")
        check_type(int, negative_ack_redelivery_delay_ms, "negative_ack_redelivery_delay_ms")
        check_type(int, pattern_auto_discovery_period, "pattern_auto_discovery_period")
        check_type(bool, is_read_compacted, "is_read_compacted")
        check_type_or_none(dict, properties, "properties")
        check_type(InitialPosition, initial_position, "initial_position")
        check_type_or_none(CryptoKeyReader, crypto_key_reader, "crypto_key_reader")
        check_type(int, max_pending_chunked_message, "max_pending_chunked_message")
        check_type_or_none(ConsumerBatchReceivePolicy, batch_receive_policy, "batch_receive_policy")
        check_type_or_none(ConsumerKeySharedPolicy, key_shared_policy, "key_shared_policy")
        check_type_or_none(ConsumerDeadLetterPolicy, dead_letter_policy, "dead_letter_policy")
        check_type(ConsumerCryptoFailureAction, crypto_failure_action, "crypto_failure_action")
        check_type(bool, auto_ack_oldest_chunked_message_on_queue_full, "auto_ack_oldest_chunked_message_on_queue_full")
        if key_shared_policy is not None and consumer_type != ConsumerType.KeyShared:
            raise InvalidConfiguration(f"key_shared_policy is for ConsumerType.KeyShared subscriptions, not {consumer_type}")
        self._check_auth()
        options: dict[str, Any] = {
            "subscription_type": _SUBSCRIPTION[consumer_type],
            "initial_position": "earliest" if initial_position == InitialPosition.Earliest else "latest",
            # 0: a zero-queue consumer, which asks the broker for one message per receive.
            "pattern": pattern, "consumer_name": consumer_name, "receiver_queue_size": receiver_queue_size,
            "max_total_receiver_queue_size_across_partitions": max_total_receiver_queue_size_across_partitions,
            "start_inclusive": start_message_id_inclusive,
            "nack_redelivery_delay": negative_ack_redelivery_delay_ms / 1000,
            "ack_timeout": (unacked_messages_timeout_ms or 0) / 1000, "read_compacted": is_read_compacted,
            "properties": properties, "discovery_period": float(pattern_auto_discovery_period),
            "max_pending_chunked_messages": max_pending_chunked_message, "batch_index_ack": batch_index_ack_enabled,
            "schema": _native_schema(schema), "crypto_key_reader": crypto_key_reader,
            "crypto_failure_action": _CRYPTO_FAILURE[crypto_failure_action],
            "pattern_topics": _REGEX_MODES[regex_subscription_mode][0],
            "replicate_subscription_state": replicate_subscription_state_enabled,
            "auto_ack_oldest_chunked_message": auto_ack_oldest_chunked_message_on_queue_full,
        }
        if key_shared_policy is not None:
            sticky = key_shared_policy.key_shared_mode == KeySharedMode.Sticky
            options["key_shared_mode"] = "sticky" if sticky else "auto_split"
            options["key_shared_ranges"] = key_shared_policy.sticky_ranges if sticky else None
            options["allow_out_of_order_delivery"] = key_shared_policy.allow_out_of_order_delivery
        if dead_letter_policy is not None:
            options["max_redeliver_count"] = dead_letter_policy.max_redeliver_count
            options["dead_letter_topic"] = dead_letter_policy.dead_letter_topic or None
            # The dead letter producer creates the topic with it (as the Java client's does).
            options["dead_letter_initial_subscription"] = dead_letter_policy.initial_subscription_name or None
        return self._new_consumer(topic, subscription_name, schema, options,
                                  _bounded(message_listener, self._listener_slots), batch_receive_policy)

    def _new_consumer(self, topic: Any, subscription: str, schema: Schema, options: dict[str, Any],
                      listener: Any, policy: Any) -> Any:
        inclusive = options.pop("start_inclusive")
        with mapped():
            args = _build.consumer(topic, subscription, options).args
            # The engine's own option (readers use it too): whether a seek target is included.
            args[2]["start_inclusive"] = inclusive
            native = _native.Consumer(self._client._core.subscribe(*args))
        return self._keep(Consumer(native, schema, listener, policy, options, inclusive))

    def create_reader(self, topic: str, start_message_id: MessageId, schema: Schema = _BYTES,
                      reader_listener: Callable[[Reader, Message], Any] | None = None, receiver_queue_size: int = 1000,
                      reader_name: str | None = None, subscription_role_prefix: str | None = None,
                      is_read_compacted: bool = False, crypto_key_reader: CryptoKeyReader | None = None,
                      start_message_id_inclusive: bool = False,
                      crypto_failure_action: ConsumerCryptoFailureAction = ConsumerCryptoFailureAction.FAIL) -> Reader:
        check_type(str, topic, "topic")
        start = native_id(start_message_id, "start_message_id")
        schema = _schema_of(schema)
        check_type(int, receiver_queue_size, "receiver_queue_size")
        check_type_or_none(str, reader_name, "reader_name")
        check_type_or_none(str, subscription_role_prefix, "subscription_role_prefix")
        check_type(bool, is_read_compacted, "is_read_compacted")
        check_type(bool, start_message_id_inclusive, "start_message_id_inclusive")
        check_type_or_none(CryptoKeyReader, crypto_key_reader, "crypto_key_reader")
        check_type(ConsumerCryptoFailureAction, crypto_failure_action, "crypto_failure_action")
        self._check_auth()
        return self._new_reader(topic, start, schema, dict(
            start_inclusive=start_message_id_inclusive, receiver_queue_size=receiver_queue_size,
            reader_name=reader_name, read_compacted=is_read_compacted, schema=_native_schema(schema),
            crypto_key_reader=crypto_key_reader, crypto_failure_action=_CRYPTO_FAILURE[crypto_failure_action],
            subscription_role_prefix=subscription_role_prefix), _bounded(reader_listener, self._listener_slots))

    def _new_reader(self, topic: str, start: Any, schema: Schema, options: dict[str, Any], listener: Any) -> Any:
        with mapped():
            reader = Reader(self._client.create_reader(topic, start, **options), schema, options["start_inclusive"])
        if listener is not None:
            reader._listen(listener)
        return reader

    def create_table_view(self, topic: str, subscription_name: str | None = None, schema: Schema = _BYTES) -> Any:
        check_type(str, topic, "topic")
        check_type_or_none(str, subscription_name, "subscription_name")
        schema = _schema_of(schema)
        self._check_auth()
        return self._new_table_view(topic, subscription_name, schema)

    def _new_table_view(self, topic: str, subscription: str | None, schema: Schema) -> Any:
        with mapped():
            return TableView(self._client.create_table_view(topic, schema=_native_schema(schema),
                                                            subscription_name=subscription), subscription, schema)

    def get_topic_partitions(self, topic: str) -> list[str]:
        check_type(str, topic, "topic")
        with mapped():
            return partition_names(topic, self._client.get_partition_count(topic))

    def new_transaction(self, timeout_ms: int = 60_000) -> Transaction:
        """Opens a transaction that the coordinator aborts ``timeout_ms`` from now unless it is
        committed or aborted first (magnetar's addition, in the Java client's shape:
        ``newTransaction().withTransactionTimeout(...).build()``)."""
        self._check_timeout_ms(timeout_ms)
        with mapped():
            return Transaction(self._client.new_transaction(timeout_ms / 1000))

    @staticmethod
    def _check_timeout_ms(timeout_ms: Any) -> None:
        check_type(int, timeout_ms, "timeout_ms")
        if timeout_ms <= 0:
            raise ValueError(f"timeout_ms must be positive, not {timeout_ms}")

    def get_service_info(self) -> ServiceInfo:
        """The cluster in use (with AutoClusterFailover, the one the client is on now)."""
        current = self._client.service_url
        return next((c for c in self._clusters if c.service_url == current), None) or ServiceInfo(current)

    def shutdown(self) -> None:
        self.close()

    def close(self) -> None:
        with mapped():
            self._client.close()
        self._live.clear()
        if self._provider is not None:
            self._provider.close()


def _threads_and_logs(io_threads: int, concurrent_lookup_requests: int, log_conf_file_path: str | None) -> None:
    """The client options that set the process's machinery rather than this client's."""
    if io_threads < 1:
        raise ValueError(f"io_threads must be at least 1, not {io_threads}")
    if io_threads != 1:
        running = _core._io_threads(io_threads)
        if running != io_threads:
            # The engine's I/O threads serve every client of the process and start with the
            # first one: a later client cannot resize them.
            _log.warning("io_threads=%d: the engine's I/O threads are shared by the process and already run "
                         "with %d (set MAGNETAR_IO_THREADS, or give io_threads to the first client)",
                         io_threads, running)
    if concurrent_lookup_requests != 50000:
        raise _unsupported(f"concurrent_lookup_requests={concurrent_lookup_requests} (magnetar does not cap "
                           "concurrent lookups; leave it at 50000)")
    if log_conf_file_path is not None:
        raise _unsupported("log_conf_file_path (a log4cxx configuration file); pass logger= (a logging.Logger, "
                           "ConsoleLogger or FileLogger), or configure the 'magnetar' logger")


def _bounded(listener: Callable[..., Any] | None, slots: threading.BoundedSemaphore) -> Callable[..., Any] | None:
    """``listener`` run under the client's listener slots (``message_listener_threads``)."""
    if listener is None:
        return None

    def run(*args: Any) -> Any:
        with slots:
            return listener(*args)
    return run


def partition_names(topic: str, n: int) -> list[str]:
    full = topic if "://" in topic else "persistent://" + (topic if "/" in topic else f"public/default/{topic}")
    return [f"{full}-partition-{i}" for i in range(n)] if n else [full]


class _RoutedMessage:
    """What a ``message_router`` sees of a message: its key and payload."""

    __slots__ = ("_key", "_data", "_schema")

    def __init__(self, key: str | None, data: bytes, schema: Schema) -> None:
        self._key, self._data, self._schema = key, data, schema

    def partition_key(self) -> str:
        return self._key or ""

    def data(self) -> bytes:
        return self._data

    def value(self) -> Any:
        return self._schema.decode(self._data)


def _set_logger(logger: Any) -> None:
    if logger is None:
        return
    native = logging.getLogger("magnetar")
    if isinstance(logger, ConsoleLogger):
        from ._config import _LEVELS

        handler = logger._handler()
        handler.setLevel(_LEVELS[logger.log_level])
        native.setLevel(min(native.getEffectiveLevel(), _LEVELS[logger.log_level]))
        native.addHandler(handler)
    elif isinstance(logger, logging.Logger):
        if not any(isinstance(h, _ToLogger) and h.target is logger for h in native.handlers):
            native.addHandler(_ToLogger(logger))
    else:
        raise ValueError("logger must be a logging.Logger, ConsoleLogger or FileLogger")


class _ToLogger(logging.Handler):
    """Hands magnetar's records to the user's logger."""

    def __init__(self, target: logging.Logger) -> None:
        super().__init__()
        self.target = target

    def emit(self, record: logging.LogRecord) -> None:
        if self.target.isEnabledFor(record.levelno):
            self.target.handle(record)


"""What code imports from the official client's extension module ``_pulsar``: the enums, the
message id, the schema type and the configuration objects, on magnetar's types."""

from __future__ import annotations

import enum
from typing import Any

from .. import _core
from ..schema import SchemaType
from .exceptions import *  # noqa: F403  (``_pulsar`` holds the exception classes too)
from .exceptions import InvalidConfiguration, __all__ as _exceptions

__all__ = [
    "BatchReceivePolicy", "BatchingType", "CompressionType", "ConsumerConfiguration", "ConsumerCryptoFailureAction",
    "ConsumerType", "InitialPosition", "KeySharedMode", "LoggerLevel", "MessageId", "PartitionsRoutingMode",
    "ProducerAccessMode", "ProducerConfiguration", "RegexSubscriptionMode", "Result", "SchemaInfo", "SchemaType",
    *[n for n in _exceptions if n not in ("mapped", "translate")],
]


class _Enum(enum.IntEnum):
    # The official enums print as ``CompressionType.LZ4``, as IntEnum's repr-less str does.
    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"


class Result(_Enum):
    """Outcome of an operation, as ``send_async`` callbacks receive it."""

    Ok = 0
    UnknownError = 1
    InvalidConfiguration = 2
    Timeout = 3
    LookupError = 4
    ConnectError = 5
    ReadError = 6
    AuthenticationError = 7
    AuthorizationError = 8
    ErrorGettingAuthenticationData = 9
    BrokerMetadataError = 10
    BrokerPersistenceError = 11
    ChecksumError = 12
    ConsumerBusy = 13
    NotConnected = 14
    AlreadyClosed = 15
    InvalidMessage = 16
    ConsumerNotInitialized = 17
    ProducerNotInitialized = 18
    ProducerBusy = 19
    TooManyLookupRequestException = 20
    InvalidTopicName = 21
    InvalidUrl = 22
    ServiceUnitNotReady = 23
    OperationNotSupported = 24
    ProducerBlockedQuotaExceededError = 25
    ProducerBlockedQuotaExceededException = 26
    ProducerQueueIsFull = 27
    MessageTooBig = 28
    TopicNotFound = 29
    SubscriptionNotFound = 30
    ConsumerNotFound = 31
    UnsupportedVersionError = 32
    TopicTerminated = 33
    CryptoError = 34
    IncompatibleSchema = 35
    ConsumerAssignError = 36
    CumulativeAcknowledgementNotAllowedError = 37
    TransactionCoordinatorNotFoundError = 38
    InvalidTxnStatusError = 39
    NotAllowedError = 40
    TransactionConflict = 41
    TransactionNotFound = 42
    ProducerFenced = 43
    MemoryBufferIsFull = 44
    Interrupted = 45


class CompressionType(_Enum):
    NONE = 0
    LZ4 = 1
    ZLib = 2
    ZSTD = 3
    SNAPPY = 4


class ConsumerType(_Enum):
    Exclusive = 0
    Shared = 1
    Failover = 2
    KeyShared = 3


class InitialPosition(_Enum):
    Latest = 0
    Earliest = 1


class PartitionsRoutingMode(_Enum):
    UseSinglePartition = 0
    RoundRobinDistribution = 1
    CustomPartition = 2


class BatchingType(_Enum):
    Default = 0
    KeyBased = 1


class LoggerLevel(_Enum):
    Debug = 0
    Info = 1
    Warn = 2
    Error = 3


class KeySharedMode(_Enum):
    AutoSplit = 0
    Sticky = 1


class ProducerAccessMode(_Enum):
    Shared = 0
    Exclusive = 1
    WaitForExclusive = 2
    ExclusiveWithFencing = 3


class RegexSubscriptionMode(_Enum):
    PersistentOnly = 0
    NonPersistentOnly = 1
    AllTopics = 2


class ConsumerCryptoFailureAction(_Enum):
    FAIL = 0
    DISCARD = 1
    CONSUME = 2


# The official id, in the engine (src/python/compat.rs): ``MessageId(partition, ledger_id,
# entry_id, batch_index)`` (that order), accessor methods, ``earliest``/``latest``, comparisons,
# ``wrap``, ``serialize``/``deserialize``; ``_id`` is the native id it stands for.
MessageId = _core.CompatMessageId


def native_id(value: Any, what: str = "message id") -> _core.MessageId:
    if isinstance(value, MessageId):
        return value._id
    if isinstance(value, _core.MessageId):
        return value
    raise ValueError(f"{what} must be a MessageId, not {type(value).__name__}")


class SchemaInfo:
    """What a schema registers, with the official accessor methods."""

    def __init__(self, schema_type: SchemaType, name: str, schema: str | bytes,
                 properties: dict[str, str] | None = None) -> None:
        self._type, self._name = SchemaType(schema_type), name
        self._schema = schema.decode() if isinstance(schema, bytes) else schema
        self._properties = dict(properties or {})

    def schema_type(self) -> SchemaType:
        return self._type

    def name(self) -> str:
        return self._name

    def schema(self) -> str:
        return self._schema

    def properties(self) -> dict[str, str]:
        return dict(self._properties)


class BatchReceivePolicy:
    """``batch_receive`` limits: messages, bytes, and milliseconds (-1: no limit)."""

    def __init__(self, max_num_message: int = -1, max_num_bytes: int = 10 * 1024 * 1024,
                 timeout_ms: int = 100) -> None:
        self.max_num_message, self.max_num_bytes, self.timeout_ms = max_num_message, max_num_bytes, timeout_ms


class _Configuration:
    """The official configuration objects: each option is a method that reads with no argument
    and sets with one (returning the object)."""

    _defaults: dict[str, Any] = {}

    def __init__(self) -> None:
        self._values = dict(self._defaults)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self._defaults:
            raise AttributeError(name)

        def option(*value: Any) -> Any:
            if not value:
                return self._values[name]
            if len(value) != 1:
                raise InvalidConfiguration(f"{name}() takes one value")
            self._values[name] = value[0]
            return self

        return option


class ProducerConfiguration(_Configuration):
    _defaults = {"producer_name": "", "send_timeout_millis": 30000, "compression_type": CompressionType.NONE,
                 "max_pending_messages": 1000, "max_pending_messages_across_partitions": 50000,
                 "block_if_queue_full": False, "batching_enabled": True, "batching_max_messages": 1000,
                 "batching_max_allowed_size_in_bytes": 128 * 1024, "batching_max_publish_delay_ms": 10,
                 "chunking_enabled": False, "partitions_routing_mode": PartitionsRoutingMode.RoundRobinDistribution,
                 "lazy_start_partitioned_producers": False, "batching_type": BatchingType.Default,
                 "access_mode": ProducerAccessMode.Shared}


class ConsumerConfiguration(_Configuration):
    _defaults = {"consumer_type": ConsumerType.Exclusive, "consumer_name": "", "receiver_queue_size": 1000,
                 "unacked_messages_timeout_ms": 0, "negative_ack_redelivery_delay_ms": 60000,
                 "read_compacted": False, "replicate_subscription_state_enabled": False,
                 "subscription_initial_position": InitialPosition.Latest, "batch_index_ack_enabled": False,
                 "start_message_id_inclusive": False, "max_pending_chunked_message": 10}


class ReaderConfiguration(_Configuration):
    _defaults = {"receiver_queue_size": 1000, "reader_name": "", "read_compacted": False,
                 "start_message_id_inclusive": False}


__all__ += ["ReaderConfiguration"]

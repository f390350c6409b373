"""magnetar: a fast Python client for Apache Pulsar, with a Rust engine.

::

    import magnetar

    with magnetar.Client("pulsar://127.0.0.1:6650") as client:
        producer = client.create_producer("my-topic")
        producer.send(b"hello")
        consumer = client.subscribe("my-topic", "my-sub", initial_position="earliest")
        msg = consumer.receive(timeout=5.0)
        consumer.ack(msg)

See :class:`Client` and :class:`AsyncClient`.
"""

from __future__ import annotations

import logging as _logging

from ._core import EncryptionContext, Message, MessageId, SendFuture, __version__
from ._async import AsyncClient, AsyncConsumer, AsyncProducer, AsyncReader
from ._client import Client, Consumer, Producer, Reader
from . import _traced  # noqa: F401  (registers the traced twins with magnetar.telemetry)
from ._backoff import Backoff
from . import _intercepted  # noqa: F401  (registers the intercepted twins)
from ._interceptors import ConsumerEventListener, ConsumerInterceptor, ProducerInterceptor
from ._config import ClientConfig
from ._crypto import CryptoKeyReader
from ._table_view import AsyncTableView, TableView
from ._failover import AutoClusterFailover
from ._options import (
    AccessMode,
    Authentication,
    BatchingType,
    Compression,
    CryptoFailureAction,
    HashingScheme,
    InitialPosition,
    KeySharedMode,
    PatternTopics,
    RoutingMode,
    SubscriptionMode,
    SubscriptionType,
)
from .exceptions import (
    AlreadyClosed,
    AuthenticationError,
    AuthorizationError,
    ConnectError,
    ConsumerBusy,
    CryptoError,
    IncompatibleSchema,
    InvalidConfiguration,
    MessageTooLarge,
    ProducerBusy,
    ProducerQueueFull,
    ProtocolError,
    PulsarError,
    SchemaDecodeError,
    SchemaEncodeError,
    Timeout,
    TopicNotFound,
    TopicTerminated,
    TransactionError,
)
from ._transaction import AsyncTransaction, Transaction

from . import schema

_logging.getLogger("magnetar").addHandler(_logging.NullHandler())

__all__ = [
    "AccessMode",
    "AlreadyClosed",
    "AsyncClient",
    "AsyncConsumer",
    "AsyncProducer",
    "AsyncReader",
    "AsyncTableView",
    "AsyncTransaction",
    "Authentication",
    "AuthenticationError",
    "AuthorizationError",
    "AutoClusterFailover",
    "Backoff",
    "BatchingType",
    "Client",
    "ClientConfig",
    "Compression",
    "ConnectError",
    "Consumer",
    "ConsumerBusy",
    "ConsumerEventListener",
    "ConsumerInterceptor",
    "CryptoError",
    "CryptoFailureAction",
    "CryptoKeyReader",
    "EncryptionContext",
    "HashingScheme",
    "IncompatibleSchema",
    "InitialPosition",
    "InvalidConfiguration",
    "KeySharedMode",
    "Message",
    "MessageId",
    "MessageTooLarge",
    "PatternTopics",
    "Producer",
    "ProducerBusy",
    "ProducerInterceptor",
    "ProducerQueueFull",
    "ProtocolError",
    "PulsarError",
    "Reader",
    "RoutingMode",
    "SchemaDecodeError",
    "SchemaEncodeError",
    "SendFuture",
    "SubscriptionMode",
    "SubscriptionType",
    "TableView",
    "Timeout",
    "TopicNotFound",
    "TopicTerminated",
    "Transaction",
    "TransactionError",
    "__version__",
    "schema",
]

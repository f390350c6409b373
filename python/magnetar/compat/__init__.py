"""The official ``pulsar-client`` API on magnetar's engine: ``import magnetar.compat as pulsar``.

Names, positional orders, millisecond units, methods rather than properties, enums, the
``(result, msg_id)`` callbacks, exception classes and defaults are the official client's (see
docs/migrating.md for the mapping to magnetar's own API, and docs/compat.md for what the
official test suite says). What magnetar cannot do raises ``InvalidConfiguration`` (a
``ValueError``) naming it. Submodules mirror the official tree: ``magnetar.compat.schema``,
``.schema.schema``, ``.asyncio``, ``.exceptions``, and ``magnetar.compat._pulsar`` stands for the
official ``_pulsar`` module.
"""

from __future__ import annotations

from . import _pulsar, exceptions, schema
from . import _traced, asyncio  # noqa: F401  (pulsar.asyncio; _traced registers the traced twins)
from ._client import Client
from ._config import (Authentication, AuthenticationAthenz, AuthenticationBasic, AuthenticationOauth2,
                      AuthenticationTLS, AuthenticationToken, AutoClusterFailover, ConsoleLogger,
                      ConsumerBatchReceivePolicy, ConsumerDeadLetterPolicy, ConsumerKeySharedPolicy, CryptoKeyReader,
                      FileLogger, ServiceInfo, ServiceInfoProvider)
from ._encryption import EncryptionContext, EncryptionKey
from ._endpoints import Consumer, Producer, Reader
from ._message import Message
from ._transaction import Transaction
from ._pulsar import (BatchingType, BatchReceivePolicy, CompressionType, ConsumerCryptoFailureAction, ConsumerType,
                      InitialPosition, KeySharedMode, LoggerLevel, MessageId, PartitionsRoutingMode,
                      ProducerAccessMode, RegexSubscriptionMode, Result)
from .exceptions import *  # noqa: F403
from .exceptions import __all__ as _exception_names
from ._table_view import TableView
from .schema import BytesSchema

__version__ = "3.13.0"
"""The official client's version whose API this module speaks."""

__all__ = [
    "Authentication", "AuthenticationAthenz", "AuthenticationBasic", "AuthenticationOauth2", "AuthenticationTLS",
    "AuthenticationToken", "AutoClusterFailover", "BatchReceivePolicy", "BatchingType", "BytesSchema", "Client",
    "CompressionType", "ConsoleLogger", "Consumer", "ConsumerBatchReceivePolicy", "ConsumerCryptoFailureAction",
    "ConsumerDeadLetterPolicy", "ConsumerKeySharedPolicy", "ConsumerType", "CryptoKeyReader", "EncryptionContext", "EncryptionKey", "FileLogger",
    "InitialPosition", "KeySharedMode", "LoggerLevel", "Message", "MessageId", "PartitionsRoutingMode", "Producer",
    "ProducerAccessMode", "Reader", "RegexSubscriptionMode", "Result", "ServiceInfo", "ServiceInfoProvider",
    "TableView", "Transaction", "exceptions", "schema",
    *[n for n in _exception_names if n not in ("mapped", "translate")],
]

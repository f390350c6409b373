"""Exceptions raised by magnetar.

Every error is a :class:`PulsarError`; ``code`` holds the broker's ``ServerError`` number when
the broker refused an operation (``None`` otherwise)::

    PulsarError
    ├── Timeout               (also a builtin TimeoutError)
    ├── ConnectError          (also a builtin ConnectionError)
    ├── AuthenticationError
    ├── AuthorizationError
    ├── TopicNotFound
    ├── ProducerBusy
    ├── ConsumerBusy
    ├── ProducerQueueFull
    ├── MessageTooLarge
    ├── AlreadyClosed
    ├── TopicTerminated
    ├── InvalidConfiguration  (also a builtin ValueError)
    ├── ProtocolError
    ├── IncompatibleSchema    (the broker refused the schema)
    ├── SchemaEncodeError     (a value does not fit the schema; also a builtin ValueError)
    ├── SchemaDecodeError     (msg.value or a Spark read cannot decode the payload)
    ├── TransactionError      (a finished transaction used, a failed operation, the coordinator)
    └── CryptoError           (an encryption key cannot be had or used)
"""

from __future__ import annotations

__all__ = [
    "AlreadyClosed",
    "AuthenticationError",
    "AuthorizationError",
    "ConnectError",
    "ConsumerBusy",
    "CryptoError",
    "IncompatibleSchema",
    "InvalidConfiguration",
    "MessageTooLarge",
    "ProducerBusy",
    "ProducerQueueFull",
    "ProtocolError",
    "PulsarError",
    "SchemaDecodeError",
    "SchemaEncodeError",
    "Timeout",
    "TopicNotFound",
    "TopicTerminated",
    "TransactionError",
]


class PulsarError(Exception):
    """Base class of every magnetar error."""

    code: int | None
    """The broker's ``ServerError`` code, when the broker reported the error."""

    def __init__(self, message: str = "", code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


# Waiting and connecting


class Timeout(PulsarError, TimeoutError):
    """An operation did not complete within its timeout."""


class ConnectError(PulsarError, ConnectionError):
    """No broker could be reached, or the connection was lost for good."""


# Refusals by the broker


class AuthenticationError(PulsarError):
    """The broker rejected the credentials."""


class AuthorizationError(PulsarError):
    """The credentials lack a permission for this operation."""


class TopicNotFound(PulsarError):
    """The topic or subscription does not exist and cannot be created."""


class ProducerBusy(PulsarError):
    """Another producer holds exclusive access, or the producer name is taken."""


class ConsumerBusy(PulsarError):
    """An exclusive subscription already has a consumer."""


class TopicTerminated(PulsarError):
    """The topic was terminated: nothing more can be published or will be delivered."""


# Limits and misuse


class ProducerQueueFull(PulsarError):
    """The producer's pending queue or the client's memory limit is full, or the broker holds
    the producer back because the topic's backlog quota is exceeded (``code`` is then the
    broker's ProducerBlockedQuotaExceeded error, and the message names the quota)."""


class MessageTooLarge(PulsarError):
    """The message is larger than the broker accepts (enable chunking to send it)."""


class AlreadyClosed(PulsarError):
    """The client, producer or consumer is closed (or was created before a fork)."""


class InvalidConfiguration(PulsarError, ValueError):
    """An invalid option value, topic name or argument."""


class ProtocolError(PulsarError):
    """The peer violated the Pulsar protocol."""


# Schemas


class IncompatibleSchema(PulsarError):
    """The broker refused the producer's or consumer's schema as incompatible with the topic's
    (the message is the broker's)."""


class SchemaEncodeError(PulsarError, ValueError):
    """A value does not fit the producer's schema; nothing was sent."""


class SchemaDecodeError(PulsarError):
    """A payload does not decode with the schema: ``msg.value`` with the consumer's schema
    (the consumer goes on), or a Spark read with the topic's schema (the task fails). The
    message names the topic, the message id and the schema version."""


# Transactions


class TransactionError(PulsarError):
    """A transaction cannot go on: it is already committed, aborted or timed out (the
    coordinator aborts it after its timeout), one of its sends or acknowledgements failed (its
    commit then aborts it), or its coordinator cannot be reached or refused the request
    (``code`` is then the broker's error)."""


# End-to-end encryption


class CryptoError(PulsarError):
    """End-to-end encryption failed: the key reader could not supply a key, or a key is not a
    usable RSA key (raised by ``create_producer``, and by a send when the key cannot be used)."""

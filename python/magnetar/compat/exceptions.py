"""The official client's exception classes, and the one place magnetar's errors become them.

Every class is a :class:`PulsarException`; one per ``Result`` of the official client (its C++
``Result`` codes). ``InvalidConfiguration`` is also a builtin ``ValueError`` here, as wrong
arguments are in the official client.
"""

from __future__ import annotations

import contextlib
import re
from typing import Iterator

from .. import exceptions as _native

__all__ = [
    "AlreadyClosed", "AuthenticationError", "AuthorizationError", "BrokerMetadataError", "BrokerPersistenceError",
    "ChecksumError", "ConnectError", "ConsumerAssignError", "ConsumerBusy", "ConsumerNotFound",
    "ConsumerNotInitialized", "CryptoError", "CumulativeAcknowledgementNotAllowedError",
    "ErrorGettingAuthenticationData", "IncompatibleSchema", "Interrupted", "InvalidConfiguration", "InvalidMessage",
    "InvalidTopicName", "InvalidTxnStatusError", "InvalidUrl", "LookupError", "MemoryBufferIsFull", "MessageTooBig",
    "NotAllowedError", "NotConnected", "OperationNotSupported", "ProducerBlockedQuotaExceededError",
    "ProducerBlockedQuotaExceededException", "ProducerBusy", "ProducerFenced", "ProducerNotInitialized",
    "ProducerQueueIsFull", "PulsarException", "ReadError", "ServiceUnitNotReady", "SubscriptionNotFound", "Timeout",
    "TooManyLookupRequestException", "TopicNotFound", "TopicTerminated", "TransactionConflict",
    "TransactionCoordinatorNotFoundError", "TransactionNotFound", "UnknownError", "UnsupportedVersionError",
    "mapped", "translate",
]


class PulsarException(Exception):
    """Base class of every error the compatibility API raises."""


class UnknownError(PulsarException): pass  # noqa: E701
class InvalidConfiguration(PulsarException, ValueError): pass  # noqa: E701
class Timeout(PulsarException): pass  # noqa: E701
class LookupError(PulsarException): pass  # noqa: E701,A001
class ConnectError(PulsarException): pass  # noqa: E701
class ReadError(PulsarException): pass  # noqa: E701
class AuthenticationError(PulsarException): pass  # noqa: E701
class AuthorizationError(PulsarException): pass  # noqa: E701
class ErrorGettingAuthenticationData(PulsarException): pass  # noqa: E701
class BrokerMetadataError(PulsarException): pass  # noqa: E701
class BrokerPersistenceError(PulsarException): pass  # noqa: E701
class ChecksumError(PulsarException): pass  # noqa: E701
class ConsumerBusy(PulsarException): pass  # noqa: E701
class NotConnected(PulsarException): pass  # noqa: E701
class AlreadyClosed(PulsarException): pass  # noqa: E701
class InvalidMessage(PulsarException): pass  # noqa: E701
class ConsumerNotInitialized(PulsarException): pass  # noqa: E701
class ProducerNotInitialized(PulsarException): pass  # noqa: E701
class ProducerBusy(PulsarException): pass  # noqa: E701
class TooManyLookupRequestException(PulsarException): pass  # noqa: E701
class InvalidTopicName(PulsarException): pass  # noqa: E701
class InvalidUrl(PulsarException): pass  # noqa: E701
class ServiceUnitNotReady(PulsarException): pass  # noqa: E701
class OperationNotSupported(PulsarException): pass  # noqa: E701
class ProducerBlockedQuotaExceededError(PulsarException): pass  # noqa: E701
class ProducerBlockedQuotaExceededException(PulsarException): pass  # noqa: E701
class ProducerQueueIsFull(PulsarException): pass  # noqa: E701
class MessageTooBig(PulsarException): pass  # noqa: E701
class TopicNotFound(PulsarException): pass  # noqa: E701
class SubscriptionNotFound(PulsarException): pass  # noqa: E701
class ConsumerNotFound(PulsarException): pass  # noqa: E701
class UnsupportedVersionError(PulsarException): pass  # noqa: E701
class TopicTerminated(PulsarException): pass  # noqa: E701
class CryptoError(PulsarException): pass  # noqa: E701
class IncompatibleSchema(PulsarException): pass  # noqa: E701
class ConsumerAssignError(PulsarException): pass  # noqa: E701
class CumulativeAcknowledgementNotAllowedError(PulsarException): pass  # noqa: E701
class TransactionCoordinatorNotFoundError(PulsarException): pass  # noqa: E701
class InvalidTxnStatusError(PulsarException): pass  # noqa: E701
class NotAllowedError(PulsarException): pass  # noqa: E701
class TransactionConflict(PulsarException): pass  # noqa: E701
class TransactionNotFound(PulsarException): pass  # noqa: E701
class ProducerFenced(PulsarException): pass  # noqa: E701
class MemoryBufferIsFull(PulsarException): pass  # noqa: E701
class Interrupted(PulsarException): pass  # noqa: E701


# The broker's ServerError codes (PulsarApi.proto) name the most specific class.
_BY_CODE: dict[int, type[PulsarException]] = {
    0: UnknownError, 1: BrokerMetadataError, 2: BrokerPersistenceError, 3: AuthenticationError,
    4: AuthorizationError, 5: ConsumerBusy, 6: ServiceUnitNotReady, 7: ProducerBlockedQuotaExceededError,
    8: ProducerBlockedQuotaExceededException, 9: ChecksumError, 10: UnsupportedVersionError, 11: TopicNotFound,
    12: SubscriptionNotFound, 13: ConsumerNotFound, 14: TooManyLookupRequestException, 15: TopicTerminated,
    16: ProducerBusy, 17: InvalidTopicName, 18: IncompatibleSchema, 19: ConsumerAssignError,
    20: TransactionCoordinatorNotFoundError, 21: InvalidTxnStatusError, 22: NotAllowedError,
    23: TransactionConflict, 24: TransactionNotFound, 25: ProducerFenced,
}

_BY_CLASS: dict[type[_native.PulsarError], type[PulsarException]] = {
    _native.Timeout: Timeout, _native.ConnectError: ConnectError,
    _native.AuthenticationError: AuthenticationError, _native.AuthorizationError: AuthorizationError,
    _native.TopicNotFound: TopicNotFound, _native.ProducerBusy: ProducerBusy, _native.ConsumerBusy: ConsumerBusy,
    _native.ProducerQueueFull: ProducerQueueIsFull, _native.MessageTooLarge: MessageTooBig,
    _native.AlreadyClosed: AlreadyClosed, _native.TopicTerminated: TopicTerminated,
    _native.InvalidConfiguration: InvalidConfiguration, _native.ProtocolError: UnknownError,
    _native.IncompatibleSchema: IncompatibleSchema, _native.CryptoError: CryptoError,
    _native.TransactionError: InvalidTxnStatusError,
}


_REST_REFUSAL = re.compile(r"(\w+: )?GET /")


def translate(error: _native.PulsarError) -> PulsarException:
    """The compatibility exception for one of magnetar's."""
    cls = _BY_CODE.get(error.code) if error.code is not None else None
    if cls is None:
        cls = next((c for n, c in _BY_CLASS.items() if isinstance(error, n)), UnknownError)
    if cls in (AuthenticationError, AuthorizationError) and _REST_REFUSAL.match(str(error)):
        # The official client's HTTP lookup (http:// and https:// service URLs) reports a
        # refused REST request as a connection error, whatever the status.
        cls = ConnectError
    out = cls(str(error))
    out.__cause__ = error
    return out


@contextlib.contextmanager
def mapped() -> Iterator[None]:
    """Raises magnetar's errors as the official client's classes (schema encode and decode
    errors stay ValueError-like as they are), and Ctrl-C during a wait as ``Interrupted``."""
    try:
        yield
    except (_native.SchemaEncodeError, _native.SchemaDecodeError):
        raise
    except _native.PulsarError as e:
        raise translate(e) from e
    except KeyboardInterrupt as e:
        raise Interrupted("interrupted") from e

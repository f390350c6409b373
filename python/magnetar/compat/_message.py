"""What the compat client and its endpoints both hand to the application: the received
``Message`` and the ``Result`` an error becomes in a callback. Kept below both, so the
endpoints need nothing of the client that makes them."""

from __future__ import annotations

from .. import _core
from .. import exceptions as _nexc
from ._encryption import EncryptionContext
from ._pulsar import Result
from .exceptions import Interrupted, translate

__all__ = ["Message", "_result_of"]

# A received message, every field a method, in the engine (src/python/compat.rs): the official
# data(), value(), properties(), partition_key(), ordering_key(), publish_timestamp(),
# event_timestamp(), message_id(), topic_name(), redelivery_count(), schema_version(),
# producer_name(), has_null_value(), encryption_context(). ``Message._of(native)`` wraps a
# native message; ``_id`` is its native id.
Message = _core.CompatMessage


def _result_of(error: BaseException) -> Result:
    if isinstance(error, _nexc.PulsarError):
        error = translate(error)
    return Result.__members__.get(type(error).__name__, Result.UnknownError)


# The engine's compat paths (src/python/compat.rs) raise and hand out these; they are given to
# it here rather than imported by name from Rust, so this package can arrange its modules freely.
_core._register_compat(translate, Interrupted, Result, _result_of, EncryptionContext)

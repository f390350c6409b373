"""What the sync and async twins share: option handling and value conversion."""

from __future__ import annotations

import datetime as _dt
import enum
import time
from typing import Any, Mapping, Sequence, Union

from ._core import MessageId, _duration_seconds
from .exceptions import InvalidConfiguration

__all__ = [
    "Authentication",
    "SubscriptionType",
    "TimeLike",
    "client_options",
    "consumer_options",
    "deliver_at_ms",
    "producer_options",
    "time_ms",
]

TimeLike = Union[int, float, _dt.datetime]
"""A point in time: a ``datetime`` (naive means local time) or milliseconds since the epoch."""

DEFAULT_OPERATION_TIMEOUT = 30.0
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_KEEPALIVE_INTERVAL = 30.0
DEFAULT_MEMORY_LIMIT = 64 * 1024 * 1024


class SubscriptionType(str, enum.Enum):
    """How a subscription hands messages to its consumers."""

    EXCLUSIVE = "exclusive"
    """One consumer; others are refused."""
    SHARED = "shared"
    """Messages spread round-robin over consumers; acks are individual."""
    FAILOVER = "failover"
    """One active consumer per partition; the others stand by."""
    KEY_SHARED = "key_shared"
    """Messages with the same key always go to the same consumer."""


class Authentication:
    """Credentials sent when connecting.

    Use :meth:`token` for JWT token authentication (the broker's
    ``AuthenticationProviderToken``).
    """

    def __init__(self, method: str, data: bytes | str = b"") -> None:
        if not method:
            raise InvalidConfiguration("authentication method must not be empty")
        self.method = method
        self.data = data.encode() if isinstance(data, str) else bytes(data)

    @classmethod
    def token(cls, token: str) -> "Authentication":
        """Token authentication with a JWT."""
        if not token:
            raise InvalidConfiguration("token must not be empty")
        return cls("token", token)

    def __repr__(self) -> str:
        return f"Authentication({self.method!r}, <{len(self.data)} bytes>)"


def time_ms(value: TimeLike, what: str) -> int:
    """Milliseconds since the epoch from a datetime or a number of milliseconds."""
    if isinstance(value, _dt.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise InvalidConfiguration(f"{what} must be a datetime or milliseconds since the epoch, not {value!r}")
    return int(value)


def deliver_at_ms(deliver_at: TimeLike | None, deliver_after: float | _dt.timedelta | None) -> int | None:
    """The delivery time of a delayed message."""
    if deliver_at is not None and deliver_after is not None:
        raise InvalidConfiguration("give deliver_at or deliver_after, not both")
    if deliver_after is not None:
        seconds = _duration_seconds(deliver_after, "deliver_after", False)
        assert seconds is not None  # the engine refuses "no limit" for a delivery delay
        return int(time.time() * 1000 + seconds * 1000)
    if deliver_at is not None:
        return time_ms(deliver_at, "deliver_at")
    return None


# Durations pass through untouched: the engine checks them (``convert::span``), so a value
# means the same wherever it is given.
def client_options(
    operation_timeout: float | None,
    connect_timeout: float | None,
    keepalive_interval: float | None,
    memory_limit: int,
    authentication: Authentication | None,
    initial_backoff: float,
    max_backoff: float,
) -> dict[str, Any]:
    if authentication is not None and not isinstance(authentication, Authentication):
        raise InvalidConfiguration("authentication must be a magnetar.Authentication")
    return {
        "operation_timeout": operation_timeout,
        "connect_timeout": connect_timeout,
        "keepalive_interval": keepalive_interval,
        "memory_limit": memory_limit,
        "auth_method": authentication.method if authentication else None,
        "auth_data": authentication.data if authentication else None,
        "initial_backoff": initial_backoff,
        "max_backoff": max_backoff,
    }


def producer_options(**kw: Any) -> dict[str, Any]:
    compression = kw.get("compression")
    if compression is not None and not isinstance(compression, str):
        raise InvalidConfiguration(f"compression must be None or a codec name, not {compression!r}")
    return kw


def consumer_options(
    subscription_type: SubscriptionType | str,
    initial_position: str,
    **kw: Any,
) -> dict[str, Any]:
    if isinstance(subscription_type, SubscriptionType):
        subscription_type = subscription_type.value
    elif not isinstance(subscription_type, str):
        raise InvalidConfiguration(f"subscription_type must be a SubscriptionType, not {subscription_type!r}")
    kw["subscription_type"] = subscription_type
    kw["initial_position"] = initial_position
    return kw


def check_topic(topic: Any) -> None:
    if isinstance(topic, str):
        return
    if isinstance(topic, Sequence) and all(isinstance(t, str) for t in topic):
        return
    raise InvalidConfiguration(f"topic must be a str or a list of str, not {topic!r}")


def reader_start(start: MessageId | TimeLike) -> tuple[MessageId, int | None]:
    """A reader's start id, and the publish time to seek to when it starts at a time."""
    if isinstance(start, MessageId):
        return start, None
    return MessageId.earliest, time_ms(start, "start")


def properties_dict(properties: Mapping[str, str] | None) -> dict[str, str] | None:
    if properties is None:
        return None
    if not isinstance(properties, Mapping):
        raise InvalidConfiguration("properties must be a dict of str to str")
    return dict(properties)


def many_columns(
    keys: Sequence[str | None] | None,
    properties: Sequence[Mapping[str, str] | None] | None,
    event_times: Sequence[TimeLike | None] | None,
) -> tuple[list[str | None] | None, list[dict[str, str] | None] | None, list[int | None] | None]:
    """The optional per-message columns of ``send_many``, as the engine takes them."""
    return (
        None if keys is None else list(keys),
        None if properties is None else [p if p is None or type(p) is dict else dict(p) for p in properties],
        None if event_times is None else [None if t is None else time_ms(t, "event_times") for t in event_times],
    )

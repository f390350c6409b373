""":class:`Backoff`: a redelivery delay that grows with a message's redelivery count."""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass
from .exceptions import InvalidConfiguration

__all__ = ["Backoff"]


@dataclass(frozen=True)
class Backoff:
    """A redelivery delay growing with each message's redelivery count, as the Java client's
    ``MultiplierRedeliveryBackoff``: ``min_delay * multiplier ** redelivery_count``, never
    below ``min_delay`` nor above ``max_delay`` (seconds). The defaults are
    the Java builder's (10 s, 600 s, 2.0).

    ``nack_backoff=`` takes one for the delay of negatively acknowledged messages (instead of
    ``nack_redelivery_delay``), ``ack_timeout_backoff=`` for the delay added to ``ack_timeout``
    before a message not acknowledged in time is redelivered::

        consumer = client.subscribe(topic, "sub", subscription_type="shared",
                                    nack_backoff=magnetar.Backoff(min_delay=0.1, max_delay=10.0))
    """

    min_delay: float = 10.0
    max_delay: float = 600.0
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        for name in ("min_delay", "max_delay"):
            value = getattr(self, name)
            if isinstance(value, _dt.timedelta):
                value = value.total_seconds()
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 2**31:
                raise InvalidConfiguration(f"Backoff {name} must be seconds >= 0 (or a timedelta), not {value!r}")
            object.__setattr__(self, name, float(value))
        if self.max_delay < self.min_delay:
            raise InvalidConfiguration(f"Backoff max_delay ({self.max_delay}) must be at least min_delay ({self.min_delay})")
        m = self.multiplier
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not math.isfinite(m) or m < 1:
            raise InvalidConfiguration(f"Backoff multiplier must be a number >= 1, not {m!r}")
        object.__setattr__(self, "multiplier", float(m))

    def delay(self, redelivery_count: int) -> float:
        """The delay, in seconds, of a message delivered ``redelivery_count`` times before."""
        if redelivery_count <= 0 or self.min_delay == 0:
            return self.min_delay
        try:
            grown = self.min_delay * self.multiplier ** redelivery_count
        except OverflowError:
            return self.max_delay
        return min(self.max_delay, max(self.min_delay, grown))

    def _engine(self) -> tuple[float, float, float]:
        return (self.min_delay, self.max_delay, self.multiplier)

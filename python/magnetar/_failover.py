"""Automatic cluster failover: a client that moves to another cluster while its own is down."""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Sequence
from typing import Union

from .exceptions import InvalidConfiguration

__all__ = ["AutoClusterFailover"]

DEFAULT_CHECK_INTERVAL = 30.0
DEFAULT_FAILOVER_DELAY = 30.0
DEFAULT_SWITCH_BACK_DELAY = 60.0

_Duration = Union[float, _dt.timedelta]


def _seconds(value: _Duration, name: str, positive: bool = False) -> float:
    if isinstance(value, _dt.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or math.isinf(value):
        raise InvalidConfiguration(f"{name} must be a finite number of seconds or a timedelta, not {value!r}")
    if value < 0 or (positive and value == 0):
        raise InvalidConfiguration(f"{name} must be {'positive' if positive else '>= 0'}, not {value!r}")
    return float(value)


def _url(value: object, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidConfiguration(f"{name} must be a service URL (str), not {value!r}")
    return value.strip()


class AutoClusterFailover:
    """Clusters a :class:`~magnetar.Client` or :class:`~magnetar.AsyncClient` moves between,
    given in place of the service URL (the C++ and official Python clients' ``AutoClusterFailover``).

    Every ``check_interval`` the client probes the cluster it uses (a TCP connection to one of
    its hosts). When the primary has been unreachable for ``failover_delay``, it switches to the
    first reachable secondary; while on a secondary it also probes the primary, and switches
    back once the primary has been reachable for ``switch_back_delay`` (at once if the secondary
    is down too). Secondaries are not probed while the primary answers. On a switch every
    connection closes, and producers, consumers and readers reconnect to the new cluster, with
    their pending messages resent there.

    Each URL is a service URL as :class:`~magnetar.Client` takes it (several hosts of one
    cluster are fine); the client's options (credentials, TLS) apply to every cluster.
    Durations are seconds or ``timedelta``.
    """

    __slots__ = ("check_interval", "failover_delay", "primary", "secondaries", "switch_back_delay")

    def __init__(self, primary: str, secondaries: Sequence[str], *, check_interval: _Duration = DEFAULT_CHECK_INTERVAL,
                 failover_delay: _Duration = DEFAULT_FAILOVER_DELAY,
                 switch_back_delay: _Duration = DEFAULT_SWITCH_BACK_DELAY) -> None:
        self.primary = _url(primary, "primary")
        if isinstance(secondaries, str) or not isinstance(secondaries, Sequence) or not secondaries:
            raise InvalidConfiguration(f"secondaries must be a non-empty list of service URLs, not {secondaries!r}")
        self.secondaries = tuple(_url(s, "each secondary") for s in secondaries)
        self.check_interval = _seconds(check_interval, "check_interval", positive=True)
        self.failover_delay = _seconds(failover_delay, "failover_delay")
        self.switch_back_delay = _seconds(switch_back_delay, "switch_back_delay")

    @property
    def urls(self) -> tuple[str, ...]:
        """The primary's URL, then the secondaries'."""
        return (self.primary, *self.secondaries)

    def _engine(self) -> tuple[list[str], float, float, float]:
        return list(self.secondaries), self.check_interval, self.failover_delay, self.switch_back_delay

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AutoClusterFailover):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, k) for k in self.__slots__))

    def __repr__(self) -> str:
        return (f"AutoClusterFailover({self.primary!r}, {list(self.secondaries)!r}, "
                f"check_interval={self.check_interval}, failover_delay={self.failover_delay}, "
                f"switch_back_delay={self.switch_back_delay})")

"""The shapes of the admin API's answers, typed with the broker's own field names (as the REST
API and Java's ``PulsarAdmin`` spell them), so a script can rely on them and a reader can look
each up in Pulsar's documentation. ``total=False``: brokers of other versions add or omit
fields; the ones listed are those of Pulsar 4.0.

Answers of the client's own shape (``Retention``, ``PeekedMessage``) use snake case.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

__all__ = [
    "AutoTopicCreation",
    "BacklogQuota",
    "ClusterData",
    "DispatchRate",
    "InternalStats",
    "LeaderBroker",
    "PeekedMessage",
    "PublishRate",
    "Retention",
    "SchemaEntry",
    "SubscriptionStats",
    "TenantInfo",
    "TopicLookup",
    "TopicStats",
]


class Retention(TypedDict):
    """A namespace's retention: ``size_mb`` (-1: no limit) and ``time_minutes`` (-1: for ever),
    the broker's ``retentionSizeInMB`` and ``retentionTimeInMinutes``."""

    size_mb: int
    time_minutes: int


def retention_of(answer: Any) -> Retention | None:
    """The broker's ``RetentionPolicies`` as a :class:`Retention`; None for none."""
    if not answer:
        return None
    return Retention(size_mb=int(answer["retentionSizeInMB"]), time_minutes=int(answer["retentionTimeInMinutes"]))


class TenantInfo(TypedDict, total=False):
    adminRoles: list[str]
    allowedClusters: list[str]


class ClusterData(TypedDict, total=False):
    serviceUrl: str
    serviceUrlTls: str
    brokerServiceUrl: str
    brokerServiceUrlTls: str


class LeaderBroker(TypedDict, total=False):
    """The broker that runs the load manager: its web ``serviceUrl`` and ``brokerId``."""

    serviceUrl: str
    brokerId: str


class SubscriptionStats(TypedDict, total=False):
    """One subscription's part of :class:`TopicStats`; ``msgBacklog`` counts the messages not
    yet acknowledged."""

    msgRateOut: float
    msgThroughputOut: float
    msgBacklog: int
    backlogSize: int
    msgRateExpired: float
    type: str
    consumers: list[dict[str, Any]]
    isDurable: bool
    unackedMessages: int


class TopicStats(TypedDict, total=False):
    """``topics.stats``: rates per second, sizes in bytes; a partitioned topic's aggregate adds
    ``metadata`` (``{"partitions": n}``) and, with ``per_partition=True``, ``partitions``."""

    msgRateIn: float
    msgRateOut: float
    msgThroughputIn: float
    msgThroughputOut: float
    msgInCounter: int
    bytesInCounter: int
    msgOutCounter: int
    storageSize: int
    backlogSize: int
    publishers: list[dict[str, Any]]
    subscriptions: dict[str, SubscriptionStats]
    replication: dict[str, Any]
    deduplicationStatus: str
    metadata: dict[str, Any]
    partitions: dict[str, Any]


class InternalStats(TypedDict, total=False):
    """``topics.internal_stats``: the managed ledger behind a persistent topic."""

    entriesAddedCounter: int
    numberOfEntries: int
    totalSize: int
    currentLedgerEntries: int
    lastConfirmedEntry: str
    state: str
    ledgers: list[dict[str, Any]]
    cursors: dict[str, dict[str, Any]]
    compactedLedger: dict[str, Any]


class TopicLookup(TypedDict, total=False):
    """``topics.lookup``: the owning broker's binary and web URLs."""

    brokerUrl: str
    brokerUrlTls: str
    httpUrl: str
    httpUrlTls: str
    nativeUrl: str


class SchemaEntry(TypedDict, total=False):
    """``schemas.get``: ``type`` (``"AVRO"``, ``"JSON"``, ...), ``data`` (the definition as
    text), the registry's ``version`` and ``properties``."""

    version: int
    type: str
    timestamp: int
    data: str
    properties: dict[str, str]


class BacklogQuota(TypedDict, total=False):
    """A backlog quota: ``limitSize`` in bytes, ``limitTime`` in seconds (-1: none) and the
    ``policy`` applied beyond them (``producer_request_hold``, ``producer_exception``,
    ``consumer_backlog_eviction``)."""

    limitSize: int
    limitTime: int
    policy: str


class DispatchRate(TypedDict, total=False):
    """Messages and bytes dispatched per ``ratePeriodInSecond`` (-1: no limit)."""

    dispatchThrottlingRateInMsg: int
    dispatchThrottlingRateInByte: int
    ratePeriodInSecond: int
    relativeToPublishRate: bool


class PublishRate(TypedDict, total=False):
    """Messages and bytes published per second (-1: no limit)."""

    publishThrottlingRateInMsg: int
    publishThrottlingRateInByte: int


class AutoTopicCreation(TypedDict, total=False):
    """``allowAutoTopicCreation``, ``topicType`` (``"partitioned"``/``"non-partitioned"``) and
    ``defaultNumPartitions``."""

    allowAutoTopicCreation: bool
    topicType: str
    defaultNumPartitions: int


@dataclass(frozen=True)
class PeekedMessage:
    """A message read by ``topics.peek`` or ``topics.examine``, without consuming it:
    ``message_id`` is ``"ledger:entry"`` (with ``:partition`` on a partitioned topic's
    partition), ``properties`` its properties, ``headers`` every ``X-Pulsar-*`` header the broker
    sent (publish time, key, ...)."""

    message_id: str
    payload: bytes
    properties: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)

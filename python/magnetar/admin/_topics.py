"""Topics and their subscriptions, named as ``pulsar-admin topics`` names them. A call on a
partitioned topic acts on every partition, as ``pulsar-admin`` does."""

from __future__ import annotations

import builtins
import contextlib
import datetime
import json
from typing import Any, cast

from .._core import MessageId
from ..exceptions import InvalidConfiguration
from ._call import Answer, Request, Steps, _Resource, admin_op, namespace_path, segment, topic_path
from ._types import InternalStats, PeekedMessage, Retention, TopicLookup, TopicStats, retention_of

__all__ = ["Topics"]

# The broker's cursor positions for the earliest and latest messages (Java's MessageId.earliest
# and MessageId.latest as the REST API reads them).
_EARLIEST = {"ledgerId": -1, "entryId": -1, "partitionIndex": -1}
_LATEST = {"ledgerId": 2**63 - 1, "entryId": 2**63 - 1, "partitionIndex": -1}


def _position(at: MessageId) -> dict[str, int]:
    if not isinstance(at, MessageId):
        raise InvalidConfiguration(f"a position must be a magnetar.MessageId, not {at!r}")
    if at == MessageId.earliest:
        return dict(_EARLIEST)
    if at == MessageId.latest:
        return dict(_LATEST)
    return {"ledgerId": at.ledger_id, "entryId": at.entry_id, "partitionIndex": at.partition}


def _sub(topic: str, subscription: str, suffix: str = "") -> str:
    return topic_path(topic, f"/subscription/{segment(subscription, 'subscription')}{suffix}")


def _count(topic: str) -> Steps[int]:
    """Partitions of ``topic`` (0: not partitioned, or missing)."""
    answer = yield Request("GET", topic_path(topic, "/partitions"))
    return int((answer.json() or {}).get("partitions", 0))


def _stats(topic: str, per_partition: bool = False) -> Steps[TopicStats]:
    if (yield from _count(topic)):
        req = Request("GET", topic_path(topic, "/partitioned-stats"), query={"perPartition": per_partition})
    else:
        req = Request("GET", topic_path(topic, "/stats"))
    return cast(TopicStats, (yield req).json())


def _peeked(answer: Answer) -> PeekedMessage:
    headers = {k: v for k, v in answer.headers.items() if k.startswith("x-pulsar-")}
    # Brokers send the properties as one JSON header; older ones as a header each (whose names
    # HTTP does not keep the case of).
    properties = {k[len("x-pulsar-property-"):]: v for k, v in headers.items() if k.startswith("x-pulsar-property-")}
    if "x-pulsar-property" in headers:
        with contextlib.suppress(ValueError):
            properties.update({str(k): str(v) for k, v in json.loads(headers["x-pulsar-property"]).items()})
    return PeekedMessage(headers.get("x-pulsar-message-id", ""), answer.body, properties, headers)


class Topics(_Resource):
    """``admin.topics``: topics (``persistent://tenant/namespace/topic``, or ``tenant/ns/topic``
    and ``topic`` as the clients read them) and their subscriptions."""

    @admin_op
    def create(self, topic: str, *, partitions: int = 0) -> Steps[None]:
        """Creates a topic: partitioned with ``partitions`` > 0, else not; :class:`Conflict`
        if it exists."""
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 0:
            raise InvalidConfiguration(f"partitions must be an int >= 0, not {partitions!r}")
        if partitions:
            yield Request("PUT", topic_path(topic, "/partitions"), partitions)
        else:
            yield Request("PUT", topic_path(topic))

    @admin_op
    def update_partitions(self, topic: str, partitions: int) -> Steps[None]:
        """Raises a partitioned topic's partition count (it never shrinks)."""
        yield Request("POST", topic_path(topic, "/partitions"), int(partitions))

    @admin_op
    def list(self, namespace: str, *, domain: str = "persistent") -> Steps[builtins.list[str]]:
        """The namespace's topics of ``domain`` (``persistent`` or ``non-persistent``): the
        non-partitioned ones, and partitioned ones by their partitions."""
        if domain not in ("persistent", "non-persistent"):
            raise InvalidConfiguration(f"domain must be 'persistent' or 'non-persistent', not {domain!r}")
        return list((yield Request("GET", f"/admin/v2/{domain}/{namespace_path(namespace)}")).json())

    @admin_op
    def list_partitioned(self, namespace: str, *, domain: str = "persistent") -> Steps[builtins.list[str]]:
        """The namespace's partitioned topics, by their own names."""
        if domain not in ("persistent", "non-persistent"):
            raise InvalidConfiguration(f"domain must be 'persistent' or 'non-persistent', not {domain!r}")
        return list((yield Request("GET", f"/admin/v2/{domain}/{namespace_path(namespace)}/partitioned")).json())

    @admin_op
    def partitions(self, topic: str) -> Steps[int]:
        """The partition count; 0 for a non-partitioned topic."""
        return (yield from _count(topic))

    @admin_op
    def stats(self, topic: str, *, per_partition: bool = False) -> Steps[TopicStats]:
        """Rates, counters, producers and subscriptions; a partitioned topic's aggregate over
        its partitions (each under ``partitions`` with ``per_partition``)."""
        return (yield from _stats(topic, per_partition))

    @admin_op
    def internal_stats(self, topic: str) -> Steps[InternalStats]:
        """The managed ledger's state (a partition's, for a partitioned topic name one)."""
        return cast(InternalStats, (yield Request("GET", topic_path(topic, "/internalStats"))).json())

    @admin_op
    def lookup(self, topic: str) -> Steps[TopicLookup]:
        """The broker that owns the topic (a partition's, for partitioned ones)."""
        return cast(TopicLookup, (yield Request("GET", topic_path(topic, prefix="/lookup/v2/topic"))).json())

    @admin_op
    def unload(self, topic: str) -> Steps[None]:
        """Closes the topic on its broker, which loads it again (or another does): clients
        reconnect."""
        yield Request("PUT", topic_path(topic, "/unload"))

    @admin_op
    def compact(self, topic: str) -> Steps[None]:
        """Starts compaction (the latest message of each key kept); returns at once."""
        yield Request("PUT", topic_path(topic, "/compaction"))

    @admin_op
    def compaction_status(self, topic: str) -> Steps[dict[str, Any]]:
        """``{"status": "NOT_RUN" | "RUNNING" | "SUCCESS" | "ERROR", "lastError": ...}``."""
        return dict((yield Request("GET", topic_path(topic, "/compaction"))).json())

    @admin_op
    def terminate(self, topic: str) -> Steps[Any]:
        """Ends the topic: nothing more can be published. Returns the last message id as the
        broker gives it (one per partition for a partitioned topic)."""
        suffix = "/terminate/partitions" if (yield from _count(topic)) else "/terminate"
        return (yield Request("POST", topic_path(topic, suffix))).json()

    @admin_op
    def delete(self, topic: str, *, force: bool = False) -> Steps[None]:
        """Deletes the topic (every partition); ``force`` closes its producers and consumers
        first, else it must have none."""
        suffix = "/partitions" if (yield from _count(topic)) else ""
        yield Request("DELETE", topic_path(topic, suffix), query={"force": force})

    # Topic-level policies: the broker keeps them in a system topic and applies them a moment
    # after the call returns (a read straight after a set may still show the old value).

    @admin_op
    def set_retention(self, topic: str, *, size_mb: int, time_minutes: int) -> Steps[None]:
        """The topic's own retention, over its namespace's (-1: no limit)."""
        body = {"retentionSizeInMB": int(size_mb), "retentionTimeInMinutes": int(time_minutes)}
        yield Request("POST", topic_path(topic, "/retention"), body)

    @admin_op
    def retention(self, topic: str) -> Steps[Retention | None]:
        """The topic's own retention, None when it has none."""
        return retention_of((yield Request("GET", topic_path(topic, "/retention"))).json())

    @admin_op
    def remove_retention(self, topic: str) -> Steps[None]:
        yield Request("DELETE", topic_path(topic, "/retention"))

    @admin_op
    def set_message_ttl(self, topic: str, seconds: int) -> Steps[None]:
        """The topic's own message TTL, over its namespace's."""
        yield Request("POST", topic_path(topic, "/messageTTL"), query={"messageTTL": int(seconds)})

    @admin_op
    def message_ttl(self, topic: str) -> Steps[int | None]:
        """The topic's own TTL in seconds, None when it has none."""
        return cast("int | None", (yield Request("GET", topic_path(topic, "/messageTTL"))).json())

    @admin_op
    def remove_message_ttl(self, topic: str) -> Steps[None]:
        yield Request("DELETE", topic_path(topic, "/messageTTL"))

    # Subscriptions

    @admin_op
    def subscriptions(self, topic: str) -> Steps[builtins.list[str]]:
        """The topic's subscription names."""
        return list((yield Request("GET", topic_path(topic, "/subscriptions"))).json())

    @admin_op
    def create_subscription(self, topic: str, subscription: str, *, start: MessageId = MessageId.latest) -> Steps[None]:
        """Creates a durable subscription positioned at ``start`` (``MessageId.earliest``,
        ``MessageId.latest`` or an id)."""
        yield Request("PUT", _sub(topic, subscription), _position(start))

    @admin_op
    def reset_cursor(self, topic: str, subscription: str, *, to: MessageId | datetime.datetime) -> Steps[None]:
        """Moves the subscription to a message id, or to the first message published at or
        after a time (an aware ``datetime``; a naive one is local time)."""
        if isinstance(to, datetime.datetime):
            millis = int(to.timestamp() * 1000)
            yield Request("POST", _sub(topic, subscription, f"/resetcursor/{millis}"))
        else:
            yield Request("POST", _sub(topic, subscription, "/resetcursor"), _position(to))

    @admin_op
    def skip(self, topic: str, subscription: str, count: int) -> Steps[None]:
        """Acknowledges the next ``count`` messages of the subscription."""
        yield Request("POST", _sub(topic, subscription, f"/skip/{int(count)}"))

    @admin_op
    def skip_all(self, topic: str, subscription: str) -> Steps[None]:
        """Acknowledges every message of the subscription's backlog."""
        yield Request("POST", _sub(topic, subscription, "/skip_all"))

    @admin_op
    def expire(self, topic: str, subscription: str | None, seconds: int) -> Steps[None]:
        """Acknowledges the messages older than ``seconds`` on ``subscription`` (None: on
        every subscription). ``seconds`` must be positive: the broker reads 0 as "never", as it
        reads a TTL of 0."""
        if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds <= 0:
            raise InvalidConfiguration(f"seconds must be a positive int, not {seconds!r}")
        if subscription is None:
            path = topic_path(topic, f"/all_subscription/expireMessages/{int(seconds)}")
        else:
            path = _sub(topic, subscription, f"/expireMessages/{int(seconds)}")
        yield Request("POST", path)

    @admin_op
    def delete_subscription(self, topic: str, subscription: str, *, force: bool = False) -> Steps[None]:
        """Deletes the subscription; ``force`` disconnects its consumers first."""
        yield Request("DELETE", _sub(topic, subscription), query={"force": force})

    @admin_op
    def backlog(self, topic: str, subscription: str) -> Steps[int]:
        """Messages of the subscription not yet acknowledged (its ``msgBacklog``)."""
        stats = yield from _stats(topic)
        subs = stats.get("subscriptions", {})
        if subscription not in subs:
            raise InvalidConfiguration(f"{topic} has no subscription {subscription!r}")
        return int(subs[subscription].get("msgBacklog", 0))

    @admin_op
    def peek(self, topic: str, subscription: str, count: int = 1) -> Steps[builtins.list[PeekedMessage]]:
        """The next ``count`` entries of the subscription's backlog, left unconsumed (a batch is
        one entry: its payload holds the batch). Fewer when the backlog is shorter."""
        if (yield from _count(topic)):
            raise InvalidConfiguration("peek reads one partition: name it (topic-partition-N)")
        out: builtins.list[PeekedMessage] = []
        for n in range(1, int(count) + 1):
            answer = yield Request("GET", _sub(topic, subscription, f"/position/{n}"), accept=(404,))
            if answer.status == 404:
                break
            out.append(_peeked(answer))
        return out

    @admin_op
    def examine(self, topic: str, *, initial_position: str = "latest", position: int = 1) -> Steps[PeekedMessage]:
        """The message ``position`` entries after the earliest (``initial_position="earliest"``)
        or before the latest, whatever the subscriptions."""
        if initial_position not in ("earliest", "latest"):
            raise InvalidConfiguration(f"initial_position must be 'earliest' or 'latest', not {initial_position!r}")
        query = {"initialPosition": initial_position, "messagePosition": int(position)}
        return _peeked((yield Request("GET", topic_path(topic, "/examinemessage"), query=query)))

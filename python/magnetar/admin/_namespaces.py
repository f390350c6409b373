"""Namespaces and the policies users set most, named as ``pulsar-admin namespaces`` names
them. A policy never set answers None (the broker's default applies)."""

from __future__ import annotations

import builtins
from typing import Any, Literal, cast

from ..exceptions import InvalidConfiguration
from ._call import Request, Steps, _Resource, admin_op, namespace_path, segment
from ._types import AutoTopicCreation, BacklogQuota, DispatchRate, PublishRate, Retention, retention_of

__all__ = ["Namespaces"]

_BACKLOG_POLICIES = ("producer_request_hold", "producer_exception", "consumer_backlog_eviction")
_COMPATIBILITY = (
    "UNDEFINED", "ALWAYS_INCOMPATIBLE", "ALWAYS_COMPATIBLE", "BACKWARD", "FORWARD", "FULL",
    "BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE",
)


def _path(namespace: str, policy: str = "") -> str:
    return f"/admin/v2/namespaces/{namespace_path(namespace)}{'/' + policy if policy else ''}"


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidConfiguration(f"{what} must be an int, not {value!r}")
    return value


class Namespaces(_Resource):
    """``admin.namespaces``: namespaces (``tenant/namespace``) and their policies."""

    @admin_op
    def list(self, tenant: str) -> Steps[builtins.list[str]]:
        """The tenant's namespaces, as ``tenant/namespace``."""
        return list((yield Request("GET", f"/admin/v2/namespaces/{segment(tenant, 'tenant')}")).json())

    @admin_op
    def create(self, namespace: str, *, bundles: int | None = None) -> Steps[None]:
        """Creates a namespace (with ``bundles`` bundles, else the broker's default);
        :class:`Conflict` if it exists."""
        body = None if bundles is None else {"bundles": {"numBundles": _int(bundles, "bundles")}}
        yield Request("PUT", _path(namespace), body)

    @admin_op
    def delete(self, namespace: str, *, force: bool = False) -> Steps[None]:
        """Deletes a namespace: it must have no topics unless ``force``."""
        yield Request("DELETE", _path(namespace), query={"force": force})

    @admin_op
    def policies(self, namespace: str) -> Steps[dict[str, Any]]:
        """Every policy of the namespace, as the broker's ``Policies`` object."""
        return dict((yield Request("GET", _path(namespace))).json())

    @admin_op
    def topics(self, namespace: str) -> Steps[builtins.list[str]]:
        """Every topic of the namespace, persistent and not, partitions listed one by one."""
        return list((yield Request("GET", _path(namespace, "topics"), query={"mode": "ALL"})).json())

    # Retention

    @admin_op
    def set_retention(self, namespace: str, *, size_mb: int, time_minutes: int) -> Steps[None]:
        """Keeps acknowledged messages up to ``size_mb`` and ``time_minutes`` (-1: no limit)."""
        body = {"retentionSizeInMB": _int(size_mb, "size_mb"), "retentionTimeInMinutes": _int(time_minutes, "time_minutes")}
        yield Request("POST", _path(namespace, "retention"), body)

    @admin_op
    def retention(self, namespace: str) -> Steps[Retention | None]:
        """The retention set, None when none is."""
        return retention_of((yield Request("GET", _path(namespace, "retention"))).json())

    @admin_op
    def remove_retention(self, namespace: str) -> Steps[None]:
        yield Request("DELETE", _path(namespace, "retention"))

    # Simple valued policies: one number or flag each

    @admin_op
    def set_message_ttl(self, namespace: str, seconds: int) -> Steps[None]:
        """Messages older than ``seconds`` are acknowledged for every subscription (expired)."""
        yield Request("POST", _path(namespace, "messageTTL"), _int(seconds, "seconds"))

    @admin_op
    def message_ttl(self, namespace: str) -> Steps[int | None]:
        """The TTL in seconds, None when unset."""
        return cast("int | None", (yield Request("GET", _path(namespace, "messageTTL"))).json())

    @admin_op
    def remove_message_ttl(self, namespace: str) -> Steps[None]:
        yield Request("DELETE", _path(namespace, "messageTTL"))

    @admin_op
    def set_deduplication(self, namespace: str, enabled: bool) -> Steps[None]:
        """Turns message deduplication on or off (producers' sequence ids)."""
        yield Request("POST", _path(namespace, "deduplication"), bool(enabled))

    @admin_op
    def deduplication(self, namespace: str) -> Steps[bool | None]:
        """Whether deduplication is on, None when the broker's default applies."""
        return cast("bool | None", (yield Request("GET", _path(namespace, "deduplication"))).json())

    @admin_op
    def remove_deduplication(self, namespace: str) -> Steps[None]:
        yield Request("DELETE", _path(namespace, "deduplication"))

    @admin_op
    def set_subscription_expiration(self, namespace: str, minutes: int) -> Steps[None]:
        """Subscriptions inactive for ``minutes`` are deleted."""
        yield Request("POST", _path(namespace, "subscriptionExpirationTime"), _int(minutes, "minutes"))

    @admin_op
    def subscription_expiration(self, namespace: str) -> Steps[int | None]:
        """Minutes of inactivity after which a subscription is deleted, None when unset."""
        return cast("int | None", (yield Request("GET", _path(namespace, "subscriptionExpirationTime"))).json())

    @admin_op
    def remove_subscription_expiration(self, namespace: str) -> Steps[None]:
        yield Request("DELETE", _path(namespace, "subscriptionExpirationTime"))

    # Structured policies

    @admin_op
    def set_backlog_quota(
        self,
        namespace: str,
        *,
        limit_size: int = -1,
        limit_time: int = -1,
        policy: Literal["producer_request_hold", "producer_exception", "consumer_backlog_eviction"] = "producer_request_hold",
        kind: Literal["destination_storage", "message_age"] = "destination_storage",
    ) -> Steps[None]:
        """Limits the backlog to ``limit_size`` bytes (``destination_storage``) or to messages
        ``limit_time`` seconds old (``message_age``); ``policy`` applies beyond it."""
        if policy not in _BACKLOG_POLICIES:
            raise InvalidConfiguration(f"policy must be one of {_BACKLOG_POLICIES}, not {policy!r}")
        body = {"limitSize": _int(limit_size, "limit_size"), "limitTime": _int(limit_time, "limit_time"), "policy": policy}
        yield Request("POST", _path(namespace, "backlogQuota"), body, query={"backlogQuotaType": kind})

    @admin_op
    def backlog_quotas(self, namespace: str) -> Steps[dict[str, BacklogQuota]]:
        """The backlog quotas set, by kind (``destination_storage``, ``message_age``)."""
        return dict((yield Request("GET", _path(namespace, "backlogQuotaMap"))).json() or {})

    @admin_op
    def remove_backlog_quota(
        self, namespace: str, kind: Literal["destination_storage", "message_age"] = "destination_storage"
    ) -> Steps[None]:
        yield Request("DELETE", _path(namespace, "backlogQuota"), query={"backlogQuotaType": kind})

    @admin_op
    def set_auto_topic_creation(
        self, namespace: str, *, allow: bool, partitions: int | None = None
    ) -> Steps[None]:
        """Whether producing to or subscribing to a missing topic creates it; ``partitions``
        makes them partitioned topics of that many partitions."""
        body: dict[str, Any] = {"allowAutoTopicCreation": bool(allow), "topicType": "non-partitioned"}
        if partitions is not None:
            body.update(topicType="partitioned", defaultNumPartitions=_int(partitions, "partitions"))
        yield Request("POST", _path(namespace, "autoTopicCreation"), body)

    @admin_op
    def auto_topic_creation(self, namespace: str) -> Steps[AutoTopicCreation | None]:
        got = (yield Request("GET", _path(namespace, "autoTopicCreation"))).json()
        return cast("AutoTopicCreation | None", got or None)

    @admin_op
    def remove_auto_topic_creation(self, namespace: str) -> Steps[None]:
        yield Request("DELETE", _path(namespace, "autoTopicCreation"))

    @admin_op
    def set_dispatch_rate(
        self, namespace: str, *, messages: int = -1, bytes: int = -1, period_seconds: int = 1
    ) -> Steps[None]:
        """Dispatches at most ``messages`` and ``bytes`` (-1: no limit) per period to each
        topic's subscriptions."""
        body = {
            "dispatchThrottlingRateInMsg": _int(messages, "messages"),
            "dispatchThrottlingRateInByte": _int(bytes, "bytes"),
            "ratePeriodInSecond": _int(period_seconds, "period_seconds"),
            "relativeToPublishRate": False,
        }
        yield Request("POST", _path(namespace, "dispatchRate"), body)

    @admin_op
    def dispatch_rate(self, namespace: str) -> Steps[DispatchRate | None]:
        return cast("DispatchRate | None", (yield Request("GET", _path(namespace, "dispatchRate"))).json() or None)

    @admin_op
    def remove_dispatch_rate(self, namespace: str) -> Steps[None]:
        yield Request("DELETE", _path(namespace, "dispatchRate"))

    @admin_op
    def set_publish_rate(self, namespace: str, *, messages: int = -1, bytes: int = -1) -> Steps[None]:
        """Each producer publishes at most ``messages`` and ``bytes`` (-1: no limit) a second."""
        body = {"publishThrottlingRateInMsg": _int(messages, "messages"), "publishThrottlingRateInByte": _int(bytes, "bytes")}
        yield Request("POST", _path(namespace, "publishRate"), body)

    @admin_op
    def publish_rate(self, namespace: str) -> Steps[PublishRate | None]:
        return cast("PublishRate | None", (yield Request("GET", _path(namespace, "publishRate"))).json() or None)

    @admin_op
    def remove_publish_rate(self, namespace: str) -> Steps[None]:
        yield Request("DELETE", _path(namespace, "publishRate"))

    @admin_op
    def set_schema_compatibility(self, namespace: str, strategy: str) -> Steps[None]:
        """How a new schema version must relate to the registered ones (``BACKWARD``,
        ``FORWARD``, ``FULL``, their ``_TRANSITIVE`` forms, ``ALWAYS_COMPATIBLE``, ...)."""
        if strategy not in _COMPATIBILITY:
            raise InvalidConfiguration(f"strategy must be one of {_COMPATIBILITY}, not {strategy!r}")
        yield Request("PUT", _path(namespace, "schemaCompatibilityStrategy"), strategy)

    @admin_op
    def schema_compatibility(self, namespace: str) -> Steps[str | None]:
        """The strategy set, None when the broker's default applies."""
        got = (yield Request("GET", _path(namespace, "schemaCompatibilityStrategy"))).json()
        return None if got in (None, "UNDEFINED") else str(got)

    # Bundles

    @admin_op
    def bundles(self, namespace: str) -> Steps[builtins.list[str]]:
        """The namespace's bundles, as ``0x00000000_0x40000000`` ranges."""
        got = (yield Request("GET", _path(namespace, "bundles"))).json()
        boundaries = got["boundaries"]
        return [f"{a}_{b}" for a, b in zip(boundaries, boundaries[1:])]

    @admin_op
    def unload(self, namespace: str, bundle: str | None = None) -> Steps[None]:
        """Unloads the namespace (or one bundle): its topics move to a broker the load
        manager picks; clients reconnect."""
        suffix = "unload" if bundle is None else f"{segment(bundle, 'bundle')}/unload"
        yield Request("PUT", _path(namespace, suffix))

    @admin_op
    def split_bundle(self, namespace: str, bundle: str, *, unload: bool = False) -> Steps[None]:
        """Splits ``bundle`` in two (the broker's default algorithm), unloading the halves if
        ``unload``."""
        yield Request("PUT", _path(namespace, f"{segment(bundle, 'bundle')}/split"), query={"unload": unload})

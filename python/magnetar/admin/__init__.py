"""Administering a Pulsar cluster from Python: the admin REST API as :class:`Admin` (blocking)
and :class:`AsyncAdmin` (asyncio), with the authentication and TLS options of
:class:`magnetar.Client`. See docs/admin.md.

::

    with Admin("http://127.0.0.1:8080") as admin:
        admin.topics.create("persistent://public/default/orders", partitions=4)
        admin.topics.stats("persistent://public/default/orders")["msgRateIn"]

Every call raises an :class:`AdminError` subclass when the broker refuses it (:class:`NotFound`,
:class:`Conflict`, :class:`NotAuthorized`, :class:`PreconditionFailed`, ...), with the broker's
reason; a call sent to a broker that does not own the topic follows its redirect to the owner,
and a call the broker answers 503 is retried with backoff.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

from ._call import AsyncCore, SyncCore
from ._cluster import Brokers, Clusters, Schemas, Tenants
from ._errors import (
    AdminError,
    BadRequest,
    Conflict,
    NotAuthorized,
    NotFound,
    PreconditionFailed,
    ServiceUnavailable,
)
from ._namespaces import Namespaces
from ._topics import Topics
from ._types import (
    AutoTopicCreation,
    BacklogQuota,
    ClusterData,
    DispatchRate,
    InternalStats,
    LeaderBroker,
    PeekedMessage,
    PublishRate,
    Retention,
    SchemaEntry,
    SubscriptionStats,
    TenantInfo,
    TopicLookup,
    TopicStats,
)

if TYPE_CHECKING:
    from typing import Unpack

    from .._options import ConnectionOptions

__all__ = [
    "Admin",
    "AdminError",
    "AsyncAdmin",
    "AutoTopicCreation",
    "BacklogQuota",
    "BadRequest",
    "Brokers",
    "ClusterData",
    "Clusters",
    "Conflict",
    "DispatchRate",
    "InternalStats",
    "LeaderBroker",
    "Namespaces",
    "NotAuthorized",
    "NotFound",
    "PeekedMessage",
    "PreconditionFailed",
    "PublishRate",
    "Retention",
    "SchemaEntry",
    "Schemas",
    "ServiceUnavailable",
    "SubscriptionStats",
    "TenantInfo",
    "Tenants",
    "TopicLookup",
    "TopicStats",
    "Topics",
]


def _resources(core: SyncCore | AsyncCore) -> tuple[Clusters, Tenants, Namespaces, Topics, Schemas, Brokers]:
    """The resources of an admin handle: the same calls, run by its core."""
    return Clusters(core), Tenants(core), Namespaces(core), Topics(core), Schemas(core), Brokers(core)


class Admin(SyncCore):
    """The admin REST API of the broker at ``service_url`` (``http://host:8080`` or
    ``https://host:8443``), taking :class:`magnetar.Client`'s options (``authentication``,
    ``tls_trust_certs_file_path``, ``tls_certificate_file_path``, ``operation_timeout``, ...).
    Each call blocks until the broker answers, the GIL released meanwhile."""

    def __init__(self, service_url: str, **options: Unpack[ConnectionOptions]) -> None:
        super().__init__(service_url, **options)
        self.clusters, self.tenants, self.namespaces, self.topics, self.schemas, self.brokers = _resources(self)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncAdmin(AsyncCore):
    """:class:`Admin` for asyncio: the same resources and calls, each a coroutine; nothing
    blocks the event loop (the engine completes an asyncio future)."""

    # The resources are Admin's, whose calls return coroutines here: typed as Any so that a
    # checker does not take `await admin.topics.stats(t)` for awaiting a dict.
    clusters: Any
    tenants: Any
    namespaces: Any
    topics: Any
    schemas: Any
    brokers: Any

    def __init__(self, service_url: str, **options: Unpack[ConnectionOptions]) -> None:
        super().__init__(service_url, **options)
        self.clusters, self.tenants, self.namespaces, self.topics, self.schemas, self.brokers = _resources(self)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

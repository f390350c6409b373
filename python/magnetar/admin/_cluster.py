"""Clusters, tenants, brokers and the schema registry."""

from __future__ import annotations

import builtins
import base64
from typing import Any, cast

from ..exceptions import InvalidConfiguration
from ..schema import Schema
from ..schema._schemas import SchemaType
from ._call import Request, Steps, _Resource, admin_op, segment, topic_name
from ._types import ClusterData, LeaderBroker, SchemaEntry, TenantInfo

__all__ = ["Brokers", "Clusters", "Schemas", "Tenants"]


class Clusters(_Resource):
    """``admin.clusters``: the clusters of the instance."""

    @admin_op
    def list(self) -> Steps[builtins.list[str]]:
        """Names of the clusters."""
        return list((yield Request("GET", "/admin/v2/clusters")).json())

    @admin_op
    def get(self, cluster: str) -> Steps[ClusterData]:
        """A cluster's service URLs."""
        return cast(ClusterData, (yield Request("GET", f"/admin/v2/clusters/{segment(cluster, 'cluster')}")).json())


class Tenants(_Resource):
    """``admin.tenants``: tenants, the clusters they may use and their admin roles."""

    @admin_op
    def list(self) -> Steps[builtins.list[str]]:
        """Names of the tenants."""
        return list((yield Request("GET", "/admin/v2/tenants")).json())

    @admin_op
    def get(self, tenant: str) -> Steps[TenantInfo]:
        """A tenant's ``adminRoles`` and ``allowedClusters``."""
        return cast(TenantInfo, (yield Request("GET", f"/admin/v2/tenants/{segment(tenant, 'tenant')}")).json())

    @admin_op
    def create(self, tenant: str, *, allowed_clusters: builtins.list[str], admin_roles: builtins.list[str] | None = None) -> Steps[None]:
        """Creates a tenant that may use ``allowed_clusters``; :class:`Conflict` if it exists."""
        body = {"adminRoles": list(admin_roles or []), "allowedClusters": list(allowed_clusters)}
        yield Request("PUT", f"/admin/v2/tenants/{segment(tenant, 'tenant')}", body)

    @admin_op
    def update(self, tenant: str, *, allowed_clusters: builtins.list[str], admin_roles: builtins.list[str] | None = None) -> Steps[None]:
        """Replaces a tenant's allowed clusters and admin roles."""
        body = {"adminRoles": list(admin_roles or []), "allowedClusters": list(allowed_clusters)}
        yield Request("POST", f"/admin/v2/tenants/{segment(tenant, 'tenant')}", body)

    @admin_op
    def delete(self, tenant: str, *, force: bool = False) -> Steps[None]:
        """Deletes a tenant: it must have no namespaces unless ``force``."""
        yield Request("DELETE", f"/admin/v2/tenants/{segment(tenant, 'tenant')}", query={"force": force})


class Brokers(_Resource):
    """``admin.brokers``: the active brokers, the leader, a health check."""

    @admin_op
    def list(self, cluster: str) -> Steps[builtins.list[str]]:
        """``host:port`` (web service) of the active brokers of ``cluster``."""
        return list((yield Request("GET", f"/admin/v2/brokers/{segment(cluster, 'cluster')}")).json())

    @admin_op
    def leader(self) -> Steps[LeaderBroker]:
        """The broker that runs the load manager."""
        return cast(LeaderBroker, (yield Request("GET", "/admin/v2/brokers/leaderBroker")).json())

    @admin_op
    def health_check(self) -> Steps[None]:
        """Returns when the broker answering can write and read a message on its health-check
        topic; raises :class:`AdminError` otherwise."""
        yield Request("GET", "/admin/v2/brokers/health", query={"topicVersion": "V2"})


def _schema_path(topic: str, suffix: str = "/schema") -> str:
    # The registry is per topic name without its domain: /admin/v2/schemas/{tenant}/{ns}/{topic}.
    _, tenant, ns, name = topic_name(topic)
    return f"/admin/v2/schemas/{segment(tenant, 'tenant')}/{segment(ns, 'namespace')}/{segment(name, 'topic')}{suffix}"


_SCHEMA_TYPES = {SchemaType.JSON, SchemaType.AVRO, SchemaType.PROTOBUF, SchemaType.PROTOBUF_NATIVE}


class Schemas(_Resource):
    """``admin.schemas``: a topic's schema in the registry."""

    @admin_op
    def get(self, topic: str, version: int | None = None) -> Steps[SchemaEntry | None]:
        """The topic's latest schema (or ``version``), None when it has none."""
        suffix = "/schema" if version is None else f"/schema/{int(version)}"
        answer = yield Request("GET", _schema_path(topic, suffix), accept=(404,))
        return None if answer.status == 404 else cast(SchemaEntry, answer.json())

    @admin_op
    def upload(self, topic: str, schema: Schema[Any]) -> Steps[int]:
        """Registers ``schema`` (a :mod:`magnetar.schema` object) for the topic, as a producer
        would; returns its version. :class:`Conflict` when it is incompatible with the
        topic's compatibility strategy."""
        if not isinstance(schema, Schema):
            raise InvalidConfiguration(f"schema must be a magnetar.schema object, not {schema!r}")
        info = schema.info()
        kind = SchemaType(info.type)
        # The REST API carries the definition as text: structured schemas' JSON, primitive
        # schemas' (empty) definition; the registry stores KEY_VALUE's binary one in base64.
        if kind in _SCHEMA_TYPES or not info.definition:
            data = info.definition.decode()
        else:
            data = base64.b64encode(info.definition).decode()
        body = {"type": kind.name, "schema": data, "properties": dict(info.properties)}
        answer = yield Request("POST", _schema_path(topic), body)
        got = answer.json() or {}
        version = got.get("version", {})
        return int(version.get("version", -1) if isinstance(version, dict) else version)

    @admin_op
    def delete(self, topic: str) -> Steps[None]:
        """Deletes the topic's schemas."""
        yield Request("DELETE", _schema_path(topic))

"""``magnetar.admin`` against the real broker: every call, through :class:`Admin` and through
:class:`AsyncAdmin` (the ``admin`` fixture runs each test with both)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import magnetar
from magnetar import schema
from magnetar.admin import Admin, AdminError, AsyncAdmin, Conflict, NotFound, PreconditionFailed
from magnetar.testing import Standalone

from waiting import wait_until


class Twin:
    """An :class:`Admin` or an :class:`AsyncAdmin` run on a private event loop, so a test states
    each call once: ``twin.topics.stats(t)`` returns the result either way."""

    def __init__(self, kind: str, url: str, **options: Any) -> None:
        self.kind = kind
        self.loop = asyncio.new_event_loop() if kind == "async" else None
        self.admin: Any = AsyncAdmin(url, **options) if kind == "async" else Admin(url, **options)

    def run(self, result: Any) -> Any:
        if self.loop is not None:
            assert asyncio.iscoroutine(result), result
            return self.loop.run_until_complete(result)
        return result

    def __getattr__(self, resource: str) -> Any:
        return _Resource(self, getattr(self.admin, resource))

    def close(self) -> None:
        self.run(self.admin.close())
        if self.loop is not None:
            self.loop.close()


class _Resource:
    def __init__(self, twin: Twin, resource: Any) -> None:
        self._twin, self._resource = twin, resource

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._resource, name)
        return lambda *args, **kwargs: self._twin.run(method(*args, **kwargs))


@pytest.fixture(params=["sync", "async"])
def admin(request: Any, broker: Standalone) -> Iterator[Twin]:
    twin = Twin(request.param, broker.admin_url)
    yield twin
    twin.close()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def namespace(broker: Standalone) -> Iterator[str]:
    ns = f"public/{unique('admin')}"
    with Admin(broker.admin_url) as a:
        a.namespaces.create(ns)
        yield ns
        a.namespaces.delete(ns, force=True)


def produce(broker: Standalone, topic: str, n: int, subscription: str | None = None) -> list[magnetar.MessageId]:
    with magnetar.Client(broker.service_url) as client:
        if subscription:
            client.subscribe(topic, subscription, initial_position="earliest").close()
        with client.create_producer(topic, batching=False) as producer:
            return [producer.send(f"m{i}".encode(), properties={"i": str(i)}) for i in range(n)]


def test_clusters_tenants_and_namespaces(admin: Twin) -> None:
    assert "standalone" in admin.clusters.list()
    assert admin.clusters.get("standalone")["serviceUrl"].startswith("http://")
    tenant = unique("acme")
    admin.tenants.create(tenant, allowed_clusters=["standalone"])
    with pytest.raises(Conflict) as info:
        admin.tenants.create(tenant, allowed_clusters=["standalone"])
    assert isinstance(info.value, magnetar.PulsarError) and info.value.status == 409 and info.value.reason
    assert tenant in admin.tenants.list()
    admin.tenants.update(tenant, allowed_clusters=["standalone"], admin_roles=["ops"])
    assert admin.tenants.get(tenant) == {"adminRoles": ["ops"], "allowedClusters": ["standalone"]}
    ns = f"{tenant}/orders"
    admin.namespaces.create(ns, bundles=2)
    assert admin.namespaces.list(tenant) == [ns]
    assert admin.namespaces.policies(ns)["bundles"]["numBundles"] == 2
    admin.namespaces.set_retention(ns, size_mb=1024, time_minutes=60 * 24)
    assert admin.namespaces.retention(ns) == {"size_mb": 1024, "time_minutes": 60 * 24}
    admin.topics.create(f"persistent://{ns}/in")
    assert admin.namespaces.topics(ns) == [f"persistent://{ns}/in"]
    with pytest.raises(Conflict, match="active namespaces"):
        admin.tenants.delete(tenant)
    admin.namespaces.delete(ns, force=True)
    admin.tenants.delete(tenant)
    with pytest.raises(NotFound, match="does not exist"):
        admin.tenants.get(tenant)


def test_namespace_policies_set_read_and_removed(admin: Twin, namespace: str) -> None:
    ns = admin.namespaces
    ns.set_message_ttl(namespace, 3600)
    ns.set_deduplication(namespace, True)
    ns.set_subscription_expiration(namespace, 90)
    ns.set_backlog_quota(namespace, limit_size=10 << 20, policy="producer_exception")
    ns.set_auto_topic_creation(namespace, allow=True, partitions=3)
    ns.set_dispatch_rate(namespace, messages=100, bytes=1 << 20)
    ns.set_publish_rate(namespace, messages=50, bytes=1 << 19)
    ns.set_schema_compatibility(namespace, "FORWARD")
    assert ns.message_ttl(namespace) == 3600
    assert ns.deduplication(namespace) is True
    assert ns.subscription_expiration(namespace) == 90
    assert ns.backlog_quotas(namespace)["destination_storage"]["limitSize"] == 10 << 20
    assert ns.backlog_quotas(namespace)["destination_storage"]["policy"] == "producer_exception"
    assert ns.auto_topic_creation(namespace) == {
        "allowAutoTopicCreation": True, "topicType": "partitioned", "defaultNumPartitions": 3}
    assert ns.dispatch_rate(namespace)["dispatchThrottlingRateInMsg"] == 100
    assert ns.publish_rate(namespace) == {"publishThrottlingRateInMsg": 50, "publishThrottlingRateInByte": 1 << 19}
    assert ns.schema_compatibility(namespace) == "FORWARD"
    for policy in ("message_ttl", "deduplication", "subscription_expiration", "auto_topic_creation",
                   "dispatch_rate", "publish_rate", "retention"):
        getattr(ns, f"remove_{policy}")(namespace)
        assert getattr(ns, policy)(namespace) is None, policy
    ns.remove_backlog_quota(namespace)
    assert ns.backlog_quotas(namespace) == {}
    with pytest.raises(magnetar.InvalidConfiguration):
        ns.set_schema_compatibility(namespace, "SIDEWAYS")


def test_topics_created_listed_and_deleted(admin: Twin, namespace: str) -> None:
    plain, parted = f"persistent://{namespace}/plain", f"persistent://{namespace}/parted"
    admin.topics.create(plain)
    admin.topics.create(parted, partitions=4)
    assert admin.topics.partitions(parted) == 4 and admin.topics.partitions(plain) == 0
    admin.topics.update_partitions(parted, 5)
    assert admin.topics.list_partitioned(namespace) == [parted]
    listed = admin.topics.list(namespace)
    assert plain in listed and f"{parted}-partition-4" in listed
    with pytest.raises(Conflict):
        admin.topics.create(plain)
    with pytest.raises(PreconditionFailed):
        admin.topics.create(f"persistent://{namespace}/x-partition-1", partitions=2)
    with pytest.raises(AdminError, match="can't be less than the current partitions") as info:
        admin.topics.update_partitions(parted, 2)
    assert info.value.status == 422
    assert admin.topics.stats(parted)["metadata"]["partitions"] == 5
    assert admin.topics.lookup(plain)["brokerUrl"].startswith("pulsar://")
    admin.topics.delete(parted)
    admin.topics.delete(plain)
    assert admin.topics.list(namespace) == []
    with pytest.raises(NotFound):
        admin.topics.stats(plain)


def test_subscriptions_backlog_peek_and_cursor(admin: Twin, broker: Standalone, namespace: str) -> None:
    topic = f"persistent://{namespace}/{unique('t')}"
    ids = produce(broker, topic, 5, subscription="live")
    admin.topics.create_subscription(topic, "from-start", start=magnetar.MessageId.earliest)
    admin.topics.create_subscription(topic, "from-end")
    assert sorted(admin.topics.subscriptions(topic)) == ["from-end", "from-start", "live"]
    assert admin.topics.backlog(topic, "from-start") == 5 and admin.topics.backlog(topic, "from-end") == 0
    stats = admin.topics.stats(topic)
    assert stats["msgInCounter"] == 5 and stats["subscriptions"]["live"]["msgBacklog"] == 5
    assert admin.topics.internal_stats(topic)["entriesAddedCounter"] == 5
    peeked = admin.topics.peek(topic, "from-start", 2)
    assert [p.payload for p in peeked] == [b"m0", b"m1"] and peeked[0].properties == {"i": "0"}
    assert peeked[0].message_id == f"{ids[0].ledger_id}:{ids[0].entry_id}"
    assert admin.topics.peek(topic, "from-end", 3) == []
    assert admin.topics.examine(topic, initial_position="earliest", position=2).payload == b"m1"
    admin.topics.skip(topic, "from-start", 2)
    assert admin.topics.backlog(topic, "from-start") == 3
    admin.topics.reset_cursor(topic, "from-start", to=ids[1])
    assert admin.topics.peek(topic, "from-start")[0].payload == b"m1"
    admin.topics.reset_cursor(topic, "from-end", to=datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc))
    assert admin.topics.backlog(topic, "from-end") == 5
    admin.topics.skip_all(topic, "from-start")
    assert admin.topics.backlog(topic, "from-start") == 0
    admin.topics.reset_cursor(topic, "from-start", to=magnetar.MessageId.earliest)
    assert admin.topics.backlog(topic, "from-start") == 5

    def expired(subscription: str | None, watched: list[str]) -> bool:
        # Messages more than a second old expire (0 would mean never, as a TTL of 0 does); the
        # broker refuses (409) while an expiry it started is still running.
        with contextlib.suppress(Conflict):
            admin.topics.expire(topic, subscription, 1)
        return all(admin.topics.backlog(topic, s) == 0 for s in watched)

    assert wait_until(lambda: expired("live", ["live"]), 30, period=0.5)
    assert admin.topics.backlog(topic, "from-end") == 5
    admin.topics.reset_cursor(topic, "live", to=magnetar.MessageId.earliest)
    assert wait_until(lambda: expired(None, ["live", "from-start", "from-end"]), 30, period=0.5)
    admin.topics.delete_subscription(topic, "from-end")
    assert "from-end" not in admin.topics.subscriptions(topic)
    with pytest.raises(NotFound):
        admin.topics.delete_subscription(topic, "from-end")


def test_unload_compact_and_terminate(admin: Twin, broker: Standalone, namespace: str) -> None:
    topic = f"persistent://{namespace}/{unique('t')}"
    produce(broker, topic, 3)
    admin.topics.unload(topic)
    admin.topics.compact(topic)
    assert wait_until(lambda: admin.topics.compaction_status(topic)["status"] == "SUCCESS", 60)
    last = admin.topics.terminate(topic)
    assert {"ledgerId", "entryId"} <= set(last), last
    with magnetar.Client(broker.service_url) as client:
        with pytest.raises(magnetar.TopicTerminated):
            client.create_producer(topic).send(b"late")
    admin.topics.delete(topic, force=True)


def test_topic_level_policies(admin: Twin, namespace: str) -> None:
    topic = f"persistent://{namespace}/{unique('p')}"
    admin.topics.create(topic)
    assert admin.topics.retention(topic) is None and admin.topics.message_ttl(topic) is None
    admin.topics.set_retention(topic, size_mb=64, time_minutes=30)
    admin.topics.set_message_ttl(topic, 120)
    # The broker applies topic policies from its system topic, a moment after the call.
    assert wait_until(lambda: admin.topics.retention(topic) == {"size_mb": 64, "time_minutes": 30}, 30)
    assert wait_until(lambda: admin.topics.message_ttl(topic) == 120, 30)
    admin.topics.remove_retention(topic)
    admin.topics.remove_message_ttl(topic)
    assert wait_until(lambda: admin.topics.retention(topic) is None and admin.topics.message_ttl(topic) is None, 30)


@dataclass
class Order:
    id: int
    item: str


def test_schemas_uploaded_read_and_deleted(admin: Twin, broker: Standalone, namespace: str) -> None:
    topic = f"persistent://{namespace}/{unique('s')}"
    admin.topics.create(topic)
    assert admin.schemas.get(topic) is None
    assert admin.schemas.upload(topic, schema.AvroSchema(Order)) == 0
    got = admin.schemas.get(topic)
    assert got["type"] == "AVRO" and got["version"] == 0 and '"item"' in got["data"]
    with magnetar.Client(broker.service_url) as client:
        registered = client.get_schema(topic)
        assert registered is not None and registered.definition_json["name"] == "Order"
    admin.namespaces.set_schema_compatibility(namespace, "ALWAYS_INCOMPATIBLE")
    with pytest.raises(Conflict):
        admin.schemas.upload(topic, schema.JsonSchema(Order))
    admin.schemas.delete(topic)
    assert admin.schemas.get(topic) is None


def test_brokers_and_bundles(admin: Twin, broker: Standalone, namespace: str) -> None:
    brokers = admin.brokers.list("standalone")
    assert brokers == [f"127.0.0.1:{broker.http_port}"] or len(brokers) == 1, brokers
    assert admin.brokers.leader()["serviceUrl"].endswith(str(broker.http_port))
    admin.brokers.health_check()
    bundles = admin.namespaces.bundles(namespace)
    admin.topics.create(f"persistent://{namespace}/b")
    admin.namespaces.unload(namespace, bundles[0])
    admin.namespaces.split_bundle(namespace, bundles[0])
    assert len(admin.namespaces.bundles(namespace)) == len(bundles) + 1
    admin.namespaces.unload(namespace)


def test_errors_carry_the_brokers_reason_and_bad_input_says_why(admin: Twin) -> None:
    with pytest.raises(NotFound) as info:
        admin.topics.subscriptions(f"persistent://public/{unique('nope')}/t")
    err = info.value
    assert isinstance(err, AdminError) and isinstance(err, magnetar.PulsarError)
    assert err.status == 404 and err.method == "GET" and "Namespace not found" in err.reason, err
    with pytest.raises(magnetar.InvalidConfiguration, match="not a topic name"):
        admin.topics.stats("persistent://only/two")
    with pytest.raises(magnetar.InvalidConfiguration, match="not a namespace name"):
        admin.namespaces.policies("no-slash")
    with pytest.raises(magnetar.InvalidConfiguration, match="partitions"):
        admin.topics.create("t", partitions=-1)


def test_the_admin_needs_the_web_service_url() -> None:
    for cls in (Admin, AsyncAdmin):
        with pytest.raises(magnetar.InvalidConfiguration, match="web service URL"):
            cls("pulsar://127.0.0.1:6650")

"""The ``pulsar`` data source as a pulsar-spark user meets it: the connector's option names,
units and metadata columns, and loud errors for anything the source would not use. Against the
real broker and PySpark local[2] (option parsing alone needs neither, and says so)."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from jvm import error_text as _error_text
from jvm import new_topic as _new_topic

import magnetar
from magnetar.spark import ClientConfig
from magnetar.spark._options import SourceOptions


# -- parsing (no broker, no Spark) ------------------------------------------------------------


def _parse(**options: str) -> SourceOptions:
    return SourceOptions.parse({"service.url": "pulsar://127.0.0.1:6650", "topic": "t", **options})


def test_java_names_take_java_units_and_values() -> None:
    o = _parse(**{
        "pulsar.client.operationTimeoutMs": "5000", "pulsar.client.connectionTimeoutMs": "2500",
        "pulsar.client.keepAliveIntervalSeconds": "7", "pulsar.client.initialBackoffIntervalNanos": "200000000",
        "pulsar.client.tlsHostnameVerificationEnable": "false",
        "pulsar.producer.batchingMaxPublishDelayMicros": "2000", "pulsar.producer.sendTimeoutMs": "1500",
        "pulsar.producer.compressionType": "LZ4", "pulsar.producer.hashingScheme": "Murmur3_32Hash",
        "pulsar.producer.batchingMaxMessages": "50", "pulsar.reader.receiverQueueSize": "50",
        "client.max_backoff": "3",
    })
    c = o.client
    assert (c.operation_timeout, c.connect_timeout, c.keepalive_interval) == (5.0, 2.5, 7.0)
    assert c.initial_backoff == pytest.approx(0.2) and c.max_backoff == 3.0 and c.tls_validate_hostname is False
    assert o.producer_kwargs == {"batch_max_delay": 0.002, "send_timeout": 1.5, "compression": "lz4",
                                 "hashing_scheme": "murmur3", "batch_max_messages": 50}
    assert o.reader_kwargs == {"receiver_queue_size": 50}
    assert _parse(**{"pulsar.producer.compressionType": "NONE"}).producer_kwargs == {"compression": None}


def test_connector_aliases_and_authentication(tmp_path: Path) -> None:
    o = _parse(predefinedSubscription="sub-1", maxBytesPerTrigger="4096", metadataColumns="connector",
               allowDifferentTopicSchemas="true", waitingForNonExistedTopic="true")
    assert (o.subscription_name, o.max_bytes_per_trigger, o.metadata_columns) == ("sub-1", 4096, "connector")
    assert o.allow_different_topic_schemas and o.waiting_for_non_existed_topic
    token_cls = "org.apache.pulsar.client.impl.auth.AuthenticationToken"
    for params in ("token:abc.def", "abc.def", '{"token": "abc.def"}'):
        c = _parse(authPluginClassName=token_cls, authParams=params).client
        assert c.authentication == magnetar.Authentication.token("abc.def")  # type: ignore[attr-defined]
    token_file = tmp_path / "token"
    token_file.write_text("from.a.file\n")
    c = _parse(**{"pulsar.client.authPluginClassName": token_cls,
                  "pulsar.client.authParams": f"file://{token_file}"}).client
    assert c.authentication == magnetar.Authentication.token_file(str(token_file))  # type: ignore[attr-defined]  # read at each connect
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    cert.write_text("x")
    key.write_text("y")
    c = _parse(authPluginClassName="org.apache.pulsar.client.impl.auth.AuthenticationTls",
               authParams=f"tlsCertFile:{cert},tlsKeyFile:{key}").client
    assert c.authentication == magnetar.Authentication.tls(str(cert), str(key))  # type: ignore[attr-defined]
    c = _parse(authPluginClassName="org.apache.pulsar.client.impl.auth.AuthenticationBasic",
               authParams='{"userId": "u", "password": "p"}').client
    assert c.authentication == magnetar.Authentication.basic("u", "p")  # type: ignore[attr-defined]


@pytest.mark.parametrize(("options", "expected"), [
    ({"maxMessagesPerTriger": "5"}, "did you mean 'maxMessagesPerTrigger'"),
    ({"startingOffset": "earliest"}, "did you mean 'startingOffsets'"),
    ({"pulsar.client.operationTimeout": "5"}, "did you mean 'pulsar.client.operationTimeoutMs'"),
    ({"client.operationTimeoutSeconds": "5"}, "pulsar.client.operationTimeoutSeconds"),
    ({"pulsar.consumer.receiverQueueSize": "5"}, "pulsar.reader"),
    ({"subscriptionName": "a", "predefinedSubscription": "b"}, "given twice"),
    ({"metadataColumns": "kafka"}, "metadataColumns"),
    ({"pulsar.producer.compressionType": "brotli"}, "compressionType"),
    ({"authPluginClassName": "org.example.Auth", "authParams": "x"}, "auth_plugin must be one of"),
    ({"authPluginClassName": "org.apache.pulsar.client.impl.auth.AuthenticationBasic"}, "needs auth_params"),
    ({"authToken": "x", "authPluginClassName": "token"}, "one way of authenticating"),
    ({"somethingElse": "1"}, "unknown option"),
])
def test_unknown_or_bad_options_are_errors_naming_the_closest(options: dict[str, str], expected: str) -> None:
    with pytest.raises(magnetar.InvalidConfiguration) as info:
        _parse(**options)
    assert expected in str(info.value)


# -- on the broker ------------------------------------------------------------------------------


def test_connector_columns_round_trip_with_inclusive_offsets(spark: Any, service_url: str, broker: Any) -> None:
    topic = _new_topic("conn")
    broker.create_partitioned_topic(topic, 2)
    t = dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=dt.UTC)
    df = spark.createDataFrame(
        [(f"k{i}".encode(), f"v{i}".encode(), {"i": str(i)}, t) for i in range(40)],
        "__key binary, value binary, __messageProperties map<string,string>, __eventTime timestamp")
    (df.write.format("pulsar").mode("append").option("service.url", service_url).option("topic", topic)
     .option("metadataColumns", "connector").option("pulsar.producer.batchingMaxMessages", "5").save())

    rows = (spark.read.format("pulsar").option("service.url", service_url).option("topic", topic)
            .option("metadataColumns", "connector").load().collect())
    assert sorted(rows[0].asDict()) == sorted(["value", "__key", "__topic", "__messageId", "__publishTime",
                                                 "__eventTime", "__messageProperties"])
    assert sorted(bytes(r.value) for r in rows) == sorted(f"v{i}".encode() for i in range(40))
    for r in rows:
        assert bytes(r["__key"]) == b"k" + bytes(r.value)[1:]
        assert r["__messageProperties"] == {"i": bytes(r.value)[1:].decode()}
        assert r["__eventTime"].timestamp() == t.timestamp()  # Spark gives local naive datetimes
        assert r["__topic"] in (f"{topic}-partition-0", f"{topic}-partition-1")
    # A user's id is inclusive at both ends: from the 3rd to the 7th message of partition 0.
    part0 = sorted(magnetar.MessageId.deserialize(bytes(r["__messageId"])) for r in rows
                   if r["__topic"].endswith("-partition-0"))
    assert len(part0) > 8
    start, end = part0[2].serialize().hex(), part0[6].serialize().hex()
    ranged = (spark.read.format("pulsar").option("service.url", service_url).option("topic", topic)
              .option("metadataColumns", "connector")
              .option("startingOffsets", json.dumps({topic: {"0": start, "1": "latest"}}))
              .option("endingOffsets", json.dumps({topic: {"0": end, "1": "latest"}})).load().collect())
    got = sorted(magnetar.MessageId.deserialize(bytes(r["__messageId"])) for r in ranged)
    assert got == part0[2:7]


def test_unwritable_columns_fail_before_the_job(spark: Any, service_url: str, conf: ClientConfig) -> None:
    topic = _new_topic("cols")
    base = spark.createDataFrame([("k", b"v")], "key string, value binary")
    cases = [
        (base.selectExpr("key", "value", "1 as extra"), "'extra' is not a column a write uses"),
        (base.selectExpr("key", "value", "'x' as keys"), "did you mean 'key'"),
        (base.selectExpr("key", "value", "current_timestamp() as publish_time"), "set by the broker"),
        (base.selectExpr("key as __key", "value"), "metadataColumns=connector"),
        # with the topic in a column, too (the other columns are checked per topic in the tasks)
        (base.selectExpr("key", "value", f"'{topic}' as topic", "current_timestamp() as publish_time"),
         "set by the broker"),
    ]
    for df, expected in cases:
        with pytest.raises(Exception) as info:
            df.write.format("pulsar").mode("append").option("service.url", service_url).option("topic", topic).save()
        assert expected in _error_text(info.value), _error_text(info.value)
    with pytest.raises(Exception) as info:
        (base.selectExpr("key as __key", "value", "'m' as __messageId").write.format("pulsar").mode("append")
         .option("service.url", service_url).option("topic", topic).option("metadataColumns", "connector").save())
    assert "'__messageId' is set by the broker" in _error_text(info.value)
    with pytest.raises(Exception) as info:
        (spark.read.format("pulsar").option("service.url", service_url).option("topic", topic)
         .option("pulsar.reader.recieverQueueSize", "5").load())
    assert "did you mean 'pulsar.reader.receiverQueueSize'" in _error_text(info.value)
    # Nothing was sent by the refused writes.
    with conf.create() as client:
        reader = client.create_reader(topic)
        assert not reader.has_message_available()


def test_topics_pattern_without_admin_url(spark: Any, service_url: str, broker: Any, conf: ClientConfig) -> None:
    stem = f"pat{uuid.uuid4().hex[:8]}"
    a, b, other = f"persistent://public/default/{stem}-a", f"persistent://public/default/{stem}-b", _new_topic("other")
    broker.create_partitioned_topic(b, 2)
    with conf.create() as client:
        client.create_producer(a).send_many([b"a1", b"a2"])
        client.create_producer(b).send_many([b"b1", b"b2", b"b3"])
        client.create_producer(other).send(b"o")
    rows = (spark.read.format("pulsar").option("service.url", service_url)
            .option("topicsPattern", f"{stem}-.*").load().collect())
    assert sorted(bytes(r.value) for r in rows) == [b"a1", b"a2", b"b1", b"b2", b"b3"]
    assert {r.topic for r in rows} == {a, b}
    assert {r.partition for r in rows if r.topic == b} <= {0, 1}


def test_waiting_for_non_existed_topic_loads_without_the_topic(spark: Any, service_url: str, broker: Any) -> None:
    missing = _new_topic("later")
    read = (spark.read.format("pulsar").option("service.url", service_url).option("admin.url", broker.admin_url)
            .option("topic", missing))
    with pytest.raises(Exception) as info:
        read.load()
    assert "does not exist" in _error_text(info.value)
    assert read.option("waitingForNonExistedTopic", "true").load().count() == 0


def test_max_bytes_per_trigger_and_predefined_subscription(
        spark: Any, service_url: str, broker: Any, conf: ClientConfig, tmp_path: Path) -> None:
    topic = _new_topic("bytes")
    with conf.create() as client:
        client.create_producer(topic, batching=False).send_many([b"x" * 100] * 30)
    sub = f"pre-{uuid.uuid4().hex[:6]}"
    q = (spark.readStream.format("pulsar").option("service.url", service_url).option("topic", topic)
         .option("startingOffsets", "earliest").option("maxBytesPerTrigger", "1000")
         .option("predefinedSubscription", sub).load()
         .writeStream.format("parquet").option("path", str(tmp_path / "out"))
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    assert q.awaitTermination(120)
    assert q.exception() is None
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 30 and max(sizes) <= 10 and len(sizes) >= 3, sizes
    assert sub in broker.topic_stats(topic)["subscriptions"]


def test_get_topics_of_namespace_lists_partitions_in_both_clients(api: Any, broker: Any) -> None:
    plain, parted = _new_topic("ns-plain"), _new_topic("ns-parted")
    broker.create_topic(plain)
    broker.create_partitioned_topic(parted, 2)
    listed = api.call(api.client, "get_topics_of_namespace", "public/default")
    assert plain in listed
    assert {f"{parted}-partition-0", f"{parted}-partition-1"} <= set(listed)
    with pytest.raises(magnetar.InvalidConfiguration):
        api.call(api.client, "get_topics_of_namespace", "not-a-namespace")

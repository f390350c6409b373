"""``http://`` and ``https://`` service URLs: lookups, partition metadata and namespace listings
go to the broker's admin REST API (as the official clients' HTTP lookup service does), and
producers and consumers connect to the binary addresses it answers. The URLs here name the web
ports only, so every lookup went over HTTP."""

from __future__ import annotations

import socket
import uuid
from typing import Any

import pytest

import magnetar
from magnetar.testing import Standalone

from conftest import BASIC_PASSWORD, BASIC_USER, TLS_ROLE, TOKEN_ROLE, Api


@pytest.fixture
def topic() -> str:
    return f"persistent://public/default/http-{uuid.uuid4().hex[:10]}"


def round_trip(twin: Api, topic: str, n: int = 6) -> None:
    producer = twin.call(twin.client, "create_producer", topic, batching=False)
    consumer = twin.call(twin.client, "subscribe", topic, uuid.uuid4().hex, initial_position="earliest")
    sent = [f"over-http-{i}".encode() for i in range(n)]
    for i, payload in enumerate(sent):
        twin.call(producer, "send", payload, key=str(i))
    got = []
    for _ in sent:
        msg = twin.call(consumer, "receive", timeout=15)
        twin.call(consumer, "ack", msg)
        got.append(msg.data)
    assert sorted(got) == sorted(sent)


def test_a_partitioned_topic_through_an_http_url(broker: Standalone, topic: str, api_kind: str) -> None:
    broker.create_partitioned_topic(topic, 3)
    twin = Api(api_kind, broker.admin_url)
    try:
        assert twin.call(twin.client, "get_partition_count", topic) == 3
        round_trip(twin, topic, n=9)
        listed = twin.call(twin.client, "get_topics_of_namespace", "public/default")
        assert {f"{topic}-partition-{i}" for i in range(3)} <= set(listed)
    finally:
        twin.close()


def test_a_plain_topic_and_its_schema_through_an_http_url(broker: Standalone, topic: str) -> None:
    with magnetar.Client(f"http://127.0.0.1:{broker.http_port}/", operation_timeout=20) as client:
        assert client.get_partition_count(topic) == 0
        assert client.get_schema(topic) is None  # no such topic yet
        producer = client.create_producer(topic, schema=magnetar.schema.StringSchema())
        consumer = client.subscribe(topic, "s", schema=magnetar.schema.StringSchema(), initial_position="earliest")
        producer.send("typed")
        assert consumer.receive(timeout=15).value == "typed"
        info = client.get_schema(topic)
        assert info is not None and info.type == magnetar.schema.SchemaType.STRING, info


def test_a_pattern_subscription_lists_the_namespace_over_http(broker: Standalone) -> None:
    prefix = f"http-pattern-{uuid.uuid4().hex[:8]}"
    with magnetar.Client(broker.admin_url, operation_timeout=20) as client:
        producers = [client.create_producer(f"persistent://public/default/{prefix}-{i}") for i in range(2)]
        consumer = client.subscribe(f"persistent://public/default/{prefix}-.*", "s", pattern=True,
                                    initial_position="earliest")
        for i, p in enumerate(producers):
            p.send(f"m{i}".encode())
        assert sorted(consumer.receive(timeout=15).data for _ in producers) == [b"m0", b"m1"]


def _https(secured: Standalone) -> str:
    return f"https://127.0.0.1:{secured.https_port}"


def test_https_with_a_token(secured: Standalone, topic: str, api_kind: str) -> None:
    twin = Api(api_kind, _https(secured), tls_trust_certs_file_path=str(secured.ca_cert_path),
               authentication=magnetar.Authentication.token(secured.make_token(TOKEN_ROLE)))
    try:
        round_trip(twin, topic)
    finally:
        twin.close()


def test_https_with_basic_and_tls_credentials(secured: Standalone, topic: str) -> None:
    ca = str(secured.ca_cert_path)
    basic = magnetar.Authentication.basic(BASIC_USER, BASIC_PASSWORD)
    with magnetar.Client(_https(secured), tls_trust_certs_file_path=ca, authentication=basic) as client:
        round_trip(Api.of(client), topic)
    cert, key = secured.client_certificate(TLS_ROLE)
    with magnetar.Client(_https(secured), tls_trust_certs_file_path=ca,
                         authentication=magnetar.Authentication.tls(cert, key)) as client:
        round_trip(Api.of(client), topic)


def test_refused_credentials_over_http_say_why(secured: Standalone, topic: str) -> None:
    ca = str(secured.ca_cert_path)
    cases: list[tuple[dict[str, Any], type[magnetar.PulsarError], str]] = [
        ({}, magnetar.AuthenticationError, "401 Unauthorized Authentication required"),
        ({"authentication": magnetar.Authentication.basic(BASIC_USER, "guess")}, magnetar.AuthenticationError, "401"),
        ({"authentication": magnetar.Authentication.token(secured.make_token("mallory"))}, magnetar.AuthorizationError,
         "Unauthorized to validateTopicOperation"),
    ]
    for options, kind, said in cases:
        with magnetar.Client(_https(secured), tls_trust_certs_file_path=ca, connect_timeout=10, **options) as client:
            with pytest.raises(kind) as info:
                client.create_producer(topic)
            # Which request, and the broker's answer.
            assert f"/public/default/{topic.rsplit('/', 1)[1]}" in str(info.value), info.value
            assert said in str(info.value), info.value


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_web_service_is_a_connect_error(broker: Standalone, topic: str) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    with magnetar.Client(url, connect_timeout=2) as client:
        with pytest.raises(magnetar.ConnectError) as info:
            client.create_producer(topic)
    assert url.removeprefix("http://") in str(info.value), info.value
    # The binary port is not a web service: said so, not a parse error.
    with magnetar.Client(f"http://127.0.0.1:{broker.port}", connect_timeout=2) as client:
        with pytest.raises(magnetar.ConnectError, match="web service port"):
            client.create_producer(topic)


def test_the_compat_client_looks_up_over_http_as_the_official_one(secured: Standalone, topic: str) -> None:
    import magnetar.compat as pulsar

    ca = str(secured.ca_cert_path)
    client = pulsar.Client(_https(secured), tls_trust_certs_file_path=ca,
                           authentication=pulsar.AuthenticationBasic(BASIC_USER, BASIC_PASSWORD))
    try:
        producer = client.create_producer(topic)
        consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        producer.send(b"compat over https")
        assert consumer.receive(15000).data() == b"compat over https"
    finally:
        client.close()
    # The official client reports a refused REST lookup as a connection error.
    client = pulsar.Client(_https(secured), tls_trust_certs_file_path=ca, connection_timeout_ms=10000,
                           authentication=pulsar.AuthenticationBasic(BASIC_USER, "guess"))
    try:
        with pytest.raises(pulsar.ConnectError):
            client.create_producer(topic)
    finally:
        client.close()

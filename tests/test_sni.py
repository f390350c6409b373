"""SNI routing (``proxy_url`` with ``proxy_protocol="sni"``): every TLS connection goes to the
proxy, and the TLS handshake names the broker it is meant for, which is how the proxy routes it.

The proxy is :class:`magnetar.testing.sni.SniForwarder`, the broker the suite's second one
(conftest ``second_broker``). The service URL names ``cluster.pulsar.test``, a name no resolver
knows: only the proxy, routing by SNI, can reach it. The broker advertises its TLS port as
``localhost`` (its certificate names both), and an ``https://`` lookup answers that name, which
the client then reaches through the proxy too."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import magnetar
from magnetar.testing import Standalone
from magnetar.testing.sni import SniForwarder

from conftest import SNI_NAME, Api

CLUSTER_NAME = SNI_NAME


@pytest.fixture
def tls_broker(second_broker: tuple[Standalone, Any]) -> Standalone:
    return second_broker[0]


@pytest.fixture
def sni(tls_broker: Standalone) -> Iterator[SniForwarder]:
    target = ("127.0.0.1", tls_broker.tls_port)
    with SniForwarder({CLUSTER_NAME: target, "localhost": target}) as forwarder:
        yield forwarder


def test_produce_and_consume_through_an_sni_proxy(tls_broker: Standalone, sni: SniForwarder, api_kind: str) -> None:
    topic = f"persistent://public/default/sni-{uuid.uuid4().hex[:10]}"
    tls_broker.create_partitioned_topic(topic, 2)
    twin = Api(api_kind, f"pulsar+ssl://{CLUSTER_NAME}:{tls_broker.tls_port}", proxy_url=sni.service_url,
               proxy_protocol="sni", tls_trust_certs_file_path=str(tls_broker.ca_cert_path))
    try:
        producer = twin.call(twin.client, "create_producer", topic, batching=False)
        consumer = twin.call(twin.client, "subscribe", topic, "s", initial_position="earliest")
        sent = [f"via-sni-{i}".encode() for i in range(6)]
        for i, payload in enumerate(sent):
            twin.call(producer, "send", payload, key=str(i))
        assert sorted(twin.call(consumer, "receive", timeout=15).data for _ in sent) == sorted(sent)
    finally:
        twin.close()
    # Every connection went through the proxy, under the service URL's name or the broker's
    # (the lookup answers localhost, or proxyThroughServiceUrl, which keeps the broker
    # connections on the service URL naming their broker in Connect).
    assert CLUSTER_NAME in sni.names and set(sni.names) <= {CLUSTER_NAME, "localhost"}, sni.names


def test_https_lookups_go_through_the_sni_proxy_too(tls_broker: Standalone, sni: SniForwarder) -> None:
    topic = f"persistent://public/default/sni-{uuid.uuid4().hex[:10]}"
    sni.routes[CLUSTER_NAME] = ("127.0.0.1", tls_broker.https_port)  # the name is the web service's now
    with magnetar.Client(f"https://{CLUSTER_NAME}:{tls_broker.https_port}", proxy_url=sni.service_url,
                         proxy_protocol="sni", tls_trust_certs_file_path=str(tls_broker.ca_cert_path)) as client:
        producer = client.create_producer(topic)
        producer.send(b"x")
    assert sni.names[0] == CLUSTER_NAME and "localhost" in sni.names, sni.names


@pytest.mark.parametrize("options, message", [
    ({"proxy_url": "pulsar+ssl://127.0.0.1:1"}, "together"),
    ({"proxy_url": "pulsar+ssl://127.0.0.1:1", "proxy_protocol": "http"}, "sni"),
    ({"proxy_url": "pulsar://127.0.0.1:1", "proxy_protocol": "sni"}, "pulsar\\+ssl"),
    ({"proxy_url": "pulsar+ssl://a:1,b:2", "proxy_protocol": "sni"}, "one"),
])
def test_bad_proxy_settings_are_configuration_errors(options: dict[str, Any], message: str) -> None:
    with pytest.raises(magnetar.InvalidConfiguration, match=message):
        magnetar.Client("pulsar+ssl://127.0.0.1:6651", **options)


def test_a_broker_known_by_ip_address_is_a_clear_error(tls_broker: Standalone, sni: SniForwarder) -> None:
    """An SNI cannot carry an IP address, so the proxy could not route the connection: say so
    at once instead of retrying until the connect timeout."""
    with magnetar.Client(tls_broker.service_url_tls, proxy_url=sni.service_url, proxy_protocol="sni",
                         tls_trust_certs_file_path=str(tls_broker.ca_cert_path), connect_timeout=60) as client:
        with pytest.raises(magnetar.ConnectError, match="SNI proxy routes by host name"):
            client.create_producer(f"persistent://public/default/sni-{uuid.uuid4().hex[:10]}")
    assert sni.names == []


def test_sni_needs_a_tls_service_url() -> None:
    with pytest.raises(magnetar.InvalidConfiguration, match="TLS"):
        magnetar.Client("pulsar://127.0.0.1:6650", proxy_url="pulsar+ssl://127.0.0.1:1", proxy_protocol="sni")


def test_sni_options_reach_the_cli_and_spark() -> None:
    from magnetar.cli._common import cli_options
    from magnetar.spark._options import SourceOptions

    assert {"proxy_url", "proxy_protocol"} <= {d.name for d in cli_options(magnetar._options.ConnectionOptions)}
    proxy = "pulsar+ssl://127.0.0.1:4443"
    for given in ({"client.proxy_url": proxy, "client.proxy_protocol": "sni"},
                  {"pulsar.client.proxyServiceUrl": proxy, "pulsar.client.proxyProtocol": "sni"}):
        opts = SourceOptions.parse({"service_url": "pulsar+ssl://127.0.0.1:6651", "topic": "t", **given})
        assert (opts.client.proxy_url, opts.client.proxy_protocol) == (proxy, "sni")  # type: ignore[attr-defined]

"""Through the real Pulsar proxy (``bin/pulsar proxy`` from the broker's distribution): lookups
answer ``proxyThroughServiceUrl``, so every connection stays on the proxy and names its broker
in ``Connect``."""

from __future__ import annotations

import re
import urllib.request
import uuid
from collections.abc import Iterator

import pytest

import magnetar
from magnetar.testing import Standalone
from magnetar.testing.proxy import PulsarProxy


@pytest.fixture(scope="module")
def proxy(broker: Standalone) -> Iterator[PulsarProxy]:
    with PulsarProxy(broker) as p:
        yield p


def proxy_metric(proxy: PulsarProxy, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{proxy.http_port}/metrics/", timeout=10) as resp:
        text = resp.read().decode()
    values = [float(m.group(1)) for m in re.finditer(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M)]
    assert values, f"{name} not in the proxy's metrics"
    return sum(values)


def test_produce_and_consume_through_the_proxy(proxy, broker, api_kind):
    from conftest import Api

    topic = f"persistent://public/default/proxy-{uuid.uuid4().hex[:10]}"
    broker.create_partitioned_topic(topic, 3)
    twin = Api(api_kind, proxy.service_url)
    try:
        producer = twin.call(twin.client, "create_producer", topic, batching=False)
        consumer = twin.call(twin.client, "subscribe", topic, "s", initial_position="earliest")
        sent = [f"via-proxy-{i}".encode() for i in range(9)]
        for i, payload in enumerate(sent):
            twin.call(producer, "send", payload, key=str(i))
        got = sorted(twin.call(consumer, "receive", timeout=15).data for _ in sent)
        assert got == sorted(sent)
        # The lookup connection and the one the proxy forwards to the broker, both on the proxy.
        assert proxy_metric(proxy, "pulsar_proxy_active_connections") >= 2
    finally:
        twin.close()

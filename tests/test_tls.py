"""TLS (``pulsar+ssl://``) against a real broker whose certificate comes from a private CA.

The module's broker serves TLS next to its plain port. Its certificate names only
``127.0.0.1``, so ``localhost`` reaches the same broker under a name the certificate does not
list: a peer with a certificate for another host, without dialling anything off loopback. Every round trip below can only
succeed over TLS, because the TLS port speaks nothing else, and a partitioned topic can only
be reached if lookups follow the brokers' TLS URLs.
"""

from __future__ import annotations

import asyncio
import pickle
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import magnetar
from magnetar.testing import Standalone
from magnetar.testing.faults import FaultProxy

import pulsar  # a hard test dependency: fail, never skip
from conftest import Api


@pytest.fixture(scope="module")
def tls_broker() -> Iterator[Standalone]:
    with Standalone(port=0, tls=True, tls_names=("127.0.0.1",)) as b:
        yield b


@pytest.fixture
def ca(tls_broker: Standalone) -> str:
    assert tls_broker.ca_cert_path is not None and tls_broker.ca_cert_path.is_file()
    return str(tls_broker.ca_cert_path)


@pytest.fixture
def topic() -> str:
    return f"persistent://public/default/tls-{uuid.uuid4().hex[:12]}"


def round_trip(twin: Api, topic: str, n: int = 5) -> None:
    producer = twin.call(twin.client, "create_producer", topic)
    consumer = twin.call(twin.client, "subscribe", topic, "s", initial_position="earliest")
    sent = [f"secret-{i}".encode() for i in range(n)]
    for payload in sent:
        twin.call(producer, "send", payload)
    got = [twin.call(consumer, "receive", timeout=15) for _ in sent]
    assert [m.data for m in got] == sent
    for m in got:
        twin.call(consumer, "ack", m)
    twin.call(consumer, "close")
    twin.call(producer, "close")


# -- verified TLS ----------------------------------------------------------------------------


def test_round_trip_over_tls_with_the_ca_file(tls_broker, ca, topic, api_kind):
    assert tls_broker.service_url_tls.startswith("pulsar+ssl://127.0.0.1:")
    assert tls_broker.tls_port != tls_broker.port
    twin = Api(api_kind, tls_broker.service_url_tls, tls_trust_certs_file_path=ca)
    try:
        round_trip(twin, topic)
        assert twin.client.state == "idle"  # everything closed again, nothing reconnecting
    finally:
        twin.close()


def test_partitioned_topic_over_tls_follows_the_tls_broker_urls(tls_broker, ca, topic, api_kind):
    tls_broker.create_partitioned_topic(topic, 3)
    twin = Api(api_kind, tls_broker.service_url_tls, tls_trust_certs_file_path=Path(ca))
    try:
        producer = twin.call(twin.client, "create_producer", topic, batching=False)
        consumer = twin.call(twin.client, "subscribe", topic, "s", initial_position="earliest")
        assert len(consumer.topics) == 3
        keys = [f"k{i}" for i in range(30)]
        for k in keys:
            twin.call(producer, "send", k.encode(), key=k)
        got = [twin.call(consumer, "receive", timeout=15) for _ in keys]
        assert sorted(m.key for m in got) == sorted(keys)
        assert len({m.topic for m in got}) == 3  # every partition was reached over TLS
        twin.call(consumer, "close")
        twin.call(producer, "close")
    finally:
        twin.close()


def test_bulk_and_large_messages_over_tls(tls_broker, ca, topic, api_kind):
    # Far more than rustls buffers at once, so its held-back ciphertext must be flushed.
    payloads = [i.to_bytes(4, "big") * 256 for i in range(20_000)]
    big = bytes(range(256)) * (3 * 4096)  # 3 MiB: many TLS records, one message
    twin = Api(api_kind, tls_broker.service_url_tls, tls_trust_certs_file_path=ca)
    try:
        producer = twin.call(twin.client, "create_producer", topic)
        consumer = twin.call(twin.client, "subscribe", topic, "s", initial_position="earliest",
                             receiver_queue_size=5000)
        twin.call(producer, "send_many", payloads)
        twin.call(producer, "send", big)
        got: list[bytes] = []
        while len(got) < len(payloads) + 1:
            batch = twin.call(consumer, "receive_many", max_messages=5000, timeout=15)
            assert batch, f"nothing more after {len(got)} messages"
            got.extend(m.data for m in batch)
        assert got[:-1] == payloads
        assert got[-1] == big
        twin.call(consumer, "close")
        twin.call(producer, "close")
    finally:
        twin.close()


def test_the_broker_checks_a_presented_client_certificate(tls_broker, ca, topic, tmp_path):
    # The broker asks for a client certificate (tlsRequireTrustedClientCertOnConnect=false
    # makes it optional) and verifies one that is presented against its CA.
    cert, key = _client_certificate(tls_broker, tmp_path / "ours", signed_by_broker_ca=True)
    with magnetar.Client(tls_broker.service_url_tls, tls_trust_certs_file_path=ca,
                         tls_certificate_file_path=cert, tls_private_key_file_path=key) as client:
        producer = client.create_producer(topic)
        consumer = client.subscribe(topic, "s", initial_position="earliest")
        producer.send(b"mutual")
        assert consumer.receive(timeout=15).data == b"mutual"
    # So a certificate from elsewhere is refused, which shows that ours was really presented.
    cert, key = _client_certificate(tls_broker, tmp_path / "stranger", signed_by_broker_ca=False)
    with FaultProxy(tls_broker.tls_port) as counted, \
            magnetar.Client(f"pulsar+ssl://127.0.0.1:{counted.port}", tls_trust_certs_file_path=ca, connect_timeout=60.0,
                            tls_certificate_file_path=cert, tls_private_key_file_path=key) as client:
        with pytest.raises(magnetar.ConnectError, match="TLS handshake with .* failed: received fatal alert"):
            client.create_producer(topic)
        assert counted.accepted == 1  # final: one connection, not retried for the connect timeout


def _client_certificate(broker: Standalone, where: Path, signed_by_broker_ca: bool) -> tuple[str, str]:
    """A client certificate, signed by the broker's CA (whose key the launcher keeps) or
    self-signed."""
    openssl = shutil.which("openssl")
    assert openssl, "openssl is needed to make the client certificate"
    where.mkdir()
    tls_dir = broker.data_dir / "tls"  # type: ignore[operator]
    key, csr, cert, ext = (where / n for n in ("client.key.pem", "client.csr", "client.cert.pem", "client.ext"))
    ext.write_text("basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
    if signed_by_broker_ca:
        commands: list[list[Any]] = [
            ["req", "-new", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=magnetar-client",
             "-keyout", key, "-out", csr],
            ["x509", "-req", "-in", csr, "-CA", tls_dir / "ca.cert.pem", "-CAkey", tls_dir / "ca.key.pem",
             "-CAcreateserial", "-CAserial", where / "ca.srl", "-days", "2", "-extfile", ext, "-out", cert],
        ]
    else:
        commands = [["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=stranger", "-days", "2",
                     "-keyout", key, "-out", cert]]
    for cmd in commands:
        subprocess.run([openssl, *map(str, cmd)], check=True, capture_output=True)
    return str(cert), str(key)


# -- refusals --------------------------------------------------------------------------------


def test_an_untrusted_broker_certificate_fails_at_once_naming_the_problem(tls_broker, topic, api_kind):
    # No CA file: the default roots (Mozilla's) do not know the broker's private CA.
    with FaultProxy(tls_broker.tls_port) as counted:
        twin = Api(api_kind, f"pulsar+ssl://127.0.0.1:{counted.port}", connect_timeout=60.0)
        try:
            with pytest.raises(magnetar.ConnectError) as info:
                twin.call(twin.client, "create_producer", topic)
            message = str(info.value)
            assert "certificate" in message and "UnknownIssuer" in message, message
            assert "127.0.0.1" in message, message
            # A refused certificate is final: one connection, no retrying for the connect timeout.
            assert counted.accepted == 1
        finally:
            twin.close()


def test_insecure_connection_needs_no_ca(tls_broker, topic, api_kind):
    twin = Api(api_kind, tls_broker.service_url_tls, tls_allow_insecure_connection=True)
    try:
        round_trip(twin, topic, n=2)
    finally:
        twin.close()


def test_hostname_is_validated_by_default(tls_broker, ca, topic, api_kind):
    port = tls_broker.tls_port
    # The certificate lists IP 127.0.0.1.
    twin = Api(api_kind, f"pulsar+ssl://127.0.0.1:{port}", tls_trust_certs_file_path=ca)
    try:
        round_trip(twin, topic, n=1)
    finally:
        twin.close()
    # It does not list `localhost`: refused at once, saying which name and how to opt out ...
    with FaultProxy(port) as counted:
        twin = Api(api_kind, f"pulsar+ssl://localhost:{counted.port}", tls_trust_certs_file_path=ca, connect_timeout=60.0)
        try:
            with pytest.raises(magnetar.ConnectError) as info:
                twin.call(twin.client, "create_producer", topic + "-b")
            message = str(info.value)
            assert 'not valid for name "localhost"' in message, message
            assert "127.0.0.1" in message and "tls_validate_hostname=False" in message, message
            assert counted.accepted == 1  # final: one connection, not retried for the connect timeout
        finally:
            twin.close()
    # ... and reached with the check off: the chain is still verified, the name is not.
    twin = Api(api_kind, f"pulsar+ssl://localhost:{port}", tls_trust_certs_file_path=ca,
               tls_validate_hostname=False)
    try:
        round_trip(twin, topic + "-c", n=1)
    finally:
        twin.close()


def test_turning_the_name_check_off_still_verifies_the_chain(tls_broker, topic):
    with magnetar.Client(f"pulsar+ssl://localhost:{tls_broker.tls_port}", tls_validate_hostname=False,
                         connect_timeout=60.0) as client:
        with pytest.raises(magnetar.ConnectError, match="UnknownIssuer"):
            client.create_producer(topic)


def test_mixing_up_plain_and_tls_ports_fails_clearly(tls_broker, ca, topic):
    # The broker hangs up on both; the client retries (a hang-up may be transient) within the
    # connect timeout, then says what probably went wrong.
    with magnetar.Client(f"pulsar+ssl://127.0.0.1:{tls_broker.port}", tls_trust_certs_file_path=ca,
                         connect_timeout=2.0) as client:
        with pytest.raises(magnetar.ConnectError, match="during the TLS handshake .is this port serving TLS"):
            client.create_producer(topic)
    with magnetar.Client(f"pulsar://127.0.0.1:{tls_broker.tls_port}", connect_timeout=2.0) as client:
        with pytest.raises(magnetar.ConnectError, match="if this is a TLS port, use pulsar.ssl://"):
            client.create_producer(topic)


@pytest.mark.parametrize("make", [magnetar.Client, magnetar.AsyncClient], ids=["sync", "async"])
def test_bad_tls_files_are_configuration_errors_at_creation(make, tls_broker, ca, tmp_path):
    url = tls_broker.service_url_tls
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("this is not a certificate\n")

    async def create(**kw: Any) -> Any:
        return make(url, **kw)

    def build(**kw: Any) -> Any:
        return asyncio.run(create(**kw))

    with pytest.raises(magnetar.InvalidConfiguration, match="missing-ca.pem"):
        build(tls_trust_certs_file_path=str(tmp_path / "missing-ca.pem"))
    with pytest.raises(magnetar.InvalidConfiguration, match="no PEM certificate"):
        build(tls_trust_certs_file_path=not_pem)
    with pytest.raises(magnetar.InvalidConfiguration, match="together"):
        build(tls_trust_certs_file_path=ca, tls_certificate_file_path=ca)
    with pytest.raises(magnetar.InvalidConfiguration, match="private key"):
        build(tls_trust_certs_file_path=ca, tls_certificate_file_path=ca, tls_private_key_file_path=not_pem)
    with pytest.raises(magnetar.InvalidConfiguration, match="tls_validate_hostname"):
        build(tls_validate_hostname="yes")
    # Files are checked even for a plain URL, so a typo does not wait for a switch to TLS.
    with pytest.raises(magnetar.InvalidConfiguration, match="missing-ca.pem"):
        asyncio.run(_plain(make, tls_broker.service_url, str(tmp_path / "missing-ca.pem")))


async def _plain(make: Any, url: str, ca: str) -> Any:
    return make(url, tls_trust_certs_file_path=ca)


# -- interop, configuration values, Spark options ---------------------------------------------


def test_official_client_produces_over_tls_and_magnetar_consumes(tls_broker, ca, topic):
    official = pulsar.Client(tls_broker.service_url_tls, tls_trust_certs_file_path=ca)
    try:
        with magnetar.Client(tls_broker.service_url_tls, tls_trust_certs_file_path=ca) as client:
            consumer = client.subscribe(topic, "s", initial_position="earliest")
            producer = official.create_producer(topic, batching_enabled=True)
            sent = [f"from-pulsar-client-{i}".encode() for i in range(10)]
            for payload in sent:
                producer.send_async(payload, None, partition_key="k")
            producer.flush()
            got = [consumer.receive(timeout=15) for _ in sent]
            assert [m.data for m in got] == sent
            assert {m.key for m in got} == {"k"}
            # And back: what magnetar sends over TLS, the official client reads.
            reader = official.subscribe(topic, "official", initial_position=pulsar.InitialPosition.Earliest)
            client.create_producer(topic).send(b"from-magnetar")
            seen = [reader.receive(timeout_millis=15000).data() for _ in range(len(sent) + 1)]
            assert seen[-1] == b"from-magnetar"
    finally:
        official.close()


def test_client_config_carries_tls_options(tls_broker, ca, topic):
    assert magnetar.ClientConfig(tls_broker.service_url_tls).tls_validate_hostname is True
    # A Path is accepted too, and kept as str like every path of the configuration.
    conf = magnetar.ClientConfig(tls_broker.service_url_tls, tls_trust_certs_file_path=Path(ca),  # type: ignore[arg-type]
                                 tls_validate_hostname=False)
    assert conf.tls_trust_certs_file_path == ca
    again = pickle.loads(pickle.dumps(conf))
    assert again == conf and hash(again) == hash(conf)
    assert again.client_kwargs()["tls_validate_hostname"] is False
    with again.create() as client:
        round_trip(Api.of(client), topic, n=1)
    with pytest.raises(magnetar.InvalidConfiguration):
        magnetar.ClientConfig(tls_broker.service_url_tls, tls_allow_insecure_connection="true")  # type: ignore[arg-type]
    with pytest.raises(magnetar.InvalidConfiguration, match="together"):
        magnetar.ClientConfig(tls_broker.service_url_tls, tls_private_key_file_path=ca)


def test_spark_source_passes_tls_options_to_its_clients(tls_broker, ca, topic):
    from magnetar import spark as ms
    from magnetar.spark._options import SourceOptions

    default = SourceOptions.parse({"service_url": tls_broker.service_url_tls, "topic": topic})
    assert default.client.tls_validate_hostname is True
    off = SourceOptions.parse({"service_url": tls_broker.service_url_tls, "topic": topic,
                               "tlsValidateHostname": "false"})
    assert off.client.tls_validate_hostname is False
    opts = SourceOptions.parse({
        "service_url": tls_broker.service_url_tls, "topic": topic,
        "tlsTrustCertsFilePath": ca, "tlsValidateHostname": "true", "tlsAllowInsecureConnection": "false",
    })
    assert opts.client.tls_trust_certs_file_path == ca
    assert opts.client.tls_validate_hostname is True
    assert opts.client.tls_allow_insecure_connection is False
    with pytest.raises(magnetar.InvalidConfiguration, match="tlsAllowInsecureConnection"):
        SourceOptions.parse({"service_url": tls_broker.service_url_tls, "topic": topic,
                             "tlsAllowInsecureConnection": "maybe"})
    # The driver's admin calls to an https:// admin URL trust the same CA.
    from magnetar.spark._read import _admin_get

    https = f"https://127.0.0.1:{tls_broker.https_port}"
    assert _admin_get(https, "/admin/v2/namespaces/public/default", opts) is not None
    # The executors' per-process client is built from that configuration.
    try:
        ms.producer(opts.client, topic).send(b"from-an-executor")
    finally:
        ms.close_all()
    with magnetar.Client(tls_broker.service_url_tls, tls_trust_certs_file_path=ca) as client:
        reader = client.create_reader(topic, start=magnetar.MessageId.earliest)
        assert reader.read_next(timeout=15).data == b"from-an-executor"

"""Authentication against one real broker that runs the token, basic and TLS providers at once,
challenges expired credentials every second, and accepts tokens from a local OAuth2 endpoint.
It also advertises a second listener (``external``, on 127.0.0.2), for ``listener_name``.

The broker's key signs every token here: the admin's and the short-lived ones
(``Standalone.make_token``, HS256 as ``pulsar tokens create`` makes), and one comes from the
broker's own ``bin/pulsar tokens`` tool.
"""

from __future__ import annotations

import base64
import json
import logging
import pickle
import re
import subprocess
import threading
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import magnetar
from magnetar.testing import Standalone, tool_output

from conftest import BASIC_PASSWORD, BASIC_USER, OAUTH_ROLE, TLS_ROLE, TOKEN_ROLE, Api
from waiting import wait_until

# The roles and the secured broker (session-wide: test_http_lookup uses it too) live in conftest.
# Tokens of the refresh tests live this long; the broker checks for expired ones every second.
SHORT_LIFETIME = 3


@pytest.fixture
def topic() -> str:
    return f"persistent://public/default/auth-{uuid.uuid4().hex[:10]}"


def round_trip(client: magnetar.Client, topic: str, payload: bytes = b"secret") -> None:
    producer = client.create_producer(topic)
    # A new subscription at the end: a topic used before gives only this message.
    consumer = client.subscribe(topic, uuid.uuid4().hex, initial_position="latest")
    producer.send(payload)
    assert consumer.receive(timeout=15).data == payload


def connect_error(secured: Standalone, topic: str, **options: Any) -> magnetar.PulsarError:
    with magnetar.Client(secured.service_url, connect_timeout=10, **options) as client:
        with pytest.raises(magnetar.PulsarError) as info:
            client.create_producer(topic)
    return info.value


# -- token -----------------------------------------------------------------------------------


def test_a_token_works_with_both_clients(secured, topic, api_kind):
    twin = Api(api_kind, secured.service_url, authentication=magnetar.Authentication.token(secured.make_token(TOKEN_ROLE)))
    try:
        producer = twin.call(twin.client, "create_producer", topic)
        consumer = twin.call(twin.client, "subscribe", topic, "s", initial_position="earliest")
        twin.call(producer, "send", b"secret")
        assert twin.call(consumer, "receive", timeout=15).data == b"secret"
    finally:
        twin.close()


def test_refusals_say_why(secured, topic):
    missing = connect_error(secured, topic)
    assert isinstance(missing, magnetar.AuthenticationError) and missing.code is not None
    forged = magnetar.testing.hs256_token(b"not the broker's key", TOKEN_ROLE)
    assert isinstance(connect_error(secured, topic, authentication=magnetar.Authentication.token(forged)),
                      magnetar.AuthenticationError)
    expired = connect_error(secured, topic, authentication=magnetar.Authentication.token(secured.make_token(TOKEN_ROLE, -60)))
    assert isinstance(expired, magnetar.AuthenticationError)
    assert "Failed to authenticate" in str(expired), expired  # the broker's own message
    # A valid token of a role without permission is authenticated, then not authorized.
    denied = connect_error(secured, topic, authentication=magnetar.Authentication.token(secured.make_token("mallory")))
    assert isinstance(denied, magnetar.AuthorizationError), denied


def test_a_token_made_by_the_broker_tool_is_accepted(secured, topic):
    token = tool_output(secured.tool)
    with magnetar.Client(secured.service_url, authentication=magnetar.Authentication.token(token)) as client:
        round_trip(client, topic)


def test_a_token_supplier_is_asked_on_every_connect(secured, topic):
    calls: list[str] = []

    def supplier() -> str:
        calls.append(secured.make_token(TOKEN_ROLE))
        return calls[-1]

    with magnetar.Client(secured.service_url, authentication=magnetar.Authentication.token(supplier)) as client:
        round_trip(client, topic)
        assert len(calls) == client.stats()["connections_opened"] >= 1


def test_an_expired_credential_is_renewed_before_giving_up(secured, topic):
    # What a reconnect after a long outage meets: the credential expired meanwhile. The client
    # asks once more and succeeds with the renewed one.
    calls: list[int] = []

    def supplier() -> str:
        calls.append(1)
        # The first answer expired a minute ago; renewed ones are valid.
        return secured.make_token(TOKEN_ROLE, -60 if len(calls) == 1 else 600)

    with magnetar.Client(secured.service_url, authentication=magnetar.Authentication.token(supplier)) as client:
        round_trip(client, topic)
        # Each connection asked once, and the first connect once more.
        assert len(calls) == client.stats()["connections_opened"] + 1
    # A renewed credential that is refused too is final, with the broker's reason.
    error = connect_error(secured, topic, authentication=magnetar.Authentication.token(
        lambda: secured.make_token(TOKEN_ROLE, -60)))
    assert isinstance(error, magnetar.AuthenticationError) and "Failed to authenticate" in str(error), error


def test_a_failing_supplier_is_an_authentication_error(secured, topic):
    def supplier() -> str:
        raise RuntimeError("vault unreachable")

    error = connect_error(secured, topic, authentication=magnetar.Authentication.token(supplier))
    assert isinstance(error, magnetar.AuthenticationError) and "vault unreachable" in str(error), error


# -- basic and TLS ---------------------------------------------------------------------------


def test_basic_authentication(secured, topic):
    auth = magnetar.Authentication.basic(BASIC_USER, BASIC_PASSWORD)
    with magnetar.Client(secured.service_url, authentication=auth) as client:
        round_trip(client, topic)
    wrong = connect_error(secured, topic, authentication=magnetar.Authentication.basic(BASIC_USER, "guess"))
    assert isinstance(wrong, magnetar.AuthenticationError), wrong
    # The official clients' text form says the same.
    params = json.dumps({"userId": BASIC_USER, "password": BASIC_PASSWORD})
    with magnetar.Client(secured.service_url, auth_plugin="org.apache.pulsar.client.impl.auth.AuthenticationBasic",
                         auth_params=params) as client:
        round_trip(client, topic, b"again")


def test_tls_authentication_takes_the_role_from_the_certificate(secured, topic):
    ca = str(secured.ca_cert_path)
    cert, key = secured.client_certificate(TLS_ROLE)
    with magnetar.Client(secured.service_url_tls, tls_trust_certs_file_path=ca,
                         authentication=magnetar.Authentication.tls(cert, key)) as client:
        round_trip(client, topic)
    # Another name is another role, authenticated but not authorized: the role came from
    # the certificate.
    cert, key = secured.client_certificate("stranger")
    with magnetar.Client(secured.service_url_tls, tls_trust_certs_file_path=ca, connect_timeout=10,
                         authentication=magnetar.Authentication.tls(cert, key)) as client:
        with pytest.raises(magnetar.AuthorizationError):
            client.create_producer(topic)


def test_tls_authentication_with_an_x509_version_1_certificate(secured, topic):
    """Brokers accept X.509 v1 client certificates (the official client's own test suite uses
    one); the client must present it rather than refuse to load it."""
    cert, key = secured.client_certificate(TLS_ROLE, x509_version=1)
    assert b"Version: 1" in subprocess.run(["openssl", "x509", "-in", str(cert), "-noout", "-text"],
                                           check=True, capture_output=True).stdout
    with magnetar.Client(secured.service_url_tls, tls_trust_certs_file_path=str(secured.ca_cert_path),
                         authentication=magnetar.Authentication.tls(cert, key)) as client:
        round_trip(client, topic)
    # The key is still checked against the certificate where it can be read.
    _, other_key = secured.client_certificate("stranger")
    v3_cert, _ = secured.client_certificate(TLS_ROLE)
    with pytest.raises(magnetar.InvalidConfiguration, match="do not go together"):
        magnetar.Client(secured.service_url_tls, tls_trust_certs_file_path=str(secured.ca_cert_path),
                        authentication=magnetar.Authentication.tls(v3_cert, other_key))


# -- OAuth2 ----------------------------------------------------------------------------------


class TokenEndpoint:
    """An OAuth2 issuer on loopback: its discovery document and a client-credentials token
    endpoint issuing the broker's JWTs for one client."""

    def __init__(self, broker: Standalone, lifetime: float) -> None:
        self.client_id, self.client_secret = "magnetar-client", "s3cret"
        self.requests: list[dict[str, str]] = []
        # Tokens to issue already expired while claiming an hour of life (a revoked token, or
        # an issuer whose clock is off): the broker refuses what the client thinks is fresh.
        self.stale_tokens = 0
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path != "/.well-known/openid-configuration":
                    return self._send(404, {"error": "not_found"})
                self._send(200, {"issuer": endpoint.url, "token_endpoint": endpoint.url + "/oauth/token"})

            def do_POST(self) -> None:  # noqa: N802
                form = dict(urllib.parse.parse_qsl(self.rfile.read(int(self.headers["Content-Length"])).decode()))
                endpoint.requests.append(form)
                if (form.get("grant_type"), form.get("client_id"), form.get("client_secret")) != (
                        "client_credentials", endpoint.client_id, endpoint.client_secret):
                    return self._send(401, {"error": "invalid_client"})
                if endpoint.stale_tokens > 0:
                    endpoint.stale_tokens -= 1
                    token, claimed = broker.make_token(OAUTH_ROLE, -60), 3600.0
                else:
                    token, claimed = broker.make_token(OAUTH_ROLE, lifetime), lifetime
                self._send(200, {"access_token": token, "token_type": "Bearer", "expires_in": claimed})

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True, name="oauth2 endpoint").start()

    def credentials(self, secret: str | None = None) -> str:
        doc = {"client_id": self.client_id, "client_secret": secret or self.client_secret}
        return "data:application/json;base64," + base64.b64encode(json.dumps(doc).encode()).decode()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def issuer(secured: Standalone) -> Iterator[TokenEndpoint]:
    endpoint = TokenEndpoint(secured, lifetime=SHORT_LIFETIME)
    yield endpoint
    endpoint.close()


def test_oauth2_client_credentials(secured, topic, issuer, tmp_path):
    creds = tmp_path / "credentials.json"
    creds.write_text(json.dumps({"client_id": issuer.client_id, "client_secret": issuer.client_secret}))
    auth = magnetar.Authentication.oauth2(issuer.url, creds, audience="urn:pulsar", scope="produce")
    with magnetar.Client(secured.service_url, authentication=auth) as client:
        round_trip(client, topic)
    assert issuer.requests[0] == {"grant_type": "client_credentials", "client_id": issuer.client_id,
                                  "client_secret": issuer.client_secret, "audience": "urn:pulsar", "scope": "produce"}
    # The text form, with the credentials in a file:// URL.
    params = json.dumps({"issuerUrl": issuer.url, "privateKey": creds.as_uri(), "audience": "urn:pulsar"})
    with magnetar.Client(secured.service_url, auth_plugin="oauth2", auth_params=params) as client:
        round_trip(client, topic, b"again")
    refused = connect_error(secured, topic, authentication=magnetar.Authentication.oauth2(
        issuer.url, issuer.credentials(secret="wrong")))
    assert isinstance(refused, magnetar.AuthenticationError) and "401" in str(refused), refused


def test_oauth2_token_refused_by_the_broker_is_fetched_anew(secured, topic, issuer):
    """The cached access token claims an hour but the broker refuses it: the client drops it,
    fetches another and connects, rather than offering the refused one again."""
    issuer.stale_tokens = 1
    auth = magnetar.Authentication.oauth2(issuer.url, issuer.credentials())
    with magnetar.Client(secured.service_url, authentication=auth) as client:
        round_trip(client, topic)
    assert len(issuer.requests) == 2, issuer.requests


# -- credentials that expire while in use ----------------------------------------------------


def test_producers_and_consumers_outlive_their_tokens(secured, topic, issuer, tmp_path):
    """Three clients whose tokens last 3 s work on for four such periods: the broker finds
    each token expired (it checks every second) and challenges, and each client answers with a
    fresh one from its source (a callable, a file a "sidecar" rewrites, an OAuth2 endpoint),
    on the connection it has, with nothing lost."""
    token_file = tmp_path / "token"
    token_file.write_text(secured.make_token(TOKEN_ROLE, SHORT_LIFETIME))
    stop = threading.Event()

    def sidecar() -> None:
        while not stop.wait(0.5):
            token_file.write_text(secured.make_token(TOKEN_ROLE, SHORT_LIFETIME))

    supplied: list[float] = []

    def supplier() -> str:
        supplied.append(time.monotonic())
        return secured.make_token(TOKEN_ROLE, SHORT_LIFETIME)

    auths = {"supplier": magnetar.Authentication.token(supplier),
             "token_file": magnetar.Authentication.token_file(token_file),
             "oauth2": magnetar.Authentication.oauth2(issuer.url, issuer.credentials())}
    clients = {name: magnetar.Client(secured.service_url, authentication=a) for name, a in auths.items()}
    threading.Thread(target=sidecar, daemon=True).start()
    try:
        pairs = {name: (c.create_producer(f"{topic}-{name}", batching=False),
                        c.subscribe(f"{topic}-{name}", "s", initial_position="earliest")) for name, c in clients.items()}
        opened = {name: c.stats()["connections_opened"] for name, c in clients.items()}
        sent = {name: 0 for name in clients}
        received: dict[str, list[bytes]] = {name: [] for name in clients}
        ends = time.monotonic() + 4 * SHORT_LIFETIME
        while time.monotonic() < ends:
            for name, (producer, consumer) in pairs.items():
                producer.send(b"%d" % sent[name])
                sent[name] += 1
                msg = consumer.receive(timeout=15)
                consumer.ack(msg)
                received[name].append(msg.data)
        for name in clients:
            assert received[name] == [b"%d" % i for i in range(sent[name])], name
        # Each connect asks once; the other calls answered challenges on open connections. (A
        # broker that finds an answer late, its next check a second later, drops the
        # connection, so on a loaded machine some periods may end in a reconnect instead.)
        connects = clients["supplier"].stats()["connections_opened"]
        assert len(supplied) - connects >= 2, (supplied, connects, opened)
        assert len(issuer.requests) >= 1 + 3, issuer.requests  # a new token for each period
    finally:
        stop.set()
        for c in clients.values():
            c.close()


# -- advertised listeners --------------------------------------------------------------------


def test_listener_name_picks_the_addresses_lookups_return(secured, topic, caplog):
    external = secured.listener_urls["external"]
    assert external.startswith("pulsar://127.0.0.2:")
    auth = magnetar.Authentication.token(secured.make_token(TOKEN_ROLE))

    def brokers(url: str, **options: Any) -> set[str]:
        """The hosts of the brokers the client's connections were for."""
        caplog.clear()
        with magnetar.Client(url, authentication=auth, **options) as client:
            round_trip(client, topic)
        found = (re.match(r"connected to (\S+)(?: for broker (\S+))? ", r.getMessage()) for r in caplog.records)
        return {(m.group(2) or m.group(1)).rsplit(":", 1)[0] for m in found if m}

    # The engine caches log levels for up to a second: debug records flow once one arrives.
    caplog.set_level(logging.DEBUG, logger="magnetar")
    assert wait_until(lambda: bool(brokers(secured.service_url)), timeout=10)
    # Lookups answer with the addresses of the listener a connection came in on, unless the
    # client names one. (Asked on another listener's port, the broker answers with
    # proxyThroughServiceUrl: the connection stays where it is and names the broker, as the
    # official clients do.)
    assert brokers(secured.service_url) == {"127.0.0.1"}
    assert "127.0.0.2" in brokers(secured.service_url, listener_name="external")
    assert brokers(external) == {"127.0.0.2"}


# -- configuration ---------------------------------------------------------------------------


def test_credentials_travel_as_text(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("x.y.z")
    creds = tmp_path / "credentials.json"
    creds.write_text('{"client_id": "a", "client_secret": "b"}')
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    cases = [magnetar.Authentication.token("a.b.c"), magnetar.Authentication.token_file(token_file),
             magnetar.Authentication.basic("user", "pw:with:colons"), magnetar.Authentication.tls(cert, key),
             magnetar.Authentication.oauth2("https://issuer.example", str(creds), audience="aud")]
    for auth in cases:
        plugin, params = auth.params()  # type: ignore[misc]
        assert magnetar.Authentication.from_params(plugin, params) == auth, auth
        assert pickle.loads(pickle.dumps(auth)) == auth
    conf = magnetar.ClientConfig("pulsar://127.0.0.1:6650", authentication=cases[1])
    assert conf.auth_plugin == "token" and conf.authentication == cases[1]  # type: ignore[attr-defined]
    assert pickle.loads(pickle.dumps(conf)) == conf
    assert magnetar.ClientConfig("pulsar://h:1", auth_plugin="token", auth_params="token:a.b.c") == \
        magnetar.ClientConfig("pulsar://h:1", authentication=cases[0])
    with pytest.raises(magnetar.InvalidConfiguration, match="callable"):
        magnetar.ClientConfig("pulsar://h:1", authentication=magnetar.Authentication.token(lambda: "t"))


@pytest.mark.parametrize("build, message", [
    (lambda: magnetar.Authentication.oauth2("http://issuer.example", "x"), "https://"),
    (lambda: magnetar.Authentication.from_params("kerberos", "x"), "auth_plugin must be one of"),
    (lambda: magnetar.Authentication.from_params("basic", "user:pw"), "JSON object"),
    (lambda: magnetar.Authentication.from_params("tls", "tlsCertFile:/c"), "tlsKeyFile"),
    (lambda: magnetar.Client("pulsar://127.0.0.1:1", auth_plugin="token", auth_params="token:t",
                             authentication=magnetar.Authentication.token("t")), "not both"),
    (lambda: magnetar.Client("pulsar://127.0.0.1:1", authentication=magnetar.Authentication.token_file("/nonexistent")),
     "does not exist"),
    (lambda: magnetar.Client("pulsar://127.0.0.1:1", authentication=magnetar.Authentication.oauth2(
        "https://issuer.example", "/nonexistent/creds.json")), "nonexistent"),
])
def test_bad_credentials_are_configuration_errors(build: Callable[[], Any], message: str):
    with pytest.raises(magnetar.InvalidConfiguration, match=message):
        build()


def test_auth_options_reach_the_cli_and_spark():
    from magnetar.cli._common import cli_options
    from magnetar.spark._options import SourceOptions

    names = {d.name for d in cli_options(magnetar._options.ConnectionOptions)}
    assert {"auth_plugin", "auth_params"} <= names
    for given in ({"client.auth_plugin": "basic", "client.auth_params": '{"userId": "u", "password": "p"}'},
                  {"pulsar.client.authPluginClassName": "org.apache.pulsar.client.impl.auth.AuthenticationBasic",
                   "pulsar.client.authParams": '{"userId": "u", "password": "p"}'},
                  {"authPluginClassName": "basic", "authParams": '{"userId": "u", "password": "p"}'}):
        opts = SourceOptions.parse({"service_url": "pulsar://127.0.0.1:6650", "topic": "t", **given})
        assert opts.client.authentication == magnetar.Authentication.basic("u", "p")  # type: ignore[attr-defined]


def test_admin_rest_calls_authenticate_as_the_binary_protocol_does(secured, issuer, tmp_path):
    # What the Spark source's admin requests send, checked by the broker's admin API.
    token_file = tmp_path / "token"
    token_file.write_text(secured.make_token(TOKEN_ROLE))
    for auth in (magnetar.Authentication.token(secured.make_token(TOKEN_ROLE)),
                 magnetar.Authentication.token_file(token_file),
                 magnetar.Authentication.basic(BASIC_USER, BASIC_PASSWORD),
                 magnetar.Authentication.oauth2(issuer.url, issuer.credentials())):
        header = auth._http_authorization()
        assert header is not None
        req = urllib.request.Request(secured.admin_url + "/admin/v2/namespaces/public")
        req.add_header("Authorization", header)
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert "public/default" in json.loads(resp.read()), auth
    assert magnetar.Authentication.tls("c.pem", "k.pem")._http_authorization() is None


def test_repr_never_shows_secrets(tmp_path: Path):
    shown = repr(magnetar.Authentication.basic("user", "hunter2")) + repr(
        magnetar.Authentication.oauth2("https://i.example", "data:,{}")) + repr(magnetar.Authentication.token("a.b.c"))
    assert "hunter2" not in shown and "a.b.c" not in shown and "data:,{}" not in shown, shown


def test_compat_oauth2_takes_the_official_parameter_string(secured, topic, issuer):
    """``magnetar.compat.AuthenticationOauth2`` as the official suite's ``oauth2_test.py`` uses
    it, against an issuer on this machine: a ``data:`` credentials URL connects; keys that can
    never work and a wrong secret fail at the first connection with ``AuthenticationError``."""
    import magnetar.compat as pulsar

    def params(private_key: str) -> str:
        return json.dumps({"issuer_url": issuer.url, "private_key": private_key, "audience": "urn:pulsar"})

    client = pulsar.Client(secured.service_url, authentication=pulsar.AuthenticationOauth2(params(issuer.credentials())))
    client.create_producer(topic).close()
    client.close()
    assert issuer.requests and issuer.requests[0]["audience"] == "urn:pulsar"
    for bad in ('{"private_key":"xxx:yyy"}', '{"private_key":"data:"}', '{"private_key":"data:application/x-pem"}',
                '{"private_key":"data:application/json;xxx"}', params(issuer.credentials(secret="wrong"))):
        client = pulsar.Client(secured.service_url, authentication=pulsar.AuthenticationOauth2(bad))
        with pytest.raises(pulsar.AuthenticationError):
            client.create_producer(topic)
        client.close()

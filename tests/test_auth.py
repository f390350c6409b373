"""Token authentication and authorization against a real broker configured for them."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import time
from typing import Iterator

import pytest

import magnetar
from magnetar.testing import Standalone

SECRET = os.urandom(32)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def token(subject: str, secret: bytes = SECRET, expires: int | None = None) -> str:
    """An HS256 JWT, as `pulsar tokens create --secret-key [--expiry-time]` makes."""
    header = b64url(json.dumps({"alg": "HS256"}).encode())
    claims: dict[str, object] = {"sub": subject}
    if expires is not None:
        claims["exp"] = expires
    payload = b64url(json.dumps(claims).encode())
    signature = hmac.new(secret, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{b64url(signature)}"


@pytest.fixture(scope="module")
def secured() -> Iterator[Standalone]:
    conf = {
        "authenticationEnabled": "true",
        "authenticationProviders": "org.apache.pulsar.broker.authentication.AuthenticationProviderToken",
        "tokenSecretKey": "data:;base64," + base64.b64encode(SECRET).decode(),
        "authorizationEnabled": "true",
        "superUserRoles": "admin",
        "brokerClientAuthenticationPlugin": "org.apache.pulsar.client.impl.auth.AuthenticationToken",
        "brokerClientAuthenticationParameters": "token:" + token("admin"),
        # The broker's own admin client and system topics need the same credentials.
        "systemTopicEnabled": "false",
        "topicLevelPoliciesEnabled": "false",
        "transactionCoordinatorEnabled": "false",
    }
    with Standalone(port=0, extra_conf=conf, admin_token=token("admin")) as b:
        yield b


def test_valid_token_can_produce_and_consume(secured):
    with magnetar.Client(secured.service_url, authentication=magnetar.Authentication.token(token("admin"))) as c:
        p = c.create_producer("auth-ok")
        s = c.subscribe("auth-ok", "s", initial_position="earliest")
        p.send(b"secret")
        assert s.receive(timeout=10).data == b"secret"


def test_missing_credentials_are_refused(secured):
    with magnetar.Client(secured.service_url, connect_timeout=5) as c:
        with pytest.raises(magnetar.AuthenticationError) as info:
            c.create_producer("auth-none")
        assert info.value.code is not None


def test_wrong_token_is_refused(secured):
    forged = token("admin", secret=b"not the broker's key")
    with magnetar.Client(secured.service_url, authentication=magnetar.Authentication.token(forged), connect_timeout=5) as c:
        with pytest.raises(magnetar.AuthenticationError):
            c.create_producer("auth-forged")


def test_expired_token_is_refused(secured):
    expired = token("admin", expires=int(time.time()) - 3600)
    with magnetar.Client(secured.service_url, authentication=magnetar.Authentication.token(expired), connect_timeout=5) as c:
        with pytest.raises(magnetar.AuthenticationError):
            c.create_producer("auth-expired")
    # the same subject with a token still valid is let in: the refusal was the expiry
    fresh = token("admin", expires=int(time.time()) + 3600)
    with magnetar.Client(secured.service_url, authentication=magnetar.Authentication.token(fresh)) as c:
        c.create_producer("auth-expired").send(b"ok")


def test_valid_token_without_permission_is_not_authorized(secured):
    with magnetar.Client(secured.service_url, authentication=magnetar.Authentication.token(token("mallory"))) as c:
        with pytest.raises(magnetar.AuthorizationError):
            c.create_producer("auth-denied")

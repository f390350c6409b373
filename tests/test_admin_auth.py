"""``magnetar.admin`` on the secured broker: each kind of credential ``Client`` takes, over
``https://`` (the broker's CA trusted) and ``http://``, through both twins; refusals are
:class:`NotAuthorized` with the broker's reason."""

from __future__ import annotations

from typing import Any

import pytest

import magnetar
from magnetar.admin import NotAuthorized
from magnetar.testing import Standalone

from conftest import BASIC_PASSWORD, BASIC_USER, TLS_ROLE, TOKEN_ROLE
from test_admin import Twin
from test_auth import issuer  # noqa: F401 - the OAuth2 issuer fixture
from waiting import wait_until


def https(secured: Standalone) -> str:
    return f"https://127.0.0.1:{secured.https_port}"


def lists_tenants(kind: str, url: str, secured: Standalone, **options: Any) -> None:
    twin = Twin(kind, url, tls_trust_certs_file_path=str(secured.ca_cert_path), **options)
    try:
        assert "public" in twin.tenants.list()
    finally:
        twin.close()


def test_a_token_and_a_token_supplier(secured: Standalone, api_kind: str) -> None:
    token = secured.make_token(TOKEN_ROLE)
    lists_tenants(api_kind, https(secured), secured, authentication=magnetar.Authentication.token(token))
    lists_tenants(api_kind, secured.admin_url, secured, authentication=magnetar.Authentication.token(token))
    supplied: list[str] = []

    def supplier() -> str:
        supplied.append(token)
        return token

    lists_tenants(api_kind, https(secured), secured, authentication=magnetar.Authentication.token(supplier))
    assert supplied


def test_basic_and_a_tls_client_certificate(secured: Standalone, api_kind: str) -> None:
    basic = magnetar.Authentication.basic(BASIC_USER, BASIC_PASSWORD)
    lists_tenants(api_kind, https(secured), secured, authentication=basic)
    cert, key = secured.client_certificate(TLS_ROLE)
    lists_tenants(api_kind, https(secured), secured, authentication=magnetar.Authentication.tls(cert, key))


def test_oauth2_fetches_a_new_token_when_the_old_one_expires(secured: Standalone, issuer: Any, api_kind: str) -> None:  # noqa: F811
    auth = magnetar.Authentication.oauth2(issuer.url, issuer.credentials())
    twin = Twin(api_kind, https(secured), tls_trust_certs_file_path=str(secured.ca_cert_path), authentication=auth)
    try:
        assert "public" in twin.tenants.list()
        # The issuer's tokens live a few seconds: calls go on working across a refresh.
        assert wait_until(lambda: "public" in twin.tenants.list() and len(issuer.requests) >= 2, 60, period=0.5)
    finally:
        twin.close()


def test_refusals_are_not_authorized_with_the_brokers_reason(secured: Standalone, api_kind: str) -> None:
    ca = str(secured.ca_cert_path)
    cases: list[tuple[dict[str, Any], str]] = [
        # Refused by the authentication filter, which gives no body: the status's phrase.
        ({}, "Unauthorized"),
        ({"authentication": magnetar.Authentication.basic(BASIC_USER, "wrong")}, "Unauthorized"),
        # Authenticated, but the role may not: the broker's reason names the operation.
        ({"authentication": magnetar.Authentication.token(secured.make_token("nobody"))}, "[CREATE_TENANT]"),
    ]
    for options, reason in cases:
        twin = Twin(api_kind, https(secured), tls_trust_certs_file_path=ca, **options)
        try:
            with pytest.raises(NotAuthorized) as info:
                twin.tenants.create("not-allowed", allowed_clusters=["standalone"])
            assert info.value.status == 401 and reason in info.value.reason, info.value
        finally:
            twin.close()

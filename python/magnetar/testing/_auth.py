"""Credentials for a test broker with authentication: a token secret key, JWTs signed with it,
an htpasswd file for basic authentication, and client certificates for TLS authentication."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from ._process import find_tool, run_tool

__all__ = ["hs256_token", "make_auth_files", "make_client_certificate", "tokens_tool"]

_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProvider"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hs256_token(secret: bytes, subject: str, expires_at: float | None = None) -> str:
    """A JWT signed with ``secret`` (HS256), as ``pulsar tokens create --secret-key`` makes:
    the role in ``sub`` and, when given, the expiry (seconds since the epoch) in ``exp``."""
    header = _b64url(json.dumps({"alg": "HS256"}).encode())
    claims: dict[str, object] = {"sub": subject}
    if expires_at is not None:
        claims["exp"] = int(expires_at)
    payload = _b64url(json.dumps(claims).encode())
    signature = hmac.new(secret, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64url(signature)}"


def make_auth_files(directory: Path, basic_users: Mapping[str, str]) -> dict[str, Path]:
    """``secret.key`` (32 random bytes: an HS256 key, as ``pulsar tokens create-secret-key``
    makes) and ``htpasswd`` (``user:$apr1$...`` lines, made with ``openssl passwd``) in
    ``directory``. Existing files are kept, so a restarted broker accepts the same tokens."""
    directory.mkdir(parents=True, exist_ok=True)
    key, htpasswd = directory / "secret.key", directory / "htpasswd"
    if not key.exists():
        key.write_bytes(os.urandom(32))
        key.chmod(0o600)
    if not htpasswd.exists():
        openssl = find_tool("openssl", "to hash the basic-authentication passwords")
        lines = []
        for user, password in basic_users.items():
            hashed = run_tool([openssl, "passwd", "-apr1", password], "openssl passwd", cwd=directory)
            lines.append(f"{user}:{hashed.strip()}\n")
        htpasswd.write_text("".join(lines))
    return {"secret_key": key, "htpasswd": htpasswd}


def auth_conf(files: Mapping[str, Path], admin_token: str, *, tls: bool, refresh_check_seconds: int,
              super_users: tuple[str, ...]) -> dict[str, str]:
    """Broker settings for token, basic and (with ``tls``) TLS authentication at once, with
    authorization on for everyone but ``super_users``."""
    providers = [f"{_PROVIDER}Token", f"{_PROVIDER}Basic", *([f"{_PROVIDER}Tls"] if tls else [])]
    return {
        "authenticationEnabled": "true",
        "authenticationProviders": ",".join(providers),
        "tokenSecretKey": f"file://{files['secret_key']}",
        "basicAuthConf": str(files["htpasswd"]),
        "authenticationRefreshCheckSeconds": str(refresh_check_seconds),
        "authorizationEnabled": "true",
        "superUserRoles": ",".join(super_users),
        "brokerClientAuthenticationPlugin": "org.apache.pulsar.client.impl.auth.AuthenticationToken",
        "brokerClientAuthenticationParameters": f"token:{admin_token}",
        # The broker's own admin client and system topics would need the same credentials.
        "systemTopicEnabled": "false",
        "topicLevelPoliciesEnabled": "false",
        "transactionCoordinatorEnabled": "false",
    }


def tokens_tool(home: Path, secret_key: Path, subject: str) -> subprocess.Popen[str]:
    """``bin/pulsar tokens create`` for ``subject`` with the key file, started in the
    background (a JVM takes seconds); its stdout is the token."""
    return subprocess.Popen([str(home / "bin" / "pulsar"), "tokens", "create", "--secret-key",
                             f"file://{secret_key}", "--subject", subject],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


def tool_output(proc: subprocess.Popen[str], timeout: float = 120.0) -> str:
    """The token a :func:`tokens_tool` process printed."""
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"pulsar tokens create failed ({proc.returncode}): {err.strip()[-500:]}")
    return out.strip().splitlines()[-1]


def make_client_certificate(tls_dir: Path, where: Path, common_name: str, days: int = 2,
                            x509_version: int = 3) -> tuple[Path, Path]:
    """A client certificate for ``common_name`` (the role TLS authentication gives it), signed
    by the CA in ``tls_dir`` (:func:`magnetar.testing.make_tls_files`); returns (cert, key).
    ``x509_version=1`` makes an X.509 v1 certificate (no extensions), as older CAs and the
    official client's own test configuration still issue."""
    if x509_version not in (1, 3):
        raise ValueError(f"x509_version must be 1 or 3, not {x509_version!r}")
    openssl = find_tool("openssl", "to make the client certificate")
    where.mkdir(parents=True, exist_ok=True)
    stem = common_name if x509_version == 3 else f"{common_name}.v1"
    key, csr, cert, ext = (where / f"{stem}.{n}" for n in ("key.pem", "csr", "cert.pem", "ext"))
    if cert.exists() and key.exists():
        return cert, key
    ext.write_text("basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
    # openssl x509 -req writes a v1 certificate unless it is given extensions.
    extensions = ["-extfile", ext] if x509_version == 3 else []
    for cmd in (
        ["req", "-new", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={common_name}", "-keyout", key, "-out", csr],
        ["x509", "-req", "-in", csr, "-CA", tls_dir / "ca.cert.pem", "-CAkey", tls_dir / "ca.key.pem",
         "-CAcreateserial", "-CAserial", where / "ca.srl", "-days", str(days), *extensions, "-out", cert],
    ):
        run_tool([openssl, *map(str, cmd)], f"openssl {cmd[0]}", cwd=where)
    return cert, key


def expires_in(seconds: float) -> float:
    """The epoch time ``seconds`` from now (for :func:`hs256_token`)."""
    return time.time() + seconds

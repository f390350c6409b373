"""A private CA and a server certificate for a test broker, made with the ``openssl`` CLI."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Sequence
from pathlib import Path

from ._process import find_tool, run_tool

__all__ = ["DEFAULT_TLS_NAMES", "make_tls_files"]

DEFAULT_TLS_NAMES = ("localhost", "127.0.0.1")


def make_tls_files(directory: Path, names: Sequence[str] = DEFAULT_TLS_NAMES) -> dict[str, Path]:
    """A private CA and a server certificate for ``names`` (DNS names or IP addresses, all put
    in the subject alternative name), made with the ``openssl`` CLI into ``directory``.

    Returns the paths under the keys ``ca_cert``, ``ca_key``, ``cert`` and ``key``; the server
    key is PKCS#8 PEM, as the broker wants. Existing files are kept (whatever names they were
    made for), so a restarted broker serves the certificate its clients already trust.
    """
    openssl = find_tool("openssl", "to make the test certificates")
    directory.mkdir(parents=True, exist_ok=True)
    files = {k: directory / f for k, f in (("ca_cert", "ca.cert.pem"), ("ca_key", "ca.key.pem"),
                                           ("cert", "broker.cert.pem"), ("key", "broker.key-pk8.pem"))}
    if all(f.exists() for f in files.values()):
        return files

    def ip(name: str) -> bool:
        with contextlib.suppress(OSError):
            socket.inet_pton(socket.AF_INET6 if ":" in name else socket.AF_INET, name)
            return True
        return False

    san = ",".join(f"IP:{n}" if ip(n) else f"DNS:{n}" for n in names)
    ext = directory / "broker.ext"
    ext.write_text("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
                   f"extendedKeyUsage=serverAuth\nsubjectAltName={san}\n")
    raw_key, csr = directory / "broker.key.pem", directory / "broker.csr.pem"
    for cmd in (
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650", "-subj", "/CN=magnetar test CA",
         "-keyout", files["ca_key"], "-out", files["ca_cert"],
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
        ["req", "-new", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={names[0]}", "-keyout", raw_key, "-out", csr],
        ["x509", "-req", "-in", csr, "-CA", files["ca_cert"], "-CAkey", files["ca_key"], "-CAcreateserial",
         "-days", "3650", "-extfile", ext, "-out", files["cert"]],
        ["pkcs8", "-topk8", "-nocrypt", "-inform", "PEM", "-outform", "PEM", "-in", raw_key, "-out", files["key"]],
    ):
        run_tool([openssl, *map(str, cmd)], f"openssl {cmd[0]}", cwd=directory)
    return files

"""An SNI-routing TCP forwarder for tests, standing in for Apache Traffic Server or haproxy in
front of brokers (the Pulsar proxy does not route by SNI).

It reads the TLS ClientHello of each connection, takes the server name (SNI) from it and
forwards the connection, ClientHello included, to the address routed for that name; the TLS
session itself is between the client and the broker. Standard library only; it listens on
127.0.0.1 and forwards to loopback addresses only::

    with SniForwarder({"broker.pulsar.test": ("127.0.0.1", broker.tls_port)}) as sni:
        client = magnetar.Client("pulsar+ssl://broker.pulsar.test:6651",
                                 proxy_url=sni.service_url, proxy_protocol="sni", ...)
        sni.names   # the server names of the connections it saw, in order
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import struct
import threading
from collections.abc import Mapping

__all__ = ["SniForwarder", "server_name"]


def server_name(hello: bytes) -> str | None:
    """The SNI host name of a TLS record holding a ClientHello, or None (no SNI, not a
    ClientHello, or cut short)."""
    try:
        if hello[0] != 0x16 or hello[5] != 0x01:  # handshake record, ClientHello
            return None
        pos = 5 + 4 + 2 + 32  # record header, handshake header, version, random
        pos += 1 + hello[pos]  # session id
        pos += 2 + struct.unpack_from("!H", hello, pos)[0]  # cipher suites
        pos += 1 + hello[pos]  # compression methods
        end = pos + 2 + struct.unpack_from("!H", hello, pos)[0]
        pos += 2
        while pos + 4 <= end:
            kind, size = struct.unpack_from("!HH", hello, pos)
            pos += 4
            if kind == 0:  # server_name: list length, then (type, length, name) entries
                entry = pos + 2
                if hello[entry] == 0:
                    length = struct.unpack_from("!H", hello, entry + 1)[0]
                    return hello[entry + 3:entry + 3 + length].decode("ascii")
            pos += size
    except (IndexError, struct.error, UnicodeDecodeError):
        return None
    return None


class SniForwarder:
    """Forwards each TLS connection to the address its SNI name is routed to; a connection with
    an unknown or missing name is closed."""

    def __init__(self, routes: Mapping[str, tuple[str, int]]) -> None:
        for host, _ in routes.values():
            if not ipaddress.ip_address(host).is_loopback:
                raise ValueError(f"SniForwarder forwards to loopback addresses only, not {host}")
        self.routes = {name.lower(): target for name, target in routes.items()}
        self.names: list[str | None] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._server.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, name="sni-forwarder", daemon=True).start()

    @property
    def service_url(self) -> str:
        """``pulsar+ssl://127.0.0.1:<port>``, the ``proxy_url`` to give a client."""
        return f"pulsar+ssl://127.0.0.1:{self.port}"

    def __enter__(self) -> SniForwarder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._server.close()
        with self._lock:
            for s in self._sockets:
                with contextlib.suppress(OSError):
                    s.close()

    def _track(self, s: socket.socket) -> None:
        with self._lock:
            self._sockets.append(s)

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            self._track(conn)
            threading.Thread(target=self._route, args=(conn,), daemon=True).start()

    def _route(self, conn: socket.socket) -> None:
        hello = b""
        with contextlib.suppress(OSError):
            # The whole first record: its length is in the 5-byte header.
            while len(hello) < 5 or len(hello) < 5 + struct.unpack_from("!H", hello, 3)[0]:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                hello += chunk
        name = server_name(hello)
        with self._lock:
            self.names.append(name)
        target = self.routes.get(name.lower()) if name else None
        if target is None:
            conn.close()
            return
        try:
            upstream = socket.create_connection(target, timeout=10)
            upstream.settimeout(None)
            self._track(upstream)
            upstream.sendall(hello)
        except OSError:
            conn.close()
            return
        threading.Thread(target=self._pump, args=(upstream, conn), daemon=True).start()
        self._pump(conn, upstream)

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

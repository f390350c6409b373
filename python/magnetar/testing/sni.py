"""A TLS pass-through proxy that routes by SNI, on loopback: what Apache Traffic Server does in
front of Pulsar brokers (``proxy_url`` with ``proxy_protocol="sni"``), small enough for tests.

Python::

    with SniForwarder({"localhost": ("127.0.0.1", broker_tls_port)}) as sni:
        client = Client("pulsar+ssl://localhost:6651", proxy_url=sni.url, proxy_protocol="sni", ...)
        ...
        assert sni.names == ["localhost", ...]

It reads the server name from the client's TLS ClientHello, connects to the address routed for
it and pipes the bytes both ways without decrypting them. A hello without a server name, or with
one it has no route for, gets its connection closed (and is counted in :attr:`refused`).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Mapping

__all__ = ["SniForwarder", "server_name"]

_HANDSHAKE, _CLIENT_HELLO, _SERVER_NAME_EXT = 22, 1, 0
_MAX_HELLO = 16 * 1024 + 5


def server_name(hello: bytes) -> str | None:
    """The SNI host name of a TLS ClientHello (the first record's bytes), or None when the
    record is not a whole ClientHello or names no host."""
    try:
        if hello[0] != _HANDSHAKE:
            return None
        (record_len,) = struct.unpack_from("!H", hello, 3)
        body = hello[5:5 + record_len]
        if body[0] != _CLIENT_HELLO:
            return None
        i = 4 + 2 + 32  # handshake header, client version, random
        i += 1 + body[i]  # session id
        (n,) = struct.unpack_from("!H", body, i)
        i += 2 + n  # cipher suites
        i += 1 + body[i]  # compression methods
        (ext_total,) = struct.unpack_from("!H", body, i)
        i += 2
        end = i + ext_total
        while i + 4 <= end:
            ext_type, ext_len = struct.unpack_from("!HH", body, i)
            i += 4
            if ext_type == _SERVER_NAME_EXT:
                # server_name_list: length, then (type, length, name) entries; type 0 is a host.
                j, list_end = i + 2, i + 2 + struct.unpack_from("!H", body, i)[0]
                while j + 3 <= list_end:
                    kind, name_len = body[j], struct.unpack_from("!H", body, j + 1)[0]
                    if kind == 0:
                        return bytes(body[j + 3:j + 3 + name_len]).decode("ascii")
                    j += 3 + name_len
                return None
            i += ext_len
    except (IndexError, struct.error, UnicodeDecodeError):
        return None
    return None


class SniForwarder:
    """Listens on 127.0.0.1 (a free port) and forwards each TLS connection to
    ``routes[server name]``; :attr:`names` lists the server names of the connections it
    forwarded, in order."""

    def __init__(self, routes: Mapping[str, tuple[str, int]]) -> None:
        for host, _ in routes.values():
            if host not in ("127.0.0.1", "::1", "localhost") and not host.startswith("127."):
                raise ValueError(f"routes must stay on loopback, not {host!r}")
        self.routes = dict(routes)
        self.names: list[str] = []
        self.refused = 0
        self._listener: socket.socket | None = None
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()

    @property
    def port(self) -> int:
        if self._listener is None:
            raise RuntimeError("the forwarder is not started")
        return int(self._listener.getsockname()[1])

    @property
    def url(self) -> str:
        """``pulsar+ssl://127.0.0.1:<port>``: the ``proxy_url`` of a client."""
        return f"pulsar+ssl://127.0.0.1:{self.port}"

    def __enter__(self) -> SniForwarder:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> SniForwarder:
        listener = socket.create_server(("127.0.0.1", 0))
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True, name="sni accept").start()
        return self

    def stop(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed by stop()
            threading.Thread(target=self._serve, args=(client,), daemon=True, name="sni conn").start()

    def _serve(self, client: socket.socket) -> None:
        self._track(client)
        hello = b""
        try:
            client.settimeout(10)
            # The ClientHello is one record; read its 5-byte header, then the rest of it.
            while len(hello) < 5 or len(hello) < 5 + struct.unpack_from("!H", hello, 3)[0]:
                chunk = client.recv(_MAX_HELLO - len(hello))
                if not chunk or len(hello) + len(chunk) >= _MAX_HELLO:
                    raise OSError("no whole ClientHello")
                hello += chunk
            client.settimeout(None)
            name = server_name(hello)
            route = self.routes.get(name) if name is not None else None
            if route is None:
                raise OSError(f"no route for server name {name!r}")
            upstream = socket.create_connection(route, timeout=10)
            upstream.settimeout(None)
        except OSError:
            with self._lock:
                self.refused += 1
            self._untrack(client)
            return
        with self._lock:
            self.names.append(name)  # type: ignore[arg-type]  # route found: name is a str
        self._track(upstream)
        upstream.sendall(hello)
        threading.Thread(target=self._pipe, args=(upstream, client), daemon=True, name="sni down").start()
        self._pipe(client, upstream)

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            self._untrack(s)

    def _track(self, s: socket.socket) -> None:
        with self._lock:
            self._sockets.add(s)

    def _untrack(self, s: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(s)
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)
        s.close()

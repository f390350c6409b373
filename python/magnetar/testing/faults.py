"""Fault injection for tests: a loopback TCP proxy that can break the network between a
client and a broker, and kill -9 / restart of a :class:`~magnetar.testing.Standalone` broker.

Standard library only (asyncio in a background thread). Everything is bounded: the proxy
listens on 127.0.0.1 only, forwards to a loopback address only, and stops by itself after
``max_lifetime`` seconds if a test forgets to stop it.

The lookup pitfall: a topic lookup answers with the broker's *advertised* address, so a
client given the proxy's URL would still be sent straight to the broker for its topics. Start
the broker with :func:`proxied_broker_conf` (the broker then advertises the proxy) and the
client's topic connections go through the proxy too::

    proxy_port = free_port()
    with Standalone(port=0, extra_conf=proxied_broker_conf(proxy_port)) as broker, \\
            FaultProxy(broker.port, listen_port=proxy_port) as proxy:
        client = magnetar.Client(proxy.service_url)
        ...
        proxy.drop_connections()          # RST every live connection
        proxy.blackhole(True)             # half-open: sockets stay, nothing moves either way
        proxy.set_latency(0.2)            # 200 ms each way
        proxy.set_bandwidth(64 * 1024)    # bytes per second each way
        proxy.refuse(True)                # new connections are refused (listener closed)
        proxy.cut_at("SEND_RECEIPT")      # the next receipt never arrives: its connection is reset

The proxy follows Pulsar frame boundaries in both directions (a few integer reads per frame),
which is what lets :meth:`FaultProxy.cut_at` act on one command.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from ._broker_restart import can_store, kill9, restart, restartable_broker
from ._process import free_ports
from ._proxy_connection import COMMAND_TYPES, ProxyConnection, Relay, abort_with_rst

__all__ = [
    "FaultProxy",
    "ProxyConnection",
    "free_port",
    "free_ports",
    "kill9",
    "proxied_broker_conf",
    "restart",
    "restartable_broker",
]

log = logging.getLogger("magnetar.testing.faults")


def free_port() -> int:
    """A loopback port that was free a moment ago."""
    return free_ports(1)[0]


def proxied_broker_conf(proxy_port: int, host: str = "127.0.0.1") -> dict[str, str]:
    """Broker config that makes lookups answer with the proxy's address.

    The broker still binds ``brokerServicePort`` as usual; only what it *advertises* (in lookup
    answers and as its own identity) becomes ``host:proxy_port``. The broker's own internal
    client then also goes through the proxy, so the features that use it heavily (system topics
    for topic policies, the transaction coordinator) are turned off to keep the broker's own
    traffic out of the faults. Namespace-level policies (deduplication) need none of them.
    """
    return {
        "advertisedListeners": f"internal:pulsar://{host}:{proxy_port}",
        "internalListenerName": "internal",
        "systemTopicEnabled": "false",
        "topicLevelPoliciesEnabled": "false",
        "transactionCoordinatorEnabled": "false",
    }


def _check_loopback(host: str) -> None:
    try:
        ok = ipaddress.ip_address(host).is_loopback
    except ValueError:
        ok = host == "localhost"
    if not ok:
        raise ValueError(f"FaultProxy works on loopback only, not {host!r}")



class FaultProxy:
    """A TCP proxy on ``127.0.0.1:listen_port`` forwarding to ``target_host:target_port``.

    Use as a context manager (or :meth:`start`/:meth:`stop`). Every control method is
    thread-safe and takes effect before it returns. The proxy stops by itself after
    ``max_lifetime`` seconds.

    Args:
        target_port: the broker's port.
        listen_port: where to listen; 0 picks a free port (see :attr:`port`).
        target_host: a loopback address.
        max_lifetime: seconds after which the proxy stops on its own.
        connect_timeout: seconds to wait for the upstream connection of each client.
    """

    def __init__(self, target_port: int, *, listen_port: int = 0, target_host: str = "127.0.0.1",
                 max_lifetime: float = 900.0, connect_timeout: float = 5.0) -> None:
        _check_loopback(target_host)
        self.target = (target_host, int(target_port))
        self._want_port = int(listen_port)
        self.port = 0
        self.max_lifetime = max_lifetime
        self.connect_timeout = connect_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None
        self._live: dict[int, Relay] = {}
        self.connections: list[ProxyConnection] = []  # every connection ever accepted, in order
        self._next_id = 0
        self._latency = 0.0
        self._bandwidth: float | None = None
        self._blackhole_new: str | None = None  # direction blackholed on new connections
        self._refusing = False
        self._stop_handle: asyncio.TimerHandle | None = None
        self._changed = threading.Condition()
        self._cuts_armed: list[list[Any]] = []  # [up, type number, how many more]
        self.cuts: list[tuple[int, str, float]] = []  # (connection id, command, time) of each cut made
        self._last_cut = 0

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def service_url(self) -> str:
        """``pulsar://127.0.0.1:<port>``."""
        return f"pulsar://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        """Whether the proxy's thread is alive (false after :meth:`stop` or ``max_lifetime``)."""
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> FaultProxy:
        if self._thread is not None:
            return self
        loop = asyncio.new_event_loop()
        self._loop = loop
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run_loop, args=(loop, ready), name=f"fault-proxy-{self.target[1]}",
                                        daemon=True)
        self._thread.start()
        ready.wait(10)
        self._call(self._listen())
        self._stop_handle = None
        loop.call_soon_threadsafe(self._arm_lifetime)
        log.debug("proxy 127.0.0.1:%d -> %s:%d", self.port, *self.target)
        return self

    def _arm_lifetime(self) -> None:
        assert self._loop is not None
        self._stop_handle = self._loop.call_later(self.max_lifetime, self._expire)

    def _expire(self) -> None:
        log.warning("fault proxy on port %d reached its max lifetime (%.0f s); stopping", self.port, self.max_lifetime)
        loop = self._loop
        assert loop is not None
        asyncio.ensure_future(self._shutdown()).add_done_callback(lambda _: loop.stop())

    @staticmethod
    def _run_loop(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        try:
            loop.run_forever()
        finally:
            # Finish what is left (connection tasks) so nothing is destroyed while pending.
            with contextlib.suppress(Exception):
                pending = asyncio.all_tasks(loop)
                for t in pending:
                    t.cancel()
                loop.run_until_complete(asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), 5))
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def stop(self) -> None:
        """Closes the listener and every connection (RST), and ends the thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if loop.is_running():
            with contextlib.suppress(Exception):
                self._call(self._shutdown(), timeout=5)
            loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        self._loop = self._thread = None

    async def _shutdown(self) -> None:
        if self._stop_handle is not None:
            self._stop_handle.cancel()
        await self._close_listener()
        for c in list(self._live.values()):
            c.close("proxy", rst=True)
        self._notify()

    def _call(self, coro: Any, timeout: float = 10.0) -> Any:
        assert self._loop is not None, "proxy not started"
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    # -- listening ---------------------------------------------------------------------

    async def _listen(self) -> None:
        port = self.port or self._want_port
        deadline = time.monotonic() + 5
        while True:
            try:
                self._server = await asyncio.start_server(self._accept, "127.0.0.1", port, reuse_address=True,
                                                          backlog=128)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _close_listener(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1)
            self._server = None

    async def _accept(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        peer = c_writer.get_extra_info("peername") or ("?", 0)
        self._next_id += 1
        info = ProxyConnection(id=self._next_id, client_port=int(peer[1]), opened_at=time.monotonic())
        self.connections.append(info)
        self._notify()
        try:
            u_reader, u_writer = await asyncio.wait_for(asyncio.open_connection(*self.target), self.connect_timeout)
        except (OSError, asyncio.TimeoutError):
            info.closed_at, info.closed_by = time.monotonic(), "upstream-refused"
            abort_with_rst(c_writer)  # what a client sees when the broker is down
            self._notify()
            return
        for w in (c_writer, u_writer):
            sock = w.get_extra_info("socket")
            with contextlib.suppress(Exception):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with contextlib.suppress(Exception):
            info.upstream_port = int(u_writer.get_extra_info("sockname")[1])
        conn = Relay(self, info, c_reader, c_writer, u_reader, u_writer)
        self._live[info.id] = conn
        if self._blackhole_new:
            conn.set_blackholed(True, self._blackhole_new)
        try:
            await conn.run()
        except asyncio.CancelledError:
            # Stopping: end quietly (asyncio's stream callback would log a cancelled handler).
            conn.close("proxy", rst=True)
        finally:
            self._notify()

    # -- faults --------------------------------------------------------------------------

    def drop_connections(self, how: str = "rst") -> int:
        """Closes every live connection on both sides: ``"rst"`` (abortive, SO_LINGER 0) or
        ``"fin"`` (orderly). Returns how many were dropped."""
        if how not in ("rst", "fin"):
            raise ValueError("how must be 'rst' or 'fin'")

        async def go() -> int:
            conns = list(self._live.values())
            for c in conns:
                c.close("proxy", rst=how == "rst")
            return len(conns)

        n = int(self._call(go()))
        self._notify()
        log.debug("proxy %d: dropped %d connections (%s)", self.port, n, how)
        return n

    def blackhole(self, on: bool = True, *, new_connections: bool = True, direction: str = "both") -> list[int]:
        """Stops (``on=True``) or resumes forwarding on every live connection: sockets stay
        open, nothing moves, nothing is closed -- a half-open peer. The proxy stops *reading*
        the silenced side, so its sender's socket buffers fill up as on a dead network path;
        bytes already read are held and delivered if forwarding resumes.

        ``direction``: ``"both"``, ``"up"`` (client -> broker only) or ``"down"`` (broker ->
        client only: the broker gets everything, the client hears nothing back).
        With ``new_connections=False`` connections accepted from now on forward normally while
        the live ones stay silenced (lets a client that detected the dead connection move its
        work to a fresh one). Returns the ids of the connections affected.
        """
        if direction not in ("both", "up", "down"):
            raise ValueError("direction must be 'both', 'up' or 'down'")

        async def go() -> list[int]:
            self._blackhole_new = direction if on and new_connections else None
            ids = []
            for c in self._live.values():
                c.set_blackholed(on, direction)
                ids.append(c.info.id)
            return ids

        return list(self._call(go()))

    def cut_at(self, command: str = "SEND_RECEIPT", *, direction: str = "down", times: int = 1) -> None:
        """Arms a cut: the next ``command`` frame going ``direction`` (``"down"``: broker ->
        client, ``"up"``: client -> broker) is withheld, with everything after it on that
        connection, and the connection is reset (RST) on both sides. Bytes before the frame
        are delivered. Fires on the next ``times`` such frames, on whichever connections
        carry them; :attr:`cuts` lists the cuts made.

        ``cut_at("SEND_RECEIPT")`` is the lost-receipt fault: the broker has stored the
        message, the producer never hears so and sends it again on its next connection.
        """
        if command not in COMMAND_TYPES:
            raise ValueError(f"command must be one of {sorted(COMMAND_TYPES)}")
        if direction not in ("up", "down"):
            raise ValueError("direction must be 'up' or 'down'")
        if times < 1:
            raise ValueError("times must be >= 1")

        async def go() -> None:
            self._cuts_armed.append([direction == "up", COMMAND_TYPES[command], int(times)])

        self._call(go())

    def _pick_cut(self, up: bool, ctype: int) -> bool:
        for rule in self._cuts_armed:
            if rule[0] == up and rule[1] == ctype:
                rule[2] -= 1
                if rule[2] == 0:
                    self._cuts_armed.remove(rule)
                self._last_cut = ctype
                return True
        return False

    def _record_cut(self, info: ProxyConnection, up: bool) -> None:
        name = next((k for k, v in COMMAND_TYPES.items() if v == self._last_cut), "?")
        self.cuts.append((info.id, name, time.monotonic()))
        log.debug("proxy %d: cut connection %d at %s (%s)", self.port, info.id, name, "up" if up else "down")
        self._notify()

    def set_latency(self, seconds: float) -> None:
        """Delays every chunk by ``seconds`` in each direction (order is kept)."""
        if seconds < 0:
            raise ValueError("latency must be >= 0")
        self._latency = float(seconds)

    def set_bandwidth(self, bytes_per_second: float | None) -> None:
        """Caps each direction of each connection at ``bytes_per_second`` (None: no cap)."""
        if bytes_per_second is not None and bytes_per_second <= 0:
            raise ValueError("bandwidth must be positive or None")
        self._bandwidth = bytes_per_second

    def refuse(self, on: bool = True) -> None:
        """Closes (``on=True``) or reopens the listener: new connections are refused
        (ECONNREFUSED) while live ones carry on. Reopening binds the same port."""
        if on == self._refusing:
            return
        self._refusing = on
        self._call(self._close_listener() if on else self._listen())

    def heal(self) -> None:
        """Back to a plain pass-through: no blackhole, no latency, no cap, no armed cut,
        accepting."""

        async def disarm() -> None:
            self._cuts_armed.clear()

        self._call(disarm())
        self.blackhole(False)
        self.set_latency(0)
        self.set_bandwidth(None)
        self.refuse(False)

    # -- observation ---------------------------------------------------------------------

    @property
    def live(self) -> list[ProxyConnection]:
        """The connections open right now."""
        return [c for c in self.connections if c.open and c.closed_by is None]

    @property
    def accepted(self) -> int:
        """How many connections were accepted so far."""
        return len(self.connections)

    @property
    def bytes_forwarded(self) -> int:
        return sum(c.bytes_up + c.bytes_down for c in self.connections)

    def wait_for(self, predicate: Callable[[FaultProxy], bool], timeout: float) -> bool:
        """Waits until ``predicate(self)`` holds (checked on every connection event and every
        50 ms); returns whether it did within ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                if predicate(self):
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, 0.05))

    def wait_for_connections(self, n: int, timeout: float) -> bool:
        """Waits until at least ``n`` connections were accepted in total."""
        return self.wait_for(lambda p: p.accepted >= n, timeout)

    def __repr__(self) -> str:
        return (f"<FaultProxy 127.0.0.1:{self.port} -> {self.target[0]}:{self.target[1]} "
                f"live={len(self._live)} accepted={self.accepted}>")

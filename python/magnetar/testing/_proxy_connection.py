"""One connection through a :class:`~magnetar.testing.faults.FaultProxy`: the record tests
read (:class:`ProxyConnection`), the two pumps that forward it, and the scanner that follows
Pulsar frame boundaries so a cut can act on one command."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import socket
import struct
import time
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["COMMAND_TYPES", "ProxyConnection", "Relay", "abort_with_rst"]

_CHUNK = 64 * 1024


class Proxy(Protocol):
    """What a relayed connection needs of its proxy (``faults.FaultProxy``): the shaping it
    applies, the armed cuts, and the table of live connections."""

    _latency: float
    _bandwidth: float | None
    _live: dict[int, Relay]

    def _pick_cut(self, up: bool, ctype: int) -> bool: ...

    def _record_cut(self, info: ProxyConnection, up: bool) -> None: ...

# BaseCommand.Type numbers (proto/PulsarApi.proto) of the commands a cut can aim at.
COMMAND_TYPES = {
    "SEND": 6, "SEND_RECEIPT": 7, "SEND_ERROR": 8, "MESSAGE": 9, "ACK": 10, "FLOW": 11,
    "SUCCESS": 13, "ERROR": 14, "CLOSE_PRODUCER": 15, "CLOSE_CONSUMER": 16, "PRODUCER_SUCCESS": 17,
    "PING": 18, "PONG": 19, "LOOKUP_RESPONSE": 24, "SEEK": 28, "ACK_RESPONSE": 38,
}
# Larger than any frame a broker sends (5 MB messages by default); past it the stream is not
# Pulsar framing (a TLS connection, a test's echo bytes) and the scanner stops looking.
_MAX_FRAME = 64 * 1024 * 1024
# totalSize (4) + commandSize (4) + the BaseCommand's first field, ``type`` (tag 0x08 and a
# one-byte varint: every type number is below 128).
_HEAD = 10


class _FrameScanner:
    """Follows the frame boundaries of one direction of a connection, chunk by chunk, and
    reports the first frame whose command type a predicate picks.

    Pulsar frames are ``[totalSize u32][commandSize u32][BaseCommand][payload...]``; only the
    first ten bytes of each frame are looked at, so a chunk costs a few integer reads per
    frame. A frame header split across chunks is completed from the next chunk.
    """

    def __init__(self) -> None:
        self.skip = 0  # bytes of the current frame still to pass
        self.head = b""  # the current frame's first bytes, while fewer than _HEAD arrived
        self.lost = False  # not Pulsar framing: stop looking

    def feed(self, data: bytes, pick: Callable[[int], bool]) -> int | None:
        """Scans ``data``; returns the offset in it where the first picked frame starts (0 if
        it started in an earlier chunk), or None."""
        pos, n = 0, len(data)
        while pos < n and not self.lost:
            if self.skip:
                k = min(self.skip, n - pos)
                pos += k
                self.skip -= k
                continue
            start = pos - len(self.head)
            take = min(_HEAD - len(self.head), n - pos)
            self.head += data[pos:pos + take]
            pos += take
            if len(self.head) < _HEAD:
                break
            head, self.head = self.head, b""
            total = int.from_bytes(head[:4], "big")
            if not 6 <= total <= _MAX_FRAME:
                self.lost = True
                break
            self.skip = total + 4 - _HEAD
            if head[8] == 0x08 and head[9] < 0x80 and pick(head[9]):
                return max(start, 0)
        return None


@dataclasses.dataclass
class ProxyConnection:
    """One client connection through the proxy (read-only for tests)."""

    id: int
    client_port: int
    opened_at: float
    upstream_port: int = 0  # the proxy's local port towards the broker (what the broker sees)
    closed_at: float | None = None
    closed_by: str | None = None  # "client", "upstream", "proxy", "upstream-refused", "cut"
    bytes_up: int = 0  # client -> broker
    bytes_down: int = 0  # broker -> client
    blackholed: bool = False
    last_up_at: float | None = None  # time of the last client -> broker bytes forwarded

    @property
    def open(self) -> bool:
        return self.closed_at is None


class Relay:
    """The proxy's side of one connection: two sockets and two pumps."""

    def __init__(self, proxy: Proxy, info: ProxyConnection,
                 c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter,
                 u_reader: asyncio.StreamReader, u_writer: asyncio.StreamWriter) -> None:
        self.proxy = proxy
        self.info = info
        self.c_reader, self.c_writer = c_reader, c_writer
        self.u_reader, self.u_writer = u_reader, u_writer
        # One event per direction, set while that direction forwards.
        self.flowing = {True: asyncio.Event(), False: asyncio.Event()}  # up (client -> broker), down
        for e in self.flowing.values():
            e.set()
        self.tasks: list[asyncio.Task[Any]] = []
        self.scanners = {True: _FrameScanner(), False: _FrameScanner()}

    def set_blackholed(self, on: bool, direction: str = "both") -> None:
        for up in (True, False):
            if direction == "both" or (direction == "up") == up:
                if on:
                    self.flowing[up].clear()
                else:
                    self.flowing[up].set()
        self.info.blackholed = not all(e.is_set() for e in self.flowing.values())

    async def run(self) -> None:
        self.tasks = [
            asyncio.ensure_future(self._pump(self.c_reader, self.u_writer, up=True)),
            asyncio.ensure_future(self._pump(self.u_reader, self.c_writer, up=False)),
        ]
        done, _ = await asyncio.wait(self.tasks, return_when=asyncio.FIRST_COMPLETED)
        who = None
        for t in done:
            if not t.cancelled() and t.exception() is None:
                who = t.result()
        self.close(who or "proxy", rst=who == "cut")

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, up: bool) -> str:
        """Forwards one direction; returns who closed ("client" or "upstream"), or "cut" when
        an armed :meth:`FaultProxy.cut_at` fired on this direction."""
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue(maxsize=64)
        writer_task = asyncio.ensure_future(self._drain(queue, writer, up))
        flowing = self.flowing[up]
        scanner = self.scanners[up]
        pick = functools.partial(self.proxy._pick_cut, up)
        try:
            while True:
                # Blackholed: stop reading, so the sender's socket buffers fill as on a dead
                # network path; what was read already is held, not dropped (TCP would
                # retransmit it once the path heals).
                await flowing.wait()
                try:
                    data = await reader.read(_CHUNK)
                except (ConnectionError, OSError):
                    data = b""
                if not data:
                    return "client" if up else "upstream"
                at = scanner.feed(data, pick)
                if at is not None:
                    # The bytes before the picked frame go out; the frame and everything
                    # after it never do, and the connection is reset (run() sees "cut").
                    if at:
                        await queue.put((time.monotonic(), data[:at]))
                    self.proxy._record_cut(self.info, up)
                    return "cut"
                await queue.put((time.monotonic(), data))
        finally:
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(None)
            if not writer_task.done():
                # let the held bytes go out unless the connection is being torn down
                with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
                    await asyncio.wait_for(asyncio.shield(writer_task), 0.5)
                writer_task.cancel()

    async def _drain(self, queue: asyncio.Queue[tuple[float, bytes] | None], writer: asyncio.StreamWriter, up: bool) -> None:
        proxy = self.proxy
        flowing = self.flowing[up]
        while True:
            item = await queue.get()
            if item is None:
                return
            stamp, data = item
            await flowing.wait()
            delay = stamp + proxy._latency - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            await flowing.wait()
            writer.write(data)
            try:
                await writer.drain()
            except (ConnectionError, OSError):
                return
            if up:
                self.info.bytes_up += len(data)
                self.info.last_up_at = time.monotonic()
            else:
                self.info.bytes_down += len(data)
            if proxy._bandwidth:
                await asyncio.sleep(len(data) / proxy._bandwidth)

    def close(self, by: str, rst: bool) -> None:
        if self.info.closed_at is None:
            self.info.closed_at = time.monotonic()
            self.info.closed_by = by
        for t in self.tasks:
            t.cancel()
        for w in (self.c_writer, self.u_writer):
            if rst:
                abort_with_rst(w)
            else:
                with contextlib.suppress(Exception):
                    w.close()
        self.proxy._live.pop(self.info.id, None)


def abort_with_rst(writer: asyncio.StreamWriter) -> None:
    """Closes the connection with a TCP reset (SO_LINGER 0) instead of a FIN."""
    sock = writer.get_extra_info("socket")
    with contextlib.suppress(Exception):
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(Exception):
        writer.transport.abort()

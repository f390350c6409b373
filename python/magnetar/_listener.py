"""Push-style consumption: a handler called for each message with bounded concurrency, in
order per key, acked when it returns and negatively acked (redelivered, then dead-lettered
after ``max_redeliver_count``) when it raises. RocketMQ calls this a push consumer."""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Awaitable, Callable, Deque, Hashable

from . import telemetry
from ._core import Message
from .exceptions import AlreadyClosed, TopicTerminated

__all__ = ["AsyncListenerRunner", "AsyncReaderListener", "ListenerRunner", "ReaderListener"]

_log = logging.getLogger("magnetar")


def _ordering(msg: Message) -> Hashable:
    """Messages sharing an ordering key (else a key) run one at a time, in order; keyless
    messages run freely."""
    if msg.ordering_key is not None:
        return ("o", msg.ordering_key)
    if msg.key is not None:
        return ("k", msg.key)
    return ("m", msg.message_id)


class ListenerRunner:
    """Feeds a blocking consumer's messages to ``handler`` on ``concurrency`` worker threads."""

    def __init__(self, core: Any, handler: Callable[[Message], object], concurrency: int) -> None:
        self._core = core
        self._handler = handler
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="magnetar-listener")
        self._slots = threading.Semaphore(concurrency * 2)
        self._lock = threading.Lock()
        self._waiting: dict[Hashable, Deque[Message]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._pump, name="magnetar-listener-pump", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        while not self._stop.is_set():
            try:
                batch = self._core.receive_many(100, 0.2)
            except (AlreadyClosed, TopicTerminated):
                return
            except Exception:
                _log.exception("listener: receive failed; retrying")
                continue
            for msg in batch:
                self._slots.acquire()
                self._enqueue(msg)

    def _enqueue(self, msg: Message) -> None:
        key = _ordering(msg)
        with self._lock:
            queue = self._waiting.get(key)
            if queue is not None:  # the key is busy: run after the ones before it
                queue.append(msg)
                return
            self._waiting[key] = collections.deque()
        self._pool.submit(self._run, key, msg)

    def _run(self, key: Hashable, msg: Message) -> None:
        while True:
            try:
                with telemetry.processing(msg, self._core.subscription):
                    self._handler(msg)
            except Exception:
                _log.exception("listener raised for %s; redelivering", msg.message_id)
                self._settle(self._core.nack, msg)
            else:
                self._settle(self._core.ack, msg)
            self._slots.release()
            with self._lock:
                queue = self._waiting[key]
                if not queue:
                    del self._waiting[key]
                    return
                msg = queue.popleft()

    @staticmethod
    def _settle(action: Callable[[Message], None], msg: Message) -> None:
        try:
            action(msg)
        except AlreadyClosed:
            pass

    def stop(self) -> None:
        """Stops taking messages and waits for running handlers."""
        self._stop.set()
        self._thread.join(timeout=5)
        self._pool.shutdown(wait=True)


class AsyncListenerRunner:
    """Feeds an asyncio consumer's messages to the coroutine ``handler`` as tasks."""

    def __init__(self, consumer: Any, handler: Callable[[Message], Awaitable[object]], concurrency: int) -> None:
        self._consumer = consumer
        self._handler = handler
        self._slots = asyncio.Semaphore(concurrency)
        self._chains: dict[Hashable, asyncio.Future[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._pump_task = asyncio.get_running_loop().create_task(self._pump())

    async def _pump(self) -> None:
        while True:
            try:
                msgs = await self._consumer.receive_many(100, 0.2)
            except (AlreadyClosed, TopicTerminated):
                return
            for msg in msgs:
                await self._slots.acquire()
                key = _ordering(msg)
                before = self._chains.get(key)
                task = asyncio.get_running_loop().create_task(self._run(key, msg, before))
                self._chains[key] = task
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _run(self, key: Hashable, msg: Message, before: asyncio.Future[None] | None) -> None:
        try:
            if before is not None:
                await asyncio.shield(before)
        except Exception:
            pass
        try:
            with telemetry.processing(msg, self._consumer._core.subscription):
                await self._handler(msg)
        except Exception:
            _log.exception("listener raised for %s; redelivering", msg.message_id)
            settle = self._consumer.nack
        else:
            settle = self._consumer.ack
        try:
            settle(msg)
        except AlreadyClosed:
            pass
        finally:
            self._slots.release()
            if self._chains.get(key) is asyncio.current_task():
                del self._chains[key]

    async def stop(self) -> None:
        self._pump_task.cancel()
        try:
            await self._pump_task
        except asyncio.CancelledError:
            pass
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


class ReaderListener:
    """Feeds a blocking reader's messages, in order, to ``handler`` on a thread of its own;
    a handler that raises is logged and reading goes on (a reader acknowledges nothing)."""

    def __init__(self, reader: Any, handler: Callable[[Message], object]) -> None:
        self._reader, self._handler = reader, handler
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._pump, name="magnetar-reader-listener", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        while not self._stop.is_set():
            try:
                batch = self._reader.read_many(100, 0.2)
            except (AlreadyClosed, TopicTerminated):
                return
            except Exception:
                _log.exception("reader listener: read failed; retrying")
                continue
            for msg in batch:
                try:
                    self._handler(msg)
                except Exception:
                    _log.exception("reader listener raised for %s; reading on", msg.message_id)

    def stop(self) -> None:
        """Stops reading and waits for the running handler."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)


class AsyncReaderListener:
    """The asyncio form of :class:`ReaderListener`: a task awaiting the coroutine ``handler``
    for each message, in order."""

    def __init__(self, reader: Any, handler: Callable[[Message], Awaitable[object]]) -> None:
        self._reader, self._handler = reader, handler
        self._task = asyncio.get_running_loop().create_task(self._pump())

    async def _pump(self) -> None:
        while True:
            try:
                msgs = await self._reader.read_many(100, 0.2)
            except (AlreadyClosed, TopicTerminated):
                return
            for msg in msgs:
                try:
                    await self._handler(msg)
                except Exception:
                    _log.exception("reader listener raised for %s; reading on", msg.message_id)

    async def stop(self) -> None:
        if self._task is asyncio.current_task():
            return
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass

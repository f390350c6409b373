"""``Producer``, ``Consumer`` and ``Reader`` of the compatibility API."""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import Any, Callable

from .. import _client as _native
from .. import _core
from .. import exceptions as _nexc
from .. import telemetry as _tm
from .._core import MessageId as _NativeId
from .._options import SubscriptionType
from ._message import Message, _result_of
from ._config import ConsumerBatchReceivePolicy, check_type, check_type_or_none
from ._handles import ConsumerAccessors, ProducerAccessors, ReceivingAccessors, seek_target
from ._pulsar import MessageId, Result, native_id
from .exceptions import (CumulativeAcknowledgementNotAllowedError, Interrupted, InvalidConfiguration,
                         OperationNotSupported, mapped, translate)
from ._transaction import Transaction, native_txn
from .schema import Schema
from ..schema import BytesSchema as _NativeBytes

__all__ = ["Consumer", "Producer", "Reader"]

_log = logging.getLogger("magnetar.compat")


# The official send arguments that become native message fields: (name, type, native name).
_FIELDS = (("properties", dict, "properties"), ("partition_key", str, "key"), ("ordering_key", str, "ordering_key"),
           ("sequence_id", int, "sequence_id"), ("event_timestamp", int, "event_time"), ("deliver_at", int, "deliver_at"),
           ("deliver_after", timedelta, "deliver_after"))


def _fields(properties: Any, partition_key: Any, ordering_key: Any, sequence_id: Any, replication_clusters: Any,
            disable_replication: Any, event_timestamp: Any, deliver_at: Any, deliver_after: Any) -> dict[str, Any]:
    check_type_or_none(list, replication_clusters, "replication_clusters")
    check_type(bool, disable_replication, "disable_replication")
    fields: dict[str, Any] = {}
    for (name, kind, native), value in zip(_FIELDS, (properties, partition_key, ordering_key, sequence_id,
                                                     event_timestamp, deliver_at, deliver_after)):
        check_type_or_none(kind, value, name)
        if value is not None:
            fields[native] = value
    # As the official client: disabling replication wins over a list of clusters.
    if disable_replication:
        fields["disable_replication"] = True
    elif replication_clusters:
        fields["replication_clusters"] = replication_clusters
    return fields


class Producer(ProducerAccessors):
    """Publishes to a topic. ``send`` waits for the broker's receipt; ``send_async`` calls
    ``callback(result, msg_id)`` on the client's dispatch thread."""

    __slots__ = ("_p", "_fast", "_schema", "_bytes", "_owner", "__weakref__")

    def __init__(self, native: _native.Producer, schema: Schema) -> None:
        self._p, self._schema = native, schema
        self._fast = _core._CompatProducer(native._core)
        self._bytes = isinstance(schema, _NativeBytes)
        self._owner: set[Any] | None = None
        _tm.register(self)

    def _content(self, content: Any) -> Any:
        if content is None:
            return None  # a null value (a tombstone)
        if self._bytes and not isinstance(content, (bytes, bytearray, memoryview)):
            raise TypeError(f"content must be bytes, not {type(content).__name__}")
        return content

    def send(self, content: Any, properties: dict[str, str] | None = None, partition_key: str | None = None,
             ordering_key: str | None = None, sequence_id: int | None = None,
             replication_clusters: list[str] | None = None, disable_replication: bool = False,
             event_timestamp: int | None = None, deliver_at: int | None = None,
             deliver_after: timedelta | None = None, *, txn: Transaction | None = None) -> MessageId:
        """Sends and waits for the receipt; ``txn`` (magnetar's addition, from
        ``client.new_transaction()``) sends inside a transaction."""
        data = self._content(content)
        fields = _fields(properties, partition_key, ordering_key, sequence_id, replication_clusters,
                         disable_replication, event_timestamp, deliver_at, deliver_after)
        if txn is not None:
            fields["txn"] = native_txn(txn)
        with mapped():
            return MessageId._of(self._p.send(data, **fields))

    def send_async(self, content: Any, callback: Callable[[Result, Any], Any] | None,
                   properties: dict[str, str] | None = None, partition_key: str | None = None,
                   ordering_key: str | None = None, sequence_id: int | None = None,
                   replication_clusters: list[str] | None = None, disable_replication: bool = False,
                   event_timestamp: int | None = None, deliver_at: int | None = None,
                   deliver_after: timedelta | None = None, *, txn: Transaction | None = None) -> None:
        if (properties is None and partition_key is None and ordering_key is None and sequence_id is None
                and replication_clusters is None and disable_replication is False and event_timestamp is None
                and deliver_at is None and deliver_after is None and txn is None):
            fields = None  # the common case, kept short: this runs once per message
        else:
            fields = _fields(properties, partition_key, ordering_key, sequence_id, replication_clusters,
                             disable_replication, event_timestamp, deliver_at, deliver_after)
            if txn is not None:
                fields["txn"] = native_txn(txn)
        self._send_async(content, callback, fields)

    def _send_async(self, content: Any, callback: Callable[[Result, Any], Any] | None,
                    fields: dict[str, Any] | None) -> None:
        # The engine checks the content, queues, and calls back with (result, msg_id).
        self._fast.send_async(content, callback, fields)

    def _native_send_async(self, content: Any, callback: Callable[[Result, Any], Any] | None,
                           fields: dict[str, Any] | None) -> None:
        """``send_async`` through the native producer (whose traced twin traces it)."""
        data = self._content(content)
        try:
            future = self._p.send_async(data) if fields is None else self._p.send_async(data, **fields)
        except _nexc.PulsarError as e:
            raise translate(e) from e
        if callback is not None:
            def done(f: Any) -> None:
                error = f.exception()
                try:
                    if error is None:
                        callback(Result.Ok, MessageId._of(f.result()))
                    else:
                        callback(_result_of(error), None)
                except Exception:
                    # The official client aborts the process here (its callbacks run in C++);
                    # magnetar logs and goes on.
                    _log.exception("send_async callback raised")

            future.add_done_callback(done)

    def flush(self) -> None:
        with mapped():
            self._p.flush()

    def close(self) -> None:
        if self._owner is not None:
            self._owner.discard(self)
        with mapped():
            self._p.close()


class _Receiving(ReceivingAccessors):
    __slots__ = ("_c", "_fast", "_schema", "_thread", "_inclusive", "_floor", "_owner", "__weakref__")

    def __init__(self, native: Any, schema: Schema, inclusive: bool = False) -> None:
        self._c, self._schema = native, schema
        self._fast = _core._CompatReceiving(native._core)
        self._thread: threading.Thread | None = None
        self._inclusive = inclusive
        self._floor: _NativeId | None = None  # see ReceivingAccessors._floor_after_seek
        self._owner: set[Any] | None = None
        _tm.register(self)

    def _listen(self, listener: Callable[[Any, Message], Any]) -> None:
        # The official listener neither acks nor nacks for the user (magnetar's own listener
        # acks on return), so it runs on a thread of its own, one message at a time.
        def run() -> None:
            while True:
                try:
                    msg = self._c._next(None)
                except (_nexc.AlreadyClosed, _nexc.TopicTerminated):
                    return
                except Exception:
                    _log.exception("message listener stopped")
                    return
                try:
                    listener(self, Message._of(msg))
                except Exception:
                    _log.exception("message listener raised; the message is neither acked nor nacked")

        thread = threading.Thread(target=run, name="magnetar-compat-listener", daemon=True)
        self._thread = thread
        thread.start()

    def _receive(self, timeout_millis: int | None) -> Message:
        if self._floor is None and self._thread is None:
            # The common case, in the engine: milliseconds, the compat message and exceptions.
            return self._fast.receive(timeout_millis)  # type: ignore[no-any-return]
        return self._native_receive(timeout_millis)

    def _native_receive(self, timeout_millis: int | None) -> Message:
        """``_receive`` through the native handle (whose traced twin traces it)."""
        # Plain try/except rather than mapped() (a generator context manager).
        if timeout_millis is None:
            timeout = None
        elif isinstance(timeout_millis, int) and not isinstance(timeout_millis, bool):
            timeout = timeout_millis / 1000
        else:
            raise ValueError(f"Argument timeout_millis is expected to be of type 'int' and not "
                             f"'{type(timeout_millis).__name__}'")
        if self._thread is not None:
            raise InvalidConfiguration("receive() is not allowed while a message listener is set")
        try:
            msg = self._c._next(timeout)
            if self._floor is not None:
                deadline = None if timeout is None else time.monotonic() + timeout
                while _not_after(msg.message_id, self._floor):
                    left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
                    msg = self._c._next(left)
                self._floor = None
        except _nexc.PulsarError as e:
            raise translate(e) from e
        except KeyboardInterrupt as e:
            raise Interrupted("interrupted") from e
        return Message._of(msg)

    def seek(self, messageid: Any) -> None:
        target = seek_target(messageid)
        with mapped():
            self._c.seek(target)
        self._floor = self._floor_after_seek(target)

    def close(self) -> None:
        if self._owner is not None:
            self._owner.discard(self)
        with mapped():
            self._c.close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)


class Consumer(_Receiving, ConsumerAccessors):
    """Receives the messages of a subscription; timeouts in milliseconds."""

    __slots__ = ("_policy", "_name", "_individual_only")

    def __init__(self, native: _native.Consumer, schema: Schema, listener: Any,
                 policy: ConsumerBatchReceivePolicy | None, options: dict[str, Any], inclusive: bool = False) -> None:
        super().__init__(native, schema, inclusive)
        self._policy = policy
        self._name = options.get("consumer_name") or ""
        self._individual_only = options.get("subscription_type") in (SubscriptionType.SHARED, SubscriptionType.KEY_SHARED)
        if listener is not None:
            self._listen(listener)

    def unsubscribe(self) -> None:
        with mapped():
            self._c.unsubscribe()

    def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message; raises ``Timeout`` after ``timeout_millis`` milliseconds."""
        if self._floor is None and self._thread is None:
            # As in _receive, without its frame: this runs once per message.
            return self._fast.receive(timeout_millis)  # type: ignore[no-any-return]
        return self._native_receive(timeout_millis)

    def batch_receive(self) -> list[Message]:
        p = self._policy
        most = p.max_num_message if p is not None and p.max_num_message > 0 else 100
        wait = p.timeout_ms / 1000 if p is not None and p.timeout_ms > 0 else 0.1
        limit = p.max_num_bytes if p is not None and p.max_num_bytes > 0 else None
        with mapped():
            msgs = self._c.receive_many(most, wait, limit)
        return [Message._of(m) for m in msgs]

    def _checked(self, message: Any) -> Any:
        target = _target(message)
        if isinstance(target, _NativeId) and target.topic is None and len(self._c.topics) > 1:
            raise OperationNotSupported("a message id without its topic cannot be acknowledged on a consumer of "
                                        "several topics (MessageId.deserialize(data, topic=...) gives one)")
        return target

    def acknowledge(self, message: Any, txn: Transaction | None = None) -> None:
        """Acknowledges one message; with ``txn`` (magnetar's addition) inside that transaction."""
        if txn is None and type(message) is Message:
            self._fast.ack(message)  # the common case, in the engine
            return
        target = self._checked(message)
        try:
            self._c.ack(target, native_txn(txn))
        except _nexc.PulsarError as e:
            raise translate(e) from e

    def acknowledge_cumulative(self, message: Any, txn: Transaction | None = None) -> None:
        """Acknowledges up to a message; with ``txn`` (magnetar's addition) inside that transaction."""
        if self._individual_only:
            raise CumulativeAcknowledgementNotAllowedError(
                "cumulative acknowledgement is not allowed on Shared and Key_Shared subscriptions")
        self._checked(message)
        with mapped():
            self._c.ack_cumulative(_target(message), native_txn(txn))

    def negative_acknowledge(self, message: Any) -> None:
        with mapped():
            self._c.nack(_target(message))

    def pause_message_listener(self) -> None:
        self._c.pause()

    def resume_message_listener(self) -> None:
        self._c.resume()

    def redeliver_unacknowledged_messages(self) -> None:
        with mapped():
            self._c.redeliver_unacknowledged()

    def get_last_message_id(self) -> MessageId:
        with mapped():
            return MessageId._of(self._c.get_last_message_id())


def _not_after(msg_id: _NativeId, floor: _NativeId) -> bool:
    """Whether a message is at or before a seek target (same partition only)."""
    if msg_id.partition != floor.partition:
        return False
    return (msg_id.ledger_id, msg_id.entry_id, msg_id.batch_index) <= (floor.ledger_id, floor.entry_id,
                                                                      floor.batch_index)


def _target(message: Any) -> Any:
    if isinstance(message, Message):
        return message._id
    return native_id(message, "message")


class Reader(_Receiving):
    """Reads a topic from a message id; timeouts in milliseconds."""

    __slots__ = ()

    def read_next(self, timeout_millis: int | None = None) -> Message:
        return self._receive(timeout_millis)

    def has_message_available(self) -> bool:
        with mapped():
            return self._c.has_message_available()

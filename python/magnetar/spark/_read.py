"""Reading between message ids: planning on the driver, reading on the executors."""

from __future__ import annotations

import json
import logging
import re
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import InputPartition

from .._client import Client, Reader
from .._config import ClientConfig
from .._core import MessageId, _ArrowLayout, _duration_seconds, _RangeScan
from ..exceptions import ConnectError, InvalidConfiguration, PulsarError, Timeout
from . import _workers
from ._options import (
    INT32_MAX,
    PartitionRef,
    SourceOptions,
    decode_id,
    encode_id,
    id_key,
)

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["DataLossError", "PulsarSplit", "last_message_id", "read_split", "resolve_partitions", "split_range"]

log = logging.getLogger("magnetar.spark")


class DataLossError(PulsarError):
    """Messages that a read was supposed to cover are gone (deleted by retention, or the
    topic was deleted and re-created). Set ``failOnDataLoss`` to ``false`` to log and go on."""


# -- driver side ----------------------------------------------------------------------------


def _admin_get(admin_url: str, path: str, opts: SourceOptions) -> Any:
    req = urllib.request.Request(admin_url + path, headers={"Accept": "application/json"})
    conf = opts.client
    auth = conf.authentication  # type: ignore[attr-defined]
    header = auth._http_authorization() if auth is not None else None
    if header:
        req.add_header("Authorization", header)
    try:
        timeout = _duration_seconds(conf.operation_timeout, "operation_timeout")
        with urllib.request.urlopen(req, timeout=timeout, context=_admin_tls(admin_url, conf)) as resp:
            return json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise InvalidConfiguration(f"pulsar data source: admin request {path} failed: HTTP {e.code} {e.reason}") from None
    except urllib.error.URLError as e:
        raise InvalidConfiguration(f"pulsar data source: option 'admin_url': cannot reach {admin_url}: {e.reason}") from None


def _admin_tls(admin_url: str, conf: ClientConfig) -> ssl.SSLContext | None:
    """An ``https://`` admin URL trusts and authenticates as the binary protocol does."""
    if not admin_url.lower().startswith("https://"):
        return None
    try:
        ctx = ssl.create_default_context(cafile=conf.tls_trust_certs_file_path)
        if conf.tls_allow_insecure_connection or not conf.tls_validate_hostname:
            ctx.check_hostname = False
        if conf.tls_allow_insecure_connection:
            ctx.verify_mode = ssl.CERT_NONE
        if conf.tls_certificate_file_path and conf.tls_private_key_file_path:
            ctx.load_cert_chain(conf.tls_certificate_file_path, conf.tls_private_key_file_path)
    except (OSError, ssl.SSLError) as e:
        raise InvalidConfiguration(f"pulsar data source: TLS files for {admin_url}: {e}") from None
    return ctx


def _topic_path(topic: str) -> str:
    domain, rest = topic.split("://", 1)
    return f"/admin/v2/{domain}/" + "/".join(urllib.parse.quote(p, safe="") for p in rest.split("/"))


def _topic_exists(opts: SourceOptions, topic: str) -> bool:
    assert opts.admin_url
    domain, rest = topic.split("://", 1)
    tenant, ns, _ = rest.split("/", 2)
    listed = set(_admin_get(opts.admin_url, f"/admin/v2/{domain}/{tenant}/{ns}", opts) or [])
    listed |= set(_admin_get(opts.admin_url, f"/admin/v2/{domain}/{tenant}/{ns}/partitioned", opts) or [])
    return topic in listed


def _pattern_topics(client: Client, opts: SourceOptions) -> list[str]:
    """The topics whose full name matches ``topicsPattern``: listed with the binary protocol's
    GetTopicsOfNamespace (persistent topics; no admin URL needed), or with the admin API for a
    ``non-persistent://`` pattern."""
    assert opts.topics_pattern
    pattern = opts.topics_pattern
    m = re.match(r"^(persistent|non-persistent)://([^/]+)/([^/]+)/", pattern)
    domain, tenant, ns = (m.group(1), m.group(2), m.group(3)) if m else ("persistent", "public", "default")
    if not m:
        pattern = f"{domain}://{tenant}/{ns}/" + pattern
    regex = re.compile(pattern)
    names: set[str] = set()
    if domain == "persistent":
        for t in client.get_topics_of_namespace(f"{tenant}/{ns}"):
            names.add(re.sub(r"-partition-\d+$", "", t))
    else:
        if not opts.admin_url:
            raise InvalidConfiguration("pulsar data source: option 'topicsPattern': listing non-persistent "
                                       "topics needs 'admin.url'")
        names |= set(_admin_get(opts.admin_url, f"/admin/v2/{domain}/{tenant}/{ns}/partitioned", opts) or [])
        for t in _admin_get(opts.admin_url, f"/admin/v2/{domain}/{tenant}/{ns}", opts) or []:
            base = re.sub(r"-partition-\d+$", "", t)
            names.add(base if base in names else t)
    return sorted(t for t in names if regex.fullmatch(t))


def check_topics_exist(opts: SourceOptions) -> None:
    """Raises unless every named topic exists (needs ``admin_url``)."""
    option = "topic" if opts.topic else "topics"
    for t in opts.read_topics():
        if not _topic_exists(opts, t):
            raise InvalidConfiguration(f"pulsar data source: option '{option}': topic {t!r} does not exist")


def resolve_partitions(client: Client, opts: SourceOptions, *, check_exists: bool = True) -> list[PartitionRef]:
    """Every topic partition to read, in a stable order."""
    if opts.topics_pattern:
        topics = _pattern_topics(client, opts)
    else:
        topics = opts.read_topics()
        if check_exists and opts.admin_url and not opts.waiting_for_non_existed_topic:
            check_topics_exist(opts)
    refs = []
    for t in topics:
        try:
            n = client.get_partition_count(t)
        except PulsarError as e:
            option = "topicsPattern" if opts.topics_pattern else ("topic" if opts.topic else "topics")
            raise type(e)(f"pulsar data source: option '{option}': topic {t!r}: {e}") from None
        refs.extend([PartitionRef(t, i) for i in range(n)] if n > 0 else [PartitionRef(t, -1)])
    return sorted(refs)


def last_message_id(client: Client, ref: PartitionRef) -> MessageId:
    """The id of the last message of one topic partition ((-1, -1) when it is empty)."""
    reader = client.create_reader(ref.name, start=MessageId.latest, receiver_queue_size=1)
    try:
        return reader.get_last_message_id()
    finally:
        reader.close()


def predecessor(mid: MessageId) -> MessageId:
    """An exclusive start id that makes ``mid`` the first message read."""
    if mid.batch_index >= 1:
        return MessageId(mid.ledger_id, mid.entry_id, -1, mid.batch_index - 1)
    # after every message of the previous entry (never (l, e, -1): whether that excludes a
    # batch at entry e is a reader convention, while this is not ambiguous)
    return MessageId(mid.ledger_id, mid.entry_id - 1, -1, INT32_MAX)


def has_message_available(reader: Reader, timeout: float) -> bool:
    """``reader.has_message_available()``, retried while the reader reconnects.

    Engine issue (reported): right after a seek by time -- ``create_reader(start=<time>)``
    seeks -- the broker detaches the consumer, and ``has_message_available()`` raises
    ``ConnectError('not connected')`` until it is attached again instead of waiting for it;
    while it re-subscribes (a topic deleted and re-created during a read), the broker answers
    ``Consumer not found``. Both are retried until ``timeout``.
    """
    deadline = time.monotonic() + timeout
    delay = 0.02
    while True:
        try:
            return reader.has_message_available()
        except PulsarError as e:
            # "Consumer not found": asked while the reader re-subscribes (after a reconnect, or
            # to a topic deleted and re-created during the read)
            if not (isinstance(e, ConnectError) or "Consumer not found" in str(e)):
                raise
            if time.monotonic() + delay > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


def first_id_at(client: Client, ref: PartitionRef, at_ms: int, timeout: float) -> MessageId | None:
    """The id of the first message published at or after ``at_ms`` (None: there is none yet)."""
    reader = client.create_reader(ref.name, start=at_ms if at_ms > 0 else MessageId.earliest, receiver_queue_size=10)
    try:
        if not has_message_available(reader, timeout):
            return None
        return reader.read_next(timeout=timeout).message_id
    finally:
        reader.close()


class PulsarSplit(InputPartition):
    """A range of one topic partition: messages after ``start`` (exclusive; or from
    ``start_time``) up to ``end`` (inclusive), published before ``end_time`` if set."""

    def __init__(self, topic: str, partition: int, start: str | None, end: str,
                 start_time: int | None = None, end_time: int | None = None, check_gaps: bool = True) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end
        self.start_time = start_time
        self.end_time = end_time
        self.check_gaps = check_gaps

    @property
    def ref(self) -> PartitionRef:
        return PartitionRef(self.topic, self.partition)

    def __repr__(self) -> str:
        s = self.start if self.start_time is None else f"time {self.start_time}"
        return f"PulsarSplit({self.ref.name}, ({_fmt(s)}, {_fmt(self.end)}])"


def _fmt(hex_id: Any) -> str:
    if not isinstance(hex_id, str):
        return str(hex_id)
    try:
        return str(MessageId.deserialize(bytes.fromhex(hex_id)))
    except Exception:  # noqa: BLE001
        return hex_id


def split_range(ref: PartitionRef, start: MessageId, end: MessageId, max_entries: int | None,
                **kw: Any) -> list[PulsarSplit]:
    """One split, or several of at most ``max_entries`` entries when both ends are in the
    same ledger (entry ids are only comparable within a ledger)."""
    p = ref.index
    if (max_entries is None or start.ledger_id != end.ledger_id or start.ledger_id < 0
            or end.entry_id - max(start.entry_id, 0) <= max_entries):
        return [PulsarSplit(ref.topic, p, encode_id(start, p), encode_id(end, p), **kw)]
    splits = []
    lo = start
    first_entry = start.entry_id if start.batch_index >= 0 else start.entry_id + 1
    boundary = first_entry + max_entries - 1
    while boundary < end.entry_id:
        hi = MessageId(start.ledger_id, boundary, -1, INT32_MAX)  # after every message of entry `boundary`
        splits.append(PulsarSplit(ref.topic, p, encode_id(lo, p), encode_id(hi, p), **kw))
        lo = hi
        boundary += max_entries
    splits.append(PulsarSplit(ref.topic, p, encode_id(lo, p), encode_id(end, p), **kw))
    return splits


# -- executor side --------------------------------------------------------------------------


def _data_loss(opts: SourceOptions, what: str) -> None:
    msg = f"pulsar data source: possible data loss: {what}"
    if opts.fail_on_data_loss:
        raise DataLossError(msg + " (set failOnDataLoss=false to log and continue)")
    log.warning("%s", msg)


# Messages a split's reader queues (its default receiver_queue_size): enough for a record
# batch to fill from the queue while the broker refills it.
READ_QUEUE_SIZE = 10_000


def is_real_position(mid: MessageId) -> bool:
    """Whether ``mid`` is the id of a message (an offset Spark checkpointed), not a position
    made up between messages (``predecessor``, split boundaries, earliest)."""
    return mid.ledger_id >= 0 and mid.entry_id >= 0 and mid.batch_index < INT32_MAX


def read_split(opts: SourceOptions, arrow_schema: pa.Schema, split: PulsarSplit,
               values: Any = None) -> Iterator[pa.RecordBatch]:
    """The messages of ``split`` as Arrow record batches of ``arrow_schema``.

    The engine fills the columns and decides which messages belong to the range
    (``_core._RangeScan``, whose rules are in the engine's ``src/columnar/scan.rs``): a chunked message belongs to the split
    that holds its first chunk. A split that starts at a message id re-reads that message
    first: if it is gone and the read resumes in a later ledger, retention (or a deleted
    topic) removed messages of the range, which is data loss (``failOnDataLoss``)."""
    import pyarrow as pa

    end = decode_id(split.end)
    assert isinstance(end, MessageId)
    start: MessageId | None = None
    if split.start is not None:
        s = decode_id(split.start)
        assert isinstance(s, MessageId)
        start = s
        if id_key(start) >= id_key(end):
            return
    client = _workers.client(opts.client)
    name = split.ref.name
    reader_kw = opts.reader_kwargs
    reader_kw.setdefault("receiver_queue_size", READ_QUEUE_SIZE)
    verify = False
    if start is not None:
        verify = split.check_gaps and is_real_position(start)
        reader = client.create_reader(name, start=start, start_inclusive=verify, **reader_kw)
    else:
        reader = client.create_reader(name, start=split.start_time or 0, **reader_kw)
    # with the topic's schema (a _schema.TopicSchema), its columns are the decoded payload
    engine_values = None if values is None else values.engine(client, name)
    layout = _ArrowLayout(arrow_schema, split.topic, split.partition, engine_values)
    # The end of a micro-batch or of a whole-partition split is a message that must come; a
    # compacted read may skip it (superseded), and a split boundary is no message.
    end_is_message = split.check_gaps and is_real_position(end) and not reader_kw.get("read_compacted")
    scan = _RangeScan(name, start, verify, end, split.end_time, end_is_message=end_is_message)
    per_batch = opts.records_per_batch
    poll = opts.poll_timeout_ms / 1000.0
    core = reader._core
    try:
        deadline = time.monotonic() + poll
        while not scan.done:
            got = core.receive_arrow(layout, per_batch, 0.2, scan)
            if got.loss is not None:
                _data_loss(opts, got.loss)
            if not got.messages_read:
                if not has_message_available(reader, poll):
                    if not scan.reached_end:
                        _data_loss(opts, f"{name}: the read ended at {scan.last_key} before the end of its range "
                                         f"{end}: its messages are gone (was the topic deleted or truncated?)")
                    break
                if time.monotonic() > deadline:
                    raise Timeout(f"pulsar data source: no message from {name} within pollTimeoutMs="
                                  f"{opts.poll_timeout_ms} (read up to {scan.last_key}, range ends at {end})")
                continue
            deadline = time.monotonic() + poll
            if got.num_rows:
                yield pa.record_batch(got)
    finally:
        try:
            reader.close()
        except PulsarError:
            pass

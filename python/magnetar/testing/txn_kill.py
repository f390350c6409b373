"""Exactly once under kill -9: a consume-transform-produce worker, killed mid-transaction over
and over, must leave every input reflected exactly once in the output.

:func:`kill_loop` writes ``inputs`` numbered messages to an input topic, then starts a worker
process and SIGKILLs it a random 0.05-0.5 s after it received its first message, ``kills``
times (a worker that gets none within ``txn_timeout + 5`` s is killed idle), so kills land
mid-stream, most inside a transaction. Each worker subscribes and loops: receive up to 5
messages, send ``out-<n>`` for each in a transaction, acknowledge them in it, commit. A killed
worker leaves a transaction open, which the coordinator aborts at its timeout
(``txn_timeout``): its outputs are dropped and its acks undone, and a later worker gets those
inputs again. After the kills, workers run unkilled until the output holds every input (or
``rounds`` of them gave up). Then a reader counts every output: missing and duplicated inputs
must both be zero.

:data:`CASES` names the shapes (:class:`Shape`): the four subscription types; individual,
cumulative and batch-index acks; unbatched, batched and chunked input; output to a plain or a
partitioned topic. With :data:`TRACE_ENV` set, each worker records what each of its
transactions received and how it ended, and the input's stats are saved at the end: the
evidence a failed run leaves.

Used by ``scripts/txn_kill.py`` (``scripts/dev txn-kill``; results in docs/transactions.md)
and by the test suite (``tests/test_txn_kill.py``, one small loop). The worker runs as
``python -m magnetar.testing.txn_kill --worker ...``.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import os
import random
import select
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable

import magnetar

__all__ = ["CASES", "KillLoop", "Shape", "kill_loop"]

BATCH = 5


@dataclasses.dataclass(frozen=True)
class Shape:
    """What one loop varies: how its input is stored and acknowledged, where its output goes."""

    #: ``shared``, ``key_shared``, ``failover`` or ``exclusive``.
    subscription: str
    #: ``individual`` (one ack per message, by batch index inside a batch) or ``cumulative``
    #: (one per transaction, of its last message).
    ack: str
    #: The input was produced in batches (so acked by batch index).
    batched: bool = False
    #: Each input is a chunked message (three chunks).
    chunked: bool = False
    #: The output topic's partitions (0: not partitioned).
    out_partitions: int = 0

    def describe(self) -> str:
        how = ("chunked" if self.chunked else "batched" if self.batched else "unbatched") + " input"
        out = f", output to {self.out_partitions} partitions" if self.out_partitions else ""
        return f"{self.subscription} subscription, {self.ack} acks, {how}{out}"


CASES = {
    "shared": Shape("shared", "individual"),
    "shared-batched": Shape("shared", "individual", batched=True),
    "key_shared-batched": Shape("key_shared", "individual", batched=True),
    "failover": Shape("failover", "cumulative"),
    "failover-batched": Shape("failover", "cumulative", batched=True),
    "failover-individual-batched": Shape("failover", "individual", batched=True),
    "exclusive-batched": Shape("exclusive", "cumulative", batched=True),
    "shared-chunked": Shape("shared", "individual", chunked=True),
    "failover-chunked": Shape("failover", "cumulative", chunked=True),
    "shared-partitioned-out": Shape("shared", "individual", batched=True, out_partitions=3),
}

#: Seconds a worker spends on each transaction's inputs, at random in this range.
WORK = (0.05, 0.15)

#: Chunked input: payload bytes per chunk, and each input's size (three chunks).
CHUNK = 1024
CHUNKED_SIZE = 3 * CHUNK - 100


def _input(i: int, shape: Shape) -> bytes:
    data = b"%d" % i
    return data + b"|" + b"x" * (CHUNKED_SIZE - len(data) - 1) if shape.chunked else data


def _number(data: bytes) -> bytes:
    return data.split(b"|", 1)[0]


@dataclasses.dataclass
class KillLoop:
    """What one loop left in its output topic."""

    case: str
    inputs: int
    kills: int
    #: Kills of a worker that had received input (the others found none left).
    kills_in_flight: int
    outputs: int
    missing: list[bytes]
    duplicated: dict[bytes, int]
    unexpected: list[bytes]
    seconds: float

    @property
    def exactly_once(self) -> bool:
        return not self.missing and not self.duplicated and not self.unexpected

    def summary(self) -> str:
        line = (f"{CASES[self.case].describe()}: "
                f"inputs {self.inputs}, kills {self.kills} ({self.kills_in_flight} in flight), outputs {self.outputs}, missing {len(self.missing)}, "
                f"duplicated {len(self.duplicated)}, unexpected {len(self.unexpected)}, {self.seconds:.0f} s")
        if self.missing:
            line += "\n  missing: " + ", ".join(m.decode() for m in sorted(self.missing)[:20])
        if self.duplicated:
            line += "\n  duplicated: " + ", ".join(f"{k.decode()} x{n}" for k, n in sorted(self.duplicated.items()))
        return line


#: A folder: each worker writes there what each of its transactions received and how it ended
#: (``<pid>.jsonl``), and the engine's debug log (``<pid>.log``); the evidence a failed run leaves.
TRACE_ENV = "MAGNETAR_TXN_KILL_TRACE"


class _Trace:
    def __init__(self) -> None:
        folder = os.environ.get(TRACE_ENV)
        self.file = None
        if folder:
            os.makedirs(folder, exist_ok=True)
            # Line-buffered: each line reaches the kernel before the next step, so a SIGKILL
            # loses nothing written.
            self.file = open(os.path.join(folder, f"{os.getpid()}.jsonl"), "a", buffering=1)
            handler = logging.FileHandler(os.path.join(folder, f"{os.getpid()}.log"))
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
            logging.getLogger("magnetar").addHandler(handler)
            logging.getLogger("magnetar").setLevel(logging.DEBUG)

    def __call__(self, **event: object) -> None:
        if self.file is not None:
            self.file.write(json.dumps({"t": round(time.time(), 4), **event}, default=str) + "\n")


def _subscribe(client: magnetar.Client, source: str, sub: str, mode: str) -> magnetar.Consumer:
    # An Exclusive (or Failover) subscription may still hold the killed worker's consumer
    # until the broker sees its connection close: retry that refusal for a while.
    deadline = time.monotonic() + 30
    while True:
        try:
            return client.subscribe(source, sub, subscription_type=mode, initial_position="earliest")
        except magnetar.ConsumerBusy:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)  # a retry's pause: the broker gives no event to wait for


def worker(url: str, source: str, sink: str, sub: str, txn_timeout: float, idle: float, case: str) -> int:
    """The consume-transform-produce loop; exits after ``idle`` seconds without input."""
    shape = CASES[case]
    trace = _Trace()
    # enable_transaction: after a broker restart, the coordinator must be loaded to abort the
    # transactions of killed workers, which hold input this worker would otherwise never get.
    with magnetar.Client(url, operation_timeout=30, enable_transaction=True) as client:
        consumer = _subscribe(client, source, sub, shape.subscription)
        producer = client.create_producer(sink, batching=True, batch_max_delay=0.01)
        committed = aborted = 0
        started = False
        last_input = time.monotonic()
        while time.monotonic() - last_input < idle:
            try:
                msgs = [consumer.receive(timeout=0.5)]
            except magnetar.Timeout:
                continue
            msgs += consumer.receive_many(max_messages=BATCH - 1, timeout=0)
            last_input = time.monotonic()
            if not started:
                print("receiving", flush=True)  # the driver times its kill from here
                started = True
            txn_id = None
            try:
                with client.new_transaction(timeout=txn_timeout) as txn:
                    txn_id = txn.id
                    trace(txn=txn_id, got=[(_number(m.data).decode(), str(m.message_id), m.redelivery_count)
                                           for m in msgs])
                    # The transform's work: without it a worker gets through 50-100 inputs
                    # before its kill, and most of a loop's kills find the input all done.
                    time.sleep(random.uniform(*WORK))
                    for m in msgs:
                        producer.send_async(b"out-" + _number(m.data), txn=txn, key=m.key)
                    if shape.ack == "individual":
                        for m in msgs:
                            consumer.ack(m, txn=txn)
                    else:
                        # The highest, not the last: after another transaction's abort the
                        # broker sends messages again, and they may come after later ones.
                        consumer.ack_cumulative(max(msgs, key=lambda m: m.message_id), txn=txn)
                committed += 1
                trace(txn=txn_id, end="committed")
            except magnetar.TransactionError as e:
                trace(txn=txn_id, end=f"aborted: {e}")
                # Aborted (a killed worker's transaction still holds these acks, say): the
                # inputs are delivered again.
                aborted += 1
                if aborted <= 3:
                    print(f"worker {os.getpid()}: {e}", flush=True)
        print(f"worker {os.getpid()}: {committed} transactions committed, {aborted} aborted", flush=True)
    return 0


def _spawn(url: str, source: str, sink: str, sub: str, txn_timeout: float, idle: float,
           case: str, watch: bool = False) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "magnetar.testing.txn_kill", "--worker",
         url, source, sink, sub, str(txn_timeout), str(idle), case],
        start_new_session=True,
        stdout=subprocess.PIPE if watch else None,
    )


def _receiving(proc: subprocess.Popen[bytes], within: float) -> bool:
    """Whether the worker reports its first message within ``within`` seconds."""
    assert proc.stdout is not None
    deadline = time.monotonic() + within
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([proc.stdout], [], [], left)
        if not ready:
            return False
        line = proc.stdout.readline()
        if not line:
            return False
        if line.strip() == b"receiving":
            return True
    return False


def _count_outputs(url: str, sink: str) -> collections.Counter[bytes]:
    seen: collections.Counter[bytes] = collections.Counter()
    with magnetar.Client(url, operation_timeout=30) as client:
        reader = client.create_reader(sink, start=magnetar.MessageId.earliest)
        while reader.has_message_available():
            seen[reader.read_next(timeout=30).data] += 1
    return seen


def _make_topics(url: str, admin_url: str | None, source: str, sink: str, shape: Shape, inputs: int) -> None:
    if shape.out_partitions:
        if admin_url is None:
            raise ValueError("output to a partitioned topic needs the broker's admin_url")
        from ._admin import Admin

        Admin(admin_url).create_partitioned_topic(sink, shape.out_partitions)
    with magnetar.Client(url, operation_timeout=30) as client:
        # A durable subscription keeps the output until it is counted: a topic without one
        # has its closed ledgers deleted (no retention), and a broker restart closes them.
        client.subscribe(sink, "kept", initial_position="earliest").close()
        producer = client.create_producer(source, batching=shape.batched, chunking=shape.chunked,
                                          chunk_max_size=CHUNK if shape.chunked else None)
        keys = [f"k{i % 7}" for i in range(inputs)] if shape.subscription == "key_shared" else None
        producer.send_many([_input(i, shape) for i in range(inputs)], keys=keys)


def _dump_stats(admin_url: str, topic: str) -> None:
    """Writes the input topic's stats and internal stats (the cursor's deleted ranges and batch
    bits, the subscription's pending acks) beside the workers' traces."""
    from ._admin import Admin

    folder = os.environ[TRACE_ENV]
    admin = Admin(admin_url)
    name = topic.rsplit("/", 1)[1]
    for what, suffix in (("stats", "/stats"), ("internal", "/internalStats?metadata=true")):
        with open(os.path.join(folder, f"{name}.{what}.json"), "w") as f:
            json.dump(admin.request("GET", admin._topic(topic, suffix)), f, indent=1)
    path = topic.split("://", 1)[1]
    for what in ("pendingAckStats", "pendingAckInternalStats"):
        try:
            found = admin.request("GET", f"/admin/v3/transactions/{what}/{path}/transform")
        except Exception as e:  # noqa: BLE001 - evidence only: the error is the record
            found = {"error": str(e)}
        with open(os.path.join(folder, f"{name}.{what}.json"), "w") as f:
            json.dump(found, f, indent=1)


def kill_loop(url: str, case: str, *, inputs: int = 300, kills: int = 20, txn_timeout: float = 5.0,
              rounds: int = 5, seed: int | None = None, admin_url: str | None = None,
              restart_broker: Callable[[], object] | None = None, broker_kills: int = 0) -> KillLoop:
    """Runs one loop (a key of :data:`CASES`) against the broker at ``url``. With
    :data:`TRACE_ENV` set and ``admin_url`` given, the input topic's stats are saved at the end.

    ``broker_kills`` of the kills (spread among them) first kill -9 and restart the broker
    itself with ``restart_broker``, while the worker is mid-stream: the one broker owns every
    transaction coordinator, so the transactions in flight must each commit once or abort.
    The worker lives through the restart and is killed a random moment after it."""
    if broker_kills and restart_broker is None:
        raise ValueError("broker_kills needs restart_broker")
    shape = CASES[case]
    run = uuid.uuid4().hex[:8]
    source = f"persistent://public/default/txn-kill-in-{run}"
    sink = f"persistent://public/default/txn-kill-out-{run}"
    sub = "transform"
    expected = [b"out-%d" % i for i in range(inputs)]
    _make_topics(url, admin_url, source, sink, shape, inputs)
    rng = random.Random(seed)
    started = time.monotonic()
    in_flight = 0
    with_broker = set(rng.sample(range(kills), min(broker_kills, kills)))
    for k in range(kills):
        proc = _spawn(url, source, sink, sub, txn_timeout, idle=3600, case=case, watch=True)
        try:
            if _receiving(proc, txn_timeout + 5):
                in_flight += 1
                time.sleep(rng.uniform(0.05, 0.5))  # the kill's random moment, not a wait
                if k in with_broker and restart_broker is not None:
                    restart_broker()
                    time.sleep(rng.uniform(0.5, 3.0))  # the worker's moment after it
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            assert proc.stdout is not None
            proc.stdout.close()
        print(f"kill {k + 1}/{kills}{' (and the broker)' if k in with_broker else ''}", flush=True)
    for _ in range(rounds):
        # Inputs whose transaction a kill left open come back once the coordinator aborts it.
        proc = _spawn(url, source, sink, sub, txn_timeout, idle=txn_timeout + 5, case=case)
        proc.wait()
        if set(_count_outputs(url, sink)) >= set(expected):
            break
    seen = _count_outputs(url, sink)
    if admin_url and os.environ.get(TRACE_ENV):
        _dump_stats(admin_url, source)
    return KillLoop(
        case=case,
        inputs=inputs,
        kills=kills,
        kills_in_flight=in_flight,
        outputs=sum(seen.values()),
        missing=[e for e in expected if seen[e] == 0],
        duplicated={e: n for e, n in seen.items() if n > 1},
        unexpected=[e for e in seen if e not in set(expected)],
        seconds=time.monotonic() - started,
    )


if __name__ == "__main__":
    if len(sys.argv) != 9 or sys.argv[1] != "--worker":
        sys.exit("usage: python -m magnetar.testing.txn_kill --worker URL SOURCE SINK SUB TXN_TIMEOUT IDLE CASE")
    _url, _source, _sink, _sub, _timeout, _idle, _case = sys.argv[2:9]
    sys.exit(worker(_url, _source, _sink, _sub, float(_timeout), float(_idle), _case))

"""Exactly once under kill -9: a consume-transform-produce worker, killed mid-transaction over
and over, must leave every input reflected exactly once in the output.

:func:`kill_loop` writes ``inputs`` numbered messages to an input topic, then starts a worker
process and SIGKILLs it after a random 0.5-2.5 s, ``kills`` times; each worker subscribes and
loops: receive up to 5 messages, send ``out-<n>`` for each in a transaction, acknowledge them in
it (individually on a Shared subscription, with one cumulative ack on a Failover one), commit.
The kill's moment counts from the worker's first message (a worker that gets none within
``txn_timeout + 5`` s is killed idle), so kills land mid-stream, most inside a transaction.
A killed worker leaves a transaction open, which the coordinator aborts at its timeout
(``txn_timeout``): its outputs are dropped and its acks undone, and a later worker gets those
inputs again. After the kills, workers run unkilled until the output holds every input (or
``rounds`` of them gave up). Then a reader counts every output: missing and duplicated inputs
must both be zero.

Used by ``scripts/txn_kill.py`` (the issue's
20 kills of 300 inputs, every loop; results in docs/transactions.md). The worker runs as
``python -m magnetar.testing.txn_kill --worker ...``.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import random
import select
import signal
import subprocess
import sys
import time
import uuid

import magnetar

__all__ = ["CASES", "KillLoop", "kill_loop"]

BATCH = 5

# Each loop: the subscription type (shared: individual acks; failover: one cumulative ack per
# transaction) and whether the input was produced in batches.
CASES = {
    "shared": ("shared", False),
    "shared-batched": ("shared", True),
    "failover": ("failover", False),
    "failover-batched": ("failover", True),
}


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
        mode, batched = CASES[self.case]
        line = (f"{mode} subscription, {'batched' if batched else 'unbatched'} input: "
                f"inputs {self.inputs}, kills {self.kills} ({self.kills_in_flight} in flight), outputs {self.outputs}, missing {len(self.missing)}, "
                f"duplicated {len(self.duplicated)}, unexpected {len(self.unexpected)}, {self.seconds:.0f} s")
        if self.duplicated:
            line += "\n  duplicated: " + ", ".join(f"{k.decode()} x{n}" for k, n in sorted(self.duplicated.items()))
        return line


def worker(url: str, source: str, sink: str, sub: str, txn_timeout: float, idle: float, mode: str) -> int:
    """The consume-transform-produce loop; exits after ``idle`` seconds without input."""
    with magnetar.Client(url, operation_timeout=30) as client:
        consumer = client.subscribe(source, sub, subscription_type=mode, initial_position="earliest")
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
            try:
                with client.new_transaction(timeout=txn_timeout) as txn:
                    for m in msgs:
                        producer.send_async(b"out-" + m.data, txn=txn)
                    if mode == "shared":
                        for m in msgs:
                            consumer.ack(m, txn=txn)
                    else:
                        consumer.ack_cumulative(msgs[-1], txn=txn)
                committed += 1
            except magnetar.TransactionError as e:
                # Aborted (a killed worker's transaction still holds these acks, say): the
                # inputs are delivered again.
                aborted += 1
                if aborted <= 3:
                    print(f"worker {os.getpid()}: {e}", flush=True)
        print(f"worker {os.getpid()}: {committed} transactions committed, {aborted} aborted", flush=True)
    return 0


def _spawn(url: str, source: str, sink: str, sub: str, txn_timeout: float, idle: float,
           mode: str, watch: bool = False) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "magnetar.testing.txn_kill", "--worker",
         url, source, sink, sub, str(txn_timeout), str(idle), mode],
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


def kill_loop(url: str, case: str, *, inputs: int = 300, kills: int = 20, txn_timeout: float = 5.0,
              rounds: int = 5, seed: int | None = None) -> KillLoop:
    """Runs one loop (a key of :data:`CASES`) against the broker at ``url``."""
    mode, batched = CASES[case]
    run = uuid.uuid4().hex[:8]
    source = f"persistent://public/default/txn-kill-in-{run}"
    sink = f"persistent://public/default/txn-kill-out-{run}"
    sub = "transform"
    expected = [b"out-%d" % i for i in range(inputs)]
    with magnetar.Client(url, operation_timeout=30) as client:
        client.create_producer(sink).close()  # the reader below needs the topic to exist
        client.create_producer(source, batching=batched).send_many([b"%d" % i for i in range(inputs)])
    rng = random.Random(seed)
    started = time.monotonic()
    in_flight = 0
    for k in range(kills):
        proc = _spawn(url, source, sink, sub, txn_timeout, idle=3600, mode=mode, watch=True)
        try:
            if _receiving(proc, txn_timeout + 5):
                in_flight += 1
                time.sleep(rng.uniform(0.05, 0.5))  # the kill's random moment, not a wait
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            assert proc.stdout is not None
            proc.stdout.close()
        print(f"kill {k + 1}/{kills}", flush=True)
    for _ in range(rounds):
        # Inputs whose transaction a kill left open come back once the coordinator aborts it.
        proc = _spawn(url, source, sink, sub, txn_timeout, idle=txn_timeout + 5, mode=mode)
        proc.wait()
        if set(_count_outputs(url, sink)) >= set(expected):
            break
    seen = _count_outputs(url, sink)
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
        sys.exit("usage: python -m magnetar.testing.txn_kill --worker URL SOURCE SINK SUB TXN_TIMEOUT IDLE MODE")
    _url, _source, _sink, _sub, _timeout, _idle, _mode = sys.argv[2:9]
    sys.exit(worker(_url, _source, _sink, _sub, float(_timeout), float(_idle), _mode))

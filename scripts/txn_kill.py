"""Exactly-once under kill -9: a consume-transform-produce worker, killed mid-transaction over
and over, must leave every input reflected exactly once in the output.

    scripts/dev txn-kill                     # 20 kills, 300 inputs, own broker
    scripts/dev txn-kill --kills 5 --url pulsar://127.0.0.1:6650

The driver writes ``--inputs`` numbered messages to an input topic, then starts a worker
process and SIGKILLs it after a random 0.5-2.5 s, ``--kills`` times; each worker subscribes
and loops: receive up to 5 messages, send ``out-<n>`` for each in a transaction, acknowledge
them in it (individually on a Shared subscription, cumulatively on a Failover one), commit.
Four loops run by default (``--case``): Shared and Failover, each with unbatched and with
batched input. A killed worker leaves a transaction open, which
the coordinator aborts at its timeout (``--txn-timeout``): its outputs are dropped and its
acks undone, and the next worker gets those inputs again. After the kills, workers run
unkilled until the output holds every input (or ``--rounds`` of them gave up). Then a reader
counts every output: missing and duplicated inputs must both be zero.

Not part of the test command (a run takes minutes); results go in docs/transactions.md.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import signal
import subprocess
import sys
import time
import uuid

import magnetar

BATCH = 5

# Each loop: the subscription type (shared: individual acks; failover: one cumulative ack per
# transaction) and whether the input was produced in batches.
CASES = {
    "shared": ("shared", False),
    "shared-batched": ("shared", True),
    "failover": ("failover", False),
    "failover-batched": ("failover", True),
}


def worker(url: str, source: str, sink: str, sub: str, txn_timeout: float, idle: float, mode: str) -> int:
    """The consume-transform-produce loop; exits after ``idle`` seconds without input."""
    with magnetar.Client(url, operation_timeout=30) as client:
        consumer = client.subscribe(source, sub, subscription_type=mode, initial_position="earliest")
        producer = client.create_producer(sink, batching=True, batch_max_delay=0.01)
        committed = aborted = 0
        last_input = time.monotonic()
        while time.monotonic() - last_input < idle:
            try:
                msgs = [consumer.receive(timeout=0.5)]
            except magnetar.Timeout:
                continue
            msgs += consumer.receive_many(max_messages=BATCH - 1, timeout=0)
            last_input = time.monotonic()
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


def spawn(args: argparse.Namespace, source: str, sink: str, sub: str, idle: float, mode: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, __file__, "--worker", args.url, source, sink, sub, str(args.txn_timeout), str(idle), mode],
        start_new_session=True,
    )


def count_outputs(url: str, sink: str) -> collections.Counter[bytes]:
    seen: collections.Counter[bytes] = collections.Counter()
    with magnetar.Client(url, operation_timeout=30) as client:
        reader = client.create_reader(sink, start=magnetar.MessageId.earliest)
        while reader.has_message_available():
            seen[reader.read_next(timeout=30).data] += 1
    return seen


def drive(args: argparse.Namespace, mode: str, batched: bool) -> int:
    run = uuid.uuid4().hex[:8]
    source = f"persistent://public/default/txn-kill-in-{run}"
    sink = f"persistent://public/default/txn-kill-out-{run}"
    sub = "transform"
    expected = [b"out-%d" % i for i in range(args.inputs)]
    with magnetar.Client(args.url, operation_timeout=30) as client:
        client.create_producer(sink).close()  # the reader below needs the topic to exist
        client.create_producer(source, batching=batched).send_many([b"%d" % i for i in range(args.inputs)])
    rng = random.Random(args.seed)
    started = time.monotonic()
    for k in range(args.kills):
        proc = spawn(args, source, sink, sub, idle=3600, mode=mode)
        time.sleep(rng.uniform(0.5, 2.5) + (1.5 if k == 0 else 0.0))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        print(f"kill {k + 1}/{args.kills}", flush=True)
    for r in range(args.rounds):
        # Inputs whose transaction a kill left open come back when the coordinator aborts it.
        proc = spawn(args, source, sink, sub, idle=args.txn_timeout + 5, mode=mode)
        proc.wait()
        if set(count_outputs(args.url, sink)) >= set(expected):
            break
    seen = count_outputs(args.url, sink)
    missing = [e for e in expected if seen[e] == 0]
    duplicated = {e: n for e, n in seen.items() if n > 1}
    extra = [e for e in seen if e not in set(expected)]
    elapsed = time.monotonic() - started
    print(f"{mode} subscription, {'batched' if batched else 'unbatched'} input: "
          f"inputs {args.inputs}, kills {args.kills}, outputs {sum(seen.values())}, missing {len(missing)}, "
          f"duplicated {len(duplicated)}, unexpected {len(extra)}, {elapsed:.0f} s")
    if duplicated:
        print("  duplicated:", ", ".join(f"{k.decode()} x{n}" for k, n in sorted(duplicated.items())))
    return 0 if not missing and not duplicated and not extra else 1


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        url, source, sink, sub, txn_timeout, idle, mode = sys.argv[2:9]
        return worker(url, source, sink, sub, float(txn_timeout), float(idle), mode)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", help="a broker with transactions on (default: start one)")
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--inputs", type=int, default=300)
    p.add_argument("--txn-timeout", type=float, default=5.0)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--case", action="append", choices=sorted(CASES),
                   help="which loops to run (repeatable; default: all)")
    args = p.parse_args()

    def all_cases() -> int:
        failed = 0
        for case in args.case or sorted(CASES):
            failed |= drive(args, *CASES[case])
        return failed

    if args.url:
        return all_cases()
    from magnetar.testing import Standalone

    with Standalone(port=0) as broker:
        args.url = broker.service_url
        return all_cases()


if __name__ == "__main__":
    sys.exit(main())

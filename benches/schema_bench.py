"""Typed messages, magnetar vs the official ``pulsar-client``: JSON and Avro send and receive.

::

    python -m benches.schema_bench                 # 3 rounds of 20,000 messages per run
    python -m benches.schema_bench --n 50000 --rounds 5 --kinds avro

It starts a local standalone broker (or ``--attach DIR``) and runs every (kind, client, role)
in its own process on a fresh topic, rounds interleaved. Both clients use their schema classes:
magnetar ``schema.AvroSchema(Order)`` / ``schema.JsonSchema(Order)`` with a dataclass, the
official client ``pulsar.schema.AvroSchema(Order)`` / ``JsonSchema(Order)`` with a ``Record``
of the same fields (so both register the same definition). The record values are built before
the measured window.

- send: ``send_async(record)`` for every record, then ``flush()`` (batching as in
  benches/common.py: 1000 messages / 128 KiB / 10 ms, no compression);
- receive: the records that client's send run wrote, from the earliest message, with
  ``receive_many`` (magnetar) / ``batch_receive`` (official) of 1000 and ``.value`` / ``.value()``
  of every message (decoding is part of the cost).

CPU is the client process's user+sys time over the window (all threads); per message it is
``cpu_s / n``. Results: ``results.json`` and ``results.md`` under ``--out`` (default
``benches/results/<UTC time>-schema/``), and the table on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from benches import common

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("json", "avro")
CLIENTS = ("magnetar", "official")
ROLES = ("send", "receive")


# -- the child: one measured run ------------------------------------------------------------


@dataclass
class Order:
    """magnetar's record: the official client's ``Record`` below has the same fields."""

    id: int
    amount: float
    note: Optional[str] = None


def _records_magnetar(n: int) -> list[Any]:
    return [Order(i, i + 0.5, f"note {i}") for i in range(n)]


def _magnetar(spec: dict[str, Any]) -> dict[str, Any]:
    import magnetar
    from magnetar import schema

    records = _records_magnetar(1) if spec["role"] == "receive" else _records_magnetar(spec["n"])
    s = (schema.AvroSchema if spec["kind"] == "avro" else schema.JsonSchema)(type(records[0]))
    client = magnetar.Client(spec["service_url"])
    w = common.Window(spec["broker_pid"])
    n = spec["n"]
    if spec["role"] == "send":
        producer = client.create_producer(
            spec["topic"], schema=s, batching=True, batch_max_messages=common.BATCH_MAX_MESSAGES,
            batch_max_bytes=common.BATCH_MAX_BYTES, batch_max_delay=common.BATCH_DELAY_MS / 1000,
            compression=None, max_pending=common.MAX_PENDING, block_if_full=True)
        w.start()
        send_async = producer.send_async
        for r in records:
            send_async(r)
        producer.flush()
        result = w.stop()
        producer.close()
    else:
        consumer = client.subscribe(spec["topic"], "bench", schema=s, initial_position="earliest",
                                    receiver_queue_size=common.RECEIVER_QUEUE)
        w.start()
        got, last = 0, None
        receive_many = consumer.receive_many
        while got < n:
            msgs = receive_many(min(common.RECEIVE_BATCH, n - got), 5.0)
            for m in msgs:
                last = m.value
            got += len(msgs)
        result = w.stop()
        assert last == records[0].__class__(n - 1, n - 0.5, f"note {n - 1}"), last
        consumer.close()
    client.close()
    return result


def _official(spec: dict[str, Any]) -> dict[str, Any]:
    import pulsar
    from pulsar.schema import AvroSchema, Double, JsonSchema, Long, Record, String

    class Order(Record):  # type: ignore[no-redef]
        id = Long(required=True)
        amount = Double(required=True)
        note = String(required_default=True)

    n = spec["n"]
    s = (AvroSchema if spec["kind"] == "avro" else JsonSchema)(Order)
    client = pulsar.Client(spec["service_url"], logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    w = common.Window(spec["broker_pid"])
    if spec["role"] == "send":
        records = [Order(id=i, amount=i + 0.5, note=f"note {i}") for i in range(n)]
        producer = client.create_producer(
            spec["topic"], schema=s, batching_enabled=True, batching_max_messages=common.BATCH_MAX_MESSAGES,
            batching_max_allowed_size_in_bytes=common.BATCH_MAX_BYTES,
            batching_max_publish_delay_ms=common.BATCH_DELAY_MS, compression_type=pulsar.CompressionType.NONE,
            max_pending_messages=common.MAX_PENDING, block_if_queue_full=True)
        errors: list[Any] = []

        def done(res: Any, _id: Any) -> None:
            if res != pulsar.Result.Ok:
                errors.append(res)

        w.start()
        send_async = producer.send_async
        for r in records:
            send_async(r, done)
        producer.flush()
        result = w.stop()
        assert not errors, errors[:3]
        producer.close()
    else:
        policy = pulsar.ConsumerBatchReceivePolicy(common.RECEIVE_BATCH, 16 * 1024 * 1024, 100)
        consumer = client.subscribe(spec["topic"], "bench", schema=s, initial_position=pulsar.InitialPosition.Earliest,
                                    receiver_queue_size=common.RECEIVER_QUEUE, batch_receive_policy=policy)
        w.start()
        got, last = 0, None
        batch_receive = consumer.batch_receive
        while got < n:
            msgs = batch_receive()
            for m in msgs:
                last = m.value()
            got += len(msgs)
        result = w.stop()
        assert last is not None and (last.id, last.note) == (n - 1, f"note {n - 1}"), last
        consumer.close()
    client.close()
    return result


def child() -> None:
    spec, out = common.load_spec()
    result = (_magnetar if spec["client"] == "magnetar" else _official)(spec)
    common.write_result(out, {**spec, **result})


# -- the orchestrator ---------------------------------------------------------------------


def _run(spec: dict[str, Any], workdir: Path, timeout: float) -> dict[str, Any]:
    tag = f"{spec['kind']}-{spec['client']}-{spec['role']}-{uuid.uuid4().hex[:6]}"
    spec_path, out_path = workdir / f"{tag}.spec.json", workdir / f"{tag}.out.json"
    spec_path.write_text(json.dumps(spec))
    proc = subprocess.run([sys.executable, "-m", "benches.schema_bench", "--child", str(spec_path), str(out_path)],
                          cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 or not out_path.exists():
        raise RuntimeError(f"{tag} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return json.loads(out_path.read_text())


def _table(runs: list[dict[str, Any]]) -> str:
    """Medians per (kind, role, client), with magnetar/official ratios of CPU per message."""
    lines = ["| kind | role | client | msg/s (median) | client CPU µs/msg (median) | CPU magnetar/official |",
             "| --- | --- | --- | ---: | ---: | ---: |"]
    med: dict[tuple[str, str, str], tuple[float, float]] = {}
    for kind in KINDS:
        for role in ROLES:
            for client in CLIENTS:
                rs = [r for r in runs if (r["kind"], r["role"], r["client"]) == (kind, role, client)]
                if rs:
                    med[(kind, role, client)] = (statistics.median(r["n"] / r["wall_s"] for r in rs),
                                                 statistics.median(r["cpu_s"] / r["n"] * 1e6 for r in rs))
    for (kind, role, client), (rate, cpu) in med.items():
        other = med.get((kind, role, "official"))
        ratio = f"{cpu / other[1]:.2f}" if client == "magnetar" and other else ""
        lines.append(f"| {kind} | {role} | {client} | {rate:,.0f} | {cpu:.1f} | {ratio} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benches.schema_bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20_000, help="messages per run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--attach", type=Path, default=None, help="use the running broker of this data dir")
    ap.add_argument("--service-url", default=None,
                    help="use the broker at this URL (its CPU is then not recorded); for smoke runs")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    print(common.provenance(), flush=True)
    from magnetar.testing.standalone import Standalone

    kinds = [k for k in args.kinds.split(",") if k]
    out = args.out or ROOT / "benches" / "results" / f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-schema"
    out.mkdir(parents=True, exist_ok=True)
    owned = not (args.attach or args.service_url)
    broker: Any = None
    if args.attach:
        broker = Standalone.attach(args.attach)
        if broker is None or not broker.is_running():
            raise SystemExit(f"no running broker recorded in {args.attach}")
    elif owned:
        broker = Standalone(port=0)
        broker.start()
    service_url = args.service_url or broker.service_url
    broker_pid = broker.pid if broker is not None else None
    runs: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="magnetar-schema-bench-") as tmp:
            for rnd in range(args.rounds):
                for kind in kinds:
                    order = CLIENTS if rnd % 2 == 0 else CLIENTS[::-1]
                    for client in order:
                        topic = f"persistent://public/default/schema-bench-{uuid.uuid4().hex[:10]}"
                        for role in ROLES:
                            spec = {"service_url": service_url, "broker_pid": broker_pid, "topic": topic,
                                    "kind": kind, "client": client, "role": role, "n": args.n, "round": rnd}
                            r = _run(spec, Path(tmp), timeout=600)
                            runs.append(r)
                            print(f"round {rnd} {kind} {client} {role}: {args.n / r['wall_s']:,.0f} msg/s, "
                                  f"{r['cpu_s'] / args.n * 1e6:.1f} µs CPU/msg, machine busy "
                                  f"{r['machine_busy']:.0%}", flush=True)
    finally:
        if owned:
            broker.stop()
    table = _table(runs)
    meta = {"n": args.n, "rounds": args.rounds, "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "nproc": os.cpu_count(), "loadavg": common.loadavg()}
    (out / "results.json").write_text(json.dumps({"meta": meta, "runs": runs}, indent=1))
    (out / "results.md").write_text(f"# Schema benchmark\n\n{json.dumps(meta)}\n\n{table}\n")
    print(json.dumps(meta))
    print(table)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        sys.argv.pop(1)
        child()
    else:
        raise SystemExit(main())

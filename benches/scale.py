"""Cost as the work grows (issue 31): N producers and N consumers on N topics in one client.

    python -m benches.scale                      # N = 100 and 1,000; one by one, asyncio, threads (~8 min)
    python -m benches.scale --n 100 --modes serial --clients magnetar     # one quick look
    python -m benches.scale --with-10k           # also N = 10,000 (slow here: ~20 min more)
    python -m benches.scale --partitions 1000    # one consumer (and one producer) on a 1,000-partition topic

It starts one local broker (``magnetar.testing.Standalone(port=0)``), then runs each (client, N,
creation mode) in its own Python process, one after another, clients alternating. A run:

1. creates its client and one warm producer + consumer (the connection, the runtime threads and
   the libraries' first allocations are then in the baseline), and records RSS, threads and fds;
2. creates N producers and N consumers on N fresh topics, ``serial`` (one after another),
   ``asyncio`` (all at once with ``asyncio.gather``) or ``threads`` (a pool of 32 threads), timed;
3. sends one message on every producer and receives (and acks) it on every consumer, timed;
4. records RSS, threads and fds again, then the process's CPU (user+sys, all threads) over
   ``--idle`` seconds of doing nothing.

The per-pair figures divide the growth by N. Same settings for both clients: batching on (their
defaults otherwise), receiver queue 1000, subscription ``Shared`` at the earliest position.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

RECEIVER_QUEUE = 1000
THREADS = 32
SUB = "scale"


# ----------------------------------------------------------------------------------------------
# measurements of this process


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


_BROKER_PID: int | None = None


def snapshot() -> dict[str, Any]:
    """RSS (KiB), threads and open file descriptors of this process, its CPU so far (s), and
    the broker JVM's CPU so far (s; broker and bookie)."""
    from benches.common import proc_cpu

    r = resource.getrusage(resource.RUSAGE_SELF)
    return {"rss_kb": _status("VmRSS"), "threads": _status("Threads"), "fds": len(os.listdir("/proc/self/fd")),
            "cpu_s": r.ru_utime + r.ru_stime, "broker_cpu_s": proc_cpu(_BROKER_PID), "t": time.perf_counter()}


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# ----------------------------------------------------------------------------------------------
# the clients (each child process imports only its own)


class MagnetarSync:
    def __init__(self, url: str) -> None:
        import magnetar

        self.client = magnetar.Client(url)

    def pair(self, topic: str) -> tuple[Any, Any]:
        p = self.client.create_producer(topic)
        c = self.client.subscribe(topic, SUB, subscription_type="shared", initial_position="earliest",
                                  receiver_queue_size=RECEIVER_QUEUE)
        return p, c

    def pair_consumer(self, topic: str) -> Any:
        return self.client.subscribe(topic, SUB, subscription_type="shared", initial_position="earliest",
                                     receiver_queue_size=RECEIVER_QUEUE)

    def producer(self, topic: str) -> Any:
        return self.client.create_producer(topic)

    def exchange(self, pairs: list[tuple[Any, Any]]) -> int:
        futures = [p.send_async(b"x") for p, _ in pairs]
        for f in futures:
            f.result(timeout=60)
        return _receive_each(pairs, lambda c: c.ack(c.receive(timeout=60)))

    def extra(self) -> dict[str, Any]:
        s = self.client.stats()
        return {k: s[k] for k in ("lookups", "metadata_lookups", "connections_opened") if k in s}



def _receive_each(pairs: list[tuple[Any, Any]], take: Callable[[Any], None]) -> int:
    """Takes (receives and acks) one message on each pair's consumer; returns how many."""
    for _, c in pairs:
        take(c)
    return len(pairs)


class OfficialSync:
    def __init__(self, url: str) -> None:
        import pulsar

        self.pulsar = pulsar
        self.client = pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))

    def pair(self, topic: str) -> tuple[Any, Any]:
        return self.producer(topic), self.pair_consumer(topic)

    def pair_consumer(self, topic: str) -> Any:
        return self.client.subscribe(topic, SUB, consumer_type=self.pulsar.ConsumerType.Shared,
                                     initial_position=self.pulsar.InitialPosition.Earliest,
                                     receiver_queue_size=RECEIVER_QUEUE)

    def producer(self, topic: str) -> Any:
        return self.client.create_producer(topic)

    def exchange(self, pairs: list[tuple[Any, Any]]) -> int:
        results: list[Any] = []
        for p, _ in pairs:
            p.send_async(b"x", lambda res, _id: results.append(res))
        for p, _ in pairs:
            p.flush()
        return _receive_each(pairs, lambda c: c.acknowledge(c.receive(timeout_millis=60_000)))

    def extra(self) -> dict[str, Any]:
        return {}


async def _pairs_async(client_name: str, url: str, topics: list[str]) -> tuple[Any, list[Any], dict[str, Any]]:
    """All pairs at once from asyncio; returns (client, pairs, timings)."""
    if client_name == "magnetar":
        import magnetar

        client: Any = magnetar.AsyncClient(url)

        async def pair(t: str) -> tuple[Any, Any]:
            p = await client.create_producer(t)
            c = await client.subscribe(t, SUB, subscription_type="shared", initial_position="earliest",
                                       receiver_queue_size=RECEIVER_QUEUE)
            return p, c
    else:
        import pulsar
        import pulsar.asyncio as pa

        client = pa.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))

        async def pair(t: str) -> tuple[Any, Any]:
            p = await client.create_producer(t)
            c = await client.subscribe(t, SUB, consumer_type=pulsar.ConsumerType.Shared,
                                       initial_position=pulsar.InitialPosition.Earliest,
                                       receiver_queue_size=RECEIVER_QUEUE)
            return p, c

    await pair(topics[0])  # warm: in the baseline
    before = snapshot()
    t0 = time.perf_counter()
    pairs = await asyncio.gather(*(pair(t) for t in topics[1:]))
    create_s = time.perf_counter() - t0
    created = snapshot()
    t0 = time.perf_counter()
    await asyncio.gather(*(p.send(b"x") for p, _ in pairs))
    got = 0
    for _, c in pairs:
        m = await c.receive()
        if client_name == "magnetar":
            await c.ack(m)
        else:
            await c.acknowledge(m)
        got += 1
    exchange_s = time.perf_counter() - t0
    return client, pairs, {"before": before, "created": created, "create_s": create_s, "exchange_s": exchange_s,
                           "received": got}


def child(spec: dict[str, Any]) -> dict[str, Any]:
    global _BROKER_PID
    _BROKER_PID = spec.get("broker_pid")
    name, url, n, mode = spec["client"], spec["service_url"], spec["n"], spec["mode"]
    topics = [f"persistent://public/default/{spec['prefix']}-{i}" for i in range(n + 1)]
    start = snapshot()
    if mode == "partitions":
        return _child_partitions(spec, start)
    if mode == "asyncio":
        loop = asyncio.new_event_loop()
        client, pairs, timing = loop.run_until_complete(_pairs_async(name, url, topics))
        extra: dict[str, Any] = {}
        if name == "magnetar":
            extra = {k: v for k, v in client.stats().items() if k in ("lookups", "metadata_lookups")}
    else:
        c: Any = MagnetarSync(url) if name == "magnetar" else OfficialSync(url)
        c.pair(topics[0])
        before = snapshot()
        t0 = time.perf_counter()
        if mode == "serial":
            pairs = [c.pair(t) for t in topics[1:]]
        elif mode == "threads":
            with ThreadPoolExecutor(THREADS) as pool:
                pairs = list(pool.map(c.pair, topics[1:]))
        else:
            raise SystemExit(f"unknown mode {mode!r}")
        create_s = time.perf_counter() - t0
        created = snapshot()
        t0 = time.perf_counter()
        got = c.exchange(pairs)
        timing = {"before": before, "created": created, "create_s": create_s, "exchange_s": time.perf_counter() - t0,
                  "received": got}
        extra = c.extra()
    after = snapshot()
    idle = _idle(spec["idle_s"])
    return {"client": name, "n": n, "mode": mode, "start": start, **timing, "after": after, **idle, "extra": extra,
            "load_after": loadavg()}


def _idle(seconds: float) -> dict[str, Any]:
    a = snapshot()
    time.sleep(seconds)
    b = snapshot()
    return {"idle_cpu_pct": 100.0 * (b["cpu_s"] - a["cpu_s"]) / (b["t"] - a["t"]), "idle": b}


def _child_partitions(spec: dict[str, Any], start: dict[str, Any]) -> dict[str, Any]:
    name, url = spec["client"], spec["service_url"]
    c: Any = MagnetarSync(url) if name == "magnetar" else OfficialSync(url)
    c.pair(f"persistent://public/default/{spec['prefix']}-warm")
    before = snapshot()
    t0 = time.perf_counter()
    consumer = c.pair_consumer(spec["topic"])
    consumer_s = time.perf_counter() - t0
    mid = snapshot()
    t0 = time.perf_counter()
    producer = c.producer(spec["topic"])
    producer_s = time.perf_counter() - t0
    after = snapshot()
    idle = _idle(spec["idle_s"])
    del consumer, producer
    return {"client": name, "n": spec["partitions"], "mode": "partitions", "start": start, "before": before,
            "create_s": consumer_s + producer_s, "consumer_s": consumer_s, "producer_s": producer_s,
            "consumer_rss_kb": mid["rss_kb"] - before["rss_kb"], "after": after, **idle, "extra": c.extra(),
            "exchange_s": 0.0, "received": 0, "load_after": loadavg()}


# ----------------------------------------------------------------------------------------------
# orchestrator


def run_child(python: str, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
    try:
        p = subprocess.run([python, "-m", "benches.scale", "--child", f.name], capture_output=True, text=True,
                           timeout=timeout, cwd=Path(__file__).resolve().parent.parent)
        out = Path(f.name + ".out")
        if p.returncode != 0 or not out.exists():
            return {**spec, "error": (p.stderr or p.stdout)[-2000:]}
        return json.loads(out.read_text())
    finally:
        for leftover in (Path(f.name), Path(f.name + ".out")):
            leftover.unlink(missing_ok=True)


def row(r: dict[str, Any]) -> str:
    if "error" in r:
        return f"| {r['client']} | {r['n']:,} | {r['mode']} | failed: {r['error'].splitlines()[-1][:80]} |||||||"
    n = max(r["n"], 1)
    b, a = r["before"], r["after"]
    grow_kb = a["rss_kb"] - b["rss_kb"]
    per_pair_ms = 1000 * r["create_s"] / n
    c = r.get("created", b)
    cpu_ms = 1000 * (c["cpu_s"] - b["cpu_s"]) / n
    broker_ms = 1000 * (c["broker_cpu_s"] - b["broker_cpu_s"]) / n if b.get("broker_cpu_s") is not None else float("nan")
    return (f"| {r['client']} | {r['n']:,} | {r['mode']} | {r['create_s']:.2f} | {per_pair_ms:.2f} | "
            f"{cpu_ms:.2f} / {broker_ms:.2f} | "
            f"{r['exchange_s']:.2f} | {grow_kb / 1024:+.1f} | {grow_kb / n:.1f} | "
            f"{b['threads']}→{a['threads']} | {b['fds']}→{a['fds']} | {r['idle_cpu_pct']:.2f} |")


HEADER = ("| client | N | creation | create s | ms per pair | CPU ms per pair client / broker | 1 msg each way s | RSS growth MB | KB per pair | "
          "threads | fds | idle CPU % of a core |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---|---|---:|")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, action="append", help="topic counts (default 100 and 1000)")
    ap.add_argument("--with-10k", action="store_true", help="also N = 10,000")
    ap.add_argument("--modes", default="serial,asyncio,threads")
    ap.add_argument("--clients", default="magnetar,official")
    ap.add_argument("--partitions", type=int, default=1000, help="partitions of the one partitioned topic (0: skip)")
    ap.add_argument("--idle", type=float, default=10.0, help="idle seconds measured after the exchange")
    ap.add_argument("--attach", help="use a broker started with `python -m magnetar.testing.standalone --data-dir DIR start`")
    ap.add_argument("--out", help="results directory (default benches/results/<UTC time>-scale)")
    args = ap.parse_args(argv)
    if args.child:
        spec = json.loads(Path(args.child).read_text())
        # a file, not stdout: the official client logs to stdout
        Path(args.child + ".out").write_text(json.dumps(child(spec)))
        return 0

    from benches.common import provenance

    print(provenance(), flush=True)
    from magnetar.testing.standalone import Standalone

    ns = args.n or [100, 1000]
    if args.with_10k and 10_000 not in ns:
        ns.append(10_000)
    clients = args.clients.split(",")
    modes = args.modes.split(",")
    out = Path(args.out or Path(__file__).parent / "results" / (time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-scale"))
    out.mkdir(parents=True, exist_ok=True)
    # 10,000 topics with a producer and a consumer each: more heap than the tests' broker.
    conf = {"maxUnackedMessagesPerConsumer": "0", "brokerDeleteInactiveTopicsEnabled": "false"}
    broker = Standalone.attach(args.attach) if args.attach else Standalone(port=0, heap="3g", extra_conf=conf)
    if broker is None:
        raise SystemExit(f"no broker running in {args.attach}")
    if not args.attach:
        broker.start()
    results: list[dict[str, Any]] = []
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    try:
        print(f"broker {broker.service_url}; load {loadavg()}", flush=True)
        print(HEADER, flush=True)
        turn = 0
        for n in ns:
            for mode in modes:
                order = clients[turn % len(clients):] + clients[:turn % len(clients)]
                turn += 1
                for name in order:
                    spec = {"client": name, "service_url": broker.service_url, "n": n, "mode": mode,
                            "idle_s": args.idle, "broker_pid": broker.pid, "prefix": f"{name}-{mode}-{n}-{uuid.uuid4().hex[:8]}",
                            "load_before": loadavg()}
                    r = run_child(sys.executable, spec, timeout=600 + n * 0.5)
                    r["load_before"] = spec["load_before"]
                    results.append(r)
                    print(row(r), flush=True)
        if args.partitions:
            for name in clients:
                # A topic of its own for each client: the first to subscribe pays for loading
                # the partitions in the broker (a second client on the same topic took 1 s
                # where the first took 8-20).
                topic = f"persistent://public/default/scale-parts-{uuid.uuid4().hex[:8]}"
                broker.create_partitioned_topic(topic.rsplit("/", 1)[1], args.partitions)
                spec = {"client": name, "service_url": broker.service_url, "n": 0, "mode": "partitions",
                        "partitions": args.partitions, "topic": topic, "idle_s": args.idle, "broker_pid": broker.pid,
                        "prefix": f"{name}-parts-{uuid.uuid4().hex[:8]}", "load_before": loadavg()}
                r = run_child(sys.executable, spec, timeout=900)
                results.append(r)
                if "error" in r:
                    print(f"{name} partitions: failed {r['error'][-300:]}", flush=True)
                else:
                    print(f"{name}: consumer on {args.partitions} partitions {r['consumer_s']:.2f} s "
                          f"(+{r['consumer_rss_kb'] / 1024:.1f} MB), producer {r['producer_s']:.2f} s, RSS "
                          f"{(r['after']['rss_kb'] - r['before']['rss_kb']) / 1024:+.1f} MB, threads "
                          f"{r['before']['threads']}→{r['after']['threads']}, fds {r['before']['fds']}→"
                          f"{r['after']['fds']}, idle CPU {r['idle_cpu_pct']:.2f} %", flush=True)
    finally:
        if not args.attach:
            broker.stop()
    meta = {"started": started, "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "argv": sys.argv, "load_end": loadavg(), "cpus": os.cpu_count()}
    (out / "results.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    print(f"results: {out / 'results.json'}; load {loadavg()}")
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())

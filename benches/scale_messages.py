"""Client CPU per message as topics, partitions and messages grow (issue 31's last goal).

    python -m benches.scale_messages                       # 5 cases x 2 clients x 3 rounds
    python -m benches.scale_messages --attach DATA_DIR     # a broker started by python -m magnetar.testing.standalone
    python -m benches.scale_messages --smoke --service-url URL --admin-url URL   # toy sizes, one round

The goal: "No message count, topic count or partition count in this scenario makes the client
slower per message than at small scale by more than 20 %." Cases (messages of 100 B):

- ``1 topic``: 20,000 messages on one topic (the small scale every other case is divided by);
- ``1 topic, 200k``: 200,000 messages on one topic;
- ``100 topics`` and ``1,000 topics``: 20,000 messages spread round-robin over N topics, one
  producer and one consumer per topic, all in one client (200 and 20 messages per topic);
- ``100 partitions``: 20,000 messages through one producer and one consumer of one topic of
  100 partitions.

Each (case, client) runs as two processes of that client, each with its own client object: a
sender (N producers) and a receiver (N consumers, ``Shared``, earliest, receiver queue 1000).
Both create their handles first (a pool of 32 threads, not measured); then the receiver opens
its window, the sender sends every message round-robin over its producers (``send_async``) and
flushes each producer, and once the sender is done the receiver takes every message
(``receive``, reads the payload, ``ack``; consumers in turn, one message each) and closes its
window. Each process's window is its own user+sys CPU (all threads, ``getrusage``), per
message. Two processes rather than one: a consumer's client takes in and decodes the messages
the broker pushes (up to its receiver queue) in the background, which in one process would land
in the send window, and at 1,000 topics (20 messages each) would be all of them. Same settings for both clients: batches of at most 1000 messages / 128 KB, 10 ms
batching delay, at most 10,000 pending messages per producer (blocking when full), no
compression. Clients alternate; the table gives each client's median over the rounds and the
ratio of that median to the client's own ``1 topic`` median.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from itertools import cycle
from pathlib import Path
from typing import IO, Any, Iterable, Sequence

SIZE = 100
RECEIVER_QUEUE = 1000
BATCH_MAX_MESSAGES = 1000
BATCH_MAX_BYTES = 128 * 1024
BATCH_DELAY_MS = 10
MAX_PENDING = 10_000
THREADS = 32
SUB = "scale-messages"
RECEIVE_TIMEOUT_S = 60
ROOT = Path(__file__).resolve().parent.parent
CLIENTS = ("magnetar", "official")


def cases(messages: int, big: int, topic_counts: list[int], partitions: int) -> list[dict[str, Any]]:
    """The scenario's cases, the small scale first (the others are divided by it)."""
    out = [{"case": "1 topic", "topics": 1, "partitions": 0, "messages": messages}]
    if big:
        out.append({"case": f"1 topic, {big:,}", "topics": 1, "partitions": 0, "messages": big})
    out += [{"case": f"{n:,} topics", "topics": n, "partitions": 0, "messages": messages} for n in topic_counts]
    if partitions:
        out.append({"case": f"{partitions:,} partitions", "topics": 1, "partitions": partitions, "messages": messages})
    return out


# ----------------------------------------------------------------------------------------------
# the clients (each child process imports only its own)

_ORDER = "round-robin"


def _order(handles: list[Any], items: Sequence[Any]) -> Iterable[tuple[Any, Any]]:
    """Pairs each item with the handle that sends or takes it: one item per handle in turn
    (``round-robin``, the default) or each handle's share in one run (``burst``: as a service
    whose tenants send in bursts)."""
    if _ORDER == "burst":
        per = len(items) // len(handles)
        return ((h, x) for k, h in enumerate(handles) for x in items[k * per:(k + 1) * per])
    return zip(cycle(handles), items)


class Magnetar:
    def __init__(self, url: str) -> None:
        import magnetar

        self.client = magnetar.Client(url)

    def producer(self, topic: str) -> Any:
        return self.client.create_producer(topic, batching=True, batch_max_messages=BATCH_MAX_MESSAGES,
                                           batch_max_bytes=BATCH_MAX_BYTES, batch_max_delay=BATCH_DELAY_MS / 1000,
                                           compression=None, max_pending=MAX_PENDING, block_if_full=True)

    def consumer(self, topic: str) -> Any:
        return self.client.subscribe(topic, SUB, subscription_type="shared", initial_position="earliest",
                                     receiver_queue_size=RECEIVER_QUEUE)

    def send(self, producers: list[Any], payloads: list[bytes]) -> Any:
        futures: list[Any] = []
        append = futures.append
        for send_async, p in _order([x.send_async for x in producers], payloads):
            append(send_async(p))
        for x in producers:
            x.flush()
        return futures

    def sent_ok(self, futures: Any, n: int) -> int:
        return sum(1 for f in futures if f.exception() is None)

    def receive(self, consumers: list[Any], n: int) -> int:
        got = 0
        for (receive, ack), _ in _order([(c.receive, c.ack) for c in consumers], range(n)):
            m = receive(timeout=RECEIVE_TIMEOUT_S)
            got += len(m.data)
            ack(m)
        return got


class Official:
    def __init__(self, url: str) -> None:
        import pulsar

        self.pulsar = pulsar
        self.client = pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))

    def producer(self, topic: str) -> Any:
        return self.client.create_producer(
            topic, batching_enabled=True, batching_max_messages=BATCH_MAX_MESSAGES,
            batching_max_allowed_size_in_bytes=BATCH_MAX_BYTES, batching_max_publish_delay_ms=BATCH_DELAY_MS,
            compression_type=self.pulsar.CompressionType.NONE, max_pending_messages=MAX_PENDING,
            block_if_queue_full=True)

    def consumer(self, topic: str) -> Any:
        return self.client.subscribe(topic, SUB, consumer_type=self.pulsar.ConsumerType.Shared,
                                     initial_position=self.pulsar.InitialPosition.Earliest,
                                     receiver_queue_size=RECEIVER_QUEUE)

    def send(self, producers: list[Any], payloads: list[bytes]) -> Any:
        results: list[Any] = []
        append = results.append

        def done(res: Any, _msg_id: Any) -> None:
            append(res)

        for send_async, p in _order([x.send_async for x in producers], payloads):
            send_async(p, done)
        for x in producers:
            x.flush()
        return results

    def sent_ok(self, results: Any, n: int) -> int:
        # flush() can return before the client has run the last callbacks (a smoke run once
        # counted fewer results than messages, all of which were received); wait for them,
        # with a bound, outside the window.
        deadline = time.monotonic() + 30
        while len(results) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        return sum(1 for r in results if r == self.pulsar.Result.Ok)

    def receive(self, consumers: list[Any], n: int) -> int:
        got = 0
        for (receive, ack), _ in _order([(c.receive, c.acknowledge) for c in consumers], range(n)):
            m = receive(RECEIVE_TIMEOUT_S * 1000)
            got += len(m.data())
            ack(m)
        return got


# ----------------------------------------------------------------------------------------------
# one side of one case, in its own process


def _cpu() -> float:
    from benches.common import self_cpu

    u, s = self_cpu()
    return u + s


def _say(tag: str, body: Any = None) -> None:
    # "@@" marks this process's own lines: the official client may log to stdout too.
    print(f"@@{tag} {json.dumps(body)}", flush=True)


# The handles and the client stay alive until the process exits without closing them: dropping
# the official client's handles can block for seconds (it closes them), which delayed the result
# and so the receiver's drain.
_KEEP: list[Any] = []


def child(role: str, spec: dict[str, Any]) -> dict[str, Any]:
    global _ORDER
    _ORDER = spec.get("order", "round-robin")
    c: Any = Magnetar(spec["service_url"]) if spec["client"] == "magnetar" else Official(spec["service_url"])
    make = c.producer if role == "send" else c.consumer
    t0 = time.perf_counter()
    with ThreadPoolExecutor(THREADS) as pool:
        handles = list(pool.map(make, spec["topics"]))
    create_s = time.perf_counter() - t0
    _KEEP.extend([c, handles])
    n = spec["messages"]
    payloads = [i.to_bytes(8, "big") + b"x" * (SIZE - 8) for i in range(n)] if role == "send" else []
    perf = _perf(spec, role)
    _say("ready", {"create_s": create_s})
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("no go")
    t0, cpu0 = time.perf_counter(), _cpu()
    if role == "send":
        outcome = c.send(handles, payloads)
    else:
        # The window is open while the sender sends (what this client does with the messages
        # it is pushed is in it); the loop starts once every message is acknowledged to the
        # sender, so each case drains a backlog, as benches/receive_path.py does.
        if sys.stdin.readline().strip() != "drain":
            raise SystemExit("no drain")
        got_bytes = c.receive(handles, n)
    cpu_s, wall_s = _cpu() - cpu0, time.perf_counter() - t0
    if perf is not None:
        perf.send_signal(signal.SIGINT)
        perf.wait()
    if role == "send":
        _say("sent")  # the receiver drains now
        done = c.sent_ok(outcome, n)
        ok = done == n
    else:
        done = got_bytes // SIZE
        ok = got_bytes == n * SIZE
    return {"role": role, "create_s": create_s, "cpu_s": cpu_s, "wall_s": wall_s, "us_per_msg": 1e6 * cpu_s / n,
            "done": done, "ok": ok}


def _perf(spec: dict[str, Any], role: str) -> subprocess.Popen[bytes] | None:
    """With ``--perf DIR``: ``perf record -g`` of this process from before the window to its end
    (the handles are made by then, and the waits in between take no samples)."""
    if not spec.get("perf_dir"):
        return None
    slug = f"{spec['client']}-{spec['case'].replace(' ', '').replace(',', '')}-r{spec['round']}-{role}"
    p = subprocess.Popen(["perf", "record", "-F", "2999", "-g", "-o", f"{spec['perf_dir']}/{slug}.data",
                          "-p", str(os.getpid())], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # perf attaches
    return p


# ----------------------------------------------------------------------------------------------
# orchestrator


def _start(role: str, spec_path: Path, err: IO[str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "benches.scale_messages", "--child", role, str(spec_path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT)


def _expect(p: subprocess.Popen[str], tag: str) -> Any:
    assert p.stdout is not None
    for line in p.stdout:
        if line.startswith(f"@@{tag} "):
            return json.loads(line[len(tag) + 3:])
        if line.startswith("@@error "):
            raise RuntimeError(json.loads(line[8:]))
    raise RuntimeError(f"child exited ({p.wait()}) before {tag!r}")


def run_case(spec: dict[str, Any], tmp: Path, timeout: float) -> dict[str, Any]:
    """One case with one client: a receiver and a sender process; returns both sides' results."""
    spec_path = tmp / f"{uuid.uuid4().hex}.json"
    spec_path.write_text(json.dumps(spec))
    err_path = tmp / f"{spec_path.stem}.err"
    procs: list[subprocess.Popen[str]] = []
    with err_path.open("w") as err:
        # A bound on the whole case: a child stuck in a create or a receive is killed, the
        # case reports the failure and the run goes on.
        def kill_all() -> None:
            for p in procs:
                p.kill()

        watchdog = threading.Timer(timeout, kill_all)
        watchdog.start()
        try:
            procs.append(_start("receive", spec_path, err))
            recv_ready = _expect(procs[0], "ready")
            procs.append(_start("send", spec_path, err))
            send_ready = _expect(procs[1], "ready")
            for p in procs:
                assert p.stdin is not None
                p.stdin.write("go\n")
                p.stdin.flush()
            _expect(procs[1], "sent")
            assert procs[0].stdin is not None
            procs[0].stdin.write("drain\n")
            procs[0].stdin.flush()
            send = _expect(procs[1], "result")
            receive = _expect(procs[0], "result")
            for p in procs:
                p.wait(timeout=60)
        except Exception as exc:  # noqa: BLE001 - reported in the table, the run goes on
            for p in procs:
                p.kill()
            tail = err_path.read_text()[-1500:]
            return {**spec, "error": f"{exc}: {tail}"}
        finally:
            watchdog.cancel()
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.wait()
    return {**spec, "send": {**send, "create_s": send_ready["create_s"]},
            "receive": {**receive, "create_s": recv_ready["create_s"]}}


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def table(runs: list[dict[str, Any]], case_list: list[dict[str, Any]]) -> str:
    """Per case and client: median µs per message of each side, its range over the rounds, and
    the ratio of the median to the client's own median for the first case."""
    lines = ["| case | client | send µs/msg | send ratio | receive+ack µs/msg | receive ratio | rounds |",
             "|---|---|---:|---:|---:|---:|---:|"]
    med: dict[tuple[str, str, str], float] = {}
    for case in case_list:
        for client in CLIENTS:
            ok = [r for r in runs if r["case"] == case["case"] and r["client"] == client and "error" not in r]
            if not any(r["case"] == case["case"] and r["client"] == client for r in runs):
                continue
            cells = []
            for side in ("send", "receive"):
                us = [r[side]["us_per_msg"] for r in ok]
                if not us:
                    cells += ["failed", ""]
                    continue
                m = med[(case["case"], client, side)] = statistics.median(us)
                base = med.get((case_list[0]["case"], client, side))
                spread = f" ({min(us):.2f}-{max(us):.2f})" if len(us) > 1 else ""
                cells += [f"{m:.2f}{spread}", f"{m / base:.2f}x" if base else ""]
            lines.append(f"| {case['case']} | {client} | {' | '.join(cells)} | {len(ok)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benches.scale_messages", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", nargs=2, metavar=("ROLE", "SPEC"), help=argparse.SUPPRESS)
    ap.add_argument("--messages", type=int, default=20_000, help="messages of every case but the big one")
    ap.add_argument("--big", type=int, default=200_000, help="messages of the big one-topic case (0: skip)")
    ap.add_argument("--topics", default="100,1000", help="topic counts of the spread cases")
    ap.add_argument("--partitions", type=int, default=100, help="partitions of the partitioned case (0: skip)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--order", choices=("round-robin", "burst"), default="round-robin",
                    help="messages one per topic in turn, or each topic's share in one run")
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--smoke", action="store_true", help="toy sizes (300 / 3,000 messages, 3 and 10 topics, "
                                                          "3 partitions), one round")
    ap.add_argument("--attach", help="use a broker started with `python -m magnetar.testing.standalone --data-dir DIR start`")
    ap.add_argument("--service-url", help="use the broker at this URL (with --admin-url)")
    ap.add_argument("--admin-url", help="the broker's HTTP URL, to create the partitioned topic")
    ap.add_argument("--out", help="results directory (default benches/results/scale-messages-<UTC time>)")
    ap.add_argument("--perf", help="a directory: `perf record -g` each process's window into it (costs CPU "
                                   "of its own: not for the figures)")
    args = ap.parse_args(argv)
    if args.child:
        role, spec_path = args.child
        try:
            _say("result", child(role, json.loads(Path(spec_path).read_text())))
        except BaseException as exc:  # noqa: BLE001 - the orchestrator reports it
            _say("error", f"{type(exc).__name__}: {exc}")
            raise
        os._exit(0)  # without closing the handles (see _KEEP); the broker drops them

    from benches.common import provenance

    print(provenance(), flush=True)
    if args.smoke:
        args.messages, args.big, args.topics, args.partitions, args.rounds = 300, 3_000, "3,10", 3, 1
    topic_counts = [int(x) for x in args.topics.split(",") if x]
    case_list = cases(args.messages, args.big, topic_counts, args.partitions)
    clients = [c for c in args.clients.split(",") if c]
    out = Path(args.out or ROOT / "benches" / "results" / ("scale-messages-" + time.strftime("%Y%m%dT%H%M", time.gmtime())))
    out.mkdir(parents=True, exist_ok=True)

    from magnetar.admin import Admin
    from magnetar.testing.standalone import Standalone

    broker: Any = None
    if args.attach:
        broker = Standalone.attach(args.attach)
        if broker is None:
            raise SystemExit(f"no broker running in {args.attach}")
    elif not args.service_url:
        broker = Standalone(port=0, heap="2g")
        broker.start()
    service_url = args.service_url or broker.service_url
    admin_url: str = args.admin_url or (broker.admin_url if broker is not None else "")
    if args.partitions and not admin_url:
        raise SystemExit("--service-url with a partitioned case needs --admin-url")
    runs: list[dict[str, Any]] = []
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    try:
        print(f"broker {service_url}; load {_loadavg()}", flush=True)
        with tempfile.TemporaryDirectory(prefix="scale-messages-") as tmp:
            for rnd in range(args.rounds):
                for k, case in enumerate(case_list):
                    turn = rnd + k
                    for client in clients[turn % len(clients):] + clients[:turn % len(clients)]:
                        prefix = f"persistent://public/default/sm-{client[0]}-{uuid.uuid4().hex[:8]}"
                        if case["partitions"]:
                            with Admin(admin_url) as admin:
                                admin.topics.create(prefix, partitions=case["partitions"])
                            topics = [prefix]
                        else:
                            topics = [f"{prefix}-{i}" for i in range(case["topics"])]
                        spec = {**case, "client": client, "round": rnd + 1, "service_url": service_url,
                                "topics": topics, "load_before": _loadavg(), "order": args.order,
                                "perf_dir": str(Path(args.perf).resolve()) if args.perf else None}
                        r = run_case(spec, Path(tmp), timeout=300 + case["topics"] * 0.3 + case["messages"] / 1000)
                        r["load_after"] = _loadavg()
                        del r["topics"]
                        runs.append(r)
                        if "error" in r:
                            print(f"round {rnd + 1} {case['case']} {client}: failed: {r['error'][-600:]}", flush=True)
                            continue
                        bad = [side for side in ("send", "receive") if not r[side]["ok"]]
                        print(f"round {rnd + 1} {case['case']} {client}: send {r['send']['us_per_msg']:.2f} "
                              f"receive+ack {r['receive']['us_per_msg']:.2f} CPU µs/msg (create "
                              f"{r['send']['create_s']:.1f} s / {r['receive']['create_s']:.1f} s, window "
                              f"{r['send']['wall_s']:.2f} s / {r['receive']['wall_s']:.2f} s; load "
                              f"{r['load_before']} -> {r['load_after']})" + (f" COUNT MISMATCH {bad}" if bad else ""),
                              flush=True)
    finally:
        if broker is not None and not args.attach:
            broker.stop()
    print(table(runs, case_list))
    meta = {"started": started, "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "argv": sys.argv,
            "load_end": _loadavg()}
    (out / "results.json").write_text(json.dumps({"meta": meta, "runs": runs}, indent=1))
    print(f"results: {out / 'results.json'}; load {_loadavg()}")
    failed = [r for r in runs if "error" in r or not (r["send"]["ok"] and r["receive"]["ok"])]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

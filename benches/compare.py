"""magnetar vs the official ``pulsar-client`` vs Java ``pulsar-perf``, side by side.

::

    python -m benches.compare --quick          # 1 round, small counts: a smoke run (< 3 min)
    python -m benches.compare                  # 5 rounds, the issue's counts (about 45-60 min)
    python -m benches.compare --rounds 7 --scenarios produce_100B,consume_100B

It starts a local standalone broker (``magnetar.testing.Standalone``), then runs every client of
every scenario in its own process, on a fresh topic, with identical settings (batching 1000
messages / 128 KiB / the same delay, no compression, receiver queue 1000, pending limit
10,000). A *round* runs each client of a scenario once; rounds are interleaved (A B C, then
B C A, ...) so neighbouring runs share the machine's drift, and ratios are taken per round and
summarised by their median, min and max. ``latency_1k_together`` runs magnetar and the official
client at the same time instead, so both meet the same broker stalls. Payloads are built before
the measured window; message counts are checked against the broker (``msgInCounter``) and the
consumer's count.

Outputs (``--out``, default ``benches/results/<UTC time>-<mode>/``): ``results.json`` (every
run, the machine, the settings), ``results.md`` (tables with magnetar/official and
magnetar/Java ratios, and the issue's targets) and ``results.png`` (chart).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benches import common
from benches.clients import java_perf

ROOT = Path(__file__).resolve().parent.parent

# The apis each client runs in each role, as the bench clients name them; "java" runs pulsar-perf.
_APIS = {
    "produce": {"magnetar": ["send_async", "send_many", "asyncio"], "official": ["send_async", "asyncio"], "java": ["perf"]},
    "consume": {"magnetar": ["receive", "receive_many", "async_for"], "official": ["receive", "batch_receive", "asyncio"],
                "java": ["perf"]},
    "latency": {"magnetar": ["send_async"], "official": ["send_async"], "java": ["perf"]},
}
# How an api is shown where its own name does not say what it does.
_SHOWN = {("produce", "asyncio"): "asyncio send", ("consume", "asyncio"): "asyncio receive",
          ("consume", "async_for"): "async for"}


def _clients(role: str) -> list[tuple[str, str, str]]:
    """(client, api, label) of everything that runs in ``role``."""
    return [(client, api, "java pulsar-perf" if client == "java" else f"{client} {_SHOWN.get((role, api), api)}")
            for client, apis in _APIS[role].items() for api in apis]


PRODUCERS, CONSUMERS, LATENCY = _clients("produce"), _clients("consume"), _clients("latency")

# name -> (kind, clients, full params, quick params)
SCENARIOS: dict[str, tuple[str, list[tuple[str, str, str]], dict[str, Any], dict[str, Any]]] = {
    "produce_100B": ("produce", PRODUCERS, {"n": 1_000_000, "size": 100}, {"n": 20_000, "size": 100}),
    "produce_1KiB": ("produce", PRODUCERS, {"n": 200_000, "size": 1024}, {"n": 10_000, "size": 1024}),
    "consume_100B": ("consume", CONSUMERS, {"n": 1_000_000, "size": 100}, {"n": 20_000, "size": 100}),
    "blocking_send": ("blocking", [("magnetar", "send", "magnetar send"), ("official", "send", "official send")],
                      {"n": 20_000, "size": 100, "max_seconds": 30}, {"n": 300, "size": 100, "max_seconds": 3}),
    "latency_1k": ("latency", LATENCY, {"rate": 1_000, "duration": 20, "size": 100},
                   {"rate": 1_000, "duration": 2, "size": 100}),
    "latency_10k": ("latency", LATENCY, {"rate": 10_000, "duration": 10, "size": 100},
                    {"rate": 10_000, "duration": 2, "size": 100}),
    # Both clients at once, each on its own topic: a broker stall or a stolen CPU then hits both
    # alike, so the per-round ratio shows the clients' own difference rather than which run drew
    # the noisier 20 seconds (sequential p99 ratios here swing 0.6-1.6x from round to round).
    "latency_1k_together": ("latency", LATENCY[:2], {"rate": 1_000, "duration": 20, "size": 100},
                            {"rate": 1_000, "duration": 2, "size": 100}),
    "idle": ("idle", [("magnetar", "idle", "magnetar idle"), ("official", "idle", "official idle")],
             {"duration": 30}, {"duration": 3}),
}


# Scenarios whose clients run at the same time rather than one after another.
TOGETHER = ("latency_1k_together",)

# Scenarios where --quick still runs pulsar-perf (both of its code paths, produce and consume).
QUICK_JAVA = ("produce_100B", "consume_100B")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- machine facts


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def machine_info() -> dict[str, Any]:
    cpuinfo = _read("/proc/cpuinfo")
    model = next((ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines() if ln.startswith("model name")), "?")
    flags = next((ln.split(":", 1)[1].split() for ln in cpuinfo.splitlines() if ln.startswith("flags")), [])
    mem_kb = next((int(ln.split()[1]) for ln in _read("/proc/meminfo").splitlines() if ln.startswith("MemTotal")), 0)
    return {"nproc": os.cpu_count(), "cpu_model": model, "sse4_2": "sse4_2" in flags,
            "mem_gib": round(mem_kb / 2**20, 1), "kernel": platform.release(), "python": platform.python_version(),
            "loadavg": _read("/proc/loadavg").split()[:3]}


def _cmd_out(cmd: list[str], cwd: Path | None = None) -> str:
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def software_info(python: str, env: dict[str, str]) -> dict[str, Any]:
    probe = ("import json, hashlib, pathlib, magnetar, magnetar._core as c, importlib.metadata as m;"
             "p = pathlib.Path(c.__file__);"
             "print(json.dumps({'magnetar': magnetar.__version__, 'magnetar_module': magnetar.__file__,"
             "'extension': str(p), 'extension_sha256': hashlib.sha256(p.read_bytes()).hexdigest()[:16],"
             "'extension_mtime': p.stat().st_mtime, 'pulsar_client': m.version('pulsar-client')}))")
    info: dict[str, Any] = {}
    with contextlib.suppress(Exception):
        info = json.loads(subprocess.run([python, "-c", probe], capture_output=True, text=True, env=env,
                                         cwd=ROOT, timeout=60).stdout)
    info["git_head"] = _cmd_out(["git", "rev-parse", "--short", "HEAD"], ROOT)
    info["git_dirty_files"] = len(_cmd_out(["git", "status", "--porcelain", "--untracked-files=no"], ROOT).splitlines())
    java = shutil.which("java")
    info["java"] = (subprocess.run([java, "-version"], capture_output=True, text=True).stderr.splitlines() or ["?"])[0] \
        if java else None
    return info


# --------------------------------------------------------------------------- running


class Runner:
    def __init__(self, args: argparse.Namespace, broker: Any, home: Path | None, workdir: Path) -> None:
        self.args = args
        self.broker = broker
        self.home = home
        self.workdir = workdir
        self.python = sys.executable
        self.env = dict(os.environ)
        pp = [str(ROOT)]
        if args.magnetar_path:
            pp.insert(0, str(Path(args.magnetar_path).resolve()))
        self.env["PYTHONPATH"] = os.pathsep.join(pp + ([self.env["PYTHONPATH"]] if self.env.get("PYTHONPATH") else []))
        # The "baseline" client is magnetar from another directory (an earlier build), run in
        # the same rounds as the current one so both meet the same machine.
        self.baseline_env = dict(self.env)
        if args.baseline_path:
            self.baseline_env["PYTHONPATH"] = os.pathsep.join([str(Path(args.baseline_path).resolve()), str(ROOT)])
        self.java_skip = "disabled by --no-java" if args.no_java else java_perf.java_available(home)
        if self.java_skip is None:
            java_perf.prepare(workdir / "java", broker.service_url, broker.admin_url)
        self.seq = 0
        self.seq_lock = threading.Lock()

    def spec(self, kind: str, api: str, params: dict[str, Any], topic: str) -> dict[str, Any]:
        delay = common.LATENCY_BATCH_DELAY_MS if kind == "latency" else common.BATCH_DELAY_MS
        return {"scenario": kind, "api": api, "service_url": self.broker.service_url, "topic": topic,
                "subscription": f"bench-{uuid.uuid4().hex[:6]}", "broker_pid": self.broker.pid,
                "batch_max_messages": common.BATCH_MAX_MESSAGES, "batch_max_bytes": common.BATCH_MAX_BYTES,
                "batch_delay_ms": delay, "max_pending": common.MAX_PENDING, "receiver_queue": common.RECEIVER_QUEUE,
                "concurrency": common.ASYNC_CONCURRENCY, "receive_batch": common.RECEIVE_BATCH,
                "async_max_seconds": self.args.async_max_seconds or (20.0 if self.args.quick else 90.0), **params}

    def python_run(self, client: str, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
        with self.seq_lock:
            self.seq += 1
            seq = self.seq
        spec_path = self.workdir / f"spec-{seq}.json"
        out_path = self.workdir / f"out-{seq}.json"
        log_path = self.workdir / f"log-{seq}-{client}-{spec['scenario']}-{spec['api']}.txt"
        spec_path.write_text(json.dumps(spec))
        module = {"magnetar": "benches.clients.magnetar_bench", "baseline": "benches.clients.magnetar_bench",
                  "official": "benches.clients.official_bench"}[client]
        env = self.baseline_env if client == "baseline" else self.env
        with open(log_path, "w") as logf:
            try:
                proc = subprocess.run([self.python, "-m", module, str(spec_path), str(out_path)],
                                      cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=logf,
                                      stderr=subprocess.STDOUT, timeout=timeout)
                code: int | str = proc.returncode
            except subprocess.TimeoutExpired:
                code = "timeout"
        if out_path.exists():
            return json.loads(out_path.read_text())
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-15:])
        return {"error": f"{client} {spec['scenario']}/{spec['api']} exited {code}: {tail}"}

    def run_one(self, name: str, kind: str, client: str, api: str, label: str, params: dict[str, Any],
                rnd: int, pos: int) -> dict[str, Any]:
        topic = f"persistent://public/default/bench-{name}-{client}-{api}-r{rnd}-{uuid.uuid4().hex[:6]}"
        spec = self.spec(kind, api, params, topic)
        timeout = self.args.run_timeout
        rec: dict[str, Any] = {"scenario": name, "kind": kind, "client": client, "api": api, "label": label,
                               "round": rnd, "position": pos, "topic": topic,
                               **{k: params[k] for k in ("n", "size", "rate", "duration", "max_seconds") if k in params}}
        if client == "java" and self.java_skip:
            rec["skipped"] = self.java_skip
            return rec
        try:
            if kind == "consume":
                fill = self.spec("fill", "send_many", params, topic)
                t = time.monotonic()
                filled = self.python_run("magnetar", fill, timeout)
                if filled.get("error") or filled.get("sent") != params["n"]:
                    rec["error"] = f"pre-fill failed: {filled}"
                    return rec
                rec["fill_s"] = round(time.monotonic() - t, 2)
            if client == "java":
                jlog = self.workdir / f"java-{self.seq}-{name}-r{rnd}.txt"
                self.seq += 1
                res = java_perf.run(spec, self.home, self.workdir / "java", timeout, jlog)  # type: ignore[arg-type]
            else:
                res = self.python_run(client, spec, timeout)
            rec.update(res)
            if "error" not in rec:
                self.check(rec, kind, params)
        finally:
            with contextlib.suppress(Exception):
                self.broker.delete_topic(topic, force=True)
        return rec

    def run_together(self, name: str, kind: str, clients: list[tuple[str, str, str]], params: dict[str, Any],
                     rnd: int) -> list[dict[str, Any]]:
        """Runs every client of the round at once (each on its own topic). The broker's CPU
        then serves all of them, so it is not charged to any one."""
        with ThreadPoolExecutor(len(clients)) as pool:
            futures = [pool.submit(self.run_one, name, kind, client, api, label, params, rnd, pos)
                       for pos, (client, api, label) in enumerate(clients)]
            recs = [f.result() for f in futures]
        for rec in recs:
            rec["together"] = True
            for key in ("broker_cpu_s", "broker_cpu_us_per_msg"):
                rec.pop(key, None)
        return recs

    def check(self, rec: dict[str, Any], kind: str, params: dict[str, Any]) -> None:
        """Counts: the broker's msgInCounter for producers, received == sent for consumers."""
        if kind in ("produce", "blocking", "latency"):
            stats = self.broker.topic_stats(rec["topic"])
            broker_in = int(stats.get("msgInCounter", -1))
            rec["broker_msg_in"] = broker_in
            if rec["client"] == "java":
                expected = params["n"] if kind == "produce" else int(params["rate"] * params["duration"])
                rec["messages"] = broker_in
                rec["count_ok"] = broker_in >= expected
            else:
                expected = rec["sent"] + rec.get("extra_messages", 0)
                rec["messages"] = rec["sent"]
                want = params.get("n", rec["sent"]) if kind != "latency" else int(params["rate"] * params["duration"])
                rec["count_ok"] = broker_in == expected and rec.get("errors", 0) == 0 and (
                    rec["sent"] == want or bool(rec.get("capped")))
        elif kind == "consume":
            rec["messages"] = rec.get("received", 0)
            got = rec.get("received", 0)
            rec["count_ok"] = (got == params["n"] or (bool(rec.get("capped")) and 0 < got < params["n"])) and (
                rec["client"] == "java" or rec.get("bytes") == got * params["size"])
        else:
            rec["messages"] = 0
            rec["count_ok"] = True
        m = rec.get("messages") or 0
        if m:
            rec["throughput"] = m / rec["wall_s"]
            rec["cpu_us_per_msg"] = rec["cpu_s"] / m * 1e6
            if rec.get("broker_cpu_s") is not None:
                rec["broker_cpu_us_per_msg"] = rec["broker_cpu_s"] / m * 1e6
        if kind == "idle":
            rec["cpu_percent_of_core"] = 100.0 * rec["cpu_s"] / rec["wall_s"]

    def warm_up(self) -> None:
        """A throwaway run so the broker's JIT and caches are warm (not recorded)."""
        n = 10_000 if self.args.quick else 200_000
        for client, api in (("magnetar", "send_many"), ("official", "send_async"), ("magnetar", "send_async")):
            topic = f"persistent://public/default/bench-warmup-{uuid.uuid4().hex[:6]}"
            res = self.python_run(client, self.spec("produce", api, {"n": n, "size": 100}, topic), self.args.run_timeout)
            if res.get("error"):
                raise SystemExit(f"warm-up failed: {res['error']}")
            with contextlib.suppress(Exception):
                self.broker.delete_topic(topic, force=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benches.compare", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1 round with small counts (smoke run, < 3 minutes)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds (pairs) per scenario (default 5, quick 1)")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS), help=f"comma-separated subset of {','.join(SCENARIOS)}")
    ap.add_argument("--clients", default="magnetar,official,java", help="comma-separated subset of magnetar,official,java")
    ap.add_argument("--no-java", action="store_true", help="skip pulsar-perf")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply message counts and durations (e.g. 0.2)")
    ap.add_argument("--out", type=Path, default=None, help="output directory (default benches/results/<time>-<mode>)")
    ap.add_argument("--magnetar-path", default=None,
                    help="directory put first on PYTHONPATH of the magnetar processes (benchmark a snapshot "
                         "of the package, e.g. one copied aside while others rebuild the tree)")
    ap.add_argument("--baseline-path", default=None,
                    help="also run magnetar from this directory (an unpacked wheel of an earlier build) as the "
                         "client 'baseline', interleaved in the same rounds: a before/after comparison")
    ap.add_argument("--attach", type=Path, default=None,
                    help="use the running broker of this data dir (python -m magnetar.testing.standalone "
                         "--data-dir DIR start) instead of starting one")
    ap.add_argument("--async-max-seconds", type=float, default=None,
                    help="time cap of one asyncio produce/consume run (default 90, quick 20); the rates stay "
                         "valid and the count check uses what was sent")
    ap.add_argument("--no-warmup", action="store_true", help="skip the throwaway warm-up run")
    ap.add_argument("--run-timeout", type=float, default=900.0, help="seconds before one run is abandoned")
    args = ap.parse_args(argv)

    from magnetar.testing.standalone import Standalone, ensure_distribution

    from benches import report

    mode = "quick" if args.quick else "full"
    rounds = args.rounds or (1 if args.quick else 5)
    names = [s for s in args.scenarios.split(",") if s]
    unknown = [s for s in names if s not in SCENARIOS]
    if unknown:
        ap.error(f"unknown scenarios: {unknown}")
    wanted_clients = set(args.clients.split(","))
    out = args.out or ROOT / "benches" / "results" / f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{mode}"
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.monotonic()
    machine = machine_info()
    log(f"machine: {machine['nproc']} CPUs ({machine['cpu_model']}), load {' '.join(machine['loadavg'])}")

    home: Path | None
    try:
        home = ensure_distribution()
    except Exception as exc:  # no Maven: the broker cannot start either
        raise SystemExit(f"cannot get the Pulsar distribution: {exc}") from exc

    if args.attach:
        broker = Standalone.attach(args.attach)
        if broker is None or not broker.is_running():
            raise SystemExit(f"no running broker recorded in {args.attach}")
        owned = False
    else:
        log("starting the standalone broker ...")
        broker = Standalone(port=0)
        broker.start()
        owned = True
    log(f"broker {broker.service_url} pid {broker.pid} (startup {broker.startup_seconds} s)")

    results: list[dict[str, Any]] = []
    meta: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="magnetar-bench-") as tmp:
            runner = Runner(args, broker, home, Path(tmp))
            meta = {
                "mode": mode, "rounds": rounds, "scale": args.scale, "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                "machine": machine, "software": {**software_info(runner.python, runner.env),
                                                 "pulsar": home.name if home else None},
                "java_skipped": runner.java_skip,
                "settings": {k: getattr(common, k) for k in (
                    "BATCH_MAX_MESSAGES", "BATCH_MAX_BYTES", "BATCH_DELAY_MS", "LATENCY_BATCH_DELAY_MS",
                    "RECEIVER_QUEUE", "MAX_PENDING", "ASYNC_CONCURRENCY", "RECEIVE_BATCH", "LATENCY_WARMUP_S")},
                "scenarios": {n: (SCENARIOS[n][3] if args.quick else SCENARIOS[n][2]) for n in names},
            }
            if not args.no_warmup:
                log("warm-up (not recorded) ...")
                runner.warm_up()
            for name in names:
                kind, clients, full, quick = SCENARIOS[name]
                params = dict(quick if args.quick else full)
                for key in ("n", "duration", "max_seconds"):
                    if key in params and args.scale != 1.0:
                        params[key] = max(1, int(params[key] * args.scale)) if key == "n" else params[key] * args.scale
                if args.baseline_path:
                    clients = [*clients, *(("baseline", api, label.replace("magnetar", "baseline")) for c, api, label in clients if c == "magnetar")]
                clients = [c for c in clients if c[0] in wanted_clients | ({"baseline"} if args.baseline_path else set())]
                if args.quick and name not in QUICK_JAVA:
                    clients = [c for c in clients if c[0] != "java"]  # a JVM start costs ~10 s
                for rnd in range(rounds):
                    order = clients[rnd % len(clients):] + clients[:rnd % len(clients)]
                    if name in TOGETHER:
                        recs = runner.run_together(name, kind, order, params, rnd)
                    else:
                        recs = (runner.run_one(name, kind, client, api, label, params, rnd, pos)
                                for pos, (client, api, label) in enumerate(order))
                    for rec in recs:
                        results.append(rec)
                        log(report.one_line(rec))
                        # Keep partial results on disk in case the run is interrupted.
                        (out / "results.json").write_text(json.dumps({"meta": meta, "runs": results}, indent=1))
            meta["loadavg_end"] = _read("/proc/loadavg").split()[:3]
            meta["elapsed_s"] = round(time.monotonic() - t_start, 1)
    finally:
        if owned:
            log("stopping the broker ...")
            broker.stop()

    data = {"meta": meta, "runs": results}
    (out / "results.json").write_text(json.dumps(data, indent=1))
    summary = report.summarise(data)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "results.md").write_text(report.markdown(data, summary))
    chart = report.chart(summary, out / "results.png")
    log(f"done in {meta.get('elapsed_s')} s: {out / 'results.json'}, {out / 'results.md'}"
        + (f", {chart}" if chart else " (no chart: matplotlib is not installed)"))
    print((out / "results.md").read_text())
    bad = [r for r in results if r.get("error") or (not r.get("skipped") and not r.get("count_ok", False))]
    if bad:
        log(f"{len(bad)} run(s) failed or miscounted: " + "; ".join(
            f"{r['scenario']}/{r['label']}: {str(r.get('error') or 'count mismatch')[:300]}" for r in bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Java ``pulsar-perf`` (``org.apache.pulsar.testclient.PulsarPerfTestTool``) from the broker
distribution's ``lib/`` classpath, with its CPU sampled from ``/proc/<jvm pid>/stat``.

The measured window runs between two of its log lines, so JVM start-up, class loading and
connection set-up are outside it (JIT warm-up of the send path is inside, as for every client's
first messages):

- produce: ``Created N producers`` -> ``Closed Producer`` (close waits for every receipt);
- consume: ``Start receiving from`` -> ``DONE``.

pulsar-perf may publish a little more than ``-m`` (it checks the count after sending), so the
orchestrator takes the message count from the broker's ``msgInCounter``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from benches.common import loadavg, machine_busy, proc_cpu

MAIN_CLASS = "org.apache.pulsar.testclient.PulsarPerfTestTool"

_MARKERS = {
    "produce": ("Created 1 producers", "Closed Producer"),
    "consume": ("Start receiving from", "------------------- DONE"),
}
_LAT = re.compile(r"Aggregated latency stats --- Latency: mean:\s*([\d.]+) ms - med:\s*([\d.]+) - 95pct:\s*([\d.]+)"
                  r" - 99pct:\s*([\d.]+) - 99.9pct:\s*([\d.]+).*Max:\s*([\d.]+)")
_RECEIVED = re.compile(r"Aggregated throughput stats --- (\d+) records received")
_SENT = re.compile(r"Aggregated throughput stats --- (\d+) records sent")


def java_available(home: Path | None) -> str | None:
    """None if pulsar-perf can run, else why not."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no java on PATH"
    if home is None or not any((home / "lib").glob("*pulsar-testclient*.jar")):
        return f"no pulsar-testclient jar in {home}/lib"
    return None


def _java() -> str:
    jh = os.environ.get("JAVA_HOME")
    return str(Path(jh, "bin", "java")) if jh else "java"


def command(home: Path, workdir: Path, args: list[str]) -> list[str]:
    opens = ["java.base/java.io", "java.base/java.nio", "java.base/java.lang", "java.base/jdk.internal.misc",
             "java.base/sun.net", "java.management/sun.management"]
    return [_java(), "-cp", f"{workdir}{os.pathsep}{home / 'lib'}/*",
            "-Xms1g", "-Xmx1g", "-XX:MaxDirectMemorySize=1g", "-XX:+UseG1GC", "-XX:ParallelGCThreads=2",
            "-XX:ConcGCThreads=1", "-XX:+PerfDisableSharedMem", "-Djava.net.preferIPv4Stack=true",
            "-Dio.netty.tryReflectionSetAccessible=true",
            *[a for m in opens for a in ("--add-opens", f"{m}=ALL-UNNAMED")],
            f"-Dlog4j.configurationFile={workdir / 'log4j2.xml'}", "-Dlog4j.shutdownHookEnabled=false",
            MAIN_CLASS, str(workdir / "perf.conf"), *args]


def prepare(workdir: Path, service_url: str, admin_url: str) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "perf.conf").write_text(f"brokerServiceUrl={service_url}/\nwebServiceUrl={admin_url}/\n")
    (workdir / "log4j2.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n<Configuration status="WARN" shutdownHook="disable">\n'
        '  <Appenders><Console name="console" target="SYSTEM_OUT">'
        '<PatternLayout pattern="%d{HH:mm:ss.SSS} [%t] %-5level %c{1} - %msg%n"/></Console></Appenders>\n'
        '  <Loggers><Root level="info"><AppenderRef ref="console"/></Root></Loggers>\n</Configuration>\n')


def perf_args(spec: dict[str, Any]) -> tuple[str, list[str]]:
    """(marker kind, pulsar-perf arguments) for a spec."""
    sc = spec["scenario"]
    if sc in ("produce", "latency"):
        rate = spec["rate"] if sc == "latency" else 10_000_000
        n = int(spec["rate"] * spec["duration"]) if sc == "latency" else spec["n"]
        return "produce", ["produce", "-r", str(rate), "-m", str(n), "-s", str(spec["size"]),
                           "-b", str(spec["batch_delay_ms"]), "-bm", str(spec["batch_max_messages"]),
                           "-bb", str(spec["batch_max_bytes"]), "-o", str(spec["max_pending"]),
                           "-p", str(spec["max_pending"]), "--warmup-time", "1", spec["topic"]]
    if sc == "consume":
        return "consume", ["consume", "-ss", spec["subscription"], "-st", "Exclusive", "-sp", "Earliest",
                           "-q", str(spec["receiver_queue"]), "-m", str(spec["n"]), spec["topic"]]
    raise ValueError(f"pulsar-perf does not run scenario {sc!r}")


def _term(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
    except OSError:
        pass


def run(spec: dict[str, Any], home: Path, workdir: Path, timeout: float, log_path: Path) -> dict[str, Any]:
    """Runs pulsar-perf for ``spec``; returns the same fields as the Python clients' results."""
    kind, args = perf_args(spec)
    start_marker, end_marker = _MARKERS[kind]
    cmd = command(home, workdir, args)
    marks: dict[str, tuple[float, float | None, float | None, tuple[float, float], float]] = {}
    lines: list[str] = []
    proc = subprocess.Popen(cmd, cwd=workdir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1, start_new_session=True)
    broker_pid = spec.get("broker_pid")

    def sample() -> tuple[float, float | None, float | None, tuple[float, float], float]:
        return (time.perf_counter(), proc_cpu(proc.pid), proc_cpu(broker_pid), machine_busy(), loadavg())

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if start_marker in line and "start" not in marks:
                marks["start"] = sample()
            elif end_marker in line and "start" in marks and "end" not in marks:
                marks["end"] = sample()
                # pulsar-perf idles for seconds before exiting; SIGTERM runs its shutdown hook,
                # which prints the aggregated stats at once.
                threading.Timer(0.5, _term, (proc.pid,)).start()
            lines.append(line)

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()
    t.join(10)
    log_path.write_text("".join(lines))
    text = "".join(lines)
    if "start" not in marks or "end" not in marks:
        return {"error": f"pulsar-perf exited {proc.returncode} without its window markers; see {log_path}"}
    (t0, c0, b0, m0, l0), (t1, c1, b1, m1, _l1) = marks["start"], marks["end"]
    res: dict[str, Any] = {
        "wall_s": t1 - t0,
        "cpu_s": (c1 or 0.0) - (c0 or 0.0),
        "broker_cpu_s": None if b0 is None or b1 is None else b1 - b0,
        "machine_busy": (m1[0] - m0[0]) / max(1.0, m1[1] - m0[1]),
        "loadavg_start": l0,
        "loadavg_end": loadavg(),
        "exit_code": proc.returncode,
        "client": "java",
        "version": home.name,
    }
    if m := _LAT.search(text):
        mean, med, _p95, p99, p999, mx = (float(x) for x in m.groups())
        res["latency_ms"] = {"p50": med, "p99": p99, "p999": p999, "max": mx, "mean": mean,
                             "method": "pulsar-perf: send call -> receipt, first --warmup-time s dropped"}
    if m := _RECEIVED.search(text):
        res["received"] = int(m.group(1))
    if m := _SENT.search(text):
        res["perf_reported_sent"] = int(m.group(1))
    return res

"""The exactly-once sink (``exactlyOnce=true``) against the real broker: batch writes are
all-or-nothing per job, a task retried after its Python worker died leaves its rows once, a
streaming query restarted after dying between its write and its commit writes every row once,
and so does a job whose whole driver is killed (SIGKILL) at each point of its commit and run
again (tests/spark_driver_kill_job.py). Controls show the duplicates the option, and the
commit's record, prevent.

What a topic finally holds is read up to a plain *sentinel* message sent after the write: the
broker delivers nothing past an open transaction's first message (read-committed), so once the
sentinel is read every earlier transaction has been committed or aborted (or timed out)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from jvm import error_text as _error_text
from jvm import new_topic as _new_topic
from waiting import wait_until

import magnetar
from magnetar.spark import ClientConfig

# Low, so that a transaction orphaned by a dead worker or driver aborts within the test, yet
# above the time from a task's start to the driver's commit on a loaded machine.
TXN_TIMEOUT_MS = "20000"
SENTINEL = b"--sentinel--"


def _final_values(conf: ClientConfig, topic: str, timeout: float = 90.0) -> Counter[bytes]:
    """Every value the topic finally holds (see the module's docstring), with its count."""
    with conf.create() as client:
        client.create_producer(topic, batching=False).send(SENTINEL)
        reader = client.create_reader(topic)
        got: Counter[bytes] = Counter()
        while True:
            data = reader.read_next(timeout=timeout).data
            if data == SENTINEL:
                return got
            got[data] += 1


def _stats_url(broker: Any, topic: str) -> str:
    """The admin URL of the topic's stats (the topic is created, so that it has stats before
    the first write reaches the broker)."""
    broker.create_topic(topic)
    return f"{broker.admin_url}/admin/v2/persistent/{topic.removeprefix('persistent://')}/stats"


def _options(exactly_once: bool) -> dict[str, str]:
    return {"exactlyOnce": "true", "transactionTimeoutMs": TXN_TIMEOUT_MS} if exactly_once else {}


def _ids(n: int) -> Counter[bytes]:
    return Counter(str(i).encode() for i in range(n))


# -- options ------------------------------------------------------------------------------------


def test_exactly_once_options_are_checked() -> None:
    import magnetar
    from magnetar.spark._options import SourceOptions

    def parse(**o: str) -> SourceOptions:
        return SourceOptions.parse({"service.url": "pulsar://127.0.0.1:6650", "topic": "t", **o})

    o = parse(exactlyOnce="true", transactionTimeoutMs="30000")
    assert (o.exactly_once, o.transaction_timeout_ms) == (True, 30_000)
    assert (parse().exactly_once, parse(exactlyOnce="true").transaction_timeout_ms) == (False, 120_000)
    for options, expected in [({"exactlyOnce": "maybe"}, "expected true or false"),
                              ({"transactionTimeoutMs": "5000"}, "only with exactlyOnce=true"),
                              ({"exactlyOnce": "true", "transactionTimeoutMs": "0"}, "at least 1"),
                              ({"exactlyonse": "true"}, "did you mean 'exactlyOnce'"),
                              ({"writeId": "w1", "writeLog": "/tmp/w"}, "only with exactlyOnce=true"),
                              ({"exactlyOnce": "true", "writeId": "w1"}, "needs writeLog"),
                              ({"exactlyOnce": "true", "writeLog": "/tmp/w"}, "only with writeId"),
                              ({"exactlyOnce": "true", "writeId": "../w", "writeLog": "/tmp/w"}, "it names a file")]:
        with pytest.raises(magnetar.InvalidConfiguration) as info:
            parse(**options)
        assert expected in str(info.value)
    with pytest.raises(magnetar.InvalidConfiguration, match="only for writes"):
        parse(exactlyOnce="true").check_read(streaming=False)
    # a stream's record is kept in its checkpoint, which reaches the sink only as an option
    with pytest.raises(magnetar.InvalidConfiguration, match=r"needs \.option\('checkpointLocation'"):
        parse(exactlyOnce="true").check_stream_write()
    with pytest.raises(magnetar.InvalidConfiguration, match="only for batch writes"):
        parse(exactlyOnce="true", writeId="w1", writeLog="/tmp/w", checkpointLocation="/ck").check_stream_write()
    o = parse(exactlyOnce="true", checkpointLocation="/ck")
    o.check_stream_write()
    assert (o.checkpoint_location, parse(exactlyOnce="true", writeId="w1", writeLog=" /w ").write_log) == ("/ck", "/w")


# -- batch writes -------------------------------------------------------------------------------


def _write(df: Any, service_url: str, topic: str, **options: str) -> None:
    w = df.write.format("pulsar").mode("append").option("service.url", service_url).option("topic", topic)
    for k, v in options.items():
        w = w.option(k, v)
    w.save()


def test_batch_rows_are_visible_only_once_the_job_commits(
        spark: Any, service_url: str, broker: Any, conf: ClientConfig, tmp_path: Path) -> None:
    """Between the tasks' end (every row at the broker) and the driver's commit, a reader sees
    nothing; after it, every row once. The commit is held back by a subclass of the sink until
    the test has looked."""
    import magnetar.spark as ms

    topic, ready, go = _new_topic("eo-batch"), tmp_path / "ready", tmp_path / "go"
    broker.create_topic(topic)
    held = f"pulsar_held_{uuid.uuid4().hex[:6]}"

    class HeldWriter(ms._write.PulsarBatchWriter):  # type: ignore[name-defined,misc]
        def commit(self, messages: list[Any]) -> None:
            import time

            ready.write_text(json.dumps([m.txn for m in messages]))
            deadline = time.monotonic() + 120
            while not go.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            super().commit(messages)

    class Held(ms.PulsarDataSource):  # type: ignore[misc]
        @classmethod
        def name(cls) -> str:
            return held

        def writer(self, schema: Any, overwrite: bool) -> Any:
            base = super().writer(schema, overwrite)
            return HeldWriter(base.opts, base.schema)

    spark.dataSource.register(Held)
    seen: dict[str, Any] = {}

    def look() -> None:
        """While the driver holds its commit: what the broker has, what a reader sees."""
        try:
            if wait_until(ready.exists, 120):
                seen["transactions"] = len(json.loads(ready.read_text()))
                seen["received"] = broker.topic_stats(topic)["msgInCounter"]
                with conf.create() as client:
                    seen["visible"] = client.create_reader(topic).has_message_available()
        finally:
            go.touch()

    # The write runs in the test's thread (Spark finds a registered data source from there).
    looker = threading.Thread(target=look, name="look before the commit")
    looker.start()
    try:
        df = spark.range(0, 200, numPartitions=2).selectExpr("cast(id as string) as value")
        df.write.format(held).mode("append").option("service.url", service_url).option("topic", topic) \
            .option("exactlyOnce", "true").save()
    finally:
        go.touch()
        looker.join(60)
    # One transaction per task; every row at the broker, none visible.
    assert seen == {"transactions": 2, "received": 200, "visible": False}
    assert _final_values(conf, topic) == _ids(200)


# 8 KB rows ("<id>:xxx..."), big enough that the buffers between Spark and its Python workers
# pass rows on while a task is still running (with Arrow batches of 10 rows).
PADDED = "concat(cast(id as string), ':', repeat('x', 8000))"


def _ids_of(values: Counter[bytes]) -> Counter[bytes]:
    return Counter({k.split(b":")[0]: v for k, v in values.items()})


@pytest.mark.parametrize("exactly_once", [True, False], ids=["exactly-once", "control"])
def test_a_failed_batch_job_leaves_nothing(
        spark: Any, service_url: str, broker: Any, conf: ClientConfig, exactly_once: bool) -> None:
    """A UDF raises on the second partition once the broker has the first partition's rows and
    some of the second's: with exactlyOnce the driver aborts the finished task's transaction
    and the failed task's times out; without it, those rows stay."""
    from pyspark.sql.functions import udf

    topic = _new_topic("eo-fail")
    stats = _stats_url(broker, topic)

    @udf("string")
    def fail_late(value):  # type: ignore[no-untyped-def]  # (no hints: Spark would read them as a pandas UDF)
        import time
        import urllib.request

        if value.startswith("190:"):
            received, deadline = 0, time.monotonic() + 60
            while received < 120 and time.monotonic() < deadline:
                with urllib.request.urlopen(stats, timeout=10) as r:
                    received = json.load(r)["msgInCounter"]
                time.sleep(0.05)
            raise ValueError(f"a bad row, after the broker received {received} messages")
        return value

    df = spark.range(0, 200, numPartitions=2).selectExpr(f"{PADDED} as v").select(fail_late("v").alias("value"))
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "10")
    try:
        with pytest.raises(Exception) as info:
            _write(df, service_url, topic, **_options(exactly_once))
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert "a bad row, after the broker received" in _error_text(info.value)
    assert broker.topic_stats(topic)["msgInCounter"] >= 120
    got = _ids_of(_final_values(conf, topic))
    if exactly_once:
        assert got == Counter()
    else:
        assert sum(got.values()) >= 120 and set(got) <= set(_ids(200)), "the control keeps what was sent"


# -- a task retried after its Python worker died (local[2,4], in a process of its own) ------------


@pytest.fixture(scope="module")
def retried_jobs(broker: Any, service_url: str, tmp_path_factory: Any) -> dict[str, Any]:
    """Runs tests/spark_retry_job.py twice in one Spark process (local[2,4]): with exactlyOnce,
    and the control without. In each, the second task's UDF kills its Python worker once, after
    the broker has received 140 of the job's 200 rows (so at least 40 of that task's)."""
    tmp = tmp_path_factory.mktemp("retry")
    jobs = {}
    for name, exactly_once in (("exactly-once", True), ("control", False)):
        topic = _new_topic(f"eo-retry-{name}")
        jobs[name] = {"topic": topic, "marker": str(tmp / f"{name}.killed"), "stats_url": _stats_url(broker, topic),
                      "rows": 200, "kill_at": 190, "kill_after": 140,
                      # The default transaction timeout (120 s): the retried task aborts the
                      # dead attempt's transaction itself, or the final read would wait for it.
                      "options": {"exactlyOnce": "true"} if exactly_once else {}}
    script = Path(__file__).parent / "spark_retry_job.py"
    proc = subprocess.run([sys.executable, str(script), json.dumps({"service_url": service_url, "jobs": list(jobs.values())})],
                          capture_output=True, text=True, timeout=300, check=False, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("DONE"), (
        f"the retry job failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    return jobs


@pytest.mark.parametrize("name", ["exactly-once", "control"])
def test_a_task_retried_after_its_worker_died(retried_jobs: dict[str, Any], broker: Any, conf: ClientConfig,
                                              name: str) -> None:
    job = retried_jobs[name]
    assert Path(job["marker"]).exists(), "the UDF did not kill its worker"
    assert broker.topic_stats(job["topic"])["msgInCounter"] >= 200 + 40, "the killed attempt sent no rows"
    got = _ids_of(_final_values(conf, job["topic"]))
    if name == "exactly-once":
        assert got == _ids(200)
    else:
        assert set(got) == set(_ids(200)) and sum(got.values()) >= 240, "the control should duplicate"


# -- streaming: the driver dies between the write and the commit ----------------------------------


@pytest.mark.parametrize("exactly_once", [True, False], ids=["exactly-once", "control"])
def test_a_stream_restarted_after_dying_before_its_commit(
        spark: Any, service_url: str, conf: ClientConfig, tmp_path: Path, exactly_once: bool) -> None:
    """The first run's sink writes the micro-batch and then, like a driver that died, neither
    commits nor aborts. The query restarted from its checkpoint replays the batch."""
    import magnetar.spark as ms

    source, sink = _new_topic("eo-in"), _new_topic("eo-out")
    with conf.create() as client:
        client.create_producer(source).send_many([str(i).encode() for i in range(100)])
    written = tmp_path / "written"
    dies_at_commit = f"pulsar_dies_{uuid.uuid4().hex[:6]}"

    class DyingWriter(ms._write.PulsarStreamWriter):  # type: ignore[name-defined,misc]
        def commit(self, messages: list[Any], batchId: int) -> None:
            written.write_text(json.dumps([m.txn for m in messages if m is not None and m.txn is not None]))
            raise RuntimeError("the driver died between the write and the commit")

        def abort(self, messages: list[Any], batchId: int) -> None:
            pass  # a dead driver aborts nothing

    class DiesAtCommit(ms.PulsarDataSource):  # type: ignore[misc]
        @classmethod
        def name(cls) -> str:
            return dies_at_commit

        def streamWriter(self, schema: Any, overwrite: bool) -> Any:
            base = super().streamWriter(schema, overwrite)
            return DyingWriter(base.opts, base.schema)

    spark.dataSource.register(DiesAtCommit)

    def run(fmt: str) -> Any:
        w = (spark.readStream.format("pulsar").option("service.url", service_url).option("topic", source)
             .option("startingOffsets", "earliest").load().select("value")
             .writeStream.format(fmt).option("service.url", service_url).option("topic", sink)
             .option("checkpointLocation", str(tmp_path / "ck")))
        for k, v in _options(exactly_once).items():
            w = w.option(k, v)
        return w.trigger(availableNow=True).start()

    first = run(dies_at_commit)
    with pytest.raises(Exception) as info:
        first.awaitTermination(120)
    assert "died between the write and the commit" in _error_text(info.value)
    txns = json.loads(written.read_text())
    assert txns if exactly_once else txns == []

    second = run("pulsar")
    assert second.awaitTermination(120)
    assert second.exception() is None
    got = _final_values(conf, sink)
    if exactly_once:
        assert got == _ids(100)
    else:
        assert got == Counter({k: 2 for k in _ids(100)}), "the control should write the replayed batch twice"


# -- the whole driver killed (SIGKILL) during the commit, then restarted ---------------------------

_KILL_JOB = Path(__file__).parent / "spark_driver_kill_job.py"
# The package this test process imported: the driver and the JVM's Python processes must run
# the same one (the installed wheel in the suite, a checkout's copy on PYTHONPATH elsewhere).
_PACKAGE = str(Path(magnetar.__file__).resolve().parent)


def _session_alive(sid: int) -> list[int]:
    """The processes of session ``sid`` that have not exited (zombies aside)."""
    alive = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            alive.append(int(entry))
    return alive


def _run_driver(jobs: list[dict[str, Any]], kill: str, report: Path) -> None:
    """Runs tests/spark_driver_kill_job.py in a session of its own; with a kill point (one
    job), checks that it died of SIGKILL there and that no process of its session (JVM, Python
    daemon and workers) outlived it; without, that every job finished."""
    report.unlink(missing_ok=True)
    args = {"jobs": [{**job, "kill": kill} for job in jobs], "report": str(report)}
    proc = subprocess.Popen([sys.executable, str(_KILL_JOB), json.dumps(args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    events = [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
    where = f"(exit {proc.returncode}, events {events}):\n{out[-2000:]}\n{err[-6000:]}"
    if kill == "none":
        assert proc.returncode == 0 and out.strip().endswith("DONE"), f"the driver failed {where}"
    else:
        assert proc.returncode == -signal.SIGKILL, f"the driver was not killed {where}"
        assert [e["kill"] for e in events if "kill" in e] == [kill], f"not killed at {kill} {where}"
        assert wait_until(lambda: not _session_alive(proc.pid), 60), \
            f"processes of the killed driver live on: {_session_alive(proc.pid)}"
    # this test's package, in the driver and in the JVM's Python processes that commit
    imported = {(e.get("process") or "kill", e["magnetar"]) for e in events}
    assert {p for p, _ in imported} >= {"driver", "commit"}, where
    assert all(str(Path(m).resolve().parent) == _PACKAGE for _, m in imported), imported


# name -> (mode, kill point, with the record). "in-commit" last, its job restarted first: its
# first transaction has ended and the replay counts it as committed only because it is found
# within its timeout (past it, the sink writes the partition again: the documented limit).
_KILLS = {"before-commits": ("stream", "before-commits", True),
          "between-commits": ("stream", "between-commits", True),
          "after-commits": ("stream", "after-commits", True),
          "control-after-commits": ("stream", "after-commits", False),
          "batch-between-commits": ("batch", "between-commits", True),
          "in-commit": ("stream", "in-commit", True)}
# Far above the time from the first kill to the restart (7 JVM starts), so that every recorded
# transaction is found within it; each is ended by the restart, so none holds readers back.
_KILL_TXN_TIMEOUT_MS = "900000"


@pytest.fixture(scope="module")
def killed_drivers(broker: Any, service_url: str, tmp_path_factory: Any) -> dict[str, dict[str, Any]]:
    """For each case of ``_KILLS``, a driver killed at its point; then one driver that runs
    every case's job again (restarted from its checkpoint, or rerun with its writeId). The
    source has 2 partitions of 50 rows (2 write tasks, so 2 transactions to commit)."""
    tmp = tmp_path_factory.mktemp("kill")
    source = _new_topic("eo-kill-in")
    broker.create_partitioned_topic(source, 2)
    with ClientConfig(service_url, operation_timeout=20.0).create() as client:
        for p in range(2):
            client.create_producer(f"{source}-partition-{p}").send_many(
                [str(i).encode() for i in range(p * 50, p * 50 + 50)])
    jobs = {}
    for name, (mode, kill, record) in _KILLS.items():
        jobs[name] = {"service_url": service_url, "source": source, "sink": _new_topic(f"eo-kill-{name}"),
                      "mode": mode, "record": record, "transaction_timeout_ms": _KILL_TXN_TIMEOUT_MS,
                      "checkpoint": str(tmp / name / "ck"), "write_id": f"copy-{name}",
                      "write_log": str(tmp / name / "writes")}
        _run_driver([jobs[name]], kill, tmp / f"{name}.events")
    _run_driver(list(jobs.values())[::-1], "none", tmp / "restart.events")
    return jobs


# The first case also runs the module's driver processes (seven Spark drivers, one after
# another: about 200 s on a quiet machine, past 300 s on a loaded one).
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("name", list(_KILLS))
def test_a_job_restarted_after_its_driver_was_killed_in_its_commit(
        killed_drivers: dict[str, dict[str, Any]], conf: ClientConfig, name: str) -> None:
    """SIGKILL of the whole driver at a point of the commit, then the job run again: a stream
    restarted from its checkpoint (which replays the micro-batch), a batch write rerun with its
    writeId. Every row once. The control commits without the record, as the sink did before
    it: the replay of a committed micro-batch writes it twice."""
    job = killed_drivers[name]
    got = _final_values(conf, job["sink"])
    if job["record"]:
        assert got == _ids(100)
        recorded = Path(job["checkpoint"]) / "magnetar-pulsar-sink" / "0.txns" if job["mode"] == "stream" \
            else Path(job["write_log"]) / f"{job['write_id']}.txns"
        assert recorded.exists()
    else:
        assert got == Counter({k: 2 for k in _ids(100)}), "the control should write the replayed batch twice"


def test_a_batch_write_rerun_with_the_same_write_id_commits_nothing_again(
        spark: Any, service_url: str, conf: ClientConfig, tmp_path: Path) -> None:
    """The same write three times: twice as ``daily-1`` (the rerun's transactions are all
    aborted), once as ``daily-2`` (another write): every row twice."""
    topic = _new_topic("eo-write-id")
    df = spark.range(0, 100, numPartitions=2).selectExpr("cast(id as string) as value")
    once = {"exactlyOnce": "true", "writeLog": str(tmp_path / "writes")}
    for write_id in ("daily-1", "daily-1", "daily-2"):
        _write(df, service_url, topic, writeId=write_id, **once)
    assert _final_values(conf, topic) == Counter({k: 2 for k in _ids(100)})
    assert sorted(p.name for p in (tmp_path / "writes").iterdir()) == [
        "daily-1.marks", "daily-1.txns", "daily-2.marks", "daily-2.txns"]

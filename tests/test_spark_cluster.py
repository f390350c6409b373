"""The ``pulsar`` data source on a Spark standalone cluster (tests/spark_cluster.py): a master and
two workers of one core each, their executors running Python in a virtualenv of their own into
which the built wheel was installed with pip, as a cluster is deployed; the driver is this
process. Batch and streaming reads and writes, the exactly-once sink, producing inside
``mapInArrow``, and a worker killed (kill -9, with its executor) in the middle of a job (a batch
write, a read, a streaming write).

Not part of ``pytest tests`` (four JVMs and a virtualenv): ``scripts/dev spark-cluster``."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jvm import new_topic
from spark_cluster import SparkCluster, cached_executor_venv, cluster_session, wait_executors
from waiting import wait_until

import magnetar
from magnetar.spark import ClientConfig

# the cluster's start (five JVMs on a shared machine) is charged to the first test
pytestmark = pytest.mark.timeout(900)

TXN_TIMEOUT_MS = "30000"
SENTINEL = b"--sentinel--"
N = 20_000


@pytest.fixture(scope="module")
def cluster(broker: Any) -> Iterator[SparkCluster]:
    python = cached_executor_venv()
    with SparkCluster(workers=2, cores_per_worker=1, memory="1g", python=python) as c:
        yield c


@pytest.fixture(scope="module")
def session(cluster: SparkCluster) -> Iterator[Any]:
    import magnetar.spark as ms

    before = {k: os.environ.get(k) for k in ("PYSPARK_PYTHON", "SPARK_LOCAL_IP")}
    spark = cluster_session(cluster, "magnetar-cluster-tests")
    try:
        wait_executors(spark, 2)
        yield spark
    finally:
        spark.stop()
        ms.close_all()
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _values(n: int, prefix: str = "") -> Counter[bytes]:
    return Counter(f"{prefix}{i}".encode() for i in range(n))


def _source(spark: Any, n: int, partitions: int = 4, prefix: str = "") -> Any:
    return spark.range(n, numPartitions=partitions).selectExpr(
        "cast(id as string) as key", f"cast(concat('{prefix}', cast(id as string)) as binary) as value")


def _write(df: Any, url: str, topic: str, **options: str) -> None:
    w = df.write.format("pulsar").mode("append").option("service.url", url).option("topic", topic)
    for k, v in options.items():
        w = w.option(k, v)
    w.save()


def _read(spark: Any, url: str, topic: str) -> Any:
    return spark.read.format("pulsar").option("service.url", url).option("topic", topic).load()


def _final_values(url: str, topic: str, partitions: int = 0, timeout: float = 120.0) -> Counter[bytes]:
    """Every value the topic finally holds: each partition (or the topic, ``partitions=0``) is
    read up to a sentinel sent to it after the write, so every transaction before it has ended
    (read-committed delivery stops at an open one)."""
    names = [f"{topic}-partition-{p}" for p in range(partitions)] if partitions else [topic]
    got: Counter[bytes] = Counter()
    with magnetar.Client(url, operation_timeout=20.0) as client:
        for name in names:
            client.create_producer(name, batching=False).send(SENTINEL)
            reader = client.create_reader(name)
            while (data := reader.read_next(timeout=timeout).data) != SENTINEL:
                got[data] += 1
    return got


def run_available_now(start: Any, attempts: int = 3) -> Any:
    """Runs ``start()`` (a streaming query with ``trigger(availableNow=True)`` and a checkpoint)
    to its end. On a loaded machine the driver's JVM gives up on the streaming source's Python
    runner when it has not connected back within 10 s (fixed in PySpark 4.3); the query is then
    restarted from its checkpoint, as an operator would, which must change nothing in what it
    finally writes."""
    for attempt in range(attempts):
        q = start()
        try:
            assert q.awaitTermination(300), "the availableNow query did not finish"
        except Exception as e:
            if "failed to connect back" not in str(e) or attempt == attempts - 1:
                raise
            print(f"attempt {attempt + 1}: the streaming runner did not connect back; restarted from the checkpoint")
            continue
        assert q.exception() is None
        return q
    raise AssertionError("unreachable")


def test_executors_run_python_from_their_own_virtualenv(session: Any, cluster: SparkCluster) -> None:
    def where(_: Any) -> Any:
        import os
        import sys

        import magnetar

        return sys.executable, magnetar.__file__, os.getpid()

    got = session.sparkContext.parallelize(range(4), 4).map(where).collect()
    env = Path(cluster.python).parent.parent
    for executable, module, _ in got:
        assert executable == cluster.python
        assert Path(module).is_relative_to(env), module
    assert {cluster.worker_of(pid) for _, _, pid in got} <= {0, 1}


def test_batch_write_then_read(session: Any, broker: Any) -> None:
    topic = new_topic("cluster-batch")
    broker.create_partitioned_topic(topic, 2)
    _write(_source(session, N), broker.service_url, topic)
    df = _read(session, broker.service_url, topic)
    assert df.count() == N
    rows = df.select("key", "value").collect()
    assert Counter(bytes(r.value) for r in rows) == _values(N)
    assert all(bytes(r.value) == r.key.encode() for r in rows)


def test_stream_read_available_now_into_parquet(session: Any, broker: Any, tmp_path: Path) -> None:
    topic = new_topic("cluster-stream")
    broker.create_partitioned_topic(topic, 2)
    _write(_source(session, N), broker.service_url, topic)
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    run_available_now(lambda: session.readStream.format("pulsar").option("service.url", broker.service_url)
                      .option("topic", topic).option("startingOffsets", "earliest")
                      .option("maxMessagesPerTrigger", str(N // 3)).load().select("key", "value")
                      .writeStream.format("parquet").option("path", out).option("checkpointLocation", ck)
                      .trigger(availableNow=True).start())
    got = session.read.parquet(out).collect()
    assert Counter(bytes(r.value) for r in got) == _values(N)


def test_exactly_once_batch_write(session: Any, broker: Any) -> None:
    topic = new_topic("cluster-eo")
    broker.create_partitioned_topic(topic, 2)
    _write(_source(session, N), broker.service_url, topic, exactlyOnce="true", transactionTimeoutMs=TXN_TIMEOUT_MS)
    assert _final_values(broker.service_url, topic, partitions=2) == _values(N)


def test_exactly_once_stream_copy(session: Any, broker: Any, tmp_path: Path) -> None:
    """A streaming read of one topic written by a streaming write with the exactly-once sink."""
    src, dst = new_topic("cluster-copy-src"), new_topic("cluster-copy-dst")
    broker.create_partitioned_topic(src, 2)
    _write(_source(session, N), broker.service_url, src)
    run_available_now(lambda: session.readStream.format("pulsar").option("service.url", broker.service_url)
                      .option("topic", src).option("startingOffsets", "earliest")
                      .option("maxMessagesPerTrigger", str(N // 2)).load().select("key", "value")
                      .writeStream.format("pulsar").option("service.url", broker.service_url).option("topic", dst)
                      .option("exactlyOnce", "true").option("transactionTimeoutMs", TXN_TIMEOUT_MS)
                      .option("checkpointLocation", str(tmp_path / "ck"))
                      .trigger(availableNow=True).start())
    assert _final_values(broker.service_url, dst) == _values(N)


def test_map_in_arrow_produces_on_executors(session: Any, broker: Any) -> None:
    topic = new_topic("cluster-map")
    conf = ClientConfig(broker.service_url, operation_timeout=20.0)

    def produce(batches: Any) -> Any:
        import os

        import pyarrow as pa

        import magnetar.spark as ms

        producer = ms.producer(conf, topic)
        for batch in batches:
            ids = ms.send_arrow(producer, batch.select(["key", "value"]))
            yield pa.RecordBatch.from_pydict({"sent": pa.array([len(ids)], pa.int64()),
                                              "pid": pa.array([os.getpid()], pa.int64())})

    out = _source(session, N).mapInArrow(produce, "sent long, pid long").collect()
    assert sum(r.sent for r in out) == N
    assert _final_values(broker.service_url, topic) == _values(N)


# -- a worker killed mid-job ------------------------------------------------------------------


def _gate(marker_dir: str, schema_columns: list[str]) -> Any:
    """A mapInArrow function that passes batches through, except in the one task that first
    claims the gate (an exclusive file), which records its pid and then waits to be killed
    (and fails after 5 minutes if it never is). The retried task passes."""

    def gate(batches: Any) -> Any:
        import os
        import time

        try:
            fd = os.open(os.path.join(marker_dir, "claimed"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            fd = None
        if fd is not None:
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                time.sleep(0.2)  # waiting to be killed: nothing to wait for
            raise RuntimeError("the gated task was not killed")
        for batch in batches:
            yield batch.select(schema_columns)

    return gate


def _killer(cluster: SparkCluster, marker_dir: Path) -> tuple[threading.Thread, dict[str, Any]]:
    """A thread that waits for a task to claim the gate and kills (kill -9) the worker it runs
    under. The job itself runs in the test's thread: the ``pulsar`` source is registered with
    the session, which the JVM finds from the thread that made it."""
    box: dict[str, Any] = {}
    claimed = marker_dir / "claimed"

    def run() -> None:
        try:
            if not wait_until(lambda: claimed.exists() and claimed.read_text() != "", 300):
                box["error"] = "no task reached the gate"
                return
            pid = int(claimed.read_text())
            i = cluster.worker_of(pid)
            if i is None:
                box["error"] = f"gated Python worker {pid} is not under any worker"
                return
            cluster.kill_worker(i)
            box["killed"] = i
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box["error"] = repr(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


def _killed(t: threading.Thread, box: dict[str, Any]) -> int:
    t.join(60)
    assert not t.is_alive() and "error" not in box, box.get("error", "the killer did not end")
    return int(box["killed"])


def test_worker_killed_during_exactly_once_write(session: Any, cluster: SparkCluster, broker: Any,
                                                 tmp_path: Path) -> None:
    """kill -9 of the worker (and its executor) running a write task: the task runs again on
    the other worker, and the topic holds every row exactly once."""
    topic = new_topic("cluster-eo-kill")
    broker.create_partitioned_topic(topic, 2)
    marker = tmp_path / "gate"
    marker.mkdir()
    os.chmod(marker, 0o777)
    df = _source(session, N).mapInArrow(_gate(str(marker), ["key", "value"]), "key string, value binary")
    start = time.monotonic()
    t, box = _killer(cluster, marker)
    _write(df, broker.service_url, topic, exactlyOnce="true", transactionTimeoutMs=TXN_TIMEOUT_MS)
    killed = _killed(t, box)
    print(f"write with worker {killed} killed: {time.monotonic() - start:.1f} s")
    assert _final_values(broker.service_url, topic, partitions=2) == _values(N)
    cluster.restart_worker(killed)


def test_worker_killed_during_read(session: Any, cluster: SparkCluster, broker: Any, tmp_path: Path) -> None:
    """kill -9 of the worker running a read task: the task is read again elsewhere, every row
    arrives once, and no data loss is reported (failOnDataLoss is on by default)."""
    topic = new_topic("cluster-read-kill")
    broker.create_partitioned_topic(topic, 2)
    _write(_source(session, N), broker.service_url, topic)
    wait_executors(session, 2)
    marker = tmp_path / "gate"
    marker.mkdir()
    df = (_read(session, broker.service_url, topic).select("key", "value")
          .mapInArrow(_gate(str(marker), ["key", "value"]), "key string, value binary"))
    t, box = _killer(cluster, marker)
    rows = df.collect()
    killed = _killed(t, box)
    assert Counter(bytes(r.value) for r in rows) == _values(N)
    cluster.restart_worker(killed)


def test_worker_killed_during_exactly_once_stream_write(session: Any, cluster: SparkCluster, broker: Any,
                                                        tmp_path: Path) -> None:
    """kill -9 of the worker running a task of a streaming copy into the exactly-once sink: the
    micro-batch's task runs again on the other worker, and the destination holds every row of the
    source exactly once (the killed task's open transaction never commits)."""
    src, dst = new_topic("cluster-stream-kill-src"), new_topic("cluster-stream-kill-dst")
    broker.create_partitioned_topic(src, 2)
    _write(_source(session, N), broker.service_url, src)
    wait_executors(session, 2)
    marker = tmp_path / "gate"
    marker.mkdir()
    os.chmod(marker, 0o777)
    t, box = _killer(cluster, marker)
    run_available_now(lambda: session.readStream.format("pulsar").option("service.url", broker.service_url)
                      .option("topic", src).option("startingOffsets", "earliest")
                      .option("maxMessagesPerTrigger", str(N // 2)).load().select("key", "value")
                      .mapInArrow(_gate(str(marker), ["key", "value"]), "key string, value binary")
                      .writeStream.format("pulsar").option("service.url", broker.service_url).option("topic", dst)
                      .option("exactlyOnce", "true").option("transactionTimeoutMs", TXN_TIMEOUT_MS)
                      .option("checkpointLocation", str(tmp_path / "ck"))
                      .trigger(availableNow=True).start())
    killed = _killed(t, box)
    assert _final_values(broker.service_url, dst) == _values(N)
    cluster.restart_worker(killed)

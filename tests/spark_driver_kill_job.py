"""A Spark driver that tests/test_spark_exactly_once.py kills with SIGKILL during the exactly-once
sink's commit, and then runs again to finish the job.

``python spark_driver_kill_job.py '<json>'`` runs each of its ``jobs`` in turn, in one Spark
session (a JVM start costs more than a job): a job copies the ``source`` topic to its ``sink``
topic with ``exactlyOnce=true``: as a stream (``mode`` "stream", one micro-batch with
``availableNow``, checkpoint ``checkpoint``) or as a batch write (``mode`` "batch", with
``writeId``/``writeLog``). ``kill`` names where the whole driver dies:

- ``before-commits``: the tasks wrote and the commit was recorded; no ``EndTxn`` was sent;
- ``between-commits``: the first transaction is committed (and marked), the second not;
- ``in-commit``: the first ``EndTxn`` was answered, its ``committed`` mark not yet written;
- ``after-commits``: every transaction is committed; Spark has not written its commit log;
- ``none``: no kill; the job runs to its end and the script prints ``DONE``.

The sink's commit runs in a Python process that the driver's JVM starts, so the kill happens
there: it SIGKILLs every process of the driver's session (this script, the JVM, the Python
daemon and workers, which the JVM starts in process groups of their own), itself last. The
test starts the script in a session of its own. ``record: false`` (the control) commits as the
sink did without its record of committed transactions. ``report`` gets one JSON line per event
(``magnetar.__file__`` as each process imports it, and the kill point reached).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any


def report(path: str, **event: Any) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(event) + "\n")


def kill_driver(report_path: str, point: str) -> None:
    """SIGKILLs every process of this session (the whole driver), this one last."""
    import magnetar

    report(report_path, kill=point, pid=os.getpid(), magnetar=magnetar.__file__)
    sid, me = os.getsid(0), os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[3]) == sid:  # fields after the name: state ppid pgrp session
            try:
                os.kill(int(entry), signal.SIGKILL)
            except ProcessLookupError:
                pass
    os.kill(me, signal.SIGKILL)


def arm(args: dict[str, Any]) -> None:
    """Wraps the sink's functions, in the process that runs its commit, to die at ``kill``."""
    import magnetar
    import magnetar.spark._exactly_once as eo
    import magnetar.spark._write as w

    point, path = args["kill"], args["report"]
    report(path, process="commit", magnetar=magnetar.__file__)
    # Spark reuses this process for the next job's commit: each job starts from the originals.
    if not hasattr(eo, "_test_originals"):
        eo._test_originals = (eo.commit_one, w.PulsarStreamWriter._record, w.PulsarBatchWriter._record)  # type: ignore[attr-defined]
    eo.commit_one, w.PulsarStreamWriter._record, w.PulsarBatchWriter._record = eo._test_originals  # type: ignore[attr-defined,method-assign]
    if not args["record"]:
        w.PulsarStreamWriter._record = lambda self, batch_id: (None, None)  # type: ignore[method-assign]
        w.PulsarBatchWriter._record = lambda self: (None, None)  # type: ignore[method-assign]
    if point == "none":
        return
    original, calls = eo.commit_one, []

    def commit_one(client: Any, txn: Any) -> None:
        calls.append(txn)
        if (point, len(calls)) in (("before-commits", 1), ("between-commits", 2)):
            kill_driver(path, point)
        original(client, txn)
        if (point, len(calls)) == ("in-commit", 1):
            kill_driver(path, point)

    eo.commit_one = commit_one  # type: ignore[assignment]


def data_source(args: dict[str, Any], name: str) -> Any:
    import magnetar.spark as ms
    import magnetar.spark._write as w

    class StreamWriter(w.PulsarStreamWriter):  # type: ignore[misc,name-defined]
        def commit(self, messages: list[Any], batchId: int) -> None:
            arm(args)
            super().commit(messages, batchId)
            if args["kill"] == "after-commits":
                kill_driver(args["report"], "after-commits")

    class BatchWriter(w.PulsarBatchWriter):  # type: ignore[misc,name-defined]
        def commit(self, messages: list[Any]) -> None:
            arm(args)
            super().commit(messages)
            if args["kill"] == "after-commits":
                kill_driver(args["report"], "after-commits")

    class Killed(ms.PulsarDataSource):  # type: ignore[misc]
        @classmethod
        def name(cls) -> str:
            return name

        def streamWriter(self, schema: Any, overwrite: bool) -> Any:
            base = super().streamWriter(schema, overwrite)
            return StreamWriter(base.opts, base.schema, base.values)

        def writer(self, schema: Any, overwrite: bool) -> Any:
            base = super().writer(schema, overwrite)
            return BatchWriter(base.opts, base.schema, base.values)

    return Killed


def main(args: dict[str, Any]) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from jvm import local_spark

    import magnetar
    import magnetar.spark as ms

    report(args["report"], process="driver", magnetar=magnetar.__file__, pid=os.getpid())
    spark = local_spark(2, "magnetar-driver-kill")
    spark.dataSource.register(ms.PulsarDataSource)  # the jobs read their source with it
    for i, job in enumerate(args["jobs"]):
        run(spark, {**job, "report": args["report"]}, f"pulsar_killed_{i}")
    spark.stop()
    ms.close_all()
    print("DONE")


def run(spark: Any, job: dict[str, Any], name: str) -> None:
    spark.dataSource.register(data_source(job, name))
    options = {"service.url": job["service_url"], "topic": job["sink"], "exactlyOnce": "true",
               "transactionTimeoutMs": job["transaction_timeout_ms"]}
    source = (spark.readStream if job["mode"] == "stream" else spark.read).format("pulsar") \
        .option("service.url", job["service_url"]).option("topic", job["source"]) \
        .option("startingOffsets", "earliest").load().select("value")
    if job["mode"] == "stream":
        query = source.writeStream.format(name).options(**options) \
            .option("checkpointLocation", job["checkpoint"]).trigger(availableNow=True).start()
        query.awaitTermination()
        assert query.exception() is None, query.exception()
    else:
        source.write.format(name).mode("append").options(**options) \
            .option("writeId", job["write_id"]).option("writeLog", job["write_log"]).save()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))

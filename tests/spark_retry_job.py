"""A Spark job whose task loses its Python worker once, run by tests/test_spark_exactly_once.py in
a process of its own: Spark retries a failed task only with a ``local[N,F]`` master, and the
suite's shared session is ``local[2]``.

``python spark_retry_job.py '<json>'`` writes ids 0..rows-1 as strings, in two partitions, to
``topic``. A UDF on the second partition, the first time it runs (no marker file yet), waits
until the broker has received ``kill_after`` messages on the topic (so the writer of that task
has sent part of its rows) and then ends its Python worker with ``os._exit``; Spark retries the
task. Exits 0 when the job succeeded, printing ``DONE``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def main(args: dict) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from jvm import local_spark

    import magnetar.spark as ms

    spark = local_spark(2, "magnetar-retry", max_failures=4)
    # Small batches, so that the writer sends (and the broker counts) rows before the kill.
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "10")
    spark.dataSource.register(ms.PulsarDataSource)
    for job in args["jobs"]:
        run(spark, args["service_url"], job)
    spark.stop()
    ms.close_all()
    print("DONE")


def run(spark: Any, service_url: str, job: dict) -> None:
    from pyspark.sql.functions import udf

    marker, stats_url, kill_at, kill_after = job["marker"], job["stats_url"], str(job["kill_at"]), job["kill_after"]

    @udf("string")
    def kill_once(value):  # type: ignore[no-untyped-def]  # (no hints: Spark would read them as a pandas UDF)
        import os
        import time
        import urllib.request

        if value.startswith(kill_at + ":") and not os.path.exists(marker):
            open(marker, "w").close()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                with urllib.request.urlopen(stats_url, timeout=10) as r:
                    if json.load(r)["msgInCounter"] >= kill_after:
                        break
                time.sleep(0.05)
            os._exit(1)
        return value

    # 8 KB rows, so that the buffers between Spark and its Python workers pass rows on while
    # the task runs: the writer has sent part of the task's rows when the UDF kills its worker.
    df = (spark.range(0, job["rows"], numPartitions=2).selectExpr("concat(cast(id as string), ':', repeat('x', 8000)) as v")
          .select(kill_once("v").alias("value")))
    w = df.write.format("pulsar").mode("append").option("service.url", service_url).option("topic", job["topic"])
    for k, v in job["options"].items():
        w = w.option(k, v)
    w.save()



if __name__ == "__main__":
    main(json.loads(sys.argv[1]))

"""What the Spark examples start so that they run as-is: a local Pulsar broker (unless one is
given) and a local Spark session with the ``pulsar`` data source registered."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Any

from magnetar.spark import PulsarDataSource
from magnetar.testing import Standalone


def local_broker(stack: contextlib.ExitStack, service_url: str | None) -> tuple[str, Standalone | None]:
    """``(service_url, None)`` if a URL is given, else a broker started for this run and
    stopped when ``stack`` closes, with its URL."""
    if service_url:
        return service_url, None
    t0 = time.perf_counter()
    broker = stack.enter_context(Standalone(port=0))
    print(f"broker ready at {broker.service_url} in {time.perf_counter() - t0:.1f} s")
    return broker.service_url, broker


def local_spark(app_name: str) -> Any:
    """A ``local[2]`` Spark session, quiet, with the ``pulsar`` data source registered."""
    # The executors must run this interpreter, where magnetar is installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName(app_name)
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(PulsarDataSource)
    return spark

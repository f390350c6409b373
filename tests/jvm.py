"""The JVM programs the tests start: the Java client harnesses in tests/interop and local Spark
sessions. One place, so that every test starts them with the same flags."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest

# What Netty inside the Java client needs opened on Java 17.
_OPENS = ["java.base/java.io", "java.base/java.util.zip", "java.base/java.nio", "java.base/java.lang",
          "java.base/jdk.internal.misc", "java.base/sun.net"]


def java_program(classes: Path, source: Path) -> Callable[..., list[str]]:
    """Compiles ``source`` (its class named like the file) against the broker distribution's
    jars into ``classes`` and returns ``run(*args) -> stdout lines``; a run fails the test unless
    the program exits 0 with ``DONE`` as its last line."""
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.fail("a JDK (javac) is needed for the Java-client tests; the broker needs Java 17 too")
    from magnetar.testing import ensure_distribution

    lib = ensure_distribution() / "lib"
    assert any(lib.glob("org.apache.pulsar-pulsar-client-original-*.jar")), f"no Java client in {lib}"
    classpath = f"{lib}/*"
    proc = subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", classpath, str(source)],
                          capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, f"javac failed:\n{proc.stdout}\n{proc.stderr}"

    def run(*args: str) -> list[str]:
        cmd = ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
               "-Dio.netty.tryReflectionSetAccessible=true",
               *[a for m in _OPENS for a in ("--add-opens", f"{m}=ALL-UNNAMED")],
               "-cp", f"{classes}{os.pathsep}{classpath}", source.stem, *args]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, check=False,
                           stdin=subprocess.DEVNULL)
        out = p.stdout.splitlines()
        assert p.returncode == 0 and out and out[-1] == "DONE", (
            f"the Java program failed (exit {p.returncode}):\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}")
        return out

    return run


def local_spark(cores: int, app: str, max_failures: int = 1) -> Any:
    """A local Spark session with ``cores`` executor threads, quiet, its Python workers on this
    interpreter. ``max_failures`` > 1 lets Spark retry a failed task (``local[N,F]``)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master(f"local[{cores},{max_failures}]" if max_failures > 1 else f"local[{cores}]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.default.parallelism", str(cores))
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def new_topic(prefix: str = "spark") -> str:
    """A topic of its own for one Spark test."""
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:12]}"


def error_text(exc: BaseException) -> str:
    """What Spark shows of an error raised in a data source (the class name and the message)."""
    return f"{type(exc).__name__}: {exc}"

"""A Spark standalone cluster for tests and benches: one master and N workers, each its own JVM
started with ``bin/spark-class`` of the installed PySpark (the pip package has no start scripts),
everything bound to 127.0.0.1, and the virtualenv its executors run Python in, built the way a
cluster is deployed (``pip install`` of the wheel into a Python of its own).

::

    with SparkCluster(workers=2, python=executor_python) as cluster:
        spark = cluster_session(cluster, "app")
        ...
        cluster.kill_worker(0)       # kill -9 of the worker JVM and everything under it

Not a fixture of the main suite: tests/test_spark_cluster.py and benches/spark_cluster_bench.py
use it (``scripts/dev spark-cluster``)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import venv
from pathlib import Path
from typing import Any

from magnetar.testing._process import free_ports, pid_alive

ROOT = Path(__file__).resolve().parent.parent


def spark_home() -> Path:
    """The installed PySpark's directory: it holds ``bin/spark-class`` and the jars."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def built_wheel() -> Path:
    """The wheel ``scripts/dev setup`` built (MAGNETAR_WHEEL, or target/wheel/magnetar-*.whl)."""
    named = os.environ.get("MAGNETAR_WHEEL")
    wheels = [Path(named)] if named else sorted((ROOT / "target" / "wheel").glob("magnetar-*.whl"))
    if not wheels or not wheels[0].is_file():
        raise RuntimeError("no built wheel: run `bash scripts/dev setup` (it builds target/wheel/magnetar-*.whl)")
    return wheels[0]


def _version(module: str) -> str:
    from importlib.metadata import version

    return version(module)


def executor_venv(env_dir: Path, wheel: Path | None = None) -> Path:
    """A virtualenv for the executors' Python workers: the wheel and what the data source needs
    there (pyarrow; pandas for PySpark's Arrow paths), installed with pip at the driver's
    versions. PySpark itself is not installed: executors put the cluster's
    ``$SPARK_HOME/python/lib/pyspark.zip`` on the workers' path. Returns its ``python``."""
    wheel = wheel or built_wheel()
    python = env_dir / "bin" / "python"
    if not python.exists():
        venv.create(env_dir, with_pip=True, symlinks=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    "--force-reinstall", "--no-deps", str(wheel)], check=True, timeout=600)
    wanted = {"pyarrow": _version("pyarrow"), "pandas": _version("pandas")}
    probe = "import importlib.metadata as m, json; print(json.dumps({p: m.version(p) for p in %r}))" % list(wanted)
    have = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=False)
    if have.returncode != 0 or json.loads(have.stdout) != wanted:
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        *(f"{p}=={v}" for p, v in wanted.items())], check=True, timeout=900)
    return python


def cached_executor_venv() -> Path:
    """:func:`executor_venv` in ``~/.cache/magnetar/spark-executor-venv`` (pyarrow and pandas
    stay installed between runs; the wheel is installed again every time)."""
    return executor_venv(Path.home() / ".cache" / "magnetar" / "spark-executor-venv")


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            kids.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return kids


def descendants(pid: int) -> list[int]:
    """``pid``'s children, their children, ... (read from /proc)."""
    kids, out, todo = _children(), [], [pid]
    while todo:
        for child in kids.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


class SparkCluster:
    """A standalone master and ``workers`` workers on 127.0.0.1, each worker offering
    ``cores_per_worker`` cores and ``memory``. ``python`` is the executors' Python
    (``spark.pyspark.python`` of :func:`cluster_session`). Every process it starts is in a
    process group of its own; all are killed on exit, also when the start fails."""

    def __init__(self, workers: int = 2, cores_per_worker: int = 1, memory: str = "1g",
                 python: str | Path | None = None, log_dir: Path | None = None,
                 start_timeout: float = 180.0) -> None:
        self.worker_count = workers
        self.cores_per_worker = cores_per_worker
        self.memory = memory
        self.python = str(python) if python else sys.executable
        self.start_timeout = start_timeout
        self._own_dir = None if log_dir else tempfile.TemporaryDirectory(prefix="spark-cluster-")
        self.dir = Path(log_dir) if log_dir else Path(self._own_dir.name)  # type: ignore[union-attr]
        self.home = spark_home()
        self.master: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes] | None] = []
        self._started: list[subprocess.Popen[bytes]] = []
        self.port = self.webui_port = 0
        self._logs: list[Any] = []

    # -- processes ----------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON")}
        env.update(SPARK_LOCAL_IP="127.0.0.1", SPARK_HOME=str(self.home), SPARK_LOG_DIR=str(self.dir),
                   # the master's and workers' own JVMs (executors are sized by the application)
                   SPARK_DAEMON_MEMORY="256m", PYSPARK_PYTHON=self.python,
                   SPARK_WORKER_DIR=str(self.dir / "work"))
        return env

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.dir / f"{name}.log", "ab")  # noqa: SIM115 - closed in stop()
        self._logs.append(log)
        proc = subprocess.Popen([str(self.home / "bin" / "spark-class"), *args], env=self._env(),
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=self.dir)
        self._started.append(proc)
        return proc

    def _start_worker(self, i: int) -> subprocess.Popen[bytes]:
        (webui,) = free_ports(1)
        work = self.dir / f"worker-{i}"
        work.mkdir(exist_ok=True)
        return self._spawn(f"worker-{i}", ["org.apache.spark.deploy.worker.Worker", self.master_url,
                                           "--host", "127.0.0.1", "--cores", str(self.cores_per_worker),
                                           "--memory", self.memory, "--webui-port", str(webui),
                                           "--work-dir", str(work)])

    def start(self) -> "SparkCluster":
        try:
            self.port, self.webui_port = free_ports(2)
            self.master = self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                                 "--port", str(self.port), "--webui-port", str(self.webui_port)])
            self._wait(lambda s: s.get("status") == "ALIVE", "the master")
            self.workers = [self._start_worker(i) for i in range(self.worker_count)]
            self.wait_alive_workers(self.worker_count)
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self) -> "SparkCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        for proc in reversed(self._started):
            self._kill_tree(proc)
        for log in self._logs:
            log.close()
        self._logs.clear()
        if self._own_dir is not None:
            self._own_dir.cleanup()

    @staticmethod
    def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL to ``proc``'s process group and to every descendant (PySpark's daemon moves
        itself into a group of its own), then reaps ``proc``."""
        pids = descendants(proc.pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)

    # -- state --------------------------------------------------------------------------------

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def worker_pids(self) -> list[int | None]:
        return [w.pid if w is not None and w.poll() is None else None for w in self.workers]

    def state(self) -> dict[str, Any]:
        """The master's JSON (``/json/``): workers, applications."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/", timeout=5) as r:
            return json.loads(r.read())  # type: ignore[no-any-return]

    def _wait(self, pred: Any, what: str, timeout: float | None = None) -> dict[str, Any]:
        deadline = time.monotonic() + (timeout or self.start_timeout)
        last: Any = None
        while time.monotonic() < deadline:
            if self.master is not None and self.master.poll() is not None:
                raise RuntimeError(f"the master exited ({self.master.returncode}): {self.log_tail('master')}")
            try:
                state = self.state()
                if pred(state):
                    return state
                last = state
            except OSError as e:
                last = e
            time.sleep(0.2)
        raise TimeoutError(f"{what} not ready after {timeout or self.start_timeout} s: {last}\n"
                           f"{self.log_tail('master')}")

    def alive_workers(self, state: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        state = state if state is not None else self.state()
        return [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]

    def wait_alive_workers(self, n: int, timeout: float | None = None) -> None:
        self._wait(lambda s: len(self.alive_workers(s)) == n, f"{n} ALIVE workers", timeout)

    def executor_pids(self, i: int) -> list[int]:
        """The processes under worker ``i``: its executors' JVMs and their Python workers."""
        w = self.workers[i]
        return descendants(w.pid) if w is not None and w.poll() is None else []

    def worker_of(self, pid: int) -> int | None:
        """Which worker ``pid`` (an executor's Python worker, say) runs under."""
        for i in range(len(self.workers)):
            if pid in self.executor_pids(i):
                return i
        return None

    def kill_worker(self, i: int) -> None:
        """kill -9 of worker ``i``'s JVM and of everything under it (its executors and their
        Python processes), as a machine that dies."""
        w = self.workers[i]
        assert w is not None, f"worker {i} is not running"
        self._kill_tree(w)
        self.workers[i] = None

    def restart_worker(self, i: int) -> None:
        """A new worker in slot ``i`` (after :meth:`kill_worker`); waits until the master lists
        every worker ALIVE again."""
        assert self.workers[i] is None, f"worker {i} is running"
        self.workers[i] = self._start_worker(i)
        self.wait_alive_workers(sum(w is not None for w in self.workers))

    def log_tail(self, name: str, chars: int = 3000) -> str:
        path = self.dir / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""


def cluster_session(cluster: SparkCluster, app: str, executor_memory: str = "512m", **conf: str) -> Any:
    """A SparkSession on ``cluster`` whose executors run their Python workers in
    ``cluster.python``, with the ``pulsar`` data source registered. The driver runs in this
    process, bound to 127.0.0.1."""
    from pyspark.sql import SparkSession

    import magnetar.spark as ms

    # PySpark's driver takes the Python of the executors' workers from PYSPARK_PYTHON when the
    # SparkContext starts (spark.pyspark.python is read only by spark-submit's launcher).
    os.environ["PYSPARK_PYTHON"] = cluster.python
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"  # the driver's JVM, started by this process
    cores = cluster.worker_count * cluster.cores_per_worker
    builder = (
        SparkSession.builder.master(cluster.master_url).appName(app)
        .config("spark.pyspark.python", cluster.python)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.executor.memory", executor_memory)
        .config("spark.executor.cores", str(cluster.cores_per_worker))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.default.parallelism", str(cores))
        .config("spark.driver.memory", "1g")
        # How long a Python process the JVM started (the streaming source's runner on the
        # driver) waits to authenticate (15 s by default). The JVM's own wait for it to connect
        # back is fixed at 10 s (PythonWorkerFactory.createSimpleWorker): see
        # start_available_now in tests/test_spark_cluster.py.
        .config("spark.python.authenticate.socketTimeout", "120s")
    )
    for k, v in conf.items():
        builder = builder.config(k, v)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(ms.PulsarDataSource)
    return session


def wait_executors(session: Any, n: int, timeout: float = 180.0) -> None:
    """Waits until the application has ``n`` executors registered (the driver not counted)."""
    deadline = time.monotonic() + timeout
    sc = session.sparkContext
    while time.monotonic() < deadline:
        if sc._jsc.sc().getExecutorMemoryStatus().size() - 1 >= n:
            return
        time.sleep(0.2)
    raise TimeoutError(f"{n} executors not registered after {timeout} s")

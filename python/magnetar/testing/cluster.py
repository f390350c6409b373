"""Run a real multi-broker Apache Pulsar cluster on this machine for tests.

One ZooKeeper, one bookie and N brokers, each its own JVM (``bin/pulsar`` of the same
distribution :class:`~magnetar.testing.Standalone` fetches), on free loopback ports with small
heaps. Load shedding and automatic bundle splits are off, so a topic moves only when a test
moves it (:meth:`Cluster.unload`, :meth:`Cluster.kill`, ...). Standard library only.

Python::

    with Cluster(brokers=2) as cluster:
        client = Client(cluster.service_url)          # pulsar://127.0.0.1:p1,127.0.0.1:p2
        i = cluster.owner("orders")                   # index of the broker owning the topic
        cluster.unload("orders", to=1 - i)            # move it to the other broker
        cluster.kill(1 - i)                           # kill -9; cluster.restart(1 - i) later

Shell (the processes outlive the command; state in ``<cache_dir>/cli-cluster``)::

    python -m magnetar.testing cluster start
    python -m magnetar.testing cluster status
    python -m magnetar.testing cluster stop
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path

from ._admin import RedirectingAdmin, _ns_path, _split_topic
from ._distribution import DEFAULT_VERSION, default_cache_dir, ensure_distribution
from ._errors import AdminError, ClusterError
from ._process import Service, free_ports, pid_alive, set_pdeathsig

__all__ = ["DEFAULT_STARTUP_TIMEOUT", "Cluster", "ClusterBroker", "ClusterError"]

DEFAULT_STARTUP_TIMEOUT = 180.0
DEFAULT_STOP_TIMEOUT = 20.0
STATE_FILE = "cluster.json"
CLUSTER_NAME = "magnetar"

LOAD_MANAGERS = {
    "modular": "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl",
    "extensible": "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl",
}

# Small heaps (facts in docs/resilience.md): the machine runs a cluster next to builds.
_ZK_MEM = "-Xms64m -Xmx256m"
_BOOKIE_MEM = "-Xms128m -Xmx512m -XX:MaxDirectMemorySize=512m"
_BROKER_MEM = "-Xms128m -Xmx768m -XX:MaxDirectMemorySize=512m"
_TOOL_MEM = "-Xms32m -Xmx256m"
# bin/pulsar's default GC pre-touches the whole heap (AlwaysPreTouch): RSS we do not want.
_GC = "-XX:+UseG1GC -XX:ParallelGCThreads=2 -XX:ConcGCThreads=1 -XX:+PerfDisableSharedMem"

log = logging.getLogger("magnetar.testing")


def _conf_text(template: Path, overrides: Mapping[str, str], header: str) -> str:
    """The distribution's conf file with ``overrides`` applied in place (new keys appended)."""
    left = dict(overrides)
    out = [f"# {header}"]
    for line in template.read_text().splitlines():
        key = line.split("=", 1)[0].strip() if "=" in line and not line.lstrip().startswith("#") else None
        if key is not None and key in left:
            out.append(f"{key}={left.pop(key)}")
        else:
            out.append(line)
    out += [f"{k}={v}" for k, v in left.items()]
    return "\n".join(out) + "\n"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


class _Process:
    """One JVM of the cluster: how to start it, and its pid once started."""

    def __init__(self, name: str, role: str, conf_file: Path, env: Mapping[str, str]) -> None:
        self.name, self.role, self.conf_file, self.env = name, role, conf_file, dict(env)
        self.pid: int | None = None
        self._popen: subprocess.Popen[bytes] | None = None

    @property
    def alive(self) -> bool:
        """Whether this JVM runs: ours by pid, and (for an attached handle) still our command."""
        if self._popen is not None:
            return self._popen.poll() is None
        return self.pid is not None and pid_alive(self.pid) and str(self.conf_file) in _cmdline(self.pid)

    def start(self, home: Path, log_file: Path, die_with_parent: bool) -> None:
        env = {**os.environ, **self.env}
        main_thread = threading.main_thread() is threading.current_thread()
        pdeath = die_with_parent and sys.platform == "linux" and main_thread
        with open(log_file, "ab") as out:
            out.write(f"\n==== magnetar: starting {self.name} at {time.ctime()}\n".encode())
            out.flush()
            # bin/pulsar execs java, so the pid is the JVM's; its own session lets stop() take
            # the whole group without touching anything else.
            self._popen = subprocess.Popen([str(home / "bin" / "pulsar"), self.role], cwd=log_file.parent,
                                           stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                           env=env, start_new_session=True,
                                           preexec_fn=set_pdeathsig if pdeath else None)
        self.pid = self._popen.pid

    def send(self, sig: int) -> None:
        if self.pid is not None and self.alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, sig)

    def stop(self, timeout: float, sig: int = signal.SIGTERM) -> None:
        """``sig``, wait up to ``timeout`` s, then SIGKILL what is left of its group."""
        pid = self.pid
        if pid is not None and self.alive:
            self.send(sig)
            deadline = time.monotonic() + timeout
            while self.alive and time.monotonic() < deadline:
                time.sleep(0.1)
            if self.alive and sig != signal.SIGKILL:
                log.warning("%s (pid %d) outlived %.0f s after signal %d; SIGKILL", self.name, pid, timeout, sig)
            # Our unreaped child keeps its pid from reuse; an attached one only while alive.
            if self._popen is not None or self.alive:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
        if self._popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._popen.wait(timeout=10)
        self._popen = None
        self.pid = None


class ClusterBroker(RedirectingAdmin):
    """One broker of a :class:`Cluster`, with the admin helpers aimed at it alone."""

    def __init__(self, index: int, port: int, http_port: int, proc: _Process) -> None:
        super().__init__(f"http://127.0.0.1:{http_port}", timeout=30.0)
        self.index, self.port, self.http_port, self._proc = index, port, http_port, proc

    @property
    def service_url(self) -> str:
        """``pulsar://127.0.0.1:<port>``."""
        return f"pulsar://127.0.0.1:{self.port}"

    @property
    def web_url(self) -> str:
        """``http://127.0.0.1:<http_port>``."""
        return self.admin_url

    @property
    def broker_id(self) -> str:
        """How Pulsar names this broker (``destinationBroker``, the active-brokers list)."""
        return f"127.0.0.1:{self.http_port}"

    @property
    def pid(self) -> int | None:
        """The JVM's pid, None while stopped."""
        return self._proc.pid

    @property
    def alive(self) -> bool:
        """Whether the JVM runs (it may still be starting)."""
        return self._proc.alive

    def __repr__(self) -> str:
        return f"<ClusterBroker {self.index} {self.service_url} pid={self.pid} alive={self.alive}>"


class Cluster(RedirectingAdmin, Service):
    """ZooKeeper, a bookie and ``brokers`` brokers of one Pulsar cluster, each its own JVM.

    Use as a context manager or call :meth:`start`/:meth:`stop`. :meth:`stop` ends only the
    processes this object started (by pid) and removes the data dir it made; it runs at
    interpreter exit too, and when :meth:`start` fails.

    Args:
        brokers: how many brokers.
        load_manager: ``"modular"`` (``ModularLoadManagerImpl``) or ``"extensible"``
            (``ExtensibleLoadManagerImpl`` with the ``TransferShedder``).
        data_dir: the processes' conf, logs and data. Default: a fresh temp dir, removed on
            :meth:`stop` unless ``keep_data``. A given directory is never removed.
        version, cache_dir: the Pulsar distribution, as for ``Standalone``.
        extra_conf: broker config keys added to or overriding the defaults.
        deduplication: ``brokerDeduplicationEnabled`` (namespaces may turn it on either way).
        transaction_coordinators: partitions of the transaction coordinator topic.
        startup_timeout: seconds for the whole cluster (or one :meth:`restart`) to serve.
        die_with_parent: Linux PR_SET_PDEATHSIG for the JVMs.
    """

    def __init__(self, brokers: int = 2, load_manager: str = "modular", data_dir: str | os.PathLike[str] | None = None,
                 *, version: str = DEFAULT_VERSION, cache_dir: str | os.PathLike[str] | None = None,
                 extra_conf: Mapping[str, str] | None = None, deduplication: bool = False,
                 transaction_coordinators: int = 2, startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
                 keep_data: bool = False, die_with_parent: bool = True) -> None:
        super().__init__("http://127.0.0.1:0", timeout=30.0)
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        if load_manager not in LOAD_MANAGERS:
            raise ValueError(f"load_manager must be one of {sorted(LOAD_MANAGERS)}, not {load_manager!r}")
        self.broker_count, self.load_manager = brokers, load_manager
        self.version = version
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self._own_data_dir = data_dir is None
        self.data_dir: Path | None = Path(data_dir).absolute() if data_dir is not None else None
        self.extra_conf = {str(k): str(v) for k, v in (extra_conf or {}).items()}
        self.deduplication = deduplication
        self.transaction_coordinators = transaction_coordinators
        self.startup_timeout = startup_timeout
        self.keep_data = keep_data
        self.die_with_parent = die_with_parent
        self.zk_port = self.bookie_port = 0
        self.brokers: list[ClusterBroker] = []
        """The brokers, in the order of their indexes."""
        self.startup_seconds: float | None = None
        self._zk: _Process | None = None
        self._bookie: _Process | None = None
        self._home: Path | None = None

    # -- addresses ----------------------------------------------------------------------

    @property
    def service_url(self) -> str:
        """``pulsar://127.0.0.1:p1,127.0.0.1:p2,...``: every broker."""
        return "pulsar://" + ",".join(f"127.0.0.1:{b.port}" for b in self.brokers)

    @property
    def admin_url(self) -> str:
        """The first broker's web URL."""
        return self.brokers[0].web_url if self.brokers else "http://127.0.0.1:0"

    def _base_url(self) -> str:
        # Admin calls go to the first live broker, so they work while a test has one down.
        return next((b.web_url for b in self.brokers if b.alive), self.admin_url)

    @property
    def metadata_store_url(self) -> str:
        """``zk:127.0.0.1:<port>``."""
        return f"zk:127.0.0.1:{self.zk_port}"

    def _processes(self) -> list[_Process]:
        procs = [self._zk, self._bookie, *(b._proc for b in self.brokers)]
        return [p for p in procs if p is not None]

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        return f"<Cluster {self.version} {self.load_manager} {len(self.brokers)} brokers {state} {self.service_url}>"

    def is_running(self) -> bool:
        """True while ZooKeeper, the bookie and at least one broker are alive."""
        return (self._zk is not None and self._zk.alive and self._bookie is not None and self._bookie.alive
                and any(b.alive for b in self.brokers))

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> Cluster:
        """Fetch Pulsar if needed, start every process and block until each broker serves and
        sees all the others. Raises :class:`ClusterError` (with log tails) on failure, after
        stopping whatever it had started."""
        if self.is_running():
            return self
        t0 = time.monotonic()
        try:
            self._home = ensure_distribution(self.version, self.cache_dir)
            if self.data_dir is None:
                self.data_dir = Path(tempfile.mkdtemp(prefix="magnetar-cluster-"))
            self._running()
            for attempt in (1, 2):
                try:
                    self._launch(t0 + self.startup_timeout)
                    break
                except ClusterError as exc:
                    # Ports are free when picked, not reserved: another process may take one.
                    if attempt == 2 or "Address already in use" not in str(exc):
                        raise
                    log.warning("port collision at start-up; retrying with other ports")
                    self._stop_processes(5.0)
        except BaseException:
            self.stop(timeout=5.0)
            raise
        self.startup_seconds = round(time.monotonic() - t0, 2)
        self._write_state()
        return self

    def _launch(self, deadline: float) -> None:
        assert self.data_dir is not None and self._home is not None
        data, home = self.data_dir, self._home
        # A run's ZooKeeper and bookie state name its ports (the bookie's cookie would refuse
        # new ones), so a reused data dir starts afresh; logs are appended to.
        for sub in ("zookeeper", "bookie", "tmp"):
            shutil.rmtree(data / sub, ignore_errors=True)
        for sub in ("conf", "logs", "tmp"):
            (data / sub).mkdir(parents=True, exist_ok=True)
        zk_port, bk_port, *broker_ports = free_ports(2 + 2 * self.broker_count)
        self.zk_port, self.bookie_port = zk_port, bk_port
        self._zk = self._process("zookeeper", "zookeeper", "PULSAR_ZK_CONF", self._zk_conf(), _ZK_MEM)
        self._zk.start(home, data / "logs" / "zookeeper.log", self.die_with_parent)
        self._wait(deadline, "ZooKeeper", lambda: self._zk_ok(), [self._zk])
        self._initialize_metadata(broker_ports)
        self._bookie = self._process("bookie", "bookie", "PULSAR_BOOKKEEPER_CONF", self._bookie_conf(), _BOOKIE_MEM)
        self._bookie.start(home, data / "logs" / "bookie.log", self.die_with_parent)
        self.brokers = []
        for i in range(self.broker_count):
            port, http = broker_ports[2 * i], broker_ports[2 * i + 1]
            proc = self._process(f"broker-{i}", "broker", "PULSAR_BROKER_CONF", {}, _BROKER_MEM)
            self.brokers.append(ClusterBroker(i, port, http, proc))
        for b in self.brokers:  # every conf names every broker, so write them all first
            b._proc.conf_file.write_text(self._broker_conf_text(b))
            b._proc.start(home, data / "logs" / f"{b._proc.name}.log", self.die_with_parent)
        for b in self.brokers:
            self._wait_broker(b, deadline)

    def _process(self, name: str, role: str, conf_env: str, overrides: Mapping[str, str], mem: str) -> _Process:
        assert self.data_dir is not None and self._home is not None
        conf_file = self.data_dir / "conf" / f"{name}.conf"
        template = {"zookeeper": "zookeeper.conf", "bookie": "bookkeeper.conf", "broker": "broker.conf"}[role]
        if overrides:
            conf_file.write_text(_conf_text(self._home / "conf" / template, overrides,
                                            "Written by magnetar.testing.cluster"))
        env = {conf_env: str(conf_file), "PULSAR_LOG_DIR": str(self.data_dir / "logs"), "PULSAR_GC": _GC,
               "PULSAR_GC_LOG": " ", "BOOKIE_GC_LOG": " ", "PULSAR_LOG_IMMEDIATE_FLUSH": "true",
               "PULSAR_EXTRA_OPTS": f"-Djava.io.tmpdir={self.data_dir / 'tmp'} "
                                    "-Dio.netty.recycler.maxCapacityPerThread=4096",
               "BOOKIE_MEM" if role == "bookie" else "PULSAR_MEM": mem}
        return _Process(name, role, conf_file, env)

    def _zk_conf(self) -> dict[str, str]:
        assert self.data_dir is not None
        return {"dataDir": str(self.data_dir / "zookeeper"), "clientPort": str(self.zk_port),
                "clientPortAddress": "127.0.0.1", "admin.enableServer": "false", "forceSync": "no",
                "autopurge.purgeInterval": "0",
                # the Prometheus provider would listen on port 8000 of every interface
                "metricsProvider.className": "org.apache.zookeeper.metrics.impl.DefaultMetricsProvider",
                "metricsProvider.httpPort": "", "metricsProvider.exportJvmInfo": ""}

    def _bookie_conf(self) -> dict[str, str]:
        assert self.data_dir is not None
        bk = self.data_dir / "bookie"
        return {"bookiePort": str(self.bookie_port), "advertisedAddress": "127.0.0.1", "listeningInterface": "lo",
                "allowLoopback": "true", "useHostNameAsBookieID": "false",
                "metadataServiceUri": f"zk+hierarchical://127.0.0.1:{self.zk_port}/ledgers",
                "zkServers": f"127.0.0.1:{self.zk_port}",
                "journalDirectory": str(bk / "journal"), "ledgerDirectories": str(bk / "ledgers"),
                "journalSyncData": "false", "journalPreAllocSizeMB": "4", "journalWriteBufferSizeKB": "64",
                "httpServerEnabled": "false", "enableStatistics": "false",
                "statsProviderClass": "org.apache.bookkeeper.stats.NullStatsProvider",
                "diskUsageThreshold": "0.99", "diskUsageWarnThreshold": "0.99",
                "minUsableSizeForIndexFileCreation": "104857600",
                "dbStorage_writeCacheMaxSizeMb": "32", "dbStorage_readAheadCacheMaxSizeMb": "32",
                "dbStorage_rocksDB_blockCacheSize": "16777216", "dbStorage_rocksDB_writeBufferSizeMB": "8"}

    def _broker_conf(self, b: ClusterBroker) -> dict[str, str]:
        conf = {
            "clusterName": CLUSTER_NAME, "metadataStoreUrl": self.metadata_store_url,
            "configurationMetadataStoreUrl": self.metadata_store_url,
            "bookkeeperMetadataServiceUri": f"zk+hierarchical://127.0.0.1:{self.zk_port}/ledgers",
            "brokerServicePort": str(b.port), "webServicePort": str(b.http_port),
            "bindAddress": "127.0.0.1", "advertisedAddress": "127.0.0.1",
            # the broker's own client's DNS resolver socket (UDP, else on 0.0.0.0)
            "brokerClient_dnsLookupBindAddress": "127.0.0.1",
            # a killed broker's topics move after this session timeout
            "metadataStoreSessionTimeoutMillis": "10000",
            "managedLedgerDefaultEnsembleSize": "1", "managedLedgerDefaultWriteQuorum": "1",
            "managedLedgerDefaultAckQuorum": "1", "managedLedgerCacheSizeMB": "64",
            "functionsWorkerEnabled": "false", "webSocketServiceEnabled": "false",
            # topics move only when a test moves them
            "loadBalancerSheddingEnabled": "false", "loadBalancerAutoBundleSplitEnabled": "false",
            "loadBalancerAutoUnloadSplitBundlesEnabled": "false",
            "loadManagerClassName": LOAD_MANAGERS[self.load_manager],
            "transactionCoordinatorEnabled": "true", "brokerDeduplicationEnabled": str(self.deduplication).lower(),
            "systemTopicEnabled": "true", "topicLevelPoliciesEnabled": "true",
            # consumers' acks must not delete what a test reads back
            "defaultRetentionTimeInMinutes": "60", "defaultRetentionSizeInMB": "512",
            "allowAutoTopicCreation": "true", "allowAutoTopicCreationType": "non-partitioned",
            "brokerDeleteInactiveTopicsEnabled": "false", "acknowledgmentAtBatchIndexLevelEnabled": "true",
            "forceDeleteNamespaceAllowed": "true", "forceDeleteTenantAllowed": "true",
            "brokerShutdownTimeoutMs": "3000", "maxMessageSize": "5242880", "nettyMaxFrameSizeBytes": "5253120",
        }
        if self.load_manager == "extensible":
            conf["loadBalancerLoadSheddingStrategy"] = \
                "org.apache.pulsar.broker.loadbalance.extensions.scheduler.TransferShedder"
        conf.update(self.extra_conf)
        return conf

    def _broker_conf_text(self, b: ClusterBroker) -> str:
        assert self._home is not None
        return _conf_text(self._home / "conf" / "broker.conf", self._broker_conf(b),
                          "Written by magnetar.testing.cluster")

    def _initialize_metadata(self, broker_ports: list[int]) -> None:
        """``bin/pulsar initialize-cluster-metadata``: the cluster, ``public/default``, the
        bookies' ``/ledgers`` and the transaction coordinator topic (which standalone makes
        itself)."""
        assert self.data_dir is not None and self._home is not None
        web = ",".join(f"127.0.0.1:{p}" for p in broker_ports[1::2])
        svc = ",".join(f"127.0.0.1:{p}" for p in broker_ports[0::2])
        cmd = [str(self._home / "bin" / "pulsar"), "initialize-cluster-metadata", "--cluster", CLUSTER_NAME,
               "--metadata-store", self.metadata_store_url,
               "--configuration-metadata-store", self.metadata_store_url,
               "--web-service-url", f"http://{web}", "--broker-service-url", f"pulsar://{svc}",
               "--initial-num-transaction-coordinators", str(self.transaction_coordinators)]
        env = {**os.environ, "PULSAR_MEM": _TOOL_MEM, "PULSAR_GC": _GC, "PULSAR_GC_LOG": " ",
               "PULSAR_LOG_DIR": str(self.data_dir / "logs")}
        log_file = self.data_dir / "logs" / "initialize-cluster-metadata.log"
        with open(log_file, "ab") as out:
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                  timeout=self.startup_timeout, check=False)
        if proc.returncode != 0:
            raise ClusterError(f"initialize-cluster-metadata failed (exit {proc.returncode}):\n"
                               + _tail(log_file))

    def _zk_ok(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.zk_port), timeout=2) as s:
                s.sendall(b"ruok")
                return s.recv(16) == b"imok"
        except OSError:
            return False

    def _wait(self, deadline: float, what: str, ready: Callable[[], bool], procs: list[_Process]) -> None:
        while not ready():
            for p in procs:
                if not p.alive:
                    raise ClusterError(f"{p.name} exited while starting{self._bind_failure(p)}; "
                                       f"{self._log_tails([p])}")
            if time.monotonic() > deadline:
                raise ClusterError(f"{what} was not ready in time; {self._log_tails(procs)}")
            time.sleep(0.25)

    def _broker_ready(self, b: ClusterBroker) -> bool:
        """Serves its health check (a produce and consume through the bookie) and sees every
        live broker, so lookups may place topics on any of them."""
        try:
            if b.request("GET", "/admin/v2/brokers/health") != "ok":
                return False
            active = set(b.request("GET", f"/admin/v2/brokers/{CLUSTER_NAME}") or ())
        except (OSError, AdminError):
            return False
        return {o.broker_id for o in self.brokers if o.alive} <= active

    def _wait_broker(self, b: ClusterBroker, deadline: float) -> None:
        assert self._bookie is not None
        self._wait(deadline, f"broker {b.index}", lambda: self._broker_ready(b), [b._proc, self._bookie])

    def _bind_failure(self, proc: _Process) -> str:
        """`` (Address already in use)`` if the process's log says so (start() retries then)."""
        assert self.data_dir is not None
        with contextlib.suppress(OSError):
            if "Address already in use" in (self.data_dir / "logs" / f"{proc.name}.log").read_text(errors="replace"):
                return " (Address already in use)"
        return ""

    def _log_tails(self, procs: list[_Process]) -> str:
        assert self.data_dir is not None
        return "\n".join(f"last lines of {self.data_dir / 'logs' / p.name}.log:\n"
                         f"{_tail(self.data_dir / 'logs' / f'{p.name}.log')}" for p in procs)

    def stop(self, timeout: float = DEFAULT_STOP_TIMEOUT) -> None:
        """Stop the brokers, then the bookie, then ZooKeeper (SIGTERM, SIGKILL after
        ``timeout`` s), and remove the data dir this object made."""
        self._stop_processes(timeout)
        self._stopped()
        if self.data_dir is not None:
            with contextlib.suppress(FileNotFoundError):
                (self.data_dir / STATE_FILE).unlink()
            if self._own_data_dir and not self.keep_data:
                shutil.rmtree(self.data_dir, ignore_errors=True)
                self.data_dir = None

    def _stop_processes(self, timeout: float) -> None:
        for proc in reversed(self._processes()):
            with contextlib.suppress(Exception):
                proc.stop(timeout)

    # -- one broker at a time -------------------------------------------------------------

    def kill(self, i: int) -> None:
        """``kill -9`` broker ``i`` (its metadata session lapses after about 10 s, and then
        the other brokers take its topics)."""
        self.brokers[i]._proc.stop(timeout=0, sig=signal.SIGKILL)

    def stop_broker(self, i: int, timeout: float = DEFAULT_STOP_TIMEOUT) -> None:
        """Stop broker ``i`` gracefully (SIGTERM: it hands its bundles over first)."""
        self.brokers[i]._proc.stop(timeout)

    def restart(self, i: int) -> None:
        """Start broker ``i`` again (stopping it first if it runs) with the same ports and
        conf, and wait until it serves and the cluster sees it."""
        b = self.brokers[i]
        assert self.data_dir is not None and self._home is not None
        if b.alive:
            b._proc.stop(DEFAULT_STOP_TIMEOUT)
        b._proc.start(self._home, self.data_dir / "logs" / f"{b._proc.name}.log", self.die_with_parent)
        deadline = time.monotonic() + self.startup_timeout
        self._wait_broker(b, deadline)
        def all_see_it() -> bool:  # before a test moves topics to it
            try:
                return all(b.broker_id in o.request("GET", f"/admin/v2/brokers/{CLUSTER_NAME}")
                           for o in self.brokers if o.alive)
            except (OSError, AdminError):
                return False

        self._wait(deadline, f"the cluster seeing broker {i}", all_see_it, [b._proc])
        self._write_state()

    # -- topics -----------------------------------------------------------------------------

    def _lookup_path(self, topic: str) -> str:
        d, t, ns, name = _split_topic(topic)
        q = urllib.parse.quote
        return f"/lookup/v2/topic/{d}/{q(t, safe='')}/{q(ns, safe='')}/{q(name, safe='')}"

    def owner(self, topic: str) -> int:
        """The index of the broker that owns ``topic`` (a lookup, which assigns an unowned
        topic to a broker)."""
        url = self.request("GET", self._lookup_path(topic))["brokerUrl"]
        port = urllib.parse.urlsplit(url).port
        for b in self.brokers:
            if b.port == port:
                return b.index
        raise ClusterError(f"{topic} is owned by {url}, not a broker of this cluster")

    def bundle(self, topic: str) -> str:
        """The bundle range (``0x00000000_0x40000000``) ``topic`` falls in."""
        return str(self.request("GET", self._lookup_path(topic) + "/bundle")).strip('"')

    def _bundle_path(self, topic: str, bundle: str) -> str:
        _, t, ns, _ = _split_topic(topic)
        q = urllib.parse.quote
        return f"/admin/v2/namespaces/{q(t, safe='')}/{q(ns, safe='')}/{q(bundle, safe='')}"

    def unload(self, topic: str, to: int | None = None) -> None:
        """Unload ``topic``'s bundle; with ``to``, onto broker ``to`` (``destinationBroker``)."""
        query = f"?destinationBroker={self.brokers[to].broker_id}" if to is not None else ""
        self.request("PUT", self._bundle_path(topic, self.bundle(topic)) + "/unload" + query)

    def split_bundle(self, topic: str, unload: bool = False) -> None:
        """Split ``topic``'s bundle in two halves (``range_equally_divide``)."""
        self.request("PUT", self._bundle_path(topic, self.bundle(topic))
                     + f"/split?unload={str(unload).lower()}&splitAlgorithmName=range_equally_divide")

    def set_retention(self, namespace: str, minutes: int = -1, size_mb: int = -1) -> None:
        """The namespace's retention policy (-1: unlimited)."""
        self.request("POST", f"/admin/v2/namespaces/{_ns_path(namespace)}/retention",
                     {"retentionTimeInMinutes": minutes, "retentionSizeInMB": size_mb})

    # -- measurements and the state file ----------------------------------------------------

    def rss_bytes(self) -> int:
        """The resident memory of every live process of the cluster, summed."""
        return sum(_rss_kib(p.pid) for p in self._processes() if p.pid is not None and p.alive) * 1024

    def _write_state(self) -> None:
        assert self.data_dir is not None
        state = {"version": self.version, "load_manager": self.load_manager, "data_dir": str(self.data_dir),
                 "zk_port": self.zk_port, "bookie_port": self.bookie_port, "startup_seconds": self.startup_seconds,
                 "processes": {p.name: {"pid": p.pid, "role": p.role, "conf": str(p.conf_file), "env": p.env}
                               for p in self._processes()},
                 "brokers": [{"port": b.port, "http_port": b.http_port} for b in self.brokers]}
        tmp = self.data_dir / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.rename(self.data_dir / STATE_FILE)

    def detach(self) -> None:
        """Leave the cluster running after this Python process exits (no atexit stop)."""
        self._stopped()
        self._own_data_dir = False
        for p in self._processes():
            p._popen = None  # alive now goes through the pid and /proc

    @classmethod
    def attach(cls, data_dir: str | os.PathLike[str]) -> Cluster | None:
        """A handle on the cluster recorded in ``data_dir``'s state file, or None. :meth:`stop`
        ends its processes (those whose command line is still ours) and keeps ``data_dir``."""
        try:
            state = json.loads((Path(data_dir).absolute() / STATE_FILE).read_text())
        except (OSError, ValueError):
            return None
        procs = state["processes"]
        cluster = cls(brokers=len(state["brokers"]), load_manager=state["load_manager"], data_dir=state["data_dir"],
                      version=state["version"])
        cluster.zk_port, cluster.bookie_port = state["zk_port"], state["bookie_port"]
        cluster.startup_seconds = state.get("startup_seconds")

        def proc(name: str) -> _Process:
            p = _Process(name, procs[name]["role"], Path(procs[name]["conf"]), procs[name]["env"])
            p.pid = procs[name]["pid"]
            return p

        cluster._zk, cluster._bookie = proc("zookeeper"), proc("bookie")
        cluster.brokers = [ClusterBroker(i, b["port"], b["http_port"], proc(f"broker-{i}"))
                           for i, b in enumerate(state["brokers"])]
        return cluster


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""

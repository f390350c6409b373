"""Run a real Apache Pulsar standalone broker for tests.

The broker comes from Maven Central (``pulsar-server-distribution`` 4.0.x, fetched
with ``mvn`` into a cache directory) and runs in its own JVM and process group.
This module imports only the standard library, so it works before
``magnetar._core`` is built.

Python::

    with Standalone(port=0) as broker:
        broker.create_partitioned_topic("orders", 4)
        client = Client(broker.service_url)

With ``tls=True`` the broker also listens for ``pulsar+ssl://`` with a certificate signed by a
CA made for it (``broker.service_url_tls``, ``broker.ca_cert_path``).

Shell (the broker outlives the command; state lives in ``<cache_dir>/cli-data``)::

    python -m magnetar.testing.standalone start    # prints service_url, admin_url, startup_seconds
    python -m magnetar.testing.standalone status
    python -m magnetar.testing.standalone stop

The pieces it stands on live in private modules: fetching Pulsar (``_distribution``), the admin
REST client it extends (``_admin``), the TLS files (``_tls``) and ports and processes
(``_process``).

Everything binds loopback only (``ss -ltnp; ss -lunp`` filtered on the JVM's pid, Pulsar 4.0.8).
The one JVM listens on the binary port, the HTTP port (and with ``tls=True`` the TLS and HTTPS
ports) on 127.0.0.1 (``bindAddress``), extra ``listeners`` on their own loopback address
(``bindAddresses``), and the in-process bookie on ``127.0.0.1:<bookkeeper_port>``. Before
``listeningInterface=lo`` the bookie listened on ``0.0.0.0``: standalone passes
``conf/standalone.conf`` to ``BKCluster`` as the bookie's base configuration, and BookKeeper's
``BookieNettyServer`` binds the wildcard address unless ``listeningInterface`` is set (then it
binds the bookie address, our ``advertisedAddress`` 127.0.0.1). The broker's own client's DNS
resolver (UDP) was also on ``0.0.0.0`` until ``brokerClient_dnsLookupBindAddress=127.0.0.1``.
There is no other listener: the metadata store is RocksDB in the JVM (no ZooKeeper unless
``PULSAR_STANDALONE_USE_ZOOKEEPER``, which the launcher removes from the environment), ``-nss``
leaves out stream storage, ``-nfw`` the functions worker, ``httpServerEnabled=false`` the bookie's
HTTP server, ``webSocketServiceEnabled=false`` the WebSocket service.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

from ._admin import Admin
from ._auth import auth_conf, hs256_token, make_auth_files, make_client_certificate, tokens_tool
from ._distribution import DEFAULT_VERSION, default_cache_dir, ensure_distribution
from ._errors import AdminError as AdminError  # noqa: F401  (importable from here, as before the split)
from ._errors import StandaloneError
from ._process import Service, pick_ports, pid_alive, set_pdeathsig
from ._tls import DEFAULT_TLS_NAMES, make_tls_files

# Only what is defined here; magnetar.testing's other names, defined here before the split,
# stay importable from this module through the imports above.
__all__ = ["DEFAULT_STARTUP_TIMEOUT", "DEFAULT_STOP_TIMEOUT", "Standalone"]

DEFAULT_PORT = 6650
DEFAULT_HTTP_PORT = 8080
DEFAULT_TLS_PORT = 6651
DEFAULT_STARTUP_TIMEOUT = 180.0
DEFAULT_STOP_TIMEOUT = 20.0
STATE_FILE = "standalone.json"
LOG_FILE = "broker.log"
_MAIN_CLASS = "org.apache.pulsar.PulsarStandaloneStarter"
_READY_PATH = "/admin/v2/namespaces/public/default"

log = logging.getLogger("magnetar.testing")

_CONF_DIR = Path(__file__).with_name("conf")  # standalone.conf and log4j2.xml templates


def _base_conf() -> dict[str, str]:
    """The ``key=value`` pairs of the packaged ``conf/standalone.conf``."""
    lines = (line.strip() for line in (_CONF_DIR / "standalone.conf").read_text().splitlines())
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def _is_our_broker(pid: int, data_dir: Path) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return pid_alive(pid)  # no /proc: trust the pid file
    return _MAIN_CLASS in cmdline and str(data_dir) in cmdline and pid_alive(pid)


class Standalone(Admin, Service):
    """A Pulsar standalone broker (broker + in-process bookie + RocksDB metadata) in a child JVM.

    Use as a context manager or call :meth:`start`/:meth:`stop`. An ``atexit`` hook stops
    brokers the Python process forgot; on Linux the JVM also gets SIGTERM if the starting
    thread dies (``die_with_parent``).

    Args:
        version: Pulsar version from Maven Central.
        cache_dir: where distributions are unpacked (default :func:`default_cache_dir`).
        data_dir: broker state, config and ``broker.log``. Default: a fresh temp dir that is
            removed on :meth:`stop` unless ``keep_data``. A given directory is never removed.
        port, http_port: binary protocol and HTTP ports. None: 6650/8080 if free, else free
            ports; 0: a free port. ``port=0`` alone also makes ``http_port`` free.
        bookkeeper_port: in-process bookie port. None or 0: Pulsar 4.0's standalone picks a
            free port itself (it ignores ``--bookkeeper-port`` unless ``allowEphemeralPorts``).
        extra_conf: broker/bookie config keys added to or overriding the defaults.
        startup_timeout: seconds to wait for ``public/default`` to answer 200.
        heap: JVM ``-Xms``/``-Xmx`` and ``MaxDirectMemorySize``.
        jvm_args: extra JVM arguments (after the defaults).
        keep_data: do not delete the temp data dir on stop.
        wipe_data: delete metadata and ledgers in ``data_dir`` before starting.
        die_with_parent: Linux PR_SET_PDEATHSIG for the JVM.
        admin_token: bearer token of the admin helpers, for a broker with authentication on.
        tls: also serve ``pulsar+ssl://`` (and HTTPS) with a certificate signed by a CA made
            for this broker in ``<data_dir>/tls`` (:func:`make_tls_files`); see
            :attr:`service_url_tls` and :attr:`ca_cert_path`. The plain port stays open.
        tls_port: the TLS binary protocol port, like ``port`` (None: 6651 if free; 0: free).
            The HTTPS port is always a free one.
        tls_names: host names and IP addresses the server certificate is valid for.
        auth: turn authentication on with the token, basic and (with ``tls``) TLS providers at
            once, and authorization (:attr:`super_users` may do anything). The files live in
            ``<data_dir>/auth``; :meth:`token` signs JWTs with the broker's key,
            :attr:`basic_users` holds the htpasswd users, :meth:`client_certificate` makes
            certificates for TLS authentication. The admin helpers authenticate as ``admin``.
        auth_refresh_check_seconds: how often the broker checks for expired credentials
            (``authenticationRefreshCheckSeconds``) and challenges the client.
        super_users: roles with every permission (``admin`` is always one).
        basic_users: user -> password of the htpasswd file (default: one random user).
        listeners: more broker listeners (``advertisedListeners``), name -> loopback address
            (say ``{"external": "127.0.0.2"}``), each on a free port of its own
            (:attr:`listener_urls`); the usual ports form the listener ``internal``.
    """

    def __init__(self, *, version: str = DEFAULT_VERSION, cache_dir: str | os.PathLike[str] | None = None,
                 data_dir: str | os.PathLike[str] | None = None, port: int | None = None,
                 http_port: int | None = None, bookkeeper_port: int | None = None,
                 extra_conf: Mapping[str, str] | None = None, startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
                 heap: str = "1g", jvm_args: Sequence[str] = (), keep_data: bool = False,
                 wipe_data: bool = False, die_with_parent: bool = True, admin_token: str | None = None,
                 tls: bool = False, tls_port: int | None = None,
                 tls_names: Sequence[str] = DEFAULT_TLS_NAMES, auth: bool = False,
                 auth_refresh_check_seconds: int = 60, super_users: Sequence[str] = (),
                 basic_users: Mapping[str, str] | None = None, listeners: Mapping[str, str] | None = None) -> None:
        super().__init__("http://127.0.0.1:0", token=admin_token)
        self.version = version
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self._own_data_dir = data_dir is None
        self.data_dir: Path | None = Path(data_dir).absolute() if data_dir is not None else None
        if port == 0 and http_port is None:
            http_port = 0  # port=0 means "free ports", not "free binary port but 8080"
        self._want_ports = (port, http_port, bookkeeper_port)
        self.port = self.http_port = self.bookkeeper_port = 0
        self.tls = tls
        self.tls_names = tuple(tls_names)
        if tls and not self.tls_names:
            raise ValueError("tls_names must name at least one host or address")
        self._want_tls_port = 0 if port == 0 and tls_port is None else tls_port
        self.tls_port = self.https_port = 0
        self.extra_conf = {str(k): str(v) for k, v in (extra_conf or {}).items()}
        self.startup_timeout = startup_timeout
        self.heap = heap
        self.jvm_args = list(jvm_args)
        self.keep_data = keep_data
        self.wipe_data = wipe_data
        self.die_with_parent = die_with_parent
        self.auth = auth
        self.auth_refresh_check_seconds = auth_refresh_check_seconds
        self.super_users = ("admin", *(u for u in super_users if u != "admin"))
        self.basic_users = dict(basic_users) if basic_users is not None else {"magnetar-basic": os.urandom(9).hex()}
        self.listeners = dict(listeners or {})
        self.listener_urls: dict[str, str] = {}
        """``pulsar://host:port`` of each extra listener, once started."""
        self.auth_secret_key: bytes | None = None
        """The HS256 key the broker checks tokens with (``auth=True``)."""
        self.startup_seconds: float | None = None
        self.pid: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    # -- public properties -------------------------------------------------------------

    @property
    def service_url(self) -> str:
        """``pulsar://127.0.0.1:<port>``."""
        return f"pulsar://127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        """``http://127.0.0.1:<http_port>``."""
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def service_url_tls(self) -> str:
        """``pulsar+ssl://127.0.0.1:<tls_port>`` (a broker started with ``tls=True``)."""
        if not self.tls:
            raise StandaloneError("this broker was not started with tls=True")
        return f"pulsar+ssl://127.0.0.1:{self.tls_port}"

    @property
    def ca_cert_path(self) -> Path | None:
        """PEM certificate of the CA that signed the broker's certificate (``tls=True``)."""
        return self.data_dir / "tls" / "ca.cert.pem" if self.tls and self.data_dir else None

    @property
    def log_path(self) -> Path | None:
        """The broker's combined stdout/stderr (``<data_dir>/broker.log``)."""
        return self.data_dir / LOG_FILE if self.data_dir else None

    def make_token(self, subject: str, expires_in: float | None = None) -> str:
        """A JWT for the role ``subject`` signed with the broker's key (``auth=True``),
        expiring ``expires_in`` seconds from now (negative: already expired; None: never)."""
        if self.auth_secret_key is None:
            raise StandaloneError("this broker was not started with auth=True")
        return hs256_token(self.auth_secret_key, subject, None if expires_in is None else time.time() + expires_in)

    def client_certificate(self, common_name: str, x509_version: int = 3) -> tuple[Path, Path]:
        """(certificate, key) PEM files for the role ``common_name``, signed by the broker's CA,
        for TLS authentication (``tls=True``); ``x509_version=1`` for an old-style certificate."""
        if not self.tls or self.data_dir is None:
            raise StandaloneError("this broker was not started with tls=True")
        return make_client_certificate(self.data_dir / "tls", self.data_dir / "clients", common_name,
                                       x509_version=x509_version)

    def tokens_tool(self, subject: str) -> subprocess.Popen[str]:
        """``bin/pulsar tokens create`` for ``subject`` with the broker's key file, started in
        the background (it is a JVM); :func:`magnetar.testing.tool_output` reads the token."""
        if not self.auth or self.data_dir is None:
            raise StandaloneError("this broker was not started with auth=True")
        return tokens_tool(ensure_distribution(self.version, self.cache_dir), self.data_dir / "auth" / "secret.key",
                           subject)

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        return f"<Standalone {self.version} {state} {self.service_url} {self.admin_url}>"

    # -- lifecycle ---------------------------------------------------------------------

    def is_running(self) -> bool:
        """True while the broker JVM is alive (it may still be starting)."""
        if self._proc is not None:
            return self._proc.poll() is None
        return self.pid is not None and self.data_dir is not None and _is_our_broker(self.pid, self.data_dir)

    def start(self) -> Standalone:
        """Fetch Pulsar if needed, launch the JVM and block until the admin API is ready.

        Raises :class:`StandaloneError` (with the tail of ``broker.log``) if the JVM exits or
        the broker is not ready within ``startup_timeout``. If a port picked automatically
        was taken in the meantime, it retries once with fresh ports.
        """
        if self.is_running():
            return self
        home = ensure_distribution(self.version, self.cache_dir)
        if self.data_dir is None:
            self.data_dir = Path(tempfile.mkdtemp(prefix="magnetar-pulsar-"))
        wanted = (*self._want_ports[:2], *((self._want_tls_port,) if self.tls else ()))
        auto = any(p is None or p == 0 for p in wanted)
        for attempt in (1, 2):
            try:
                self._launch(home)
                return self
            except StandaloneError as exc:
                if attempt == 2 or not auto or "Address already in use" not in str(exc):
                    self._cleanup_data()
                    raise
                log.warning("port collision at start-up; retrying with other ports")
                self.wipe_data = self.wipe_data or self._own_data_dir
        return self  # pragma: no cover

    def _launch(self, home: Path) -> None:
        assert self.data_dir is not None
        data = self.data_dir
        if self.wipe_data:
            for sub in ("metadata", "bookkeeper"):
                shutil.rmtree(data / sub, ignore_errors=True)
        (data / "tmp").mkdir(parents=True, exist_ok=True)
        (data / "conf").mkdir(exist_ok=True)
        wanted = list(zip(self._want_ports[:2], (DEFAULT_PORT, DEFAULT_HTTP_PORT), strict=True))
        if self.tls:
            wanted += [(self._want_tls_port, DEFAULT_TLS_PORT), (0, 0)]
        port, http, *tls_ports = pick_ports(wanted)
        self.port, self.http_port = port, http
        bk = self._want_ports[2]
        conf = {**_base_conf(), "brokerServicePort": str(port), "webServicePort": str(http)}
        if self.tls:
            self.tls_port, self.https_port = tls_ports
            files = make_tls_files(data / "tls", self.tls_names)
            conf.update({
                "brokerServicePortTls": str(self.tls_port), "webServicePortTls": str(self.https_port),
                "tlsCertificateFilePath": str(files["cert"]), "tlsKeyFilePath": str(files["key"]),
                "tlsTrustCertsFilePath": str(files["ca_cert"]), "tlsAllowInsecureConnection": "false",
                "tlsRequireTrustedClientCertOnConnect": "false",
            })
        if self.auth:
            files = make_auth_files(data / "auth", self.basic_users)
            self.auth_secret_key = files["secret_key"].read_bytes()
            self.token = self.make_token("admin")
            conf.update(auth_conf(files, self.token, tls=self.tls, super_users=self.super_users,
                                  refresh_check_seconds=self.auth_refresh_check_seconds))
        if self.listeners:
            extra = pick_ports([(0, 0)] * len(self.listeners))
            self.listener_urls = {name: f"pulsar://{host}:{p}"
                                  for (name, host), p in zip(self.listeners.items(), extra, strict=True)}
            internal = [f"internal:pulsar://127.0.0.1:{port}",
                        *([f"internal:pulsar+ssl://127.0.0.1:{self.tls_port}"] if self.tls else [])]
            conf.update({
                "advertisedListeners": ",".join([*internal, *(f"{n}:{u}" for n, u in self.listener_urls.items())]),
                "internalListenerName": "internal",
                "bindAddresses": ",".join(f"{n}:{u}" for n, u in self.listener_urls.items()),
            })
        if bk:  # otherwise BKCluster picks a free bookie port itself (allowEphemeralPorts=false)
            conf["allowEphemeralPorts"] = "true"
        conf.update(self.extra_conf)
        conf_file = data / "conf" / "standalone.conf"
        conf_file.write_text("# Written by magnetar.testing.standalone\n"
                             + "".join(f"{k}={v}\n" for k, v in conf.items()))
        shutil.copyfile(_CONF_DIR / "log4j2.xml", data / "conf" / "log4j2.xml")
        cmd = self._command(home, conf_file, bk)
        java_home = os.environ.get("JAVA_HOME")
        env = dict(os.environ)
        env.pop("PULSAR_STANDALONE_USE_ZOOKEEPER", None)
        # PDEATHSIG fires when the *thread* that forked exits, so only use it from the main thread
        main_thread = threading.main_thread() is threading.current_thread()
        pdeath = self.die_with_parent and sys.platform == "linux" and main_thread
        t0 = time.monotonic()
        with open(data / LOG_FILE, "ab") as out:
            out.write(f"\n==== magnetar: starting Pulsar {self.version} at {time.ctime()}\n".encode())
            out.flush()
            self._proc = subprocess.Popen(cmd, cwd=data, stdin=subprocess.DEVNULL, stdout=out,
                                          stderr=subprocess.STDOUT, start_new_session=True, env=env,
                                          executable=str(Path(java_home, "bin", "java")) if java_home else None,
                                          preexec_fn=set_pdeathsig if pdeath else None)
        self.pid = self._proc.pid
        self._running()
        deadline = t0 + self.startup_timeout
        while True:
            if self._proc.poll() is not None:
                self._fail(f"the broker JVM exited with code {self._proc.returncode} during start-up")
            try:
                with urllib.request.urlopen(self._new_request(self.admin_url + _READY_PATH), timeout=5) as resp:
                    if resp.status == 200:
                        break
            except (OSError, urllib.error.URLError):
                pass
            if time.monotonic() > deadline:
                self._fail(f"the broker was not ready within {self.startup_timeout:.0f} s")
            time.sleep(0.25)
        self.startup_seconds = round(time.monotonic() - t0, 2)
        self.bookkeeper_port = bk or self._bookie_port_from_log()
        self._write_state()

    def _bookie_port_from_log(self) -> int:
        marker = "Starting new bookie on port: "
        for line in reversed(self.log_tail(5000).splitlines()):
            if marker in line:
                with contextlib.suppress(ValueError):
                    return int(line.split(marker, 1)[1].split()[0])
        return 0

    def _command(self, home: Path, conf_file: Path, bk_port: int | None) -> list[str]:
        assert self.data_dir is not None
        data = self.data_dir
        opens = ["java.base/java.io", "java.base/java.util.zip", "java.base/java.nio", "java.base/java.lang",
                 "java.base/jdk.internal.misc", "java.base/jdk.internal.platform", "java.base/sun.net",
                 "java.management/sun.management", "jdk.management/com.sun.management.internal"]
        return [
            "java", "-cp", f"{data / 'conf'}{os.pathsep}{home / 'lib'}/*",
            f"-Xms{self.heap}", f"-Xmx{self.heap}", f"-XX:MaxDirectMemorySize={self.heap}",
            "-XX:+UseG1GC", "-XX:ParallelGCThreads=2", "-XX:ConcGCThreads=1", "-XX:+PerfDisableSharedMem",
            "-Djava.net.preferIPv4Stack=true", "-Djute.maxbuffer=10485760",
            "-Dio.netty.tryReflectionSetAccessible=true",
            "-Dorg.apache.pulsar.shade.io.netty.tryReflectionSetAccessible=true",
            *[a for m in opens for a in ("--add-opens", f"{m}=ALL-UNNAMED")],
            "--enable-native-access=ALL-UNNAMED",
            f"-Djava.io.tmpdir={data / 'tmp'}", f"-Dlog4j.configurationFile={data / 'conf' / 'log4j2.xml'}",
            "-Dlog4j.shutdownHookEnabled=false", "-Dlog4j2.is.webapp=false",
            "-Dpulsar.allocator.exit_on_oom=true", "-Dio.netty.recycler.maxCapacityPerThread=4096",
            "-Dbookkeeper.metadata.bookie.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataBookieDriver",
            "-Dbookkeeper.metadata.client.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataClientDriver",
            f"-Dpulsar.config.file={conf_file}",
            *self.jvm_args,
            _MAIN_CLASS, "--config", str(conf_file), "-nfw", "-nss",
            "--metadata-dir", str(data / "metadata"), "--bookkeeper-dir", str(data / "bookkeeper"),
            *(["--bookkeeper-port", str(bk_port)] if bk_port else []),
        ]

    def _fail(self, why: str) -> None:
        tail = self.log_tail()
        self._terminate(5.0)
        raise StandaloneError(f"{why}; last lines of {self.log_path}:\n{tail}")

    def log_tail(self, lines: int = 50) -> str:
        """The last ``lines`` lines of ``broker.log``."""
        try:
            text = self.log_path.read_text(errors="replace") if self.log_path else ""
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _terminate(self, timeout: float) -> None:
        """SIGTERM the broker's process group, wait, then SIGKILL."""
        pid = self.pid
        if pid is not None and self.is_running():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while self.is_running() and time.monotonic() < deadline:
                time.sleep(0.1)
            if self.is_running():
                log.warning("broker pid %d ignored SIGTERM for %.0f s; sending SIGKILL", pid, timeout)
            # SIGKILL whatever is left of the group (the leader, or stragglers it forked)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=10)
        self._proc = None
        self.pid = None
        self._stopped()
        if self.data_dir is not None:
            with contextlib.suppress(FileNotFoundError):
                (self.data_dir / STATE_FILE).unlink()

    def stop(self, timeout: float = DEFAULT_STOP_TIMEOUT) -> None:
        """Stop the broker cleanly (SIGTERM, then SIGKILL after ``timeout`` s) and clean up."""
        self._terminate(timeout)
        self._cleanup_data()

    def _cleanup_data(self) -> None:
        if self._own_data_dir and not self.keep_data and self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None

    # -- state file (lets another process find a broker) --------------------------------

    def _write_state(self) -> None:
        assert self.data_dir is not None
        state = {"pid": self.pid, "version": self.version, "service_url": self.service_url,
                 "admin_url": self.admin_url, "port": self.port, "http_port": self.http_port,
                 "bookkeeper_port": self.bookkeeper_port, "data_dir": str(self.data_dir),
                 "tls_port": self.tls_port, "https_port": self.https_port, "tls_names": list(self.tls_names),
                 "startup_seconds": self.startup_seconds, "started_at": time.time()}
        tmp = self.data_dir / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.rename(self.data_dir / STATE_FILE)

    def detach(self) -> None:
        """Leave the broker running after this Python process exits (no atexit stop)."""
        self._stopped()
        self._own_data_dir = False
        self._proc = None  # is_running() now goes through the pid and /proc

    @classmethod
    def attach(cls, data_dir: str | os.PathLike[str]) -> Standalone | None:
        """A handle on the broker recorded in ``data_dir``'s state file, or None if there is none.

        The handle is not stopped at exit; :meth:`stop` stops the broker but keeps ``data_dir``.
        """
        path = Path(data_dir).absolute() / STATE_FILE
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        broker = cls(version=state.get("version", DEFAULT_VERSION), data_dir=state["data_dir"])
        broker.port, broker.http_port = int(state["port"]), int(state["http_port"])
        broker.bookkeeper_port = int(state.get("bookkeeper_port", 0))
        broker.tls_port, broker.https_port = int(state.get("tls_port", 0)), int(state.get("https_port", 0))
        broker.tls, broker.tls_names = broker.tls_port > 0, tuple(state.get("tls_names", DEFAULT_TLS_NAMES))
        broker.pid, broker.startup_seconds = int(state["pid"]), state.get("startup_seconds")
        return broker


if __name__ == "__main__":
    # `python -m magnetar.testing.standalone` is `python -m magnetar.testing`: run that module
    # rather than import it, so the launcher never depends on its own command line.
    import runpy

    runpy.run_module("magnetar.testing", run_name="__main__", alter_sys=True)

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
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
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
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_VERSION",
    "Admin",
    "AdminError",
    "Standalone",
    "StandaloneError",
    "default_cache_dir",
    "ensure_distribution",
    "make_tls_files",
]

DEFAULT_VERSION = "4.0.8"
"""Newest 4.0.x (LTS) on Maven Central when this was written (4.0.9 did not exist yet)."""
DEFAULT_PORT = 6650
DEFAULT_HTTP_PORT = 8080
DEFAULT_TLS_PORT = 6651
DEFAULT_TLS_NAMES = ("localhost", "127.0.0.1")
DEFAULT_STARTUP_TIMEOUT = 180.0
DEFAULT_STOP_TIMEOUT = 20.0
STATE_FILE = "standalone.json"
LOG_FILE = "broker.log"
_MAIN_CLASS = "org.apache.pulsar.PulsarStandaloneStarter"
_GROUP, _ARTIFACT = "org.apache.pulsar", "pulsar-server-distribution"
_READY_PATH = "/admin/v2/namespaces/public/default"
_OK_MARKER = ".magnetar-complete"

log = logging.getLogger("magnetar.testing")

_CONF_DIR = Path(__file__).with_name("conf")  # standalone.conf and log4j2.xml templates


def _base_conf() -> dict[str, str]:
    """The ``key=value`` pairs of the packaged ``conf/standalone.conf``."""
    lines = (line.strip() for line in (_CONF_DIR / "standalone.conf").read_text().splitlines())
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


_FALLBACK_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.magnetar</groupId><artifactId>pulsar-classpath</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies><dependency>
    <groupId>{group}</groupId><artifactId>{artifact}</artifactId>
    <version>{version}</version><type>pom</type>
    <!-- not on Central for 4.0.x; only the etcd metadata store needs it -->
    <exclusions><exclusion><groupId>{group}</groupId><artifactId>jetcd-core-shaded</artifactId></exclusion></exclusions>
  </dependency></dependencies>
</project>
"""

# Pulsar's poms declare extra repositories (confluent, restlet); send everything to Central.
_CENTRAL_ONLY_SETTINGS = """<settings><mirrors><mirror><id>magnetar-central-only</id><mirrorOf>*</mirrorOf>
<url>https://repo.maven.apache.org/maven2</url></mirror></mirrors></settings>
"""


class StandaloneError(RuntimeError):
    """The broker could not be fetched, started or stopped."""


class AdminError(StandaloneError):
    """An admin REST call returned an HTTP error; ``status`` and ``body`` hold the reply."""

    def __init__(self, method: str, url: str, status: int, body: str) -> None:
        super().__init__(f"{method} {url} -> HTTP {status}: {body.strip()[:500]}")
        self.status = status
        self.body = body


# --------------------------------------------------------------------------- fetching


def default_cache_dir() -> Path:
    """``$MAGNETAR_PULSAR_CACHE`` or ``~/.cache/magnetar/pulsar``."""
    env = os.environ.get("MAGNETAR_PULSAR_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "magnetar" / "pulsar"


def _run(cmd: Sequence[str], what: str, cwd: Path | None = None) -> None:
    proc = subprocess.run(list(cmd), cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise StandaloneError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n{tail}")


def _mvn() -> str:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise StandaloneError("`mvn` (Apache Maven) is needed to fetch Pulsar but is not on PATH")
    return mvn


def _fetch_tarball(version: str, tmp: Path) -> Path | None:
    """The ``tar.gz:bin`` distribution: from ``~/.m2`` if present, else via ``mvn``; None if missing."""
    name = f"{_ARTIFACT}-{version}-bin.tar.gz"
    local = Path.home() / ".m2/repository" / _GROUP.replace(".", "/") / _ARTIFACT / version / name
    if local.is_file():
        return local
    out = tmp / "download"
    coords = f"{_GROUP}:{_ARTIFACT}:{version}:tar.gz:bin"
    log.info("downloading %s from Maven Central (~240 MB) ...", coords)
    try:
        _run([_mvn(), "-q", "-B", "dependency:copy", f"-Dartifact={coords}", f"-DoutputDirectory={out}",
              "-Dmdep.stripVersion=false"], "mvn dependency:copy")
    except StandaloneError as exc:
        log.warning("the tar.gz:bin artifact is unavailable, falling back to the pom classpath: %s",
                    str(exc).splitlines()[0])
        return None
    found = out / name
    return found if found.is_file() else None


def _fetch_from_pom(version: str, tmp: Path, home: Path) -> None:
    """Build ``home/lib`` from the distribution pom's runtime dependencies."""
    (tmp / "pom").mkdir()
    (tmp / "pom/pom.xml").write_text(_FALLBACK_POM.format(group=_GROUP, artifact=_ARTIFACT, version=version))
    (tmp / "pom/settings.xml").write_text(_CENTRAL_ONLY_SETTINGS)
    log.info("resolving the %s:%s pom classpath with mvn ...", _ARTIFACT, version)
    _run([_mvn(), "-q", "-B", "-gs", str(tmp / "pom/settings.xml"), "dependency:copy-dependencies",
          "-DincludeScope=runtime", "-Dmdep.prependGroupId=true", f"-DoutputDirectory={home / 'lib'}"],
         "mvn dependency:copy-dependencies", cwd=tmp / "pom")


def ensure_distribution(version: str = DEFAULT_VERSION, cache_dir: str | os.PathLike[str] | None = None,
                        *, method: str = "auto") -> Path:
    """Return a Pulsar home (with ``lib/``) for ``version``, fetching it into ``cache_dir`` once.

    ``$MAGNETAR_PULSAR_HOME`` short-circuits everything. ``method`` is ``"auto"`` (tarball,
    then pom fallback), ``"tarball"`` or ``"pom"``. Concurrent callers serialise on a
    lock file; the result is built in a temporary directory and renamed into place.
    """
    if env := os.environ.get("MAGNETAR_PULSAR_HOME"):
        return Path(env)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    home = cache / f"apache-pulsar-{version}"
    if (home / _OK_MARKER).exists():
        return home
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f".lock-{version}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (home / _OK_MARKER).exists():
            return home
        t0 = time.monotonic()
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{version}-", dir=cache))
        try:
            staged = tmp / f"apache-pulsar-{version}"
            tarball = _fetch_tarball(version, tmp) if method in ("auto", "tarball") else None
            if tarball is not None:
                log.info("extracting %s", tarball.name)
                _run(["tar", "xzf", str(tarball), "-C", str(tmp)], "tar")  # tar keeps bin/ exec bits
            elif method == "tarball":
                raise StandaloneError(f"{_ARTIFACT}:{version}:tar.gz:bin is not available")
            else:
                staged.mkdir()
                _fetch_from_pom(version, tmp, staged)
            if not any((staged / "lib").glob("*.jar")):
                raise StandaloneError(f"no jars in {staged / 'lib'} after fetching Pulsar {version}")
            (staged / _OK_MARKER).write_text(f"{version}\n")
            if home.exists():  # a stale, incomplete copy
                shutil.rmtree(home)
            staged.rename(home)
            log.info("Pulsar %s ready in %s (%.1f s)", version, home, time.monotonic() - t0)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return home


# --------------------------------------------------------------------------- admin REST


def _split_topic(topic: str) -> tuple[str, str, str, str]:
    domain, sep, rest = topic.partition("://")
    if not sep:
        domain, rest = "persistent", topic
    parts = rest.split("/")
    if len(parts) == 1:
        parts = ["public", "default", parts[0]]
    if len(parts) != 3 or domain not in ("persistent", "non-persistent"):
        raise ValueError(f"not a topic name: {topic!r}")
    return domain, parts[0], parts[1], parts[2]


def _ns_path(namespace: str) -> str:
    parts = namespace.split("/")
    if len(parts) == 1:
        parts = ["public", parts[0]]
    return "/".join(urllib.parse.quote(p, safe="") for p in parts)


class Admin:
    """Minimal Pulsar admin REST client (urllib only) with helpers for tests.

    Topic arguments take a full name (``persistent://tenant/ns/name``), ``tenant/ns/name``
    or a short name (``persistent://public/default/<name>``). Namespaces take
    ``tenant/ns`` or ``ns`` (tenant ``public``).
    """

    def __init__(self, admin_url: str, *, timeout: float = 30.0, token: str | None = None) -> None:
        self._admin_url = admin_url.rstrip("/")
        self.timeout = timeout
        self.token = token
        """Bearer token for a broker with authentication enabled."""

    def _new_request(self, url: str, data: bytes | None = None, method: str = "GET") -> urllib.request.Request:
        req = urllib.request.Request(url, data=data, method=method)
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        return req

    @property
    def admin_url(self) -> str:
        """Base HTTP URL of the admin API, e.g. ``http://127.0.0.1:8080``."""
        return self._admin_url

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """Send ``method path`` (``path`` starts with ``/admin/...``) with an optional JSON body.

        Returns the decoded JSON reply, the raw text if it is not JSON, or None if empty.
        Raises :class:`AdminError` on an HTTP error status.
        """
        url = self.admin_url + path
        data = None if body is None else json.dumps(body).encode()
        req = self._new_request(url, data, method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                text = resp.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as exc:
            raise AdminError(method, url, exc.code, exc.read().decode("utf-8", "replace")) from None
        if not text.strip():
            return None
        try:
            return json.loads(text)
        except ValueError:
            return text

    def _topic(self, topic: str, suffix: str = "") -> str:
        d, t, ns, name = _split_topic(topic)
        q = urllib.parse.quote
        return f"/admin/v2/{d}/{q(t, safe='')}/{q(ns, safe='')}/{q(name, safe='')}{suffix}"

    def partitions(self, topic: str) -> int:
        """Number of partitions of ``topic`` (0 for a non-partitioned or missing topic)."""
        return int(self.request("GET", self._topic(topic, "/partitions"))["partitions"])

    def create_topic(self, topic: str) -> None:
        """Create a non-partitioned topic."""
        self.request("PUT", self._topic(topic))

    def create_partitioned_topic(self, topic: str, partitions: int) -> None:
        """Create a partitioned topic with ``partitions`` partitions."""
        self.request("PUT", self._topic(topic, "/partitions"), partitions)

    def update_partitioned_topic(self, topic: str, partitions: int) -> None:
        """Raise the partition count of a partitioned topic to ``partitions``."""
        self.request("POST", self._topic(topic, "/partitions"), partitions)

    def unload_topic(self, topic: str) -> None:
        """Unload ``topic`` (clients see a disconnect and reconnect)."""
        self.request("PUT", self._topic(topic, "/unload"))

    def terminate_topic(self, topic: str) -> Any:
        """Terminate ``topic`` (all partitions if partitioned); returns the broker's reply."""
        if self.partitions(topic) > 0:
            return self.request("POST", self._topic(topic, "/terminate/partitions"))
        return self.request("POST", self._topic(topic, "/terminate"))

    def topic_stats(self, topic: str) -> dict[str, Any]:
        """Topic stats as JSON (partitioned-stats for a partitioned topic)."""
        if self.partitions(topic) > 0:
            return self.request("GET", self._topic(topic, "/partitioned-stats"))  # type: ignore[no-any-return]
        return self.request("GET", self._topic(topic, "/stats"))  # type: ignore[no-any-return]

    def delete_topic(self, topic: str, force: bool = True) -> None:
        """Delete ``topic`` (partitioned or not); ``force`` drops producers/consumers too."""
        suffix = "/partitions" if self.partitions(topic) > 0 else ""
        self.request("DELETE", self._topic(topic, suffix) + f"?force={str(force).lower()}")

    def list_topics(self, namespace: str = "public/default") -> list[str]:
        """Persistent topics (including partitions) in ``namespace``."""
        return list(self.request("GET", f"/admin/v2/persistent/{_ns_path(namespace)}"))

    def create_namespace(self, namespace: str) -> None:
        """Create ``namespace`` (``tenant/ns``); an existing namespace is not an error."""
        try:
            self.request("PUT", f"/admin/v2/namespaces/{_ns_path(namespace)}")
        except AdminError as exc:
            if exc.status != 409:
                raise

    def set_deduplication(self, namespace: str, enabled: bool) -> None:
        """Turn message deduplication on or off for ``namespace``."""
        self.request("POST", f"/admin/v2/namespaces/{_ns_path(namespace)}/deduplication", bool(enabled))


# --------------------------------------------------------------------------- TLS files


def make_tls_files(directory: Path, names: Sequence[str] = DEFAULT_TLS_NAMES) -> dict[str, Path]:
    """A private CA and a server certificate for ``names`` (DNS names or IP addresses, all put
    in the subject alternative name), made with the ``openssl`` CLI into ``directory``.

    Returns the paths under the keys ``ca_cert``, ``ca_key``, ``cert`` and ``key``; the server
    key is PKCS#8 PEM, as the broker wants. Existing files are kept (whatever names they were
    made for), so a restarted broker serves the certificate its clients already trust.
    """
    openssl = shutil.which("openssl")
    if openssl is None:
        raise StandaloneError("`openssl` is needed to make the test certificates but is not on PATH")
    directory.mkdir(parents=True, exist_ok=True)
    files = {k: directory / f for k, f in (("ca_cert", "ca.cert.pem"), ("ca_key", "ca.key.pem"),
                                           ("cert", "broker.cert.pem"), ("key", "broker.key-pk8.pem"))}
    if all(f.exists() for f in files.values()):
        return files

    def ip(name: str) -> bool:
        with contextlib.suppress(OSError):
            socket.inet_pton(socket.AF_INET6 if ":" in name else socket.AF_INET, name)
            return True
        return False

    san = ",".join(f"IP:{n}" if ip(n) else f"DNS:{n}" for n in names)
    ext = directory / "broker.ext"
    ext.write_text("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
                   f"extendedKeyUsage=serverAuth\nsubjectAltName={san}\n")
    raw_key, csr = directory / "broker.key.pem", directory / "broker.csr.pem"
    for cmd in (
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650", "-subj", "/CN=magnetar test CA",
         "-keyout", files["ca_key"], "-out", files["ca_cert"],
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
        ["req", "-new", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={names[0]}", "-keyout", raw_key, "-out", csr],
        ["x509", "-req", "-in", csr, "-CA", files["ca_cert"], "-CAkey", files["ca_key"], "-CAcreateserial",
         "-days", "3650", "-extfile", ext, "-out", files["cert"]],
        ["pkcs8", "-topk8", "-nocrypt", "-inform", "PEM", "-outform", "PEM", "-in", raw_key, "-out", files["key"]],
    ):
        _run([openssl, *map(str, cmd)], f"openssl {cmd[0]}", cwd=directory)
    return files


# --------------------------------------------------------------------------- broker process


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # Like the JVM's servers: a TIME_WAIT leftover is no obstacle, a listener is.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _pick_ports(wanted: Sequence[tuple[int | None, int]]) -> list[int]:
    """Resolve (requested, default) pairs: None -> default if free; 0 -> any free port."""
    held: list[socket.socket] = []
    out: list[int] = []
    try:
        for req, default in wanted:
            if req is None and _port_free(default) and default not in out:
                out.append(default)
            elif req:
                out.append(req)
            else:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.bind(("127.0.0.1", 0))
                held.append(s)
                out.append(s.getsockname()[1])
    finally:
        for s in held:
            s.close()
    return out


def _pid_alive(pid: int) -> bool:
    try:  # a zombie ("Z") has exited already
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        with contextlib.suppress(PermissionError):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return False
        return True


def _is_our_broker(pid: int, data_dir: Path) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return _pid_alive(pid)  # no /proc: trust the pid file
    return _MAIN_CLASS in cmdline and str(data_dir) in cmdline and _pid_alive(pid)


def _set_pdeathsig() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


_LIVE: set[Standalone] = set()


@atexit.register
def _stop_all() -> None:
    for broker in list(_LIVE):
        with contextlib.suppress(Exception):
            broker.stop()


class Standalone(Admin):
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
    """

    def __init__(self, *, version: str = DEFAULT_VERSION, cache_dir: str | os.PathLike[str] | None = None,
                 data_dir: str | os.PathLike[str] | None = None, port: int | None = None,
                 http_port: int | None = None, bookkeeper_port: int | None = None,
                 extra_conf: Mapping[str, str] | None = None, startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
                 heap: str = "1g", jvm_args: Sequence[str] = (), keep_data: bool = False,
                 wipe_data: bool = False, die_with_parent: bool = True, admin_token: str | None = None,
                 tls: bool = False, tls_port: int | None = None,
                 tls_names: Sequence[str] = DEFAULT_TLS_NAMES) -> None:
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

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        return f"<Standalone {self.version} {state} {self.service_url} {self.admin_url}>"

    def __enter__(self) -> Standalone:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

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
        port, http, *tls_ports = _pick_ports(wanted)
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
                                          preexec_fn=_set_pdeathsig if pdeath else None)
        self.pid = self._proc.pid
        _LIVE.add(self)
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
        _LIVE.discard(self)
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
        _LIVE.discard(self)
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


if __name__ == "__main__":  # the command line lives in magnetar/testing/__main__.py
    from magnetar.testing.__main__ import main

    sys.exit(main())

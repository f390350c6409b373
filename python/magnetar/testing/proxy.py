"""The real Pulsar proxy (``bin/pulsar proxy`` of the same distribution) in front of a
:class:`~magnetar.testing.Standalone`, on loopback.

Python::

    with Standalone(port=0) as broker, PulsarProxy(broker) as proxy:
        client = Client(proxy.service_url)   # lookups answer proxyThroughServiceUrl

The proxy forwards lookups to the broker and answers them with ``proxyThroughServiceUrl``, so a
client must keep its connections on the proxy and name the broker in ``Connect``
(``proxy_to_broker_url``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from ._distribution import ensure_distribution
from ._errors import StandaloneError
from ._process import pick_ports, set_pdeathsig
from .standalone import Standalone

__all__ = ["PulsarProxy"]


class PulsarProxy:
    """``bin/pulsar proxy`` forwarding to ``broker``, with its own free ports on 127.0.0.1."""

    def __init__(self, broker: Standalone, startup_timeout: float = 120.0) -> None:
        self.broker = broker
        self.startup_timeout = startup_timeout
        self.port = self.http_port = 0
        self.data_dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def service_url(self) -> str:
        """``pulsar://127.0.0.1:<port>`` of the proxy."""
        return f"pulsar://127.0.0.1:{self.port}"

    def __enter__(self) -> PulsarProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> PulsarProxy:
        """Launches the proxy and waits until its ports take connections."""
        home = ensure_distribution(self.broker.version, self.broker.cache_dir)
        self.data_dir = Path(tempfile.mkdtemp(prefix="magnetar-proxy-"))
        self.port, self.http_port = pick_ports([(0, 0), (0, 0)])
        conf = {
            "brokerServiceURL": self.broker.service_url,
            "brokerWebServiceURL": self.broker.admin_url,
            "bindAddress": "127.0.0.1",
            "advertisedAddress": "127.0.0.1",
            "servicePort": str(self.port),
            "webServicePort": str(self.http_port),
            "brokerProxyAllowedTargetPorts": str(self.broker.port),
            "brokerProxyAllowedHostNames": "127.0.0.1,localhost",
            "clusterName": "standalone",
            "numIOThreads": "2",
            "numAcceptorThreads": "1",
        }
        conf_file = self.data_dir / "proxy.conf"
        conf_file.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
        env = dict(os.environ, PULSAR_PROXY_CONF=str(conf_file), PULSAR_LOG_DIR=str(self.data_dir),
                   PULSAR_MEM="-Xms64m -Xmx256m -XX:MaxDirectMemorySize=256m",
                   PULSAR_GC="-XX:+UseSerialGC", PULSAR_LOG_APPENDER="RollingFile")
        main_thread = threading.main_thread() is threading.current_thread()
        with open(self.data_dir / "proxy.log", "ab") as out:
            self._proc = subprocess.Popen([str(home / "bin" / "pulsar"), "proxy"], cwd=self.data_dir,
                                          stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                          start_new_session=True, preexec_fn=set_pdeathsig if main_thread else None)
        deadline = time.monotonic() + self.startup_timeout
        while not self._listening():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                tail = (self.data_dir / "proxy.log").read_text(errors="replace").splitlines()[-30:]
                self.stop()
                raise StandaloneError("the Pulsar proxy did not start:\n" + "\n".join(tail))
            time.sleep(0.25)
        return self

    def _listening(self) -> bool:
        # Both ports: the web service (metrics, admin) may come up after the binary one.
        return all(self._takes_connections(port) for port in (self.port, self.http_port))

    @staticmethod
    def _takes_connections(port: int) -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
        return False

    def stop(self) -> None:
        """Stops the proxy (SIGTERM, then SIGKILL) and removes its files."""
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signal.SIGTERM)
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait(timeout=10)
            self._proc = None
        if self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None

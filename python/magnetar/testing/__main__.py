"""Command line for the test broker.

``python -m magnetar.testing`` and ``python -m magnetar.testing.standalone`` are the same::

    python -m magnetar.testing.standalone start     # background; prints URLs and startup_seconds
    python -m magnetar.testing.standalone status    # exit 0 if running, 1 if not
    python -m magnetar.testing.standalone stop      # SIGTERM, then SIGKILL after --timeout
    python -m magnetar.testing.standalone run       # foreground until Ctrl-C
    python -m magnetar.testing.standalone fetch     # only download/unpack Pulsar

    python -m magnetar.testing cluster start        # ZooKeeper, a bookie, 2 brokers; background
    python -m magnetar.testing cluster status       # exit 0 if running, 1 if not
    python -m magnetar.testing cluster stop         # ends the pids recorded by `start`

``start``/``run`` keep their state (``standalone.json``, ``broker.log``, ledgers) in
``--data-dir`` (default ``<cache_dir>/cli-data``; ``<cache_dir>/cli-cluster`` for ``cluster``),
which ``status`` and ``stop`` read.
Output is ``key=value`` lines, so shells can ``eval``/``grep`` it.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from magnetar.testing.cluster import Cluster
from magnetar.testing.standalone import (
    DEFAULT_STARTUP_TIMEOUT,
    DEFAULT_STOP_TIMEOUT,
    DEFAULT_VERSION,
    Standalone,
    StandaloneError,
    default_cache_dir,
    ensure_distribution,
)

__all__ = ["main"]



def _conf_pairs(pairs: list[str]) -> dict[str, str] | None:
    """``--conf KEY=VALUE`` arguments as a dict; None (after saying why) when one is not."""
    bad = [kv for kv in pairs if "=" not in kv]
    if bad:
        print(f"error: --conf wants KEY=VALUE, got {bad}", file=sys.stderr)
        return None
    return dict(kv.split("=", 1) for kv in pairs)


def _started(service: Standalone | Cluster) -> bool:
    """Starts ``service``; False (after saying why) when it cannot."""
    try:
        service.start()
    except StandaloneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return False
    return True

def _describe(broker: Standalone) -> str:
    lines = [f"service_url={broker.service_url}", f"admin_url={broker.admin_url}",
             f"pid={broker.pid}", f"data_dir={broker.data_dir}", f"log={broker.log_path}"]
    if broker.tls:
        lines += [f"service_url_tls={broker.service_url_tls}", f"ca_cert_path={broker.ca_cert_path}"]
    if broker.startup_seconds is not None:
        lines.append(f"startup_seconds={broker.startup_seconds}")
    try:
        status = Path(f"/proc/{broker.pid}/status").read_text()
        lines += [f"rss_mb={int(ln.split()[1]) // 1024}" for ln in status.splitlines() if ln.startswith("VmRSS:")]
    except OSError:
        pass
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m magnetar.testing.standalone",
                                     description="Run a real Apache Pulsar standalone broker for tests.")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="distribution cache (default $MAGNETAR_PULSAR_CACHE or ~/.cache/magnetar/pulsar)")
    parser.add_argument("--data-dir", type=Path, default=None, help="broker state (default <cache-dir>/cli-data)")
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name, help_ in (("start", "start in the background and return once ready"),
                        ("run", "run in the foreground until Ctrl-C or SIGTERM")):
        p = sub.add_parser(name, help=help_)
        p.add_argument("--version", default=DEFAULT_VERSION, dest="pulsar_version", help="Pulsar version")
        p.add_argument("--port", type=int, default=None, help="0 = any free port (default 6650 if free)")
        p.add_argument("--http-port", type=int, default=None, help="0 = any free port (default 8080 if free)")
        p.add_argument("--bookkeeper-port", type=int, default=None, help="default: a free port")
        p.add_argument("--timeout", type=float, default=DEFAULT_STARTUP_TIMEOUT, help="start-up timeout (s)")
        p.add_argument("--heap", default="1g", help="JVM heap and direct memory (default 1g)")
        p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra broker config")
        p.add_argument("--keep-data", action="store_true", help="keep topics/metadata from the last run")
        p.add_argument("--tls", action="store_true",
                       help="also serve pulsar+ssl:// with a CA made for the broker (see ca_cert_path)")
    p = sub.add_parser("stop", help="stop the broker started by `start`")
    p.add_argument("--timeout", type=float, default=DEFAULT_STOP_TIMEOUT, help="seconds before SIGKILL")
    sub.add_parser("status", help="print URLs and exit 0 if running, else exit 1")
    p = sub.add_parser("cluster", help="a multi-broker cluster: start, stop or status")
    p.add_argument("action", choices=("start", "stop", "status"))
    p.add_argument("--brokers", type=int, default=2, help="number of brokers (default 2)")
    p.add_argument("--load-manager", choices=("modular", "extensible"), default="modular")
    p.add_argument("--timeout", type=float, default=None, help="start-up timeout, or seconds before SIGKILL")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra broker config")
    p = sub.add_parser("fetch", help="only download and unpack the distribution")
    p.add_argument("--version", default=DEFAULT_VERSION, dest="pulsar_version", help="Pulsar version")
    p.add_argument("--method", choices=("auto", "tarball", "pom"), default="auto")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s: %(message)s")
    cache = args.cache_dir or default_cache_dir()
    data_dir = (args.data_dir or cache / "cli-data").absolute()
    if args.cmd == "fetch":
        print(ensure_distribution(args.pulsar_version, cache, method=args.method))
        return 0

    if args.cmd == "cluster":
        return _cluster(args, cache, (args.data_dir or cache / "cli-cluster").absolute())

    existing = Standalone.attach(data_dir)
    running = existing is not None and existing.is_running()
    if args.cmd == "status":
        print(f"running\n{_describe(existing)}" if existing and running else f"not running (data_dir={data_dir})")
        return 0 if running else 1
    if args.cmd == "stop":
        if existing is None or not running:
            if existing is not None:
                existing.stop()  # drops the stale state file
            print("not running")
            return 0
        t0, pid = time.monotonic(), existing.pid
        existing.stop(timeout=args.timeout)
        print(f"stopped pid {pid} in {time.monotonic() - t0:.1f} s")
        return 0
    if existing is not None and running:
        print(f"already running\n{_describe(existing)}")
        return 0

    extra_conf = _conf_pairs(args.conf)
    if extra_conf is None:
        return 2
    broker = Standalone(version=args.pulsar_version, cache_dir=cache, data_dir=data_dir, port=args.port,
                        http_port=args.http_port, bookkeeper_port=args.bookkeeper_port,
                        extra_conf=extra_conf, startup_timeout=args.timeout,
                        heap=args.heap, wipe_data=not args.keep_data, die_with_parent=args.cmd == "run",
                        tls=args.tls)
    if not _started(broker):
        return 1
    print(_describe(broker), flush=True)
    if args.cmd == "start":
        broker.detach()  # intentionally outlives this process; `stop` ends it
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while broker.is_running():
            time.sleep(0.5)
        print(f"the broker exited; see {broker.log_path}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        broker.stop()


def _describe_cluster(cluster: Cluster) -> str:
    lines = [f"service_url={cluster.service_url}", f"admin_url={cluster.admin_url}",
             f"load_manager={cluster.load_manager}", f"data_dir={cluster.data_dir}",
             f"zookeeper=127.0.0.1:{cluster.zk_port}", f"bookie=127.0.0.1:{cluster.bookie_port}"]
    lines += [f"broker{b.index}={b.service_url} {b.web_url} pid={b.pid} alive={str(b.alive).lower()}"
              for b in cluster.brokers]
    if cluster.startup_seconds is not None:
        lines.append(f"startup_seconds={cluster.startup_seconds}")
    lines.append(f"rss_mb={cluster.rss_bytes() >> 20}")
    return "\n".join(lines)


def _cluster(args: argparse.Namespace, cache: Path, data_dir: Path) -> int:
    existing = Cluster.attach(data_dir)
    running = existing is not None and existing.is_running()
    if args.action == "status":
        print(f"running\n{_describe_cluster(existing)}" if existing and running
              else f"not running (data_dir={data_dir})")
        return 0 if running else 1
    if args.action == "stop":
        if existing is None:
            print("not running")
            return 0
        t0 = time.monotonic()
        existing.stop(timeout=args.timeout or DEFAULT_STOP_TIMEOUT)  # only pids still running our conf
        print(f"stopped in {time.monotonic() - t0:.1f} s" if running else "not running")
        return 0
    if existing is not None and running:
        print(f"already running\n{_describe_cluster(existing)}")
        return 0
    if existing is not None:
        existing.stop()  # what is left of a half-dead cluster; its pids are checked first
    extra_conf = _conf_pairs(args.conf)
    if extra_conf is None:
        return 2
    cluster = Cluster(brokers=args.brokers, load_manager=args.load_manager, data_dir=data_dir, cache_dir=cache,
                      extra_conf=extra_conf,
                      startup_timeout=args.timeout or DEFAULT_STARTUP_TIMEOUT, die_with_parent=False)
    if not _started(cluster):
        return 1
    print(_describe_cluster(cluster), flush=True)
    cluster.detach()  # intentionally outlives this process; `cluster stop` ends it
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The official Python client's own test suite, run against magnetar.compat (or, with
``--official``, against the official ``pulsar-client`` for the baseline).

    scripts/dev conformance [--official] [FILE ...] [-k EXPR] [--report out.json]

The tests stay where they are (``../shared/conformance/pulsar-client-python/tests``; they are
not the project's). This script:

1. starts a fresh standalone broker the way their CI does
   (``build-support/start-test-service-inside-container.sh``): ``test-conf/standalone-ssl.conf``
   (TLS on 6651/8443; TLS, token and basic authentication; authorization on), a token secret key
   and the tests' token file, the basic-auth users of ``test-conf/.htpasswd``, and the cluster,
   tenant and namespace policies set over the admin REST API. Their tests dial the fixed ports
   6650, 6651, 8080 and 8443 on localhost, so those must be free, and each full run needs a
   fresh broker (some tests use fixed topic names);
2. lays out a run directory whose test files are symbolic links to theirs (``TESTS_DIR`` in the
   tests is ``dirname(abspath(__file__))``, which does not resolve links) plus the token file
   they read, ``.test-token.txt``;
3. without ``--official``, puts a shim directory first on ``PYTHONPATH`` whose ``pulsar`` and
   ``_pulsar`` packages are aliases of :mod:`magnetar.compat`;
4. runs each file in its own pytest process and prints one line per file and the totals.

Left out: ``oauth2_test.py`` (its issuer is a hosted service) and
``pulsar_test.py::PulsarTest::test_connect_timeout`` (it dials 192.0.2.1): no test may send
traffic off this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# magnetar as installed (scripts/dev conformance installs the wheel first): importing
# magnetar.testing imports the package, whose source tree has no extension module to load.
from magnetar.testing import Standalone, ensure_distribution  # noqa: E402
from magnetar.testing._distribution import DEFAULT_VERSION, default_cache_dir  # noqa: E402
from magnetar.testing._process import port_free  # noqa: E402

SUITE = Path(os.environ.get("MAGNETAR_CONFORMANCE_DIR",
                            ROOT.parent / "shared" / "conformance" / "pulsar-client-python"))
FILES = ["custom_logger_test.py", "debug_logger_test.py", "interrupted_test.py", "auto_cluster_failover_test.py",
         "pulsar_test.py", "schema_test.py", "table_view_test.py", "reader_test.py", "asyncio_test.py"]
LEFT_OUT = {"oauth2_test.py": "its OAuth2 issuer is a hosted service"}
DESELECT = {"pulsar_test.py": ["PulsarTest::test_connect_timeout"]}  # dials 192.0.2.1
FIXED_PORTS = (6650, 6651, 8080, 8443)
OFFICIAL_VENV = ROOT / ".venv-official"
# What their tests import besides the client (schema_test: fastavro, requests, protobuf).
SUITE_PACKAGES = ["pytest>=8", "pytest-timeout>=2.3", "fastavro>=1.9", "requests", "protobuf"]
OFFICIAL_PACKAGES = ["pulsar-client==3.13.0", *SUITE_PACKAGES]
TEST_TIMEOUT = 180  # seconds per test: a hang fails that test instead of the run
FILE_TIMEOUT = 1200  # seconds per file, for a test that hangs where the per-test timeout cannot reach
# Broker keys of standalone-ssl.conf that do not apply to this launcher's broker: the metadata
# store is local, and the launcher's own bind address (loopback) and memory sizing stay.
SKIPPED_CONF = {"zookeeperServers", "configurationStoreServers", "globalZookeeperServers", "statusFilePath",
                "bindAddress", "managedLedgerCacheSizeMB"}

# ``pulsar`` and ``_pulsar`` as aliases of magnetar.compat and its modules, so that classes are
# the same objects whichever name imported them.
SHIM = {
    "pulsar/__init__.py": """\
import sys
import magnetar.compat as _compat
from magnetar.compat import _aliases
_aliases.install("pulsar", "_pulsar")
sys.modules[__name__] = _compat
""",
    "_pulsar/__init__.py": """\
import sys
import pulsar  # noqa: F401  (installs the aliases)
""",
}


def _conf_pairs(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def _tokens(home: Path, work: Path) -> tuple[Path, str, str]:
    """A secret key and two tokens signed with it (made by Pulsar's own token tool, as in their
    CI): the tests' ``token-principal`` and the admin's ``superUser``."""
    java = [str(Path(os.environ["JAVA_HOME"], "bin", "java")) if "JAVA_HOME" in os.environ else "java",
            "-cp", f"{home / 'lib'}/*", "org.apache.pulsar.utils.auth.tokens.TokensCliUtils"]
    key = work / "secret.key"
    subprocess.run([*java, "create-secret-key", "--output", str(key)], check=True, capture_output=True)

    def token(subject: str) -> str:
        out = subprocess.run([*java, "create", "--subject", subject, "--secret-key", f"file://{key}"],
                             check=True, capture_output=True, text=True).stdout
        return out.strip().splitlines()[-1]

    return key, token("token-principal"), token("superUser")


def start_broker(work: Path) -> tuple[Standalone, str]:
    busy = [p for p in FIXED_PORTS if not port_free(p)]
    if busy:
        sys.exit(f"conformance: ports {busy} are in use; their tests need 6650, 6651, 8080 and 8443 free")
    home = ensure_distribution(DEFAULT_VERSION, default_cache_dir())
    key, test_token, admin_token = _tokens(home, work)
    conf_dir = SUITE / "tests" / "test-conf"
    conf = {k: v for k, v in _conf_pairs(conf_dir / "standalone-ssl.conf").items() if k not in SKIPPED_CONF}
    # Their paths are relative to the Pulsar distribution's root, where CI puts test-conf/.
    for k in ("tlsCertificateFilePath", "tlsKeyFilePath", "tlsTrustCertsFilePath"):
        conf[k] = str(conf_dir / Path(conf[k]).name)
    conf["tokenSecretKey"] = f"file://{key}"
    # The standalone creates its cluster, tenant and namespace through its own admin client,
    # which must authenticate now that authorization is on (their CI's script then sets them
    # again over REST, below).
    conf["brokerClientAuthenticationPlugin"] = "org.apache.pulsar.client.impl.auth.AuthenticationToken"
    conf["brokerClientAuthenticationParameters"] = f"token:{admin_token}"
    broker = Standalone(data_dir=work / "broker", port=6650, http_port=8080, extra_conf=conf,
                        jvm_args=[f"-Dpulsar.auth.basic.conf={conf_dir / '.htpasswd'}"], admin_token=admin_token)
    t0 = time.monotonic()
    broker.start()
    anonymous = {"auth_policies": {"namespace_auth": {"anonymous": ["produce", "consume"]}},
                 "replication_clusters": ["standalone"]}
    steps: list[tuple[str, dict[str, Any]]] = [
        ("clusters/standalone", {"serviceUrl": "http://localhost:8080/", "serviceUrlTls": "https://localhost:8443/",
                                 "brokerServiceUrl": "pulsar://localhost:6650/",
                                 "brokerServiceUrlTls": "pulsar+ssl://localhost:6651/"}),
        ("tenants/public", {"adminRoles": ["anonymous"], "allowedClusters": ["standalone"]}),
        ("namespaces/public/default", anonymous),
        ("namespaces/public/default-2", anonymous),
        ("tenants/private", {"adminRoles": [], "allowedClusters": ["standalone"]}),
        ("namespaces/private/auth", {"auth_policies": {"namespace_auth": {"token-principal": ["produce", "consume"]}},
                                     "replication_clusters": ["standalone"]}),
    ]
    try:
        for path, body in steps:
            _put(broker, path, body)
    except Exception:
        broker.stop()
        raise
    print(f"broker ready in {time.monotonic() - t0:.0f} s (data in {broker.data_dir})", flush=True)
    return broker, test_token


def _put(broker: Standalone, path: str, body: dict[str, Any]) -> None:
    """Their script's `PUT /admin/v2/<path>`; what the standalone created itself already (409) is
    updated to the same policies instead."""
    try:
        broker.request("PUT", f"/admin/v2/{path}", body)
        return
    except Exception as exc:  # AdminError
        if getattr(exc, "status", None) != 409:
            raise
    if path.startswith(("clusters/", "tenants/")):
        broker.request("POST", f"/admin/v2/{path}", body)
        return
    for role, actions in body["auth_policies"]["namespace_auth"].items():
        broker.request("POST", f"/admin/v2/{path}/permissions/{role}", actions)
    broker.request("POST", f"/admin/v2/{path}/replication", body["replication_clusters"])


def run_dir(work: Path, token: str) -> Path:
    d = work / "tests"
    d.mkdir()
    for entry in (SUITE / "tests").iterdir():
        (d / entry.name).symlink_to(entry)
    (d / ".test-token.txt").write_text(token + "\n")
    return d


def shim_dir(work: Path) -> Path:
    d = work / "shim"
    for rel, text in SHIM.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text(text)
    return d


def official_python() -> Path:
    py = OFFICIAL_VENV / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(OFFICIAL_VENV)], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *OFFICIAL_PACKAGES],
                   check=True)
    return py


def _default_sigint() -> None:
    # A shell starting this runner in the background leaves SIGINT ignored, and Python then
    # installs no KeyboardInterrupt handler: interrupted_test.py's Ctrl-C would never arrive.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_file(py: Path, tests: Path, name: str, env: dict[str, str], out: Path, k: str | None) -> dict[str, Any]:
    xml = out / f"{name}.xml"
    # pytest-timeout's signal method: its thread method would add a thread, which the logger
    # tests count. A test stuck inside native code is ended by the file's timeout instead.
    cmd = [str(py), "-m", "pytest", name, "-q", "-p", "no:cacheprovider", f"--junitxml={xml}",
           f"--timeout={TEST_TIMEOUT}", "--timeout-method=signal", "-o", "junit_family=xunit1"]
    cmd += [f"--deselect={name}::{t}" for t in DESELECT.get(name, [])]
    if k:
        cmd += ["-k", k]
    t0 = time.monotonic()
    with open(out / f"{name}.log", "wb") as log:
        try:
            proc = subprocess.run(cmd, cwd=tests, env=env, stdout=log, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, check=False, timeout=FILE_TIMEOUT,
                                  preexec_fn=_default_sigint)
            returncode: int | str = proc.returncode
        except subprocess.TimeoutExpired:
            returncode = f"nothing (killed after {FILE_TIMEOUT} s)"
    passed: list[str] = []
    failed: dict[str, str] = {}
    skipped: dict[str, str] = {}
    result: dict[str, Any] = {"file": name, "passed": passed, "failed": failed, "skipped": skipped,
                              "seconds": round(time.monotonic() - t0, 1)}
    if not xml.exists():
        failed[name] = f"pytest exited with {returncode} and no report (see {out / (name + '.log')})"
        return result
    for case in ET.parse(xml).getroot().iter("testcase"):
        test = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        skip = case.find("skipped")
        if bad is not None:
            failed[test] = (bad.get("message") or "").splitlines()[0][:300] if bad.get("message") else ""
        elif skip is not None:
            skipped[test] = skip.get("message", "")
        else:
            passed.append(test)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help=f"test files (default: {' '.join(FILES)})")
    ap.add_argument("--official", action="store_true", help="run the official pulsar-client 3.13.0 (.venv-official)")
    ap.add_argument("-k", help="pytest -k expression")
    ap.add_argument("--report", type=Path, help="write every test's outcome as JSON here")
    ap.add_argument("-v", "--verbose", action="store_true", help="list each failing test")
    args = ap.parse_args()
    if not (SUITE / "tests").is_dir():
        sys.exit(f"conformance: no suite at {SUITE} (set MAGNETAR_CONFORMANCE_DIR)")
    files = args.files or FILES
    for f in files:
        if f in LEFT_OUT:
            sys.exit(f"conformance: {f} is left out: {LEFT_OUT[f]}")
    if args.official:
        py = official_python()
    else:
        py = Path(sys.executable)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *SUITE_PACKAGES],
                       check=True)
    work = Path(tempfile.mkdtemp(prefix="magnetar-conformance-"))
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if not args.official:
        env["PYTHONPATH"] = str(shim_dir(work))
    out = work / "results"
    out.mkdir()
    client = "official pulsar-client" if args.official else "magnetar.compat"
    print(f"conformance: {client}, suite {SUITE}, logs in {out}", flush=True)
    broker, token = start_broker(work)
    results = []
    try:
        tests = run_dir(work, token)
        for name in files:
            r = run_file(py, tests, name, env, out, args.k)
            results.append(r)
            print(f"{name}: {len(r['passed'])} passed, {len(r['failed'])} failed, {len(r['skipped'])} skipped"
                  f" ({r['seconds']} s)", flush=True)
            if args.verbose:
                for t, why in r["failed"].items():
                    print(f"    FAILED {t}: {why}", flush=True)
    finally:
        broker.stop()
    passed = sum(len(r["passed"]) for r in results)
    failed = sum(len(r["failed"]) for r in results)
    skipped = sum(len(r["skipped"]) for r in results)
    if args.report:
        args.report.write_text(json.dumps({"client": client, "results": results}, indent=1) + "\n")
    print(f"conformance of {client}:")
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    shutil.rmtree(work / "broker", ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Fetching an Apache Pulsar distribution from Maven Central into a cache directory, once."""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

from ._errors import StandaloneError
from ._process import find_tool, run_tool

__all__ = ["DEFAULT_VERSION", "default_cache_dir", "ensure_distribution"]

DEFAULT_VERSION = "4.0.8"
"""Newest 4.0.x (LTS) on Maven Central when this was written (4.0.9 did not exist yet)."""
_GROUP, _ARTIFACT = "org.apache.pulsar", "pulsar-server-distribution"
_OK_MARKER = ".magnetar-complete"

log = logging.getLogger("magnetar.testing")

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


def default_cache_dir() -> Path:
    """``$MAGNETAR_PULSAR_CACHE`` or ``~/.cache/magnetar/pulsar``."""
    env = os.environ.get("MAGNETAR_PULSAR_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "magnetar" / "pulsar"


def _mvn() -> str:
    return find_tool("mvn", "to fetch Pulsar (it is Apache Maven's command)")


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
        run_tool([_mvn(), "-q", "-B", "dependency:copy", f"-Dartifact={coords}", f"-DoutputDirectory={out}",
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
    run_tool([_mvn(), "-q", "-B", "-gs", str(tmp / "pom/settings.xml"), "dependency:copy-dependencies",
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
                run_tool(["tar", "xzf", str(tarball), "-C", str(tmp)], "tar")  # tar keeps bin/ exec bits
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

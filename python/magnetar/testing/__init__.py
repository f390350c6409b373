"""Test helpers for magnetar: a real Apache Pulsar standalone broker, or a multi-broker cluster.

Only the standard library is used, so this works before ``magnetar._core`` is built::

    from magnetar.testing import Standalone

    with Standalone(port=0) as broker:
        broker.create_partitioned_topic("t", 3)
        ...  # connect to broker.service_url

``Cluster`` (ZooKeeper, a bookie and N brokers, each its own JVM) works alike::

    with Cluster(brokers=2) as cluster:
        client = Client(cluster.service_url)
        cluster.unload("t", to=1 - cluster.owner("t"))

``Standalone`` and ``Cluster`` are loaded lazily, so ``python -m magnetar.testing.standalone``
does not import that module twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._admin import Admin
from ._auth import hs256_token, tool_output
from ._distribution import DEFAULT_VERSION, default_cache_dir, ensure_distribution
from ._errors import AdminError, ClusterError, StandaloneError
from ._tls import make_tls_files

if TYPE_CHECKING:
    from .cluster import Cluster
    from .standalone import Standalone

__all__ = [
    "DEFAULT_VERSION",
    "Admin",
    "AdminError",
    "Cluster",
    "ClusterError",
    "Standalone",
    "StandaloneError",
    "default_cache_dir",
    "ensure_distribution",
    "hs256_token",
    "make_tls_files",
    "tool_output",
]


def __getattr__(name: str) -> Any:
    if name == "Standalone":
        from .standalone import Standalone

        return Standalone
    if name == "Cluster":
        from .cluster import Cluster

        return Cluster
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])

"""Test helpers for magnetar: a real Apache Pulsar standalone broker.

Only the standard library is used, so this works before ``magnetar._core`` is built::

    from magnetar.testing import Standalone

    with Standalone(port=0) as broker:
        broker.create_partitioned_topic("t", 3)
        ...  # connect to broker.service_url

The names are loaded lazily, so ``python -m magnetar.testing.standalone`` does not import
the module twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .standalone import (
        DEFAULT_VERSION,
        Admin,
        AdminError,
        Standalone,
        StandaloneError,
        default_cache_dir,
        ensure_distribution,
        make_tls_files,
    )

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


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import standalone

        return getattr(standalone, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])

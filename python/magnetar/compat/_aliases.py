"""Makes ``import pulsar`` and ``import _pulsar`` (with every submodule) name magnetar.compat's
modules, so that classes are the same objects whichever name imported them. Used by the
conformance runner's shim (scripts/conformance.py); call ``install()`` to do the same."""

from __future__ import annotations

import importlib
import sys

__all__ = ["install"]

_SUBMODULES = ("exceptions", "schema", "schema.definition", "schema.schema", "asyncio")


def install(pulsar: str = "pulsar", private: str = "_pulsar") -> None:
    """Registers the aliases in ``sys.modules``."""
    sys.modules[pulsar] = importlib.import_module("magnetar.compat")
    for sub in _SUBMODULES:
        sys.modules[f"{pulsar}.{sub}"] = importlib.import_module(f"magnetar.compat.{sub}")
    sys.modules[private] = importlib.import_module("magnetar.compat._pulsar")

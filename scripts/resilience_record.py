"""The record the resilience drivers (``chaos.py``, ``stress.py``) append their tables to."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "docs" / "resilience.md"

__all__ = ["RECORD", "ROOT", "append_record", "commit_label"]


def commit_label() -> str:
    """The short HEAD commit, with ``+wt`` when the engine's sources differ from it."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=False).stdout.strip() or "?"
    # The extension is built from the work tree: say so when the engine's sources differ from HEAD.
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "src"], cwd=ROOT, capture_output=True,
                           text=True, check=False).stdout.strip()
    return f"{head}{'+wt' if dirty else ''}"


def append_record(heading: str, table: str) -> None:
    """Appends a ``### heading`` and its table to ``docs/resilience.md``."""
    with RECORD.open("a") as f:
        f.write(f"\n### {heading}\n\n{table}\n")
    print(f"appended to {RECORD.relative_to(ROOT)}")

"""The side-by-side benchmark's quick mode runs end to end (speed itself is reported by the
benchmark, never asserted here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_quick_benchmark_runs_and_counts_match(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    r = subprocess.run(
        [sys.executable, "-m", "benches.compare", "--quick", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=1200,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    results = json.loads((out / "results.json").read_text())
    assert results, "no results written"
    assert (out / "results.md").exists()

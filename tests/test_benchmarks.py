"""The side-by-side benchmark's quick mode runs end to end (speed itself is reported by the
benchmark, never asserted here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def test_quick_benchmark_runs_and_counts_match(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    r = subprocess.run(
        [sys.executable, "-m", "benches.compare", "--quick", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=1200,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    runs = json.loads((out / "results.json").read_text())["runs"]
    assert {r["client"] for r in runs} >= {"magnetar"}, runs
    # every run was counted against the broker (or the consumer's tally) and the counts agreed
    wrong = [(r["scenario"], r["label"], r.get("error") or ("skipped" if r.get("skipped") else "count mismatch"))
             for r in runs if r.get("error") or r.get("skipped") or r.get("count_ok") is not True]
    assert not wrong, wrong
    assert all(r["messages"] > 0 for r in runs if r["scenario"].startswith(("produce", "consume"))), runs
    assert (out / "results.md").exists()


def test_schema_benchmark_runs(tmp_path: Path, service_url: str) -> None:
    """``python -m benches.schema_bench`` at toy scale on the suite's broker: every (kind,
    client, role) run completes and its receive run reads back what its send run wrote."""
    r = subprocess.run(
        [sys.executable, "-m", "benches.schema_bench", "--n", "300", "--rounds", "1", "--service-url", service_url,
         "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    # Its first line says where its figures come from: the command, the commit, the load.
    first = r.stdout.splitlines()[0]
    assert first.startswith("# python -m benches.schema_bench --n 300 --rounds 1 ") and " at " in first, first
    assert first.split(" at ")[1].split(",")[0].removesuffix("+dirty") not in ("", "unknown"), first
    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert sorted((x["kind"], x["client"], x["role"]) for x in runs) == sorted(
        (k, c, role) for k in ("json", "avro") for c in ("magnetar", "official") for role in ("send", "receive"))


def test_scale_messages_smoke_runs_every_case(tmp_path: Path, broker: Any) -> None:
    """``python -m benches.scale_messages --smoke`` on the suite's broker: every (case, client)
    runs, the sender's every message is acknowledged and the receiver takes every one of them,
    and the table has a row for each (the CPU figures themselves are only printed)."""
    r = subprocess.run(
        [sys.executable, "-m", "benches.scale_messages", "--smoke", "--service-url", broker.service_url,
         "--admin-url", broker.admin_url, "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert r.stdout.startswith("# python -m benches.scale_messages --smoke"), r.stdout[:300]
    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    cases = ["1 topic", "1 topic, 3,000", "3 topics", "10 topics", "3 partitions"]
    assert sorted((x["case"], x["client"]) for x in runs) == sorted((c, k) for c in cases for k in ("magnetar", "official"))
    assert all(x["send"]["done"] == x["messages"] == x["receive"]["done"] for x in runs), runs
    for c in cases:
        for k in ("magnetar", "official"):
            assert f"| {c} | {k} | " in r.stdout, r.stdout

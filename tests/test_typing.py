"""The type stubs match the extension (stubtest) and mypy accepts the package and the tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_stubs_match_the_extension() -> None:
    r = run("mypy.stubtest", "magnetar._core", "--allowlist", ".mypy-stubtest-allowlist")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("target", ["python/magnetar", "tests", "examples"])
def test_mypy_passes(target: str) -> None:
    r = run("mypy", "--no-error-summary", "--cache-dir", "/tmp/magnetar-mypy-cache", target)
    assert r.returncode == 0, r.stdout + r.stderr

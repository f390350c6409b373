"""The wheel users get works on its own: installed into a fresh virtualenv, run from a directory
that holds no source, it imports, round-trips a message through the real broker, and its
`magnetar` console script answers `--version`.

The wheel is the one `scripts/dev setup` built (and exported as MAGNETAR_WHEEL), so the test
command builds it once."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import pytest

import magnetar

ROOT = Path(__file__).resolve().parents[1]

ROUND_TRIP = textwrap.dedent("""
    import sys, uuid
    import magnetar

    url = sys.argv[1]
    topic = f"persistent://public/default/dist-{uuid.uuid4().hex[:12]}"
    with magnetar.Client(url, operation_timeout=20.0) as client:
        consumer = client.subscribe(topic, "dist", initial_position="earliest")
        producer = client.create_producer(topic)
        producer.send(b"from the wheel")
        msg = consumer.receive(timeout=20.0)
        consumer.ack(msg)
        assert msg.data == b"from the wheel", msg.data
    print(magnetar.__file__)
    print(magnetar._core.__file__)
""")


def built_wheel() -> Path:
    named = os.environ.get("MAGNETAR_WHEEL")
    wheels = [Path(named)] if named else sorted((ROOT / "target" / "wheel").glob("magnetar-*.whl"))
    if not wheels or not wheels[0].is_file():
        pytest.fail("no built wheel: run `bash scripts/dev setup` (it builds target/wheel/magnetar-*.whl)")
    return wheels[0]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with only the wheel in it; returns its bin directory."""
    env_dir = tmp_path_factory.mktemp("wheel-venv")
    venv.create(env_dir, with_pip=True, symlinks=True)
    bin_dir = env_dir / "bin"
    subprocess.run([bin_dir / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    "--no-index", "--no-deps", built_wheel()], check=True, timeout=300)
    return bin_dir


def run_clean(argv: list[str | Path], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Runs outside the source tree and with no inherited import path, so only the wheel's
    files can be imported."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_wheel_is_abi3_manylinux() -> None:
    name = built_wheel().name
    assert "-cp311-abi3-" in name, name
    if sys.platform == "linux":
        assert "manylinux_2_17_x86_64" in name or "manylinux2014_x86_64" in name, name


def test_installed_wheel_round_trips(installed: Path, service_url: str, tmp_path: Path) -> None:
    r = run_clean([installed / "python", "-c", ROUND_TRIP, service_url], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    package_file, core_file = r.stdout.split()
    env_dir = installed.parent
    assert Path(package_file).is_relative_to(env_dir), package_file
    assert Path(core_file).is_relative_to(env_dir), core_file


def test_console_script_reports_version(installed: Path, tmp_path: Path) -> None:
    r = run_clean([installed / "magnetar", "--version"], tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == f"magnetar {magnetar.__version__}", r.stdout

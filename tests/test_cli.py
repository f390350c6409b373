"""The ``magnetar`` command line, run as a subprocess against the local broker."""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import magnetar
from magnetar._options import ConnectionOptions, ConsumerOptions, ProducerOptions, ReaderOptions, declared
from magnetar.cli import build_parser
from magnetar.cli.consume import CONSUMER_SKIPPED


def cli(*args: str, input: bytes = b"", env: dict[str, str] | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    # Options the developer's shell may set must not change what the tests see.
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MAGNETAR_")}
    return subprocess.run([sys.executable, "-m", "magnetar.cli", *args], input=input, capture_output=True,
                          env={**clean, **(env or {})}, timeout=timeout)


def ok(result: subprocess.CompletedProcess[bytes]) -> bytes:
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout


def one_line_error(result: subprocess.CompletedProcess[bytes]) -> str:
    """The single stderr line of a failed run (no traceback)."""
    err = result.stderr.decode()
    assert result.returncode != 0, result
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    return err.strip()


def consume_jsonl(url: str, topic: str, n: int, *extra: str) -> list[dict[str, Any]]:
    out = ok(cli("consume", topic, "-s", "check", "--from", "earliest", "-n", str(n), "--timeout", "20",
                 "--output", "jsonl", "--url", url, *extra))
    return [json.loads(line) for line in out.splitlines()]


def test_version() -> None:
    assert ok(cli("--version")).decode().strip() == f"magnetar {magnetar.__version__}"


def test_every_text_option_is_a_flag() -> None:
    flags = {s for action in _all_actions() for s in action.option_strings}
    for declaration in (ConnectionOptions, ProducerOptions, ConsumerOptions, ReaderOptions):
        for d in declared(declaration).values():
            if d.textual and d.name not in CONSUMER_SKIPPED:
                assert "--" + d.name.replace("_", "-") in flags, d.name


def _all_actions() -> list[Any]:
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [action for sub in commands.choices.values() for action in sub._actions]


def test_stdin_lines_round_trip_raw(service_url: str, topic: str) -> None:
    ids = ok(cli("produce", topic, "-v", "--url", service_url, input=b"first\nsecond\n\nlast")).split()
    assert len(ids) == 4
    assert all(magnetar.MessageId.deserialize(bytes.fromhex(i.decode())) for i in ids)
    out = ok(cli("consume", topic, "-s", "s", "--from", "earliest", "-n", "4", "--url", service_url))
    assert out == b"first\nsecond\n\nlast\n"


def test_binary_payloads_through_file_and_base64(service_url: str, topic: str, tmp_path: Path) -> None:
    blob = bytes(range(256))
    (tmp_path / "blob").write_bytes(blob)
    ok(cli("produce", topic, "--file", str(tmp_path / "blob"), "--url", service_url))
    line = json.dumps({"value": base64.b64encode(b"\xff\xfe\x00").decode(), "encoding": "base64"})
    ok(cli("produce", topic, "--format", "jsonl", "--url", service_url, input=line.encode() + b"\n"))

    got = consume_jsonl(service_url, topic, 2)
    assert [(m["value"], m["encoding"]) for m in got] == [(base64.b64encode(blob).decode(), "base64"),
                                                         (base64.b64encode(b"\xff\xfe\x00").decode(), "base64")]
    raw = ok(cli("read", topic, "--start", "earliest", "-n", "2", "--url", service_url))
    assert raw == blob + b"\n" + b"\xff\xfe\x00\n"


def test_jsonl_fields(service_url: str, topic: str) -> None:
    line = {"value": "héllo", "key": "k1", "properties": {"a": "b"}, "event_time": 1_700_000_000_000}
    ids = ok(cli("produce", topic, "--format", "jsonl", "-p", "from=cli", "-v", "--url", service_url,
                 input=json.dumps(line).encode() + b"\n")).split()
    [got] = consume_jsonl(service_url, topic, 1)
    assert set(got) == {"id", "key", "properties", "publish_time", "event_time", "redelivery_count", "value"}
    assert got["id"] == ids[0].decode()
    assert (got["value"], got["key"], got["properties"]) == ("héllo", "k1", {"a": "b", "from": "cli"})
    assert got["event_time"] == 1_700_000_000_000
    assert got["redelivery_count"] == 0 and got["publish_time"] > 1_600_000_000_000
    # the reader starts at an id the consumer printed, and jsonl output can be sent again
    again = ok(cli("read", topic, "--start", got["id"], "--start-inclusive", "-n", "1", "-o", "jsonl",
                   "--url", service_url))
    assert json.loads(again)["id"] == got["id"]


def test_generated_options_and_keys(service_url: str, topic: str) -> None:
    ok(cli("produce", topic, "--batch-max-messages", "10", "--compression", "lz4", "-k", "same", "-n", "25",
           "-m", "x", "--url", service_url))
    got = consume_jsonl(service_url, topic, 25, "--subscription-type", "shared", "--type", "key-shared")
    assert len(got) == 25 and {m["key"] for m in got} == {"same"}


def test_environment_variables(service_url: str, topic: str) -> None:
    # the local broker has authentication off, so any token is let in
    env = {"MAGNETAR_URL": service_url, "MAGNETAR_BATCHING": "false", "MAGNETAR_INITIAL_POSITION": "earliest",
           "MAGNETAR_TOKEN": "not-checked"}
    ok(cli("produce", topic, input=b"1\n2\n", env=env))
    assert ok(cli("consume", topic, "-s", "env", "-n", "2", env=env)) == b"1\n2\n"
    error = one_line_error(cli("produce", topic, "-m", "x", env={**env, "MAGNETAR_MAX_PENDING": "lots"}))
    assert "MAGNETAR_MAX_PENDING" in error


@pytest.mark.parametrize("args", [
    ["produce", "T", "--batch-max-messages", "abc"],   # refused by the flag's type
    ["produce", "T", "--compression", "gzip"],         # not one of the named values
    ["produce", "T", "-m", "x", "--send-timeout", "-1"],  # refused by the engine
    ["consume", "T", "--from", "earliest"],            # no subscription
    ["read", "T", "--start", "yesterday"],
    ["produce", "T", "--partitions", "2"],             # no prefix of --partitions-update-interval
])
def test_bad_option_is_one_line(service_url: str, args: list[str]) -> None:
    one_line_error(cli(*args, "--url", service_url))


def test_connection_failure_is_one_line() -> None:
    result = cli("produce", "t", "-m", "x", "--url", "pulsar://127.0.0.1:1", "--operation-timeout", "2")
    assert "magnetar: error:" in one_line_error(result)


def test_failed_send_exits_non_zero(service_url: str, topic: str, tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * (6 * 1024 * 1024))  # over the broker's 5 MiB limit
    result = cli("produce", topic, "--file", str(tmp_path / "big"), "--no-batching", "--url", service_url)
    assert "magnetar: error:" in one_line_error(result)


def test_topic(service_url: str, topic: str) -> None:
    ids = ok(cli("produce", topic, "-v", "--url", service_url, input=b"a\nb\n")).split()
    info = json.loads(ok(cli("topic", topic, "--json", "--url", service_url)))
    assert info["partitions"] == 0
    assert info["last_message_id"] is not None
    last = magnetar.MessageId.deserialize(bytes.fromhex(info["last_message_id"]))
    sent = magnetar.MessageId.deserialize(bytes.fromhex(ids[-1].decode()))
    assert (last.ledger_id, last.entry_id) == (sent.ledger_id, sent.entry_id)
    text = ok(cli("topic", topic, "--url", service_url)).decode()
    assert topic in text and "not partitioned" in text


def test_closed_stdout_is_quiet(service_url: str, topic: str) -> None:
    line = "x" * 1000  # 200 of them overflow a pipe's buffer, so a write meets the closed end
    ok(cli("produce", topic, "-m", line, "-n", "200", "--url", service_url))
    proc = subprocess.Popen([sys.executable, "-m", "magnetar.cli", "consume", topic, "-s", "s", "--from",
                             "earliest", "-n", "200", "--url", service_url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline() == line.encode() + b"\n"
    proc.stdout.close()
    assert proc.wait(timeout=60) != 0
    assert proc.stderr.read() == b""


def test_perf_json(service_url: str, topic: str) -> None:
    produced = json.loads(ok(cli("perf", "produce", topic, "-n", "300", "--size", "100", "--json",
                                 "--url", service_url)))
    assert (produced["messages"], produced["bytes"], produced["failed"]) == (300, 30_000, 0)
    assert produced["latency_ms"]["p50"] <= produced["latency_ms"]["p99"]
    consumed = json.loads(ok(cli("perf", "consume", topic, "--from", "earliest", "-n", "300", "--json",
                                 "--url", service_url)))
    assert consumed["messages"] == 300 and consumed["msg_per_s"] > 0


def test_broker_delegates_to_the_testing_command_line(tmp_path: Path) -> None:
    result = cli("broker", "status", "--data-dir", str(tmp_path))
    assert result.returncode == 1 and b"not running" in result.stdout

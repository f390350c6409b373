"""``magnetar admin``: the admin calls on the command line, against the local broker."""

from __future__ import annotations

import argparse
import json
import uuid

from magnetar.admin import Topics
from magnetar.cli import build_parser
from magnetar.testing import Standalone

from test_cli import cli, ok, one_line_error


def test_topics_created_listed_described_and_deleted(broker: Standalone) -> None:
    ns = f"public/cli-{uuid.uuid4().hex[:8]}"
    url = ("--url", broker.admin_url)
    ok(cli("admin", "namespaces", "create", ns, *url))
    topic = f"persistent://{ns}/orders"
    assert ok(cli("admin", "topics", "create", topic, "--partitions", "2", *url)) == b""
    assert json.loads(ok(cli("admin", "topics", "list-partitioned", ns, *url))) == [topic]
    assert json.loads(ok(cli("admin", "topics", "partitions", topic, *url))) == 2
    stats = json.loads(ok(cli("admin", "topics", "stats", topic, *url)))
    assert stats["metadata"]["partitions"] == 2
    table = ok(cli("admin", "topics", "list", ns, "--table", *url)).decode().splitlines()
    assert table == [f"{topic}-partition-0", f"{topic}-partition-1"]
    ok(cli("admin", "topics", "create-subscription", topic, "audit", "--start", "earliest", *url))
    assert ok(cli("admin", "namespaces", "retention", ns, "--table", *url)) == b""  # none set: nothing printed
    ok(cli("admin", "namespaces", "set-retention", ns, "--size-mb", "10", "--time-minutes", "60", *url))
    rows = ok(cli("admin", "namespaces", "retention", ns, "--table", *url)).decode().splitlines()
    assert [r.split() for r in rows] == [["size_mb", "10"], ["time_minutes", "60"]]
    ok(cli("admin", "topics", "delete", topic, "--force", *url))
    error = one_line_error(cli("admin", "topics", "stats", topic, *url))
    assert error.startswith("magnetar: error: GET /admin/v2/persistent/") and "404" in error, error
    ok(cli("admin", "namespaces", "delete", ns, *url))


def test_the_admin_url_comes_from_the_environment_and_must_be_http(broker: Standalone) -> None:
    assert "standalone" in json.loads(ok(cli("admin", "clusters", "list", env={"MAGNETAR_ADMIN_URL": broker.admin_url})))
    error = one_line_error(cli("admin", "clusters", "list", "--url", broker.service_url))
    assert "web service URL" in error, error


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_topics_call_has_a_subcommand() -> None:
    topics = _subcommands(_subcommands(build_parser())["admin"])["topics"]
    actions = set(_subcommands(topics))
    assert actions == {n.replace("_", "-") for n in dir(Topics) if not n.startswith("_")}

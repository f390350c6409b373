"""``magnetar topic TOPIC``: what kcat ``-L`` shows of a topic: its partitions and the id of the
last message of each."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import magnetar

from ._common import add_client_arguments, open_client

__all__ = ["register", "run", "describe"]


def register(commands: Any) -> None:
    p = commands.add_parser("topic", usage="%(prog)s [--json] [options] TOPIC",
                            help="show a topic's partitions and last message ids",
                            description="Show a topic's partitions and the id of the last message of each. "
                                        "A topic that does not exist is created if the broker creates "
                                        "topics on use (its default).")
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--json", action="store_true", help="one JSON object instead of text")
    add_client_arguments(p)
    p.set_defaults(run=run)


def _id_text(mid: magnetar.MessageId | None) -> str | None:
    return None if mid is None else mid.serialize().hex()


def _last_id(client: magnetar.Client, topic: str) -> magnetar.MessageId | None:
    """The last message's id; None for a topic that has none."""
    with client.create_reader(topic, magnetar.MessageId.latest) as reader:
        mid = reader.get_last_message_id()
    return None if mid.entry_id < 0 else mid


def describe(client: magnetar.Client, topic: str) -> dict[str, Any]:
    count = client.get_partition_count(topic)
    names = [f"{topic}-partition-{i}" for i in range(count)] if count > 0 else [topic]
    parts = [{"partition": i if count > 0 else -1, "name": name, "last_message_id": _last_id(client, name)}
             for i, name in enumerate(names)]
    known = [p["last_message_id"] for p in parts if p["last_message_id"] is not None]
    return {"topic": topic, "partitions": count, "last_message_id": max(known) if known else None,
            "partition_details": parts}


def run(args: argparse.Namespace) -> int:
    with open_client(args) as client:
        info = describe(client, args.topic)
    if args.json:
        info["last_message_id"] = _id_text(info["last_message_id"])
        for part in info["partition_details"]:
            part["last_message_id"] = _id_text(part["last_message_id"])
        print(json.dumps(info))
        return 0
    kind = f"{info['partitions']} partitions" if info["partitions"] else "not partitioned"
    print(f"topic {info['topic']}: {kind}")
    for part in info["partition_details"]:
        mid = part["last_message_id"]
        shown = f"{mid} (id {_id_text(mid)})" if mid is not None else "none (no messages)"
        label = f"partition {part['partition']}" if info["partitions"] else "last message"
        print(f"  {label}: {shown}" if not info["partitions"] else f"  {label}: last message {shown}")
    sys.stdout.flush()
    return 0

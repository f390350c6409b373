"""``magnetar produce TOPIC``: messages from stdin (lines or JSON lines), from files, or from
``-m``, sent asynchronously; the exit status says whether every one was stored."""

from __future__ import annotations

import argparse
import base64
import binascii
import itertools
import json
import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import magnetar
from magnetar._options import ProducerOptions

from ._common import CliError, add_client_arguments, given_options, open_client, positive_float, positive_int

__all__ = ["register", "run"]

EXAMPLES = """examples:
  printf 'a\\nb\\n' | magnetar produce my-topic
  magnetar produce my-topic -m hello -k user-1 -p source=cli
  magnetar produce my-topic --format jsonl < messages.jsonl
  magnetar produce my-topic --file image.png -v
  seq 1000 | magnetar produce my-topic --rate 100 --compression lz4 --batch-max-messages 10
"""

FAILURES_SHOWN = 10


@dataclass
class Outgoing:
    """One message to send: its payload and the fields of ``send_async``."""

    payload: bytes
    key: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    event_time: int | None = None


def register(commands: Any) -> None:
    p = commands.add_parser("produce", usage="%(prog)s [options] TOPIC",
                            help="send messages from stdin, files or arguments",
                            description="Send messages to a topic: one per stdin line by default.",
                            epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("topic", metavar="TOPIC")
    source = p.add_argument_group("input")
    source.add_argument("--format", choices=("lines", "jsonl"), default="lines",
                        help="stdin as one message per line (the newline removed), or as JSON lines: "
                             '{"value": ..., "key": ..., "properties": {...}, "event_time": ms, '
                             '"encoding": "base64"} with only value required (default: lines)')
    source.add_argument("--file", "-f", action="append", type=Path, metavar="PATH",
                        help="send the file's bytes as one message (repeatable); stdin is not read")
    source.add_argument("-m", "--message", action="append", metavar="TEXT",
                        help="send TEXT as one message (repeatable); stdin is not read")
    p.add_argument("-n", "--count", type=positive_int, metavar="N",
                   help="stop after N messages; with -m or --file, repeat them until N are sent")
    p.add_argument("--rate", type=positive_float, metavar="N", help="send at most N messages a second")
    p.add_argument("-k", "--key", help="partition key of every message (a JSON line's key wins)")
    p.add_argument("-p", "--property", action="append", default=[], metavar="KEY=VALUE", type=_key_value,
                   help="a property of every message (repeatable)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="print each message's id (hex of MessageId.serialize()) once stored, and each failure")
    add_client_arguments(p, (ProducerOptions, "producer"))
    p.set_defaults(run=run)


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"want KEY=VALUE, not {text!r}")
    return key, value


def run(args: argparse.Namespace) -> int:
    common = Outgoing(b"", args.key, dict(args.property))
    messages = _messages(args, sys.stdin.buffer, common)
    if args.count is not None:
        messages = itertools.islice(messages, args.count)
    # Someone typing at a terminal wants each line's outcome at once, not at the end.
    interactive = not args.file and not args.message and sys.stdin.isatty()
    with open_client(args) as client:
        with client.create_producer(args.topic, **given_options(args, ProducerOptions)) as producer:
            sent, failures = send_all(producer, messages, rate=args.rate, verbose=args.verbose,
                                      wait_each=interactive, out=sys.stdout)
    if failures:
        raise CliError(f"{len(failures)} of {sent} messages failed; first: {failures[0]}")
    return 0


def _messages(args: argparse.Namespace, stdin: IO[bytes], common: Outgoing) -> Iterator[Outgoing]:
    if args.file or args.message:
        payloads = [path.read_bytes() for path in args.file or ()]
        payloads += [text.encode("utf-8") for text in args.message or ()]
        fixed = [Outgoing(data, common.key, dict(common.properties)) for data in payloads]
        return itertools.cycle(fixed) if args.count is not None else iter(fixed)
    if args.format == "jsonl":
        return (_from_json(line, number, common) for number, line in enumerate(stdin, 1) if line.strip())
    return (Outgoing(line[:-1] if line.endswith(b"\n") else line, common.key, dict(common.properties))
            for line in stdin)


def _from_json(line: bytes, number: int, common: Outgoing) -> Outgoing:
    """A JSON line as a message; fields ``magnetar consume --output jsonl`` writes that a send
    cannot set (id, publish_time...) are ignored, so its output can be sent again."""
    where = f"stdin line {number}"
    try:
        obj = json.loads(line)
    except ValueError as e:
        raise CliError(f"{where}: not JSON: {e}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("value"), str):
        raise CliError(f'{where}: want an object with a string "value"')
    encoding = obj.get("encoding")
    if encoding == "base64":
        try:
            payload = base64.b64decode(obj["value"], validate=True)
        except binascii.Error as e:
            raise CliError(f"{where}: value is not base64: {e}") from None
    elif encoding in (None, "utf-8"):
        payload = obj["value"].encode("utf-8")
    else:
        raise CliError(f'{where}: unknown encoding {encoding!r} (want "base64" or none)')
    key = obj.get("key", common.key)
    properties = obj.get("properties") or {}
    event_time = obj.get("event_time")
    if key is not None and not isinstance(key, str):
        raise CliError(f"{where}: key must be a string")
    if not isinstance(properties, dict) or not all(isinstance(v, str) for v in properties.values()):
        raise CliError(f"{where}: properties must be an object of strings")
    if event_time is not None and (isinstance(event_time, bool) or not isinstance(event_time, int)):
        raise CliError(f"{where}: event_time must be milliseconds since the epoch")
    return Outgoing(payload, key, {**common.properties, **properties}, event_time)


def send_all(producer: magnetar.Producer, messages: Iterable[Outgoing], *, rate: float | None,
             verbose: bool, wait_each: bool, out: IO[str]) -> tuple[int, list[str]]:
    """Sends every message without waiting for each (unless ``wait_each``), then flushes;
    returns how many were sent and a line per failure. Ids are printed in sending order."""
    pending: deque[tuple[int, magnetar.SendFuture]] = deque()
    failures: list[str] = []

    def settle(block: bool) -> None:
        while pending and (block or pending[0][1].done()):
            number, future = pending.popleft()
            error = future.exception()
            if error is not None:
                failures.append(f"message {number}: {' '.join(str(error).split())}")
                if verbose and len(failures) <= FAILURES_SHOWN:
                    print(f"magnetar: {failures[-1]}", file=sys.stderr)
            elif verbose:
                print(future.result().serialize().hex(), file=out, flush=wait_each)

    start = time.monotonic()
    sent = 0
    for sent, msg in enumerate(messages, 1):
        if rate is not None:
            delay = start + (sent - 1) / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        future = producer.send_async(msg.payload, key=msg.key, properties=msg.properties or None,
                                     event_time=msg.event_time)
        pending.append((sent, future))
        settle(block=wait_each)
    try:
        producer.flush()
    except magnetar.PulsarError:
        pass  # each failed message is reported from its own future
    settle(block=True)
    return sent, failures

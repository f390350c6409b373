"""``magnetar consume TOPIC -s SUB`` (a subscription, acking what it wrote) and
``magnetar read TOPIC --start ...`` (a reader: no subscription, nothing acked)."""

from __future__ import annotations

import argparse
import datetime as _dt
import string
import sys
from collections.abc import Callable
from typing import Any

import magnetar
from magnetar._options import ConsumerOptions, ReaderOptions

from . import arrow_out
from ._common import Output, add_client_arguments, given_options, non_negative_float, open_client, positive_int

__all__ = ["CONSUMER_FLAGS", "CONSUMER_SKIPPED", "register", "run_consume", "run_read", "parse_start", "receive_loop"]

CONSUME_EXAMPLES = """examples:
  magnetar consume my-topic -s my-sub --from earliest -n 10
  magnetar consume my-topic -s my-sub --type shared --output jsonl --timeout 5
  magnetar consume my-topic -s audit --no-ack --output raw > payloads.bin
  magnetar consume my-topic -s lake --from earliest --timeout 5 --output parquet --file my-topic.parquet
"""

READ_EXAMPLES = """examples:
  magnetar read my-topic --start earliest --exit-at-end --output jsonl
  magnetar read my-topic --start 0801100218032004 -n 1
  magnetar read my-topic --start 2024-05-01T12:00:00 --timeout 2
  magnetar read my-topic --exit-at-end --output arrow > my-topic.arrows
"""

# A listener needs Python code, so its concurrency has nothing to act on.
CONSUMER_SKIPPED = ("listener_concurrency",)
# The spellings kcat and pulsar-client users reach for first.
CONSUMER_FLAGS = {"subscription_type": ("--type",), "initial_position": ("--from",)}

# Without a limit the command waits for ever; receiving in steps this long keeps Ctrl-C prompt
# on every platform.
WAIT_STEP = 1.0


def register(commands: Any) -> None:
    p = commands.add_parser("consume", usage="%(prog)s -s SUB [options] TOPIC [TOPIC ...]",
                            help="receive messages through a subscription",
                            description="Receive messages through a subscription and write them to stdout.",
                            epilog=CONSUME_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("topic", metavar="TOPIC", nargs="+", help="one or more topics (a regex with --pattern)")
    p.add_argument("-s", "--subscription", required=True, metavar="SUB", help="subscription name")
    p.add_argument("--ack", action=argparse.BooleanOptionalAction, default=True,
                   help="ack each message once written (default: --ack)")
    _add_receive_arguments(p)
    add_client_arguments(p, (ConsumerOptions, "consumer"), skip=CONSUMER_SKIPPED, extra_flags=CONSUMER_FLAGS)
    p.set_defaults(run=run_consume)

    p = commands.add_parser("read", usage="%(prog)s [--start POSITION] [options] TOPIC",
                            help="read a topic from a position, without a subscription",
                            description="Read a topic from a position with a reader and write the messages to stdout.",
                            epilog=READ_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--start", type=parse_start, default=magnetar.MessageId.earliest, metavar="POSITION",
                   help="earliest, latest, a message id (hex of MessageId.serialize(), as jsonl output "
                        "shows it) or an ISO 8601 publish time (default: earliest)")
    p.add_argument("-e", "--exit-at-end", action="store_true",
                   help="stop once the last message the topic had is read")
    _add_receive_arguments(p)
    add_client_arguments(p, (ReaderOptions, "reader"))
    p.set_defaults(run=run_read)




def _add_receive_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", "--count", type=positive_int, metavar="N", help="stop after N messages")
    p.add_argument("--timeout", type=non_negative_float, metavar="SECONDS",
                   help="stop when nothing arrives for this long (default: wait for ever)")
    p.add_argument("-o", "--output", choices=Output.FORMATS + Output.ARROW_FORMATS, default="raw",
                   help="raw: each payload and a newline; jsonl: one JSON object per message with id, key, "
                        "properties, publish_time, event_time, redelivery_count and value "
                        '(base64 with "encoding": "base64" when not UTF-8); parquet: a Parquet file (--file) '
                        "of the Arrow read's columns; arrow: an Arrow IPC stream of them (default: raw)")
    p.add_argument("-f", "--file", metavar="FILE",
                   help="with --output parquet (required) or arrow: the file to write (arrow: default stdout)")
    p.add_argument("--max-rows", type=positive_int, default=10_000, metavar="N",
                   help="with --output parquet or arrow: most messages per record batch (default: 10000)")


def parse_start(text: str) -> magnetar.MessageId | _dt.datetime:
    word = text.strip().lower()
    if word in ("earliest", "latest"):
        return magnetar.MessageId.earliest if word == "earliest" else magnetar.MessageId.latest
    if word and len(word) % 2 == 0 and set(word) <= set(string.hexdigits):
        try:
            return magnetar.MessageId.deserialize(bytes.fromhex(word))
        except Exception:  # noqa: BLE001 - whatever the id parser raises
            raise argparse.ArgumentTypeError(f"not a serialized message id: {text!r}") from None
    try:
        return _dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"want earliest, latest, a hex message id or an ISO 8601 time, not {text!r}") from None


def run_consume(args: argparse.Namespace) -> int:
    topics = args.topic[0] if len(args.topic) == 1 else args.topic
    options = given_options(args, ConsumerOptions, skip=CONSUMER_SKIPPED)
    if args.output in Output.ARROW_FORMATS:
        with open_client(args) as client, client.subscribe(topics, args.subscription, **options) as consumer:
            ack = consumer.ack_arrow if args.ack else None
            arrow_out.write_batches(args, consumer.receive_arrow, ack)
        return 0
    output = Output(args.output, sys.stdout.buffer)
    arrow_out.check_no_file(args)
    with open_client(args) as client:
        with client.subscribe(topics, args.subscription, **options) as consumer:
            def write(msg: magnetar.Message) -> None:
                output.write(msg)
                if args.ack:
                    consumer.ack(msg)

            receive_loop(consumer.receive, write, count=args.count, idle=args.timeout)
    return 0


def run_read(args: argparse.Namespace) -> int:
    if args.output in Output.ARROW_FORMATS:
        with open_client(args) as client, \
                client.create_reader(args.topic, args.start, **given_options(args, ReaderOptions)) as reader:
            arrow_out.write_batches(args, reader.read_arrow, None,
                                    (lambda: not reader.has_message_available()) if args.exit_at_end else None)
        return 0
    output = Output(args.output, sys.stdout.buffer)
    arrow_out.check_no_file(args)
    with open_client(args) as client:
        with client.create_reader(args.topic, args.start, **given_options(args, ReaderOptions)) as reader:
            at_end: Callable[[], bool] | None = None
            if args.exit_at_end:
                at_end = lambda: not reader.has_message_available()  # noqa: E731
            receive_loop(reader.read_next, output.write, count=args.count, idle=args.timeout, at_end=at_end)
    return 0


def receive_loop(receive: Callable[[float | None], magnetar.Message], handle: Callable[[magnetar.Message], None],
                 *, count: int | None, idle: float | None, at_end: Callable[[], bool] | None = None) -> int:
    """Hands messages to ``handle`` until ``count`` are handled, nothing came for ``idle``
    seconds, or ``at_end()``; returns how many were handled."""
    handled = 0
    while count is None or handled < count:
        if at_end is not None and at_end():
            break
        try:
            msg = receive(idle if idle is not None else WAIT_STEP)
        except magnetar.Timeout:
            if idle is not None:
                break
            continue
        handle(msg)
        handled += 1
    return handled

"""``magnetar admin RESOURCE ACTION ...``: the calls of :mod:`magnetar.admin` on the command
line, one subcommand per call, generated from the calls' signatures so the two cannot drift:
required parameters are positional arguments, the others ``--flags`` (``--force``), and a
parameter that may be None is a flag too. Answers are JSON on stdout (``--table``: a table);
errors are one line on stderr."""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import inspect
import json
import re
import sys
from typing import Any, Callable

from magnetar import MessageId
from magnetar.admin import Admin, Brokers, Clusters, Namespaces, Schemas, Tenants, Topics

from ._common import CliError, Parser, add_client_arguments, connection_arguments

__all__ = ["register", "run", "table"]

DEFAULT_ADMIN_URL = "http://localhost:8080"
RESOURCES: dict[str, type] = {
    "clusters": Clusters, "tenants": Tenants, "namespaces": Namespaces,
    "topics": Topics, "schemas": Schemas, "brokers": Brokers,
}
# Calls whose arguments are Python objects with no text form.
LEFT_OUT = {("schemas", "upload")}


def message_id(text: str) -> MessageId:
    """``earliest``, ``latest`` or ``ledger:entry[:partition]``."""
    if text in ("earliest", "latest"):
        return MessageId.earliest if text == "earliest" else MessageId.latest
    parts = text.split(":")
    try:
        if len(parts) not in (2, 3):
            raise ValueError(text)
        return MessageId(int(parts[0]), int(parts[1]), int(parts[2]) if len(parts) == 3 else -1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"want earliest, latest or ledger:entry[:partition], not {text!r}") from None


def position(text: str) -> MessageId | datetime.datetime:
    """A message id, or an ISO 8601 time (``2026-01-31T12:00:00+00:00``)."""
    try:
        return message_id(text)
    except argparse.ArgumentTypeError:
        pass
    try:
        return datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"want a message id (earliest, latest, ledger:entry) or an ISO time, not {text!r}") from None


def boolean(text: str) -> bool:
    if text.lower() in ("true", "yes", "on", "1"):
        return True
    if text.lower() in ("false", "no", "off", "0"):
        return False
    raise argparse.ArgumentTypeError(f"want true or false, not {text!r}")


def _converter(annotation: str) -> Callable[[str], Any]:
    if "datetime" in annotation:
        return position
    if "MessageId" in annotation:
        return message_id
    if annotation.startswith("builtins.list") or annotation.startswith("list"):
        return lambda text: [part for part in text.split(",") if part]
    if annotation.startswith("int"):
        return int
    if annotation.startswith("bool"):
        return boolean
    return str


def _add_call(actions: Any, resource: str, name: str, method: Callable[..., Any], common: argparse.ArgumentParser) -> None:
    # The docstring as plain text: no reST roles or literal quotes.
    doc = re.sub(r":\w+:`~?([^`]*)`", r"\1", inspect.getdoc(method) or "").replace("``", "")
    p = actions.add_parser(name.replace("_", "-"), parents=[common], help=doc.split("\n\n")[0].replace("\n", " ") or None,
                           description=doc or None)
    params = [q for q in inspect.signature(method).parameters.values() if q.name != "self"]
    for q in params:
        annotation = str(q.annotation)
        convert = _converter(annotation)
        positional = q.default is inspect.Parameter.empty and "None" not in annotation
        if positional and q.kind is not inspect.Parameter.KEYWORD_ONLY:
            p.add_argument(q.name, type=convert, metavar=q.name.upper())
        elif q.default is False:
            p.add_argument("--" + q.name.replace("_", "-"), dest=q.name, action="store_true")
        else:
            required = q.default is inspect.Parameter.empty and "None" not in annotation
            default = None if q.default is inspect.Parameter.empty else q.default
            p.add_argument("--" + q.name.replace("_", "-"), dest=q.name, type=convert, default=default,
                           required=required, metavar=q.name.upper())
    p.set_defaults(run=run, resource=resource, call=name, params=[(q.name, q.kind) for q in params])


def register(commands: Any) -> None:
    p = commands.add_parser("admin", help="administer the cluster (tenants, namespaces, topics, ...)",
                            description="Administer the cluster through the brokers' admin REST API: "
                                        "`magnetar admin RESOURCE ACTION --help` for a call's arguments.")
    common = Parser(add_help=False)
    common.add_argument("--table", action="store_true", help="a table instead of JSON")
    add_client_arguments(common, url=("MAGNETAR_ADMIN_URL", DEFAULT_ADMIN_URL))
    resources = p.add_subparsers(dest="resource", metavar="RESOURCE", required=True)
    for resource, cls in RESOURCES.items():
        r = resources.add_parser(resource, help=(cls.__doc__ or "").split(":")[-1].strip().rstrip("."))
        actions = r.add_subparsers(dest="action", metavar="ACTION", required=True)
        for name, method in inspect.getmembers(cls, inspect.isfunction):
            if not name.startswith("_") and (resource, name) not in LEFT_OUT:
                _add_call(actions, resource, name, method, common)


def _plain(value: Any) -> Any:
    """JSON's view of an answer: dataclasses as objects, bytes as text when they are UTF-8."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _plain(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            return value.hex()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _cell(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def table(answer: Any) -> str:
    """An answer as text columns: a list of names one a line, a list of objects with a column
    per field, an object as ``field value`` rows."""
    answer = _plain(answer)
    if isinstance(answer, list) and answer and all(isinstance(r, dict) for r in answer):
        heads = list(dict.fromkeys(k for row in answer for k in row))
        rows = [heads] + [[_cell(row.get(h, "")) for h in heads] for row in answer]
    elif isinstance(answer, list):
        rows = [[_cell(v)] for v in answer]
    elif isinstance(answer, dict):
        rows = [[k, _cell(v)] for k, v in answer.items()]
    else:
        rows = [[_cell(answer)]]
    widths = [max(len(r[i]) for r in rows if i < len(r)) for i in range(max(map(len, rows), default=0))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def run(args: argparse.Namespace) -> int:
    url, options = connection_arguments(args, ("MAGNETAR_ADMIN_URL", DEFAULT_ADMIN_URL))
    if not url.startswith(("http://", "https://")):
        raise CliError(f"the admin commands need the broker's web service URL (http://host:8080), not {url!r}")
    positional = [getattr(args, n) for n, kind in args.params if kind is not inspect.Parameter.KEYWORD_ONLY]
    keywords = {n: getattr(args, n) for n, kind in args.params if kind is inspect.Parameter.KEYWORD_ONLY}
    with Admin(url, **options) as admin:
        answer = getattr(getattr(admin, args.resource), args.call)(*positional, **keywords)
    if answer is not None:
        print(table(answer) if args.table else json.dumps(_plain(answer), indent=2))
    sys.stdout.flush()
    return 0

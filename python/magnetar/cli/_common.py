"""What every command shares: client options generated from the declarations in
:mod:`magnetar._options` (a flag and an environment variable each), the client made from them,
one-line errors, and received messages written as raw bytes or JSON lines."""

from __future__ import annotations

import argparse
import base64
import enum
import json
import logging
import os
import re
import typing
from collections.abc import Callable, Collection, Mapping
from typing import IO, Any, NoReturn

import magnetar
from magnetar._options import ConnectionOptions, Declared, declared

__all__ = [
    "DEFAULT_URL",
    "CliError",
    "Output",
    "Parser",
    "add_client_arguments",
    "connection_arguments",
    "env_name",
    "flag_name",
    "given_options",
    "message_json",
    "non_negative_float",
    "open_client",
    "positive_float",
    "positive_int",
]

DEFAULT_URL = "pulsar://localhost:6650"
ENV_PREFIX = "MAGNETAR_"


class CliError(Exception):
    """A mistake of the user's (or a failure to report), printed as one line."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (argparse's default prints the whole usage first),
    and no abbreviated flags: with generated options, a prefix such as ``--partitions`` would
    silently mean ``--partitions-update-interval``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def flag_name(d: Declared) -> str:
    return "--" + d.name.replace("_", "-")


def env_name(d: Declared) -> str:
    return ENV_PREFIX + d.name.upper()


def _dest(d: Declared) -> str:
    # A prefix keeps generated options apart from each command's own arguments (count, key...).
    return "option_" + d.name


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def converter(d: Declared) -> Callable[[str], Any]:
    """Text (a flag's or an environment variable's value) to the option's value."""
    choice = d.choice
    kind = d.kind()
    takes_none = type(None) in typing.get_args(d.type)

    def convert(text: str) -> Any:
        word = text.strip().lower()
        if takes_none and word in ("none", "null"):
            return None
        if choice is not None:
            try:
                return choice(word.replace("-", "_"))
            except ValueError:
                names = ", ".join(c.value for c in choice) + (", none" if takes_none else "")
                raise argparse.ArgumentTypeError(f"invalid value {text!r}: choose from {names}") from None
        if kind is bool:
            if word in _TRUE | _FALSE:
                return word in _TRUE
            raise argparse.ArgumentTypeError(f"invalid value {text!r}: want true or false")
        try:
            if kind is int:
                return int(word)
            if kind is float:
                return float(word)
        except ValueError:
            what = "seconds" if d.unit == "s" else "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"invalid value {text!r}: want {what}") from None
        return text

    return convert


def _help(d: Declared) -> str:
    doc = re.sub(r"``([^`]*)``", r"\1", d.doc)
    default = d.default.value if isinstance(d.default, enum.Enum) else d.default
    unit = " Seconds." if d.unit == "s" else ""
    text = f"{doc}{unit} Default: {default}. Env: {env_name(d)}."
    return text.replace("%", "%%")


def cli_options(declaration: type, skip: Collection[str] = ()) -> list[Declared]:
    """The options of a declaration that text can express."""
    return [d for d in declared(declaration).values() if d.name not in skip and d.textual]


def add_options(parser: argparse.ArgumentParser, declaration: type, title: str, *, skip: Collection[str] = (),
                extra_flags: Mapping[str, tuple[str, ...]] | None = None) -> None:
    """A flag per option of ``declaration``; ``extra_flags`` adds shorter spellings by name."""
    group = parser.add_argument_group(f"{title} options")
    for d in cli_options(declaration, skip):
        flags = [flag_name(d), *(extra_flags or {}).get(d.name, ())]
        if d.kind() is bool and d.choice is None:
            group.add_argument(*flags, dest=_dest(d), action=argparse.BooleanOptionalAction,
                               default=argparse.SUPPRESS, help=_help(d))
        else:
            group.add_argument(*flags, dest=_dest(d), type=converter(d), metavar=_metavar(d),
                               default=argparse.SUPPRESS, help=_help(d))


def _metavar(d: Declared) -> str:
    if d.choice is not None:
        return "|".join([*(c.value for c in d.choice), *(["none"] if type(None) in typing.get_args(d.type) else [])])
    if d.unit == "s":
        return "SECONDS"
    if d.unit == "bytes":
        return "BYTES"
    if d.name.endswith("_path"):
        return "PATH"
    return {int: "N", float: "NUMBER"}.get(d.kind(), "TEXT")


def given_options(args: argparse.Namespace, declaration: type, skip: Collection[str] = (),
                  env: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """The options of ``declaration`` given as flags, else as environment variables; the rest
    are left out so the library's defaults apply."""
    out: dict[str, Any] = {}
    for d in cli_options(declaration, skip):
        if hasattr(args, _dest(d)):
            out[d.name] = getattr(args, _dest(d))
        elif env_name(d) in env:
            try:
                out[d.name] = converter(d)(env[env_name(d)])
            except argparse.ArgumentTypeError as e:
                raise CliError(f"{env_name(d)}: {e}") from None
    return out


def add_client_arguments(parser: argparse.ArgumentParser, *declarations: tuple[type, str],
                         skip: Collection[str] = (), extra_flags: Mapping[str, tuple[str, ...]] | None = None,
                         url: tuple[str, str] = ("MAGNETAR_URL", DEFAULT_URL)) -> None:
    """``--url`` (``url``: its environment variable and default), ``--token``, ``--log-level``
    and the connection options, then each ``(declaration, title)``'s options."""
    parser.add_argument("--url", default=None, metavar="URL",
                        help=f"service URL (default: ${url[0]} or {url[1]})")
    parser.add_argument("--token", default=None, metavar="JWT",
                        help="token authentication (default: $MAGNETAR_TOKEN)")
    parser.add_argument("--log-level", default=None, choices=("debug", "info", "warning", "error"),
                        help="the magnetar logger's level, on stderr (default: $MAGNETAR_LOG_LEVEL or error; warning shows reconnects)")
    add_options(parser, ConnectionOptions, "connection")
    for declaration, title in declarations:
        add_options(parser, declaration, title, skip=skip, extra_flags=extra_flags)


def open_client(args: argparse.Namespace, env: Mapping[str, str] = os.environ) -> magnetar.Client:
    """The client ``--url``, ``--token`` and the connection options describe."""
    url, options = connection_arguments(args, ("MAGNETAR_URL", DEFAULT_URL), env)
    return magnetar.Client(url, **options)


def connection_arguments(args: argparse.Namespace, url: tuple[str, str],
                         env: Mapping[str, str] = os.environ) -> tuple[str, dict[str, Any]]:
    """The service URL and the connection options ``--url``, ``--token`` and the connection
    flags describe (the logger set up at ``--log-level``)."""
    level = (args.log_level or env.get("MAGNETAR_LOG_LEVEL") or "error").upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise CliError(f"MAGNETAR_LOG_LEVEL: invalid value {level.lower()!r}: choose from debug, info, warning, error")
    logging.basicConfig(level=getattr(logging, level), format="magnetar: %(levelname)s %(name)s: %(message)s")
    options = given_options(args, ConnectionOptions, env=env)
    token = args.token or env.get("MAGNETAR_TOKEN")
    if token:
        options["authentication"] = magnetar.Authentication.token(token)
    return args.url or env.get(url[0]) or url[1], options


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"want a positive integer, not {text!r}")
    return value


def positive_float(text: str) -> float:
    value = non_negative_float(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"want a positive number, not {text!r}")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also refuses NaN
        raise argparse.ArgumentTypeError(f"want a number >= 0, not {text!r}")
    return value


def message_json(msg: magnetar.Message) -> dict[str, Any]:
    """A received message as one JSON object; a payload that is not UTF-8 is base64 with
    ``"encoding": "base64"``."""
    data = msg.data
    out: dict[str, Any] = {
        "id": msg.message_id.serialize().hex(),
        "key": msg.key,
        "properties": msg.properties,
        "publish_time": msg.publish_time,
        "event_time": msg.event_time,
        "redelivery_count": msg.redelivery_count,
    }
    try:
        out["value"] = data.decode("utf-8")
    except UnicodeDecodeError:
        out["value"] = base64.b64encode(data).decode("ascii")
        out["encoding"] = "base64"
    return out


class Output:
    """Where received messages go: ``raw`` (the payload and a newline) or ``jsonl``."""

    FORMATS = ("raw", "jsonl")
    ARROW_FORMATS = ("parquet", "arrow")
    """Formats written a record batch at a time (``cli/arrow_out.py``), to ``--file`` or stdout."""

    def __init__(self, fmt: str, stream: IO[bytes]) -> None:
        self.format = fmt
        self.stream = stream

    def write(self, msg: magnetar.Message) -> None:
        if self.format == "jsonl":
            line = json.dumps(message_json(msg), ensure_ascii=False).encode("utf-8")
        else:
            line = msg.data
        self.stream.write(line + b"\n")
        # Flushed per message so a pipe sees each one as it arrives, and a message is out
        # before it is acked.
        self.stream.flush()

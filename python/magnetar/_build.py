"""From a caller's options to the dicts the engine handles take (``_core._Client(url, opts)``,
``create_producer(topic, opts)``, ``subscribe(topic, sub, opts)``).

Options arrive resolved (:func:`magnetar._options.resolve`: declared names only, defaults in);
here the Python-only ones (callbacks, credentials objects, paths) are taken out or converted,
and the engine checks the rest (types, ranges, durations) in one place
(``src/python/options.rs``).
"""

from __future__ import annotations

import os
from typing import Any, Mapping, NamedTuple, Sequence

from ._backoff import Backoff
from ._core import MessageId
from ._options import (
    Authentication,
    ClusterOptions,
    ConnectionOptions,
    ConsumerOptions,
    ProducerOptions,
    ReaderOptions,
    check_topic,
    declared,
    reader_start,
    resolve,
)
from ._interceptors import ConsumerEventListener, ConsumerHooks, ConsumerInterceptor, ProducerInterceptor, check
from ._options import SubscriptionMode
from .exceptions import InvalidConfiguration
from .schema import AutoConsumeSchema, AutoProduceBytesSchema, BytesSchema, Schema

__all__ = ["cluster", "connection", "consumer", "producer", "reader"]

_TLS_PATHS = ("tls_trust_certs_file_path", "tls_certificate_file_path", "tls_private_key_file_path")
_TLS_FLAGS = ("tls_allow_insecure_connection", "tls_validate_hostname")


def connection(options: Mapping[str, Any], call: str = "Client") -> dict[str, Any]:
    """The engine's client options from :class:`ConnectionOptions` (``on_state_change``, which
    only the Python client uses, must not be among them)."""
    opts = resolve(ConnectionOptions, options, call)
    auth = _authentication(opts.pop("authentication"), opts.pop("auth_plugin"), opts.pop("auth_params"))
    opts.update(auth._engine() if auth else {"auth_method": None, "auth_data": None})
    for name in _TLS_PATHS:
        path = opts[name]
        value = os.fspath(path) if isinstance(path, os.PathLike) else path
        if value is not None and not isinstance(value, str):
            raise InvalidConfiguration(f"{name} must be a path (str or os.PathLike[str]), not {path!r}")
        opts[name] = value or None
    for name in _TLS_FLAGS:
        if not isinstance(opts[name], bool):
            raise InvalidConfiguration(f"{name} must be True or False, not {opts[name]!r}")
    tls_files = auth._tls_files if auth else None
    if tls_files is not None:
        given = (opts["tls_certificate_file_path"], opts["tls_private_key_file_path"])
        if given != (None, None) and given != tls_files:
            raise InvalidConfiguration("Authentication.tls names the client certificate: leave tls_certificate_file_path "
                                       "and tls_private_key_file_path out, or give the same files")
        opts["tls_certificate_file_path"], opts["tls_private_key_file_path"] = tls_files
    if (opts["tls_certificate_file_path"] is None) != (opts["tls_private_key_file_path"] is None):
        raise InvalidConfiguration("tls_certificate_file_path and tls_private_key_file_path must be given together")
    return opts


def cluster(client: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """The engine's options for a cluster ``switch_service`` moves a client to: the client's
    connection options ``client``, with the credentials and trust file ``given`` instead."""
    unknown = sorted(set(given) - set(declared(ClusterOptions)))
    if unknown:
        raise TypeError(f"switch_service() takes only {', '.join(declared(ClusterOptions))}, not {', '.join(unknown)}")
    opts = dict(client)
    if "authentication" in given:
        for name in ("authentication", "auth_plugin", "auth_params"):
            opts.pop(name, None)
        if isinstance(given["authentication"], Authentication) and given["authentication"]._tls_files:
            # The new credential names the client certificate: the client's own goes.
            opts.pop("tls_certificate_file_path", None)
            opts.pop("tls_private_key_file_path", None)
    opts.update(given)
    return connection(opts, "switch_service")


def _authentication(auth: Any, plugin: Any, params: Any) -> Authentication | None:
    """The credentials of ``authentication=``, or of their text form ``auth_plugin``/``auth_params``."""
    if auth is not None and not isinstance(auth, Authentication):
        raise InvalidConfiguration("authentication must be a magnetar.Authentication")
    if plugin is None and params is None:
        return auth
    if auth is not None:
        raise InvalidConfiguration("give authentication or auth_plugin/auth_params, not both")
    for name, value in (("auth_plugin", plugin), ("auth_params", params)):
        if value is not None and not isinstance(value, str):
            raise InvalidConfiguration(f"{name} must be a str, not {value!r}")
    if plugin is None:
        raise InvalidConfiguration("auth_params needs an auth_plugin")
    return Authentication.from_params(plugin, params)


def client(options: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
    """The engine's client options and the ``on_state_change`` callback of a client's options."""
    # Only the connection options are resolved (once, in `connection`): the callback is
    # the one client option the engine never sees.
    given = dict(options)
    on_state_change = given.pop("on_state_change", None)
    if on_state_change is not None and not callable(on_state_change):
        raise InvalidConfiguration("on_state_change must be a callable taking the state name")
    return connection(given), on_state_change


def producer(topic: str, options: Mapping[str, Any]) -> tuple[tuple[str, dict[str, Any], Any, Any], tuple[Any, ...]]:
    """``create_producer``'s engine arguments (topic, options, router, schema) and the
    interceptors."""
    opts = resolve(ProducerOptions, options, "create_producer")
    router = opts.pop("router")
    if router is not None and not callable(router):
        raise InvalidConfiguration("router must be a callable (key, num_partitions) -> partition")
    interceptors = check(opts.pop("interceptors"), ProducerInterceptor, "interceptors")
    return (topic, opts, router, _schema(opts.pop("schema"), producing=True)), interceptors


def _schema(schema: Any, producing: bool = False) -> Any:
    """The schema object the engine takes: None for bytes (nothing is registered)."""
    if schema is None or type(schema) is BytesSchema:
        return None
    if not isinstance(schema, Schema):
        raise InvalidConfiguration(f"schema must be a magnetar.schema object, not {schema!r}")
    if isinstance(schema, AutoProduceBytesSchema) and not producing:
        raise InvalidConfiguration("AutoProduceBytesSchema is for producers; consumers take AutoConsumeSchema")
    if isinstance(schema, AutoConsumeSchema) and producing:
        raise InvalidConfiguration("AutoConsumeSchema is for consumers and readers; producers take "
                                   "AutoProduceBytesSchema")
    return schema


def needs_topic_schema(schema: Any) -> bool:
    """Whether the producer's schema is the topic's, to fetch before the producer attaches."""
    return isinstance(schema, AutoProduceBytesSchema) and not schema._bound


class Subscription(NamedTuple):
    """What ``subscribe`` makes of its arguments."""

    args: tuple[Any, str, dict[str, Any], bool, Any]
    """The engine's: topic, subscription, options, pattern, schema."""
    listener: Any
    concurrency: int
    interceptors: tuple[Any, ...]
    hooks: Any
    """A :class:`magnetar._intercepted.ConsumerHooks` when consumer events are wanted, else None."""

    @property
    def engine_kwargs(self) -> dict[str, Any]:
        return {} if self.hooks is None else {"event_hook": self.hooks}


def consumer(topic: str | Sequence[str], subscription: str, options: Mapping[str, Any]) -> Subscription:
    """``subscribe``'s arguments, checked and split between the engine and Python."""
    opts = resolve(ConsumerOptions, options, "subscribe")
    interceptors = check(opts.pop("interceptors"), ConsumerInterceptor, "interceptors")
    events = opts.pop("consumer_event_listener")
    if events is not None and not isinstance(events, ConsumerEventListener):
        raise InvalidConfiguration(f"consumer_event_listener must be a magnetar.ConsumerEventListener, not {events!r}")
    opts["durable"] = opts.pop("subscription_mode") is not SubscriptionMode.NON_DURABLE
    listener, concurrency = opts.pop("listener"), opts.pop("listener_concurrency")
    if listener is not None and not callable(listener):
        raise InvalidConfiguration("listener must be a callable taking a Message")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise InvalidConfiguration("listener_concurrency must be an int >= 1")
    check_topic(topic)
    for name in ("nack_backoff", "ack_timeout_backoff"):
        backoff = opts[name]
        if backoff is not None and not isinstance(backoff, Backoff):
            raise InvalidConfiguration(f"{name} must be a magnetar.Backoff, not {backoff!r}")
        opts[name] = backoff._engine() if backoff is not None else None
    pattern = opts.pop("pattern")
    schema = _schema(opts.pop("schema"))
    topics = topic if isinstance(topic, str) else list(topic)
    hooks = None
    if interceptors or events is not None:
        hooks = ConsumerHooks(interceptors, events)
    return Subscription((topics, subscription, opts, pattern, schema), listener, concurrency, interceptors, hooks)


def reader(topic: str, start: Any, options: Mapping[str, Any]) -> tuple[tuple[str, str, dict[str, Any], bool, Any], int | None, Any]:
    """``create_reader``'s engine arguments (a non-durable subscription), the publish time
    to seek to when the reader starts at a time, and the listener."""
    opts = resolve(ReaderOptions, options, "create_reader")
    size = opts["receiver_queue_size"]
    if isinstance(size, int) and not isinstance(size, bool) and size < 1:
        # Zero queues are for consumers (subscribe): a reader reads ahead.
        raise InvalidConfiguration(f"receiver_queue_size of a reader must be at least 1, got {size}")
    listener, prefix, name = opts["listener"], opts["subscription_role_prefix"], opts["subscription_name"]
    if listener is not None and not callable(listener):
        raise InvalidConfiguration("listener must be a callable taking a Message")
    for option, value in (("subscription_role_prefix", prefix), ("subscription_name", name)):
        if value is not None and (not isinstance(value, str) or not value):
            raise InvalidConfiguration(f"{option} must be a non-empty str, not {value!r}")
    start_id, at_time = reader_start(start)
    engine = {
        "subscription_type": "exclusive",
        # As the Java reader does: the broker honours the start id with "latest", and
        # "earliest" only for the earliest sentinel.
        "initial_position": "earliest" if start_id == MessageId.earliest else "latest",
        "durable": False,
        "start_message_id": start_id,
        "start_inclusive": opts["start_inclusive"],
        "receiver_queue_size": opts["receiver_queue_size"],
        "consumer_name": opts["reader_name"],
        "read_compacted": opts["read_compacted"],
        "crypto_key_reader": opts["crypto_key_reader"],
        "crypto_failure_action": opts["crypto_failure_action"],
    }
    if name is None:  # as the Java reader names its subscription
        name = f"{prefix}-reader-{os.urandom(5).hex()}" if prefix else f"reader-{os.urandom(5).hex()}"
    return (topic, name, engine, False, _schema(opts["schema"])), at_time, listener

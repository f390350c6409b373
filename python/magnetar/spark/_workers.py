"""One client per Python worker process.

PySpark forks its Python workers from a daemon and reuses each worker for many tasks
(``spark.python.worker.reuse``, on by default). A broker connection is expensive to set up and
cannot be pickled, so executors keep one :class:`magnetar.Client` per process per
:class:`~magnetar.ClientConfig`, created on first use.

Everything is keyed on ``os.getpid()``: a forked child never uses (or closes, or even drops)
the clients it inherited from its parent, whose sockets and engine threads are not its own.
It starts with an empty cache and builds its own client on first use.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Mapping
from typing import Any

from .._client import Client, Producer
from .._config import ClientConfig
from ..exceptions import PulsarError

__all__ = ["client", "close_all", "process_stats", "producer"]

log = logging.getLogger("magnetar.spark")


class _ProcessState:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.RLock()
        self.clients: dict[ClientConfig, Client] = {}
        self.producers: dict[tuple[Any, ...], Producer] = {}
        self.clients_created = 0
        self.producers_created = 0


_state = _ProcessState()
# What a forked child inherited: kept referenced for the life of the child so that no
# destructor ever runs on the parent's connections from the child.
_inherited: list[Any] = []
_atexit_registered_pid: int | None = None
_swap_lock = threading.Lock()


def _after_fork_in_child() -> None:
    global _state, _swap_lock
    _swap_lock = threading.Lock()  # the parent's may have been held by another thread at fork
    _inherited.append(_state)
    _state = _ProcessState()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _current() -> _ProcessState:
    """The state of this process; replaced if the process forked without the at-fork hook
    (e.g. a fork that bypassed ``os.fork``)."""
    global _state
    st = _state
    if st.pid != os.getpid():
        with _swap_lock:
            if _state.pid != os.getpid():
                _inherited.append(_state)
                _state = _ProcessState()
            st = _state
    return st


def _ensure_atexit(st: _ProcessState) -> None:
    global _atexit_registered_pid
    if _atexit_registered_pid != st.pid:
        _atexit_registered_pid = st.pid
        atexit.register(close_all)


def _as_config(conf: ClientConfig | str) -> ClientConfig:
    if isinstance(conf, ClientConfig):
        return conf
    if isinstance(conf, str):
        return ClientConfig(conf)
    raise TypeError(f"expected a magnetar.ClientConfig or a service URL, not {type(conf).__name__}")


def _is_closed(obj: Any) -> bool:
    return bool(getattr(getattr(obj, "_core", None), "closed", False))


def client(conf: ClientConfig | str) -> Client:
    """The :class:`magnetar.Client` of this process for ``conf``, created on first use.

    Call it inside UDFs, ``foreachPartition``, ``mapInArrow`` functions, or anywhere in a
    worker: every call in the same process with an equal configuration returns the same
    client, and a forked child gets its own. Do not close it; it is closed when the process
    exits normally (PySpark workers often end with ``os._exit`` or SIGKILL, so nothing may be
    left unsent when a task returns: flush producers before returning, as
    :func:`send_arrow` does).
    """
    conf = _as_config(conf)
    st = _current()
    with st.lock:
        c = st.clients.get(conf)
        if c is not None and not _is_closed(c):
            return c
        c = conf.create()
        st.clients[conf] = c
        st.clients_created += 1
        _ensure_atexit(st)
        log.debug("magnetar.spark: client %d for %s in pid %d", st.clients_created, conf.service_url, st.pid)
        return c


def producer(conf: ClientConfig | str, topic: str, **options: Any) -> Producer:
    """A :class:`magnetar.Producer` of this process for ``(conf, topic, options)``, created on
    first use and kept open for later tasks (options as in ``Client.create_producer``).

    Do not close it; flush it (or use :func:`send_arrow`, which waits for every receipt)
    before the task returns.
    """
    conf = _as_config(conf)
    key = (conf, topic, _freeze(options))
    st = _current()
    with st.lock:
        p = st.producers.get(key)
        if p is not None and not _is_closed(p):
            return p
        p = client(conf).create_producer(topic, **options)
        st.producers[key] = p
        st.producers_created += 1
        return p


def _forget_producer(p: Producer) -> None:
    st = _current()
    with st.lock:
        for k, v in list(st.producers.items()):
            if v is p:
                del st.producers[k]


def _freeze(options: Mapping[str, Any]) -> tuple[Any, ...]:
    out = []
    for k in sorted(options):
        v = options[k]
        if isinstance(v, Mapping):
            v = tuple(sorted(v.items()))
        out.append((k, v))
    return tuple(out)


def process_stats() -> dict[str, int]:
    """How many clients and producers this process created and holds (for tests and logs)."""
    st = _current()
    with st.lock:
        return {
            "pid": st.pid,
            "clients_created": st.clients_created,
            "clients_open": len(st.clients),
            "producers_created": st.producers_created,
            "producers_open": len(st.producers),
        }


def close_all() -> None:
    """Closes this process's producers and clients (registered with ``atexit``)."""
    st = _state
    if st.pid != os.getpid():
        return
    with st.lock:
        producers, clients = list(st.producers.values()), list(st.clients.values())
        st.producers.clear()
        st.clients.clear()
    closables: list[Producer | Client] = [*producers, *clients]
    for obj in closables:
        try:
            obj.close()
        except PulsarError as e:  # best effort at exit
            log.debug("magnetar.spark: closing %r at exit: %s", obj, e)

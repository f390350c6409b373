"""``pulsar.TableView`` on magnetar's table view: the same reader and table, the official
methods (``get``, ``for_each``, ``for_each_and_listen``, ``len()``, ``close``)."""

from __future__ import annotations

from typing import Any, Callable

from .. import _table_view as _native
from .exceptions import mapped
from .schema import Schema

__all__ = ["TableView"]


class TableView:
    """The latest value of each key of a topic (``Client.create_table_view``)."""

    def __init__(self, native: _native._View, subscription: str | None, schema: Schema) -> None:
        self._v, self._subscription, self._schema = native, subscription, schema

    def get(self, key: str) -> Any:
        """The value of ``key``, or None."""
        return self._v.get(key)

    def for_each(self, callback: Callable[[str, Any], None]) -> None:
        self._v.for_each(callback)

    def for_each_and_listen(self, callback: Callable[[str, Any], None]) -> None:
        # The official listener gets the removed key's (empty) payload decoded by the schema,
        # where magnetar's gets None.
        def listener(key: str, value: Any) -> None:
            callback(key, self._empty() if value is None else value)

        self._v.for_each_and_listen(listener)

    def _empty(self) -> Any:
        try:
            return self._schema.decode(b"")
        except Exception:
            return None

    def close(self) -> None:
        with mapped():
            self._v.close()  # type: ignore[attr-defined]

    def __len__(self) -> int:
        return len(self._v)

    def __str__(self) -> str:
        if self._subscription is None:
            return f"TableView(topic={self._v.topic})"
        return f"TableView(topic={self._v.topic}, subscription={self._subscription})"

    __repr__ = __str__

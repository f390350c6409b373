"""Arrow batches and pandas frames into messages with :func:`send_arrow` (the data source's
reads and writes build and read Arrow columns in the engine: ``_read``, ``_write``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._client import Producer
from .._core import MessageId
from ..exceptions import InvalidConfiguration

if TYPE_CHECKING:
    import pandas
    import pyarrow as pa

__all__ = ["columns_of", "send_arrow"]


# -- writes ---------------------------------------------------------------------------------


def _to_table(data: Any) -> pa.RecordBatch | pa.Table:
    import pyarrow as pa

    if isinstance(data, (pa.RecordBatch, pa.Table)):
        return data
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover
        pd = None
    if pd is not None and isinstance(data, pd.DataFrame):
        arrays, names = [], []
        for name in data.columns:
            series = data[name]
            if pd.api.types.is_datetime64_any_dtype(series.dtype) or pd.api.types.is_numeric_dtype(series.dtype):
                arrays.append(pa.Array.from_pandas(series))
            else:
                values = [None if _is_missing(v) else v for v in series.tolist()]
                if values and any(isinstance(v, dict) for v in values):
                    arrays.append(pa.array(values, type=pa.map_(pa.string(), pa.string())))
                else:
                    arrays.append(pa.array(values))
            names.append(str(name))
        return pa.Table.from_arrays(arrays, names=names)
    raise TypeError(f"expected a pyarrow.RecordBatch, pyarrow.Table or pandas.DataFrame, not {type(data).__name__}")


def _is_missing(v: Any) -> bool:
    """None, NaN or NaT (what pandas puts in empty cells)."""
    if v is None:
        return True
    if isinstance(v, float):
        return math.isnan(v)
    return type(v).__name__ == "NaTType"


def columns_of(data: pa.RecordBatch | pa.Table, *, value: str = "value", key: str | None = "key",
               properties: str | None = "properties", event_time: str | None = "event_time",
               ) -> tuple[list[Any], list[str | None] | None, list[dict[str, str] | None] | None, list[int | None] | None]:
    """Python lists of payloads, keys, properties and event times (ms) from Arrow columns.

    ``value`` must be binary or string and non-null; ``key`` string or UTF-8 binary;
    ``properties`` a map of string to string; ``event_time`` a timestamp (time-zone-less
    timestamps are taken as UTC) or an integer of milliseconds since the epoch. Missing
    optional columns give None.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    names = data.schema.names
    if value not in names:
        raise InvalidConfiguration(f"the data has no {value!r} column (columns: {names})")
    vcol = data.column(value)
    vtype = vcol.type
    if not (pa.types.is_binary(vtype) or pa.types.is_large_binary(vtype) or pa.types.is_string(vtype)
            or pa.types.is_large_string(vtype) or pa.types.is_fixed_size_binary(vtype)):
        raise InvalidConfiguration(f"column {value!r} must be binary or string, not {vtype}")
    if vcol.null_count:
        raise InvalidConfiguration(f"column {value!r} has {vcol.null_count} null value(s); Pulsar messages need a payload")
    payloads = vcol.to_pylist()

    keys = None
    if key is not None and key in names:
        kcol = data.column(key)
        if kcol.null_count < len(kcol):
            if pa.types.is_binary(kcol.type) or pa.types.is_large_binary(kcol.type):
                keys = [None if k is None else k.decode("utf-8") for k in kcol.to_pylist()]
            elif pa.types.is_string(kcol.type) or pa.types.is_large_string(kcol.type):
                keys = kcol.to_pylist()
            else:
                raise InvalidConfiguration(f"column {key!r} must be string or binary, not {kcol.type}")

    props = None
    if properties is not None and properties in names:
        pcol = data.column(properties)
        if pcol.null_count < len(pcol):
            if not pa.types.is_map(pcol.type):
                raise InvalidConfiguration(f"column {properties!r} must be map<string,string>, not {pcol.type}")
            props = [None if p is None else {str(k): ("" if v is None else str(v)) for k, v in p}
                     for p in pcol.to_pylist()]
            if not any(props):
                props = None

    times = None
    if event_time is not None and event_time in names:
        ecol = data.column(event_time)
        if ecol.null_count < len(ecol):
            if pa.types.is_timestamp(ecol.type):
                ms = pc.cast(pc.cast(ecol, pa.timestamp("ms", tz=ecol.type.tz)), pa.int64())
                times = ms.to_pylist()
            elif pa.types.is_integer(ecol.type):
                times = ecol.to_pylist()
            else:
                raise InvalidConfiguration(f"column {event_time!r} must be a timestamp or milliseconds (long), not {ecol.type}")
    return payloads, keys, props, times


def send_arrow(
    producer: Producer,
    data: pa.RecordBatch | pa.Table | pandas.DataFrame,
    *,
    value: str = "value",
    key: str | None = "key",
    properties: str | None = "properties",
    event_time: str | None = "event_time",
) -> list[MessageId]:
    """Sends every row of an Arrow batch/table or a pandas frame and waits for every receipt.

    Columns: ``value`` (binary or string, required), and optionally ``key`` (string),
    ``properties`` (map<string,string>, or dicts in pandas) and ``event_time`` (timestamp
    or ms). Other columns are ignored. Returns the message ids in row order.

    The rows go through one ``Producer.send_many`` call: every message is acknowledged by the
    broker when this returns, within the producer's ``send_timeout`` (or an exception is raised:
    some rows may then have been sent; delivery is at-least-once).
    """
    table = _to_table(data)
    if table.num_rows == 0:
        return []
    payloads, keys, props, times = columns_of(table, value=value, key=key, properties=properties,
                                              event_time=event_time)
    return send_lists(producer, payloads, keys, props, times)


def send_lists(producer: Producer, payloads: Sequence[Any], keys: Sequence[str | None] | None,
               props: Sequence[dict[str, str] | None] | None, times: Sequence[int | None] | None,
               txn: Any = None) -> list[MessageId]:
    """Sends the rows (inside ``txn`` when given) and waits for every receipt (see
    :func:`send_arrow`)."""
    if not payloads:
        return []
    return producer.send_many(payloads, keys=keys, properties=props, event_times=times, txn=txn)

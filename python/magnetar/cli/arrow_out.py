"""``--output parquet`` and ``--output arrow`` of ``magnetar consume`` and ``magnetar read``:
record batches of the Arrow read's columns (``receive_arrow``/``read_arrow``, built in the
engine), written a batch at a time to a Parquet file or an Arrow IPC stream, and (consume with
``--ack``) acknowledged once written."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

from ..exceptions import InvalidConfiguration

__all__ = ["check_no_file", "write_batches"]

# Without --timeout the command waits for ever; receiving in steps this long keeps Ctrl-C prompt.
WAIT_STEP = 1.0


def check_no_file(args: argparse.Namespace) -> None:
    if args.file is not None:
        raise InvalidConfiguration(f"--file goes with --output parquet or arrow, not {args.output}")


def _writer(args: argparse.Namespace, schema: Any) -> Any:
    import pyarrow as pa

    if args.output == "parquet":
        import pyarrow.parquet as pq

        return pq.ParquetWriter(args.file, schema)
    sink = args.file if args.file is not None else pa.PythonFile(sys.stdout.buffer, mode="w")
    return pa.ipc.new_stream(sink, schema)


def write_batches(args: argparse.Namespace, receive: Callable[..., Any], ack: Callable[[Any], Any] | None,
                  at_end: Callable[[], bool] | None = None) -> int:
    """Writes what ``receive(max_rows=, timeout=)`` returns until ``--count`` rows are written,
    nothing came for ``--timeout`` seconds, or ``at_end()``; acks each batch once written.
    Returns the number of rows."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise InvalidConfiguration(f"--output {args.output} needs pyarrow: pip install pyarrow") from None
    if args.output == "parquet" and args.file is None:
        raise InvalidConfiguration("--output parquet needs --file FILE")
    writer = None
    written = 0
    idle_since = time.monotonic()
    try:
        while args.count is None or written < args.count:
            if at_end is not None and at_end():
                break
            want = args.max_rows if args.count is None else min(args.max_rows, args.count - written)
            step = WAIT_STEP if args.timeout is None else min(WAIT_STEP, args.timeout)
            batch = receive(max_rows=want, timeout=step)
            if writer is None:
                writer = _writer(args, batch.schema)
            if not batch.num_rows:
                if args.timeout is not None and time.monotonic() - idle_since >= args.timeout:
                    break
                continue
            idle_since = time.monotonic()
            writer.write_batch(batch)
            written += batch.num_rows
            if ack is not None:
                ack(batch)
    finally:
        if writer is not None:
            writer.close()
    return written

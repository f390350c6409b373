"""Exactly once under kill -9, at small scale, on the real broker: a consume-transform-produce
worker killed with SIGKILL mid-transaction over and over leaves every input in the output
exactly once (``magnetar.testing.txn_kill``). Two shapes run here: a Failover subscription
whose batched input is acknowledged with one cumulative ack per transaction (the loop that
wrote a batch's tail twice, docs/transactions.md), and a Shared one whose input is chunked.
Every shape, 20 runs of 20 kills each, is ``scripts/dev txn-kill``, figures in
docs/transactions.md."""

from __future__ import annotations

import pytest
from magnetar.testing import Standalone
from magnetar.testing.txn_kill import kill_loop


@pytest.mark.parametrize("case", ["failover-batched", "shared-chunked"])
def test_consume_transform_produce_is_exactly_once_under_kill_9(broker: Standalone, case: str) -> None:
    loop = kill_loop(broker.service_url, case, inputs=200, kills=6, txn_timeout=3.0, admin_url=broker.admin_url)
    print(loop.summary())
    assert loop.exactly_once, loop.summary()

"""Issue 18's exactly once under kill -9, at small scale, on the real broker: a
consume-transform-produce worker on a Failover subscription, its input produced in batches and
acknowledged with one cumulative ack per transaction, killed with SIGKILL mid-transaction over
and over, leaves every input in the output exactly once (``magnetar.testing.txn_kill``; the
issue's 20 kills of 300 inputs per loop are ``scripts/dev txn-kill``, figures in
docs/transactions.md)."""

from __future__ import annotations

from magnetar.testing.txn_kill import kill_loop


def test_failover_with_batched_input_is_exactly_once_under_kill_9(service_url: str) -> None:
    loop = kill_loop(service_url, "failover-batched", inputs=200, kills=6, txn_timeout=3.0)
    print(loop.summary())
    assert loop.exactly_once, loop.summary()

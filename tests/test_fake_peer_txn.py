"""Transactions against the in-process peer of ``test_fake_peer.py``, for what a real broker
does only by chance: here, leaving a transaction's ack unanswered when it closes the consumer
for a move (seen in the cluster's txn scenario, docs/resilience.md)."""

from __future__ import annotations

from typing import Any

import pytest

import magnetar
from test_fake_peer import (
    ACK, CLOSE_CONSUMER, FLOW, PARTITIONED_METADATA, PARTITIONED_METADATA_RESPONSE, SUBSCRIBE, SUCCESS, PeerConn,
    after_handshake, command, f_varint, fake_client, frame, message, run_bounded,
)

pytestmark = pytest.mark.timeout(60)

# BaseCommand.Type (proto/PulsarApi.proto)
NEW_TXN, NEW_TXN_RESPONSE = 50, 51
ADD_SUBSCRIPTION_TO_TXN, ADD_SUBSCRIPTION_TO_TXN_RESPONSE = 54, 55
END_TXN, END_TXN_RESPONSE = 56, 57
TC_CLIENT_CONNECT_REQUEST, TC_CLIENT_CONNECT_RESPONSE = 62, 63
ABORT = 1  # TxnAction
ASSIGN_TOPIC = "persistent://pulsar/system/transaction_coordinator_assign"
TXN_LEAST, TXN_MOST = 7, 0


def _coordinator(ended: list[int]) -> dict[int, Any]:
    """Handlers making the peer also one transaction coordinator (coordinator 0, on this very
    connection); ``ended`` gets the action of each EndTxn."""

    def txn_reply(type_: int) -> Any:
        async def reply(c: PeerConn, body: dict[int, list[Any]]) -> None:
            ids = f_varint(1, body[1][0]) + f_varint(2, TXN_LEAST) + f_varint(3, TXN_MOST)
            await c.send(frame(command(type_, ids)))
        return reply

    async def on_metadata(c: PeerConn, body: dict[int, list[Any]]) -> None:
        partitions = 1 if body[1][0].decode() == ASSIGN_TOPIC else 0
        answer = f_varint(1, partitions) + f_varint(2, body[2][0]) + f_varint(3, 0)
        await c.send(frame(command(PARTITIONED_METADATA_RESPONSE, answer)))

    async def on_tc_connect(c: PeerConn, body: dict[int, list[Any]]) -> None:
        await c.send(frame(command(TC_CLIENT_CONNECT_RESPONSE, f_varint(1, body[1][0]))))

    async def on_end(c: PeerConn, body: dict[int, list[Any]]) -> None:
        ended.append(body.get(4, [0])[0])
        await txn_reply(END_TXN_RESPONSE)(c, body)

    return {PARTITIONED_METADATA: on_metadata, TC_CLIENT_CONNECT_REQUEST: on_tc_connect,
            NEW_TXN: txn_reply(NEW_TXN_RESPONSE), ADD_SUBSCRIPTION_TO_TXN: txn_reply(ADD_SUBSCRIPTION_TO_TXN_RESPONSE),
            END_TXN: on_end}


def test_a_transactional_ack_the_broker_leaves_unanswered_at_a_move_fails_once_resubscribed() -> None:
    """The broker closes the consumer (an unload) while a transaction's ack waits for its
    answer, and never answers it: the consumer subscribes again, and the ack then fails, so the
    commit aborts the transaction at once instead of after the operation timeout (30 s here,
    as in the cluster runs that stood silent that long). Red before: the commit was still
    waiting when the bound below ran out."""
    ended: list[int] = []
    subscribes: list[int] = []
    sent = False

    async def on_subscribe(c: PeerConn, body: dict[int, list[Any]]) -> None:
        subscribes.append(body[4][0])
        await c.send(frame(command(SUCCESS, f_varint(1, body[5][0]))))

    async def on_flow(c: PeerConn, body: dict[int, list[Any]]) -> None:
        nonlocal sent
        if not sent:
            sent = True
            await c.send(message(body[1][0], 1, b"m"))

    async def on_ack(c: PeerConn, body: dict[int, list[Any]]) -> None:
        if 6 in body:  # in a transaction: never answered; the consumer is closed instead
            await c.send(frame(command(CLOSE_CONSUMER, f_varint(1, body[1][0]) + f_varint(2, 1_000_000))))

    overrides = _coordinator(ended) | {SUBSCRIBE: on_subscribe, FLOW: on_flow, ACK: on_ack}
    with fake_client(after_handshake(overrides), operation_timeout=30, initial_backoff=0.05) as (client, _):
        consumer = run_bounded(lambda: client.subscribe("t", "s"), 15)[0]
        msg, error, _ = run_bounded(lambda: consumer.receive(timeout=10), 15)
        assert error is None, repr(error)
        txn = run_bounded(lambda: client.new_transaction(timeout=60), 15)[0]
        _, error, _ = run_bounded(lambda: consumer.ack(msg, txn=txn), 15)
        assert error is None, repr(error)
        _, error, _ = run_bounded(txn.commit, 20)
        assert isinstance(error, magnetar.TransactionError), repr(error)
        assert "never answered the acknowledgement" in str(error), str(error)
        assert len(subscribes) >= 2, f"not subscribed again: {subscribes}"
        assert ended == [ABORT], f"EndTxn actions {ended}: the transaction was not aborted"

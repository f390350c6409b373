"""Nothing hangs and nothing is lost silently (issue 11, part 4): an actor that panics fails
what it held; flush() and close() report failed sends; open batches are flushed at exit; a
child forked while I/O threads are busy works and exits normally; a slow callback delays only
its own client.

Scenarios that need a fresh interpreter (test hooks, interpreter exit, fork) run as scripts in
a subprocess; the subprocess timeouts below only keep a hang from stalling the suite."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest

import magnetar
from test_fake_peer import SEND, FakePeer, PeerConn
from waiting import wait_until

# Jobs a client's dispatch queue holds before its sends wait (dispatch.rs, MAX_BACKLOG).
DISPATCH_QUEUE_LIMIT = 16_384
HANG_GUARD = 120.0


def run_script(body: str, *, env: dict[str, str] | None = None, timeout: float = HANG_GUARD) -> subprocess.CompletedProcess[str]:
    """Runs ``body`` (dedented) in a fresh interpreter and returns its outcome."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(body)], env=full_env, capture_output=True,
                          text=True, timeout=timeout)


def assert_ok(result: subprocess.CompletedProcess[str], marker: str = "OK") -> None:
    assert result.returncode == 0 and marker in result.stdout, (
        f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr[-4000:]}")


def receive_all(client: magnetar.Client, topic: str, n: int) -> list[bytes]:
    consumer = client.subscribe(topic, "check", initial_position="earliest")
    got = [consumer.receive(timeout=30).data for _ in range(n)]
    consumer.close()
    return got


# --------------------------------------------------------------------------- an actor panics


def test_panicking_producer_fails_its_pending_sends_and_flush(service_url: str, topic: str) -> None:
    result = run_script(f"""
        import threading, magnetar
        client = magnetar.Client({service_url!r})
        producer = client.create_producer({topic!r}, batch_max_delay=60.0)
        called = []
        done = threading.Event()
        def on_done(f):
            called.append(f.exception())
            if len(called) == 5:
                done.set()
        futures = [producer.send_async(b"x", callback=on_done) for _ in range(5)]
        assert magnetar._core._inject_actor_panic({topic!r}) == 1
        for f in futures:
            e = f.exception(timeout=60)
            assert isinstance(e, magnetar.PulsarError) and "stopped" in str(e), repr(e)
        assert done.wait(60) and all(isinstance(e, magnetar.PulsarError) for e in called), called
        for op in (producer.flush, lambda: producer.send(b"y")):
            try:
                op()
                raise SystemExit("no error after the panic")
            except magnetar.AlreadyClosed:
                pass
        # The client goes on: the panicked producer's memory and slots were handed back.
        other = client.create_producer({topic!r} + "-other")
        other.send(b"z")
        producer.close()
        client.close()
        print("OK")
    """, env={"MAGNETAR_TEST_HOOKS": "1"})
    assert_ok(result)
    assert "panicked" in result.stderr  # logged on the magnetar logger


def test_panicking_consumer_wakes_blocked_receivers(service_url: str, topic: str) -> None:
    result = run_script(f"""
        import asyncio, sys, threading, time, magnetar
        client = magnetar.Client({service_url!r})
        consumer = client.subscribe({topic!r}, "s")
        outcome = []
        def receive():
            try:
                consumer.receive()
                outcome.append("a message")
            except magnetar.PulsarError as e:
                outcome.append(e)
        t = threading.Thread(target=receive)
        t.start()

        def blocked_in_receive():
            frame = sys._current_frames().get(t.ident)
            return frame is not None and frame.f_code.co_name == "receive"

        async def async_side():
            async with magnetar.AsyncClient({service_url!r}) as aclient:
                aconsumer = await aclient.subscribe({topic!r}, "s2")
                waiter = asyncio.ensure_future(aconsumer.receive())
                # Both receivers wait before the panic: the blocking one inside receive, the
                # asyncio one suspended on the engine's future (one loop step starts it).
                deadline = time.monotonic() + 30
                while not (blocked_in_receive() and waiter.get_coro().cr_await is not None):
                    assert time.monotonic() < deadline, "the receivers never started waiting"
                    await asyncio.sleep(0.01)
                assert magnetar._core._inject_actor_panic({topic!r}) == 2
                try:
                    await asyncio.wait_for(waiter, 60)
                    return "a message"
                except magnetar.PulsarError as e:
                    return e
        async_outcome = asyncio.run(async_side())
        t.join(60)
        assert not t.is_alive(), "receive() still blocked"
        for e in (outcome[0], async_outcome):
            assert isinstance(e, magnetar.PulsarError) and "panic" in str(e), repr(e)
        client.close()
        print("OK")
    """, env={"MAGNETAR_TEST_HOOKS": "1"})
    assert_ok(result)


def test_test_hooks_are_off_unless_asked_for(topic: str) -> None:
    with pytest.raises(magnetar.InvalidConfiguration, match="MAGNETAR_TEST_HOOKS"):
        magnetar._core._inject_actor_panic(topic)


# --------------------------------------------------------------------------- flush and close report failures


async def _never_acknowledging(conn: PeerConn) -> None:
    """A broker that stores nothing: it takes sends and never answers them."""

    async def ignore(_conn: PeerConn, _body: dict[int, list[Any]]) -> None:
        pass

    if await conn.handshake():
        await conn.serve({SEND: ignore})


@pytest.mark.parametrize("how", ["flush", "close"])
def test_flush_and_close_count_the_messages_they_waited_for_that_failed(how: str) -> None:
    with FakePeer(_never_acknowledging) as peer:
        client = magnetar.Client(peer.url, operation_timeout=5.0)
        try:
            # Batched until the flush or close, so their send timeout starts there.
            producer = client.create_producer("t", batch_max_delay=60.0, send_timeout=1.0)
            futures = [producer.send_async(b"x") for _ in range(3)]
            with pytest.raises(magnetar.Timeout, match=rf"3 message\(s\) that {how}\(\) waited for failed"):
                getattr(producer, how)()
            assert all(isinstance(f.exception(timeout=30), magnetar.Timeout) for f in futures)
        finally:
            client.close()


def test_flush_and_close_raise_when_the_topic_is_terminated(client: magnetar.Client, broker: Any,
                                                           topic: str) -> None:
    producer = client.create_producer(topic, batch_max_delay=60.0)
    producer.send(b"stored")
    futures = [producer.send_async(b"x") for _ in range(3)]
    broker.terminate_topic(topic)
    with pytest.raises(magnetar.TopicTerminated):
        producer.flush()
    assert all(isinstance(f.exception(timeout=30), magnetar.TopicTerminated) for f in futures)
    with pytest.raises(magnetar.TopicTerminated):
        producer.close()
    producer.close()  # closing again is quiet


def test_async_flush_raises_once_the_producer_failed(service_url: str, broker: Any, topic: str) -> None:
    async def main() -> None:
        async with magnetar.AsyncClient(service_url) as aclient:
            producer = await aclient.create_producer(topic)
            await producer.send(b"stored")
            broker.terminate_topic(topic)
            with pytest.raises(magnetar.TopicTerminated):
                await producer.send(b"refused")
            with pytest.raises(magnetar.TopicTerminated):
                await producer.flush()

    asyncio.run(main())


def test_flush_and_close_are_quiet_when_everything_was_stored(client: magnetar.Client, topic: str) -> None:
    producer = client.create_producer(topic, batch_max_delay=60.0)
    futures = [producer.send_async(b"%d" % i) for i in range(10)]
    producer.flush()
    assert all(f.done() and f.exception() is None for f in futures)
    producer.send_async(b"last")
    producer.close()
    with pytest.raises(magnetar.AlreadyClosed):
        producer.flush()
    assert receive_all(client, topic, 11)[-1] == b"last"


def test_leaving_a_with_block_by_exception_keeps_that_exception(client: magnetar.Client, broker: Any,
                                                              topic: str) -> None:
    with pytest.raises(KeyError):
        with client.create_producer(topic, batch_max_delay=60.0) as producer:
            producer.send(b"stored")
            producer.send_async(b"x")
            broker.terminate_topic(topic)
            raise KeyError("the application's own error")


# --------------------------------------------------------------------------- interpreter exit


def test_open_batches_are_flushed_at_exit(service_url: str, client: magnetar.Client, topic: str) -> None:
    result = run_script(f"""
        import magnetar
        client = magnetar.Client({service_url!r})
        producer = client.create_producer({topic!r}, batch_max_delay=60.0)
        for i in range(7):
            producer.send_async(b"m%d" % i)
        print("OK")  # and exit without flush or close
    """)
    assert_ok(result)
    assert "at exit" not in result.stderr, result.stderr
    assert receive_all(client, topic, 7) == [b"m%d" % i for i in range(7)]


def test_exit_warns_how_many_messages_may_be_lost_on_which_topic() -> None:
    with FakePeer(_never_acknowledging) as peer:
        result = run_script(f"""
            import logging, magnetar
            logging.basicConfig()  # the warning goes to the "magnetar" logger; show it on stderr
            client = magnetar.Client({peer.url!r})
            producer = client.create_producer("persistent://public/default/t", batch_max_delay=60.0, send_timeout=0)
            for i in range(5):
                producer.send_async(b"never acknowledged")
            print("OK")
        """, env={"MAGNETAR_EXIT_FLUSH_TIMEOUT": "1"})
    assert_ok(result)
    assert "at exit, persistent://public/default/t: 5 message(s) were not acknowledged within 1.0 s and may be lost" in result.stderr, result.stderr


def test_interpreter_exit_while_engine_threads_call_into_python(service_url: str, topic: str) -> None:
    """At exit, callbacks are streaming on a dispatch thread, a daemon thread is blocked in
    receive(), and asyncio completions were just delivered. A thread that takes the GIL while
    the interpreter finalizes is ended with a forced unwind that aborts a Rust thread ("FATAL:
    exception not rethrown"); magnetar's exit handler keeps its threads out of Python from then
    on. The race is narrow, so the exit is tried a few times."""
    script = f"""
        import asyncio, threading, magnetar
        client = magnetar.Client({service_url!r})
        producer = client.create_producer({topic!r}, batch_max_delay=0.001)
        consumer = client.subscribe({topic!r} + "-idle", "s")
        streaming = threading.Event()
        def produce():
            while True:
                producer.send_async(b"p", callback=lambda f: streaming.set())
        threading.Thread(target=produce, daemon=True).start()
        threading.Thread(target=consumer.receive, daemon=True).start()
        async def async_sends():
            async with magnetar.AsyncClient({service_url!r}) as aclient:
                p = await aclient.create_producer({topic!r} + "-async")
                await asyncio.gather(*(p.send(b"a") for _ in range(2000)))
        asyncio.run(async_sends())
        streaming.wait(60)
        print("OK")
    """
    for _ in range(3):
        result = run_script(script)
        assert_ok(result)
        assert "FATAL" not in result.stderr, result.stderr


# --------------------------------------------------------------------------- fork


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork does not exist here (Windows)")
def test_fork_while_completions_stream(service_url: str, topic: str) -> None:
    """The parent forks while a send_async loop's callbacks run and a consumer receives. The
    child makes its own client and round-trips a message, finds the inherited objects closed,
    and leaves through normal interpreter shutdown (atexit handlers, object teardown)."""
    result = run_script(f"""
        import os, sys, threading, time, magnetar

        client = magnetar.Client({service_url!r})
        producer = client.create_producer({topic!r}, batch_max_delay=0.001)
        consumer = client.subscribe({topic!r}, "s", initial_position="earliest")
        stop = threading.Event()
        acked, received = [], []
        def produce():
            while not stop.is_set():
                producer.send_async(b"p", callback=lambda f: acked.append(1))
        def consume():
            while not stop.is_set():
                for m in consumer.receive_many(100, 0.05):
                    received.append(1)
                    consumer.ack(m)
        threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
        for t in threads:
            t.start()
        while len(acked) < 2000 or len(received) < 2000:  # completions are streaming
            time.sleep(0.01)

        def child() -> int:
            for op in (lambda: producer.send(b"x"), lambda: client.create_producer({topic!r}),
                       lambda: consumer.receive(timeout=1)):
                try:
                    op()
                    return 10
                except magnetar.AlreadyClosed:
                    pass
            own = magnetar.Client({service_url!r})
            p = own.create_producer({topic!r} + "-child")
            c = own.subscribe({topic!r} + "-child", "s", initial_position="earliest")
            p.send(b"from child")
            assert c.receive(timeout=30).data == b"from child"
            p.send_async(b"open batch at exit")  # flushed by the child's own exit handler
            return 0

        pid = os.fork()
        if pid == 0:
            sys.exit(child())  # normal interpreter shutdown, not os._exit
        deadline = time.monotonic() + 60
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                raise SystemExit("the child did not exit within 60 s")
            time.sleep(0.05)
        stop.set()
        for t in threads:
            t.join()
        assert os.waitstatus_to_exitcode(status) == 0, status
        check = client.subscribe({topic!r} + "-child", "check", initial_position="earliest")
        assert [check.receive(timeout=30).data for _ in range(2)] == [b"from child", b"open batch at exit"]
        client.close()
        print("OK")
    """)
    assert_ok(result)


# --------------------------------------------------------------------------- callbacks of one client


def test_a_slow_callback_delays_only_its_own_client(service_url: str, topic: str) -> None:
    slow = magnetar.Client(service_url)
    fast = magnetar.Client(service_url)
    try:
        release, entered = threading.Event(), threading.Event()
        slow_producer = slow.create_producer(topic)

        def block(_: Any) -> None:
            entered.set()
            release.wait()

        slow_producer.send_async(b"blocks", callback=block)
        assert entered.wait(60)
        later = threading.Event()
        slow_producer.send_async(b"after", callback=lambda f: later.set())

        # The other client's callbacks run ...
        fast_producer = fast.create_producer(topic)
        all_called = threading.Event()
        called: list[int] = []

        def count(_: Any) -> None:
            called.append(1)
            if len(called) == 100:
                all_called.set()

        for i in range(100):
            fast_producer.send_async(b"%d" % i, callback=count)
        assert all_called.wait(60), f"{len(called)} of 100 callbacks ran"

        # ... and so do asyncio completions of a third client.
        async def round_trip() -> bytes:
            async with magnetar.AsyncClient(service_url) as aclient:
                consumer = await aclient.subscribe(topic + "-async", "s")
                producer = await aclient.create_producer(topic + "-async")
                await producer.send(b"async")
                return (await consumer.receive(timeout=30)).data

        assert asyncio.run(round_trip()) == b"async"
        assert not later.is_set()  # the slow client's own callbacks still wait their turn
    finally:
        release.set()
    assert later.wait(60)
    fast.close()
    slow.close()


def test_a_full_callback_queue_makes_that_clients_sends_wait(service_url: str, topic: str) -> None:
    client = magnetar.Client(service_url)
    release, entered = threading.Event(), threading.Event()
    try:
        blocking = client.create_producer(topic, max_pending=DISPATCH_QUEUE_LIMIT + 10)
        failing = client.create_producer(topic, block_if_full=False)
        def block(_: Any) -> None:
            entered.set()
            release.wait()

        blocking.send_async(b"blocks", callback=block)
        assert entered.wait(60)
        # Fill the queue: the blocked job plus LIMIT - 1 completions waiting for their callbacks.
        futures = [blocking.send_async(b"q", callback=lambda f: None) for _ in range(DISPATCH_QUEUE_LIMIT - 1)]
        for f in futures:
            f.result(timeout=60)
        with pytest.raises(magnetar.ProducerQueueFull, match="callback queue"):
            failing.send_async(b"refused")
        order: list[str] = []

        def send_that_waits() -> None:
            blocking.send_async(b"waits").result(timeout=60)
            order.append("returned")

        waited = threading.Thread(target=send_that_waits)
        waited.start()
        # The send waits for room in the full queue: it has not returned after a while, and
        # returns once the callback is released and the queue drains.
        assert not wait_until(lambda: bool(order), 3), "send_async returned while the callback queue was full"
        order.append("released")
    finally:
        release.set()
    waited.join(60)
    assert not waited.is_alive()
    assert order == ["released", "returned"]
    failing.send_async(b"accepted").result(timeout=60)
    client.close()

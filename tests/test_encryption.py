"""End-to-end encryption on the real broker: round trips (single, batched, chunked, readers),
what each crypto failure action does with a message the consumer cannot decrypt, key readers
of the application's own, configuration errors, hostile encryption metadata, and interop with
the official client both ways."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any, Mapping

import pytest

import magnetar
from magnetar.testing import Standalone
from test_fake_peer import f_bytes
from test_hostile_messages import RawProducer, _corrupt_count, _meta
from waiting import wait_until

KEYS = Path(__file__).parent / "keys"
PUBLIC, PRIVATE = KEYS / "app-public.pem", KEYS / "app-private.pem"
OTHER_PRIVATE = KEYS / "other-private.pem"


def reader(private: Path | None = PRIVATE) -> magnetar.CryptoKeyReader:
    return magnetar.CryptoKeyReader(PUBLIC, private)


def encrypting(api: Any, topic: str, **options: Any) -> Any:
    options.setdefault("batching", False)
    return api.call(api.client, "create_producer", topic, encryption_keys=["app"], crypto_key_reader=reader(),
                    **options)


def test_round_trip_and_the_broker_stores_ciphertext(api, topic):
    consumer = api.call(api.client, "subscribe", topic, "s", initial_position="earliest", crypto_key_reader=reader())
    raw = api.call(api.client, "subscribe", topic, "raw", initial_position="earliest", crypto_failure_action="consume")
    producer = encrypting(api, topic, compression="lz4")
    api.call(producer, "send", b"secret payload " * 10, key="k", properties={"p": "v"})

    msg = api.call(consumer, "receive", timeout=10)
    assert msg.data == b"secret payload " * 10
    assert (msg.key, msg.properties) == ("k", {"p": "v"})
    ctx = msg.encryption
    assert ctx is not None and not ctx.decryption_failed
    [(name, wrapped, meta)] = ctx.keys
    assert (name, len(wrapped), meta) == ("app", 256, {})
    assert len(ctx.param) == 12 and ctx.algorithm == ""
    assert (ctx.compression, ctx.uncompressed_size, ctx.batch_size) == ("lz4", 150, -1)

    # What the broker holds is not the payload: compressed, then sealed with a 16-byte tag.
    sealed = api.call(raw, "receive", timeout=10)
    assert sealed.encryption.decryption_failed
    assert b"secret" not in sealed.data
    assert sealed.encryption.keys[0][1] == wrapped


def test_batches_are_encrypted_whole_and_split_after_decryption(api, topic):
    consumer = api.call(api.client, "subscribe", topic, "s", initial_position="earliest", crypto_key_reader=reader())
    producer = encrypting(api, topic, batching=True, batch_max_delay=60.0, batch_max_messages=5)
    api.call(producer, "send_many", [f"m{i}".encode() for i in range(5)])
    got = [api.call(consumer, "receive", timeout=10) for _ in range(5)]
    assert [m.data for m in got] == [f"m{i}".encode() for i in range(5)]
    assert {m.message_id.batch_index for m in got} == set(range(5))
    assert all(m.encryption.batch_size == 5 for m in got)

    # Undecryptable, the batch comes whole, as one still-encrypted message.
    raw = api.call(api.client, "subscribe", topic, "raw", initial_position="earliest", crypto_failure_action="consume")
    whole = api.call(raw, "receive", timeout=10)
    assert whole.encryption.decryption_failed and whole.encryption.batch_size == 5
    assert whole.message_id.batch_index == -1
    api.call(raw, "ack", whole)


def test_a_chunked_message_is_encrypted_chunk_by_chunk(client, topic):
    consumer = client.subscribe(topic, "s", initial_position="earliest", crypto_key_reader=reader())
    producer = client.create_producer(topic, chunking=True, batching=False, encryption_keys=["app"],
                                      crypto_key_reader=reader(), compression="zstd")
    big = os.urandom(3 * 1024 * 1024) * 2  # compresses to about 3 MiB; chunked beyond 5 MiB only uncompressed
    producer.send(big + os.urandom(3 * 1024 * 1024))
    msg = consumer.receive(timeout=30)
    assert msg.data[: len(big)] == big and len(msg.data) == 9 * 1024 * 1024
    assert msg.first_chunk_message_id is not None
    assert not msg.encryption.decryption_failed


def test_a_reader_decrypts(api, topic):
    producer = encrypting(api, topic)
    first = api.call(producer, "send", b"one")
    api.call(producer, "send", b"two")
    r = api.call(api.client, "create_reader", topic, start=magnetar.MessageId.earliest, crypto_key_reader=reader())
    assert [api.call(r, "read_next", timeout=10).data for _ in range(2)] == [b"one", b"two"]
    r2 = api.call(api.client, "create_reader", topic, start=first, crypto_failure_action="consume")
    assert api.call(r2, "read_next", timeout=10).encryption.decryption_failed


# What a consumer that cannot decrypt does: with a wrong private key, and with no key reader.
NO_KEY = [pytest.param({"crypto_key_reader": reader(OTHER_PRIVATE)}, id="wrong-key"),
          pytest.param({}, id="no-reader")]


@pytest.mark.parametrize("no_key", NO_KEY)
def test_fail_leaves_the_message_unacked_for_a_consumer_with_the_key(client, topic, no_key):
    plain = client.create_producer(topic, batching=False)
    client.create_producer(topic, encryption_keys=["app"], crypto_key_reader=reader(), batching=False).send(b"locked")
    plain.send(b"open")
    consumer = client.subscribe(topic, "s", initial_position="earliest", **no_key)  # "fail" is the default
    # The encrypted message is passed over, the next one delivered.
    nxt = consumer.receive(timeout=10)
    assert nxt.data == b"open"
    consumer.ack(nxt)
    consumer.close()
    keyed = client.subscribe(topic, "s", crypto_key_reader=reader())
    assert keyed.receive(timeout=10).data == b"locked"


@pytest.mark.parametrize("no_key", NO_KEY)
def test_discard_acks_and_drops_the_message(client, topic, no_key):
    plain = client.create_producer(topic, batching=False)
    client.create_producer(topic, encryption_keys=["app"], crypto_key_reader=reader(), batching=False).send(b"locked")
    plain.send(b"open")
    consumer = client.subscribe(topic, "s", initial_position="earliest", crypto_failure_action="discard", **no_key)
    nxt = consumer.receive(timeout=10)
    assert nxt.data == b"open"
    assert _corrupt_count(consumer) == 1
    consumer.ack(nxt)
    consumer.close()
    plain.send(b"after")
    keyed = client.subscribe(topic, "s", crypto_key_reader=reader())
    assert keyed.receive(timeout=10).data == b"after"  # "locked" was acked


@pytest.mark.parametrize("no_key", NO_KEY)
def test_consume_delivers_the_message_encrypted(api, topic, no_key):
    producer = encrypting(api, topic)
    api.call(producer, "send", b"locked")
    consumer = api.call(api.client, "subscribe", topic, "s", initial_position="earliest",
                        crypto_failure_action=magnetar.CryptoFailureAction.CONSUME, **no_key)
    msg = api.call(consumer, "receive", timeout=10)
    assert msg.encryption.decryption_failed
    assert msg.data != b"locked" and len(msg.data) == len(b"locked") + 16


class VersionedKeys(magnetar.CryptoKeyReader):
    """A reader of the application's own: keys by name, with a version stored in each message."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[str, dict[str, str]]] = []

    def get_public_key(self, key_name: str, metadata: Mapping[str, str]) -> Any:
        return PUBLIC.read_text(), {"version": "7"}

    def get_private_key(self, key_name: str, metadata: Mapping[str, str]) -> Any:
        self.asked.append((key_name, dict(metadata)))
        return (KEYS / "app-private-pkcs8.pem").read_bytes()


def test_a_reader_of_ones_own_with_key_metadata_and_a_pkcs8_key(client, topic):
    keys = VersionedKeys()
    producer = client.create_producer(topic, encryption_keys=["app", "backup"], crypto_key_reader=keys)
    consumer = client.subscribe(topic, "s", initial_position="earliest", crypto_key_reader=keys)
    for i in range(3):
        producer.send(f"v{i}".encode())
    got = [consumer.receive(timeout=10) for _ in range(3)]
    assert [m.data for m in got] == [b"v0", b"v1", b"v2"]
    assert [(k[0], k[2]) for k in got[0].encryption.keys] == [("app", {"version": "7"}), ("backup", {"version": "7"})]
    # One private-key lookup: the data key is cached for the messages after the first.
    assert keys.asked == [("app", {"version": "7"})]


class Failing(magnetar.CryptoKeyReader):
    def get_public_key(self, key_name: str, metadata: Mapping[str, str]) -> Any:
        raise LookupError(f"no key {key_name}")


@pytest.mark.parametrize(("options", "error", "words"), [
    ({"encryption_keys": ["app"]}, magnetar.InvalidConfiguration, "needs a crypto_key_reader"),
    ({"crypto_key_reader": reader()}, magnetar.InvalidConfiguration, "encrypts nothing"),
    ({"encryption_keys": [""], "crypto_key_reader": reader()}, magnetar.InvalidConfiguration, "must not be empty"),
    ({"encryption_keys": [1], "crypto_key_reader": reader()}, magnetar.InvalidConfiguration, "list of key names"),
    ({"encryption_keys": ["app"], "crypto_key_reader": object()}, magnetar.InvalidConfiguration, "get_public_key"),
    ({"encryption_keys": ["app"], "crypto_key_reader": Failing()}, magnetar.CryptoError, "no key app"),
    ({"encryption_keys": ["app"], "crypto_key_reader": magnetar.CryptoKeyReader(PRIVATE)}, magnetar.CryptoError,
     "not a usable RSA public key"),
    ({"encryption_keys": ["app"], "crypto_key_reader": magnetar.CryptoKeyReader(KEYS / "ec-public.pem")},
     magnetar.CryptoError, "not a usable RSA public key"),
    ({"encryption_keys": ["app"], "crypto_key_reader": magnetar.CryptoKeyReader(KEYS / "missing.pem")},
     magnetar.CryptoError, "missing.pem"),
])
def test_producer_key_errors_fail_its_creation(api, topic, options, error, words):
    with pytest.raises(error, match=words):
        api.call(api.client, "create_producer", topic, **options)


def test_consumer_option_errors(api, topic):
    with pytest.raises(magnetar.InvalidConfiguration, match="crypto_failure_action"):
        api.call(api.client, "subscribe", topic, "s", crypto_failure_action="explode")
    with pytest.raises(magnetar.InvalidConfiguration, match="get_private_key"):
        api.call(api.client, "subscribe", topic, "s", crypto_key_reader="keys.pem")


def test_hostile_encryption_metadata_is_a_per_message_failure(broker: Standalone, service_url):
    """Encryption metadata is the producer's word: garbage keys, an IV of the wrong size, no IV
    at all. Each such message is discarded on its own; the consumer goes on."""
    topic = f"persistent://public/default/hostile-crypto-{uuid.uuid4().hex[:10]}"
    with magnetar.Client(service_url, operation_timeout=20) as client:
        client.create_producer(topic).close()
        raw = RawProducer(broker.port, topic)
        try:
            key = lambda value: f_bytes(13, f_bytes(1, "app") + f_bytes(2, value))  # noqa: E731
            raw.publish(_meta(0, extra=key(b"\x00" * 256) + f_bytes(15, b"\x01" * 12)), b"x" * 40)
            raw.publish(_meta(1, extra=key(os.urandom(300)) + f_bytes(15, b"\x01" * 3)), b"x" * 40)
            raw.publish(_meta(2, extra=key(b"")), b"")
            raw.publish(_meta(3, batch=2, extra=key(b"\xff" * 256) + f_bytes(15, b"\x02" * 12)), b"\x00" * 8, 2)
            raw.publish(_meta(4), b"good")
        finally:
            raw.close()
        consumer = client.subscribe(topic, "s", initial_position="earliest", crypto_key_reader=reader(),
                                    crypto_failure_action="discard")
        assert consumer.receive(timeout=20).data == b"good"
        assert _corrupt_count(consumer) == 4


@pytest.mark.interop
def test_interop_with_the_official_client_both_ways(service_url, client, topic):
    import pulsar

    official = pulsar.Client(service_url)
    keys = pulsar.CryptoKeyReader(str(PUBLIC), str(PRIVATE))
    try:
        # official (batched, compressed) -> magnetar
        mine = client.subscribe(topic, "mine", initial_position="earliest", crypto_key_reader=reader())
        producer = official.create_producer(topic, encryption_key="app", crypto_key_reader=keys,
                                            compression_type=pulsar.CompressionType.ZLib, batching_enabled=True)
        for i in range(3):
            producer.send_async(f"from-official-{i}".encode(), None)
        producer.flush()
        producer.send(b"single")
        got = [mine.receive(timeout=10) for _ in range(4)]
        assert [m.data for m in got] == [b"from-official-0", b"from-official-1", b"from-official-2", b"single"]
        assert got[0].encryption.keys[0][0] == "app" and got[0].encryption.compression == "zlib"

        # magnetar (batched and not, compressed) -> official
        other = topic + "-2"
        theirs = official.subscribe(other, "theirs", initial_position=pulsar.InitialPosition.Earliest,
                                    crypto_key_reader=keys)
        batched = client.create_producer(other, encryption_keys=["app"], crypto_key_reader=reader(),
                                         compression="lz4", batching=True)
        futures = [batched.send_async(f"from-magnetar-{i}".encode()) for i in range(3)]
        for f in futures:
            f.result()
        client.create_producer(other, encryption_keys=["app"], crypto_key_reader=reader(), batching=False).send(b"one")
        received = [theirs.receive(10_000) for _ in range(4)]
        assert [m.data() for m in received] == [b"from-magnetar-0", b"from-magnetar-1", b"from-magnetar-2", b"one"]
        assert all(not m.encryption_context().is_decryption_failed() for m in received)
    finally:
        official.close()


def test_compat_names_and_encryption_context(service_url, topic):
    import magnetar.compat as pulsar

    client = pulsar.Client(service_url)
    try:
        keys = pulsar.CryptoKeyReader(str(PUBLIC), str(PRIVATE))
        consumer = client.subscribe(topic, "s", crypto_key_reader=keys)
        raw = client.subscribe(topic, "raw", crypto_failure_action=pulsar.ConsumerCryptoFailureAction.CONSUME)
        producer = client.create_producer(topic, encryption_key="app", crypto_key_reader=keys,
                                          compression_type=pulsar.CompressionType.LZ4)
        producer.send(b"compat")
        msg = consumer.receive(10_000)
        assert msg.data() == b"compat"
        ctx = msg.encryption_context()
        assert ctx is not None
        assert [(k.key, len(k.value), k.metadata) for k in ctx.keys()] == [("app", 256, {})]
        assert (ctx.algorithm(), len(ctx.param()), ctx.compression_type()) == ("", 12, pulsar.CompressionType.LZ4)
        assert (ctx.uncompressed_message_size(), ctx.batch_size(), ctx.is_decryption_failed()) == (6, -1, False)
        undecrypted = raw.receive(10_000).encryption_context()
        assert undecrypted is not None and undecrypted.is_decryption_failed()
        # As the official client: a key name without a reader (or a reader without a name)
        # encrypts nothing.
        client.create_producer(topic, encryption_key="app").send(b"plain")
        assert consumer.receive(10_000).encryption_context() is None
        with pytest.raises(pulsar.CryptoError, match="no-such-key.pem"):
            client.create_producer(topic, encryption_key="app",
                                   crypto_key_reader=pulsar.CryptoKeyReader("no-such-key.pem", str(PRIVATE)))
    finally:
        client.close()


class LateKey(magnetar.CryptoKeyReader):
    """A private key that is not there at first (a key store being filled), then is."""

    def __init__(self) -> None:
        super().__init__(PUBLIC, PRIVATE)
        self.ready = False
        self.refused = 0

    def get_private_key(self, key_name: str, metadata: Mapping[str, str]) -> Any:
        if not self.ready:
            self.refused += 1
            raise LookupError("not yet")
        return super().get_private_key(key_name, metadata)


def test_fail_with_an_ack_timeout_redelivers_until_the_key_is_there(client, topic):
    keys = LateKey()
    consumer = client.subscribe(topic, "s", initial_position="earliest", crypto_key_reader=keys, ack_timeout=1.0)
    client.create_producer(topic, encryption_keys=["app"], crypto_key_reader=reader(), batching=False).send(b"late")
    assert wait_until(lambda: keys.refused >= 1, timeout=10)
    keys.ready = True
    msg = consumer.receive(timeout=20)  # redelivered after the ack timeout, decrypted this time
    assert msg.data == b"late"


@pytest.fixture(scope="module")
def java_encryption(tmp_path_factory):
    from jvm import java_program

    return java_program(tmp_path_factory.mktemp("java-encryption"),
                        Path(__file__).parent / "interop" / "EncryptionInterop.java")


def test_interop_with_the_java_client_both_ways(service_url, client, topic, java_encryption):
    # Java (batched, LZ4) -> magnetar
    java_encryption("produce", service_url, topic, str(PUBLIC), "3")
    mine = client.subscribe(topic, "mine", initial_position="earliest", crypto_key_reader=reader())
    assert [mine.receive(timeout=10).data for _ in range(3)] == [b"java-0", b"java-1", b"java-2"]

    # magnetar (batched, zstd, and a single message) -> Java
    other = topic + "-2"
    client.create_producer(other, encryption_keys=["app"], crypto_key_reader=reader(), compression="zstd",
                           batching=True).send_many([b"m-0", b"m-1"])
    client.create_producer(other, encryption_keys=["app"], crypto_key_reader=reader(), batching=False).send(b"m-2")
    out = java_encryption("consume", service_url, other, str(PRIVATE), "3")
    assert [line for line in out if line.startswith("MSG")] == [f"MSG {b.hex()} app" for b in (b"m-0", b"m-1", b"m-2")]

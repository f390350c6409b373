"""The official client's ``EncryptionKey`` and ``EncryptionContext`` (``msg.encryption_context()``)
over magnetar's :class:`magnetar.EncryptionContext`."""

from __future__ import annotations

from .._core import EncryptionContext as _NativeContext
from ._pulsar import CompressionType

__all__ = ["EncryptionContext", "EncryptionKey"]

_CODECS = {None: CompressionType.NONE, "lz4": CompressionType.LZ4, "zlib": CompressionType.ZLib,
           "zstd": CompressionType.ZSTD, "snappy": CompressionType.SNAPPY}


class EncryptionKey:
    """One encrypted data key of a message: the key's name, the RSA-encrypted data key, and the
    metadata stored with it."""

    def __init__(self, key: str, value: bytes, metadata: dict[str, str]) -> None:
        self._key, self._value, self._metadata = key, value, metadata

    @property
    def key(self) -> str:
        return self._key

    @property
    def value(self) -> bytes:
        return self._value

    @property
    def metadata(self) -> dict[str, str]:
        return self._metadata

    def __str__(self) -> str:
        return f"EncryptionKey(key={self.key}, value_len={len(self.value)}, metadata={self.metadata})"

    __repr__ = __str__


class EncryptionContext:
    """How a message was encrypted; with ``ConsumerCryptoFailureAction.CONSUME``, what an
    application needs to decrypt it itself."""

    def __init__(self, context: _NativeContext) -> None:
        self._c = context

    def keys(self) -> list[EncryptionKey]:
        return [EncryptionKey(*k) for k in self._c.keys]

    def param(self) -> bytes:
        return self._c.param

    def algorithm(self) -> str:
        return self._c.algorithm

    def compression_type(self) -> CompressionType:
        return _CODECS[self._c.compression]

    def uncompressed_message_size(self) -> int:
        return self._c.uncompressed_size

    def batch_size(self) -> int:
        return self._c.batch_size

    def is_decryption_failed(self) -> bool:
        return self._c.decryption_failed

    def __str__(self) -> str:
        return (f"EncryptionContext(algorithm={self.algorithm()}, compression_type={self.compression_type().name}, "
                f"uncompressed_message_size={self.uncompressed_message_size()}, "
                f"is_decryption_failed={self.is_decryption_failed()}, "
                f"keys=[{', '.join(str(key) for key in self.keys())}])")

    __repr__ = __str__

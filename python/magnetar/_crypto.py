"""End-to-end encryption: where a producer's public keys and a consumer's private keys come from.

A producer with ``encryption_keys=["name", ...]`` and a ``crypto_key_reader`` encrypts each
payload (after compression) with AES-256-GCM under a random data key, and the data key with the
RSA public key of each name (RSA-OAEP), as the Java and C++ clients do; a consumer with the
matching private key decrypts. The broker only ever sees ciphertext.
"""

from __future__ import annotations

import os
from typing import Mapping, Tuple, Union

__all__ = ["CryptoKeyReader", "KeyBytes"]

KeyBytes = Union[bytes, str, Tuple[Union[bytes, str], Mapping[str, str]]]
"""What a key reader returns: the key as PEM (text or bytes) or DER bytes, or a pair of the key
and metadata to store beside the encrypted data key in each message (a key version, say)."""


class CryptoKeyReader:
    """Supplies RSA keys by name, from two PEM files by default (the official client's
    ``CryptoKeyReader(public_key_path, private_key_path)``: every name gets the same pair).

    Public keys may be SubjectPublicKeyInfo (``BEGIN PUBLIC KEY``) or PKCS#1; private keys PKCS#1
    (``BEGIN RSA PRIVATE KEY``) or unencrypted PKCS#8 (``BEGIN PRIVATE KEY``). A producer needs
    only the public key, a consumer only the private one. For keys held elsewhere (a key store,
    a secrets manager, one pair per name), subclass and override :meth:`get_public_key` and
    :meth:`get_private_key`; they are called when a producer starts and every four hours when it
    draws a new data key, and when a consumer meets a data key it has not seen, on an engine
    thread (so keep them quick). An exception they raise fails the producer's creation, or
    makes the message undecryptable (see ``crypto_failure_action``).
    """

    def __init__(self, public_key_path: str | os.PathLike[str] | None = None,
                 private_key_path: str | os.PathLike[str] | None = None) -> None:
        self.public_key_path = None if public_key_path is None else os.fspath(public_key_path)
        self.private_key_path = None if private_key_path is None else os.fspath(private_key_path)

    def get_public_key(self, key_name: str, metadata: Mapping[str, str]) -> KeyBytes:
        """The public key named ``key_name``."""
        return _read(self.public_key_path, "public", key_name)

    def get_private_key(self, key_name: str, metadata: Mapping[str, str]) -> KeyBytes:
        """The private key named ``key_name``; ``metadata`` is what the producer's reader
        stored with the data key."""
        return _read(self.private_key_path, "private", key_name)

    def __repr__(self) -> str:
        return f"CryptoKeyReader(public_key_path={self.public_key_path!r}, private_key_path={self.private_key_path!r})"


def _read(path: str | None, kind: str, key_name: str) -> bytes:
    if path is None:
        raise LookupError(f"no {kind} key path given, so no {kind} key for {key_name!r}")
    with open(path, "rb") as f:
        return f.read()

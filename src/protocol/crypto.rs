//! End-to-end message encryption as the Java and C++ clients do it, without I/O.
//!
//! A producer draws a random 256-bit data key, encrypts it with the RSA public key of each key
//! name it was given (RSA-OAEP with SHA-1 and MGF1-SHA-1, OpenSSL's `RSA_PKCS1_OAEP_PADDING`),
//! and seals each entry's payload (after compression; each chunk on its own) with AES-256-GCM
//! under a fresh 12-byte IV. The entry's metadata carries the encrypted data keys
//! (`encryption_keys`: name, RSA ciphertext, the key's metadata) and the IV
//! (`encryption_param`); the sealed payload is the ciphertext followed by the 16-byte tag.
//! `encryption_algo` stays unset, as those clients leave it. The data key is drawn again every
//! [`DATA_KEY_LIFETIME`].
//!
//! A consumer unwraps a data key with the RSA private key of one of the names, caches it by
//! its RSA ciphertext (so the expensive RSA step runs once per producer data key), and opens
//! the payload. Everything in the metadata is the peer's word: every length is checked, and a
//! wrong one is an error, never a panic.
//!
//! Key material arrives as PEM text (or DER): public keys as SubjectPublicKeyInfo
//! (`BEGIN PUBLIC KEY`) or PKCS#1 (`BEGIN RSA PUBLIC KEY`), private keys as PKCS#1
//! (`BEGIN RSA PRIVATE KEY`) or PKCS#8 (`BEGIN PRIVATE KEY`). Callers supply it through
//! closures, so where keys come from (files, a key store, Python) is not this module's concern.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aes_gcm::aead::{Aead, KeyInit};
use aes_gcm::{Aes256Gcm, Nonce};
use rand_core::{OsRng, RngCore};
use rsa::pkcs1::{DecodeRsaPrivateKey, DecodeRsaPublicKey};
use rsa::pkcs8::{DecodePrivateKey, DecodePublicKey};
use rsa::{Oaep, RsaPrivateKey, RsaPublicKey};
use thiserror::Error;

use super::pb::{EncryptionKeys, KeyValue, MessageMetadata};

/// Bytes of the AES-256 data key.
pub const DATA_KEY_LEN: usize = 32;
/// Bytes of the AES-GCM IV (`encryption_param`).
pub const IV_LEN: usize = 12;
/// Bytes of the AES-GCM tag that ends a sealed payload.
pub const TAG_LEN: usize = 16;
/// How long a producer uses one data key, as the Java and C++ clients do (their
/// `dataKeyRefreshTask` and data-key cache expiry are both four hours).
pub const DATA_KEY_LIFETIME: Duration = Duration::from_secs(4 * 60 * 60);
/// Most data keys a consumer keeps unwrapped. Only producers holding a public key of this
/// consumer's can add one, and each lives [`DATA_KEY_LIFETIME`]; the bound keeps a pathological
/// number of producers from growing the cache without limit.
pub const MAX_CACHED_DATA_KEYS: usize = 4096;

/// Most of an entry's encrypted data keys a consumer tries. A producer encrypts the data key
/// once per recipient key name, a handful in practice; the bound keeps a hostile entry listing
/// thousands of keys from costing thousands of RSA decryptions (and key lookups).
pub const MAX_KEYS_TRIED: usize = 32;

/// Why a payload could not be sealed or opened.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum CryptoError {
    /// The key supplier failed (no such key, unreadable file...).
    #[error("key {name:?} is not available: {reason}")]
    KeyUnavailable { name: String, reason: String },
    /// Key bytes that are not an RSA key in a known encoding.
    #[error("key {name:?} is not a usable RSA {kind} key: {reason}")]
    BadKey {
        name: String,
        kind: &'static str,
        reason: String,
    },
    /// RSA encryption of the data key failed (a key too small for OAEP).
    #[error("cannot encrypt the data key with key {name:?}: {reason}")]
    Wrap { name: String, reason: String },
    /// The entry's encryption metadata is malformed.
    #[error("malformed encryption metadata: {0}")]
    Metadata(&'static str),
    /// No data key of the entry could be unwrapped with the private keys at hand.
    #[error("no data key of the message could be decrypted (tried {0})")]
    NoDataKey(String),
    /// The payload does not authenticate under the data key: tampered, truncated, or sealed
    /// under another key.
    #[error("the payload does not decrypt (tampered, truncated, or another data key)")]
    Payload,
    /// The system random source failed.
    #[error("no randomness available: {0}")]
    Random(String),
}

/// A key as a key supplier returns it: the key bytes (PEM or DER) and metadata that travels
/// with the encrypted data key (for example a key version).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct KeyInfo {
    /// PEM text or DER bytes.
    pub key: Vec<u8>,
    /// Name/value pairs stored beside the encrypted data key in each message.
    pub metadata: Vec<(String, String)>,
}

impl std::fmt::Debug for KeyInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Private keys pass through here; their bytes never reach a log.
        f.debug_struct("KeyInfo")
            .field("key", &format_args!("<{} bytes>", self.key.len()))
            .field("metadata", &self.metadata)
            .finish()
    }
}

/// A 256-bit AES data key.
#[derive(Clone, PartialEq, Eq)]
pub struct DataKey([u8; DATA_KEY_LEN]);

impl std::fmt::Debug for DataKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DataKey(<redacted>)")
    }
}

fn random(buf: &mut [u8]) -> Result<(), CryptoError> {
    OsRng
        .try_fill_bytes(buf)
        .map_err(|e| CryptoError::Random(e.to_string()))
}

impl DataKey {
    /// A fresh random key.
    pub fn generate() -> Result<DataKey, CryptoError> {
        let mut k = [0u8; DATA_KEY_LEN];
        random(&mut k)?;
        Ok(DataKey(k))
    }

    /// Encrypts this key for the holder of `public` (RSA-OAEP, SHA-1, MGF1-SHA-1).
    pub fn wrap(&self, name: &str, public: &RsaPublicKey) -> Result<Vec<u8>, CryptoError> {
        public
            .encrypt(&mut OsRng, Oaep::new::<sha1::Sha1>(), &self.0)
            .map_err(|e| CryptoError::Wrap {
                name: name.to_string(),
                reason: e.to_string(),
            })
    }

    /// Decrypts a data key wrapped by [`DataKey::wrap`] (or by another client).
    pub fn unwrap(private: &RsaPrivateKey, wrapped: &[u8]) -> Option<DataKey> {
        let plain = private.decrypt(Oaep::new::<sha1::Sha1>(), wrapped).ok()?;
        <[u8; DATA_KEY_LEN]>::try_from(plain.as_slice()).ok().map(DataKey)
    }

    /// AES-256-GCM under `iv`: the ciphertext followed by the tag.
    pub fn seal(&self, iv: &[u8; IV_LEN], plain: &[u8]) -> Result<Vec<u8>, CryptoError> {
        Aes256Gcm::new((&self.0).into())
            .encrypt(Nonce::from_slice(iv), plain)
            .map_err(|_| CryptoError::Payload)
    }

    /// Opens what [`DataKey::seal`] made; `iv` is the peer's and checked here.
    pub fn open(&self, iv: &[u8], sealed: &[u8]) -> Result<Vec<u8>, CryptoError> {
        if iv.len() != IV_LEN {
            return Err(CryptoError::Metadata("encryption_param is not a 12-byte IV"));
        }
        if sealed.len() < TAG_LEN {
            return Err(CryptoError::Payload);
        }
        Aes256Gcm::new((&self.0).into())
            .decrypt(Nonce::from_slice(iv), sealed)
            .map_err(|_| CryptoError::Payload)
    }
}

fn pem_text(bytes: &[u8]) -> Option<&str> {
    std::str::from_utf8(bytes).ok().filter(|s| s.contains("-----BEGIN"))
}

/// An RSA public key from SubjectPublicKeyInfo or PKCS#1, PEM or DER.
pub fn parse_public_key(name: &str, bytes: &[u8]) -> Result<RsaPublicKey, CryptoError> {
    let parsed = match pem_text(bytes) {
        Some(pem) if pem.contains("BEGIN RSA PUBLIC KEY") => {
            RsaPublicKey::from_pkcs1_pem(pem).map_err(|e| e.to_string())
        }
        Some(pem) => RsaPublicKey::from_public_key_pem(pem).map_err(|e| e.to_string()),
        None => RsaPublicKey::from_public_key_der(bytes)
            .or_else(|_| RsaPublicKey::from_pkcs1_der(bytes))
            .map_err(|e| e.to_string()),
    };
    parsed.map_err(|reason| CryptoError::BadKey {
        name: name.to_string(),
        kind: "public",
        reason,
    })
}

/// An RSA private key from PKCS#1 or PKCS#8 (unencrypted), PEM or DER.
pub fn parse_private_key(name: &str, bytes: &[u8]) -> Result<RsaPrivateKey, CryptoError> {
    let parsed = match pem_text(bytes) {
        Some(pem) if pem.contains("BEGIN RSA PRIVATE KEY") => {
            RsaPrivateKey::from_pkcs1_pem(pem).map_err(|e| e.to_string())
        }
        Some(pem) => RsaPrivateKey::from_pkcs8_pem(pem).map_err(|e| e.to_string()),
        None => RsaPrivateKey::from_pkcs8_der(bytes)
            .or_else(|_| RsaPrivateKey::from_pkcs1_der(bytes))
            .map_err(|e| e.to_string()),
    };
    parsed.map_err(|reason| CryptoError::BadKey {
        name: name.to_string(),
        kind: "private",
        reason,
    })
}

/// A producer's encryption state: the current data key and its encryptions for each key name.
#[derive(Debug)]
pub struct Encryptor {
    names: Vec<String>,
    data_key: DataKey,
    wrapped: Vec<EncryptionKeys>,
    drawn_at: Instant,
}

/// Supplies the public key of a name (the producer's side of a key reader).
pub type PublicKeys<'a> = dyn FnMut(&str) -> Result<KeyInfo, String> + 'a;
/// Supplies the private key of a name, given the metadata stored with the data key.
pub type PrivateKeys<'a> = dyn FnMut(&str, &[(String, String)]) -> Result<KeyInfo, String> + 'a;

impl Encryptor {
    /// Draws a data key and encrypts it for every name; any key that cannot be had or used is
    /// an error (a producer must not send what a named recipient cannot read).
    pub fn new(names: &[String], now: Instant, public_keys: &mut PublicKeys<'_>) -> Result<Encryptor, CryptoError> {
        let (data_key, wrapped) = Self::draw(names, public_keys)?;
        Ok(Encryptor {
            names: names.to_vec(),
            data_key,
            wrapped,
            drawn_at: now,
        })
    }

    fn draw(names: &[String], public_keys: &mut PublicKeys<'_>) -> Result<(DataKey, Vec<EncryptionKeys>), CryptoError> {
        if names.is_empty() {
            return Err(CryptoError::Metadata("no encryption key names"));
        }
        let data_key = DataKey::generate()?;
        let mut wrapped = Vec::with_capacity(names.len());
        for name in names {
            let info = public_keys(name).map_err(|reason| CryptoError::KeyUnavailable {
                name: name.clone(),
                reason,
            })?;
            let public = parse_public_key(name, &info.key)?;
            wrapped.push(EncryptionKeys {
                key: name.clone(),
                value: data_key.wrap(name, &public)?.into(),
                metadata: info
                    .metadata
                    .into_iter()
                    .map(|(key, value)| KeyValue { key, value })
                    .collect(),
            });
        }
        Ok((data_key, wrapped))
    }

    /// Draws a new data key once the current one is [`DATA_KEY_LIFETIME`] old. On failure the
    /// current key stays in use (and the next call tries again); the error is returned for the
    /// caller to log.
    pub fn rotate_if_due(&mut self, now: Instant, public_keys: &mut PublicKeys<'_>) -> Result<bool, CryptoError> {
        if now.saturating_duration_since(self.drawn_at) < DATA_KEY_LIFETIME {
            return Ok(false);
        }
        self.drawn_at = now;
        let (data_key, wrapped) = Self::draw(&self.names, public_keys)?;
        self.data_key = data_key;
        self.wrapped = wrapped;
        Ok(true)
    }

    /// Seals `payload` under a fresh IV and records the data keys and IV in `meta`.
    pub fn seal(&self, meta: &mut MessageMetadata, payload: &[u8]) -> Result<Vec<u8>, CryptoError> {
        let mut iv = [0u8; IV_LEN];
        random(&mut iv)?;
        let sealed = self.data_key.seal(&iv, payload)?;
        meta.encryption_keys = self.wrapped.clone();
        meta.encryption_param = Some(bytes::Bytes::copy_from_slice(&iv));
        Ok(sealed)
    }

    /// The encrypted data keys every entry carries now (their size counts against the
    /// broker's message limit).
    pub fn keys(&self) -> &[EncryptionKeys] {
        &self.wrapped
    }
}

/// A consumer's unwrapped data keys, by their RSA ciphertext.
#[derive(Debug, Default)]
pub struct Decryptor {
    cache: HashMap<bytes::Bytes, (DataKey, Instant)>,
}

impl Decryptor {
    /// Opens an entry's payload. A data key seen before is used from the cache; otherwise the
    /// entry's keys are unwrapped in order with the private keys `private_keys` supplies, and
    /// the first that unwraps is cached.
    pub fn open(
        &mut self,
        meta: &MessageMetadata,
        sealed: &[u8],
        now: Instant,
        private_keys: &mut PrivateKeys<'_>,
    ) -> Result<Vec<u8>, CryptoError> {
        if meta.encryption_keys.is_empty() {
            return Err(CryptoError::Metadata("no encryption keys"));
        }
        let iv = meta
            .encryption_param
            .as_deref()
            .ok_or(CryptoError::Metadata("no encryption_param (IV)"))?;
        if iv.len() != IV_LEN {
            return Err(CryptoError::Metadata("encryption_param is not a 12-byte IV"));
        }
        let keys = &meta.encryption_keys[..meta.encryption_keys.len().min(MAX_KEYS_TRIED)];
        for k in keys {
            if let Some((key, _)) = self.cache.get(&k.value) {
                if let Ok(plain) = key.open(iv, sealed) {
                    return Ok(plain);
                }
            }
        }
        let mut tried = Vec::new();
        let mut last_error = None;
        for k in keys {
            tried.push(format!("{:?}", k.key));
            let metadata: Vec<(String, String)> =
                k.metadata.iter().map(|kv| (kv.key.clone(), kv.value.clone())).collect();
            let info = match private_keys(&k.key, &metadata) {
                Ok(info) => info,
                Err(reason) => {
                    last_error = Some(CryptoError::KeyUnavailable {
                        name: k.key.clone(),
                        reason,
                    });
                    continue;
                }
            };
            let private = match parse_private_key(&k.key, &info.key) {
                Ok(p) => p,
                Err(e) => {
                    last_error = Some(e);
                    continue;
                }
            };
            if let Some(data_key) = DataKey::unwrap(&private, &k.value) {
                let plain = data_key.open(iv, sealed);
                self.remember(k.value.clone(), data_key, now);
                return plain;
            }
        }
        Err(match last_error {
            Some(e) if keys.len() == 1 => e,
            _ => CryptoError::NoDataKey(tried.join(", ")),
        })
    }

    fn remember(&mut self, wrapped: bytes::Bytes, key: DataKey, now: Instant) {
        self.cache
            .retain(|_, (_, at)| now.saturating_duration_since(*at) < DATA_KEY_LIFETIME);
        if self.cache.len() >= MAX_CACHED_DATA_KEYS {
            self.cache.clear();
        }
        self.cache.insert(wrapped, (key, now));
    }

    /// Data keys cached now.
    pub fn cached(&self) -> usize {
        self.cache.len()
    }
}

#[cfg(test)]
#[path = "crypto_tests.rs"]
mod tests;

//! End-to-end encryption as producers and consumers use it: where keys come from (a
//! [`CryptoKeyReader`] the application supplies) and what a consumer does with a message it
//! cannot decrypt. The cryptography itself is `protocol::crypto`.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use super::error::{Error, ErrorKind, Result};
use crate::protocol::crypto::{CryptoError, Decryptor, Encryptor, KeyInfo};
use crate::protocol::pb::MessageMetadata;

pub use crate::protocol::crypto::KeyInfo as EncryptionKeyInfo;

/// Supplies RSA keys by name: public keys to producers, private keys to consumers. It is
/// called when a producer starts and every time it draws a new data key (every four hours),
/// and when a consumer meets a data key it has not unwrapped before, on a runtime thread.
pub trait CryptoKeyReader: Send + Sync + fmt::Debug {
    /// The public key named `name` (PEM or DER) and metadata to store with the data key.
    fn public_key(&self, name: &str, metadata: &[(String, String)]) -> std::result::Result<KeyInfo, String>;
    /// The private key named `name`; `metadata` is what the producer stored with the data key.
    fn private_key(&self, name: &str, metadata: &[(String, String)]) -> std::result::Result<KeyInfo, String>;
}

/// A shared key reader.
pub type KeyReader = Arc<dyn CryptoKeyReader>;

/// What a consumer does with a message it cannot decrypt (no key reader, no matching private
/// key, a payload that does not authenticate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CryptoFailureAction {
    /// Do not deliver it and leave it unacknowledged: it comes back on redelivery (ack
    /// timeout, a new consumer), for when the key turns up.
    #[default]
    Fail,
    /// Acknowledge it (with the broker's `DecryptionError` reason) and drop it.
    Discard,
    /// Deliver it still encrypted (and still compressed), marked as such; a batch comes as one
    /// message.
    Consume,
}

impl From<CryptoError> for Error {
    fn from(e: CryptoError) -> Self {
        Error::new(ErrorKind::Crypto, e.to_string())
    }
}

/// A producer's encryption: its key names, its reader, and the current data key.
#[derive(Debug)]
pub(crate) struct ProducerCrypto {
    reader: KeyReader,
    encryptor: Encryptor,
}

impl ProducerCrypto {
    /// Draws the first data key; a key that cannot be had fails the producer's creation.
    pub fn new(names: &[String], reader: KeyReader) -> Result<ProducerCrypto> {
        let r = reader.clone();
        let encryptor = Encryptor::new(names, Instant::now(), &mut |n| r.public_key(n, &[]))?;
        Ok(ProducerCrypto { reader, encryptor })
    }

    /// Seals a (compressed) payload, drawing a new data key first when it is due.
    pub fn seal(&mut self, meta: &mut MessageMetadata, payload: &[u8]) -> Result<Vec<u8>> {
        let r = self.reader.clone();
        if let Err(e) = self
            .encryptor
            .rotate_if_due(Instant::now(), &mut |n| r.public_key(n, &[]))
        {
            log::error!("cannot draw a new data key, the current one stays in use: {e}");
        }
        Ok(self.encryptor.seal(meta, payload)?)
    }

    /// Bytes the encryption adds to an entry's metadata and payload, which count against the
    /// broker's message limit.
    pub fn overhead(&self) -> usize {
        use prost::Message as _;
        let keys: usize = self.encryptor.keys().iter().map(|k| k.encoded_len() + 3).sum();
        keys + 2 + crate::protocol::crypto::IV_LEN + crate::protocol::crypto::TAG_LEN
    }
}

/// A consumer's decryption: its reader (if any), the failure action and the data-key cache.
#[derive(Debug, Default)]
pub(crate) struct ConsumerCrypto {
    reader: Option<KeyReader>,
    decryptor: Decryptor,
}

impl ConsumerCrypto {
    pub fn new(reader: Option<KeyReader>) -> ConsumerCrypto {
        ConsumerCrypto {
            reader,
            decryptor: Decryptor::default(),
        }
    }

    /// The plaintext of an encrypted entry (or chunk).
    pub fn open(&mut self, meta: &MessageMetadata, sealed: &[u8]) -> std::result::Result<Vec<u8>, String> {
        let Some(reader) = self.reader.clone() else {
            return Err("the message is encrypted and the consumer has no crypto_key_reader".into());
        };
        self.decryptor
            .open(meta, sealed, Instant::now(), &mut |n, m| reader.private_key(n, m))
            .map_err(|e| e.to_string())
    }
}

/// A reader of the test key files, for the engine's own tests.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct TestKeys;

#[cfg(test)]
impl CryptoKeyReader for TestKeys {
    fn public_key(&self, _: &str, _: &[(String, String)]) -> std::result::Result<KeyInfo, String> {
        Ok(KeyInfo {
            key: include_bytes!("../../tests/keys/app-public.pem").to_vec(),
            metadata: Vec::new(),
        })
    }

    fn private_key(&self, _: &str, _: &[(String, String)]) -> std::result::Result<KeyInfo, String> {
        Ok(KeyInfo {
            key: include_bytes!("../../tests/keys/app-private.pem").to_vec(),
            metadata: Vec::new(),
        })
    }
}

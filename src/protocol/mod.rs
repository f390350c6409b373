//! The Pulsar binary protocol without I/O.
//!
//! Encoders append to a `BytesMut`; [`frame::decode`] takes bytes read so far and returns
//! `Ok(None)` when a frame is incomplete, so the same code serves sockets, fuzzers and tests.

pub mod avro;
mod avro_check;
pub mod batch;
pub mod chunks;
pub mod commands;
pub mod compression;
pub mod crypto;
pub mod entry;
pub mod error;
pub mod frame;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
pub mod hash;
mod redacted;
pub mod schema;

/// Types generated from `proto/PulsarApi.proto`.
#[allow(missing_docs, clippy::all)]
pub mod pb {
    include!(concat!(env!("OUT_DIR"), "/pulsar.proto.rs"));
}

pub use error::ProtocolError;

impl pb::ServerError {
    /// The error a code off the wire names; a code this client does not know reads as
    /// `UnknownError`.
    pub fn from_code(code: i32) -> pb::ServerError {
        pb::ServerError::try_from(code).unwrap_or(pb::ServerError::UnknownError)
    }
}

/// The newest protocol version magnetar speaks; the broker answers with the version it accepts.
pub const PROTOCOL_VERSION: i32 = 21;

/// Client version string sent in `CommandConnect`.
pub const CLIENT_VERSION: &str = concat!("magnetar-", env!("CARGO_PKG_VERSION"));

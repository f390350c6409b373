//! Errors of the wire layer: the bytes themselves are wrong.

use thiserror::Error;

/// A frame or payload that cannot be decoded, or a value that cannot be encoded.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    /// The frame's declared size exceeds the negotiated maximum.
    #[error("frame of {size} bytes exceeds the limit of {limit} bytes")]
    FrameTooLarge { size: usize, limit: usize },
    /// Size fields that contradict each other or the frame.
    #[error("malformed frame: {0}")]
    Malformed(&'static str),
    /// A payload section that does not start with the 0x0e01 magic number.
    #[error("bad magic number 0x{0:04x}")]
    BadMagic(u16),
    /// CRC32C over metadata and payload does not match the frame's checksum.
    #[error("checksum mismatch: frame says 0x{expected:08x}, computed 0x{computed:08x}")]
    ChecksumMismatch { expected: u32, computed: u32 },
    /// Protobuf bytes that do not decode.
    #[error("undecodable protobuf in {what}: {reason}")]
    Protobuf { what: &'static str, reason: String },
    /// A command type this client does not know.
    #[error("unknown command type {0}")]
    UnknownCommand(i32),
    /// Compression or decompression failed.
    #[error("{codec} codec error: {reason}")]
    Compression { codec: &'static str, reason: String },
    /// A batch whose entries do not add up.
    #[error("malformed batch: {0}")]
    BadBatch(&'static str),
}

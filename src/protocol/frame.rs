//! Framing: the size-prefixed envelope around every command, and the checksummed payload
//! section that follows `Send` and `Message` commands.
//!
//! ```text
//! simple:  [total u32][cmd_size u32][BaseCommand]
//! payload: [total u32][cmd_size u32][BaseCommand]
//!          ([0x0e02 u16][bem_size u32][BrokerEntryMetadata])      only broker -> consumer
//!          [0x0e01 u16][crc32c u32][meta_size u32][MessageMetadata][payload]
//! ```
//! `total` counts every byte after itself; the CRC32C covers `meta_size` through the end.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use prost::{Message as _, Name as _};

use super::pb::{base_command::Type, BaseCommand, BrokerEntryMetadata, MessageMetadata};
use super::ProtocolError;

/// Magic number in front of the checksum of a payload section.
pub const MAGIC_CRC32C: u16 = 0x0e01;
/// Magic number in front of broker entry metadata (index, broker publish time).
pub const MAGIC_BROKER_ENTRY_METADATA: u16 = 0x0e02;
/// The broker's default `maxMessageSize`, used until `Connected` announces the real one.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 5 * 1024 * 1024;
/// Room for command and metadata on top of the largest payload (the broker's own padding).
pub const FRAME_PADDING: usize = 10 * 1024;

/// One decoded frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// The command; its `type` is known (checked by [`decode`]).
    pub command: BaseCommand,
    /// The payload section, present on `Message` (and `Send`) frames.
    pub payload: Option<Payload>,
}

/// A payload section. Corruption here is not fatal to the connection: the specification asks the
/// consumer to discard the message and ack it with a validation error, so it is reported in
/// `corruption` rather than as a decode error.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Payload {
    /// Broker-added metadata, when the broker is configured to append it.
    pub broker_entry_metadata: Option<BrokerEntryMetadata>,
    /// Message metadata (default-valued when `corruption` is set).
    pub metadata: MessageMetadata,
    /// The payload bytes after the metadata: one message, or a whole (maybe compressed) batch.
    pub data: Bytes,
    /// Why the section cannot be trusted: a checksum mismatch or undecodable metadata.
    pub corruption: Option<ProtocolError>,
}

/// Appends a simple frame holding `command`.
pub fn encode_command(command: &BaseCommand, dst: &mut BytesMut) {
    let cmd_size = command.encoded_len();
    dst.reserve(8 + cmd_size);
    dst.put_u32((4 + cmd_size) as u32);
    dst.put_u32(cmd_size as u32);
    command.encode(dst).expect("reserved capacity");
}

/// Appends a payload frame: `command`, then the checksummed `metadata` and `payload`.
pub fn encode_payload_command(command: &BaseCommand, metadata: &MessageMetadata, payload: &[u8], dst: &mut BytesMut) {
    let cmd_size = command.encoded_len();
    let meta_size = metadata.encoded_len();
    let total = 4 + cmd_size + 2 + 4 + 4 + meta_size + payload.len();
    dst.reserve(4 + total);
    dst.put_u32(total as u32);
    dst.put_u32(cmd_size as u32);
    command.encode(dst).expect("reserved capacity");
    dst.put_u16(MAGIC_CRC32C);
    let crc_at = dst.len();
    dst.put_u32(0);
    let checked_from = dst.len();
    dst.put_u32(meta_size as u32);
    metadata.encode(dst).expect("reserved capacity");
    dst.put_slice(payload);
    let crc = crc32c::crc32c(&dst[checked_from..]);
    dst[crc_at..crc_at + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Takes one frame off the front of `src`.
///
/// Returns `Ok(None)` when `src` does not yet hold a whole frame (and reserves room for it).
/// `max_frame_size` bounds the declared size before any allocation, so a hostile size field
/// cannot make the client allocate.
pub fn decode(src: &mut BytesMut, max_frame_size: usize) -> Result<Option<Frame>, ProtocolError> {
    if src.len() < 4 {
        return Ok(None);
    }
    let total = u32::from_be_bytes([src[0], src[1], src[2], src[3]]) as usize;
    if total > max_frame_size {
        return Err(ProtocolError::FrameTooLarge {
            size: total,
            limit: max_frame_size,
        });
    }
    if total < 4 {
        return Err(ProtocolError::Malformed(
            "total size smaller than the command size field",
        ));
    }
    if src.len() < 4 + total {
        src.reserve(4 + total - src.len());
        return Ok(None);
    }
    let mut frame = src.split_to(4 + total).freeze();
    frame.advance(4);
    parse_frame(frame).map(Some)
}

fn parse_frame(mut frame: Bytes) -> Result<Frame, ProtocolError> {
    let command: BaseCommand = decode_prefixed(&mut frame, ProtocolError::Malformed("command size exceeds the frame"))?;
    if Type::try_from(command.r#type).is_err() {
        return Err(ProtocolError::UnknownCommand(command.r#type));
    }
    let payload = if frame.is_empty() {
        None
    } else {
        Some(parse_payload(frame)?)
    };
    Ok(Frame { command, payload })
}

fn parse_payload(mut rest: Bytes) -> Result<Payload, ProtocolError> {
    let mut broker_entry_metadata = None;
    let mut magic = take_u16(&mut rest)?;
    if magic == MAGIC_BROKER_ENTRY_METADATA {
        let size = take_u32(&mut rest)? as usize;
        let overrun = ProtocolError::Malformed("broker entry metadata size exceeds the frame");
        broker_entry_metadata = Some(decode_sized::<BrokerEntryMetadata>(&mut rest, size, overrun)?);
        magic = take_u16(&mut rest)?;
    }
    if magic != MAGIC_CRC32C {
        return Err(ProtocolError::BadMagic(magic));
    }
    let expected = take_u32(&mut rest)?;
    if rest.len() < 4 {
        return Err(ProtocolError::Malformed(
            "payload section shorter than its metadata size",
        ));
    }
    let computed = crc32c::crc32c(&rest);
    let meta_size = rest.get_u32() as usize;
    if meta_size > rest.len() {
        return Err(ProtocolError::Malformed("metadata size exceeds the frame"));
    }
    let mut payload = Payload {
        broker_entry_metadata,
        ..Payload::default()
    };
    if computed != expected {
        payload.corruption = Some(ProtocolError::ChecksumMismatch { expected, computed });
        return Ok(payload);
    }
    match MessageMetadata::decode(rest.split_to(meta_size)) {
        Ok(metadata) => payload.metadata = metadata,
        Err(e) => {
            payload.corruption = Some(ProtocolError::Protobuf {
                what: MessageMetadata::NAME,
                reason: e.to_string(),
            });
            return Ok(payload);
        }
    }
    payload.data = rest;
    Ok(payload)
}

/// Decodes the `M` behind the `u32` size at the front of `buf` (the caller has checked that the
/// size is there); `overrun` when the size exceeds what remains.
pub(crate) fn decode_prefixed<M: prost::Message + prost::Name + Default>(
    buf: &mut Bytes,
    overrun: ProtocolError,
) -> Result<M, ProtocolError> {
    let size = buf.get_u32() as usize;
    decode_sized(buf, size, overrun)
}

/// Decodes an `M` from the next `size` bytes of `buf`; `overrun` when fewer remain.
pub(crate) fn decode_sized<M: prost::Message + prost::Name + Default>(
    buf: &mut Bytes,
    size: usize,
    overrun: ProtocolError,
) -> Result<M, ProtocolError> {
    if size > buf.len() {
        return Err(overrun);
    }
    M::decode(buf.split_to(size)).map_err(|e| ProtocolError::Protobuf {
        what: M::NAME,
        reason: e.to_string(),
    })
}

fn take_u16(buf: &mut Bytes) -> Result<u16, ProtocolError> {
    if buf.len() < 2 {
        return Err(ProtocolError::Malformed("payload section truncated"));
    }
    Ok(buf.get_u16())
}

fn take_u32(buf: &mut Bytes) -> Result<u32, ProtocolError> {
    if buf.len() < 4 {
        return Err(ProtocolError::Malformed("payload section truncated"));
    }
    Ok(buf.get_u32())
}

#[cfg(test)]
#[path = "frame_tests.rs"]
mod tests;

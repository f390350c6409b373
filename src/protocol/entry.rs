//! Unpacking one stored entry into the messages it carries: decompress the payload, then split it
//! when it is a batch. Every count and size involved comes from the peer, so each is checked
//! against the bytes that carry it, or against a documented limit, before it sizes an allocation.

use bytes::Bytes;

use super::pb::{self, command_ack::ValidationError, CompressionType};
use super::{batch, compression};

/// The most messages one batch entry may declare.
///
/// A batch is one entry, at most `maxMessageSize` (5 MiB by default) on the wire, and each of
/// its messages takes at least 6 bytes when its producer sets the required `payload_size` (4 for
/// the size field, 2 for the metadata). A default-sized entry therefore holds at most 873,813
/// messages, and producers batch far fewer (the Java, C++ and Go clients default to 1,000).
/// 2^20 admits every batch a broker with default limits can store, while bounding what one
/// decompressed entry can make the consumer build (the byte count bounds it as well).
pub const MAX_BATCH_MESSAGES: usize = 1 << 20;

/// One message of an entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The message's own metadata inside a batch; `None` for an entry that is not a batch.
    pub single: Option<pb::SingleMessageMetadata>,
    /// The message's payload, uncompressed. It shares the entry's memory.
    pub payload: Bytes,
}

/// Why an entry cannot be unpacked. Each kind names the validation error the consumer acks the
/// entry with, so the broker records why the message was discarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnpackError {
    /// Unknown codec, corrupt compressed bytes, or a declared size that is wrong or over the
    /// limit.
    Decompression,
    /// A batch whose declared count or entry sizes do not fit its bytes.
    Batch,
}

impl UnpackError {
    /// The `CommandAck` validation error that reports this failure to the broker.
    pub fn validation_error(self) -> ValidationError {
        match self {
            UnpackError::Decompression => ValidationError::DecompressionError,
            UnpackError::Batch => ValidationError::BatchDeSerializeError,
        }
    }
}

impl std::fmt::Display for UnpackError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            UnpackError::Decompression => "payload does not decompress to its declared size",
            UnpackError::Batch => "batch entries do not fit the payload",
        })
    }
}

impl std::error::Error for UnpackError {}

/// Decompresses (bounded by `max_uncompressed`) and splits a batch. Non-batched entries give one
/// [`Entry`] with `single = None`.
///
/// For a batch the count used is `min(num_messages_in_batch, what the bytes can hold)`; it never
/// allocates from the declared count alone. A batch that declares more messages than its bytes
/// hold, or more than [`MAX_BATCH_MESSAGES`], or none at all, is malformed; bytes left after the
/// declared messages are ignored. An unknown codec is a decompression error: handing on bytes
/// that nobody can read would deliver garbage as a message.
pub fn unpack(meta: &pb::MessageMetadata, data: Bytes, max_uncompressed: usize) -> Result<Vec<Entry>, UnpackError> {
    let codec = CompressionType::try_from(meta.compression.unwrap_or(0)).map_err(|_| UnpackError::Decompression)?;
    let declared_size = meta.uncompressed_size.unwrap_or(0) as usize;
    let data = compression::decompress(codec, data, declared_size, max_uncompressed)
        .map_err(|_| UnpackError::Decompression)?;
    let Some(declared) = meta.num_messages_in_batch else {
        return Ok(vec![Entry {
            single: None,
            payload: data,
        }]);
    };
    let count = usize::try_from(declared)
        .ok()
        .filter(|n| (1..=MAX_BATCH_MESSAGES).contains(n))
        .ok_or(UnpackError::Batch)?;
    let entries = batch::decode_entries(data, count).map_err(|_| UnpackError::Batch)?;
    Ok(entries
        .into_iter()
        .map(|(single, payload)| Entry {
            single: Some(single),
            payload,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

    const CODECS: [CompressionType; 5] = [
        CompressionType::None,
        CompressionType::Lz4,
        CompressionType::Zlib,
        CompressionType::Zstd,
        CompressionType::Snappy,
    ];

    fn batch_of(n: usize) -> Bytes {
        let mut buf = BytesMut::new();
        for i in 0..n {
            let payload = format!("message {i}");
            let single = pb::SingleMessageMetadata {
                payload_size: payload.len() as i32,
                sequence_id: Some(i as u64),
                ..Default::default()
            };
            batch::encode_entry(&single, payload.as_bytes(), &mut buf);
        }
        buf.freeze()
    }

    fn meta(codec: CompressionType, uncompressed: usize, count: Option<i32>) -> pb::MessageMetadata {
        pb::MessageMetadata {
            compression: Some(codec as i32),
            uncompressed_size: Some(uncompressed as u32),
            num_messages_in_batch: count,
            ..Default::default()
        }
    }

    fn packed(codec: CompressionType, raw: &[u8]) -> Bytes {
        Bytes::from(compression::compress(codec, raw).unwrap())
    }

    #[test]
    fn a_single_message_is_one_entry_without_metadata() {
        for codec in CODECS {
            let out = unpack(&meta(codec, 5, None), packed(codec, b"hello"), 1 << 20).unwrap();
            assert_eq!(
                out,
                vec![Entry {
                    single: None,
                    payload: Bytes::from_static(b"hello")
                }]
            );
        }
    }

    #[test]
    fn a_batch_splits_under_every_codec() {
        let raw = batch_of(10);
        for codec in CODECS {
            let out = unpack(&meta(codec, raw.len(), Some(10)), packed(codec, &raw), 1 << 20).unwrap();
            assert_eq!(out.len(), 10);
            for (i, e) in out.iter().enumerate() {
                assert_eq!(e.payload, format!("message {i}").as_bytes());
                assert_eq!(e.single.as_ref().unwrap().sequence_id, Some(i as u64));
            }
        }
    }

    #[test]
    fn a_batch_declaring_i32_max_with_two_real_messages_is_malformed() {
        let raw = batch_of(2);
        for codec in CODECS {
            let m = meta(codec, raw.len(), Some(i32::MAX));
            assert_eq!(unpack(&m, packed(codec, &raw), 1 << 20), Err(UnpackError::Batch));
        }
    }

    #[test]
    fn declared_counts_outside_one_to_the_limit_are_malformed() {
        // 4 bytes per empty entry: enough bytes for MAX_BATCH_MESSAGES + 1 declared messages, so
        // only the documented limit refuses it.
        let raw = Bytes::from(vec![0u8; 4 * (MAX_BATCH_MESSAGES + 1)]);
        let over = meta(CompressionType::None, raw.len(), Some(MAX_BATCH_MESSAGES as i32 + 1));
        assert_eq!(unpack(&over, raw.clone(), 1 << 30), Err(UnpackError::Batch));
        for bad in [0, -1, i32::MIN] {
            let m = meta(CompressionType::None, raw.len(), Some(bad));
            assert_eq!(unpack(&m, raw.clone(), 1 << 30), Err(UnpackError::Batch));
        }
    }

    #[test]
    fn fewer_messages_than_declared_is_malformed_and_extra_bytes_are_ignored() {
        let raw = batch_of(3);
        let short = meta(CompressionType::None, raw.len(), Some(4));
        assert_eq!(unpack(&short, raw.clone(), 1 << 20), Err(UnpackError::Batch));
        let fewer = meta(CompressionType::None, raw.len(), Some(2));
        assert_eq!(unpack(&fewer, raw, 1 << 20).unwrap().len(), 2);
    }

    #[test]
    fn decompression_failures_and_limits() {
        let raw = batch_of(3);
        for codec in &CODECS[1..] {
            // Over the caller's limit: refused whatever the bytes.
            let m = meta(*codec, raw.len(), Some(3));
            assert_eq!(
                unpack(&m, packed(*codec, &raw), raw.len() - 1),
                Err(UnpackError::Decompression)
            );
            // Declared size wrong by one.
            let m = meta(*codec, raw.len() + 1, Some(3));
            assert_eq!(
                unpack(&m, packed(*codec, &raw), 1 << 20),
                Err(UnpackError::Decompression)
            );
            // A peer-declared 4 GiB over a few bytes.
            let m = meta(*codec, u32::MAX as usize, None);
            assert_eq!(
                unpack(&m, Bytes::from_static(b"tiny"), usize::MAX),
                Err(UnpackError::Decompression)
            );
        }
        let unknown = pb::MessageMetadata {
            compression: Some(99),
            ..Default::default()
        };
        assert_eq!(
            unpack(&unknown, Bytes::from_static(b"x"), 1 << 20),
            Err(UnpackError::Decompression)
        );
    }

    #[test]
    fn errors_map_to_their_validation_errors() {
        assert_eq!(
            UnpackError::Decompression.validation_error(),
            ValidationError::DecompressionError
        );
        assert_eq!(
            UnpackError::Batch.validation_error(),
            ValidationError::BatchDeSerializeError
        );
    }
}

//! The batch payload format: entries of `[size u32][SingleMessageMetadata][payload]`, counted
//! by `MessageMetadata.num_messages_in_batch`.

use bytes::{BufMut, Bytes, BytesMut};
use prost::Message as _;

use super::frame::decode_prefixed;
use super::pb::SingleMessageMetadata;
use super::ProtocolError;

/// Appends one batch entry.
pub fn encode_entry(meta: &SingleMessageMetadata, payload: &[u8], dst: &mut BytesMut) {
    let size = meta.encoded_len();
    dst.reserve(4 + size + payload.len());
    dst.put_u32(size as u32);
    meta.encode(dst).expect("reserved capacity");
    dst.put_slice(payload);
}

/// The fewest bytes one entry takes: its size field (the metadata and payload may be empty).
pub const MIN_ENTRY_SIZE: usize = 4;

/// Splits an uncompressed batch into its `count` entries. Payloads share `data`'s memory.
///
/// `count` comes from the peer: a count the bytes cannot hold is an error found before anything
/// is allocated, so the vector never grows beyond `data.len() / MIN_ENTRY_SIZE`. Bytes left after
/// the `count`th entry are ignored, as the Java client does.
pub fn decode_entries(mut data: Bytes, count: usize) -> Result<Vec<(SingleMessageMetadata, Bytes)>, ProtocolError> {
    if count > data.len() / MIN_ENTRY_SIZE {
        return Err(ProtocolError::BadBatch("more entries declared than the bytes can hold"));
    }
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        if data.len() < 4 {
            return Err(ProtocolError::BadBatch("entry header truncated"));
        }
        let overrun = ProtocolError::BadBatch("entry metadata exceeds the batch");
        let meta: SingleMessageMetadata = decode_prefixed(&mut data, overrun)?;
        let len = usize::try_from(meta.payload_size).map_err(|_| ProtocolError::BadBatch("negative payload size"))?;
        if len > data.len() {
            return Err(ProtocolError::BadBatch("entry payload exceeds the batch"));
        }
        out.push((meta, data.split_to(len)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(i: usize) -> (SingleMessageMetadata, Vec<u8>) {
        let payload = vec![i as u8; i];
        let meta = SingleMessageMetadata {
            payload_size: payload.len() as i32,
            partition_key: Some(format!("k{i}")),
            sequence_id: Some(i as u64),
            ..Default::default()
        };
        (meta, payload)
    }

    /// The batch of `entry(0)` to `entry(n - 1)`.
    fn batch_of(n: usize) -> Bytes {
        let mut buf = BytesMut::new();
        for (meta, payload) in (0..n).map(entry) {
            encode_entry(&meta, &payload, &mut buf);
        }
        buf.freeze()
    }

    #[test]
    fn batch_round_trips() {
        let entries: Vec<_> = (0..10).map(entry).collect();
        let decoded = decode_entries(batch_of(entries.len()), entries.len()).unwrap();
        assert_eq!(decoded.len(), entries.len());
        for ((m, p), (em, ep)) in decoded.iter().zip(&entries) {
            assert_eq!(m, em);
            assert_eq!(&p[..], &ep[..]);
        }
    }

    #[test]
    fn truncated_or_overcounted_batches_are_errors() {
        let mut buf = BytesMut::new();
        let (meta, payload) = entry(5);
        encode_entry(&meta, &payload, &mut buf);
        let whole = buf.freeze();
        assert!(decode_entries(whole.clone(), 2).is_err());
        assert!(decode_entries(whole.slice(..whole.len() - 1), 1).is_err());
        assert!(decode_entries(Bytes::new(), usize::MAX).is_err());
    }

    #[test]
    fn a_huge_declared_count_is_refused_before_allocating() {
        let whole = batch_of(2);
        // i32::MAX entries would be a 0.5 TB vector; the refusal must come from the byte count.
        let err = decode_entries(whole.clone(), i32::MAX as usize).unwrap_err();
        assert_eq!(
            err,
            ProtocolError::BadBatch("more entries declared than the bytes can hold")
        );
        assert!(decode_entries(whole.clone(), usize::MAX).is_err());
        // A count the bytes could hold but do not: the third entry is missing.
        assert!(decode_entries(whole.clone(), 3).is_err());
        assert_eq!(decode_entries(whole, 2).unwrap().len(), 2);
    }

    #[test]
    fn bytes_after_the_declared_entries_are_ignored() {
        let decoded = decode_entries(batch_of(3), 2).unwrap();
        assert_eq!(decoded.len(), 2);
        assert_eq!(decoded[1].0.sequence_id, Some(1));
    }

    #[test]
    fn empty_entries_take_four_bytes_each() {
        let data = Bytes::from_static(&[0u8; 12]);
        let decoded = decode_entries(data, 3).unwrap();
        assert!(decoded
            .iter()
            .all(|(m, p)| *m == SingleMessageMetadata::default() && p.is_empty()));
    }
}

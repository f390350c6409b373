//! Payload codecs, byte-compatible with the Java and C++ clients: LZ4 raw block (no size
//! prefix; the size travels in `uncompressed_size`), zlib stream, zstd frame, raw snappy.

use std::io::{Read, Write};

use bytes::Bytes;

use super::pb::CompressionType;
use super::ProtocolError;

/// Compresses `data` with `codec`. `CompressionType::None` returns the bytes unchanged.
pub fn compress(codec: CompressionType, data: &[u8]) -> Result<Vec<u8>, ProtocolError> {
    let fail = |reason: String| ProtocolError::Compression {
        codec: codec_name(codec),
        reason,
    };
    match codec {
        CompressionType::None => Ok(data.to_vec()),
        CompressionType::Lz4 => Ok(lz4_flex::block::compress(data)),
        CompressionType::Zlib => {
            let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            enc.write_all(data).map_err(|e| fail(e.to_string()))?;
            enc.finish().map_err(|e| fail(e.to_string()))
        }
        CompressionType::Zstd => zstd::bulk::compress(data, 3).map_err(|e| fail(e.to_string())),
        CompressionType::Snappy => snap::raw::Encoder::new()
            .compress_vec(data)
            .map_err(|e| fail(e.to_string())),
    }
}

/// Decompresses `data`, which must expand to exactly `uncompressed_size` bytes. The size comes
/// from the peer, so it is bounded by `limit` before anything is allocated.
pub fn decompress(
    codec: CompressionType,
    data: Bytes,
    uncompressed_size: usize,
    limit: usize,
) -> Result<Bytes, ProtocolError> {
    if codec == CompressionType::None {
        return Ok(data);
    }
    let fail = |reason: String| ProtocolError::Compression {
        codec: codec_name(codec),
        reason,
    };
    if uncompressed_size > limit {
        return Err(fail(format!("uncompressed size {uncompressed_size} exceeds {limit}")));
    }
    let out = match codec {
        CompressionType::None => unreachable!(),
        CompressionType::Lz4 => {
            lz4_flex::block::decompress(&data, uncompressed_size).map_err(|e| fail(e.to_string()))?
        }
        CompressionType::Zlib => {
            let mut out = Vec::with_capacity(uncompressed_size);
            flate2::read::ZlibDecoder::new(&data[..])
                .take(uncompressed_size as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| fail(e.to_string()))?;
            out
        }
        CompressionType::Zstd => zstd::bulk::decompress(&data, uncompressed_size).map_err(|e| fail(e.to_string()))?,
        CompressionType::Snappy => {
            let n = snap::raw::decompress_len(&data).map_err(|e| fail(e.to_string()))?;
            if n != uncompressed_size {
                return Err(fail(format!("snappy length {n} != declared {uncompressed_size}")));
            }
            snap::raw::Decoder::new()
                .decompress_vec(&data)
                .map_err(|e| fail(e.to_string()))?
        }
    };
    if out.len() != uncompressed_size {
        return Err(fail(format!(
            "expanded to {} bytes, declared {uncompressed_size}",
            out.len()
        )));
    }
    Ok(Bytes::from(out))
}

/// The codec's lower-case name, as the Python API spells it.
pub fn codec_name(codec: CompressionType) -> &'static str {
    match codec {
        CompressionType::None => "none",
        CompressionType::Lz4 => "lz4",
        CompressionType::Zlib => "zlib",
        CompressionType::Zstd => "zstd",
        CompressionType::Snappy => "snappy",
    }
}

/// Parses a codec name (`None`/"none", "lz4", "zlib", "zstd", "snappy").
pub fn parse_codec(name: &str) -> Option<CompressionType> {
    Some(match name.to_ascii_lowercase().as_str() {
        "none" | "" => CompressionType::None,
        "lz4" => CompressionType::Lz4,
        "zlib" => CompressionType::Zlib,
        "zstd" => CompressionType::Zstd,
        "snappy" => CompressionType::Snappy,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [CompressionType; 5] = [
        CompressionType::None,
        CompressionType::Lz4,
        CompressionType::Zlib,
        CompressionType::Zstd,
        CompressionType::Snappy,
    ];

    #[test]
    fn every_codec_round_trips() {
        let data: Vec<u8> = (0..10_000u32).flat_map(|i| (i % 97).to_be_bytes()).collect();
        for codec in ALL {
            let packed = compress(codec, &data).unwrap();
            let back = decompress(codec, Bytes::from(packed), data.len(), 1 << 20).unwrap();
            assert_eq!(&back[..], &data[..], "{}", codec_name(codec));
        }
    }

    #[test]
    fn wrong_declared_size_is_an_error_not_a_panic() {
        let data = vec![7u8; 1000];
        for codec in &ALL[1..] {
            let packed = Bytes::from(compress(*codec, &data).unwrap());
            assert!(decompress(*codec, packed.clone(), 999, 1 << 20).is_err());
            assert!(decompress(*codec, packed, 2 << 20, 1 << 20).is_err());
        }
    }

    #[test]
    fn garbage_input_is_an_error() {
        for codec in &ALL[1..] {
            assert!(decompress(*codec, Bytes::from_static(b"\xff\xfe garbage"), 100, 1 << 20).is_err());
        }
    }
}

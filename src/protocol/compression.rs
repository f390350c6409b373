//! Payload codecs, byte-compatible with the Java and C++ clients: LZ4 raw block (no size
//! prefix; the size travels in `uncompressed_size`), zlib stream, zstd frame, raw snappy.

use std::cell::RefCell;
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
    // A few bytes declaring `limit` would otherwise allocate `limit` each time. Codecs with a
    // bounded expansion ratio refuse a size their input cannot reach before allocating it.
    if let Some(ratio) = max_ratio(codec) {
        if uncompressed_size > data.len().saturating_mul(ratio) {
            return Err(fail(format!(
                "{} bytes cannot expand to the declared {uncompressed_size}",
                data.len()
            )));
        }
    }
    let out = match codec {
        CompressionType::None => unreachable!(),
        CompressionType::Lz4 => {
            lz4_flex::block::decompress(&data, uncompressed_size).map_err(|e| fail(e.to_string()))?
        }
        CompressionType::Zlib => {
            // Deflate expands at most 1032:1, so a stream this short cannot fill more.
            let mut out = Vec::with_capacity(uncompressed_size.min(data.len().saturating_mul(1032)));
            // bufread: the slice is the buffer, so no 32 KiB read buffer per message.
            flate2::bufread::ZlibDecoder::new(&data[..])
                .take(uncompressed_size as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| fail(e.to_string()))?;
            out
        }
        CompressionType::Zstd => {
            // zstd's RLE blocks make its ratio unbounded. Every Pulsar client writes one frame
            // that carries its content size, which must agree with the declared one before that
            // much is allocated; a frame without it is bounded by `limit` alone.
            match zstd::zstd_safe::get_frame_content_size(&data) {
                Err(_) => return Err(fail("not a zstd frame".into())),
                Ok(Some(n)) if n != uncompressed_size as u64 => {
                    return Err(fail(format!(
                        "zstd frame holds {n} bytes, declared {uncompressed_size}"
                    )))
                }
                Ok(_) => {}
            }
            zstd_decompress(&data, uncompressed_size).map_err(|e| fail(e.to_string()))?
        }
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

/// Decompresses one zstd payload with this thread's decompression context: making one per
/// message (as `zstd::bulk::decompress` does) costs more than decompressing a small message.
fn zstd_decompress(data: &[u8], capacity: usize) -> std::io::Result<Vec<u8>> {
    thread_local! {
        static CONTEXT: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
    }
    CONTEXT.with(|cell| {
        let mut context = cell.borrow_mut();
        let decompressor = match context.as_mut() {
            Some(d) => d,
            None => context.insert(zstd::bulk::Decompressor::new()?),
        };
        // Each call starts a new frame: a context left mid-frame by an error is reset.
        decompressor.decompress(data, capacity)
    })
}

/// The most a codec can expand its input, when its format bounds it: an LZ4 sequence of `3 + m`
/// bytes yields at most `18 + 255m`; a snappy copy element of 3 bytes yields at most 64. Zlib
/// and zstd are bounded elsewhere (see [`decompress`]).
fn max_ratio(codec: CompressionType) -> Option<usize> {
    match codec {
        CompressionType::Lz4 => Some(255),
        CompressionType::Snappy => Some(32),
        _ => None,
    }
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

/// The codecs by name (the name "none" and the empty name mean no codec).
pub const CODEC_NAMES: &[(&str, CompressionType)] = &[
    ("none", CompressionType::None),
    ("lz4", CompressionType::Lz4),
    ("zlib", CompressionType::Zlib),
    ("zstd", CompressionType::Zstd),
    ("snappy", CompressionType::Snappy),
];

/// Parses a codec name (`None`/"none", "lz4", "zlib", "zstd", "snappy"), in any case.
pub fn parse_codec(name: &str) -> Option<CompressionType> {
    let name = name.to_ascii_lowercase();
    if name.is_empty() {
        return Some(CompressionType::None);
    }
    CODEC_NAMES.iter().find(|(n, _)| *n == name).map(|(_, c)| *c)
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
    fn the_most_compressible_input_still_round_trips() {
        // All zeros reaches each codec's best ratio, so the expansion bounds must admit it.
        for len in [0usize, 1, 17, 4096, 3 << 20] {
            let data = vec![0u8; len];
            for codec in ALL {
                let packed = compress(codec, &data).unwrap();
                let back = decompress(codec, Bytes::from(packed), len, 4 << 20).unwrap();
                assert_eq!(back.len(), len, "{} {len}", codec_name(codec));
            }
        }
    }

    #[test]
    fn a_declared_size_the_input_cannot_reach_is_refused_before_allocating() {
        // Ten bytes cannot expand to 64 MiB with LZ4 or snappy; the limit allows it, the ratio
        // does not (lz4_flex would zero-fill the whole size first).
        for codec in [CompressionType::Lz4, CompressionType::Snappy] {
            let err = decompress(codec, Bytes::from_static(&[0u8; 10]), 64 << 20, 1 << 30).unwrap_err();
            assert!(err.to_string().contains("cannot expand"), "{err}");
        }
        // A zstd frame announcing 1000 bytes while 64 MiB are declared.
        let packed = Bytes::from(compress(CompressionType::Zstd, &[1u8; 1000]).unwrap());
        let err = decompress(CompressionType::Zstd, packed, 64 << 20, 1 << 30).unwrap_err();
        assert!(err.to_string().contains("zstd frame holds 1000"), "{err}");
        // A zlib stream whose declared size is over what it holds: an error, not an abort.
        let packed = Bytes::from(compress(CompressionType::Zlib, &[1u8; 1000]).unwrap());
        assert!(decompress(CompressionType::Zlib, packed, 64 << 20, 1 << 30).is_err());
    }

    #[test]
    fn garbage_input_is_an_error() {
        for codec in &ALL[1..] {
            assert!(decompress(*codec, Bytes::from_static(b"\xff\xfe garbage"), 100, 1 << 20).is_err());
        }
    }
}

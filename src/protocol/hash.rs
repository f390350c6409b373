//! Key hashes used to pick a partition, identical to the Java client's so a key lands on the
//! same partition whichever client sent it.

/// Java's `String.hashCode` over the key's UTF-16 code units, masked to non-negative
/// (the Java client's default `JavaStringHash`).
pub fn java_string_hash(key: &str) -> u32 {
    let mut h: i32 = 0;
    for unit in key.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(unit as i32);
    }
    (h & i32::MAX) as u32
}

/// Murmur3 x86 32-bit with seed 0 over the key's UTF-8 bytes, masked to non-negative (the Java
/// client's `Murmur3_32Hash`).
pub fn murmur3_32_hash(key: &[u8]) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let mut h: u32 = 0;
    let mut chunks = key.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h ^= k;
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        let mut k: u32 = 0;
        for (i, b) in tail.iter().enumerate() {
            k |= (*b as u32) << (8 * i);
        }
        k = k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h ^= k;
    }
    h ^= key.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h & (i32::MAX as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_string_hash_matches_java() {
        // Values of "...".hashCode() in Java.
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("hello"), 99_162_322);
        // "polygenelubricants".hashCode() == Integer.MIN_VALUE; masked to 0.
        assert_eq!(java_string_hash("polygenelubricants"), 0);
    }

    #[test]
    fn murmur3_matches_reference_vectors() {
        // MurmurHash3_x86_32 with seed 0 (SMHasher reference values), then masked.
        assert_eq!(murmur3_32_hash(b""), 0);
        assert_eq!(murmur3_32_hash(b"hello"), 0x248b_fa47 & 0x7fff_ffff);
        assert_eq!(
            murmur3_32_hash(b"The quick brown fox jumps over the lazy dog"),
            0x2e4f_f723
        );
    }
}

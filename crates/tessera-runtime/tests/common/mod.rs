//! What several of the runtime's integration tests share.

/// A 32-bit integer hash (murmur3's finaliser): spreads a word's bits so that neighbouring
/// inputs give unrelated values, to pick owners and addresses deterministically.
pub fn mix(mut v: u32) -> u32 {
    v ^= v >> 16;
    v = v.wrapping_mul(0x7feb_352d);
    v ^= v >> 15;
    v = v.wrapping_mul(0x846c_a68b);
    v ^ (v >> 16)
}

//! FNV-1a, 32-bit: NPU1's corruption check.
//!
//! The spec calls it what it is: "corruption detection, not authenticity". It catches a truncated
//! flash write or a bit-rotted OSPI sector; anyone who can change the payload can recompute it, which
//! is why authenticity lives in the signed manifest instead.
//!
//! The hash is a serial xor → multiply chain, one byte at a time; nothing can be vectorised, so the
//! loop is kept as plain as possible and the compiler's scalar code is the limit (see `benches/`).

/// FNV-1a 32-bit offset basis.
pub const FNV1A32_BASIS: u32 = 0x811C_9DC5;
/// FNV-1a 32-bit prime.
pub const FNV1A32_PRIME: u32 = 0x0100_0193;

/// An incremental FNV-1a 32 hasher: feeding a buffer in any number of pieces gives the same value
/// as hashing it whole, which is what the streaming validator relies on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fnv1a {
    state: u32,
}

impl Default for Fnv1a {
    fn default() -> Self {
        Self::new()
    }
}

impl Fnv1a {
    /// A hasher at the offset basis.
    pub const fn new() -> Self {
        Self {
            state: FNV1A32_BASIS,
        }
    }

    /// Hashes `bytes` after everything fed so far.
    #[inline]
    pub fn update(&mut self, bytes: &[u8]) {
        let mut h = self.state;
        for &b in bytes {
            h = (h ^ u32::from(b)).wrapping_mul(FNV1A32_PRIME);
        }
        self.state = h;
    }

    /// The hash of everything fed so far (the hasher can go on being fed).
    pub const fn finish(&self) -> u32 {
        self.state
    }
}

/// FNV-1a 32 of `bytes` in one call.
pub fn fnv1a32(bytes: &[u8]) -> u32 {
    let mut h = Fnv1a::new();
    h.update(bytes);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_published_test_vectors() {
        // From the FNV reference test suite (Fowler/Noll/Vo).
        assert_eq!(fnv1a32(b""), 0x811c_9dc5);
        assert_eq!(fnv1a32(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a32(b"foobar"), 0xbf9c_f968);
    }

    #[test]
    fn pieces_hash_like_the_whole() {
        let data: [u8; 7] = *b"chunked";
        let mut h = Fnv1a::new();
        h.update(&data[..3]);
        h.update(&[]);
        h.update(&data[3..]);
        assert_eq!(h.finish(), fnv1a32(&data));
    }
}

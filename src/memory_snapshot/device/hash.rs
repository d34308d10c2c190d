//! The blocks' hash (`kernels/replay_kernels.h` defines it): the random
//! keys, and the host's computation of it, which the kernels must match bit
//! for bit (the tests check them against each other).
//!
//! NH, UMAC's hash, in two Toeplitz lanes: a block's words m\[w\]
//! (little-endian `u32`, zero past its length, `KR_HASH_WORDS` of them)
//! give lane l the sum over word pairs of
//! `(m[2i] + k[2i + 4l]) * (m[2i+1] + k[2i+1 + 4l])`, each factor mod 2^32
//! and the sum mod 2^64. Over the random keys, two different blocks of one
//! length collide in both lanes with probability at most 2^-64.

use super::abi::KR_HASH_KEYS;
#[cfg(test)]
use super::abi::{KR_BLOCK_BYTES, KR_HASH_SHIFT, KR_HASH_WORDS};

/// The keys, laid out as the kernels read them (`keys` in their arguments):
/// `KR_HASH_KEYS` 32-bit values, lane 1 using them from `KR_HASH_SHIFT` on.
pub(crate) struct HashKeys(Box<[u32]>);

impl HashKeys {
    /// Keys from the operating system's random source, as the design asks:
    /// a program cannot predict them, so no data it writes is chosen to
    /// collide.
    pub(crate) fn from_os() -> std::io::Result<Self> {
        use std::io::Read;
        let mut bytes = Vec::new();
        bytes
            .try_reserve_exact(KR_HASH_KEYS as usize * 4)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
        bytes.resize(KR_HASH_KEYS as usize * 4, 0);
        std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
        let mut words = bytes.chunks_exact(4);
        Self::from_words(|| {
            words
                .next()
                .map_or(0, |w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        })
    }

    /// Keys drawn from a seed (splitmix64): reproducible, for tests.
    #[cfg(test)]
    pub(crate) fn from_seed(mut seed: u64) -> std::io::Result<Self> {
        Self::from_words(|| {
            seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = seed;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce5_e4b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (z ^ (z >> 31)) as u32
        })
    }

    fn from_words(next: impl FnMut() -> u32) -> std::io::Result<Self> {
        let mut keys = Vec::new();
        keys.try_reserve_exact(KR_HASH_KEYS as usize)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
        keys.extend(std::iter::repeat_with(next).take(KR_HASH_KEYS as usize));
        Ok(HashKeys(keys.into_boxed_slice()))
    }

    /// The keys as the kernels take them (`KR_HASH_KEYS` values).
    pub(crate) fn as_slice(&self) -> &[u32] {
        &self.0
    }

    /// Both lanes of `block`'s hash, as `kr_hash_blocks` computes it. A
    /// block longer than `KR_BLOCK_BYTES` is hashed over its first
    /// `KR_BLOCK_BYTES`, as the kernels clamp it. The tests' reference: the
    /// library itself only ever hashes on the device.
    #[cfg(test)]
    pub(crate) fn hash(&self, block: &[u8]) -> [u64; 2] {
        let block = &block[..block.len().min(KR_BLOCK_BYTES as usize)];
        let word = |w: usize| -> u32 {
            let mut bytes = [0u8; 4];
            let at = (4 * w).min(block.len());
            let end = (4 * w + 4).min(block.len());
            bytes[..end - at].copy_from_slice(&block[at..end]);
            u32::from_le_bytes(bytes)
        };
        let mut lanes = [0u64; 2];
        for (lane, sum) in lanes.iter_mut().enumerate() {
            let keys = &self.0[lane * KR_HASH_SHIFT as usize..];
            for i in (0..KR_HASH_WORDS as usize).step_by(2) {
                let a = u64::from(word(i).wrapping_add(keys[i]));
                let b = u64::from(word(i + 1).wrapping_add(keys[i + 1]));
                *sum = sum.wrapping_add(a * b);
            }
        }
        lanes
    }
}

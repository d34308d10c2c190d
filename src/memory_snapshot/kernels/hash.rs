//! The blocks' hash (`kernels/replay_kernels.h` defines it): the random
//! keys, and the host's computation of it, which the kernels must match bit
//! for bit (the tests check them against each other) and which the library
//! may use where a block is at hand on the host.
//!
//! A block's words m\[w\] (little-endian `u32`, zero past its length) are
//! hashed in two lanes, `h = sum_w k[w] * m[w] mod p` with p = 2^61 - 1,
//! each lane with its own key array. Over the random keys, two different
//! blocks of one length collide in both lanes with probability 1/p^2.

use super::abi::{KR_BLOCK_BYTES, KR_HASH_WORDS};

/// The hash's modulus, 2^61 - 1 (a Mersenne prime: reductions are shifts).
pub(crate) const P: u64 = (1 << 61) - 1;

/// Keys per lane.
const WORDS: usize = KR_HASH_WORDS as usize;

/// Both lanes' keys, laid out as the kernels read them (`keys` in their
/// arguments): lane 0's `KR_HASH_WORDS` keys, then lane 1's, each below p.
pub(crate) struct HashKeys(Box<[u64]>);

impl HashKeys {
    /// Keys from the operating system's random source, as the design asks:
    /// a program cannot predict them, so no data it writes is chosen to
    /// collide.
    pub(crate) fn from_os() -> std::io::Result<Self> {
        use std::io::Read;
        let mut random = std::fs::File::open("/dev/urandom")?;
        let mut error = None;
        let keys = Self::from_words(|| {
            let mut bytes = [0u8; 8];
            if let Err(e) = random.read_exact(&mut bytes) {
                error.get_or_insert(e);
            }
            u64::from_le_bytes(bytes)
        })?;
        match error {
            Some(e) => Err(e),
            None => Ok(keys),
        }
    }

    /// Keys drawn from a seed (splitmix64): reproducible, for tests.
    pub(crate) fn from_seed(mut seed: u64) -> std::io::Result<Self> {
        Self::from_words(|| {
            seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = seed;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce5_e4b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        })
    }

    /// Keys uniform below p from uniform 64-bit words: the low 61 bits are
    /// uniform over 0..=p, and the one value p is drawn again.
    fn from_words(mut next: impl FnMut() -> u64) -> std::io::Result<Self> {
        let mut keys = Vec::new();
        keys.try_reserve_exact(2 * WORDS)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
        while keys.len() < 2 * WORDS {
            let key = next() & P;
            if key != P {
                keys.push(key);
            }
        }
        Ok(HashKeys(keys.into_boxed_slice()))
    }

    /// The keys as the kernels take them (`2 * KR_HASH_WORDS` values).
    pub(crate) fn as_slice(&self) -> &[u64] {
        &self.0
    }

    /// Both lanes of `block`'s hash, as `kr_hash_blocks` computes it. A
    /// block longer than `KR_BLOCK_BYTES` is hashed over its first
    /// `KR_BLOCK_BYTES`, as the kernels clamp it.
    pub(crate) fn hash(&self, block: &[u8]) -> [u64; 2] {
        let block = &block[..block.len().min(KR_BLOCK_BYTES as usize)];
        let (k0, k1) = self.0.split_at(WORDS);
        let mut lanes = [0u64; 2];
        for (w, bytes) in block.chunks(4).enumerate() {
            let mut word = [0u8; 4];
            word[..bytes.len()].copy_from_slice(bytes);
            let m = u128::from(u32::from_le_bytes(word));
            for (lane, keys) in lanes.iter_mut().zip([k0, k1]) {
                let product = (u128::from(keys[w]) * m % u128::from(P)) as u64;
                *lane = (*lane + product) % P;
            }
        }
        lanes
    }
}

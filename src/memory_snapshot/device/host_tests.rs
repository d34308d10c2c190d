//! The kernels' algorithm, run on the CPU: `kernels/replay_kernels.cu`
//! compiled as plain C++ (the build script's host library, which the
//! software HSA runtime runs dispatches through) and called through
//! `kr_host_dispatch`, checked against plain Rust: the bytes the scatter
//! copy writes, the hash against the reference in `hash.rs`, and which
//! blocks compare-and-copy copies and counts.

use std::ffi::{c_char, c_int, c_void, CStr};

use super::abi::{
    kr_block_pair, kr_compare_copy_args, kr_copy_record, kr_hash_block, kr_hash_blocks_args,
    kr_scatter_copy_args, KR_BLOCKS_PER_GROUP, KR_BLOCK_BYTES, KR_COMPARE_FORCE_COPY,
    KR_COMPARE_HASH_SRC, KR_COMPARE_SWAP, KR_COMPARE_UPDATE_HASH, KR_HASH_KEYS, KR_HASH_SHIFT,
    KR_MAX_RECORD_BYTES,
};
use super::hash::HashKeys;

#[link(name = "kernel_replay_kernels_host", kind = "static")]
extern "C" {
    fn kr_host_dispatch(kernel: *const c_char, kernarg: *const c_void, workgroups: u32) -> c_int;
}

const BLOCK: usize = KR_BLOCK_BYTES as usize;

/// Runs `kernel` over `count` records (one workgroup each) or blocks
/// (`KR_BLOCKS_PER_GROUP` per workgroup), with `args` as its kernarg.
///
/// # Safety
/// `args` is the named kernel's argument struct, and every address in it
/// (and in the records it points at) is valid for what the kernel does.
unsafe fn dispatch<A>(kernel: &CStr, args: &A, count: usize) {
    let per_group = if kernel == c"kr_scatter_copy" {
        1
    } else {
        KR_BLOCKS_PER_GROUP as usize
    };
    let workgroups = u32::try_from(count.div_ceil(per_group)).expect("workgroups");
    // SAFETY: the caller's contract; kernarg points at a whole `A`.
    let status =
        unsafe { kr_host_dispatch(kernel.as_ptr(), (args as *const A).cast(), workgroups) };
    assert_eq!(status, 0, "{kernel:?}");
}

fn address(bytes: &[u8], offset: usize, len: usize) -> u64 {
    assert!(
        offset + len <= bytes.len(),
        "{offset} + {len} outside {}",
        bytes.len()
    );
    bytes.as_ptr() as u64 + offset as u64
}

/// One scatter-copy dispatch: (dst offset, src offset, size) per record.
fn scatter(dst: &mut [u8], src: &[u8], copies: &[(usize, usize, usize)]) {
    let records: Vec<kr_copy_record> = copies
        .iter()
        .map(|&(d, s, size)| kr_copy_record {
            dst: address(dst, d, size),
            src: address(src, s, size),
            size: size as u64,
        })
        .collect();
    let args = kr_scatter_copy_args {
        records: records.as_ptr(),
        count: records.len() as u64,
    };
    // SAFETY: each record is within dst or src (checked by `address`), and
    // the two are distinct slices.
    unsafe { dispatch(c"kr_scatter_copy", &args, records.len()) };
}

/// One hash dispatch: (offset, len) per block; both lanes of each.
fn hash_blocks(keys: &HashKeys, memory: &[u8], blocks: &[(usize, usize)]) -> Vec<[u64; 2]> {
    let records: Vec<kr_hash_block> = blocks
        .iter()
        .map(|&(at, len)| kr_hash_block {
            addr: address(memory, at, len),
            len: len as u64,
        })
        .collect();
    let mut hashes = vec![[u64::MAX; 2]; blocks.len()];
    let args = kr_hash_blocks_args {
        blocks: records.as_ptr(),
        count: records.len() as u64,
        keys: keys.as_slice().as_ptr(),
        hashes: hashes.as_mut_ptr().cast(),
    };
    // SAFETY: blocks within memory, KR_HASH_KEYS keys, two hashes
    // per block.
    unsafe { dispatch(c"kr_hash_blocks", &args, records.len()) };
    hashes
}

/// One compare-and-copy dispatch: (dst offset, src offset, len) per pair;
/// returns how far it advanced the counter.
fn compare_copy(
    keys: &HashKeys,
    dst: &mut [u8],
    src: &[u8],
    pairs: &[(usize, usize, usize)],
    hashes: &mut [[u64; 2]],
    flags: u32,
) -> u64 {
    assert_eq!(pairs.len(), hashes.len());
    let records: Vec<kr_block_pair> = pairs
        .iter()
        .map(|&(d, s, len)| kr_block_pair {
            dst: address(dst, d, len),
            src: address(src, s, len),
            len: len as u64,
        })
        .collect();
    const BEFORE: u64 = 1000; // the kernel adds to the counter, never sets it
    let mut changed = BEFORE;
    let args = kr_compare_copy_args {
        pairs: records.as_ptr(),
        count: records.len() as u64,
        keys: keys.as_slice().as_ptr(),
        hashes: hashes.as_mut_ptr().cast(),
        changed: &mut changed,
        flags,
        reserved: 0,
    };
    // SAFETY: pairs within dst and src (distinct), two hashes per pair,
    // the counter lives until the call returns.
    unsafe { dispatch(c"kr_compare_copy", &args, records.len()) };
    changed - BEFORE
}

/// xorshift64*: reproducible test data without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// The offset of the first 16-byte-aligned byte of `bytes`.
fn aligned16(bytes: &[u8]) -> usize {
    (16 - bytes.as_ptr() as usize % 16) % 16
}

#[test]
fn unknown_kernels_are_refused() {
    let args = kr_scatter_copy_args {
        records: std::ptr::null(),
        count: 0,
    };
    for name in [c"kr_nothing", c"kr_scatter_copy.kd", c""] {
        // SAFETY: an unknown name runs nothing.
        let status = unsafe {
            kr_host_dispatch(
                name.as_ptr(),
                (&args as *const kr_scatter_copy_args).cast(),
                1,
            )
        };
        assert_eq!(status, -1, "{name:?}");
    }
    // SAFETY: NULL arguments are refused before anything is read.
    let status = unsafe { kr_host_dispatch(std::ptr::null(), std::ptr::null(), 0) };
    assert_eq!(status, -1);
}

#[test]
fn scatter_copy_writes_every_record_and_nothing_else() {
    let mut rng = Rng(0x5eed_0001);
    let max = KR_MAX_RECORD_BYTES as usize;
    let src = rng.bytes(max + 64);
    // Sizes at every edge of the copy's head, units and tail, a few large
    // ones, and both limits; offsets skewed so dst and src agree modulo 16,
    // 8, 4 or nothing.
    let mut sizes = vec![
        0, 1, 2, 3, 15, 16, 17, 31, 255, 256, 257, 4095, 4096, 4097, 65_537, max,
    ];
    sizes.extend((0..24).map(|_| rng.below(8192)));
    sizes.extend((0..4).map(|_| rng.below(max + 1)));
    let mut copies = Vec::new();
    let mut end = 0;
    for size in sizes {
        let at = end + rng.below(40);
        copies.push((at, rng.below(src.len() - size + 1), size));
        end = at + size;
    }
    let mut dst = vec![0xa5u8; end + 40];
    let mut expected = dst.clone();
    for &(d, s, size) in &copies {
        expected[d..d + size].copy_from_slice(&src[s..s + size]);
    }
    scatter(&mut dst, &src, &copies);
    assert!(dst == expected, "the copies differ from the records");

    // Every skew between the two addresses, at every alignment of dst.
    for skew in 0..16 {
        for start in 0..16 {
            let mut dst = vec![0u8; 200];
            let size = 150;
            let (d, s) = (
                aligned16(&dst) + start,
                aligned16(&src) + (start + skew) % 16,
            );
            scatter(&mut dst, &src, &[(d, s, size)]);
            assert_eq!(
                &dst[d..d + size],
                &src[s..s + size],
                "skew {skew} start {start}"
            );
            assert!(
                dst[..d].iter().chain(&dst[d + size..]).all(|&b| b == 0),
                "skew {skew} start {start}"
            );
        }
    }
}

#[test]
fn the_reference_hash_is_the_header_s_formula() {
    let keys = HashKeys::from_seed(7).expect("keys");
    let k = keys.as_slice();
    assert_eq!(k.len(), KR_HASH_KEYS as usize);
    let product = |a: u32, b: u32| u64::from(a) * u64::from(b);
    // The zero block: each lane sums its keys' pairwise products, lane 1's
    // keys shifted by KR_HASH_SHIFT words.
    let zero = |lane: usize| -> u64 {
        let k = &k[lane * KR_HASH_SHIFT as usize..];
        (0..BLOCK / 8).fold(0u64, |sum, i| {
            sum.wrapping_add(product(k[2 * i], k[2 * i + 1]))
        })
    };
    assert_eq!(keys.hash(&[0; BLOCK]), [zero(0), zero(1)]);
    // A word of 3 at position 2 changes only the second term of each lane.
    let mut block = [0u8; BLOCK];
    block[8] = 3;
    let changed = |lane: usize| -> u64 {
        let k = &k[lane * KR_HASH_SHIFT as usize..];
        zero(lane)
            .wrapping_sub(product(k[2], k[3]))
            .wrapping_add(product(k[2].wrapping_add(3), k[3]))
    };
    assert_eq!(keys.hash(&block), [changed(0), changed(1)]);
    assert_eq!(
        keys.hash(&[1]),
        keys.hash(&[1, 0, 0, 0]),
        "bytes past the end read as zero"
    );
    assert_eq!(keys.hash(&[]), keys.hash(&[0; BLOCK]));
    let os = HashKeys::from_os().expect("keys from the OS");
    assert_eq!(os.as_slice().len(), KR_HASH_KEYS as usize);
    assert_ne!(os.as_slice(), keys.as_slice());
}

#[test]
fn kernel_hash_matches_the_reference() {
    let mut rng = Rng(0x5eed_0002);
    let keys = HashKeys::from_seed(11).expect("keys");
    let memory = rng.bytes(3 * BLOCK + 64);
    let a = aligned16(&memory);
    // The whole aligned block (one 16-byte load per work-item), the word
    // path at 4-byte and odd alignment, and partial blocks.
    let blocks = [
        (a, BLOCK),
        (a + BLOCK, BLOCK),
        (a + 4, BLOCK),
        (a + 8, BLOCK),
        (a + 1, BLOCK),
        (a + 3, BLOCK - 1),
        (a, 1),
        (a + 2, 7),
        (a, BLOCK - 3),
        (a + 5, 2049),
        // Past the contract: hashed over its first KR_BLOCK_BYTES, as the
        // reference does.
        (a, BLOCK + 16),
    ];
    let hashes = hash_blocks(&keys, &memory, &blocks);
    for (&(at, len), hash) in blocks.iter().zip(&hashes) {
        assert_eq!(
            *hash,
            keys.hash(&memory[at..at + len]),
            "block at {at} of {len} bytes"
        );
    }
}

#[test]
fn a_zero_length_block_is_skipped() {
    let keys = HashKeys::from_seed(12).expect("keys");
    let memory = vec![7u8; 2 * BLOCK];
    let a = aligned16(&memory);
    // Its hash slot keeps what it held (hash_blocks fills them with MAX
    // first); the block after it is hashed as usual.
    let hashes = hash_blocks(&keys, &memory, &[(a, 0), (a, BLOCK)]);
    assert_eq!(hashes[0], [u64::MAX; 2]);
    assert_eq!(hashes[1], keys.hash(&memory[a..a + BLOCK]));
}

#[test]
fn hash_depends_on_content_not_address() {
    let mut rng = Rng(0x5eed_0003);
    let keys = HashKeys::from_seed(13).expect("keys");
    let block = rng.bytes(BLOCK);
    // The same content at three alignments, and every one-bit change.
    let mut memory = vec![0u8; 4 * BLOCK + 64];
    let a = aligned16(&memory);
    let places = [a, a + BLOCK + 16 + 4, a + 2 * BLOCK + 32 + 3];
    for &at in &places {
        memory[at..at + BLOCK].copy_from_slice(&block);
    }
    let flips = [0, 7, 8 * 1000 + 3, 8 * 2048, 8 * BLOCK - 1];
    let flipped_at = a + 3 * BLOCK + 48;
    let mut blocks: Vec<(usize, usize)> = places.iter().map(|&at| (at, BLOCK)).collect();
    let original = keys.hash(&block);
    let mut hashes = Vec::new();
    for &bit in &flips {
        let mut changed = block.clone();
        changed[bit / 8] ^= 1 << (bit % 8);
        memory[flipped_at..flipped_at + BLOCK].copy_from_slice(&changed);
        let h = hash_blocks(&keys, &memory, &[(flipped_at, BLOCK)])[0];
        assert_eq!(h, keys.hash(&changed), "bit {bit}");
        assert!(
            h[0] != original[0] && h[1] != original[1],
            "bit {bit}: a lane missed the change"
        );
        hashes.push(h);
    }
    blocks.truncate(places.len());
    for h in hash_blocks(&keys, &memory, &blocks) {
        assert_eq!(h, original);
    }
    // And the changed blocks differ from each other too.
    for (i, h) in hashes.iter().enumerate() {
        assert!(hashes[..i].iter().all(|other| other != h));
    }
}

/// Blocks of a compare-and-copy test: lengths and places in two buffers
/// (dst at skewed places, to reach every copy path).
fn pair_layout(rng: &mut Rng) -> (Vec<(usize, usize, usize)>, usize, usize) {
    let lens = [
        BLOCK,
        BLOCK,
        BLOCK,
        1,
        100,
        BLOCK - 1,
        BLOCK,
        2049,
        BLOCK,
        0,
        BLOCK,
        17,
    ];
    let (mut d, mut s) = (0, 0);
    let mut pairs = Vec::new();
    for len in lens {
        let skew = rng.below(16);
        pairs.push((d + skew, s, len));
        d += skew + len;
        s += len;
    }
    (pairs, d, s)
}

#[test]
fn compare_copy_restores_exactly_the_changed_blocks() {
    let mut rng = Rng(0x5eed_0004);
    let keys = HashKeys::from_seed(17).expect("keys");
    let (pairs, dst_len, src_len) = pair_layout(&mut rng);
    // A restore: src holds the captured blocks, their hashes are the
    // snapshot's; dst is the live memory, written since in some blocks.
    let src = rng.bytes(src_len);
    let mut captured: Vec<[u64; 2]> = pairs
        .iter()
        .map(|&(_, s, len)| keys.hash(&src[s..s + len]))
        .collect();
    let mut live = vec![0u8; dst_len];
    for &(d, s, len) in &pairs {
        live[d..d + len].copy_from_slice(&src[s..s + len]);
    }
    let written = [0usize, 3, 5, 7, 11];
    for &i in &written {
        let (d, _, len) = pairs[i];
        live[d + rng.below(len)] ^= 0x10;
    }
    // A block whose stored hash says "unchanged" is left alone, even
    // though its bytes differ: the kernel copies on the hash alone.
    let trusted = 2;
    let (d, _, len) = pairs[trusted];
    live[d] ^= 1;
    captured[trusted] = keys.hash(&live[d..d + len]);
    let left_alone = live[d..d + len].to_vec();

    let before = captured.clone();
    let copied = compare_copy(&keys, &mut live, &src, &pairs, &mut captured, 0);
    assert_eq!(copied, written.len() as u64);
    assert_eq!(
        captured, before,
        "no KR_COMPARE_UPDATE_HASH: the hashes stay"
    );
    for (i, &(d, s, len)) in pairs.iter().enumerate() {
        if i == trusted {
            assert_eq!(&live[d..d + len], &left_alone[..]);
        } else {
            assert_eq!(&live[d..d + len], &src[s..s + len], "block {i}");
        }
    }
    // Restored: a second pass finds nothing to copy.
    assert_eq!(
        compare_copy(&keys, &mut live, &src, &pairs, &mut captured, 0),
        0
    );
}

#[test]
fn compare_copy_of_the_source_updates_the_snapshot_and_its_hashes() {
    let mut rng = Rng(0x5eed_0005);
    let keys = HashKeys::from_seed(19).expect("keys");
    let (pairs, arena_len, live_len) = pair_layout(&mut rng);
    // An incremental snapshot: src is the live memory, dst the previous
    // capture with its hashes; the live memory changed in some blocks.
    let mut live = rng.bytes(live_len);
    let mut arena = vec![0u8; arena_len];
    for &(d, s, len) in &pairs {
        arena[d..d + len].copy_from_slice(&live[s..s + len]);
    }
    let mut hashes: Vec<[u64; 2]> = pairs
        .iter()
        .map(|&(d, _, len)| keys.hash(&arena[d..d + len]))
        .collect();
    let written = [1usize, 4, 6, 8, 10];
    for &i in &written {
        let (_, s, len) = pairs[i];
        live[s + len - 1] = !live[s + len - 1];
    }
    let flags = KR_COMPARE_HASH_SRC | KR_COMPARE_UPDATE_HASH;

    // Hashing dst instead would see no change at all.
    let mut unchanged = hashes.clone();
    let mut arena_copy = arena.clone();
    assert_eq!(
        compare_copy(&keys, &mut arena_copy, &live, &pairs, &mut unchanged, 0),
        0
    );

    // The source hashed, without storing the new hashes.
    let mut kept = hashes.clone();
    let mut arena_kept = arena.clone();
    let copied = compare_copy(
        &keys,
        &mut arena_kept,
        &live,
        &pairs,
        &mut kept,
        KR_COMPARE_HASH_SRC,
    );
    assert_eq!(copied, written.len() as u64);
    assert_eq!(kept, hashes);

    let copied = compare_copy(&keys, &mut arena, &live, &pairs, &mut hashes, flags);
    assert_eq!(copied, written.len() as u64);
    assert_eq!(arena, arena_kept);
    for (i, &(d, s, len)) in pairs.iter().enumerate() {
        assert_eq!(&arena[d..d + len], &live[s..s + len], "block {i}");
        assert_eq!(
            hashes[i],
            keys.hash(&live[s..s + len]),
            "block {i}: stored hash"
        );
    }
    assert_eq!(
        compare_copy(&keys, &mut arena, &live, &pairs, &mut hashes, flags),
        0
    );
}

/// One compare-and-copy dispatch over ready pairs (addresses in memory the
/// caller owns); returns how far it advanced the counter.
fn compare_copy_pairs(
    keys: &HashKeys,
    pairs: &[kr_block_pair],
    hashes: &mut [[u64; 2]],
    flags: u32,
) -> u64 {
    let mut changed = 0u64;
    let args = kr_compare_copy_args {
        pairs: pairs.as_ptr(),
        count: pairs.len() as u64,
        keys: keys.as_slice().as_ptr(),
        hashes: hashes.as_mut_ptr().cast(),
        changed: &mut changed,
        flags,
        reserved: 0,
    };
    // SAFETY: the caller's pairs point into memory it owns and does not
    // touch during the call; two hashes per pair.
    unsafe { dispatch(c"kr_compare_copy", &args, pairs.len()) };
    changed
}

#[test]
fn one_pair_table_serves_capture_and_restore() {
    // The library's use: one table of (live, kept) pairs. Capture trades
    // the sides (KR_COMPARE_SWAP), hashes the live block, copies every
    // block (FORCE_COPY) and stores every hash; restore copies back only the
    // blocks whose live hash changed. A pair of length 0 is never touched.
    let mut rng = Rng(0x5eed_0009);
    let keys = HashKeys::from_seed(23).expect("keys");
    let blocks = 6;
    let mut live = rng.bytes(blocks * BLOCK);
    let mut kept = vec![0u8; blocks * BLOCK];
    let original = live.clone();
    let mut pairs: Vec<kr_block_pair> = (0..blocks)
        .map(|b| kr_block_pair {
            dst: live.as_mut_ptr() as u64 + (b * BLOCK) as u64,
            src: kept.as_mut_ptr() as u64 + (b * BLOCK) as u64,
            len: BLOCK as u64,
        })
        .collect();
    pairs[4].len = 0; // a freed region's block
    let mut hashes = vec![[u64::MAX; 2]; blocks];
    let capture =
        KR_COMPARE_SWAP | KR_COMPARE_HASH_SRC | KR_COMPARE_UPDATE_HASH | KR_COMPARE_FORCE_COPY;
    assert_eq!(compare_copy_pairs(&keys, &pairs, &mut hashes, capture), 5);
    for b in (0..blocks).filter(|&b| b != 4) {
        let range = b * BLOCK..(b + 1) * BLOCK;
        assert_eq!(
            &kept[range.clone()],
            &original[range.clone()],
            "block {b} captured"
        );
        assert_eq!(hashes[b], keys.hash(&original[range]), "block {b} hashed");
    }
    assert!(
        kept[4 * BLOCK..5 * BLOCK].iter().all(|&x| x == 0),
        "the skipped block is not copied"
    );
    assert_eq!(hashes[4], [u64::MAX; 2], "nor hashed");
    // FORCE_COPY copies even a block whose stored hash already matches.
    assert_eq!(compare_copy_pairs(&keys, &pairs, &mut hashes, capture), 5);

    // A pass writes blocks 1 and 4 (4's region was freed: not restored).
    live[BLOCK + 17] ^= 0xff;
    live[4 * BLOCK] ^= 0xff;
    assert_eq!(compare_copy_pairs(&keys, &pairs, &mut hashes, 0), 1);
    assert_eq!(&live[..4 * BLOCK], &original[..4 * BLOCK]);
    assert_ne!(live[4 * BLOCK], original[4 * BLOCK]);
    assert_eq!(
        compare_copy_pairs(&keys, &pairs, &mut hashes, 0),
        0,
        "nothing left to restore"
    );
}

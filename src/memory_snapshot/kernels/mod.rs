//! The library's own device kernels (`kernels/replay_kernels.cu`): one
//! dispatch copying many regions, per-block hashing of the captured regions,
//! and compare-and-copy of the blocks whose hash changed.
//!
//! This module holds what the host side needs of them: the ABI
//! ([`abi`], generated from `kernels/replay_kernels.h`), the embedded AMD
//! code objects ([`code_objects`]), and the hash itself ([`hash`]: the keys,
//! and the reference the kernels must agree with). Dispatching them through
//! the captured HSA tables is the device path's.

// The device path (queues, code-object loading, dispatch; being written
// alongside) is what uses these; until it lands only the tests do.
#![allow(dead_code)]

pub(crate) mod abi;
pub(crate) mod code_objects;
pub(crate) mod hash;

#[cfg(test)]
mod code_object_tests;
#[cfg(test)]
mod host_tests;

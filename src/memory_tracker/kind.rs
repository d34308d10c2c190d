//! What kind of memory a tracked region is: reported per snapshot
//! (`kr_snapshot_kind_bytes`) and in the stats, so that a tool sees what its
//! replays cover.

use std::fmt;

#[cfg(not(loom))]
use crate::support::stats::KIND_SLOTS;

crate::c_enum! {
    /// The kind of memory a captured region is (`kr_snapshot_kind_bytes`,
    /// the stats' per-kind figures). Codes are only ever appended.
    pub enum MemoryKind: "kr_memory_kind_t", "KR_MEMORY_" {
        /// Coarse-grained device memory owned by the agent: pool and region
        /// allocations, virtual-memory mappings, module variables.
        Device = 0 => "DEVICE",
        /// Fine-grained device memory owned by the agent (a fine-grained or
        /// extended-scope fine-grained pool of the GPU:
        /// `hipExtMallocWithFlags(hipDeviceMallocFinegrained)`).
        DeviceFine = 1 => "DEVICE_FINE",
        /// Device memory of another GPU the agent was given access to
        /// (`hsa_amd_agents_allow_access`: peer-to-peer buffers a multi-GPU
        /// kernel writes), coarse- or fine-grained.
        DevicePeer = 2 => "DEVICE_PEER",
    }
}

// The per-kind arrays of the stats and of the C structs have room for kinds
// to come (host, locked, managed, peer and IPC memory), so adding one is not
// an ABI change.
#[cfg(not(loom))]
const _: () = assert!(MemoryKind::ALL.len() <= KIND_SLOTS);

impl MemoryKind {
    /// The kind's index in per-kind arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for MemoryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MemoryKind::Device => "device",
            MemoryKind::DeviceFine => "fine-grained device",
            MemoryKind::DevicePeer => "peer device",
        })
    }
}

/// What a registry entry holds before it is recorded (a tombstone).
impl Default for MemoryKind {
    fn default() -> Self {
        MemoryKind::Device
    }
}

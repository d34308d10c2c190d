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
        /// Host memory a GPU was given access to: an allocation from a CPU
        /// agent's pool, fine- or coarse-grained (`hipHostMalloc`), granted
        /// with `hsa_amd_agents_allow_access`, or system memory from
        /// `hsa_memory_allocate`. Copied by the CPU; which of it is captured
        /// is the host-memory setting's (`kr_set_host_memory`).
        Host = 3 => "HOST",
        /// Host memory locked for GPUs (`hsa_amd_memory_lock`,
        /// `hsa_amd_memory_lock_to_pool`: `hipHostRegister`). Copied by the
        /// CPU, retired before the runtime unlocks it.
        Locked = 4 => "LOCKED",
        /// Managed (shared virtual) memory a GPU was given access to with
        /// `hsa_amd_svm_attributes_set` (`hipMallocManaged`, `hipMemAdvise`).
        /// Copied by the replaying GPU, never by the CPU, so that no page
        /// migrates; checked with the runtime at every capture and restore.
        Managed = 5 => "MANAGED",
    }
}

// The per-kind arrays of the stats and of the C structs have room for kinds
// to come (IPC memory), so adding one is not
// an ABI change.
#[cfg(not(loom))]
const _: () = assert!(MemoryKind::ALL.len() <= KIND_SLOTS);

impl MemoryKind {
    /// The kind's index in per-kind arrays.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Host memory: copied by the CPU, kept in host storage, and captured
    /// as the host-memory setting says.
    pub fn is_host(self) -> bool {
        matches!(self, MemoryKind::Host | MemoryKind::Locked)
    }

    /// Memory another agent (the CPU) owns that the agent reaches through
    /// a grant and captures as what it is: host and managed memory.
    pub fn is_system(self) -> bool {
        self.is_host() || self == MemoryKind::Managed
    }
}

impl fmt::Display for MemoryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MemoryKind::Device => "device",
            MemoryKind::DeviceFine => "fine-grained device",
            MemoryKind::DevicePeer => "peer device",
            MemoryKind::Host => "host",
            MemoryKind::Locked => "locked host",
            MemoryKind::Managed => "managed",
        })
    }
}

/// What a registry entry holds before it is recorded (a tombstone).
impl Default for MemoryKind {
    fn default() -> Self {
        MemoryKind::Device
    }
}

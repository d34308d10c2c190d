//! Why a snapshot declines, and the detail its one log line gives.
//!
//! The details are plain data rendered only when logged: a decline caused by
//! memory pressure must not need fresh heap memory to say so.

use std::fmt;

use super::discovery::DiscoveryError;
use super::host_buffer::HostBufferError;
use super::storage::arena::AcquireError;
use super::storage::layout::LayoutError;
use crate::hsa::hsa_status_t;

crate::c_enum! {
    /// Why a snapshot declined replay (`KR_DECLINE_NONE` for a complete one).
    /// Codes are only ever appended, never renumbered.
    pub enum DeclineReason: "kr_decline_reason_t", "KR_DECLINE_", c_only [
        /// Not declined: the snapshot is complete.
        "NONE" = 0,
    ] {
        /// No core table installed (`kr_memory_tracker_init`).
        NotInitialized = 1 => "NOT_INITIALIZED",
        /// `kr_finalize` was called.
        Finalized = 2 => "FINALIZED",
        /// No way to enumerate loaded executables: no iterator was set with
        /// `kr_set_executable_iterator`, and the runtime has no AMD loader
        /// extension table with `hsa_ven_amd_loader_iterate_executables`.
        NoExecutableIterator = 3 => "NO_EXECUTABLE_ITERATOR",
        /// The executable iterator, a symbol walk or a symbol query failed.
        SymbolEnumeration = 4 => "SYMBOL_ENUMERATION",
        /// The snapshot's bookkeeping could not be allocated.
        MetadataMemory = 5 => "METADATA_MEMORY",
        /// A host copy could not be allocated or would pass the host budget.
        HostMemory = 6 => "HOST_MEMORY",
        /// A device-to-host copy failed.
        CopyFailed = 7 => "COPY_FAILED",
        /// The storage policy forces the device tier and the snapshot does not
        /// fit the device budget or cannot be allocated there.
        DeviceMemory = 8 => "DEVICE_MEMORY",
        /// The allocation wrappers were taken out of the HSA tables they were
        /// installed into (a tool restored the runtime's entries): frees may have
        /// gone unseen, so what was tracked is set aside. Snapshots decline until
        /// `kr_memory_tracker_init` installs the wrappers again and re-validates
        /// it.
        WrappersRemoved = 9 => "WRAPPERS_REMOVED",
        /// Application async copies (`hsa_amd_memory_async_copy` and its
        /// variants) touching the agent's tracked memory were still in flight
        /// when the copy fence's timeout ran out (`kr_set_copy_fence_timeout`).
        CopiesInFlight = 10 => "COPIES_IN_FLIGHT",
        /// A region the snapshot would capture can be written by another
        /// agent too (peer memory, or the agent's memory granted to another),
        /// and that agent's live snapshot holds it: two replays restoring one
        /// region would tear each other's passes. Free that snapshot first.
        SharedRegionBusy = 11 => "SHARED_REGION_BUSY",
        /// The coverage setting is strict (`kr_set_coverage`) and the agent
        /// can write memory the snapshot would not cover: host memory the
        /// host-memory setting leaves out, or, with XNACK on, any system
        /// memory.
        UncoveredMemory = 12 => "UNCOVERED_MEMORY",
    }
}

impl fmt::Display for DeclineReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeclineReason::NotInitialized => "not initialized",
            DeclineReason::Finalized => "finalized",
            DeclineReason::NoExecutableIterator => "no executable iterator",
            DeclineReason::SymbolEnumeration => "symbol enumeration failed",
            DeclineReason::MetadataMemory => "out of host memory for metadata",
            DeclineReason::HostMemory => "out of host memory for region copies",
            DeclineReason::CopyFailed => "device-to-host copy failed",
            DeclineReason::DeviceMemory => "out of device memory for region copies",
            DeclineReason::WrappersRemoved => "allocation wrappers taken out of the HSA tables",
            DeclineReason::CopiesInFlight => "application async copies still in flight",
            DeclineReason::SharedRegionBusy => {
                "a shared region is held by another agent's snapshot"
            }
            DeclineReason::UncoveredMemory => "memory the agent can write is not covered",
        })
    }
}

/// A decline with what the log line says about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decline {
    NotInitialized,
    Finalized,
    WrappersRemoved,
    CopiesInFlight {
        copies: u64,
        timeout_ms: u64,
    },
    SharedRegionBusy {
        base: usize,
        agent: u64,
    },
    /// Strict coverage: host bytes left out, and whether XNACK is on.
    Uncovered {
        host_bytes: u64,
        xnack: bool,
    },
    NoExecutableIterator,
    Discovery(DiscoveryError),
    RegionList,
    HostBuffer {
        address: usize,
        size: usize,
        error: HostBufferError,
    },
    Copy {
        address: usize,
        size: usize,
        status: hsa_status_t,
    },
    Layout(LayoutError),
}

impl Decline {
    pub fn reason(&self) -> DeclineReason {
        match self {
            Decline::NotInitialized => DeclineReason::NotInitialized,
            Decline::Finalized => DeclineReason::Finalized,
            Decline::WrappersRemoved => DeclineReason::WrappersRemoved,
            Decline::CopiesInFlight { .. } => DeclineReason::CopiesInFlight,
            Decline::SharedRegionBusy { .. } => DeclineReason::SharedRegionBusy,
            Decline::Uncovered { .. } => DeclineReason::UncoveredMemory,
            Decline::NoExecutableIterator => DeclineReason::NoExecutableIterator,
            Decline::Discovery(DiscoveryError::Metadata) | Decline::RegionList => {
                DeclineReason::MetadataMemory
            }
            Decline::Discovery(_) => DeclineReason::SymbolEnumeration,
            Decline::HostBuffer { .. } => DeclineReason::HostMemory,
            Decline::Copy { .. } => DeclineReason::CopyFailed,
            Decline::Layout(LayoutError::DeviceMemory { .. }) => DeclineReason::DeviceMemory,
            Decline::Layout(LayoutError::HostMemory { .. }) => DeclineReason::HostMemory,
            Decline::Layout(LayoutError::Metadata) => DeclineReason::MetadataMemory,
        }
    }
}

impl From<DiscoveryError> for Decline {
    fn from(error: DiscoveryError) -> Self {
        Decline::Discovery(error)
    }
}

impl fmt::Display for Decline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Decline::NotInitialized => {
                f.write_str("kr_memory_tracker_init installed no core table")
            }
            Decline::Finalized => f.write_str("kr_finalize was called"),
            Decline::CopiesInFlight { copies, timeout_ms } => write!(
                f,
                "{copies} application async copy(ies) on the agent's tracked memory still in \
                 flight after {timeout_ms} ms (kr_set_copy_fence_timeout)"
            ),
            Decline::SharedRegionBusy { base, agent } => write!(
                f,
                "the region at {base:#x} can be written by another agent and agent {agent:#x}'s \
                 live snapshot holds it (two replays would tear it); free that snapshot first"
            ),
            Decline::Uncovered { host_bytes, xnack } => write!(
                f,
                "the coverage setting is strict and the agent can write memory the snapshot \
                 would not cover: {host_bytes} bytes of host memory the host-memory setting \
                 leaves out (kr_set_host_memory){}",
                if xnack {
                    ", and any system memory (XNACK is on)"
                } else {
                    ""
                }
            ),
            Decline::WrappersRemoved => f.write_str(
                "the allocation wrappers were taken out of the HSA tables \
                 (call kr_memory_tracker_init again to put them back)",
            ),
            Decline::NoExecutableIterator => {
                f.write_str("no executable iterator: none set (kr_set_executable_iterator) and the runtime has no AMD loader extension table")
            }
            Decline::Discovery(error) => error.fmt(f),
            Decline::RegionList => f.write_str("cannot reserve the region list"),
            Decline::HostBuffer {
                address,
                size,
                error,
            } => {
                let why = match error {
                    HostBufferError::OverBudget => "would pass the host budget",
                    HostBufferError::OutOfMemory => "cannot be allocated",
                };
                write!(f, "host copy of {size} bytes for region {address:#x} {why}")
            }
            Decline::Copy {
                address,
                size,
                status,
            } => write!(
                f,
                "copy of {size} bytes from {address:#x} failed with HSA status {status:#x}"
            ),
            Decline::Layout(LayoutError::DeviceMemory { needed, error }) => write!(
                f,
                "{needed} bytes of device memory for the snapshot {}",
                match error {
                    Some(AcquireError::Allocation) => "cannot be allocated",
                    Some(AcquireError::NoPool) => "have no pool: the agent has no device tier",
                    _ => "would pass the device budget",
                }
            ),
            Decline::Layout(LayoutError::HostMemory { needed, error }) => write!(
                f,
                "{needed} bytes of host memory for the snapshot {}",
                match error {
                    Some(AcquireError::Allocation) => "cannot be allocated",
                    Some(AcquireError::NoPool) => {
                        "have no pool: none the agent can be granted access to"
                    }
                    _ => "would pass the host budget",
                }
            ),
            Decline::Layout(LayoutError::Metadata) => {
                f.write_str("cannot allocate the storage plan")
            }
        }
    }
}

//! The allocation classifier (the SDK's `query_alloc`): decides whether a
//! fresh allocation is replay state the tracker should record, and of which
//! kind.
//!
//! Memory that is not kernarg is tracked, coarse- and fine-grained: device
//! memory owned by a GPU (a fine-grained pool of a GPU: atomics buffers a
//! kernel writes), and host memory owned by a CPU agent, which a GPU's
//! snapshot captures once the GPU was granted access to it (and the
//! host-memory setting takes it: the runtime's own staging and hostcall
//! buffers share its pools with the application's). Kernarg holds the
//! pointer arguments of in-flight kernels (a stale restore there faults the
//! GPU); executable allocations are HIP's per-stream kernarg pools and the
//! profiler's own trace buffers, which sit in coarse-grained memory and
//! would otherwise pass the kernarg check.

use std::mem::{offset_of, size_of};

use super::kind::MemoryKind;
use crate::hsa::entries::AmdEntries;
use crate::hsa::sys::{
    hsa_amd_pointer_info_t, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED,
    HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT,
    HSA_EXT_POINTER_TYPE_HSA,
};
use crate::hsa::{POOL_ALLOCATE_EXECUTABLE_FLAG, POOL_GLOBAL_FLAG_EXTENDED_SCOPE_FINE_GRAINED};

/// Why an allocation is not tracked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Untracked {
    /// Pool-allocate flags carry the executable flag.
    Executable,
    /// `hsa_amd_pointer_info` failed.
    QueryFailed,
    /// The runtime does not know it as an HSA allocation.
    NotHsaAllocation,
    /// The runtime's pointer-info struct predates `global_flags`.
    NoGlobalFlags,
    /// Neither coarse- nor fine-grained.
    UnknownGrain,
    Kernarg,
}

/// The grain a pointer-info answer reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grain {
    Coarse,
    /// Fine-grained or extended-scope fine-grained.
    Fine,
}

/// A tracked allocation's owner, kind and grain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Classified {
    pub owner: u64,
    pub memory: MemoryKind,
    pub grain: Grain,
}

impl Classified {
    /// The kind memory of `grain` owned by a GPU (`gpu`) or a CPU is.
    pub fn new(owner: u64, grain: Grain, gpu: bool) -> Self {
        let memory = match (gpu, grain) {
            (true, Grain::Coarse) => MemoryKind::Device,
            (true, Grain::Fine) => MemoryKind::DeviceFine,
            (false, _) => MemoryKind::Host,
        };
        Classified {
            owner,
            memory,
            grain,
        }
    }
}

/// Classifies a fresh allocation. `pool_flags` are the flags passed to
/// `hsa_amd_memory_pool_allocate` (`None` for `hsa_memory_allocate`, which has
/// none); `is_gpu` says whether an agent is a GPU (asked of the owner).
pub fn classify(
    amd: &AmdEntries,
    base: usize,
    pool_flags: Option<u32>,
    is_gpu: impl FnOnce(u64) -> bool,
) -> Result<Classified, Untracked> {
    // Checked from the flags before any query: this is the cheap filter and
    // the one that catches HIP's kernarg pools, which report coarse-grained.
    if pool_flags.is_some_and(|flags| flags & POOL_ALLOCATE_EXECUTABLE_FLAG != 0) {
        return Err(Untracked::Executable);
    }
    let info = amd.pointer_info(base).map_err(|_| Untracked::QueryFailed)?;
    let (owner, grain) = verdict(&info)?;
    Ok(Classified::new(owner, grain, is_gpu(owner)))
}

/// The decision on a pointer-info answer: the owner and the grain.
pub(crate) fn verdict(info: &hsa_amd_pointer_info_t) -> Result<(u64, Grain), Untracked> {
    if info.type_ != HSA_EXT_POINTER_TYPE_HSA {
        return Err(Untracked::NotHsaAllocation);
    }
    let flags_end = offset_of!(hsa_amd_pointer_info_t, global_flags) + size_of::<u32>();
    if (info.size as usize) < flags_end {
        return Err(Untracked::NoGlobalFlags);
    }
    let flags = info.global_flags;
    if flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT != 0 {
        return Err(Untracked::Kernarg);
    }
    let owner = info.agentOwner.handle;
    if flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED != 0 {
        return Ok((owner, Grain::Coarse));
    }
    let fine =
        HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED | POOL_GLOBAL_FLAG_EXTENDED_SCOPE_FINE_GRAINED;
    if flags & fine != 0 {
        return Ok((owner, Grain::Fine));
    }
    Err(Untracked::UnknownGrain)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hsa::sys::{
        hsa_agent_t, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED, HSA_EXT_POINTER_TYPE_LOCKED,
        HSA_EXT_POINTER_TYPE_UNKNOWN,
    };

    fn info(type_: u32, flags: u32) -> hsa_amd_pointer_info_t {
        hsa_amd_pointer_info_t {
            size: size_of::<hsa_amd_pointer_info_t>() as u32,
            type_,
            agentOwner: hsa_agent_t { handle: 42 },
            global_flags: flags,
            ..Default::default()
        }
    }

    #[test]
    fn coarse_grained_hsa_memory_is_tracked_with_its_owner() {
        let i = info(
            HSA_EXT_POINTER_TYPE_HSA,
            HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED,
        );
        assert_eq!(verdict(&i), Ok((42, Grain::Coarse)));
    }

    #[test]
    fn fine_grained_memory_is_tracked_as_its_own_kind() {
        for flags in [
            HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED,
            POOL_GLOBAL_FLAG_EXTENDED_SCOPE_FINE_GRAINED,
        ] {
            let i = info(HSA_EXT_POINTER_TYPE_HSA, flags);
            assert_eq!(verdict(&i), Ok((42, Grain::Fine)));
        }
        assert_eq!(
            verdict(&info(HSA_EXT_POINTER_TYPE_HSA, 0)),
            Err(Untracked::UnknownGrain)
        );
    }

    #[test]
    fn exclusions() {
        let coarse = HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED;
        let kernarg = HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT;
        let fine = HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED;
        assert_eq!(
            verdict(&info(HSA_EXT_POINTER_TYPE_HSA, kernarg | coarse)),
            Err(Untracked::Kernarg)
        );
        assert_eq!(
            verdict(&info(HSA_EXT_POINTER_TYPE_HSA, kernarg | fine)),
            Err(Untracked::Kernarg)
        );
        assert_eq!(
            verdict(&info(HSA_EXT_POINTER_TYPE_UNKNOWN, coarse)),
            Err(Untracked::NotHsaAllocation)
        );
        assert_eq!(
            verdict(&info(HSA_EXT_POINTER_TYPE_LOCKED, coarse)),
            Err(Untracked::NotHsaAllocation)
        );
    }

    #[test]
    fn the_owner_decides_between_device_and_host_memory() {
        use MemoryKind::*;
        let kind = |grain, gpu| Classified::new(7, grain, gpu).memory;
        assert_eq!(kind(Grain::Coarse, true), Device);
        assert_eq!(kind(Grain::Fine, true), DeviceFine);
        assert_eq!(kind(Grain::Coarse, false), Host);
        assert_eq!(kind(Grain::Fine, false), Host);
    }

    #[test]
    fn a_runtime_without_global_flags_is_not_trusted() {
        let mut i = info(
            HSA_EXT_POINTER_TYPE_HSA,
            HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED,
        );
        i.size = offset_of!(hsa_amd_pointer_info_t, global_flags) as u32;
        assert_eq!(verdict(&i), Err(Untracked::NoGlobalFlags));
        // A struct that ends right after global_flags has them.
        i.size += size_of::<u32>() as u32;
        assert_eq!(verdict(&i), Ok((42, Grain::Coarse)));
    }
}

//! Managed (shared virtual) memory: what `hipMallocManaged` makes, recorded
//! by the `hsa_amd_svm_attributes_set` wrapper and retired before
//! `hsa_amd_vmem_address_free` releases it.
//!
//! HIP on an HMM system reserves managed memory without the runtime's
//! allocator (ROCm 6.x: a plain `mmap`; 7.x: `hsa_amd_vmem_address_reserve`
//! with `HSA_AMD_VMEM_ADDRESS_NO_REGISTER`, itself an anonymous `mmap`) and
//! makes it reachable with `hsa_amd_svm_attributes_set(AGENT_ACCESSIBLE)`
//! for every GPU; `hipMemAdvise(SetAccessedBy)` adds
//! `AGENT_ACCESSIBLE_IN_PLACE` for one. So the attributes call is the one
//! witness: after a successful call on memory that is no HSA allocation
//! (`hsa_amd_pointer_info` says unknown, or a reservation), the range,
//! aligned to pages, is recorded as owned by the CPU agent, granted to the
//! GPUs given either access attribute, and taken from a GPU given
//! `AGENT_NO_ACCESS` by a call covering the whole range. A call on part of
//! a recorded range (a `hipMemAdvise` on a sub-range) only adds GPUs: the
//! runtime's answer at capture decides the rest ([`capturable`]).
//!
//! Frees: ROCm 7.x frees managed memory with `hsa_amd_vmem_address_free`,
//! wrapped: every managed range in the freed space is retired before the
//! runtime unmaps it. ROCm 6.x unmaps it with `munmap`, which no wrapper
//! sees: at every capture and restore each managed range is asked about
//! (`hsa_amd_svm_attributes_get` with `ACCESS_QUERY` for the replaying
//! agent), and one the runtime no longer answers for is skipped like a
//! freed region. Memory unmapped and mapped again at the same address and
//! given attributes again is the same record (it is managed memory there).

use super::Tracker;
use crate::hsa::entries::AmdEntries;
use crate::hsa::sys::{
    hsa_amd_svm_attribute_pair_t, HSA_AMD_SVM_ATTRIB_ACCESS_QUERY,
    HSA_AMD_SVM_ATTRIB_AGENT_ACCESSIBLE, HSA_AMD_SVM_ATTRIB_AGENT_ACCESSIBLE_IN_PLACE,
    HSA_AMD_SVM_ATTRIB_AGENT_NO_ACCESS, HSA_EXT_POINTER_TYPE_UNKNOWN,
};
use crate::hsa::{hsa_agent_t, HSA_STATUS_SUCCESS};

/// The page size SVM attributes apply in (the runtime aligns to it).
pub(crate) const PAGE: usize = 4096;

/// `HSA_EXT_POINTER_TYPE_RESERVED_ADDR`, which the 6.0 - 6.3 headers do not
/// name: ROCm 7.x answers it for a `NO_REGISTER` reservation.
const POINTER_TYPE_RESERVED_ADDR: u32 = 5;

const ACCESSIBLE: u64 = HSA_AMD_SVM_ATTRIB_AGENT_ACCESSIBLE as u64;
const IN_PLACE: u64 = HSA_AMD_SVM_ATTRIB_AGENT_ACCESSIBLE_IN_PLACE as u64;
const NO_ACCESS: u64 = HSA_AMD_SVM_ATTRIB_AGENT_NO_ACCESS as u64;
const ACCESS_QUERY: u64 = HSA_AMD_SVM_ATTRIB_ACCESS_QUERY as u64;

/// `[ptr, ptr + size)` widened to whole pages; `None` if it wraps.
pub fn page_span(ptr: usize, size: usize) -> Option<(usize, usize)> {
    let begin = ptr & !(PAGE - 1);
    let end = ptr.checked_add(size)?.checked_next_multiple_of(PAGE)?;
    Some((begin, end - begin))
}

/// After a successful `hsa_amd_svm_attributes_set(ptr, size, list)`.
pub fn attributes_set(
    tracker: &Tracker,
    ptr: usize,
    size: usize,
    list: &[hsa_amd_svm_attribute_pair_t],
) {
    let (Some(core), Some(amd)) = (tracker.core(), tracker.amd()) else {
        return;
    };
    let gpus = |attribute: &dyn Fn(u64) -> bool| {
        list.iter()
            .filter(|pair| attribute(pair.attribute))
            .fold(0, |bits, pair| {
                bits | tracker
                    .agent_bits
                    .gpus_of(core, &[hsa_agent_t { handle: pair.value }])
            })
    };
    let given = gpus(&|a| a == ACCESSIBLE || a == IN_PLACE);
    let taken = gpus(&|a| a == NO_ACCESS);
    if given == 0 && taken == 0 {
        return;
    }
    let Some((base, len)) = page_span(ptr, size) else {
        return;
    };
    // An HSA allocation (host-pool memory HIP advises without HMM) is
    // tracked as what it is already.
    let svm = amd.pointer_info(base).is_ok_and(|info| {
        info.type_ == HSA_EXT_POINTER_TYPE_UNKNOWN || info.type_ == POINTER_TYPE_RESERVED_ADDR
    });
    if !svm {
        return;
    }
    let owner = tracker.lock_facts.cpu_agent(tracker, core);
    if owner == 0 {
        return;
    }
    tracker.inventory.managed(base, len, owner, given, taken);
}

/// Frees address space (`hsa_amd_vmem_address_free`, `free`) with every
/// managed range in it retired first; those stay retired if the runtime
/// freed it.
#[cfg(hsa_vmem)]
pub fn free_address_space(
    tracker: &Tracker,
    base: usize,
    size: usize,
    free: impl FnOnce() -> crate::hsa::hsa_status_t,
) -> crate::hsa::hsa_status_t {
    let bases = match tracker.inventory.managed_in(base, size) {
        Ok(bases) if !bases.is_empty() => bases,
        // Nothing managed there; or no memory for the list, and then the
        // ranges are not retired: capture and restore ask the runtime about
        // each range anyway (`capturable`), and an unmapped one is skipped.
        _ => return free(),
    };
    tracker
        .inventory
        .retire_all_then_free(&bases, free, |status, _| *status == HSA_STATUS_SUCCESS)
}

/// What the runtime says of a managed range for an agent, now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capturable {
    /// The agent may access all of it: capture and restore it.
    Yes,
    /// The memory is there, but the agent may not access (a part of) it:
    /// not captured, reported as not covered.
    NoAccess,
    /// The runtime does not answer for it (unmapped behind the library's
    /// back, or no `hsa_amd_svm_attributes_get`): skipped like a freed
    /// region.
    Gone,
}

/// Asks the runtime whether `agent` may access the managed range
/// `[base, base + size)` (`ACCESS_QUERY`): the capture and restore check.
pub fn capturable(amd: &AmdEntries, base: usize, size: usize, agent: hsa_agent_t) -> Capturable {
    let Some(get) = amd.hsa_amd_svm_attributes_get_fn else {
        return Capturable::Gone;
    };
    let mut query = hsa_amd_svm_attribute_pair_t {
        attribute: ACCESS_QUERY,
        value: agent.handle,
    };
    // SAFETY: one attribute pair, writable; the runtime only looks the
    // range up (it never touches its bytes).
    let status = unsafe { get(base as *mut _, size, &mut query, 1) };
    match (status, query.attribute) {
        (HSA_STATUS_SUCCESS, ACCESSIBLE | IN_PLACE) => Capturable::Yes,
        (HSA_STATUS_SUCCESS, _) => Capturable::NoAccess,
        _ => Capturable::Gone,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_whole_pages() {
        assert_eq!(page_span(0x1000, 1), Some((0x1000, PAGE)));
        assert_eq!(page_span(0x1FFF, 2), Some((0x1000, 2 * PAGE)));
        assert_eq!(page_span(0x2000, 0x2000), Some((0x2000, 0x2000)));
        assert_eq!(page_span(usize::MAX - 10, 20), None);
    }
}

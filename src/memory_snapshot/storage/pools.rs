//! Finding the pools the tiers allocate from, through the runtime's own
//! agent and pool queries (captured at install, so covered by the table-size
//! guard). A tool can override the choice per agent (`kr_set_storage_pools`).

use std::ffi::c_void;
use std::mem::MaybeUninit;

use crate::ffi::boundary::catch_panic;
use crate::hsa::entries::{check, AmdEntries, CoreEntries};
use crate::hsa::sys::{
    hsa_amd_memory_pool_info_t, hsa_amd_memory_pool_t, hsa_device_type_t, HSA_AGENT_INFO_DEVICE,
    HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED,
    HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS,
    HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED, HSA_AMD_MEMORY_POOL_INFO_SEGMENT,
    HSA_AMD_MEMORY_POOL_INFO_SIZE, HSA_AMD_SEGMENT_GLOBAL, HSA_DEVICE_TYPE_CPU,
    HSA_DEVICE_TYPE_GPU,
};
use crate::hsa::{hsa_agent_t, hsa_status_t, HSA_STATUS_ERROR, HSA_STATUS_SUCCESS};

/// `HSA_AMD_AGENT_INFO_MEMORY_AVAIL` (uint64_t): free bytes of the agent's
/// memory. Newer than the ROCm 5.2 headers the library builds against, so
/// spelled out here; a runtime that predates it answers an error and the
/// library falls back to the pool size.
pub const AGENT_INFO_MEMORY_AVAIL: u32 = 0xA015;

/// A host pool usable as pinned staging for one GPU agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostPool {
    pub pool: hsa_amd_memory_pool_t,
    /// The CPU agent that owns the pool (the host side of async copies).
    pub cpu_agent: hsa_agent_t,
}

/// The pools a snapshot of one agent may use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentPools {
    pub is_gpu: bool,
    /// A coarse-grained, allocatable, non-kernarg pool of the agent, with
    /// its size.
    pub device_pool: Option<(hsa_amd_memory_pool_t, u64)>,
    pub host_pool: Option<HostPool>,
}

/// Discovers the pools for `agent`. Anything the runtime cannot answer
/// leaves that tier unavailable; it never fails the snapshot.
pub fn discover(core: &CoreEntries, amd: &AmdEntries, agent: hsa_agent_t) -> AgentPools {
    let mut found = AgentPools {
        is_gpu: device_type(core, agent) == Some(HSA_DEVICE_TYPE_GPU),
        ..Default::default()
    };
    if !found.is_gpu {
        return found;
    }
    found.device_pool = pools_of(amd, agent)
        .into_iter()
        .filter(|&pool| is_allocatable_global(amd, pool))
        .find_map(|pool| {
            let flags: u32 = pool_info(amd, pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS)?;
            let coarse = flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED != 0;
            let kernarg = flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT != 0;
            let size: usize = pool_info(amd, pool, HSA_AMD_MEMORY_POOL_INFO_SIZE)?;
            (coarse && !kernarg).then_some((pool, size as u64))
        });
    found.host_pool = host_pool(core, amd);
    found
}

/// The first CPU agent's allocatable, non-kernarg global pool; a
/// fine-grained one is preferred (ROCr's standard system pool).
fn host_pool(core: &CoreEntries, amd: &AmdEntries) -> Option<HostPool> {
    let cpus = agents(core)
        .into_iter()
        .filter(|&a| device_type(core, a) == Some(HSA_DEVICE_TYPE_CPU));
    for cpu_agent in cpus {
        let candidates: Vec<(hsa_amd_memory_pool_t, u32)> = pools_of(amd, cpu_agent)
            .into_iter()
            .filter(|&pool| is_allocatable_global(amd, pool))
            .filter_map(|pool| {
                Some((
                    pool,
                    pool_info::<u32>(amd, pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS)?,
                ))
            })
            .filter(|&(_, flags)| flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT == 0)
            .collect();
        let fine = candidates
            .iter()
            .find(|(_, f)| f & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED != 0);
        if let Some(&(pool, _)) = fine.or(candidates.first()) {
            return Some(HostPool { pool, cpu_agent });
        }
    }
    None
}

/// The size of a pool, when the runtime answers.
pub fn pool_size(amd: &AmdEntries, pool: hsa_amd_memory_pool_t) -> Option<u64> {
    pool_info::<usize>(amd, pool, HSA_AMD_MEMORY_POOL_INFO_SIZE).map(|size| size as u64)
}

/// Free bytes of the agent's memory, when the runtime answers
/// [`AGENT_INFO_MEMORY_AVAIL`].
pub fn memory_available(core: &CoreEntries, agent: hsa_agent_t) -> Option<u64> {
    agent_info(core, agent, AGENT_INFO_MEMORY_AVAIL)
}

fn device_type(core: &CoreEntries, agent: hsa_agent_t) -> Option<hsa_device_type_t> {
    agent_info(core, agent, HSA_AGENT_INFO_DEVICE)
}

fn agent_info<T: Copy>(core: &CoreEntries, agent: hsa_agent_t, attribute: u32) -> Option<T> {
    let get_info = core.optional.agent_get_info?;
    let mut value = MaybeUninit::<T>::uninit();
    // SAFETY: `value` is writable storage of the attribute's documented type.
    check(unsafe { get_info(agent, attribute, value.as_mut_ptr().cast()) }).ok()?;
    // SAFETY: the runtime reported success, so it wrote the value.
    Some(unsafe { value.assume_init() })
}

fn pool_info<T: Copy>(
    amd: &AmdEntries,
    pool: hsa_amd_memory_pool_t,
    attribute: hsa_amd_memory_pool_info_t,
) -> Option<T> {
    let get_info = amd.optional.pool_get_info?;
    let mut value = MaybeUninit::<T>::uninit();
    // SAFETY: as in agent_info.
    check(unsafe { get_info(pool, attribute, value.as_mut_ptr().cast()) }).ok()?;
    // SAFETY: as in agent_info.
    Some(unsafe { value.assume_init() })
}

fn is_allocatable_global(amd: &AmdEntries, pool: hsa_amd_memory_pool_t) -> bool {
    pool_info::<u32>(amd, pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT) == Some(HSA_AMD_SEGMENT_GLOBAL)
        && pool_info::<bool>(amd, pool, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED)
            == Some(true)
}

/// Collects what a runtime iterator hands to its callback.
unsafe extern "C" fn collect<T>(item: T, data: *mut c_void) -> hsa_status_t {
    catch_panic(HSA_STATUS_ERROR, || {
        // SAFETY: `data` is the Vec<T> passed alongside this callback.
        let list = unsafe { &mut *data.cast::<Vec<T>>() };
        if list.try_reserve(1).is_err() {
            return HSA_STATUS_ERROR;
        }
        list.push(item);
        HSA_STATUS_SUCCESS
    })
}

fn agents(core: &CoreEntries) -> Vec<hsa_agent_t> {
    let mut list: Vec<hsa_agent_t> = Vec::new();
    if let Some(iterate) = core.optional.iterate_agents {
        // SAFETY: the callback only pushes into `list`, which outlives the call.
        let status = unsafe {
            iterate(
                Some(collect::<hsa_agent_t>),
                (&mut list as *mut Vec<_>).cast(),
            )
        };
        if status != HSA_STATUS_SUCCESS {
            list.clear();
        }
    }
    list
}

fn pools_of(amd: &AmdEntries, agent: hsa_agent_t) -> Vec<hsa_amd_memory_pool_t> {
    let mut list: Vec<hsa_amd_memory_pool_t> = Vec::new();
    if let Some(iterate) = amd.optional.iterate_pools {
        // SAFETY: as in agents().
        let status = unsafe {
            iterate(
                agent,
                Some(collect::<hsa_amd_memory_pool_t>),
                (&mut list as *mut Vec<_>).cast(),
            )
        };
        if status != HSA_STATUS_SUCCESS {
            list.clear();
        }
    }
    list
}

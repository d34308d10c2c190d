//! Finding the pools the tiers allocate from, through the runtime's own
//! agent and pool queries (captured at install, so covered by the table-size
//! guard). A tool can override the choice per agent (`kr_set_storage_pools`).

use crate::hsa::entries::{AmdEntries, CoreEntries};
use crate::hsa::hsa_agent_t;
use crate::hsa::query::{agent_info, agents, device_type, pool_info, pools_of};
use crate::hsa::sys::{
    hsa_amd_memory_pool_t, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED,
    HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT,
    HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED,
    HSA_AMD_MEMORY_POOL_INFO_SEGMENT, HSA_AMD_MEMORY_POOL_INFO_SIZE, HSA_AMD_SEGMENT_GLOBAL,
    HSA_DEVICE_TYPE_CPU, HSA_DEVICE_TYPE_GPU,
};

// A runtime that predates HSA_AMD_AGENT_INFO_MEMORY_AVAIL answers an error,
// and the library falls back to the pool size.
use crate::hsa::sys::AGENT_INFO_MEMORY_AVAIL;

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

/// The first CPU agent's kernarg pool (ROCr's fine-grained system pool
/// with KERNARG_INIT, which every agent may read): where the library's own
/// kernel arguments and dispatch records go.
pub fn kernarg_pool(core: &CoreEntries, amd: &AmdEntries) -> Option<HostPool> {
    agents(core)
        .into_iter()
        .filter(|&a| device_type(core, a) == Some(HSA_DEVICE_TYPE_CPU))
        .find_map(|cpu_agent| {
            let pool = pools_of(amd, cpu_agent).into_iter().find(|&pool| {
                is_allocatable_global(amd, pool)
                    && pool_info::<u32>(amd, pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS)
                        .is_some_and(|f| f & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT != 0)
            })?;
            Some(HostPool { pool, cpu_agent })
        })
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

fn is_allocatable_global(amd: &AmdEntries, pool: hsa_amd_memory_pool_t) -> bool {
    pool_info::<u32>(amd, pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT) == Some(HSA_AMD_SEGMENT_GLOBAL)
        && pool_info::<bool>(amd, pool, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED)
            == Some(true)
}

//! Small typed queries of the runtime through the captured entries: agents,
//! their pools, and single attributes of each. Anything the runtime cannot
//! answer comes back as `None` (or an empty list).

use std::ffi::c_void;
use std::mem::MaybeUninit;

use super::entries::{check, AmdEntries, CoreEntries};
use super::sys::{
    hsa_amd_memory_pool_info_t, hsa_amd_memory_pool_t, hsa_device_type_t, HSA_AGENT_INFO_DEVICE,
};
use super::{hsa_agent_t, hsa_status_t, HSA_STATUS_ERROR, HSA_STATUS_SUCCESS};
use crate::support::unwind::catch_panic;

/// The agent's device type.
pub fn device_type(core: &CoreEntries, agent: hsa_agent_t) -> Option<hsa_device_type_t> {
    agent_info(core, agent, HSA_AGENT_INFO_DEVICE)
}

/// One attribute of an agent; `T` must be the attribute's documented type.
pub fn agent_info<T: Copy>(core: &CoreEntries, agent: hsa_agent_t, attribute: u32) -> Option<T> {
    let get_info = core.hsa_agent_get_info_fn?;
    let mut value = MaybeUninit::<T>::uninit();
    // SAFETY: `value` is writable storage of the attribute's documented type.
    check(unsafe { get_info(agent, attribute, value.as_mut_ptr().cast()) }).ok()?;
    // SAFETY: the runtime reported success, so it wrote the value.
    Some(unsafe { value.assume_init() })
}

/// One attribute of a pool; `T` must be the attribute's documented type.
pub fn pool_info<T: Copy>(
    amd: &AmdEntries,
    pool: hsa_amd_memory_pool_t,
    attribute: hsa_amd_memory_pool_info_t,
) -> Option<T> {
    let get_info = amd.hsa_amd_memory_pool_get_info_fn?;
    let mut value = MaybeUninit::<T>::uninit();
    // SAFETY: as in agent_info.
    check(unsafe { get_info(pool, attribute, value.as_mut_ptr().cast()) }).ok()?;
    // SAFETY: as in agent_info.
    Some(unsafe { value.assume_init() })
}

/// Collects what a runtime iterator hands to its callback (`data` is a
/// `Vec<T>`).
pub(crate) unsafe extern "C" fn collect<T>(item: T, data: *mut c_void) -> hsa_status_t {
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

/// Every agent, in the runtime's order.
pub fn agents(core: &CoreEntries) -> Vec<hsa_agent_t> {
    let mut list: Vec<hsa_agent_t> = Vec::new();
    if let Some(iterate) = core.hsa_iterate_agents_fn {
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

/// The pools of one agent.
pub fn pools_of(amd: &AmdEntries, agent: hsa_agent_t) -> Vec<hsa_amd_memory_pool_t> {
    let mut list: Vec<hsa_amd_memory_pool_t> = Vec::new();
    if let Some(iterate) = amd.hsa_amd_agent_iterate_memory_pools_fn {
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

/// The agent a pool belongs to, and whether that agent is a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolOwner {
    pub agent: u64,
    pub gpu: bool,
}

/// Who owns `pool` (a pool handle, or the handle of the region of the same
/// memory: ROCr gives both the same value), found by walking the agents'
/// pools; `None` when no agent lists it.
pub fn pool_owner(core: &CoreEntries, amd: &AmdEntries, pool: u64) -> Option<PoolOwner> {
    let pool = hsa_amd_memory_pool_t { handle: pool };
    let owner = agents(core)
        .into_iter()
        .find(|&agent| pools_of(amd, agent).contains(&pool))?;
    Some(PoolOwner {
        agent: owner.handle,
        gpu: device_type(core, owner) == Some(super::sys::HSA_DEVICE_TYPE_GPU),
    })
}

/// One system attribute; `T` must be the attribute's documented type.
pub fn system_info<T: Copy>(core: &CoreEntries, attribute: u32) -> Option<T> {
    let get_info = core.hsa_system_get_info_fn?;
    let mut value = MaybeUninit::<T>::uninit();
    // SAFETY: as in agent_info.
    check(unsafe { get_info(attribute, value.as_mut_ptr().cast()) }).ok()?;
    // SAFETY: as in agent_info.
    Some(unsafe { value.assume_init() })
}

/// `HSA_AMD_SYSTEM_INFO_SVM_ACCESSIBLE_BY_DEFAULT` (every ROCm): every GPU's
/// ISA has XNACK enabled.
const SVM_ACCESSIBLE_BY_DEFAULT: u32 = 0x202;
/// `HSA_AMD_SYSTEM_INFO_XNACK_ENABLED` (ROCm 6.0 on): the process's XNACK
/// mode.
const XNACK_ENABLED: u32 = 0x206;

/// Whether kernels may reach any system memory (XNACK on): then memory no
/// HSA call made is writable by kernels, and nothing can track it.
pub fn xnack_enabled(core: &CoreEntries) -> bool {
    [XNACK_ENABLED, SVM_ACCESSIBLE_BY_DEFAULT]
        .into_iter()
        .any(|attribute| system_info::<bool>(core, attribute) == Some(true))
}

//! The application's HSA calls, made the way a program makes them: through
//! the software runtime's API tables, where the library's wrappers sit once
//! installed; and the runtime's loader-style executable iterator, as a tool
//! passes it to the library. Shared by the integration tests (`mod.rs`) and
//! the fuzz harness (`fuzz/src/app.rs` includes this file by path).

use std::ffi::c_void;

use hsa_sim::{Agent, Pool, Region};
use kernel_replay::hsa::sys::{hsa_amd_memory_pool_t, hsa_region_t};
use kernel_replay::hsa::{hsa_agent_t, hsa_status_t, AmdExtTable, CoreApiTable};

pub const SUCCESS: hsa_status_t = kernel_replay::hsa::HSA_STATUS_SUCCESS;

/// `hsa_agent_t` of a simulated agent.
pub fn agent(a: Agent) -> hsa_agent_t {
    hsa_agent_t { handle: a.handle }
}

pub fn core_table() -> *mut CoreApiTable {
    hsa_sim::core_table_ptr().cast()
}

pub fn amd_table() -> *mut AmdExtTable {
    hsa_sim::amd_ext_table_ptr().cast()
}

/// `hsa_memory_copy` through the runtime's core table (a blocking copy the
/// software runtime can fail on request).
///
/// # Safety
/// `dst` and `src` are valid for `size` bytes, as the runtime requires.
pub unsafe fn memory_copy(dst: *mut u8, src: *const u8, size: usize) -> hsa_status_t {
    // SAFETY: the runtime's own, complete table; the caller's promise.
    unsafe {
        (*core_table())
            .hsa_memory_copy_fn
            .expect("memory copy entry")(dst.cast(), src.cast(), size)
    }
}

/// `hsa_amd_memory_pool_allocate` as the application calls it: through the
/// runtime's AMD table.
pub fn pool_allocate(pool: Pool, size: usize, flags: u32) -> Result<*mut u8, hsa_status_t> {
    // SAFETY: the runtime's own, complete table.
    unsafe { pool_allocate_via(amd_table(), pool, size, flags) }
}

/// `hsa_amd_memory_pool_allocate` through `table`.
///
/// # Safety
/// `table` points to a complete AMD extension table (the runtime's, or a
/// copy of one).
pub unsafe fn pool_allocate_via(
    table: *mut AmdExtTable,
    pool: Pool,
    size: usize,
    flags: u32,
) -> Result<*mut u8, hsa_status_t> {
    let mut ptr = std::ptr::null_mut();
    // SAFETY: the caller's promise about the table.
    let status = unsafe {
        let allocate = (*table)
            .hsa_amd_memory_pool_allocate_fn
            .expect("pool allocate entry");
        allocate(
            hsa_amd_memory_pool_t {
                handle: pool.handle,
            },
            size,
            flags,
            &mut ptr,
        )
    };
    if status == SUCCESS {
        Ok(ptr.cast())
    } else {
        Err(status)
    }
}

/// `hsa_amd_memory_pool_free` through the runtime's AMD table.
pub fn pool_free(ptr: *mut u8) -> hsa_status_t {
    // SAFETY: a complete table from the runtime.
    unsafe {
        (*amd_table())
            .hsa_amd_memory_pool_free_fn
            .expect("pool free entry")(ptr.cast())
    }
}

/// `hsa_amd_agents_allow_access(agents, NULL, ptr)` through the runtime's
/// AMD table (where the library's wrapper sits once installed).
pub fn allow_access(agents: &[Agent], ptr: *const u8) -> hsa_status_t {
    let agents: Vec<hsa_agent_t> = agents.iter().map(|&a| agent(a)).collect();
    // SAFETY: a complete table from the runtime; `agents` outlives the call.
    unsafe {
        (*amd_table())
            .hsa_amd_agents_allow_access_fn
            .expect("allow access entry")(
            agents.len() as u32,
            agents.as_ptr(),
            std::ptr::null(),
            ptr.cast(),
        )
    }
}

/// `hsa_amd_memory_lock(ptr, size, agents, ...)` through the runtime's AMD
/// table (no agents: NULL, every GPU); the agent pointer on success.
pub fn memory_lock(ptr: *mut u8, size: usize, agents: &[Agent]) -> Result<*mut u8, hsa_status_t> {
    let mut agents: Vec<hsa_agent_t> = agents.iter().map(|&a| agent(a)).collect();
    let list = if agents.is_empty() {
        std::ptr::null_mut()
    } else {
        agents.as_mut_ptr()
    };
    let mut agent_ptr = std::ptr::null_mut();
    // SAFETY: a complete table from the runtime; `agents` outlives the call.
    let status = unsafe {
        (*amd_table()).hsa_amd_memory_lock_fn.expect("lock entry")(
            ptr.cast(),
            size,
            list,
            agents.len() as i32,
            &mut agent_ptr,
        )
    };
    if status == SUCCESS {
        Ok(agent_ptr.cast())
    } else {
        Err(status)
    }
}

/// `hsa_amd_memory_lock_to_pool` through the runtime's AMD table (as
/// `hipHostRegister` calls it: one agent per call).
pub fn memory_lock_to_pool(
    ptr: *mut u8,
    size: usize,
    agents: &[Agent],
    pool: Pool,
) -> Result<*mut u8, hsa_status_t> {
    let mut agents: Vec<hsa_agent_t> = agents.iter().map(|&a| agent(a)).collect();
    let mut agent_ptr = std::ptr::null_mut();
    // SAFETY: as in memory_lock.
    let status = unsafe {
        (*amd_table())
            .hsa_amd_memory_lock_to_pool_fn
            .expect("lock to pool entry")(
            ptr.cast(),
            size,
            agents.as_mut_ptr(),
            agents.len() as i32,
            hsa_amd_memory_pool_t {
                handle: pool.handle,
            },
            0,
            &mut agent_ptr,
        )
    };
    if status == SUCCESS {
        Ok(agent_ptr.cast())
    } else {
        Err(status)
    }
}

/// `hsa_amd_memory_unlock` through the runtime's AMD table.
pub fn memory_unlock(ptr: *mut u8) -> hsa_status_t {
    // SAFETY: a complete table from the runtime.
    unsafe {
        (*amd_table())
            .hsa_amd_memory_unlock_fn
            .expect("unlock entry")(ptr.cast())
    }
}

/// `hsa_memory_allocate` through the runtime's core table.
pub fn memory_allocate(region: Region, size: usize) -> Result<*mut u8, hsa_status_t> {
    let mut ptr = std::ptr::null_mut();
    // SAFETY: a complete table from the runtime.
    let status = unsafe {
        (*core_table())
            .hsa_memory_allocate_fn
            .expect("memory allocate entry")(
            hsa_region_t {
                handle: region.handle,
            },
            size,
            &mut ptr,
        )
    };
    if status == SUCCESS {
        Ok(ptr.cast())
    } else {
        Err(status)
    }
}

/// `hsa_memory_free` through the runtime's core table.
pub fn memory_free(ptr: *mut u8) -> hsa_status_t {
    // SAFETY: a complete table from the runtime.
    unsafe {
        (*core_table())
            .hsa_memory_free_fn
            .expect("memory free entry")(ptr.cast())
    }
}

/// `hsa_executable_destroy` as the application calls it: through the core
/// table (where the library's wrapper sits).
pub fn executable_destroy(exe: hsa_sim::Executable) -> hsa_status_t {
    // SAFETY: a complete table from the runtime.
    unsafe {
        (*core_table())
            .hsa_executable_destroy_fn
            .expect("executable destroy entry")(kernel_replay::hsa::hsa_executable_t {
            handle: exe.handle,
        })
    }
}

extern "C" {
    // The runtime's loader-style iterator, declared with the library's types
    // (the sim crate declares it with its own, layout-identical ones).
    fn hsa_rt_iterate_executables(
        callback: Option<kernel_replay::ExecutableCallback>,
        data: *mut c_void,
    ) -> hsa_status_t;
}

/// The loader-style executable iterator, as a tool passes it.
pub fn sim_iterator() -> Option<kernel_replay::IterateExecutablesFn> {
    Some(hsa_rt_iterate_executables)
}

// ---- asynchronous copies ------------------------------------------------------

/// The dependency array as ROCr wants it: NULL exactly when there is none.
fn dependencies(
    deps: &[kernel_replay::hsa::sys::hsa_signal_t],
) -> *const kernel_replay::hsa::sys::hsa_signal_t {
    if deps.is_empty() {
        std::ptr::null()
    } else {
        deps.as_ptr()
    }
}

/// `hsa_amd_memory_async_copy` through the runtime's AMD table (where the
/// fence wraps it once installed).
pub fn async_copy(
    dst: *mut u8,
    dst_agent: Agent,
    src: *const u8,
    src_agent: Agent,
    size: usize,
    deps: &[kernel_replay::hsa::sys::hsa_signal_t],
    completion: kernel_replay::hsa::sys::hsa_signal_t,
) -> hsa_status_t {
    // SAFETY: the runtime's own, complete table; `deps` outlives the call.
    unsafe {
        (*amd_table())
            .hsa_amd_memory_async_copy_fn
            .expect("async copy entry")(
            dst.cast(),
            agent(dst_agent),
            src.cast(),
            agent(src_agent),
            size,
            deps.len() as u32,
            dependencies(deps),
            completion,
        )
    }
}

// ---- shared virtual memory (hipMallocManaged) -------------------------------------

/// `hsa_amd_svm_attributes_set` of `(attribute, value)` pairs (an agent's
/// handle as the value of the access attributes), through the runtime's
/// AMD table (the library's wrapper once installed).
pub fn svm_set(ptr: *mut u8, size: usize, pairs: &[(u32, u64)]) -> hsa_status_t {
    let mut list: Vec<_> = pairs
        .iter()
        .map(
            |&(attribute, value)| kernel_replay::hsa::sys::hsa_amd_svm_attribute_pair_t {
                attribute: u64::from(attribute),
                value,
            },
        )
        .collect();
    // SAFETY: the runtime's own table; the list outlives the call.
    unsafe {
        (*amd_table())
            .hsa_amd_svm_attributes_set_fn
            .expect("svm attributes set entry")(
            ptr.cast(), size, list.as_mut_ptr(), list.len()
        )
    }
}

/// `hsa_amd_svm_attributes_get` with `ACCESS_QUERY` for `a`: the access
/// attribute it answers.
pub fn svm_access_of(ptr: *mut u8, size: usize, a: Agent) -> Result<u32, hsa_status_t> {
    let mut pair = kernel_replay::hsa::sys::hsa_amd_svm_attribute_pair_t {
        attribute: u64::from(kernel_replay::hsa::sys::HSA_AMD_SVM_ATTRIB_ACCESS_QUERY),
        value: a.handle,
    };
    // SAFETY: the runtime's own table; one writable pair.
    let status = unsafe {
        (*amd_table())
            .hsa_amd_svm_attributes_get_fn
            .expect("svm attributes get entry")(ptr.cast(), size, &mut pair, 1)
    };
    if status == SUCCESS {
        Ok(pair.attribute as u32)
    } else {
        Err(status)
    }
}

/// `hsa_amd_svm_prefetch_async` of the range to `to`, with no dependency
/// and no completion signal (the software runtime migrates at once).
pub fn svm_prefetch(ptr: *mut u8, size: usize, to: Agent) -> hsa_status_t {
    // SAFETY: the runtime's own table.
    unsafe {
        (*amd_table())
            .hsa_amd_svm_prefetch_async_fn
            .expect("svm prefetch entry")(
            ptr.cast(),
            size,
            agent(to),
            0,
            std::ptr::null(),
            kernel_replay::hsa::sys::hsa_signal_t { handle: 0 },
        )
    }
}

/// `hsa_amd_memory_async_copy_rect` of `rows` rows of `width` bytes between
/// two buffers of pitch `pitch`, through the runtime's AMD table.
#[allow(clippy::too_many_arguments)]
pub fn async_copy_rect(
    dst: *mut u8,
    src: *const u8,
    pitch: usize,
    width: usize,
    rows: usize,
    copy_agent: Agent,
    deps: &[kernel_replay::hsa::sys::hsa_signal_t],
    completion: kernel_replay::hsa::sys::hsa_signal_t,
) -> hsa_status_t {
    use kernel_replay::hsa::sys::{hsa_dim3_t, hsa_pitched_ptr_t};
    let pitched = |base: *mut u8| hsa_pitched_ptr_t {
        base: base.cast(),
        pitch,
        slice: pitch * rows,
    };
    let origin = hsa_dim3_t { x: 0, y: 0, z: 0 };
    let range = hsa_dim3_t {
        x: width as u32,
        y: rows as u32,
        z: 1,
    };
    let (dst, src) = (pitched(dst), pitched(src.cast_mut()));
    // SAFETY: the runtime's own, complete table; every pointer outlives the
    // call.
    unsafe {
        (*amd_table())
            .hsa_amd_memory_async_copy_rect_fn
            .expect("async copy rect entry")(
            &dst,
            &origin,
            &src,
            &origin,
            &range,
            agent(copy_agent),
            kernel_replay::hsa::sys::hsaDeviceToDevice,
            deps.len() as u32,
            dependencies(deps),
            completion,
        )
    }
}

kernel_replay::with_vmem! {
    /// `hsa_amd_memory_async_copy_on_engine` on SDMA engine 0, through the
    /// runtime's AMD table.
    pub fn async_copy_on_engine(
        dst: *mut u8,
        dst_agent: Agent,
        src: *const u8,
        src_agent: Agent,
        size: usize,
        deps: &[kernel_replay::hsa::sys::hsa_signal_t],
        completion: kernel_replay::hsa::sys::hsa_signal_t,
    ) -> hsa_status_t {
        // SAFETY: the runtime's own, complete table; `deps` outlives the call.
        unsafe {
            (*amd_table())
                .hsa_amd_memory_async_copy_on_engine_fn
                .expect("async copy on engine entry")(
                dst.cast(),
                agent(dst_agent),
                src.cast(),
                agent(src_agent),
                size,
                deps.len() as u32,
                dependencies(deps),
                completion,
                kernel_replay::hsa::sys::HSA_AMD_SDMA_ENGINE_0,
                false,
            )
        }
    }
}

// ---- virtual memory (ROCm 6.0+ headers) ------------------------------------------

kernel_replay::with_vmem! {
    #[allow(unused_imports)]
    pub use vmem_app::*;

    /// The application's `hsa_amd_vmem_*` calls, through the runtime's AMD
    /// table (map, unmap, set_access and handle_create pass the library's
    /// wrappers once installed).
    pub mod vmem_app {
        use super::*;
        use kernel_replay::hsa::sys::{
            hsa_access_permission_t, hsa_amd_memory_access_desc_t, hsa_amd_vmem_alloc_handle_t,
            MEMORY_TYPE_NONE,
        };

        #[allow(unused_imports)]
        pub use kernel_replay::hsa::sys::{
            HSA_ACCESS_PERMISSION_NONE as NONE, HSA_ACCESS_PERMISSION_RO as RO,
            HSA_ACCESS_PERMISSION_RW as RW,
        };

        fn table() -> &'static AmdExtTable {
            // SAFETY: the runtime's own table lives as long as the process.
            unsafe { &*amd_table() }
        }

        fn result<T>(status: hsa_status_t, value: T) -> Result<T, hsa_status_t> {
            if status == SUCCESS {
                Ok(value)
            } else {
                Err(status)
            }
        }

        /// `hsa_amd_vmem_address_reserve`: a reserved range of `size` bytes.
        pub fn reserve(size: usize) -> Result<*mut u8, hsa_status_t> {
            let mut va = std::ptr::null_mut();
            // SAFETY: a writable out-parameter.
            let status = unsafe {
                table().hsa_amd_vmem_address_reserve_fn.expect("reserve entry")(&mut va, size, 0, 0)
            };
            result(status, va.cast())
        }

        /// `hsa_amd_vmem_address_free`.
        pub fn address_free(va: *mut u8, size: usize) -> hsa_status_t {
            // SAFETY: the runtime checks the range.
            unsafe { table().hsa_amd_vmem_address_free_fn.expect("address free entry")(va.cast(), size) }
        }

        /// `hsa_amd_vmem_handle_create`: `size` bytes of physical memory of
        /// `pool`; the handle's value.
        pub fn handle_create(pool: Pool, size: usize) -> Result<u64, hsa_status_t> {
            let mut handle = hsa_amd_vmem_alloc_handle_t { handle: 0 };
            // SAFETY: a writable out-parameter.
            let status = unsafe {
                table().hsa_amd_vmem_handle_create_fn.expect("handle create entry")(
                    hsa_amd_memory_pool_t { handle: pool.handle },
                    size,
                    MEMORY_TYPE_NONE,
                    0,
                    &mut handle,
                )
            };
            result(status, handle.handle)
        }

        /// `hsa_amd_vmem_handle_release`.
        pub fn handle_release(handle: u64) -> hsa_status_t {
            // SAFETY: the runtime looks the handle up.
            unsafe {
                table().hsa_amd_vmem_handle_release_fn.expect("handle release entry")(
                    hsa_amd_vmem_alloc_handle_t { handle },
                )
            }
        }

        /// `hsa_amd_vmem_map` of the handle's first `size` bytes at `va`.
        pub fn map(va: *mut u8, size: usize, handle: u64) -> hsa_status_t {
            // SAFETY: the runtime checks the range and the handle.
            unsafe {
                table().hsa_amd_vmem_map_fn.expect("map entry")(
                    va.cast(),
                    size,
                    0,
                    hsa_amd_vmem_alloc_handle_t { handle },
                    0,
                )
            }
        }

        /// `hsa_amd_vmem_unmap`.
        pub fn unmap(va: *mut u8, size: usize) -> hsa_status_t {
            // SAFETY: the runtime checks the range.
            unsafe { table().hsa_amd_vmem_unmap_fn.expect("unmap entry")(va.cast(), size) }
        }

        /// `hsa_amd_vmem_set_access` giving each listed agent its permission.
        pub fn set_access(
            va: *mut u8,
            size: usize,
            grants: &[(Agent, hsa_access_permission_t)],
        ) -> hsa_status_t {
            let descriptors: Vec<hsa_amd_memory_access_desc_t> = grants
                .iter()
                .map(|&(a, permissions)| hsa_amd_memory_access_desc_t {
                    permissions,
                    agent_handle: agent(a),
                })
                .collect();
            // SAFETY: `descriptors` outlives the call.
            unsafe {
                table().hsa_amd_vmem_set_access_fn.expect("set access entry")(
                    va.cast(),
                    size,
                    descriptors.as_ptr(),
                    descriptors.len(),
                )
            }
        }

        /// `hsa_amd_vmem_get_access` of `agent` at `va`.
        pub fn get_access(va: *mut u8, a: Agent) -> Result<hsa_access_permission_t, hsa_status_t> {
            let mut permission = 0;
            // SAFETY: a writable out-parameter.
            let status = unsafe {
                table().hsa_amd_vmem_get_access_fn.expect("get access entry")(
                    va.cast(),
                    &mut permission,
                    agent(a),
                )
            };
            result(status, permission)
        }
    }
}

// ---- signals ----------------------------------------------------------------------

pub use kernel_replay::hsa::sys::hsa_signal_t;

/// `hsa_signal_create` with `value`, through the runtime's core table.
pub fn signal_create(value: i64) -> hsa_signal_t {
    let mut signal = hsa_signal_t { handle: 0 };
    // SAFETY: a complete table from the runtime; a writable out-parameter.
    let status = unsafe {
        (*core_table())
            .hsa_signal_create_fn
            .expect("signal create entry")(value, 0, std::ptr::null(), &mut signal)
    };
    assert_eq!(status, SUCCESS, "signal create");
    signal
}

/// `hsa_signal_load_scacquire`.
pub fn signal_load(signal: hsa_signal_t) -> i64 {
    // SAFETY: a complete table from the runtime.
    unsafe {
        (*core_table())
            .hsa_signal_load_scacquire_fn
            .expect("signal load entry")(signal)
    }
}

/// `hsa_signal_store_screlease`.
pub fn signal_store(signal: hsa_signal_t, value: i64) {
    // SAFETY: a complete table from the runtime.
    unsafe {
        (*core_table())
            .hsa_signal_store_screlease_fn
            .expect("signal store entry")(signal, value)
    }
}

/// Waits up to `timeout` for `signal` to drop below `below`; its value then.
pub fn signal_wait_below(signal: hsa_signal_t, below: i64, timeout: std::time::Duration) -> i64 {
    // SAFETY: a complete table from the runtime.
    unsafe {
        (*core_table())
            .hsa_signal_wait_scacquire_fn
            .expect("signal wait entry")(
            signal,
            kernel_replay::hsa::sys::HSA_SIGNAL_CONDITION_LT,
            below,
            timeout.as_nanos() as u64,
            kernel_replay::hsa::sys::HSA_WAIT_STATE_BLOCKED,
        )
    }
}

/// `hsa_signal_destroy`.
pub fn signal_destroy(signal: hsa_signal_t) {
    // SAFETY: a complete table from the runtime.
    let status = unsafe {
        (*core_table())
            .hsa_signal_destroy_fn
            .expect("signal destroy entry")(signal)
    };
    assert_eq!(status, SUCCESS, "signal destroy");
}

/// `HSA_AMD_AGENT_INFO_MEMORY_AVAIL` of `gpu`: its free device memory.
pub fn memory_avail(gpu: Agent) -> u64 {
    let mut avail = 0u64;
    // SAFETY: a complete table from the runtime; a u64 out-parameter, as
    // the attribute answers.
    let status = unsafe {
        (*core_table())
            .hsa_agent_get_info_fn
            .expect("agent info entry")(
            agent(gpu),
            kernel_replay::hsa::sys::AGENT_INFO_MEMORY_AVAIL,
            (&mut avail as *mut u64).cast(),
        )
    };
    assert_eq!(status, SUCCESS, "memory avail");
    avail
}

//! Module-variable discovery (the SDK's `discover_module_variables`).
//!
//! `__device__` and `__constant__` variables live in a loaded executable's
//! data segment, not in any allocation the tracker saw, yet a kernel that
//! mutates one would leak that mutation into the next pass. They are found at
//! every snapshot by walking the loaded executables and asking for the
//! symbols each exposes to the replaying agent. It runs at snapshot time,
//! never at load time, because constant memory need not be populated when an
//! executable loads.
//!
//! A walk that fails anywhere fails as a whole: a variable that was never
//! discovered is never restored, and passes 2..N would then read state
//! accumulated by pass 1.

use std::ffi::c_void;
use std::fmt;

use log::warn;

use crate::ffi::boundary::catch_panic;
use crate::hsa::entries::{CoreEntries, IterateExecutablesFn};
use crate::hsa::sys::{
    hsa_executable_symbol_info_t, hsa_executable_symbol_t, hsa_symbol_kind_t,
    HSA_EXECUTABLE_SYMBOL_INFO_TYPE, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS,
    HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE, HSA_SYMBOL_KIND_VARIABLE,
};
use crate::hsa::{
    hsa_agent_t, hsa_executable_t, hsa_status_t, HSA_STATUS_ERROR, HSA_STATUS_SUCCESS,
};

/// Variables larger than this are skipped with a warning: no real module
/// variable is that large, and capturing one would double a gigabyte of host
/// memory on a likely bogus symbol.
pub const MODULE_VARIABLE_SIZE_CAP: u64 = 1 << 30;

/// One module-scope variable visible to the replaying agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModuleVariable {
    pub address: usize,
    pub size: usize,
}

/// Why discovery failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscoveryError {
    /// The executable iterator itself returned an error.
    Iterator(hsa_status_t),
    /// `hsa_executable_iterate_agent_symbols` refused an executable.
    SymbolWalk {
        executable: u64,
        status: hsa_status_t,
    },
    /// `hsa_executable_symbol_get_info` failed.
    SymbolQuery {
        executable: u64,
        attribute: hsa_executable_symbol_info_t,
        status: hsa_status_t,
    },
    /// The list of variables could not grow.
    Metadata,
}

impl fmt::Display for DiscoveryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DiscoveryError::Iterator(status) => {
                write!(f, "the executable iterator failed with HSA status {status:#x}")
            }
            DiscoveryError::SymbolWalk { executable, status } => write!(
                f,
                "symbol walk of executable {executable:#x} failed with HSA status {status:#x}"
            ),
            DiscoveryError::SymbolQuery { executable, attribute, status } => write!(
                f,
                "symbol query (attribute {attribute}) in executable {executable:#x} failed with HSA status {status:#x}"
            ),
            DiscoveryError::Metadata => write!(f, "no host memory for the module-variable list"),
        }
    }
}

/// State threaded through the two C callbacks.
struct Walk<'a> {
    core: &'a CoreEntries,
    agent: hsa_agent_t,
    variables: Vec<ModuleVariable>,
    error: Option<DiscoveryError>,
}

/// Every variable symbol the loaded executables expose to `agent`, sorted by
/// address, duplicates removed.
pub fn module_variables(
    core: &CoreEntries,
    iterate: IterateExecutablesFn,
    agent: hsa_agent_t,
) -> Result<Vec<ModuleVariable>, DiscoveryError> {
    let mut walk = Walk {
        core,
        agent,
        variables: Vec::new(),
        error: None,
    };
    // SAFETY: `walk` outlives the call, and the callbacks only reach it
    // through `data`, one at a time (the loader calls back sequentially).
    let status = unsafe { iterate(Some(on_executable), (&mut walk as *mut Walk).cast()) };
    if let Some(error) = walk.error {
        return Err(error);
    }
    if status != HSA_STATUS_SUCCESS {
        return Err(DiscoveryError::Iterator(status));
    }
    let mut variables = walk.variables;
    variables.sort_unstable_by_key(|v| (v.address, std::cmp::Reverse(v.size)));
    variables.dedup_by_key(|v| v.address);
    Ok(variables)
}

/// Called by the iterator for each loaded executable.
unsafe extern "C" fn on_executable(
    executable: hsa_executable_t,
    data: *mut c_void,
) -> hsa_status_t {
    catch_panic(HSA_STATUS_ERROR, || {
        // Copy out what the walk needs; no reference to `Walk` may be alive
        // while the runtime calls `on_symbol`, which borrows it mutably.
        // SAFETY: `data` is the `Walk` passed to the iterator above.
        let (walk_symbols, agent) = unsafe {
            let walk = &*data.cast::<Walk>();
            (walk.core.iterate_agent_symbols, walk.agent)
        };
        // SAFETY: the captured runtime entry, with our callback and data.
        let status = unsafe { walk_symbols(executable, agent, Some(on_symbol), data) };
        // SAFETY: as above; the symbol walk has returned.
        let walk = unsafe { &mut *data.cast::<Walk>() };
        if walk.error.is_some() {
            return HSA_STATUS_ERROR;
        }
        if status != HSA_STATUS_SUCCESS {
            walk.error = Some(DiscoveryError::SymbolWalk {
                executable: executable.handle,
                status,
            });
            return status;
        }
        HSA_STATUS_SUCCESS
    })
}

/// Called by the runtime for each symbol of one executable.
unsafe extern "C" fn on_symbol(
    executable: hsa_executable_t,
    _agent: hsa_agent_t,
    symbol: hsa_executable_symbol_t,
    data: *mut c_void,
) -> hsa_status_t {
    catch_panic(HSA_STATUS_ERROR, || {
        // SAFETY: `data` is the `Walk`; no other reference to it is alive
        // while the runtime runs this callback.
        let walk = unsafe { &mut *data.cast::<Walk>() };
        match walk.visit(executable, symbol) {
            Ok(()) => HSA_STATUS_SUCCESS,
            Err(error) => {
                walk.error = Some(error);
                HSA_STATUS_ERROR
            }
        }
    })
}

impl Walk<'_> {
    fn visit(
        &mut self,
        executable: hsa_executable_t,
        symbol: hsa_executable_symbol_t,
    ) -> Result<(), DiscoveryError> {
        let query_error = |attribute| {
            move |status| DiscoveryError::SymbolQuery {
                executable: executable.handle,
                attribute,
                status,
            }
        };
        let kind: hsa_symbol_kind_t = self
            .core
            .symbol_info(symbol, HSA_EXECUTABLE_SYMBOL_INFO_TYPE)
            .map_err(query_error(HSA_EXECUTABLE_SYMBOL_INFO_TYPE))?;
        if kind != HSA_SYMBOL_KIND_VARIABLE {
            return Ok(());
        }
        let address: u64 = self
            .core
            .symbol_info(symbol, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS)
            .map_err(query_error(HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS))?;
        let size: u32 = self
            .core
            .symbol_info(symbol, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE)
            .map_err(query_error(HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE))?;
        if address == 0 || size == 0 {
            return Ok(());
        }
        if u64::from(size) > MODULE_VARIABLE_SIZE_CAP {
            warn!(
                "module variable at {address:#x} of {size} bytes is over the 1 GiB cap; not captured"
            );
            return Ok(());
        }
        self.variables
            .try_reserve(1)
            .map_err(|_| DiscoveryError::Metadata)?;
        self.variables.push(ModuleVariable {
            address: address as usize,
            size: size as usize,
        });
        Ok(())
    }
}

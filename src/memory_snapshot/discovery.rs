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
//! Each executable is walked on its own; with the cache (see
//! `discovery_cache.rs`), an executable already walked completely is not
//! walked again while it stays loaded. Executables are identified by the
//! tracker's registry (`memory_tracker/executables.rs`) as they are listed.
//!
//! A walk that fails anywhere fails as a whole: a variable that was never
//! discovered is never restored, and passes 2..N would then read state
//! accumulated by pass 1.

use std::ffi::c_void;
use std::fmt;

use log::warn;

use crate::hsa::entries::{CoreEntries, IterateExecutablesFn};
use crate::hsa::sys::{
    hsa_executable_symbol_info_t, hsa_executable_symbol_t, hsa_symbol_kind_t,
    HSA_EXECUTABLE_SYMBOL_INFO_TYPE, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS,
    HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE, HSA_SYMBOL_KIND_VARIABLE,
};
use crate::hsa::{
    hsa_agent_t, hsa_executable_t, hsa_status_t, HSA_STATUS_ERROR, HSA_STATUS_SUCCESS,
};
use crate::memory_snapshot::context::Context;
use crate::memory_tracker::executables::{Identity, LoadedExecutable};
use crate::support::unwind::catch_panic;

/// Variables larger than this are skipped with a warning: no real module
/// variable is that large, and capturing one would double a gigabyte of host
/// memory on a likely bogus symbol.
pub(crate) const MODULE_VARIABLE_SIZE_CAP: u64 = 1 << 30;

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

/// A module variable found for a snapshot, with the executable it lives in
/// when the registry can vouch for that executable's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiscoveredVariable {
    pub variable: ModuleVariable,
    pub executable: Option<LoadedExecutable>,
}

/// Every variable symbol the loaded executables expose to `agent`, sorted by
/// address, duplicates removed (the larger extent kept). With `use_cache`,
/// an executable walked completely before (and still the same loaded
/// executable) is not walked again.
pub fn module_variables(
    cx: Context,
    core: &CoreEntries,
    iterate: IterateExecutablesFn,
    agent: hsa_agent_t,
    use_cache: bool,
) -> Result<Vec<DiscoveredVariable>, DiscoveryError> {
    let listed = loaded_executables(cx, iterate)?;
    if use_cache {
        cx.state
            .discovery_cache
            .forget_unloaded(&cx.tracker.executables.live_view());
    }
    let mut found: Vec<DiscoveredVariable> = Vec::new();
    let mut add = |variables: &[ModuleVariable], executable| {
        found
            .try_reserve(variables.len())
            .map_err(|_| DiscoveryError::Metadata)?;
        found.extend(variables.iter().map(|&variable| DiscoveredVariable {
            variable,
            executable,
        }));
        Ok(())
    };
    for identity in listed {
        let exe = match identity {
            Identity::Loaded(exe) => exe,
            Identity::Untracked(handle) => {
                add(
                    &walk_symbols(core, hsa_executable_t { handle }, agent)?,
                    None,
                )?;
                continue;
            }
            // Refused at listing (see `loaded_executables`).
            Identity::Unloading => continue,
        };
        if use_cache {
            let cached = cx
                .state
                .discovery_cache
                .with_cached(exe, agent.handle, |v| add(v, Some(exe)));
            if let Some(added) = cached {
                added?;
                continue;
            }
        }
        // The walk runs while the executable is provably loaded: its destroy
        // wrapper waits for the view. One being destroyed since it was
        // listed has no variables in this snapshot.
        let walked = {
            let loaded = cx.tracker.executables.live_view();
            if !loaded.contains(exe) {
                continue;
            }
            walk_symbols(core, hsa_executable_t { handle: exe.handle }, agent)?
        };
        if use_cache {
            cx.state
                .discovery_cache
                .remember(exe, agent.handle, &walked);
        }
        add(&walked, Some(exe))?;
    }
    found.sort_unstable_by_key(|v| (v.variable.address, std::cmp::Reverse(v.variable.size)));
    found.dedup_by_key(|v| v.variable.address);
    Ok(found)
}

/// The executables the iterator reports, in its order, each identified by
/// the registry inside the iterator's callback: the loader holds its lock
/// across the callbacks, so a listed executable is loaded while it is
/// admitted, and one whose destroy has begun is left out.
fn loaded_executables(
    cx: Context,
    iterate: IterateExecutablesFn,
) -> Result<Vec<Identity>, DiscoveryError> {
    let mut list = Listing {
        cx,
        identities: Vec::new(),
        out_of_memory: false,
    };
    // SAFETY: `list` outlives the call; the callback only pushes into it.
    let status = unsafe { iterate(Some(on_executable), (&mut list as *mut Listing).cast()) };
    if list.out_of_memory {
        return Err(DiscoveryError::Metadata);
    }
    if status != HSA_STATUS_SUCCESS {
        return Err(DiscoveryError::Iterator(status));
    }
    Ok(list.identities)
}

struct Listing {
    cx: Context,
    identities: Vec<Identity>,
    out_of_memory: bool,
}

/// Called by the iterator for each loaded executable.
unsafe extern "C" fn on_executable(
    executable: hsa_executable_t,
    data: *mut c_void,
) -> hsa_status_t {
    catch_panic(HSA_STATUS_ERROR, || {
        // SAFETY: `data` is the Listing passed by loaded_executables.
        let list = unsafe { &mut *data.cast::<Listing>() };
        if list.identities.try_reserve(1).is_err() {
            list.out_of_memory = true;
            return HSA_STATUS_ERROR;
        }
        // The library's own kernels: nothing to capture, and not to be
        // admitted to the registry (the library unloads them itself).
        if list.cx.state.kernels.owns_executable(executable.handle) {
            return HSA_STATUS_SUCCESS;
        }
        match list.cx.tracker.executables.identify(executable.handle) {
            Identity::Unloading => {}
            identity => list.identities.push(identity),
        }
        HSA_STATUS_SUCCESS
    })
}

/// State threaded through the symbol callback.
struct Walk<'a> {
    core: &'a CoreEntries,
    variables: Vec<ModuleVariable>,
    error: Option<DiscoveryError>,
}

/// Every variable of one executable visible to `agent`.
fn walk_symbols(
    core: &CoreEntries,
    executable: hsa_executable_t,
    agent: hsa_agent_t,
) -> Result<Vec<ModuleVariable>, DiscoveryError> {
    let mut walk = Walk {
        core,
        variables: Vec::new(),
        error: None,
    };
    let iterate =
        core.hsa_executable_iterate_agent_symbols_fn
            .ok_or(DiscoveryError::SymbolWalk {
                executable: executable.handle,
                status: crate::hsa::HSA_STATUS_ERROR_NOT_INITIALIZED,
            })?;
    // SAFETY: `walk` outlives the call and is reached only through `data`,
    // by one callback at a time.
    let status = unsafe {
        iterate(
            executable,
            agent,
            Some(on_symbol),
            (&mut walk as *mut Walk).cast(),
        )
    };
    if let Some(error) = walk.error {
        return Err(error);
    }
    if status != HSA_STATUS_SUCCESS {
        return Err(DiscoveryError::SymbolWalk {
            executable: executable.handle,
            status,
        });
    }
    Ok(walk.variables)
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

//! Which code object the library loads on an agent: the file named by
//! `KERNEL_REPLAY_CODE_OBJECT` when set (any ISA: a tool's own build, or a
//! cubin for HSA-on-CUDA), else the embedded one built for the agent's
//! processor (`kernels::code_objects::for_isa`).

use std::borrow::Cow;
use std::ffi::c_void;

use crate::hsa::entries::check;
use crate::hsa::hsa_agent_t;
use crate::hsa::query::collect;
use crate::hsa::sys::{hsa_isa_t, CoreApiTable, HSA_ISA_INFO_NAME, HSA_ISA_INFO_NAME_LENGTH};
use crate::hsa::HSA_STATUS_SUCCESS;
use crate::memory_snapshot::kernels::code_objects;

/// The environment variable naming a code object to load instead.
pub(crate) const OVERRIDE_VARIABLE: &str = "KERNEL_REPLAY_CODE_OBJECT";

/// The agent's first ISA name and the code object for it, if there is one.
pub(crate) fn for_agent(
    table: &CoreApiTable,
    agent: hsa_agent_t,
) -> Option<(String, Cow<'static, [u8]>)> {
    let isa = isa_names(table, agent).into_iter().next()?;
    if let Some(path) = std::env::var_os(OVERRIDE_VARIABLE) {
        return match std::fs::read(&path) {
            Ok(bytes) => Some((isa, Cow::Owned(bytes))),
            Err(error) => {
                log::warn!(
                    "{OVERRIDE_VARIABLE}={}: {error}; the library's kernels are not used",
                    path.to_string_lossy()
                );
                None
            }
        };
    }
    let object = code_objects::for_isa(&isa)?;
    Some((isa, Cow::Borrowed(object.bytes)))
}

/// The names of the agent's ISAs, in the runtime's order.
fn isa_names(table: &CoreApiTable, agent: hsa_agent_t) -> Vec<String> {
    let (Some(iterate), Some(get_info)) = (
        table.hsa_agent_iterate_isas_fn,
        table.hsa_isa_get_info_alt_fn,
    ) else {
        return Vec::new();
    };
    let mut isas: Vec<hsa_isa_t> = Vec::new();
    // SAFETY: the callback only pushes into `isas`, which outlives the call.
    let status = unsafe {
        iterate(
            agent,
            Some(collect::<hsa_isa_t>),
            (&mut isas as *mut Vec<_>).cast(),
        )
    };
    if status != HSA_STATUS_SUCCESS {
        return Vec::new();
    }
    isas.into_iter()
        .filter_map(|isa| {
            let mut length: u32 = 0;
            // SAFETY: NAME_LENGTH is a u32.
            check(unsafe {
                get_info(
                    isa,
                    HSA_ISA_INFO_NAME_LENGTH,
                    (&mut length as *mut u32).cast(),
                )
            })
            .ok()?;
            let mut name = vec_of(length as usize + 1)?;
            // SAFETY: NAME writes NAME_LENGTH bytes (the NUL included, in
            // ROCr); one spare byte.
            check(unsafe { get_info(isa, HSA_ISA_INFO_NAME, name.as_mut_ptr().cast::<c_void>()) })
                .ok()?;
            let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
            name.truncate(end);
            String::from_utf8(name).ok()
        })
        .collect()
}

fn vec_of(len: usize) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(len).ok()?;
    bytes.resize(len, 0);
    Some(bytes)
}

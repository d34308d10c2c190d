//! Which code object the library loads on an agent: the file named by
//! `KERNEL_REPLAY_CODE_OBJECT` when set (any ISA: a tool's own build, or a
//! cubin for HSA-on-CUDA), else the embedded one built for the agent's
//! processor ([`for_isa`]).
//!
//! The embedded AMD code objects are built from `kernels/replay_kernels.cu`
//! by the build script (`buildtools/kernels.rs`) for every target the found
//! clang knows.
//!
//! Matching an agent. ROCr names an agent's ISA with its target-id
//! features, `amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-`; the code objects
//! are built without features, which marks them "any" for xnack and sramecc,
//! and ROCr's loader accepts such a code object on an agent with either
//! setting. So an agent matches the code object of its processor: the ISA
//! name up to the first `:`, compared exactly (a gfx1101 does not take the
//! gfx1100 code object; the generic targets such as gfx11-generic are left
//! for when the compilers that build them are common).

use std::borrow::Cow;
use std::ffi::c_void;

use crate::hsa::entries::check;
use crate::hsa::hsa_agent_t;
use crate::hsa::query::collect;
use crate::hsa::sys::{hsa_isa_t, CoreApiTable, HSA_ISA_INFO_NAME, HSA_ISA_INFO_NAME_LENGTH};
use crate::hsa::HSA_STATUS_SUCCESS;
use crate::support::settings::{read_regular_file, CODE_OBJECT, CODE_OBJECT_MAX_BYTES};

/// The agent's first ISA name and the code object for it, if there is one.
pub(crate) fn for_agent(
    table: &CoreApiTable,
    agent: hsa_agent_t,
) -> Option<(String, Cow<'static, [u8]>)> {
    let isa = isa_names(table, agent).into_iter().next()?;
    if let Some(path) = std::env::var_os(CODE_OBJECT.name) {
        match read_regular_file(&path, CODE_OBJECT_MAX_BYTES) {
            Ok(bytes) => return Some((isa, Cow::Owned(bytes))),
            Err(error) => log::warn!(
                "{}={}: {error}; the embedded code objects are used",
                CODE_OBJECT.name,
                path.to_string_lossy()
            ),
        }
    }
    let object = for_isa(&isa)?;
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

// ---- the embedded code objects ----------------------------------------------------

/// One embedded code object.
#[derive(Debug)]
pub(crate) struct CodeObject {
    /// The ISA it was built for, as `hsa_isa_get_info_alt(HSA_ISA_INFO_NAME)`
    /// names it, without target-id features: `amdgcn-amd-amdhsa--gfx942`.
    pub(crate) isa: &'static str,
    /// The ELF image, for `hsa_code_object_reader_create_from_memory`.
    pub(crate) bytes: &'static [u8],
}

/// The images are ELF files, read in place by loaders that expect the
/// alignment of their 64-bit headers; `include_bytes!` alone gives none.
#[repr(C, align(16))]
struct Aligned<T: ?Sized>(T);

include!(concat!(env!("OUT_DIR"), "/code_objects.rs"));

/// The processor part of an ISA name: everything before the first
/// target-id feature.
fn processor(isa: &str) -> &str {
    isa.split(':').next().unwrap_or(isa)
}

/// The embedded code object for an agent whose ISA ROCr names `agent_isa`
/// (features and all), if there is one (see the module comment).
pub(crate) fn for_isa(agent_isa: &str) -> Option<&'static CodeObject> {
    let wanted = processor(agent_isa);
    EMBEDDED.iter().find(|object| object.isa == wanted)
}

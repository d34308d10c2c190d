//! The kernels' AMD code objects, built from `kernels/replay_kernels.cu` by
//! the build script (`buildtools/kernels.rs`) for every target the found
//! clang knows, and embedded in the library.
//!
//! Matching an agent. ROCr names an agent's ISA with its target-id
//! features, `amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-`; the code objects
//! are built without features, which marks them "any" for xnack and sramecc,
//! and ROCr's loader accepts such a code object on an agent with either
//! setting. So an agent matches the code object of its processor: the ISA
//! name up to the first `:`, compared exactly (a gfx1101 does not take the
//! gfx1100 code object; the generic targets such as gfx11-generic are left
//! for when the compilers that build them are common).

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

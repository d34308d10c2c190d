//! The metadata check of the embedded AMD code objects (no AMD GPU needed):
//! each kernel's descriptor and argument metadata must match what the
//! library will put in the kernarg segment and the dispatch packet — the
//! `abi` mirrors' sizes, the workgroup size, the LDS the kernels declare.

use std::mem::{align_of, size_of};

use object::read::elf::{ElfFile64, SectionHeader};
use object::{Endianness, Object, ObjectSection, ObjectSymbol};
use rmpv::Value;

use super::abi::{
    kr_compare_copy_args, kr_hash_blocks_args, kr_scatter_copy_args, KR_BLOCKS_PER_GROUP,
    KR_HASH_FAN_IN, KR_WORKGROUP,
};
use super::code_object::{for_isa, BUILT_BY, EMBEDDED};

/// The note holding the code object's metadata (msgpack).
const NT_AMDGPU_METADATA: u32 = 32;

/// The AMDHSA kernel descriptor's size and its fields checked here
/// (llvm/Support/AMDHSAKernelDescriptor.h).
const KERNEL_DESCRIPTOR_BYTES: u64 = 64;
const KD_GROUP_SEGMENT_FIXED_SIZE: usize = 0;
const KD_KERNARG_SIZE: usize = 8;

/// LDS of `kr_hash_group`: the two lanes' partial sums, one `u64` per
/// work-item and one per group of `KR_HASH_FAN_IN` of each block.
const HASH_LDS_BYTES: u64 = 2 * (KR_WORKGROUP + KR_BLOCKS_PER_GROUP * KR_HASH_FAN_IN) as u64 * 8;
/// `kr_hash_blocks` adds each block's address, length and two hash lanes.
const HASH_BLOCKS_LDS_BYTES: u64 = HASH_LDS_BYTES + 4 * KR_BLOCKS_PER_GROUP as u64 * 8;
/// `kr_compare_copy` adds each block's two addresses, length, two wanted
/// and two computed hash lanes.
const COMPARE_LDS_BYTES: u64 = HASH_LDS_BYTES + 7 * KR_BLOCKS_PER_GROUP as u64 * 8;

/// What each kernel must look like: name, argument struct size and
/// alignment, and the LDS it declares.
const KERNELS: [(&str, usize, usize, u64); 3] = [
    (
        "kr_scatter_copy",
        size_of::<kr_scatter_copy_args>(),
        align_of::<kr_scatter_copy_args>(),
        0,
    ),
    (
        "kr_hash_blocks",
        size_of::<kr_hash_blocks_args>(),
        align_of::<kr_hash_blocks_args>(),
        HASH_BLOCKS_LDS_BYTES,
    ),
    (
        "kr_compare_copy",
        size_of::<kr_compare_copy_args>(),
        align_of::<kr_compare_copy_args>(),
        COMPARE_LDS_BYTES,
    ),
];

/// `map[key]`, for msgpack maps keyed by strings.
fn field<'a>(map: &'a Value, key: &str) -> &'a Value {
    map.as_map()
        .and_then(|entries| entries.iter().find(|(k, _)| k.as_str() == Some(key)))
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("metadata lacks {key}: {map}"))
}

fn uint(map: &Value, key: &str) -> u64 {
    field(map, key)
        .as_u64()
        .unwrap_or_else(|| panic!("{key} is not an unsigned integer: {map}"))
}

/// The decoded NT_AMDGPU_METADATA note of a code object.
fn metadata(elf: &ElfFile64<'_, Endianness>) -> Value {
    let endian = elf.endian();
    let mut found = None;
    for section in elf.elf_section_table().iter() {
        let Some(mut notes) = section.notes(endian, elf.data()).expect("note section") else {
            continue;
        };
        while let Some(note) = notes.next().expect("note") {
            if note.name() == b"AMDGPU" && note.n_type(endian) == NT_AMDGPU_METADATA {
                assert!(found.is_none(), "two metadata notes");
                found = Some(rmpv::decode::read_value(&mut note.desc()).expect("msgpack metadata"));
            }
        }
    }
    found.expect("no NT_AMDGPU_METADATA note")
}

#[test]
fn code_objects_are_built_where_a_clang_was_found() {
    // A build that found a compiler but embedded nothing would silently
    // leave every agent on the copies without kernels.
    if let Some(clang) = BUILT_BY {
        assert!(
            !EMBEDDED.is_empty(),
            "{clang} was found but no code object was embedded"
        );
    }
    for (i, object) in EMBEDDED.iter().enumerate() {
        assert!(
            object.isa.starts_with("amdgcn-amd-amdhsa--gfx"),
            "{}",
            object.isa
        );
        assert!(
            !object.isa.contains(':'),
            "built without target-id features: {}",
            object.isa
        );
        assert!(
            EMBEDDED[..i].iter().all(|o| o.isa != object.isa),
            "{} twice",
            object.isa
        );
        assert_eq!(
            object.bytes.as_ptr() as usize % 8,
            0,
            "{}: ELF image not aligned",
            object.isa
        );
    }
}

#[test]
fn kernel_descriptors_and_arguments_match_the_abi() {
    for object in EMBEDDED {
        let isa = object.isa;
        let elf =
            ElfFile64::<Endianness>::parse(object.bytes).unwrap_or_else(|e| panic!("{isa}: {e}"));
        let metadata = metadata(&elf);
        assert_eq!(field(&metadata, "amdhsa.target").as_str(), Some(isa));
        let kernels = field(&metadata, "amdhsa.kernels")
            .as_array()
            .expect("amdhsa.kernels");
        assert_eq!(kernels.len(), KERNELS.len(), "{isa}: {metadata}");

        for (name, args_size, args_align, lds) in KERNELS {
            let context = format!("{isa} {name}");
            let kernel = kernels
                .iter()
                .find(|k| field(k, ".name").as_str() == Some(name))
                .unwrap_or_else(|| panic!("{context}: not in the metadata"));

            // The kernarg segment is exactly the argument struct: clang passes
            // it as one by-value argument, and no hidden arguments follow
            // (the kernels read no dispatch sizes), so the library writes the
            // struct and nothing else.
            let kernarg_size = uint(kernel, ".kernarg_segment_size");
            assert_eq!(kernarg_size, args_size as u64, "{context}");
            assert!(
                uint(kernel, ".kernarg_segment_align") <= args_align as u64,
                "{context}"
            );
            let args = field(kernel, ".args").as_array().expect(".args");
            assert_eq!(args.len(), 1, "{context}: {kernel}");
            assert_eq!(
                field(&args[0], ".value_kind").as_str(),
                Some("by_value"),
                "{context}"
            );
            assert_eq!(uint(&args[0], ".offset"), 0, "{context}");
            assert_eq!(uint(&args[0], ".size"), args_size as u64, "{context}");

            assert!(
                uint(kernel, ".max_flat_workgroup_size") >= u64::from(KR_WORKGROUP),
                "{context}"
            );
            assert_eq!(uint(kernel, ".group_segment_fixed_size"), lds, "{context}");
            // No scratch: the dispatch packet asks for none.
            assert_eq!(uint(kernel, ".private_segment_fixed_size"), 0, "{context}");
            assert_eq!(
                field(kernel, ".uses_dynamic_stack").as_bool(),
                Some(false),
                "{context}"
            );
            let wavefront = uint(kernel, ".wavefront_size");
            assert!(
                wavefront == 32 || wavefront == 64,
                "{context}: wavefront {wavefront}"
            );

            // The descriptor the dispatch packet points at: the symbol the
            // metadata names, 64 bytes, agreeing with the metadata.
            let symbol_name = format!("{name}.kd");
            assert_eq!(
                field(kernel, ".symbol").as_str(),
                Some(symbol_name.as_str()),
                "{context}"
            );
            let symbol = elf
                .symbols()
                .find(|s| s.name() == Ok(symbol_name.as_str()))
                .unwrap_or_else(|| panic!("{context}: no symbol {symbol_name}"));
            assert_eq!(symbol.size(), KERNEL_DESCRIPTOR_BYTES, "{context}");
            let section = symbol
                .section_index()
                .and_then(|index| elf.section_by_index(index).ok())
                .unwrap_or_else(|| panic!("{context}: {symbol_name} has no section"));
            let descriptor = section
                .data_range(symbol.address(), KERNEL_DESCRIPTOR_BYTES)
                .ok()
                .flatten()
                .unwrap_or_else(|| panic!("{context}: {symbol_name} outside its section"));
            let u32_at = |offset: usize| {
                u32::from_le_bytes(descriptor[offset..offset + 4].try_into().expect("4 bytes"))
            };
            assert_eq!(
                u64::from(u32_at(KD_KERNARG_SIZE)),
                kernarg_size,
                "{context}"
            );
            assert_eq!(
                u64::from(u32_at(KD_GROUP_SEGMENT_FIXED_SIZE)),
                lds,
                "{context}"
            );
        }
    }
}

#[test]
fn agents_match_the_code_object_of_their_processor() {
    for object in EMBEDDED {
        let matched = |name: &str| for_isa(name).map(|o| o.isa);
        assert_eq!(matched(object.isa), Some(object.isa));
        // ROCr's names carry the agent's target-id features.
        for features in [":sramecc+:xnack-", ":sramecc-:xnack+", ":xnack-"] {
            assert_eq!(
                matched(&format!("{}{features}", object.isa)),
                Some(object.isa)
            );
        }
        // A name that is a prefix of the processor is another processor.
        assert_eq!(matched(&object.isa[..object.isa.len() - 1]), None);
    }
    assert!(for_isa("amdgcn-amd-amdhsa--gfx803").is_none());
    assert!(for_isa("").is_none());
}

/* host.h: what the host backend's files share (backend.cpp, elf.cpp). */
#ifndef HSA_RT_HOST_H
#define HSA_RT_HOST_H

#include <cstdint>
#include <string>
#include <vector>

namespace hsa_rt::host {

// An AMDGPU code object's kernel, found by its ".kd" descriptor symbol.
struct ElfKernel {
  std::string name;  // the symbol's name, ".kd" included
  uint8_t descriptor[64] = {};
};

struct CodeObject {
  std::string isa;  // "amdgcn-amd-amdhsa--gfx942" with the features it names
  std::vector<ElfKernel> kernels;
};

// Reads an AMDGPU code object (ELF64, little endian, EM_AMDGPU, OS ABI
// AMDGPU_HSA, code object v3 to v6, ET_DYN) as ROCr's loader needs it: the
// ISA from e_flags and the kernel descriptors of the ".kd" symbols of
// .symtab and .dynsym. Anything malformed (truncated, out-of-bounds offsets,
// unterminated names, an unknown processor) is false, never a read outside
// [data, data + size).
bool read_code_object(const uint8_t* data, size_t size, CodeObject* out);
// Whether code for ISA `code` runs on an agent of ISA `agent` (ROCr's
// Isa::IsCompatible): same processor; a feature the code object names
// (sramecc+/-, xnack+/-) must be the agent's; one it leaves open matches.
bool isa_compatible(const std::string& code, const std::string& agent);

}  // namespace hsa_rt::host

#endif /* HSA_RT_HOST_H */

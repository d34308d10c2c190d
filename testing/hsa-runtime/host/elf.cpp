// elf.cpp: reading AMDGPU code objects (the host backend), as much of them as ROCr's
// loader needs to load the library's kernels (libamdhsacode's
// AmdHsaCode::GetIsa and the ".kd" symbols of code object v3+), and the ISA
// names and compatibility rule of ROCr's core::Isa.
//
// The reader is defensive: the bytes are the caller's, possibly anything, so
// every offset and count is checked against the buffer before it is used
// and a malformed object is refused, never read past.

#include <cstring>
#include <set>

#include "host.h"

namespace hsa_rt::host {

namespace {

// ---- ELF constants (as amd_hsa_elf.h and elf.h define them) -------------------

constexpr uint8_t kElfClass64 = 2;
constexpr uint8_t kElfDataLsb = 1;
constexpr uint8_t kElfOsAbiAmdgpuHsa = 64;
// EI_ABIVERSION of code object v3, v4, v5, v6 (v2, 0, needs note parsing
// this reader does not do; clang has not produced it for years).
constexpr uint8_t kAbiVersionV3 = 1;
constexpr uint8_t kAbiVersionV6 = 4;
constexpr uint16_t kElfTypeDyn = 3;
constexpr uint16_t kElfMachineAmdgpu = 224;
constexpr uint32_t kSectionSymtab = 2;
constexpr uint32_t kSectionStrtab = 3;
constexpr uint32_t kSectionNobits = 8;
constexpr uint32_t kSectionDynsym = 11;
constexpr uint8_t kSymbolTypeObject = 1;
constexpr size_t kEhdrSize = 64;
constexpr size_t kShdrSize = 64;
constexpr size_t kSymSize = 24;
constexpr size_t kDescriptorSize = 64;

constexpr uint32_t kMachMask = 0x0ff;
constexpr uint32_t kXnackV3 = 0x100;
constexpr uint32_t kSrameccV3 = 0x200;
constexpr uint32_t kXnackV4Mask = 0x300;
constexpr uint32_t kXnackV4Off = 0x200;
constexpr uint32_t kXnackV4On = 0x300;
constexpr uint32_t kSrameccV4Mask = 0xc00;
constexpr uint32_t kSrameccV4Off = 0x800;
constexpr uint32_t kSrameccV4On = 0xc00;

// The processors ROCr knows (EF_AMDGPU_MACH_* of amd_hsa_elf.h; gfx950 as
// LLVM numbers it) among those the project builds for, with whether they
// support the xnack and sramecc features (libamdhsacode's MachInfo).
struct Processor {
  uint32_t mach;
  const char* name;
  bool xnack;
  bool sramecc;
};
constexpr Processor kProcessors[] = {
    {0x02c, "gfx900", true, false},   {0x02f, "gfx906", true, true},
    {0x030, "gfx908", true, true},    {0x03f, "gfx90a", true, true},
    {0x040, "gfx940", true, true},    {0x04b, "gfx941", true, true},
    {0x04c, "gfx942", true, true},    {0x04f, "gfx950", true, true},
    {0x036, "gfx1030", false, false}, {0x041, "gfx1100", false, false},
    {0x046, "gfx1101", false, false}, {0x047, "gfx1102", false, false},
    {0x048, "gfx1200", false, false}, {0x04e, "gfx1201", false, false},
};

constexpr char kIsaPrefix[] = "amdgcn-amd-amdhsa--";

// ---- bounded reads -------------------------------------------------------------

// A view of the caller's bytes that answers only reads inside it.
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  // Whether [offset, offset + length) lies inside.
  bool holds(uint64_t offset, uint64_t length) const {
    return offset <= size_ && length <= size_ - offset;
  }
  template <typename T>
  bool read(uint64_t offset, T* out) const {
    if (!holds(offset, sizeof(T))) return false;
    std::memcpy(out, data_ + offset, sizeof(T));
    return true;
  }
  const uint8_t* at(uint64_t offset) const { return data_ + offset; }

 private:
  const uint8_t* data_;
  size_t size_;
};

struct Section {
  uint32_t type = 0;
  uint64_t addr = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t link = 0;
  uint64_t entsize = 0;
};

bool read_section(const Bytes& bytes, uint64_t shoff, uint32_t index, Section* out) {
  const uint64_t base = shoff + uint64_t{index} * kShdrSize;
  return bytes.read(base + 4, &out->type) && bytes.read(base + 16, &out->addr) &&
         bytes.read(base + 24, &out->offset) && bytes.read(base + 32, &out->size) &&
         bytes.read(base + 40, &out->link) && bytes.read(base + 56, &out->entsize);
}

// A NUL-terminated name at `offset` of a string table, wholly inside it.
bool read_name(const Bytes& bytes, const Section& strtab, uint32_t offset, std::string* out) {
  if (offset >= strtab.size || !bytes.holds(strtab.offset, strtab.size)) return false;
  const auto* begin = reinterpret_cast<const char*>(bytes.at(strtab.offset + offset));
  const size_t room = static_cast<size_t>(strtab.size - offset);
  const void* nul = std::memchr(begin, 0, room);
  if (nul == nullptr) return false;
  out->assign(begin, static_cast<const char*>(nul));
  return true;
}

bool ends_with_kd(const std::string& name) {
  return name.size() > 3 && name.compare(name.size() - 3, 3, ".kd") == 0;
}

// The 64 descriptor bytes a ".kd" symbol's value points at: the symbol's
// section (not NOBITS) must hold them at st_value - sh_addr.
bool read_descriptor(const Bytes& bytes, const std::vector<Section>& sections, uint16_t shndx,
                     uint64_t value, uint8_t out[kDescriptorSize]) {
  if (shndx == 0 || shndx >= sections.size()) return false;
  const Section& section = sections[shndx];
  if (section.type == kSectionNobits || value < section.addr) return false;
  const uint64_t within = value - section.addr;
  if (within > section.size || kDescriptorSize > section.size - within) return false;
  if (!bytes.holds(section.offset, section.size)) return false;
  std::memcpy(out, bytes.at(section.offset + within), kDescriptorSize);
  return true;
}

// Adds the kernels of one symbol table (SYMTAB or DYNSYM), each name once.
bool read_symbol_table(const Bytes& bytes, const std::vector<Section>& sections,
                       const Section& table, std::set<std::string>* seen,
                       std::vector<ElfKernel>* kernels) {
  if (table.entsize != kSymSize || table.link >= sections.size() ||
      sections[table.link].type != kSectionStrtab || !bytes.holds(table.offset, table.size)) {
    return false;
  }
  const Section& strtab = sections[table.link];
  for (uint64_t at = table.offset; at + kSymSize <= table.offset + table.size; at += kSymSize) {
    uint32_t name_offset = 0;
    uint8_t info = 0;
    uint16_t shndx = 0;
    uint64_t value = 0;
    uint64_t size = 0;
    if (!bytes.read(at, &name_offset) || !bytes.read(at + 4, &info) ||
        !bytes.read(at + 6, &shndx) || !bytes.read(at + 8, &value) ||
        !bytes.read(at + 16, &size)) {
      return false;
    }
    if (name_offset == 0) continue;  // the null symbol, section symbols
    std::string name;
    if (!read_name(bytes, strtab, name_offset, &name)) return false;
    // Code object v3+: a kernel is its descriptor, an STT_OBJECT "name.kd"
    // of 64 bytes (ROCr's loader finds kernels the same way).
    if (!ends_with_kd(name) || (info & 0xf) != kSymbolTypeObject) continue;
    if (size != kDescriptorSize) return false;
    if (seen->count(name) != 0) continue;
    ElfKernel kernel;
    kernel.name = name;
    if (!read_descriptor(bytes, sections, shndx, value, kernel.descriptor)) return false;
    seen->insert(name);
    kernels->push_back(std::move(kernel));
  }
  return true;
}

const Processor* processor_of_mach(uint32_t mach) {
  for (const Processor& processor : kProcessors) {
    if (processor.mach == mach) return &processor;
  }
  return nullptr;
}

// The ISA name libamdhsacode's GetIsa builds from e_flags: a feature the
// object fixes (on or off) is named; v4+ "any" and "unsupported" are not, and
// v3 names both features a processor supports.
std::string isa_from_flags(const Processor& processor, uint32_t flags, uint8_t abi_version) {
  std::string isa = std::string(kIsaPrefix) + processor.name;
  if (abi_version == kAbiVersionV3) {
    if ((flags & kSrameccV3) != 0) {
      isa += ":sramecc+";
    } else if (processor.sramecc) {
      isa += ":sramecc-";
    }
    if ((flags & kXnackV3) != 0) {
      isa += ":xnack+";
    } else if (processor.xnack) {
      isa += ":xnack-";
    }
    return isa;
  }
  if ((flags & kSrameccV4Mask) == kSrameccV4Off) isa += ":sramecc-";
  if ((flags & kSrameccV4Mask) == kSrameccV4On) isa += ":sramecc+";
  if ((flags & kXnackV4Mask) == kXnackV4Off) isa += ":xnack-";
  if ((flags & kXnackV4Mask) == kXnackV4On) isa += ":xnack+";
  return isa;
}

// A feature's setting in an ISA name: '+', '-', or 0 when not named.
char feature_setting(const std::string& isa, const char* feature) {
  const std::string key = std::string(":") + feature;
  const size_t at = isa.find(key);
  if (at == std::string::npos || at + key.size() >= isa.size()) return 0;
  const char setting = isa[at + key.size()];
  return setting == '+' || setting == '-' ? setting : 0;
}

}  // namespace

bool read_code_object(const uint8_t* data, size_t size, CodeObject* out) {
  if (data == nullptr) return false;
  const Bytes bytes(data, size);
  if (!bytes.holds(0, kEhdrSize) || std::memcmp(data, "\x7f" "ELF", 4) != 0) return false;
  if (data[4] != kElfClass64 || data[5] != kElfDataLsb || data[7] != kElfOsAbiAmdgpuHsa ||
      data[8] < kAbiVersionV3 || data[8] > kAbiVersionV6) {
    return false;
  }
  uint16_t type = 0, machine = 0, shentsize = 0, shnum = 0;
  uint32_t flags = 0;
  uint64_t shoff = 0;
  if (!bytes.read(16, &type) || !bytes.read(18, &machine) || !bytes.read(40, &shoff) ||
      !bytes.read(48, &flags) || !bytes.read(58, &shentsize) || !bytes.read(60, &shnum)) {
    return false;
  }
  if (type != kElfTypeDyn || machine != kElfMachineAmdgpu || shentsize != kShdrSize ||
      shnum == 0 || !bytes.holds(shoff, uint64_t{shnum} * kShdrSize)) {
    return false;
  }
  const Processor* processor = processor_of_mach(flags & kMachMask);
  if (processor == nullptr) return false;
  std::vector<Section> sections(shnum);
  for (uint32_t i = 0; i < shnum; ++i) {
    if (!read_section(bytes, shoff, i, &sections[i])) return false;
  }
  CodeObject object;
  object.isa = isa_from_flags(*processor, flags, data[8]);
  std::set<std::string> seen;
  for (const Section& section : sections) {
    if (section.type != kSectionSymtab && section.type != kSectionDynsym) continue;
    if (!read_symbol_table(bytes, sections, section, &seen, &object.kernels)) return false;
  }
  *out = std::move(object);
  return true;
}

static std::string isa_processor(const std::string& isa) {
  const size_t prefix = sizeof(kIsaPrefix) - 1;
  if (isa.compare(0, prefix, kIsaPrefix) != 0) return std::string();
  return isa.substr(prefix, isa.find(':', prefix) - prefix);
}

bool isa_compatible(const std::string& code, const std::string& agent) {
  const std::string processor = isa_processor(code);
  if (processor.empty() || processor != isa_processor(agent)) return false;
  for (const char* feature : {"sramecc", "xnack"}) {
    const char wanted = feature_setting(code, feature);
    if (wanted != 0 && wanted != feature_setting(agent, feature)) return false;
  }
  return true;
}

}  // namespace hsa_rt::host

// runtime.cpp: state, handles, topology, init/reset/shutdown, agent, system
// and ISA queries, status strings, fault injection, modes, counters, and the
// tables, filled from hsa-sys/hsa_entries.def (see hsa_rt.h).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <type_traits>

#include "runtime.h"

// Every line of the entry list has the headers' signature.
#define HSA_ENTRY_VISIT HSA_ENTRY_CHECK_SIGNATURE
#include "hsa_entries.h"

namespace hsa_rt {

void write_string(void* out, size_t capacity, const std::string& text) {
  auto* chars = static_cast<char*>(out);
  std::memset(chars, 0, capacity);
  std::memcpy(chars, text.data(), std::min(text.size(), capacity - 1));
}

bool round_up(size_t size, size_t granule, size_t* rounded) {
  if (size > std::numeric_limits<size_t>::max() - (granule - 1)) return false;
  *rounded = (size + granule - 1) / granule * granule;
  return true;
}

namespace {

// ---- state ----------------------------------------------------------------------------

// Written by init / reset / shutdown only (under g_init), which must not race
// with anything else; read by every entry once g_ready is set.
std::mutex g_init;
std::atomic<bool> g_ready{false};
std::atomic<bool> g_started{false};  // an init was attempted in this process
std::atomic<uint64_t> g_epoch{0};
std::atomic<uint32_t> g_gpus{0};
std::vector<AgentDescription>* const g_agents = new std::vector<AgentDescription>;
// Under memory_mutex(): each agent's ISA now, and every ISA name handed out.
std::vector<std::string>* const g_isas = new std::vector<std::string>;
std::vector<std::string>* const g_isa_names = new std::vector<std::string>;
char g_message[512] = "";

std::mutex g_faults_mutex;
Faults* const g_faults = new Faults;
std::atomic<bool> g_modes[4] = {{false}, {false}, {true}, {false}};
Counters* const g_counters = new Counters;

constexpr unsigned kPayloadBits = 40;
constexpr uint64_t kPayloadMask = (uint64_t{1} << kPayloadBits) - 1;

void reset_modes() {
  g_modes[HSA_RT_MODE_ADDRESS_REUSE] = false;
  g_modes[HSA_RT_MODE_STRICT_ASYNC_ACCESS] = false;
  g_modes[HSA_RT_MODE_MEMORY_AVAIL_SUPPORTED] = true;
  g_modes[HSA_RT_MODE_XNACK] = false;
}

// Everything of the current topology goes: copies drained, queues retired,
// executables unloaded, memory freed, then the backend.
void tear_down(bool shutdown) {
  drain_engines();
  retire_all_queues();
  unload_all_executables();
  release_all_memory();
  backend::stop(shutdown);
  if (shutdown) destroy_all_signals();
}

hsa_rt_init_status_t start_locked(uint32_t wanted) {
  g_started = true;
  if (g_ready) {
    g_ready = false;
    tear_down(false);
  }
  std::vector<AgentDescription> agents;
  std::string message;
  const hsa_rt_init_status_t status = backend::start(wanted, &agents, &message);
  std::snprintf(g_message, sizeof(g_message), "%s", message.c_str());
  if (status != HSA_RT_INIT_OK) return status;
  {
    ExclusiveLock lock(memory_mutex());
    *g_agents = std::move(agents);
    g_isas->clear();
    for (const AgentDescription& agent : *g_agents) g_isas->push_back(agent.isa);
    g_isa_names->clear();
    memory().device_bytes.assign(g_agents->size(), 0);
  }
  g_gpus = static_cast<uint32_t>(g_agents->size() - 1);
  // Epoch 0 is never used, so a zeroed handle never validates.
  uint64_t epoch = (g_epoch + 1) & 0xFFFF;
  g_epoch = epoch == 0 ? 1 : epoch;
  with_faults([](Faults& f) { f = Faults{}; });
  reset_modes();
  hsa_rt_reset_counters();
  g_ready.store(true, std::memory_order_release);
  return HSA_RT_INIT_OK;
}

uint64_t isa_handle_locked(const std::string& name) {
  auto it = std::find(g_isa_names->begin(), g_isa_names->end(), name);
  if (it == g_isa_names->end()) it = g_isa_names->insert(g_isa_names->end(), name);
  return make_handle(Tag::kIsa, static_cast<uint64_t>(it - g_isa_names->begin()));
}

bool isa_name(hsa_isa_t isa, std::string* name) {
  uint64_t index = 0;
  SharedLock lock(memory_mutex());
  if (!decode_handle(isa.handle, Tag::kIsa, &index) || index >= g_isa_names->size()) return false;
  *name = (*g_isa_names)[index];
  return true;
}

// "gfx942" of "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-", "sm_90" of
// "nvptx-nvidia-cuda--sm_90".
std::string processor_of(const std::string& isa) {
  const size_t dashes = isa.find("--");
  if (dashes == std::string::npos) return "";
  const std::string rest = isa.substr(dashes + 2);
  return rest.substr(0, rest.find(':'));
}

const char* status_text(hsa_status_t status) {
  // "HSA_STATUS_X: text", as ROCr's hsa_status_string answers.
#define HSA_RT_STATUS(code, text) {HSA_STATUS_##code, "HSA_STATUS_" #code ": " text}
  static const std::pair<uint32_t, const char*> kTexts[] = {
      HSA_RT_STATUS(SUCCESS, "The function has been executed successfully."),
      HSA_RT_STATUS(INFO_BREAK, "A traversal over a list of elements has been interrupted."),
      HSA_RT_STATUS(ERROR, "A generic error has occurred."),
      HSA_RT_STATUS(ERROR_INVALID_ARGUMENT,
                    "One of the actual arguments does not meet a precondition stated in the "
                    "documentation of the corresponding formal argument."),
      HSA_RT_STATUS(ERROR_INVALID_QUEUE_CREATION,
                    "The queue cannot be created because of the arguments."),
      HSA_RT_STATUS(ERROR_INVALID_ALLOCATION, "The requested allocation is not valid."),
      HSA_RT_STATUS(ERROR_INVALID_AGENT, "The agent is invalid."),
      HSA_RT_STATUS(ERROR_INVALID_REGION, "The memory region is invalid."),
      HSA_RT_STATUS(ERROR_INVALID_SIGNAL, "The signal is invalid."),
      HSA_RT_STATUS(ERROR_INVALID_QUEUE, "The queue is invalid."),
      HSA_RT_STATUS(ERROR_OUT_OF_RESOURCES,
                    "The runtime failed to allocate the necessary resources."),
      HSA_RT_STATUS(ERROR_INVALID_PACKET_FORMAT, "The AQL packet is malformed."),
      HSA_RT_STATUS(ERROR_RESOURCE_FREE, "An error has been detected while releasing a resource."),
      HSA_RT_STATUS(ERROR_NOT_INITIALIZED, "The HSA runtime is not initialized."),
      HSA_RT_STATUS(ERROR_INVALID_ISA, "The instruction set architecture is invalid."),
      HSA_RT_STATUS(ERROR_INVALID_ISA_NAME, "The instruction set architecture name is invalid."),
      HSA_RT_STATUS(ERROR_INVALID_CODE_OBJECT, "The code object is invalid."),
      HSA_RT_STATUS(ERROR_INVALID_EXECUTABLE, "The executable is invalid."),
      HSA_RT_STATUS(ERROR_FROZEN_EXECUTABLE, "The executable is frozen."),
      HSA_RT_STATUS(ERROR_INVALID_SYMBOL_NAME, "There is no symbol with the given name."),
      HSA_RT_STATUS(ERROR_INCOMPATIBLE_ARGUMENTS,
                    "The arguments passed to a functions are not compatible."),
      HSA_RT_STATUS(ERROR_INVALID_INDEX, "The index is invalid."),
      HSA_RT_STATUS(ERROR_INVALID_EXECUTABLE_SYMBOL, "The executable symbol is invalid."),
      HSA_RT_STATUS(ERROR_EXCEPTION, "An HSAIL operation resulted in a hardware exception."),
      HSA_RT_STATUS(ERROR_INVALID_CODE_OBJECT_READER, "The code object reader is invalid."),
      HSA_RT_STATUS(ERROR_INVALID_MEMORY_POOL, "The memory pool is invalid."),
      HSA_RT_STATUS(ERROR_MEMORY_APERTURE_VIOLATION,
                    "The kernel accessed memory beyond its aperture."),
  };
#undef HSA_RT_STATUS
  for (const auto& entry : kTexts) {
    if (entry.first == static_cast<uint32_t>(status)) return entry.second;
  }
  return nullptr;
}

}  // namespace

// ---- handles, topology ------------------------------------------------------------------

uint64_t make_handle(Tag tag, uint64_t payload) {
  if (tag == Tag::kSignal) return (uint64_t{static_cast<uint8_t>(tag)} << 56) | payload;
  return (uint64_t{static_cast<uint8_t>(tag)} << 56) | ((g_epoch & 0xFFFF) << kPayloadBits) |
         (payload & kPayloadMask);
}

bool decode_handle(uint64_t handle, Tag tag, uint64_t* payload) {
  if ((handle >> 56) != static_cast<uint8_t>(tag)) return false;
  if (((handle >> kPayloadBits) & 0xFFFF) != (g_epoch & 0xFFFF)) return false;
  *payload = handle & kPayloadMask;
  return true;
}

bool ready() {
  if (g_ready.load(std::memory_order_acquire)) return true;
  // The host backend brings itself up on the first call of a process.
  if (!g_started && backend::kind() == HSA_RT_BACKEND_HOST) hsa_rt_init();
  return g_ready.load(std::memory_order_acquire);
}

uint32_t gpu_count() { return ready() ? g_gpus.load() : 0; }

bool agent_index(hsa_agent_t agent, uint32_t* index) {
  uint64_t payload = 0;
  if (!ready() || !decode_handle(agent.handle, Tag::kAgent, &payload)) return false;
  if (payload > g_gpus) return false;
  *index = static_cast<uint32_t>(payload);
  return true;
}

hsa_agent_t agent_handle(uint32_t index) { return hsa_agent_t{make_handle(Tag::kAgent, index)}; }

const AgentDescription& agent_description(uint32_t index) { return (*g_agents)[index]; }

const std::string& agent_isa_locked(uint32_t index) { return (*g_isas)[index]; }

uint32_t pool_flags(hsa_rt_pool_kind_t kind) {
  switch (kind) {
    case HSA_RT_POOL_DEVICE_COARSE:
    case HSA_RT_POOL_SYSTEM_COARSE:
      return HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED;
    case HSA_RT_POOL_DEVICE_FINE:
    case HSA_RT_POOL_SYSTEM_FINE:
      return HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED;
    case HSA_RT_POOL_SYSTEM_KERNARG:  // ROCr's: fine-grained, KERNARG_INIT too
      return HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT |
             HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED;
  }
  return 0;
}

// Pool payload: agent index above, kind in the low byte.
uint64_t pool_handle(PoolId pool) {
  return make_handle(Tag::kPool, (uint64_t{pool.agent} << 8) | uint64_t(pool.kind));
}

bool pool_from_handle(uint64_t handle, PoolId* pool) {
  uint64_t payload = 0;
  if (!ready() || !decode_handle(handle, Tag::kPool, &payload)) return false;
  const uint64_t agent = payload >> 8;
  const auto kind = static_cast<hsa_rt_pool_kind_t>(payload & 0xFF);
  if (agent > g_gpus || (payload & 0xFF) > HSA_RT_POOL_SYSTEM_COARSE) return false;
  if (is_gpu(uint32_t(agent)) != is_device_kind(kind) || !backend::has_pool(kind)) return false;
  *pool = PoolId{uint32_t(agent), kind};
  return true;
}

// ---- faults, modes, counters ----------------------------------------------------------------

std::mutex& faults_mutex() { return g_faults_mutex; }
Faults& faults_locked() { return *g_faults; }

bool take_fault(uint64_t Faults::*count) {
  return with_faults([&](Faults& f) {
    if (f.*count == 0) return false;
    --(f.*count);
    return true;
  });
}

bool nth_fault(uint64_t* at, uint64_t* seen) {
  if (*at == 0 || ++*seen != *at) return false;
  *at = 0;
  return true;
}

bool vmem_fault(VmemOp op) {
  const auto index = static_cast<size_t>(op);
  return with_faults([&](Faults& f) { return nth_fault(&f.vmem_at[index], &f.vmem_seen[index]); });
}

bool covers(const std::vector<uintptr_t>& addresses, const void* begin, size_t size) {
  const auto start = reinterpret_cast<uintptr_t>(begin);
  return std::any_of(addresses.begin(), addresses.end(),
                     [&](uintptr_t a) { return a >= start && a - start < size; });
}

bool mode(hsa_rt_mode_t which) { return g_modes[which].load(); }

Counters& counters() { return *g_counters; }

void count_violation(const char* what, const void* dst, const void* src, size_t size,
                     const char* side, const char* why) {
  counters().violations.fetch_add(1);
  if (backend::reports_violations()) {
    std::fprintf(stderr, "hsa_rt: %s(dst=%p, src=%p, size=%zu) refused: the %s %s\n", what, dst,
                 src, size, side, why);
  }
}

}  // namespace hsa_rt

using namespace hsa_rt;

// ---- entry points ---------------------------------------------------------------------------

namespace hsa_rt::api {

hsa_status_t init() {
  if (ready()) return HSA_STATUS_SUCCESS;
  switch (hsa_rt_init()) {
    case HSA_RT_INIT_OK:
      return HSA_STATUS_SUCCESS;
    case HSA_RT_INIT_NO_DRIVER:
    case HSA_RT_INIT_NO_DEVICE:
      return HSA_STATUS_ERROR_OUT_OF_RESOURCES;  // ROCr's answer when it finds no device
    default:
      return HSA_STATUS_ERROR;
  }
}

// A no-op (a tool's wrappers stay over the runtime; the harness decides
// when it goes: hsa_rt_shutdown).
hsa_status_t shut_down() { return ready() ? HSA_STATUS_SUCCESS : HSA_STATUS_ERROR_NOT_INITIALIZED; }

hsa_status_t status_string(hsa_status_t status, const char** text) {
  if (text == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  *text = status_text(status);
  return *text == nullptr ? HSA_STATUS_ERROR_INVALID_ARGUMENT : HSA_STATUS_SUCCESS;
}

hsa_status_t system_get_info(hsa_system_info_t attribute, void* value) {
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  switch (attribute) {
    case HSA_SYSTEM_INFO_VERSION_MAJOR:
    case HSA_SYSTEM_INFO_VERSION_MINOR:
      return answer(value, uint16_t{1});
    case HSA_SYSTEM_INFO_TIMESTAMP:
      return answer(value, uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count()));
    case HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY:
      return answer(value, kTimestampHz);
    case HSA_SYSTEM_INFO_SIGNAL_MAX_WAIT:
      return answer(value, UINT64_MAX);
    case HSA_SYSTEM_INFO_ENDIANNESS:
      return answer(value, HSA_ENDIANNESS_LITTLE);
    case HSA_SYSTEM_INFO_MACHINE_MODEL:
      return answer(value, HSA_MACHINE_MODEL_LARGE);
    // ROCr: every GPU supports the SVM API; accessible by default is every
    // GPU's ISA having XNACK on; XNACK_ENABLED the process's mode (6.0+).
    case HSA_AMD_SYSTEM_INFO_SVM_SUPPORTED:
      return answer(value, true);
    case HSA_AMD_SYSTEM_INFO_SVM_ACCESSIBLE_BY_DEFAULT:
      return answer(value, mode(HSA_RT_MODE_XNACK));
#if HSA_RT_HAVE_XNACK_ENABLED
    case HSA_AMD_SYSTEM_INFO_XNACK_ENABLED:
      return answer(value, mode(HSA_RT_MODE_XNACK));
#endif
    default:
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}

hsa_status_t iterate_agents(hsa_status_t (*callback)(hsa_agent_t, void*), void* data) {
  HSA_RT_REQUIRE_READY();
  if (callback == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  std::vector<hsa_agent_t> agents;  // the CPU first, then the GPUs, as ROCr
  for (uint32_t i = 0; i <= g_gpus; ++i) agents.push_back(agent_handle(i));
  return call_each(agents, [&](hsa_agent_t agent) { return callback(agent, data); });
}

hsa_status_t agent_get_info(hsa_agent_t agent, hsa_agent_info_t attribute, void* value) {
  HSA_RT_REQUIRE_READY();
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  uint32_t index = 0;
  if (!agent_index(agent, &index)) return HSA_STATUS_ERROR_INVALID_AGENT;
  const bool gpu = is_gpu(index);
  const AgentDescription& d = agent_description(index);
  std::string isa;
  uint64_t isa_handle = 0;
  {
    ExclusiveLock lock(memory_mutex());
    isa = agent_isa_locked(index);
    if (!isa.empty()) isa_handle = isa_handle_locked(isa);
  }
  const uint32_t queue_size = gpu ? kQueueMaxSize : 0;
  switch (static_cast<uint32_t>(attribute)) {
    case HSA_AGENT_INFO_NAME:
      // ROCr names a GPU agent after its ISA's processor.
      if (!gpu) return answer_string(value, 64, d.name);
      return answer_string(value, 64, processor_of(isa).empty() ? "gfx000" : processor_of(isa));
    case HSA_AGENT_INFO_VENDOR_NAME:
      return answer_string(value, 64, d.vendor);
    case HSA_AMD_AGENT_INFO_PRODUCT_NAME:
      return answer_string(value, 64, d.product);
    case HSA_AGENT_INFO_FEATURE:
      return answer(value, gpu ? HSA_AGENT_FEATURE_KERNEL_DISPATCH : hsa_agent_feature_t{});
    case HSA_AGENT_INFO_MACHINE_MODEL:
      return answer(value, HSA_MACHINE_MODEL_LARGE);
    case HSA_AGENT_INFO_PROFILE:
      return answer(value, gpu ? HSA_PROFILE_BASE : HSA_PROFILE_FULL);
    case HSA_AGENT_INFO_WAVEFRONT_SIZE:
      return answer(value, d.wavefront_size);
    case HSA_AGENT_INFO_QUEUES_MAX:
      return answer(value, gpu ? kQueuesMax : uint32_t{0});
    case HSA_AGENT_INFO_QUEUE_MIN_SIZE:
      return answer(value, gpu ? kQueueMinSize : uint32_t{0});
    case HSA_AGENT_INFO_QUEUE_MAX_SIZE:
      return answer(value, queue_size);
    case HSA_AGENT_INFO_QUEUE_TYPE:
      return answer(value, hsa_queue_type32_t{HSA_QUEUE_TYPE_MULTI});
    case HSA_AGENT_INFO_ISA:
      return answer(value, hsa_isa_t{isa_handle});
    case HSA_AGENT_INFO_NODE:
    case HSA_AMD_AGENT_INFO_DRIVER_NODE_ID:
      return answer(value, index);
    case HSA_AGENT_INFO_DEVICE:
      return answer(value, gpu ? HSA_DEVICE_TYPE_GPU : HSA_DEVICE_TYPE_CPU);
    case HSA_AGENT_INFO_VERSION_MAJOR:
    case HSA_AGENT_INFO_VERSION_MINOR:
      return answer(value, uint16_t{1});
    case HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT:
      return answer(value, d.compute_units);
    case HSA_AMD_AGENT_INFO_UUID:
      if (!d.has_uuid) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
      return answer_string(value, 21, d.uuid);
    case HSA_RT_AGENT_INFO_MEMORY_AVAIL: {
      // Newer ROCr, GPU agents only: free bytes of its local memory.
      if (!gpu || !mode(HSA_RT_MODE_MEMORY_AVAIL_SUPPORTED)) {
        return HSA_STATUS_ERROR_INVALID_ARGUMENT;
      }
      const uint64_t capacity = backend::device_capacity(index);
      if (capacity == 0) {
        uint64_t bytes = 0;
        const hsa_status_t status = backend::memory_avail(index, &bytes);
        if (status == HSA_STATUS_SUCCESS) write_value(value, bytes);
        return status;
      }
      SharedLock lock(memory_mutex());
      return answer(value, uint64_t{capacity - memory().device_bytes[index]});
    }
    default:
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}

hsa_status_t agent_iterate_isas(hsa_agent_t agent, hsa_status_t (*callback)(hsa_isa_t, void*),
                                void* data) {
  HSA_RT_REQUIRE_READY();
  if (callback == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  uint32_t index = 0;
  if (!agent_index(agent, &index)) return HSA_STATUS_ERROR_INVALID_AGENT;
  hsa_isa_t isa{0};
  {
    ExclusiveLock lock(memory_mutex());
    // ROCr's CPU agent has no ISA: the walk calls nothing and succeeds.
    if (agent_isa_locked(index).empty()) return HSA_STATUS_SUCCESS;
    isa.handle = isa_handle_locked(agent_isa_locked(index));
  }
  return callback(isa, data);
}

hsa_status_t isa_get_info_alt(hsa_isa_t isa, hsa_isa_info_t attribute, void* value) {
  HSA_RT_REQUIRE_READY();
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  std::string name;
  if (!isa_name(isa, &name)) return HSA_STATUS_ERROR_INVALID_ISA;
  const auto flags = [value](std::initializer_list<bool> list) {
    std::copy(list.begin(), list.end(), static_cast<bool*>(value));
    return HSA_STATUS_SUCCESS;
  };
  switch (attribute) {
    case HSA_ISA_INFO_NAME_LENGTH:
      // ROCr's Isa::GetInfo counts the terminating NUL, and writes it.
      return answer(value, uint32_t(name.size() + 1));
    case HSA_ISA_INFO_NAME:
      std::memcpy(value, name.c_str(), name.size() + 1);
      return HSA_STATUS_SUCCESS;
    case HSA_ISA_INFO_MACHINE_MODELS:
      return flags({false, true});  // small, large
    case HSA_ISA_INFO_PROFILES:
      return flags({true, true});  // base, full
    case HSA_ISA_INFO_DEFAULT_FLOAT_ROUNDING_MODES:
    case HSA_ISA_INFO_BASE_PROFILE_DEFAULT_FLOAT_ROUNDING_MODES:
      return flags({false, false, true});  // default, zero, near
    case HSA_ISA_INFO_FAST_F16_OPERATION:
      return flags({true});
    case HSA_ISA_INFO_WORKGROUP_MAX_DIM: {
      const uint16_t dims[3] = {1024, 1024, 1024};
      std::memcpy(value, dims, sizeof(dims));
      return HSA_STATUS_SUCCESS;
    }
    case HSA_ISA_INFO_WORKGROUP_MAX_SIZE:
      return answer(value, uint32_t{1024});
    case HSA_ISA_INFO_GRID_MAX_DIM:
      return answer(value, hsa_dim3_t{UINT32_MAX, UINT32_MAX, UINT32_MAX});
    case HSA_ISA_INFO_GRID_MAX_SIZE:
      return answer(value, uint32_t{UINT32_MAX});
    case HSA_ISA_INFO_FBARRIER_MAX_SIZE:
      return answer(value, uint32_t{32});
    default:
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}

hsa_status_t isa_get_info(hsa_isa_t isa, hsa_isa_info_t attribute, uint32_t index, void* value) {
  HSA_RT_REQUIRE_READY();
  if (index != 0) return HSA_STATUS_ERROR_INVALID_INDEX;
  return isa_get_info_alt(isa, attribute, value);
}

hsa_status_t isa_from_name(const char* name, hsa_isa_t* isa) {
  HSA_RT_REQUIRE_READY();
  if (name == nullptr || isa == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  ExclusiveLock lock(memory_mutex());
  for (const std::string& agent_isa : *g_isas) {
    if (!agent_isa.empty() && agent_isa == name) {
      isa->handle = isa_handle_locked(agent_isa);
      return HSA_STATUS_SUCCESS;
    }
  }
  return HSA_STATUS_ERROR_INVALID_ISA_NAME;
}

}  // namespace hsa_rt::api

// ---- the tables -------------------------------------------------------------------------------

namespace {

template <typename Table>
void begin_table(Table* out, uint32_t major, uint32_t step) {
  std::memset(out, 0, sizeof(*out));
  out->version.major_id = major;
  out->version.minor_id = sizeof(Table);  // what a tool's size checks read
  out->version.step_id = step;
}

// Sets an entry of the table being filled (entries of the other table are
// skipped): each .def line becomes one call.
template <typename Out, typename Table, typename Fn>
void set_entry(Out* out, Fn Table::*field, Fn function) {
  if constexpr (std::is_same<Out, Table>::value) out->*field = function;
}

template <typename Out>
void fill(Out* out) {
#define HSA_ENTRY_VISIT(table, name, library, runtime, signature) \
  set_entry(out, &table::hsa_##name##_fn, &hsa_rt::api::runtime);
#include "hsa_entries.h"
}

template <typename Table, void (*Fill)(Table*)>
Table* filled_once() {
  // Filled once and never rewritten (a tool may have installed wrappers),
  // never destroyed.
  static Table* const table = [] {
    auto* t = new Table;
    Fill(t);
    return t;
  }();
  return table;
}

}  // namespace

extern "C" {

void hsa_rt_fill_core_table(CoreApiTable* out) {
  if (out == nullptr) return;
  begin_table(out, HSA_CORE_API_TABLE_MAJOR_VERSION, HSA_CORE_API_TABLE_STEP_VERSION);
  fill(out);
}

void hsa_rt_fill_amd_ext_table(AmdExtTable* out) {
  if (out == nullptr) return;
  begin_table(out, HSA_AMD_EXT_API_TABLE_MAJOR_VERSION, HSA_AMD_EXT_API_TABLE_STEP_VERSION);
  fill(out);
}

CoreApiTable* hsa_rt_core_table(void) {
  return filled_once<CoreApiTable, hsa_rt_fill_core_table>();
}

AmdExtTable* hsa_rt_amd_ext_table(void) {
  return filled_once<AmdExtTable, hsa_rt_fill_amd_ext_table>();
}

size_t hsa_rt_core_table_size(void) { return sizeof(CoreApiTable); }
size_t hsa_rt_amd_ext_table_size(void) { return sizeof(AmdExtTable); }

void hsa_rt_header_table_versions(uint32_t out[4]) {
  out[0] = HSA_CORE_API_TABLE_MAJOR_VERSION;
  out[1] = HSA_CORE_API_TABLE_STEP_VERSION;
  out[2] = HSA_AMD_EXT_API_TABLE_MAJOR_VERSION;
  out[3] = HSA_AMD_EXT_API_TABLE_STEP_VERSION;
}

// ---- control interface: the runtime ---------------------------------------------------------

hsa_rt_backend_t hsa_rt_backend(void) { return backend::kind(); }

hsa_rt_init_status_t hsa_rt_init(void) {
  std::lock_guard<std::mutex> lock(g_init);
  if (g_ready) return HSA_RT_INIT_OK;
  return start_locked(UINT32_MAX);
}

hsa_rt_init_status_t hsa_rt_reset(uint32_t gpu_count) {
  std::lock_guard<std::mutex> lock(g_init);
  return start_locked(gpu_count);
}

void hsa_rt_shutdown(void) {
  std::lock_guard<std::mutex> lock(g_init);
  g_started = true;
  if (!g_ready) return;
  g_ready = false;
  tear_down(true);
}

bool hsa_rt_initialized(void) { return g_ready.load(); }

const char* hsa_rt_init_message(void) { return g_message; }

// ---- control interface: topology ------------------------------------------------------------

uint32_t hsa_rt_gpu_count(void) { return gpu_count(); }

hsa_agent_t hsa_rt_cpu_agent(void) { return ready() ? agent_handle(kCpu) : hsa_agent_t{0}; }

hsa_agent_t hsa_rt_gpu_agent(uint32_t index) {
  return index < gpu_count() ? agent_handle(index + 1) : hsa_agent_t{0};
}

hsa_amd_memory_pool_t hsa_rt_pool(hsa_agent_t agent, hsa_rt_pool_kind_t kind) {
  uint32_t index = 0;
  if (!agent_index(agent, &index) || static_cast<uint32_t>(kind) > HSA_RT_POOL_SYSTEM_COARSE ||
      is_gpu(index) != is_device_kind(kind) || !backend::has_pool(kind)) {
    return hsa_amd_memory_pool_t{0};
  }
  return hsa_amd_memory_pool_t{pool_handle(PoolId{index, kind})};
}

hsa_region_t hsa_rt_region(hsa_agent_t agent, hsa_rt_pool_kind_t kind) {
  // ROCr implements pools and regions with one object: one handle value.
  return hsa_region_t{hsa_rt_pool(agent, kind).handle};
}

bool hsa_rt_set_agent_isa(hsa_agent_t agent, const char* isa) {
  uint32_t index = 0;
  if (!agent_index(agent, &index)) return false;
  ExclusiveLock lock(memory_mutex());
  (*g_isas)[index] = isa == nullptr ? std::string() : std::string(isa);
  return true;
}

bool hsa_rt_vmem_supported(void) {
  if (!HSA_RT_HAVE_VMEM || gpu_count() == 0) return false;
  for (uint32_t i = 1; i <= g_gpus; ++i) {
    if (backend::vmem_granularity(i) == 0) return false;
  }
  return true;
}

size_t hsa_rt_vmem_granularity(hsa_agent_t agent) {
  uint32_t index = 0;
  return agent_index(agent, &index) && is_gpu(index) ? backend::vmem_granularity(index) : 0;
}

const cuda_driver_t* hsa_rt_cuda_driver(void) { return backend::driver(); }

int hsa_rt_cuda_device(hsa_agent_t agent) {
  uint32_t index = 0;
  return agent_index(agent, &index) && is_gpu(index) ? backend::device(index) : -1;
}

CUctx_st* hsa_rt_cuda_context(hsa_agent_t agent) {
  uint32_t index = 0;
  return agent_index(agent, &index) && is_gpu(index) ? backend::context(index) : nullptr;
}

// ---- control interface: modes, faults, counters -------------------------------------------------

void hsa_rt_set_mode(hsa_rt_mode_t which, bool enabled) {
  if (static_cast<uint32_t>(which) <= HSA_RT_MODE_XNACK) g_modes[which] = enabled;
}

void hsa_rt_inject(hsa_rt_fault_t fault, uint64_t target, uint64_t value) {
  // Where each fault of the enum lives: a value (with the count of calls
  // seen, for the n-th ones) or a list of addresses.
  struct Field {
    uint64_t Faults::*value;
    uint64_t Faults::*seen;
    std::vector<uintptr_t> Faults::*addresses;
  };
  static const Field kFields[] = {
      {&Faults::pointer_info, nullptr, nullptr},
      {&Faults::d2h_at, &Faults::d2h_seen, nullptr},
      {nullptr, nullptr, &Faults::h2d_into},
      {nullptr, nullptr, &Faults::copies_into},
      {nullptr, nullptr, &Faults::copies_from},
      {nullptr, nullptr, nullptr},  // SYMBOL_WALK
      {nullptr, nullptr, nullptr},  // SYMBOL_QUERY
      {&Faults::executable_iteration, nullptr, nullptr},
      {&Faults::loader_extension, nullptr, nullptr},
      {&Faults::allocations, nullptr, nullptr},
      {&Faults::frees, nullptr, nullptr},
      {&Faults::queue_creations, nullptr, nullptr},
      {&Faults::code_object_loads, nullptr, nullptr},
      {&Faults::dispatches, nullptr, nullptr},
      {&Faults::async_at, &Faults::async_seen, nullptr},
      {&Faults::async_error_at, &Faults::async_error_seen, nullptr},
      {nullptr, nullptr, nullptr},  // NTH_VMEM_HANDLE_CREATE .. _SET_ACCESS: vmem_at
      {nullptr, nullptr, nullptr},
      {nullptr, nullptr, nullptr},
      {nullptr, nullptr, nullptr},
      {nullptr, nullptr, nullptr},
      {&Faults::locks, nullptr, nullptr},
      {&Faults::unlocks, nullptr, nullptr},
      {&Faults::svm_sets, nullptr, nullptr},
      {&Faults::svm_gets, nullptr, nullptr},
      {&Faults::svm_prefetches, nullptr, nullptr},
  };
  std::lock_guard<std::mutex> lock(g_faults_mutex);
  Faults& f = *g_faults;
  const auto index = static_cast<size_t>(fault);
  if (fault == HSA_RT_FAULT_SYMBOL_WALK) {
    f.refused_walks[target] = value != 0;
  } else if (fault == HSA_RT_FAULT_SYMBOL_QUERY) {
    f.symbol_queries[uint32_t(target)] = value != 0;
  } else if (fault >= HSA_RT_FAULT_NTH_VMEM_HANDLE_CREATE &&
             fault <= HSA_RT_FAULT_NTH_VMEM_SET_ACCESS) {
    const size_t op = fault - HSA_RT_FAULT_NTH_VMEM_HANDLE_CREATE;
    f.vmem_at[op] = value;
    f.vmem_seen[op] = 0;
  } else if (index < sizeof(kFields) / sizeof(kFields[0]) && kFields[index].addresses) {
    std::vector<uintptr_t>& list = f.*kFields[index].addresses;
    if (target == 0) {
      list.clear();
    } else if (list.size() < 16 && std::find(list.begin(), list.end(), target) == list.end()) {
      list.push_back(uintptr_t(target));
    }
  } else if (index < sizeof(kFields) / sizeof(kFields[0])) {
    f.*kFields[index].value = value;
    if (kFields[index].seen != nullptr) f.*kFields[index].seen = 0;
  }
}

uint64_t hsa_rt_count(hsa_rt_counter_t counter) {
  Counters& c = counters();
  const std::atomic<uint64_t>* const kEvents[] = {
      &c.copies[0], &c.copies[1], &c.copies[2],  &c.copies[3],       &c.bytes[0],
      &c.bytes[1],  &c.bytes[2],  &c.bytes[3],   &c.violations,      &c.async_copies,
      &c.pointer_info};
  const auto which = static_cast<size_t>(counter);
  if (which < sizeof(kEvents) / sizeof(kEvents[0])) return kEvents[which]->load();
  if (counter == HSA_RT_COUNT_DISPATCHES) return c.dispatches.load();
  if (counter == HSA_RT_COUNT_BACKEND_ERRORS) return c.backend_errors.load();
  if (counter == HSA_RT_COUNT_LOCKS) return c.locks.load();
  if (counter == HSA_RT_COUNT_UNLOCKS) return c.unlocks.load();
  if (counter == HSA_RT_COUNT_SVM_MIGRATIONS) return c.svm_migrations.load();
  if (counter == HSA_RT_COUNT_SVM_PREFETCHES) return c.svm_prefetches.load();
  if (counter == HSA_RT_COUNT_SVM_RANGES) return svm_range_count();
  if (counter == HSA_RT_COUNT_SIGNAL_HANDLERS) return armed_handler_count();
  if (counter == HSA_RT_COUNT_INVALID_SIGNAL_USES) return invalid_signal_uses();
  if (counter == HSA_RT_COUNT_LIVE_QUEUES) return live_queue_count();
  if (counter == HSA_RT_COUNT_LIVE_SIGNALS) return live_signal_count();
  SharedLock lock(memory_mutex());
  const Memory& m = memory();
  if (counter == HSA_RT_COUNT_QUARANTINED_BYTES) return m.quarantine_bytes;
  if (counter == HSA_RT_COUNT_VMEM_MAPPINGS) return m.mappings.size();
  if (counter == HSA_RT_COUNT_VMEM_HANDLES) return m.handles.size();
  if (counter == HSA_RT_COUNT_VMEM_RESERVATIONS) return m.reservations.size();
  if (counter == HSA_RT_COUNT_LOCKED_RANGES) return m.locks.size();
  if (counter != HSA_RT_COUNT_LIVE_ALLOCATIONS) return 0;
  return uint64_t(std::count_if(m.live.begin(), m.live.end(), [](const auto& entry) {
    return entry.second.origin != Origin::kVariable;
  }));
}

void hsa_rt_reset_counters(void) {
  Counters& c = counters();
  for (int i = 0; i < 4; ++i) {
    c.copies[i] = 0;
    c.bytes[i] = 0;
  }
  c.violations = 0;
  c.async_copies = 0;
  c.pointer_info = 0;
  c.dispatches = 0;
  c.backend_errors = 0;
  c.locks = 0;
  c.unlocks = 0;
  c.svm_migrations = 0;
  c.svm_prefetches = 0;
  svm_reset_counters();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    c.by_kernel.clear();
  }
  reset_invalid_signal_uses();
}

uint64_t hsa_rt_dispatch_count(const char* kernel) {
  Counters& c = counters();
  if (kernel == nullptr) return c.dispatches.load();
  std::string name(kernel);
  if (name.size() > 3 && name.compare(name.size() - 3, 3, ".kd") == 0) name.resize(name.size() - 3);
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.by_kernel.find(name);
  return it == c.by_kernel.end() ? 0 : it->second;
}

}  // extern "C"

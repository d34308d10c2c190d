// hsa_sim_queues.cpp: AQL queues and their packet processors, standing in
// for ROCr's AqlQueue and the GPU's command processor, so that the library's
// own kernels run here through exactly the calls it makes on ROCm.
//
// A queue is a ring of 64-byte packets (headers INVALID until published), a
// doorbell signal, and read/write indices. Its packet processor is a thread
// of its own, as the hardware is asynchronous: after a ring of the doorbell
// it takes the packets from the read index up to the highest index rung,
// each once its header is published (type not INVALID), runs it, sets its
// header back to INVALID, advances the read index and subtracts 1 from its
// completion signal. Acquire and release fences hold trivially (one address
// space, one packet at a time), and so does the barrier bit.
//
// A kernel dispatch runs one of the library's kernels on the CPU
// (kr_host_dispatch, kernels/replay_kernels.cu built with KR_HOST) after
// every range it will touch has passed the copy engine's checks, plus the
// dispatching GPU's own access (a kernel reads and writes through that GPU's
// page tables). A failure does what ROCr's queue error handling does: the
// queue is suspended (nothing more runs on it, the failed packet's completion
// signal is never signalled) and the queue's error callback is called with
// the status ROCr maps the hardware's error to.

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "../../../kernels/replay_kernels.h"
#include "hsa_common_signals.h"
#include "hsa_sim_internal.h"

namespace hsa_sim {

namespace {

using QueueCallback = void (*)(hsa_status_t, hsa_queue_t*, void*);

// Nothing rung yet: no packet index is negative.
constexpr hsa_signal_value_t kDoorbellIdle = -1;
// The processor also looks at its ring this often without a ring of the
// doorbell, for a packet rung before its header was published (several
// producers); in nanoseconds, the signal waits' unit.
constexpr uint64_t kPollNs = 20 * 1000 * 1000;
constexpr size_t kPacketBytes = 64;
// ROCr's limit on a queue's private segment size per work-item.
constexpr uint32_t kMaxPrivateSegmentSize = 262128;

struct Queue {
  alignas(64) hsa_queue_t shared{};  // what the caller sees
  std::atomic<uint64_t> write_index{0};
  std::atomic<uint64_t> read_index{0};
  std::atomic<bool> stop{false};      // destroy or reset: the processor ends
  std::atomic<bool> inactive{false};  // suspended by an error or inactivated
  uint32_t agent_index = 0;
  QueueCallback callback = nullptr;
  void* callback_data = nullptr;
  uint8_t* ring = nullptr;
  size_t ring_bytes = 0;
  std::thread processor;
};

// Live queues by their public address, and retired ones (a reset's: their
// memory stays, so a stale hsa_queue_t* the library still holds is harmless
// to touch). Its own lock, a leaf: never held while calling anything else.
struct Registry {
  std::mutex mutex;
  std::map<const hsa_queue_t*, std::unique_ptr<Queue>> live;
  std::vector<std::unique_ptr<Queue>> retired;
  uint64_t next_id = 1;
};

Registry& registry() {
  static Registry* const instance = new Registry;  // never destroyed, like State
  return *instance;
}

// Runs op on a live queue under the registry's lock; fallback for a pointer
// that is no live queue (ROCr asserts; here nothing happens).
template <typename Op>
uint64_t on_queue(const hsa_queue_t* queue, uint64_t fallback, Op op) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.live.find(queue);
  return it == r.live.end() ? fallback : op(*it->second);
}

// ---- errors --------------------------------------------------------------------

// Core::Queue::DefaultErrorHandler: without a callback of the caller's, an
// error prints and aborts unless HSA_ENABLE_QUEUE_FAULT_MESSAGE is "0".
void default_error_handler(hsa_status_t status, hsa_queue_t* queue) {
  const char* fault_message = std::getenv("HSA_ENABLE_QUEUE_FAULT_MESSAGE");
  if (fault_message != nullptr && std::string(fault_message) == "0") return;
  const char* text = hsa_common::status_text(status, hsa_common::StatusCodes::kCoreAndCodeObject);
  std::fprintf(stderr, "Queue at %p inactivated due to async error:\n\t%s\n",
               static_cast<void*>(queue), text != nullptr ? text : "UNKNOWN ERROR");
  std::abort();
}

// AqlQueue's error path: suspend, then the callback, with no lock held.
void fail_queue(Queue* q, hsa_status_t status) {
  q->inactive.store(true);
  if (q->callback != nullptr) {
    q->callback(status, &q->shared, q->callback_data);
  } else {
    default_error_handler(status, &q->shared);
  }
}

// ---- what a dispatch touches ----------------------------------------------------

enum Access : uint32_t { kRead = 1, kWrite = 2 };

// Checks the ranges one dispatch touches, with State::mutex held, and gives
// the address the CPU runs the kernel on (a vmem mapping's own memory, as the
// copy engine uses). The first range that fails makes the whole dispatch a
// violation.
class Reach {
 public:
  Reach(const State& s, uint32_t agent_index) : s_(s), agent_(agent_index) {}

  bool ok() const { return ok_; }
  // The ranges were valid, but one meets an address a test made copies
  // fail at (hsa_sim_fail_copies_into / _from): a fault, not a violation.
  bool injected_fault() const { return injected_; }

  // A host-to-device move a kernel makes (its source in host memory) into a
  // range a test made host-to-device copies fail at
  // (hsa_sim_fail_h2d_copy_into): a fault, as for a copy.
  void host_to_device(uint64_t dst, uint64_t src, uint64_t size) {
    if (!ok_ || size == 0) return;
    const auto* source = reinterpret_cast<const void*>(src);
    if (h2d_fault_covers_locked(s_, reinterpret_cast<const void*>(dst), size) &&
        classify_range_locked(s_, source, size, CopyRole::kSource) == Side::kHost) {
      injected_ = true;
    }
  }

  void* operator()(uint64_t address, uint64_t size, uint32_t access) {
    if (!ok_ || size == 0) return reinterpret_cast<void*>(address);
    const auto* ptr = reinterpret_cast<const void*>(address);
    if (((access & kWrite) != 0 && covers(s_.faults.copy_fail_addresses, address, size)) ||
        ((access & kRead) != 0 && covers(s_.faults.copy_from_fail_addresses, address, size))) {
      injected_ = true;
    }
    if (((access & kRead) != 0 &&
         classify_range_locked(s_, ptr, size, CopyRole::kSource) == Side::kViolation) ||
        ((access & kWrite) != 0 &&
         classify_range_locked(s_, ptr, size, CopyRole::kDestination) == Side::kViolation) ||
        !agent_may(ptr, access)) {
      ok_ = false;
      return nullptr;
    }
    return engine_address_locked(s_, ptr);
  }

  // An array of count elements of `element` bytes, false on overflow.
  void* array(uint64_t address, uint64_t count, uint64_t element, uint32_t access) {
    if (count > UINT64_MAX / element) ok_ = false;
    return (*this)(address, count * element, access);
  }

 private:
  // The GPU's own access: its permission on a vmem mapping must allow the
  // access; other memory must be mapped for it (owner or granted; memory the
  // runtime does not own never is).
  bool agent_may(const void* ptr, uint32_t access) const {
    uint32_t permission = 0;
    if (vmem_agent_permission_locked(s_, reinterpret_cast<uintptr_t>(ptr), agent_,
                                     &permission)) {
      const bool reads = permission == HSA_ACCESS_PERMISSION_RO ||
                         permission == HSA_ACCESS_PERMISSION_RW;
      const bool writes = permission == HSA_ACCESS_PERMISSION_WO ||
                          permission == HSA_ACCESS_PERMISSION_RW;
      return ((access & kRead) == 0 || reads) && ((access & kWrite) == 0 || writes);
    }
    return agent_can_access_locked(s_, agent_, ptr);
  }

  static bool covers(const std::vector<uintptr_t>& addresses, uint64_t begin, uint64_t size) {
    return std::any_of(addresses.begin(), addresses.end(),
                       [&](uintptr_t a) { return a >= begin && a - begin < size; });
  }

  const State& s_;
  uint32_t agent_;
  bool ok_ = true;
  bool injected_ = false;
};

// The kernel arguments with every address the kernel follows replaced by the
// one the CPU runs it on, and the record arrays copied (translated) here.
struct Prepared {
  kr_scatter_copy_args scatter{};
  kr_hash_blocks_args hash{};
  kr_compare_copy_args compare{};
  std::vector<kr_copy_record> records;
  std::vector<kr_hash_block> blocks;
  std::vector<kr_block_pair> pairs;
  const void* kernarg = nullptr;
};

template <typename Args>
bool read_kernarg(Reach& reach, const void* kernarg_address, Args* out) {
  const void* at = reach(reinterpret_cast<uintptr_t>(kernarg_address), sizeof(Args), kRead);
  if (!reach.ok()) return false;
  std::memcpy(out, at, sizeof(Args));
  return true;
}

template <typename Element>
bool read_array(Reach& reach, uint64_t address, uint64_t count, std::vector<Element>* out) {
  const void* at = reach.array(address, count, sizeof(Element), kRead);
  if (!reach.ok()) return false;
  out->resize(count);
  if (count != 0) std::memcpy(out->data(), at, count * sizeof(Element));
  return true;
}

constexpr uint64_t kKeyBytes = uint64_t{KR_HASH_KEYS} * sizeof(uint32_t);
constexpr uint64_t kHashBytesPerBlock = 2 * sizeof(uint64_t);

// A kernel runs `per_group` records (blocks, pairs) per workgroup and none
// past count (replay_kernels.cu): what it touches is the first
// min(count, workgroups * per_group).
uint64_t touched(uint64_t count, uint32_t workgroups, uint64_t per_group) {
  return std::min<uint64_t>(count, uint64_t{workgroups} * per_group);
}

// The hashing kernels read at most KR_BLOCK_BYTES of a block.
uint64_t block_bytes(uint64_t len) { return std::min<uint64_t>(len, KR_BLOCK_BYTES); }

bool prepare_scatter(Reach& reach, const void* kernarg, uint32_t workgroups, Prepared* p) {
  kr_scatter_copy_args& args = p->scatter;
  if (!read_kernarg(reach, kernarg, &args) ||
      !read_array(reach, reinterpret_cast<uintptr_t>(args.records),
                  touched(args.count, workgroups, 1), &p->records)) {
    return false;
  }
  for (kr_copy_record& record : p->records) {
    reach.host_to_device(record.dst, record.src, record.size);
    record.dst = reinterpret_cast<uintptr_t>(reach(record.dst, record.size, kWrite));
    record.src = reinterpret_cast<uintptr_t>(reach(record.src, record.size, kRead));
  }
  args.records = p->records.data();
  p->kernarg = &args;
  return reach.ok();
}

bool prepare_hash(Reach& reach, const void* kernarg, uint32_t workgroups, Prepared* p) {
  kr_hash_blocks_args& args = p->hash;
  if (!read_kernarg(reach, kernarg, &args) ||
      !read_array(reach, reinterpret_cast<uintptr_t>(args.blocks),
                  touched(args.count, workgroups, KR_BLOCKS_PER_GROUP), &p->blocks)) {
    return false;
  }
  for (kr_hash_block& block : p->blocks) {
    block.addr = reinterpret_cast<uintptr_t>(reach(block.addr, block_bytes(block.len), kRead));
  }
  args.blocks = p->blocks.data();
  args.keys = static_cast<const uint32_t*>(
      reach(reinterpret_cast<uintptr_t>(args.keys), kKeyBytes, kRead));
  args.hashes = static_cast<uint64_t*>(reach.array(reinterpret_cast<uintptr_t>(args.hashes),
                                                   p->blocks.size(), kHashBytesPerBlock, kWrite));
  p->kernarg = &args;
  return reach.ok();
}

bool prepare_compare(Reach& reach, const void* kernarg, uint32_t workgroups, Prepared* p) {
  kr_compare_copy_args& args = p->compare;
  if (!read_kernarg(reach, kernarg, &args) ||
      !read_array(reach, reinterpret_cast<uintptr_t>(args.pairs),
                  touched(args.count, workgroups, KR_BLOCKS_PER_GROUP), &p->pairs)) {
    return false;
  }
  // With KR_COMPARE_SWAP the pair's src is the side written.
  const bool swap = (args.flags & KR_COMPARE_SWAP) != 0;
  for (kr_block_pair& pair : p->pairs) {
    // The written side may also be hashed; the other is read.
    const uint64_t len = block_bytes(pair.len);
    if (swap) {
      reach.host_to_device(pair.src, pair.dst, len);
    } else {
      reach.host_to_device(pair.dst, pair.src, len);
    }
    pair.dst = reinterpret_cast<uintptr_t>(
        reach(pair.dst, len, swap ? uint32_t{kRead} : uint32_t{kRead | kWrite}));
    pair.src = reinterpret_cast<uintptr_t>(
        reach(pair.src, len, swap ? uint32_t{kRead | kWrite} : uint32_t{kRead}));
  }
  args.pairs = p->pairs.data();
  args.keys = static_cast<const uint32_t*>(
      reach(reinterpret_cast<uintptr_t>(args.keys), kKeyBytes, kRead));
  const uint32_t hash_access =
      (args.flags & KR_COMPARE_UPDATE_HASH) != 0 ? uint32_t{kRead | kWrite} : uint32_t{kRead};
  args.hashes = static_cast<uint64_t*>(reach.array(reinterpret_cast<uintptr_t>(args.hashes),
                                                   p->pairs.size(), kHashBytesPerBlock,
                                                   hash_access));
  args.changed = static_cast<uint64_t*>(
      reach(reinterpret_cast<uintptr_t>(args.changed), sizeof(uint64_t), kRead | kWrite));
  p->kernarg = &args;
  return reach.ok();
}

// The kernels this runtime can run, with how their arguments are checked.
bool prepare_kernel(const std::string& name, Reach& reach, const void* kernarg,
                    uint32_t workgroups, Prepared* p, bool* known) {
  *known = true;
  if (name == "kr_scatter_copy") return prepare_scatter(reach, kernarg, workgroups, p);
  if (name == "kr_hash_blocks") return prepare_hash(reach, kernarg, workgroups, p);
  if (name == "kr_compare_copy") return prepare_compare(reach, kernarg, workgroups, p);
  *known = false;
  return false;
}

// ---- packets ----------------------------------------------------------------------

uint32_t packet_type(uint16_t header) {
  return (header >> HSA_PACKET_HEADER_TYPE) & ((1u << HSA_PACKET_HEADER_WIDTH_TYPE) - 1);
}

// The shape the library's kernels need: 1-D, KR_WORKGROUP work-items per
// workgroup, a whole number of workgroups. (A GPU would run any shape and
// compute garbage; the sim says so, as an invalid work-group size.)
bool kernel_shape_ok(const hsa_kernel_dispatch_packet_t& p) {
  return p.workgroup_size_x == KR_WORKGROUP && p.workgroup_size_y == 1 &&
         p.workgroup_size_z == 1 && p.grid_size_y == 1 && p.grid_size_z == 1 &&
         p.grid_size_x % KR_WORKGROUP == 0;
}

// Runs one dispatch under State::mutex (a concurrent free cannot slip in
// between the checks and the kernel), with the statuses ROCr maps the
// command processor's errors to (AqlQueue::ExceptionHandler).
hsa_status_t run_dispatch(const Queue& q, const hsa_kernel_dispatch_packet_t& p) {
  const uint32_t dimensions = (p.setup >> HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS) & 0x3;
  if (dimensions == 0) return HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS;  // DIM_INVALID
  const uint64_t work_items =
      uint64_t{p.workgroup_size_x} * p.workgroup_size_y * p.workgroup_size_z;
  if (work_items == 0 || work_items > 1024) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const LoadedKernel* kernel = find_loaded_kernel_locked(s, p.kernel_object);
  if (kernel == nullptr || kernel->agent_index != q.agent_index) {
    return HSA_STATUS_ERROR_INVALID_CODE_OBJECT;  // DISPATCH_CODE_INVALID
  }
  if (s.faults.faulting_dispatches > 0) {
    --s.faults.faulting_dispatches;
    return static_cast<hsa_status_t>(HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION);
  }
  if (!kernel_shape_ok(p)) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  Reach reach(s, q.agent_index);
  Prepared prepared;
  bool known = false;
  const uint32_t workgroups = p.grid_size_x / KR_WORKGROUP;
  if (!prepare_kernel(kernel->name, reach, p.kernarg_address, workgroups, &prepared, &known)) {
    if (!known) return HSA_STATUS_ERROR_INVALID_CODE_OBJECT;  // no host build of it
    // Counted as a copy violation is; nothing was touched.
    ++s.counters.violations;
    return static_cast<hsa_status_t>(HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION);
  }
  // A page a test made copies fail on faults a kernel too, before anything
  // is written (a GPU's fault would leave the dispatch half done; the
  // library must not rely on either).
  if (reach.injected_fault()) {
    return static_cast<hsa_status_t>(HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION);
  }
  if (kr_host_dispatch(kernel->name.c_str(), prepared.kernarg, workgroups) != 0) {
    return HSA_STATUS_ERROR_INVALID_CODE_OBJECT;
  }
  ++s.counters.dispatches[kernel->name];
  return HSA_STATUS_SUCCESS;
}

// A barrier-AND waits for every dependency to read 0, a barrier-OR for one
// (none given: done at once). False when the queue stopped meanwhile.
bool wait_barrier(const Queue& q, const hsa_signal_t (&dep_signals)[5], bool any) {
  std::vector<hsa_signal_t> deps;
  for (const hsa_signal_t& dep : dep_signals) {
    if (dep.handle != 0) deps.push_back(dep);
  }
  hsa_common::SignalTable& signals = signal_table();
  if (!any) return signals.dependencies_satisfied(deps, /*block=*/true, q.stop);
  if (deps.empty()) return true;
  const std::vector<hsa_signal_condition_t> conditions(deps.size(), HSA_SIGNAL_CONDITION_EQ);
  const std::vector<hsa_signal_value_t> zeros(deps.size(), 0);
  while (!q.stop.load()) {
    hsa_signal_value_t value = 0;
    if (signals.wait_any(static_cast<uint32_t>(deps.size()), deps.data(), conditions.data(),
                         zeros.data(), kPollNs, &value) != UINT32_MAX) {
      return true;
    }
  }
  return false;
}

enum class Outcome { kDone, kFailed, kStopped };

Outcome run_packet(Queue* q, const uint8_t (&packet)[kPacketBytes], hsa_status_t* status) {
  uint16_t header = 0;
  std::memcpy(&header, packet, sizeof(header));
  *status = HSA_STATUS_SUCCESS;
  switch (packet_type(header)) {
    case HSA_PACKET_TYPE_KERNEL_DISPATCH: {
      hsa_kernel_dispatch_packet_t dispatch;
      std::memcpy(&dispatch, packet, sizeof(dispatch));
      *status = run_dispatch(*q, dispatch);
      break;
    }
    case HSA_PACKET_TYPE_BARRIER_AND:
    case HSA_PACKET_TYPE_BARRIER_OR: {
      hsa_barrier_and_packet_t barrier;  // BARRIER_OR has the same layout
      std::memcpy(&barrier, packet, sizeof(barrier));
      const bool any = packet_type(header) == HSA_PACKET_TYPE_BARRIER_OR;
      if (!wait_barrier(*q, barrier.dep_signal, any)) return Outcome::kStopped;
      break;
    }
    default:
      // Vendor-specific and agent-dispatch packets: EC_QUEUE_PACKET_UNSUPPORTED.
      *status = HSA_STATUS_ERROR_INVALID_PACKET_FORMAT;
      break;
  }
  return *status == HSA_STATUS_SUCCESS ? Outcome::kDone : Outcome::kFailed;
}

// Runs the packets rung so far (read index up to `rung`), one at a time.
void run_rung_packets(Queue* q, hsa_signal_value_t rung) {
  while (!q->stop.load() && !q->inactive.load() && rung >= 0) {
    const uint64_t index = q->read_index.load();
    if (index > static_cast<uint64_t>(rung) || index >= q->write_index.load()) return;
    uint8_t* slot = q->ring + (index & (q->shared.size - 1)) * kPacketBytes;
    auto* header = reinterpret_cast<uint16_t*>(slot);
    // The producer writes the header last, with release semantics.
    if (packet_type(__atomic_load_n(header, __ATOMIC_ACQUIRE)) == HSA_PACKET_TYPE_INVALID) return;
    uint8_t packet[kPacketBytes];
    std::memcpy(packet, slot, sizeof(packet));
    hsa_status_t status = HSA_STATUS_SUCCESS;
    const Outcome outcome = run_packet(q, packet, &status);
    if (outcome == Outcome::kStopped) return;
    if (outcome == Outcome::kFailed) {
      fail_queue(q, status);
      return;
    }
    // Consumed: the slot is free again, then the completion signal
    // (completion_signal sits at the same offset in every packet).
    __atomic_store_n(header, uint16_t{HSA_PACKET_TYPE_INVALID}, __ATOMIC_RELEASE);
    q->read_index.store(index + 1);
    hsa_signal_t completion{0};
    std::memcpy(&completion, packet + offsetof(hsa_kernel_dispatch_packet_t, completion_signal),
                sizeof(completion));
    if (completion.handle != 0) signal_table().subtract(completion, 1);
  }
}

void run_processor(Queue* q) {
  hsa_common::SignalTable& signals = signal_table();
  hsa_signal_value_t seen = kDoorbellIdle;
  hsa_signal_value_t rung = kDoorbellIdle;
  while (!q->stop.load()) {
    signals.wait(q->shared.doorbell_signal, HSA_SIGNAL_CONDITION_NE, seen, kPollNs);
    if (q->stop.load()) return;
    seen = signals.load(q->shared.doorbell_signal);
    // Producers may ring out of order; what was rung stays rung.
    rung = std::max(rung, seen);
    run_rung_packets(q, rung);
  }
}

// ---- creation and teardown --------------------------------------------------------

// ROCr's checks (hsa_queue_create, then GpuAgent::QueueCreate) up to the
// allocation, with fault injection last.
hsa_status_t check_queue_creation(hsa_agent_t agent, uint32_t size, hsa_queue_type32_t type,
                                  uint32_t private_segment_size, uint32_t* agent_index) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!agent_index_from_handle_locked(s, agent, agent_index)) {
    return HSA_STATUS_ERROR_INVALID_AGENT;
  }
  // CpuAgent::QueueCreate: no packet processor on a CPU.
  if (!is_gpu_index(*agent_index)) return HSA_STATUS_ERROR;
  // No GWS here, so no cooperative queue to share.
  if (type == HSA_QUEUE_TYPE_COOPERATIVE) return HSA_STATUS_ERROR_INVALID_QUEUE_CREATION;
  if (size > kQueueMaxSize) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  if (size < kQueueMinSize) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (private_segment_size != UINT_MAX && private_segment_size > kMaxPrivateSegmentSize) {
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  if (s.faults.failing_queue_creations > 0) {
    --s.faults.failing_queue_creations;
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  return HSA_STATUS_SUCCESS;
}

// A ring of `size` packets whose headers all read INVALID, as ROCr fills a
// new queue's ring.
uint8_t* map_ring(uint32_t size, size_t* bytes) {
  *bytes = size_t{size} * kPacketBytes;
  auto* ring = static_cast<uint8_t*>(map_block_memory(*bytes));
  if (ring == nullptr) return nullptr;
  for (size_t at = 0; at < *bytes; at += kPacketBytes) {
    const uint16_t invalid = HSA_PACKET_TYPE_INVALID;
    std::memcpy(ring + at, &invalid, sizeof(invalid));
  }
  return ring;
}

// Ends the packet processor: it sees `stop` at its next look, which the
// doorbell's change (or a barrier's give-up) brings at once.
void stop_processor(Queue* q) {
  q->stop.store(true);
  signal_table().add(q->shared.doorbell_signal, 1);
  signal_table().wake_waiters();
  if (q->processor.joinable()) q->processor.join();
}

uint32_t live_queues_on_locked(const Registry& r, uint32_t agent_index) {
  return static_cast<uint32_t>(std::count_if(r.live.begin(), r.live.end(), [&](const auto& e) {
    return e.second->agent_index == agent_index;
  }));
}

}  // namespace

void retire_all_queues() {
  std::vector<std::unique_ptr<Queue>> queues;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (auto& entry : r.live) queues.push_back(std::move(entry.second));
    r.live.clear();
  }
  for (auto& q : queues) {
    stop_processor(q.get());
    signal_table().destroy(q->shared.doorbell_signal);
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (auto& q : queues) r.retired.push_back(std::move(q));
}

uint64_t live_queue_count() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.live.size();
}

}  // namespace hsa_sim

namespace hsa_sim::api {

hsa_status_t queue_create(hsa_agent_t agent, uint32_t size, hsa_queue_type32_t type,
                          void (*callback)(hsa_status_t, hsa_queue_t*, void*), void* data,
                          uint32_t private_segment_size, uint32_t group_segment_size,
                          hsa_queue_t** queue) {
  (void)group_segment_size;  // no group memory to reserve here
  if (queue == nullptr || size == 0 || (size & (size - 1)) != 0 ||
      type > HSA_QUEUE_TYPE_COOPERATIVE) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  auto q = std::make_unique<Queue>();
  const hsa_status_t checked =
      check_queue_creation(agent, size, type, private_segment_size, &q->agent_index);
  if (checked != HSA_STATUS_SUCCESS) return checked;
  q->ring = map_ring(size, &q->ring_bytes);
  if (q->ring == nullptr) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  if (signal_table().create(kDoorbellIdle, 0, nullptr, &q->shared.doorbell_signal) !=
      HSA_STATUS_SUCCESS) {
    unmap_block_memory(q->ring, q->ring_bytes);
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  q->callback = callback;
  q->callback_data = data;
  q->shared.type = type;
  q->shared.features = HSA_QUEUE_FEATURE_KERNEL_DISPATCH;
  q->shared.base_address = q->ring;
  q->shared.size = size;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  // The KFD's limit on queues per device (HSA_AGENT_INFO_QUEUES_MAX).
  if (live_queues_on_locked(r, q->agent_index) >= kQueuesMax) {
    signal_table().destroy(q->shared.doorbell_signal);
    unmap_block_memory(q->ring, q->ring_bytes);
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  q->shared.id = r.next_id++;
  Queue* raw = q.get();
  q->processor = std::thread(run_processor, raw);
  *queue = &raw->shared;
  r.live[&raw->shared] = std::move(q);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t queue_destroy(hsa_queue_t* queue) {
  if (queue == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  std::unique_ptr<Queue> q;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.live.find(queue);
    if (it == r.live.end()) return HSA_STATUS_ERROR_INVALID_QUEUE;
    q = std::move(it->second);
    r.live.erase(it);
    if (q->processor.get_id() == std::this_thread::get_id()) {
      // From the queue's own error callback: the processor returns once the
      // callback does and never looks at the doorbell again; its memory
      // stays (retired) until then and after.
      q->stop.store(true);
      q->processor.detach();
      signal_table().destroy(q->shared.doorbell_signal);
      r.retired.push_back(std::move(q));
      return HSA_STATUS_SUCCESS;
    }
  }
  stop_processor(q.get());
  signal_table().destroy(q->shared.doorbell_signal);
  unmap_block_memory(q->ring, q->ring_bytes);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t queue_inactivate(hsa_queue_t* queue) {
  if (queue == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  const uint64_t found = on_queue(queue, 0, [](Queue& q) {
    q.inactive.store(true);
    return uint64_t{1};
  });
  return found != 0 ? HSA_STATUS_SUCCESS : HSA_STATUS_ERROR_INVALID_QUEUE;
}

uint64_t queue_load_read_index(const hsa_queue_t* queue) {
  return on_queue(queue, 0, [](Queue& q) { return q.read_index.load(); });
}

uint64_t queue_load_write_index(const hsa_queue_t* queue) {
  return on_queue(queue, 0, [](Queue& q) { return q.write_index.load(); });
}

void queue_store_write_index(const hsa_queue_t* queue, uint64_t value) {
  on_queue(queue, 0, [&](Queue& q) {
    q.write_index.store(value);
    return uint64_t{0};
  });
}

uint64_t queue_cas_write_index(const hsa_queue_t* queue, uint64_t expected, uint64_t value) {
  return on_queue(queue, 0, [&](Queue& q) {
    uint64_t observed = expected;
    q.write_index.compare_exchange_strong(observed, value);
    return observed;
  });
}

uint64_t queue_add_write_index(const hsa_queue_t* queue, uint64_t value) {
  return on_queue(queue, 0, [&](Queue& q) { return q.write_index.fetch_add(value); });
}

void queue_store_read_index(const hsa_queue_t* queue, uint64_t value) {
  on_queue(queue, 0, [&](Queue& q) {
    q.read_index.store(value);
    return uint64_t{0};
  });
}

}  // namespace hsa_sim::api

// ---- control interface --------------------------------------------------------

using namespace hsa_sim;

extern "C" void hsa_sim_fail_next_queue_creations(uint32_t count) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.faults.failing_queue_creations = count;
}

extern "C" void hsa_sim_fail_next_code_object_loads(uint32_t count) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.faults.failing_code_object_loads = count;
}

extern "C" void hsa_sim_fault_next_dispatches(uint32_t count) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.faults.faulting_dispatches = count;
}

extern "C" uint64_t hsa_sim_dispatch_count(const char* kernel) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (kernel == nullptr) {
    uint64_t total = 0;
    for (const auto& entry : s.counters.dispatches) total += entry.second;
    return total;
  }
  std::string name(kernel);
  if (name.size() > 3 && name.compare(name.size() - 3, 3, ".kd") == 0) name.resize(name.size() - 3);
  auto it = s.counters.dispatches.find(name);
  return it == s.counters.dispatches.end() ? 0 : it->second;
}

extern "C" uint64_t hsa_sim_live_queue_count(void) { return live_queue_count(); }

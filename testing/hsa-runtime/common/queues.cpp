// queues.cpp: AQL queues and their packet processors, standing in for
// ROCr's AqlQueue and a GPU's command processor (see hsa_rt.h, "AQL
// queues"), so the library's own kernels run through exactly the calls it
// makes on ROCm. A dispatch that passes the front end's checks goes to the
// backend (host: the kernel runs on the CPU; CUDA: cuLaunchKernel).

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include "runtime.h"

namespace hsa_rt {

namespace {

using QueueCallback = void (*)(hsa_status_t, hsa_queue_t*, void*);

constexpr hsa_signal_value_t kDoorbellIdle = -1;  // nothing rung: no index is negative
// The processor also looks at its ring this often without a ring (a packet
// rung before its header was published, by several producers).
constexpr uint64_t kPollNs = 20 * 1000 * 1000;
constexpr size_t kPacketBytes = 64;
constexpr uint32_t kMaxPrivateSegmentSize = 262128;  // ROCr's per work-item limit

struct Queue {
  alignas(64) hsa_queue_t shared{};  // what the caller sees
  std::atomic<uint64_t> write_index{0};
  std::atomic<uint64_t> read_index{0};
  std::atomic<bool> stop{false};      // destroy or reset: the processor ends
  std::atomic<bool> inactive{false};  // suspended by an error or inactivated
  uint32_t agent = 0;
  QueueCallback callback = nullptr;
  void* callback_data = nullptr;
  std::unique_ptr<uint8_t[]> storage;  // the ring, 64-byte aligned within
  void* backend = nullptr;
  std::thread processor;
};

// Live queues by their public address, and retired ones (their memory stays,
// so a stale hsa_queue_t* is harmless). A leaf lock.
struct Registry {
  std::mutex mutex;
  std::map<const hsa_queue_t*, std::unique_ptr<Queue>> live;
  std::vector<std::unique_ptr<Queue>> retired;
  uint64_t next_id = 1;
};

Registry& registry() {
  static Registry* const instance = new Registry;  // never destroyed
  return *instance;
}

// Runs op on a live queue; fallback for a pointer that is none (ROCr asserts).
template <typename Op>
uint64_t on_queue(const hsa_queue_t* queue, uint64_t fallback, Op op) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  auto it = registry().live.find(queue);
  return it == registry().live.end() ? fallback : op(*it->second);
}

// AqlQueue's error path: suspend, then the callback (no lock held); without
// one, Core::Queue::DefaultErrorHandler prints and aborts unless
// HSA_ENABLE_QUEUE_FAULT_MESSAGE is "0".
void fail_queue(Queue* q, hsa_status_t status) {
  q->inactive = true;
  if (q->callback != nullptr) {
    q->callback(status, &q->shared, q->callback_data);
    return;
  }
  const char* message = std::getenv("HSA_ENABLE_QUEUE_FAULT_MESSAGE");
  if (message != nullptr && std::string(message) == "0") return;
  const char* text = nullptr;
  hsa_rt::api::status_string(status, &text);
  std::fprintf(stderr, "Queue at %p inactivated due to async error:\n\t%s\n",
               static_cast<void*>(&q->shared), text != nullptr ? text : "UNKNOWN ERROR");
  std::abort();
}

uint32_t packet_type(uint16_t header) {
  return (header >> HSA_PACKET_HEADER_TYPE) & ((1u << HSA_PACKET_HEADER_WIDTH_TYPE) - 1);
}

// One dispatch, with the statuses ROCr maps a command processor's errors to
// (AqlQueue::ExceptionHandler): the front end's checks, then the backend.
hsa_status_t run_dispatch(const Queue& q, const hsa_kernel_dispatch_packet_t& p) {
  const uint32_t dimensions = (p.setup >> HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS) & 0x3;
  if (dimensions == 0) return HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS;  // DIM_INVALID
  const uint64_t work_items =
      uint64_t{p.workgroup_size_x} * p.workgroup_size_y * p.workgroup_size_z;
  if (work_items == 0 || work_items > 1024) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  KernelInfo kernel;
  if (!find_kernel(p.kernel_object, q.agent, &kernel)) {
    return HSA_STATUS_ERROR_INVALID_CODE_OBJECT;  // DISPATCH_CODE_INVALID
  }
  if (take_fault(&Faults::dispatches)) return kApertureViolation;
  const hsa_status_t status = backend::dispatch(q.agent, q.backend, p, kernel);
  if (status == HSA_STATUS_SUCCESS) {
    Counters& c = counters();
    c.dispatches.fetch_add(1);
    std::lock_guard<std::mutex> lock(c.mutex);
    ++c.by_kernel[kernel.name];
  }
  return status;
}

// A barrier-AND waits for every dependency to read 0, a barrier-OR for one
// (none given: done at once). False when the queue stopped meanwhile.
bool wait_barrier(const Queue& q, const hsa_signal_t (&dep_signals)[5], bool any) {
  std::vector<hsa_signal_t> deps;
  for (const hsa_signal_t& dep : dep_signals) {
    if (dep.handle != 0) deps.push_back(dep);
  }
  if (!any) return dependencies_satisfied(deps, true, q.stop);
  if (deps.empty()) return true;
  const std::vector<hsa_signal_condition_t> conditions(deps.size(), HSA_SIGNAL_CONDITION_EQ);
  const std::vector<hsa_signal_value_t> zeros(deps.size(), 0);
  while (!q.stop) {
    hsa_signal_value_t value = 0;
    if (wait_any_signal(uint32_t(deps.size()), deps.data(), conditions.data(), zeros.data(),
                        kPollNs, &value) != UINT32_MAX) {
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
    default:  // vendor-specific and agent-dispatch packets: EC_QUEUE_PACKET_UNSUPPORTED
      *status = HSA_STATUS_ERROR_INVALID_PACKET_FORMAT;
      break;
  }
  return *status == HSA_STATUS_SUCCESS ? Outcome::kDone : Outcome::kFailed;
}

// Runs the packets rung so far (read index up to `rung`), one at a time:
// every packet behaves as if its barrier bit were set, and fences hold.
void run_rung_packets(Queue* q, hsa_signal_value_t rung) {
  while (!q->stop && !q->inactive && rung >= 0) {
    const uint64_t index = q->read_index;
    if (index > static_cast<uint64_t>(rung) || index >= q->write_index) return;
    uint8_t* slot = static_cast<uint8_t*>(q->shared.base_address) +
                    (index & (q->shared.size - 1)) * kPacketBytes;
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
    // Consumed: the slot is free again, then the completion signal (at the
    // same offset in every packet).
    __atomic_store_n(header, uint16_t{HSA_PACKET_TYPE_INVALID}, __ATOMIC_RELEASE);
    q->read_index = index + 1;
    hsa_signal_t completion{0};
    std::memcpy(&completion, packet + offsetof(hsa_kernel_dispatch_packet_t, completion_signal),
                sizeof(completion));
    if (completion.handle != 0) subtract_signal(completion, 1);
  }
}

void run_processor(Queue* q) {
  hsa_signal_value_t seen = kDoorbellIdle;
  hsa_signal_value_t rung = kDoorbellIdle;
  while (!q->stop) {
    wait_signal(q->shared.doorbell_signal, HSA_SIGNAL_CONDITION_NE, seen, kPollNs);
    if (q->stop) return;
    seen = load_signal(q->shared.doorbell_signal);
    rung = std::max(rung, seen);  // producers may ring out of order
    run_rung_packets(q, rung);
  }
}

// Ends the packet processor: it sees `stop` at its next look, which the
// doorbell's change (or a barrier's give-up) brings at once.
void stop_processor(Queue* q) {
  q->stop = true;
  store_signal(q->shared.doorbell_signal, INT64_MAX);
  wake_signal_waiters();
  if (q->processor.joinable()) q->processor.join();
}

void release(Queue* q) {
  backend::queue_stop(q->agent, q->backend);
  q->backend = nullptr;
  destroy_runtime_signal(q->shared.doorbell_signal);
}

// ROCr's checks (hsa_queue_create, then GpuAgent::QueueCreate) up to the
// allocation, with fault injection last.
hsa_status_t check_creation(hsa_agent_t agent, uint32_t size, hsa_queue_type32_t type,
                            uint32_t private_segment_size, uint32_t* index) {
  if (!agent_index(agent, index)) return HSA_STATUS_ERROR_INVALID_AGENT;
  if (!is_gpu(*index)) return HSA_STATUS_ERROR;  // CpuAgent: no packet processor
  if (type == HSA_QUEUE_TYPE_COOPERATIVE) return HSA_STATUS_ERROR_INVALID_QUEUE_CREATION;
  if (size > kQueueMaxSize) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  if (size < kQueueMinSize) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (private_segment_size != UINT_MAX && private_segment_size > kMaxPrivateSegmentSize) {
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  return take_fault(&Faults::queue_creations) ? HSA_STATUS_ERROR_OUT_OF_RESOURCES
                                              : HSA_STATUS_SUCCESS;
}

}  // namespace

void retire_all_queues() {
  std::vector<std::unique_ptr<Queue>> queues;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    for (auto& entry : registry().live) queues.push_back(std::move(entry.second));
    registry().live.clear();
  }
  for (auto& q : queues) {
    stop_processor(q.get());
    release(q.get());
  }
  std::lock_guard<std::mutex> lock(registry().mutex);
  for (auto& q : queues) registry().retired.push_back(std::move(q));
}

uint64_t live_queue_count() {
  std::lock_guard<std::mutex> lock(registry().mutex);
  return registry().live.size();
}

}  // namespace hsa_rt

namespace hsa_rt::api {

hsa_status_t queue_create(hsa_agent_t agent, uint32_t size, hsa_queue_type32_t type,
                          void (*callback)(hsa_status_t, hsa_queue_t*, void*), void* data,
                          uint32_t private_segment_size, uint32_t /*group_segment_size*/,
                          hsa_queue_t** queue) {
  HSA_RT_REQUIRE_READY();
  if (queue == nullptr || size == 0 || (size & (size - 1)) != 0 ||
      type > HSA_QUEUE_TYPE_COOPERATIVE) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  auto q = std::make_unique<Queue>();
  const hsa_status_t checked = check_creation(agent, size, type, private_segment_size, &q->agent);
  if (checked != HSA_STATUS_SUCCESS) return checked;
  {
    // The KFD's limit on queues per device (HSA_AGENT_INFO_QUEUES_MAX).
    std::lock_guard<std::mutex> lock(registry().mutex);
    const auto on_agent = std::count_if(registry().live.begin(), registry().live.end(),
                                        [&](const auto& e) { return e.second->agent == q->agent; });
    if (on_agent >= kQueuesMax) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  // A ring of INVALID-headed packets, as ROCr fills a new queue's.
  q->storage.reset(new (std::nothrow) uint8_t[size_t{size} * kPacketBytes + kPacketBytes]());
  if (q->storage == nullptr) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  auto* ring = reinterpret_cast<uint8_t*>(
      (reinterpret_cast<uintptr_t>(q->storage.get()) + kPacketBytes - 1) & ~(kPacketBytes - 1));
  for (size_t at = 0; at < size_t{size} * kPacketBytes; at += kPacketBytes) {
    const uint16_t invalid = HSA_PACKET_TYPE_INVALID;
    std::memcpy(ring + at, &invalid, sizeof(invalid));
  }
  if (backend::queue_start(q->agent, &q->backend) != HSA_STATUS_SUCCESS) {
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  q->shared.doorbell_signal = create_runtime_signal(kDoorbellIdle);
  q->callback = callback;
  q->callback_data = data;
  q->shared.type = type;
  q->shared.features = HSA_QUEUE_FEATURE_KERNEL_DISPATCH;
  q->shared.base_address = ring;
  q->shared.size = size;
  std::lock_guard<std::mutex> lock(registry().mutex);
  q->shared.id = registry().next_id++;
  Queue* raw = q.get();
  q->processor = std::thread(run_processor, raw);
  *queue = &raw->shared;
  registry().live[&raw->shared] = std::move(q);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t queue_destroy(hsa_queue_t* queue) {
  HSA_RT_REQUIRE_READY();
  if (queue == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  std::unique_ptr<Queue> q;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    auto it = registry().live.find(queue);
    if (it == registry().live.end()) return HSA_STATUS_ERROR_INVALID_QUEUE;
    q = std::move(it->second);
    registry().live.erase(it);
    if (q->processor.get_id() == std::this_thread::get_id()) {
      // From the queue's own error callback: the processor returns once the
      // callback does; its memory stays (retired).
      q->stop = true;
      q->processor.detach();
      release(q.get());
      registry().retired.push_back(std::move(q));
      return HSA_STATUS_SUCCESS;
    }
  }
  stop_processor(q.get());
  release(q.get());
  return HSA_STATUS_SUCCESS;
}

hsa_status_t queue_inactivate(hsa_queue_t* queue) {
  HSA_RT_REQUIRE_READY();
  if (queue == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  const uint64_t found = on_queue(queue, 0, [](Queue& q) {
    q.inactive = true;
    return uint64_t{1};
  });
  return found != 0 ? HSA_STATUS_SUCCESS : HSA_STATUS_ERROR_INVALID_QUEUE;
}

// Every memory-order variant is one function, sequentially consistent.
uint64_t queue_load_read_index(const hsa_queue_t* queue) {
  return on_queue(queue, 0, [](Queue& q) { return q.read_index.load(); });
}

uint64_t queue_load_write_index(const hsa_queue_t* queue) {
  return on_queue(queue, 0, [](Queue& q) { return q.write_index.load(); });
}

void queue_store_write_index(const hsa_queue_t* queue, uint64_t value) {
  on_queue(queue, 0, [&](Queue& q) { return q.write_index = value; });
}

uint64_t queue_cas_write_index(const hsa_queue_t* queue, uint64_t expected, uint64_t value) {
  return on_queue(queue, 0, [&](Queue& q) {
    q.write_index.compare_exchange_strong(expected, value);
    return expected;
  });
}

uint64_t queue_add_write_index(const hsa_queue_t* queue, uint64_t value) {
  return on_queue(queue, 0, [&](Queue& q) { return q.write_index.fetch_add(value); });
}

void queue_store_read_index(const hsa_queue_t* queue, uint64_t value) {
  on_queue(queue, 0, [&](Queue& q) { return q.read_index = value; });
}

}  // namespace hsa_rt::api

// ---- control interface: packets as HIP writes them --------------------------------------

namespace {

// Reserves a slot (waiting while the ring is full), writes the body, then
// publishes header (and setup) with one release store and rings the doorbell.
uint64_t submit(hsa_queue_t* queue, const void* body, uint32_t header_and_setup) {
  // Through the live tables, as an application's calls go (a tool's
  // wrappers see them).
  const CoreApiTable& t = *hsa_rt_core_table();
  const uint64_t index = t.hsa_queue_add_write_index_scacq_screl_fn(queue, 1);
  while (index - t.hsa_queue_load_read_index_scacquire_fn(queue) >= queue->size) {
    std::this_thread::yield();
  }
  auto* packet = static_cast<uint8_t*>(queue->base_address) + (index % queue->size) * 64;
  std::memcpy(packet + 4, static_cast<const uint8_t*>(body) + 4, 60);
  __atomic_store_n(reinterpret_cast<uint32_t*>(packet), header_and_setup, __ATOMIC_RELEASE);
  t.hsa_signal_store_screlease_fn(queue->doorbell_signal, static_cast<hsa_signal_value_t>(index));
  return index;
}

}  // namespace

extern "C" {

uint64_t hsa_rt_submit_dispatch(hsa_queue_t* queue, uint64_t kernel_object, const void* kernarg,
                                uint32_t grid_x, uint16_t workgroup_x, uint32_t group_segment_size,
                                hsa_signal_t completion) {
  hsa_kernel_dispatch_packet_t body{};
  body.workgroup_size_x = workgroup_x;
  body.workgroup_size_y = 1;
  body.workgroup_size_z = 1;
  body.grid_size_x = grid_x;
  body.grid_size_y = 1;
  body.grid_size_z = 1;
  body.group_segment_size = group_segment_size;
  body.kernel_object = kernel_object;
  body.kernarg_address = const_cast<void*>(kernarg);
  body.completion_signal = completion;
  const uint32_t header = (HSA_PACKET_TYPE_KERNEL_DISPATCH << HSA_PACKET_HEADER_TYPE) |
                          (1u << HSA_PACKET_HEADER_BARRIER) |
                          (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE) |
                          (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE);
  const uint32_t setup = 1u << HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS;
  return submit(queue, &body, header | (setup << 16));
}

uint64_t hsa_rt_submit_barrier(hsa_queue_t* queue, bool any, const hsa_signal_t* dependencies,
                               uint32_t count, hsa_signal_t completion) {
  hsa_barrier_and_packet_t body{};  // BARRIER_OR has the same layout
  for (uint32_t i = 0; i < count && i < 5; ++i) body.dep_signal[i] = dependencies[i];
  body.completion_signal = completion;
  const uint32_t type = any ? HSA_PACKET_TYPE_BARRIER_OR : HSA_PACKET_TYPE_BARRIER_AND;
  return submit(queue, &body, (type << HSA_PACKET_HEADER_TYPE) | (1u << HSA_PACKET_HEADER_BARRIER));
}

}  // extern "C"

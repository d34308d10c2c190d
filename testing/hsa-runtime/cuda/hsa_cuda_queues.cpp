// hsa_cuda_queues.cpp: ISAs and AQL queues, so that a tool dispatches its own
// kernels through exactly the HSA calls it makes on ROCm.
//
// ISAs: each GPU agent has one, named after its compute capability,
// "nvptx-nvidia-cuda--sm_90" (ROCr's names read "amdgcn-amd-amdhsa--gfx90a");
// GPUs of one compute capability share the handle, as ROCr's ISA objects are
// shared. The CPU agent has none.
//
// Queues: hsa_queue_create on a GPU agent makes an AQL ring of 64-byte
// packets in host memory, a doorbell signal (from the runtime's signal
// table), read and write indices that the hsa_queue_* index entries access as
// real atomics, a non-blocking CUDA stream in the agent's primary context and
// a packet-processor thread. The processor sleeps on the doorbell (any store
// to it wakes it) and then consumes packets from the read index up to the
// write index, each once its header is no longer INVALID:
//   KERNEL_DISPATCH  cuLaunchKernel of the CUfunction behind kernel_object
//                    (kernel_for_object) with grid_size / workgroup_size
//                    blocks (rounded up) of workgroup_size threads, dynamic
//                    shared memory = group_segment_size less the kernel's
//                    static shared memory, and the kernarg segment as the
//                    parameters: one by-value parameter (kernelParams =
//                    {kernarg_address}) or, for kernels of several,
//                    CU_LAUNCH_PARAM_BUFFER_POINTER with the kernarg bytes;
//   BARRIER_AND      waits on the host until every dependency signal reads 0;
// then an event recorded behind the launch is waited for and the completion
// signal (if any) is decremented. The packet's slot is released (header set
// to INVALID, read index advanced) as soon as it has been copied out, so a
// producer may reuse it while the kernel runs. Packets run one after the
// other, so every packet behaves as if its barrier bit were set (stricter
// than AQL asks, never looser).
//
// Errors: a packet the processor cannot run (unknown kernel_object, a packet
// type other than those two, a zero workgroup size) is
// HSA_STATUS_ERROR_INVALID_PACKET_FORMAT; a launch the driver refuses
// HSA_STATUS_ERROR_OUT_OF_RESOURCES (ROCr's answer to a dispatch the device
// cannot take); a kernel that faults (the event reports
// CUDA_ERROR_ILLEGAL_ADDRESS) HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION, any
// other asynchronous error HSA_STATUS_ERROR_EXCEPTION. The queue's error
// callback is called with that status (no callback: the error is printed),
// the queue stops processing (as ROCr's queue turns inactive) and the
// completion signal is left untouched; ROCr's default handler would abort
// the process instead. The CUDA call's failure is also counted
// (hsa_cuda_cuda_error_count).

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>

#include "hsa_cuda_internal.h"

namespace hsa_cuda {

namespace {

constexpr uint32_t kPacketBytes = 64;
// ROCr's limits for a GPU queue (HSA_AGENT_INFO_QUEUE_MIN_SIZE / MAX_SIZE),
// in packets, and its default number of queues per agent.
constexpr uint32_t kQueueMinSize = 64;
constexpr uint32_t kQueueMaxSize = 131072;
constexpr uint32_t kQueuesMax = 128;
// The doorbell's value before the first ring: no packet index.
constexpr hsa_signal_value_t kDoorbellIdle = -1;
// How long the processor sleeps on the doorbell before it looks again
// (only a safety net: every ring wakes it).
constexpr uint64_t kDoorbellSliceNs = 50u * 1000u * 1000u;

class Processor;

// What a hsa_queue_t* points to: the queue the caller sees first, then the
// indices (standard layout, so the pointer converts both ways).
struct AqlQueue {
  hsa_queue_t queue;
  std::atomic<uint64_t> write_index;
  std::atomic<uint64_t> read_index;
  Processor* processor;
};
static_assert(std::is_standard_layout<AqlQueue>::value, "hsa_queue_t* <-> AqlQueue*");

AqlQueue* aql(const hsa_queue_t* queue) {
  return reinterpret_cast<AqlQueue*>(const_cast<hsa_queue_t*>(queue));
}

using ErrorCallback = void (*)(hsa_status_t status, hsa_queue_t* source, void* data);

class Processor {
 public:
  Processor(uint32_t agent_index, AqlQueue* queue, ErrorCallback callback, void* data)
      : agent_index_(agent_index), queue_(queue), callback_(callback), data_(data) {}
  Processor(const Processor&) = delete;
  Processor& operator=(const Processor&) = delete;

  // Creates the stream, the event and the thread (in the agent's context).
  bool start() {
    ScopedContext scope(gpu_at(agent_index_).context);
    if (!scope.ok() || !HSA_CUDA_CHECK(cu().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING))) {
      return false;
    }
    // Timing off, spinning: the lowest completion latency, and the thread
    // only spins while a kernel of this queue runs.
    if (!HSA_CUDA_CHECK(cu().cuEventCreate(&event_, CU_EVENT_DISABLE_TIMING))) {
      HSA_CUDA_CHECK(cu().cuStreamDestroy(stream_));
      return false;
    }
    try {
      thread_ = std::thread(&Processor::run, this);
    } catch (const std::exception& error) {
      std::fprintf(stderr, "hsa_cuda: cannot start a packet processor: %s\n", error.what());
      HSA_CUDA_CHECK(cu().cuEventDestroy(event_));
      HSA_CUDA_CHECK(cu().cuStreamDestroy(stream_));
      return false;
    }
    return true;
  }

  // Stops the thread (after the packet it is running) and releases the
  // stream and the event.
  void stop() {
    stop_.store(true);
    // Wakes the doorbell wait, and a barrier's wait for its dependencies.
    signal_table().store(queue_->queue.doorbell_signal, INT64_MIN);
    signal_table().wake_waiters();
    if (thread_.joinable()) thread_.join();
    ScopedContext scope(gpu_at(agent_index_).context);
    if (scope.ok()) {
      HSA_CUDA_CHECK(cu().cuEventDestroy(event_));
      HSA_CUDA_CHECK(cu().cuStreamDestroy(stream_));
    }
  }

  void inactivate() { inactive_.store(true); }

 private:
  void run() {
    const bool context_ok = HSA_CUDA_CHECK(cu().cuCtxSetCurrent(gpu_at(agent_index_).context));
    hsa_common::SignalTable& signals = signal_table();
    const hsa_signal_t doorbell = queue_->queue.doorbell_signal;
    while (!stop_.load()) {
      const hsa_signal_value_t rung = signals.load(doorbell);
      if (!inactive_.load()) {
        if (!context_ok) {
          fail(HSA_STATUS_ERROR, "the packet processor has no context");
        } else {
          drain();
        }
      }
      if (stop_.load()) break;
      signals.wait(doorbell, HSA_SIGNAL_CONDITION_NE, rung, kDoorbellSliceNs);
    }
  }

  // Runs every published packet between the read and the write index.
  void drain() {
    const uint32_t size = queue_->queue.size;
    auto* ring = static_cast<unsigned char*>(queue_->queue.base_address);
    while (!inactive_.load() && !stop_.load()) {
      const uint64_t read = queue_->read_index.load(std::memory_order_acquire);
      if (read >= queue_->write_index.load(std::memory_order_acquire)) return;
      unsigned char* slot = ring + (read % size) * kPacketBytes;
      auto* header_word = reinterpret_cast<uint16_t*>(slot);
      const uint16_t header = __atomic_load_n(header_word, __ATOMIC_ACQUIRE);
      const uint32_t type =
          (header >> HSA_PACKET_HEADER_TYPE) & ((1u << HSA_PACKET_HEADER_WIDTH_TYPE) - 1);
      // Reserved but not yet published: the producer rings once it is.
      if (type == HSA_PACKET_TYPE_INVALID) return;
      unsigned char packet[kPacketBytes];
      std::memcpy(packet, slot, kPacketBytes);
      __atomic_store_n(header_word,
                       uint16_t(HSA_PACKET_TYPE_INVALID << HSA_PACKET_HEADER_TYPE),
                       __ATOMIC_RELEASE);
      queue_->read_index.store(read + 1, std::memory_order_release);
      if (type == HSA_PACKET_TYPE_KERNEL_DISPATCH) {
        hsa_kernel_dispatch_packet_t dispatch;
        std::memcpy(&dispatch, packet, sizeof(dispatch));
        if (!run_dispatch(dispatch)) return;
        complete(dispatch.completion_signal);
      } else if (type == HSA_PACKET_TYPE_BARRIER_AND) {
        hsa_barrier_and_packet_t barrier;
        std::memcpy(&barrier, packet, sizeof(barrier));
        std::vector<hsa_signal_t> dependencies;
        for (const hsa_signal_t& dep : barrier.dep_signal) {
          if (dep.handle != 0) dependencies.push_back(dep);
        }
        if (!signal_table().dependencies_satisfied(dependencies, /*block=*/true, stop_)) return;
        complete(barrier.completion_signal);
      } else {
        fail(HSA_STATUS_ERROR_INVALID_PACKET_FORMAT, "a packet type this runtime does not run");
        return;
      }
    }
  }

  bool run_dispatch(const hsa_kernel_dispatch_packet_t& packet) {
    KernelLaunch kernel;
    if (!kernel_for_object(packet.kernel_object, agent_index_, &kernel)) {
      fail(HSA_STATUS_ERROR_INVALID_PACKET_FORMAT, "kernel_object names no loaded kernel");
      return false;
    }
    if (packet.workgroup_size_x == 0 || packet.workgroup_size_y == 0 ||
        packet.workgroup_size_z == 0) {
      fail(HSA_STATUS_ERROR_INVALID_PACKET_FORMAT, "a workgroup size of 0");
      return false;
    }
    const auto blocks = [](uint32_t grid, uint16_t workgroup) {
      return (grid + uint32_t(workgroup) - 1) / uint32_t(workgroup);
    };
    const uint32_t dynamic_shared = packet.group_segment_size > kernel.static_shared
                                        ? packet.group_segment_size - kernel.static_shared
                                        : 0;
    void* kernarg = packet.kernarg_address;
    void* params[1] = {kernarg};
    size_t kernarg_bytes = kernel.kernarg_size;
    void* extra[] = {reinterpret_cast<void*>(uintptr_t{1}) /* CU_LAUNCH_PARAM_BUFFER_POINTER */,
                     kernarg,
                     reinterpret_cast<void*>(uintptr_t{2}) /* CU_LAUNCH_PARAM_BUFFER_SIZE */,
                     &kernarg_bytes, nullptr /* CU_LAUNCH_PARAM_END */};
    void** kernel_params = nullptr;
    void** launch_extra = nullptr;
    if (kernel.param_count > 1) {
      launch_extra = extra;
    } else if (kernel.param_count != 0) {
      // One by-value parameter (or unknown: the library's kernels take one):
      // its bytes are the kernarg segment.
      kernel_params = params;
    }
    const CUresult launched = cu().cuLaunchKernel(
        kernel.function, blocks(packet.grid_size_x, packet.workgroup_size_x),
        blocks(packet.grid_size_y, packet.workgroup_size_y),
        blocks(packet.grid_size_z, packet.workgroup_size_z), packet.workgroup_size_x,
        packet.workgroup_size_y, packet.workgroup_size_z, dynamic_shared, stream_, kernel_params,
        launch_extra);
    const std::string call = "cuLaunchKernel(" + kernel.name + ") for an AQL dispatch";
    if (!cuda_check(launched, call.c_str())) {
      fail(HSA_STATUS_ERROR_OUT_OF_RESOURCES, "the driver refused the launch");
      return false;
    }
    if (!HSA_CUDA_CHECK(cu().cuEventRecord(event_, stream_))) {
      fail(HSA_STATUS_ERROR_EXCEPTION, "cannot record the dispatch's event");
      return false;
    }
    const CUresult finished = cu().cuEventSynchronize(event_);
    if (!cuda_check(finished, "cuEventSynchronize after an AQL dispatch")) {
      // The aperture violation is an AMD extension code (hsa_ext_amd.h).
      fail(finished == CUDA_ERROR_ILLEGAL_ADDRESS
               ? static_cast<hsa_status_t>(HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION)
               : HSA_STATUS_ERROR_EXCEPTION,
           "the kernel failed");
      return false;
    }
    counters().aql_dispatches.fetch_add(1);
    return true;
  }

  void complete(hsa_signal_t completion) {
    if (completion.handle != 0) signal_table().subtract(completion, 1);
  }

  void fail(hsa_status_t status, const char* why) {
    inactive_.store(true);
    if (callback_ == nullptr) {
      std::fprintf(stderr, "hsa_cuda: queue %llu: %s (status %#x); the queue is inactive\n",
                   static_cast<unsigned long long>(queue_->queue.id), why, unsigned(status));
      return;
    }
    callback_(status, &queue_->queue, data_);
  }

  const uint32_t agent_index_;
  AqlQueue* const queue_;
  const ErrorCallback callback_;
  void* const data_;
  CUstream stream_ = nullptr;
  CUevent event_ = nullptr;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> inactive_{false};
};

// Every live queue, by the address the caller holds.
struct QueueRegistry {
  std::mutex mutex;
  std::map<hsa_queue_t*, std::unique_ptr<Processor>> processors;
  uint64_t next_id = 1;
};

QueueRegistry& registry() {
  static QueueRegistry* const state = new QueueRegistry;  // never destroyed
  return *state;
}

// The first GPU with the same ISA as agent_index: the ISA handle's payload.
uint32_t isa_owner(uint32_t agent_index) {
  for (uint32_t i = 1; i < agent_index; ++i) {
    if (gpu_at(i).isa == gpu_at(agent_index).isa) return i;
  }
  return agent_index;
}

bool isa_agent(hsa_isa_t isa, uint32_t* agent_index) {
  uint64_t payload = 0;
  if (!ready() || !decode_handle(isa.handle, kIsaTag, &payload)) return false;
  if (payload > UINT32_MAX || !is_gpu_index(uint32_t(payload)) || payload >= agent_count()) {
    return false;
  }
  *agent_index = uint32_t(payload);
  return true;
}

hsa_isa_t isa_handle(uint32_t agent_index) {
  return hsa_isa_t{make_handle(kIsaTag, isa_owner(agent_index))};
}

// Destroys one queue: the processor first (it reads the ring and the
// doorbell), then the ring, the doorbell and the record.
void destroy_queue(hsa_queue_t* queue, std::unique_ptr<Processor> processor) {
  processor->stop();
  processor.reset();
  signal_table().destroy(queue->doorbell_signal);
  std::free(queue->base_address);
  delete aql(queue);
}

}  // namespace

std::string isa_name(uint32_t agent_index) { return "nvptx-nvidia-cuda--" + gpu_at(agent_index).isa; }

bool write_queue_agent_info(uint32_t agent_index, uint32_t attribute, void* value) {
  if (!is_gpu_index(agent_index)) return false;
  switch (attribute) {
    case HSA_AGENT_INFO_QUEUE_MIN_SIZE:
      write_value(value, kQueueMinSize);
      return true;
    case HSA_AGENT_INFO_QUEUE_MAX_SIZE:
      write_value(value, kQueueMaxSize);
      return true;
    case HSA_AGENT_INFO_QUEUE_TYPE:
      write_value(value, uint32_t{HSA_QUEUE_TYPE_MULTI});
      return true;
    case HSA_AGENT_INFO_QUEUES_MAX:
      write_value(value, kQueuesMax);
      return true;
    case HSA_AGENT_INFO_ISA:
      write_value(value, isa_handle(agent_index));
      return true;
    default:
      return false;
  }
}

void queues_shutdown() {
  QueueRegistry& r = registry();
  std::map<hsa_queue_t*, std::unique_ptr<Processor>> processors;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    processors.swap(r.processors);
  }
  for (auto& entry : processors) destroy_queue(entry.first, std::move(entry.second));
}

uint64_t live_queue_count() {
  QueueRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.processors.size();
}

namespace api {

// ---- ISAs ------------------------------------------------------------------------------------

hsa_status_t agent_iterate_isas(hsa_agent_t agent, hsa_status_t (*callback)(hsa_isa_t, void*),
                                void* data) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (callback == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  uint32_t index = 0;
  if (!agent_index_from_handle(agent, &index)) return HSA_STATUS_ERROR_INVALID_AGENT;
  // The CPU agent has no ISA (as ROCr's CPU agent).
  if (!is_gpu_index(index)) return HSA_STATUS_SUCCESS;
  return callback(isa_handle(index), data);
}

hsa_status_t isa_get_info_alt(hsa_isa_t isa, hsa_isa_info_t attribute, void* value) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  uint32_t index = 0;
  if (!isa_agent(isa, &index)) return HSA_STATUS_ERROR_INVALID_ISA;
  const std::string name = isa_name(index);
  switch (attribute) {
    case HSA_ISA_INFO_NAME_LENGTH:
      // The terminating NUL included, as ROCr counts it.
      write_value(value, uint32_t(name.size() + 1));
      return HSA_STATUS_SUCCESS;
    case HSA_ISA_INFO_NAME:
      std::memcpy(value, name.c_str(), name.size() + 1);
      return HSA_STATUS_SUCCESS;
    case HSA_ISA_INFO_MACHINE_MODELS: {
      bool models[2] = {false, true};  // small, large
      std::memcpy(value, models, sizeof(models));
      return HSA_STATUS_SUCCESS;
    }
    case HSA_ISA_INFO_PROFILES: {
      bool profiles[2] = {true, true};  // base, full
      std::memcpy(value, profiles, sizeof(profiles));
      return HSA_STATUS_SUCCESS;
    }
    case HSA_ISA_INFO_DEFAULT_FLOAT_ROUNDING_MODES: {
      bool modes[3] = {false, false, true};  // default, zero, near
      std::memcpy(value, modes, sizeof(modes));
      return HSA_STATUS_SUCCESS;
    }
    case HSA_ISA_INFO_BASE_PROFILE_DEFAULT_FLOAT_ROUNDING_MODES: {
      bool modes[3] = {false, false, true};
      std::memcpy(value, modes, sizeof(modes));
      return HSA_STATUS_SUCCESS;
    }
    case HSA_ISA_INFO_FAST_F16_OPERATION:
      write_value(value, true);
      return HSA_STATUS_SUCCESS;
    case HSA_ISA_INFO_WORKGROUP_MAX_DIM: {
      const uint16_t dims[3] = {1024, 1024, 64};
      std::memcpy(value, dims, sizeof(dims));
      return HSA_STATUS_SUCCESS;
    }
    case HSA_ISA_INFO_WORKGROUP_MAX_SIZE:
      write_value(value, uint32_t{1024});
      return HSA_STATUS_SUCCESS;
    case HSA_ISA_INFO_GRID_MAX_DIM:
      write_value(value, hsa_dim3_t{UINT32_MAX, UINT32_MAX, UINT32_MAX});
      return HSA_STATUS_SUCCESS;
    case HSA_ISA_INFO_GRID_MAX_SIZE:
      write_value(value, uint32_t{UINT32_MAX});
      return HSA_STATUS_SUCCESS;
    case HSA_ISA_INFO_FBARRIER_MAX_SIZE:
      write_value(value, uint32_t{0});
      return HSA_STATUS_SUCCESS;
    default:
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}

hsa_status_t isa_get_info(hsa_isa_t isa, hsa_isa_info_t attribute, uint32_t index, void* value) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (index != 0) return HSA_STATUS_ERROR_INVALID_INDEX;
  return isa_get_info_alt(isa, attribute, value);
}

hsa_status_t isa_from_name(const char* name, hsa_isa_t* isa) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (name == nullptr || isa == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  for (uint32_t i = 1; i < agent_count(); ++i) {
    if (isa_name(i) == name) {
      *isa = isa_handle(i);
      return HSA_STATUS_SUCCESS;
    }
  }
  return HSA_STATUS_ERROR_INVALID_ISA_NAME;
}

// ---- queues ------------------------------------------------------------------------------------

// ROCr's checks, in its order (hsa_queue_create, then the agent's
// QueueCreate): a NULL out-pointer, a size of 0 or not a power of two, or a
// type past COOPERATIVE: INVALID_ARGUMENT; an unknown agent INVALID_AGENT;
// the CPU agent INVALID_AGENT (it has no queues); a cooperative queue, or a
// size past QUEUE_MAX_SIZE, INVALID_QUEUE_CREATION. A size below
// QUEUE_MIN_SIZE is raised to it. The segment sizes are not used (CUDA
// sizes a launch's memory itself).
hsa_status_t queue_create(hsa_agent_t agent, uint32_t size, hsa_queue_type32_t type,
                          void (*callback)(hsa_status_t status, hsa_queue_t* source, void* data),
                          void* data, uint32_t /*private_segment_size*/,
                          uint32_t /*group_segment_size*/, hsa_queue_t** queue) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  constexpr uint32_t kCooperative = 2;  // HSA_QUEUE_TYPE_COOPERATIVE (not in every header)
  if (queue == nullptr || size == 0 || (size & (size - 1)) != 0 || type > kCooperative) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  uint32_t index = 0;
  if (!agent_index_from_handle(agent, &index) || !is_gpu_index(index)) {
    return HSA_STATUS_ERROR_INVALID_AGENT;
  }
  if (type == kCooperative || size > kQueueMaxSize) return HSA_STATUS_ERROR_INVALID_QUEUE_CREATION;
  size = std::max(size, kQueueMinSize);
  QueueRegistry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (r.processors.size() >= kQueuesMax) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  void* ring = std::aligned_alloc(kPacketBytes, size_t(size) * kPacketBytes);
  if (ring == nullptr) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  // Every slot INVALID, as ROCr hands a ring out.
  for (uint32_t i = 0; i < size; ++i) {
    const uint16_t header = HSA_PACKET_TYPE_INVALID << HSA_PACKET_HEADER_TYPE;
    unsigned char* slot = static_cast<unsigned char*>(ring) + size_t(i) * kPacketBytes;
    std::memset(slot, 0, kPacketBytes);
    std::memcpy(slot, &header, sizeof(header));
  }
  hsa_signal_t doorbell{0};
  if (signal_table().create(kDoorbellIdle, 0, nullptr, &doorbell) != HSA_STATUS_SUCCESS) {
    std::free(ring);
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  auto* created = new AqlQueue;
  created->queue.type = type;
  created->queue.features = HSA_QUEUE_FEATURE_KERNEL_DISPATCH;
  created->queue.base_address = ring;
  created->queue.doorbell_signal = doorbell;
  created->queue.size = size;
  created->queue.reserved1 = 0;
  created->write_index.store(0);
  created->read_index.store(0);
  auto processor = std::make_unique<Processor>(index, created, callback, data);
  created->processor = processor.get();
  if (!processor->start()) {
    signal_table().destroy(doorbell);
    std::free(ring);
    delete created;
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  std::lock_guard<std::mutex> lock(r.mutex);
  created->queue.id = r.next_id++;
  r.processors.emplace(&created->queue, std::move(processor));
  *queue = &created->queue;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t queue_destroy(hsa_queue_t* queue) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (queue == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  std::unique_ptr<Processor> processor;
  {
    QueueRegistry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.processors.find(queue);
    if (it == r.processors.end()) return HSA_STATUS_ERROR_INVALID_QUEUE;
    processor = std::move(it->second);
    r.processors.erase(it);
  }
  destroy_queue(queue, std::move(processor));
  return HSA_STATUS_SUCCESS;
}

hsa_status_t queue_inactivate(hsa_queue_t* queue) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (queue == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  QueueRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.processors.find(queue);
  if (it == r.processors.end()) return HSA_STATUS_ERROR_INVALID_QUEUE;
  it->second->inactivate();
  return HSA_STATUS_SUCCESS;
}

// The index entries, as in ROCr, do not validate the queue: they are plain
// atomics on it (sequentially consistent for every memory-order variant).
uint64_t queue_load_read_index(const hsa_queue_t* queue) { return aql(queue)->read_index.load(); }

uint64_t queue_load_write_index(const hsa_queue_t* queue) {
  return aql(queue)->write_index.load();
}

void queue_store_write_index(const hsa_queue_t* queue, uint64_t value) {
  aql(queue)->write_index.store(value);
}

uint64_t queue_cas_write_index(const hsa_queue_t* queue, uint64_t expected, uint64_t value) {
  aql(queue)->write_index.compare_exchange_strong(expected, value);
  return expected;
}

uint64_t queue_add_write_index(const hsa_queue_t* queue, uint64_t value) {
  return aql(queue)->write_index.fetch_add(value);
}

void queue_store_read_index(const hsa_queue_t* queue, uint64_t value) {
  aql(queue)->read_index.store(value);
}

}  // namespace api

}  // namespace hsa_cuda

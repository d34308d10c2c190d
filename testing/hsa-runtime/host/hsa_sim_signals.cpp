// hsa_sim_signals.cpp: HSA signals and the asynchronous copy engine.
//
// Signals are the host-side signal table shared with HSA-on-CUDA
// (testing/hsa-runtime/common/hsa_common_signals.h): 64-bit values under one lock,
// with waits that re-check their condition on each change. Here they are not
// part of the topology: their handles carry no reset epoch and they survive
// hsa_sim_reset.
//
// hsa_amd_memory_async_copy, hsa_amd_memory_async_copy_on_engine and
// hsa_amd_memory_async_copy_rect (argument checks shared with HSA-on-CUDA)
// queue a job for one background thread, which waits until every dependency
// signal reads 0, checks and performs the copy under the state lock, then
// subtracts 1 from the completion signal, as the ROCr copy engines do. A
// linear copy is one row; a rect copy is range.y * range.z rows of range.x
// bytes, all checked before any is copied.
//
// hsa_amd_signal_async_handler is the shared table's
// (hsa_common::SignalTable::async_handler).

#include <condition_variable>
#include <cstring>
#include <deque>
#include <thread>

#include "hsa_common_signals.h"
#include "hsa_sim_internal.h"

namespace hsa_sim {

namespace {

// ---- signal table -----------------------------------------------------------

// Signal handles carry no reset epoch (signals outlive hsa_sim_reset):
// tag:8 | serial:56.
uint64_t signal_handle(uint64_t serial) {
  return (uint64_t{static_cast<uint8_t>(HandleTag::kSignal)} << 56) | serial;
}

// Consumers are validated under the state lock, all in one topology.
hsa_status_t check_consumers(uint32_t num_consumers, const hsa_agent_t* consumers) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return hsa_common::check_consumer_list(num_consumers, consumers, [&](hsa_agent_t agent) {
    uint32_t index = 0;
    return agent_index_from_handle_locked(s, agent, &index);
  });
}

hsa_common::SignalTable& signals() {
  // Never deleted, like State: waits may still run while the process exits.
  static hsa_common::SignalTable* const table = new hsa_common::SignalTable(
      hsa_common::SignalTable::Hooks{nullptr, check_consumers, signal_handle});
  return *table;
}

using Entries = hsa_common::SignalEntries<signals>;

// ---- async copy queue -------------------------------------------------------

// A copy (copy_agent: the source agent if it is a GPU, else the destination
// agent if it is a GPU, else the CPU; a rect copy's copy_agent argument) and
// whether it is to fail. A rect copy keeps its geometry; dst, src and size
// then describe its first row.
struct AsyncJob : hsa_common::AsyncCopy {
  bool inject_error = false;  // hsa_sim_fail_nth_async_copy_completion
  bool rect = false;
  hsa_common::RectGeometry geometry;

  uint64_t rows() const { return rect ? geometry.rows() : 1; }
  void* dst_row(uint64_t row) const { return rect ? geometry.dst_row(row) : dst; }
  const void* src_row(uint64_t row) const { return rect ? geometry.src_row(row) : src; }
};

enum class CopyOutcome { kCopied, kViolation, kFailed };

struct AsyncQueue {
  std::mutex mutex;
  std::condition_variable work_ready;
  std::condition_variable idle;
  std::deque<AsyncJob> jobs;  // the front job stays queued until it is done
  bool worker_started = false;
  std::atomic<bool> draining{false};
};

AsyncQueue& async_queue() {
  static AsyncQueue* const queue = new AsyncQueue;
  return *queue;
}

// Blocks until every dependency reads 0. Returns false when a reset is
// draining the queue and a dependency is still not 0. A destroyed dependency
// counts as satisfied (an unknown one also as an invalid signal use).
bool wait_for_dependencies(const AsyncJob& job) {
  return signals().dependencies_satisfied(job.dependencies, /*block=*/true,
                                          async_queue().draining);
}

// In strict mode, whether the copying agent can reach both buffers, as the
// hsa_amd_memory_async_copy documentation requires (a DMA engine touching
// memory not mapped for it faults on real hardware).
bool copy_agent_reaches_both_locked(const State& s, uint32_t copy_agent, const void* dst,
                                    const void* src) {
  return !s.strict_async_access || (agent_can_access_locked(s, copy_agent, dst) &&
                                    agent_can_access_locked(s, copy_agent, src));
}

// Checks every row at execution time, when the memory may have been freed
// since submission, and copies under the state lock like hsa_memory_copy.
// One bad row makes the whole copy a violation: nothing is copied.
CopyOutcome execute_copy(const AsyncJob& job) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  hsa_sim_copy_direction_t direction = HSA_SIM_COPY_HOST_TO_HOST;
  for (uint64_t row = 0; row < job.rows(); ++row) {
    const Side dst_side =
        classify_range_locked(s, job.dst_row(row), job.size, CopyRole::kDestination);
    const Side src_side = classify_range_locked(s, job.src_row(row), job.size, CopyRole::kSource);
    if (dst_side == Side::kViolation || src_side == Side::kViolation ||
        !copy_agent_reaches_both_locked(s, job.copy_agent, job.dst_row(row), job.src_row(row))) {
      ++s.counters.violations;
      return CopyOutcome::kViolation;
    }
    if (row == 0) direction = direction_of(src_side, dst_side);
  }
  ++s.counters.copies[direction];
  if (job.inject_error) return CopyOutcome::kFailed;
  for (uint64_t row = 0; row < job.rows(); ++row) {
    std::memmove(engine_address_locked(s, job.dst_row(row)),
                 engine_address_locked(s, job.src_row(row)), job.size);
  }
  return CopyOutcome::kCopied;
}

[[noreturn]] void async_worker_main() {
  AsyncQueue& queue = async_queue();
  for (;;) {
    AsyncJob job;
    {
      std::unique_lock<std::mutex> lock(queue.mutex);
      queue.work_ready.wait(lock, [&] { return !queue.jobs.empty(); });
      job = queue.jobs.front();
    }
    if (wait_for_dependencies(job)) {
      // A failure sets the completion signal to -1, as ROCr reports an error
      // during a copy; completion is signalled even after a violation (which
      // copied nothing), so a caller waiting on it does not hang; the
      // violation counter records the failure.
      signals().complete_copy(job.completion, execute_copy(job) != CopyOutcome::kFailed);
    }
    {
      std::lock_guard<std::mutex> lock(queue.mutex);
      queue.jobs.pop_front();
      if (queue.jobs.empty()) queue.idle.notify_all();
    }
  }
}

void enqueue_async_copy(AsyncJob job) {
  AsyncQueue& queue = async_queue();
  {
    std::lock_guard<std::mutex> lock(queue.mutex);
    queue.jobs.push_back(std::move(job));
    if (!queue.worker_started) {
      // Detached: a thread blocked in a wait must not keep the process from
      // exiting, and nothing it touches is ever destroyed.
      std::thread(async_worker_main).detach();
      queue.worker_started = true;
    }
  }
  queue.work_ready.notify_one();
}

// Fault injection and accounting for a submission that passed validation.
// Returns SUCCESS when the job may be queued.
hsa_status_t admit_async_copy(AsyncJob* job) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Faults& faults = s.faults;
  if (faults.async_fail_at != 0 && ++faults.async_seen == faults.async_fail_at) {
    faults.async_fail_at = 0;
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  // hsa_sim_fail_h2d_copy_into also covers asynchronous host-to-device
  // copies (a rect copy: any of its rows): they are refused at submission,
  // leaving the signal untouched.
  for (uint64_t row = 0; row < job->rows(); ++row) {
    if (h2d_fault_covers_locked(s, job->dst_row(row), job->size) &&
        classify_range_locked(s, job->src_row(row), job->size, CopyRole::kSource) ==
            Side::kHost &&
        classify_range_locked(s, job->dst_row(row), job->size, CopyRole::kDestination) ==
            Side::kDevice) {
      ++s.counters.copies[HSA_SIM_COPY_HOST_TO_DEVICE];
      return HSA_STATUS_ERROR;
    }
  }
  ++s.counters.async_copies;
  if (faults.async_error_at != 0 && ++faults.async_error_seen == faults.async_error_at) {
    faults.async_error_at = 0;
    job->inject_error = true;
  }
  // hsa_sim_fail_copies_into / _from: accepted, then fails while executing.
  for (uint64_t row = 0; row < job->rows() && !job->inject_error; ++row) {
    if (copy_fault_covers_locked(s, job->dst_row(row), job->src_row(row), job->size)) {
      job->inject_error = true;
    }
  }
  return HSA_STATUS_SUCCESS;
}

// Counts a violation found by an argument check (a NULL side).
void count_violation() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  ++s.counters.violations;
}

// Admits and queues a job that passed its argument checks.
hsa_status_t submit(AsyncJob job) {
  const hsa_status_t admitted = admit_async_copy(&job);
  if (admitted != HSA_STATUS_SUCCESS) return admitted;
  enqueue_async_copy(std::move(job));
  return HSA_STATUS_SUCCESS;
}

// Resolves both agents of a copy, in one topology.
bool resolve_agents(hsa_agent_t dst_agent, hsa_agent_t src_agent, uint32_t* dst,
                    uint32_t* src) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return agent_index_from_handle_locked(s, dst_agent, dst) &&
         agent_index_from_handle_locked(s, src_agent, src);
}

bool resolve_agent(hsa_agent_t agent, uint32_t* index) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return agent_index_from_handle_locked(s, agent, index);
}

}  // namespace

// ---- shared -----------------------------------------------------------------

void drain_async_copies() {
  AsyncQueue& queue = async_queue();
  {
    std::lock_guard<std::mutex> lock(queue.mutex);
    if (queue.jobs.empty()) return;
    queue.draining.store(true);
  }
  // Orders the store above before the worker's next predicate check, so the
  // notification cannot be missed.
  signals().wake_waiters();
  std::unique_lock<std::mutex> lock(queue.mutex);
  queue.idle.wait(lock, [&] { return queue.jobs.empty(); });
  queue.draining.store(false);
}

uint64_t live_signal_count() { return signals().live_count(); }

hsa_common::SignalTable& signal_table() { return signals(); }

uint64_t armed_signal_handler_count() { return signals().armed_handler_count(); }

uint64_t invalid_signal_uses() { return signals().invalid_uses(); }

void reset_signal_counters() { signals().reset_invalid_uses(); }

}  // namespace hsa_sim

namespace hsa_sim::api {

hsa_status_t amd_memory_async_copy(void* dst, hsa_agent_t dst_agent, const void* src,
                                   hsa_agent_t src_agent, size_t size, uint32_t num_dep_signals,
                                   const hsa_signal_t* dep_signals,
                                   hsa_signal_t completion_signal) {
  AsyncJob job;
  const hsa_status_t checked = hsa_common::check_async_copy(
      signals(), dst, dst_agent, src, src_agent, size, num_dep_signals, dep_signals,
      completion_signal, kCpuAgentIndex, count_violation, resolve_agents, &job);
  // size 0: success without touching the completion signal, as ROCr (a
  // caller that waits on it after size 0 waits forever there too).
  if (checked != HSA_STATUS_SUCCESS || job.size == 0) return checked;
  return submit(std::move(job));
}

#if HSA_COMMON_HAVE_VMEM
hsa_status_t amd_memory_async_copy_on_engine(void* dst, hsa_agent_t dst_agent, const void* src,
                                             hsa_agent_t src_agent, size_t size,
                                             uint32_t num_dep_signals,
                                             const hsa_signal_t* dep_signals,
                                             hsa_signal_t completion_signal,
                                             hsa_amd_sdma_engine_id_t engine_id,
                                             bool force_copy_on_sdma) {
  (void)force_copy_on_sdma;  // which engine copies changes nothing here
  AsyncJob job;
  const hsa_status_t checked = hsa_common::check_async_copy(
      signals(), dst, dst_agent, src, src_agent, size, num_dep_signals, dep_signals,
      completion_signal, kCpuAgentIndex, count_violation, resolve_agents, &job);
  if (checked != HSA_STATUS_SUCCESS || job.size == 0) return checked;
  const hsa_status_t engine = hsa_common::check_copy_engine(static_cast<uint32_t>(engine_id),
                                                            job.copy_agent, kSdmaEngineCount);
  if (engine != HSA_STATUS_SUCCESS) return engine;
  return submit(std::move(job));
}
#endif

hsa_status_t amd_memory_async_copy_rect(const hsa_pitched_ptr_t* dst,
                                        const hsa_dim3_t* dst_offset,
                                        const hsa_pitched_ptr_t* src,
                                        const hsa_dim3_t* src_offset, const hsa_dim3_t* range,
                                        hsa_agent_t copy_agent, hsa_amd_copy_direction_t dir,
                                        uint32_t num_dep_signals,
                                        const hsa_signal_t* dep_signals,
                                        hsa_signal_t completion_signal) {
  hsa_common::AsyncRectCopy rect;
  const hsa_status_t checked = hsa_common::check_async_copy_rect(
      signals(), dst, dst_offset, src, src_offset, range, copy_agent, dir, num_dep_signals,
      dep_signals, completion_signal, count_violation, resolve_agent, &rect);
  // A zero range: success without touching the completion signal, as ROCr.
  if (checked != HSA_STATUS_SUCCESS || rect.empty) return checked;
  AsyncJob job;
  job.rect = true;
  job.geometry = rect.geometry;
  job.dst = rect.geometry.dst_row(0);
  job.src = rect.geometry.src_row(0);
  job.size = rect.geometry.row_bytes();
  job.dependencies = std::move(rect.dependencies);
  job.completion = rect.completion;
  job.copy_agent = rect.copy_agent;
  return submit(std::move(job));
}

}  // namespace hsa_sim::api

namespace hsa_sim {

void fill_signal_core_entries(CoreApiTable* core) { Entries::fill_core(core); }

void fill_signal_amd_entries(AmdExtTable* amd) { Entries::fill_amd(amd); }

}  // namespace hsa_sim

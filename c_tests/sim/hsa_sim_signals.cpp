// hsa_sim_signals.cpp: HSA signals and the asynchronous copy engine.
//
// A signal is a 64-bit value guarded by one lock shared by all signals, with
// one condition variable that every change notifies; waits (including the
// copy worker's wait for dependencies) re-check their condition on each
// change. Signals are not part of the topology: they survive hsa_sim_reset.
//
// hsa_amd_memory_async_copy queues a job for one background thread, which
// waits until every dependency signal reads 0, checks and performs the copy
// under the state lock, then subtracts 1 from the completion signal, as the
// ROCr copy engines do.

#include <hsa_api_trace.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <thread>
#include <unordered_map>

#include "hsa_sim_internal.h"

namespace hsa_sim {

namespace {

// ---- signal table -----------------------------------------------------------

struct SignalSlot {
  hsa_signal_value_t value = 0;
  bool destroyed = false;
};

struct SignalTable {
  std::mutex mutex;
  std::condition_variable changed;
  std::unordered_map<uint64_t, std::shared_ptr<SignalSlot>> live;
  uint64_t next_serial = 1;
  std::atomic<uint64_t> invalid_uses{0};
  // Threads blocked on `changed`; a signal update only notifies when there
  // are any (real signals are plain memory: an update with nobody waiting
  // costs a store, and so should it here).
  uint32_t waiters = 0;
};

// Blocks on table.changed until done() (or the deadline), counted in waiters.
template <typename Done>
void wait_counted(SignalTable& table, std::unique_lock<std::mutex>& lock, bool has_deadline,
                  std::chrono::steady_clock::time_point deadline, Done done) {
  ++table.waiters;
  if (has_deadline) {
    table.changed.wait_until(lock, deadline, done);
  } else {
    table.changed.wait(lock, done);
  }
  --table.waiters;
}

SignalTable& signals() {
  // Never deleted, like State: waits may still run while the process exits.
  static SignalTable* const table = new SignalTable;
  return *table;
}

// The slot of a live signal, or null (counted as an invalid use). Caller holds
// the table lock.
std::shared_ptr<SignalSlot> find_slot_locked(SignalTable& table, hsa_signal_t signal) {
  auto it = table.live.find(signal.handle);
  if (it != table.live.end()) return it->second;
  table.invalid_uses.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

// As find_slot_locked, without taking a reference: for an operation that
// finishes before the table lock is released.
SignalSlot* find_raw_slot_locked(SignalTable& table, hsa_signal_t signal) {
  auto it = table.live.find(signal.handle);
  if (it != table.live.end()) return it->second.get();
  table.invalid_uses.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

bool signal_is_live(hsa_signal_t signal) {
  SignalTable& table = signals();
  std::lock_guard<std::mutex> lock(table.mutex);
  return table.live.count(signal.handle) != 0;
}

bool condition_holds(hsa_signal_condition_t condition, hsa_signal_value_t value,
                     hsa_signal_value_t compare) {
  switch (condition) {
    case HSA_SIGNAL_CONDITION_EQ:
      return value == compare;
    case HSA_SIGNAL_CONDITION_NE:
      return value != compare;
    case HSA_SIGNAL_CONDITION_LT:
      return value < compare;
    case HSA_SIGNAL_CONDITION_GTE:
      return value >= compare;
  }
  return false;
}

// Applies update to the signal's value under the lock, wakes every waiter and
// returns the value before the update (0 for an unknown signal).
template <typename Update>
hsa_signal_value_t modify_signal(hsa_signal_t signal, Update update) {
  SignalTable& table = signals();
  hsa_signal_value_t previous = 0;
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(table.mutex);
    SignalSlot* slot = find_raw_slot_locked(table, signal);
    if (slot == nullptr) return 0;
    previous = slot->value;
    slot->value = update(previous);
    wake = table.waiters > 0;
  }
  if (wake) table.changed.notify_all();
  return previous;
}

hsa_signal_value_t load_signal(hsa_signal_t signal) {
  SignalTable& table = signals();
  std::lock_guard<std::mutex> lock(table.mutex);
  SignalSlot* slot = find_raw_slot_locked(table, signal);
  return slot ? slot->value : 0;
}

hsa_status_t create_signal(hsa_signal_value_t initial_value, uint32_t num_consumers,
                           const hsa_agent_t* consumers, hsa_signal_t* signal) {
  if (signal == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (num_consumers > 0 && consumers == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    std::set<uint64_t> seen;
    for (uint32_t i = 0; i < num_consumers; ++i) {
      uint32_t index = 0;
      if (!agent_index_from_handle_locked(s, consumers[i], &index)) {
        return HSA_STATUS_ERROR_INVALID_AGENT;
      }
      // ROCr rejects a consumer listed twice.
      if (!seen.insert(consumers[i].handle).second) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    }
  }
  SignalTable& table = signals();
  std::lock_guard<std::mutex> lock(table.mutex);
  auto slot = std::make_shared<SignalSlot>();
  slot->value = initial_value;
  const uint64_t serial = table.next_serial++;
  const uint64_t handle = (uint64_t{static_cast<uint8_t>(HandleTag::kSignal)} << 56) | serial;
  table.live.emplace(handle, std::move(slot));
  signal->handle = handle;
  return HSA_STATUS_SUCCESS;
}

using Clock = std::chrono::steady_clock;

// The deadline for a timeout hint in system timestamp ticks (nanoseconds);
// false when the wait is unbounded.
bool deadline_for(uint64_t timeout_hint, Clock::time_point* deadline) {
  // Anything beyond about a century is treated as "forever", which also
  // keeps the time_point arithmetic from overflowing.
  constexpr uint64_t kForeverNs = uint64_t{100} * 365 * 24 * 3600 * kTimestampFrequencyHz;
  if (timeout_hint >= kForeverNs) return false;
  *deadline = Clock::now() + std::chrono::nanoseconds(timeout_hint);
  return true;
}

// hsa_signal_wait_*: returns the value that satisfied the condition, or the
// current value when the timeout (an upper bound here) expires. A signal
// destroyed while waited on ends the wait.
hsa_signal_value_t wait_signal(hsa_signal_t signal, hsa_signal_condition_t condition,
                               hsa_signal_value_t compare_value, uint64_t timeout_hint,
                               hsa_wait_state_t /*wait_state_hint*/) {
  SignalTable& table = signals();
  std::unique_lock<std::mutex> lock(table.mutex);
  // Fast path: already satisfied, no reference needed.
  SignalSlot* raw = find_raw_slot_locked(table, signal);
  if (raw == nullptr) return 0;
  if (condition_holds(condition, raw->value, compare_value)) return raw->value;
  // The slot must outlive a destroy that happens while we sleep.
  std::shared_ptr<SignalSlot> slot = table.live.find(signal.handle)->second;
  auto done = [&] {
    return slot->destroyed || condition_holds(condition, slot->value, compare_value);
  };
  Clock::time_point deadline;
  const bool has_deadline = deadline_for(timeout_hint, &deadline);
  wait_counted(table, lock, has_deadline, deadline, done);
  return slot->value;
}

// hsa_amd_signal_wait_any: the index of the first satisfied signal-condition
// pair, or UINT32_MAX when the timeout expires first. Unknown signals are
// skipped (as recent ROCr does); with none left the wait ends at once.
uint32_t wait_any_signal(uint32_t signal_count, hsa_signal_t* hsa_signals,
                         hsa_signal_condition_t* conds, hsa_signal_value_t* values,
                         uint64_t timeout_hint, hsa_wait_state_t /*wait_hint*/,
                         hsa_signal_value_t* satisfying_value) {
  constexpr uint32_t kNone = UINT32_MAX;
  if (signal_count == 0 || hsa_signals == nullptr || conds == nullptr || values == nullptr) {
    return kNone;
  }
  SignalTable& table = signals();
  std::unique_lock<std::mutex> lock(table.mutex);
  std::vector<std::shared_ptr<SignalSlot>> slots;
  for (uint32_t i = 0; i < signal_count; ++i) {
    slots.push_back(find_slot_locked(table, hsa_signals[i]));
  }
  uint32_t satisfied = kNone;
  auto done = [&] {
    bool any_live = false;
    for (uint32_t i = 0; i < signal_count; ++i) {
      if (!slots[i] || slots[i]->destroyed) continue;
      any_live = true;
      if (condition_holds(conds[i], slots[i]->value, values[i])) {
        satisfied = i;
        return true;
      }
    }
    return !any_live;
  };
  Clock::time_point deadline;
  const bool has_deadline = deadline_for(timeout_hint, &deadline);
  wait_counted(table, lock, has_deadline, deadline, done);
  if (satisfied != kNone && satisfying_value != nullptr) {
    *satisfying_value = slots[satisfied]->value;
  }
  return satisfied;
}

// ---- entry points -----------------------------------------------------------

hsa_status_t signal_create(hsa_signal_value_t initial_value, uint32_t num_consumers,
                           const hsa_agent_t* consumers, hsa_signal_t* signal) {
  return create_signal(initial_value, num_consumers, consumers, signal);
}

hsa_status_t amd_signal_create(hsa_signal_value_t initial_value, uint32_t num_consumers,
                               const hsa_agent_t* consumers, uint64_t /*attributes*/,
                               hsa_signal_t* signal) {
  // Attributes (IPC, GPU-only) select ROCr's signal implementation; every
  // signal here behaves the same.
  return create_signal(initial_value, num_consumers, consumers, signal);
}

hsa_status_t signal_destroy(hsa_signal_t signal) {
  if (signal.handle == 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  SignalTable& table = signals();
  {
    std::lock_guard<std::mutex> lock(table.mutex);
    auto it = table.live.find(signal.handle);
    if (it == table.live.end()) return HSA_STATUS_ERROR_INVALID_SIGNAL;
    it->second->destroyed = true;
    table.live.erase(it);
  }
  table.changed.notify_all();
  return HSA_STATUS_SUCCESS;
}

hsa_signal_value_t signal_load(hsa_signal_t signal) { return load_signal(signal); }

void signal_store(hsa_signal_t signal, hsa_signal_value_t value) {
  modify_signal(signal, [value](hsa_signal_value_t) { return value; });
}

hsa_signal_value_t signal_exchange(hsa_signal_t signal, hsa_signal_value_t value) {
  return modify_signal(signal, [value](hsa_signal_value_t) { return value; });
}

hsa_signal_value_t signal_cas(hsa_signal_t signal, hsa_signal_value_t expected,
                              hsa_signal_value_t value) {
  return modify_signal(signal, [expected, value](hsa_signal_value_t current) {
    return current == expected ? value : current;
  });
}

// Arithmetic wraps like the hardware's 64-bit atomics instead of overflowing.
hsa_signal_value_t wrapping_add(hsa_signal_value_t a, hsa_signal_value_t b) {
  return static_cast<hsa_signal_value_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}

void signal_add(hsa_signal_t signal, hsa_signal_value_t value) {
  modify_signal(signal, [value](hsa_signal_value_t v) { return wrapping_add(v, value); });
}

void signal_subtract(hsa_signal_t signal, hsa_signal_value_t value) {
  modify_signal(signal, [value](hsa_signal_value_t v) {
    return static_cast<hsa_signal_value_t>(static_cast<uint64_t>(v) -
                                           static_cast<uint64_t>(value));
  });
}

void signal_and(hsa_signal_t signal, hsa_signal_value_t value) {
  modify_signal(signal, [value](hsa_signal_value_t v) { return v & value; });
}

void signal_or(hsa_signal_t signal, hsa_signal_value_t value) {
  modify_signal(signal, [value](hsa_signal_value_t v) { return v | value; });
}

void signal_xor(hsa_signal_t signal, hsa_signal_value_t value) {
  modify_signal(signal, [value](hsa_signal_value_t v) { return v ^ value; });
}

// ---- async copy queue -------------------------------------------------------

struct AsyncJob {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t size = 0;
  std::vector<hsa_signal_t> dependencies;
  hsa_signal_t completion{0};
  // The agent whose engine performs the copy: ROCr uses the source agent if
  // it is a GPU, else the destination agent if it is a GPU, else the CPU.
  uint32_t copy_agent = kCpuAgentIndex;
  bool inject_error = false;  // hsa_sim_fail_nth_async_copy_completion
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
// counts as satisfied (and as an invalid signal use).
bool wait_for_dependencies(const AsyncJob& job) {
  SignalTable& table = signals();
  AsyncQueue& queue = async_queue();
  std::unique_lock<std::mutex> lock(table.mutex);
  std::vector<std::shared_ptr<SignalSlot>> slots;
  for (hsa_signal_t dependency : job.dependencies) {
    if (std::shared_ptr<SignalSlot> slot = find_slot_locked(table, dependency)) {
      slots.push_back(std::move(slot));
    }
  }
  auto satisfied = [&] {
    for (const auto& slot : slots) {
      if (!slot->destroyed && slot->value != 0) return false;
    }
    return true;
  };
  wait_counted(table, lock, false, {}, [&] { return satisfied() || queue.draining.load(); });
  return satisfied();
}

// In strict mode, whether the copying agent can reach both buffers, as the
// hsa_amd_memory_async_copy documentation requires (a DMA engine touching
// memory not mapped for it faults on real hardware).
bool copy_agent_reaches_both_locked(const State& s, const AsyncJob& job) {
  return !s.strict_async_access || (agent_can_access_locked(s, job.copy_agent, job.dst) &&
                                    agent_can_access_locked(s, job.copy_agent, job.src));
}

// Checks both ranges at execution time, when the memory may have been freed
// since submission, and copies under the state lock like hsa_memory_copy.
CopyOutcome execute_copy(const AsyncJob& job) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const Side dst_side = classify_range_locked(s, job.dst, job.size);
  const Side src_side = classify_range_locked(s, job.src, job.size);
  if (dst_side == Side::kViolation || src_side == Side::kViolation ||
      !copy_agent_reaches_both_locked(s, job)) {
    ++s.counters.violations;
    return CopyOutcome::kViolation;
  }
  ++s.counters.copies[direction_of(src_side, dst_side)];
  if (job.inject_error) return CopyOutcome::kFailed;
  std::memmove(job.dst, job.src, job.size);
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
      if (execute_copy(job) == CopyOutcome::kFailed) {
        // ROCr reports an error during the copy by setting the completion
        // signal to a negative value.
        signal_store(job.completion, -1);
      } else {
        // Completion is signalled even after a violation (which copied
        // nothing), so a caller waiting on it does not hang; the violation
        // counter records the failure.
        signal_subtract(job.completion, 1);
      }
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
  // copies: they are refused at submission, leaving the signal untouched.
  if (h2d_fault_covers_locked(s, job->dst, job->size) &&
      classify_range_locked(s, job->src, job->size) == Side::kHost &&
      classify_range_locked(s, job->dst, job->size) == Side::kDevice) {
    ++s.counters.copies[HSA_SIM_COPY_HOST_TO_DEVICE];
    return HSA_STATUS_ERROR;
  }
  ++s.counters.async_copies;
  if (faults.async_error_at != 0 && ++faults.async_error_seen == faults.async_error_at) {
    faults.async_error_at = 0;
    job->inject_error = true;
  }
  // hsa_sim_fail_copies_into / _from: accepted, then fails while executing.
  if (copy_fault_covers_locked(s, job->dst, job->src, job->size)) job->inject_error = true;
  return HSA_STATUS_SUCCESS;
}

// Resolves both agents and picks the one whose engine copies (see AsyncJob).
bool resolve_copy_agent(hsa_agent_t dst_agent, hsa_agent_t src_agent, uint32_t* copy_agent) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  uint32_t dst = 0;
  uint32_t src = 0;
  if (!agent_index_from_handle_locked(s, dst_agent, &dst) ||
      !agent_index_from_handle_locked(s, src_agent, &src)) {
    return false;
  }
  *copy_agent = is_gpu_index(src) ? src : is_gpu_index(dst) ? dst : kCpuAgentIndex;
  return true;
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
  {
    // Taking the signal lock orders the store above before the worker's next
    // predicate check, so the notification cannot be missed.
    SignalTable& table = signals();
    std::lock_guard<std::mutex> lock(table.mutex);
  }
  signals().changed.notify_all();
  std::unique_lock<std::mutex> lock(queue.mutex);
  queue.idle.wait(lock, [&] { return queue.jobs.empty(); });
  queue.draining.store(false);
}

uint64_t live_signal_count() {
  SignalTable& table = signals();
  std::lock_guard<std::mutex> lock(table.mutex);
  return table.live.size();
}

uint64_t invalid_signal_uses() { return signals().invalid_uses.load(); }

void reset_signal_counters() { signals().invalid_uses.store(0); }

}  // namespace hsa_sim

namespace hsa_sim::api {

hsa_status_t amd_memory_async_copy(void* dst, hsa_agent_t dst_agent, const void* src,
                                   hsa_agent_t src_agent, size_t size, uint32_t num_dep_signals,
                                   const hsa_signal_t* dep_signals,
                                   hsa_signal_t completion_signal) {
  if (dst == nullptr || src == nullptr) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    ++s.counters.violations;
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  if ((num_dep_signals == 0) != (dep_signals == nullptr)) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  uint32_t copy_agent = kCpuAgentIndex;
  if (!resolve_copy_agent(dst_agent, src_agent, &copy_agent)) {
    return HSA_STATUS_ERROR_INVALID_AGENT;
  }
  for (uint32_t i = 0; i < num_dep_signals; ++i) {
    if (!signal_is_live(dep_signals[i])) return HSA_STATUS_ERROR_INVALID_SIGNAL;
  }
  if (!signal_is_live(completion_signal)) return HSA_STATUS_ERROR_INVALID_SIGNAL;
  // ROCr returns success for an empty copy without touching the completion
  // signal, so a caller that waits on it after size 0 waits forever there too.
  if (size == 0) return HSA_STATUS_SUCCESS;
  AsyncJob job;
  job.dst = dst;
  job.src = src;
  job.size = size;
  job.dependencies.assign(dep_signals, dep_signals + num_dep_signals);
  job.completion = completion_signal;
  job.copy_agent = copy_agent;
  const hsa_status_t admitted = admit_async_copy(&job);
  if (admitted != HSA_STATUS_SUCCESS) return admitted;
  enqueue_async_copy(std::move(job));
  return HSA_STATUS_SUCCESS;
}

}  // namespace hsa_sim::api

namespace hsa_sim {

void fill_signal_core_entries(CoreApiTable* core) {
  // Memory-order variants share one implementation: every operation is
  // sequentially consistent under the signal lock, which satisfies all of them.
  core->hsa_signal_create_fn = signal_create;
  core->hsa_signal_destroy_fn = signal_destroy;
  core->hsa_signal_load_relaxed_fn = signal_load;
  core->hsa_signal_load_scacquire_fn = signal_load;
  core->hsa_signal_store_relaxed_fn = signal_store;
  core->hsa_signal_store_screlease_fn = signal_store;
  core->hsa_signal_silent_store_relaxed_fn = signal_store;
  core->hsa_signal_silent_store_screlease_fn = signal_store;
  core->hsa_signal_wait_relaxed_fn = wait_signal;
  core->hsa_signal_wait_scacquire_fn = wait_signal;

  core->hsa_signal_and_relaxed_fn = signal_and;
  core->hsa_signal_and_scacquire_fn = signal_and;
  core->hsa_signal_and_screlease_fn = signal_and;
  core->hsa_signal_and_scacq_screl_fn = signal_and;
  core->hsa_signal_or_relaxed_fn = signal_or;
  core->hsa_signal_or_scacquire_fn = signal_or;
  core->hsa_signal_or_screlease_fn = signal_or;
  core->hsa_signal_or_scacq_screl_fn = signal_or;
  core->hsa_signal_xor_relaxed_fn = signal_xor;
  core->hsa_signal_xor_scacquire_fn = signal_xor;
  core->hsa_signal_xor_screlease_fn = signal_xor;
  core->hsa_signal_xor_scacq_screl_fn = signal_xor;
  core->hsa_signal_add_relaxed_fn = signal_add;
  core->hsa_signal_add_scacquire_fn = signal_add;
  core->hsa_signal_add_screlease_fn = signal_add;
  core->hsa_signal_add_scacq_screl_fn = signal_add;
  core->hsa_signal_subtract_relaxed_fn = signal_subtract;
  core->hsa_signal_subtract_scacquire_fn = signal_subtract;
  core->hsa_signal_subtract_screlease_fn = signal_subtract;
  core->hsa_signal_subtract_scacq_screl_fn = signal_subtract;
  core->hsa_signal_exchange_relaxed_fn = signal_exchange;
  core->hsa_signal_exchange_scacquire_fn = signal_exchange;
  core->hsa_signal_exchange_screlease_fn = signal_exchange;
  core->hsa_signal_exchange_scacq_screl_fn = signal_exchange;
  core->hsa_signal_cas_relaxed_fn = signal_cas;
  core->hsa_signal_cas_scacquire_fn = signal_cas;
  core->hsa_signal_cas_screlease_fn = signal_cas;
  core->hsa_signal_cas_scacq_screl_fn = signal_cas;
}

void fill_signal_amd_entries(AmdExtTable* amd) {
  amd->hsa_amd_signal_create_fn = amd_signal_create;
  amd->hsa_amd_signal_wait_any_fn = wait_any_signal;
  amd->hsa_amd_memory_async_copy_fn = api::amd_memory_async_copy;
}

}  // namespace hsa_sim

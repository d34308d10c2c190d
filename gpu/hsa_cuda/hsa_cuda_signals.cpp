// hsa_cuda_signals.cpp: HSA signals (host-side 64-bit values) and the
// asynchronous copy engines.
//
// A signal is a 64-bit value under one lock shared by all signals, with one
// condition variable that every change notifies; waits re-check their
// condition on each change and honour the timeout hint. Signals belong to
// the runtime's lifetime: hsa_cuda_shutdown destroys them all.
//
// hsa_amd_memory_async_copy hands a job to the copy engine of the copying
// agent (the source agent if it is a GPU, else the destination agent if it
// is a GPU, else the first GPU), each a pair of threads over one
// non-blocking stream in that GPU's primary context:
//   the submitter takes jobs in order, waits on the host until every
//   dependency signal reads 0 (as a barrier packet in front of the copy
//   would), checks both ranges and enqueues cuMemcpyAsync on the stream; one
//   event is recorded behind each burst of copies enqueued together;
//   the completer waits for those events in order and then decrements the
//   completion signal by one, or stores -1 when the driver reports an error,
//   as ROCr reports an error during a copy. Its events spin rather than
//   sleep (lower completion latency, as ROCr's copy completion busy-waits
//   first), and only while copies are in flight: an idle completer waits on a
//   condition variable. Events are recycled through a small pool.
// Copies therefore overlap with the host and with each other's submission,
// and complete in submission order per engine.

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include <hsa/hsa_api_trace.h>

#include "hsa_cuda_internal.h"

namespace hsa_cuda {

namespace {

// ---- signal table -------------------------------------------------------------------

struct SignalSlot {
  hsa_signal_value_t value = 0;
  bool destroyed = false;
};

struct SignalTable {
  std::mutex mutex;
  std::condition_variable changed;
  std::unordered_map<uint64_t, std::shared_ptr<SignalSlot>> live;
  uint64_t next_serial = 1;
};

SignalTable& signals() {
  // Never destroyed: a waiter may still be blocked while the process exits.
  static SignalTable* const table = new SignalTable;
  return *table;
}

// Set while the runtime shuts down: dependency waits of queued copies give up.
std::atomic<bool> g_abandon_waits{false};

std::shared_ptr<SignalSlot> find_slot_locked(SignalTable& table, hsa_signal_t signal) {
  auto it = table.live.find(signal.handle);
  return it == table.live.end() ? nullptr : it->second;
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

// Applies update under the lock, wakes every waiter and returns the value
// before the update (0 for an unknown signal, which is left alone).
template <typename Update>
hsa_signal_value_t modify_signal(hsa_signal_t signal, Update update) {
  SignalTable& table = signals();
  hsa_signal_value_t previous = 0;
  {
    std::lock_guard<std::mutex> lock(table.mutex);
    std::shared_ptr<SignalSlot> slot = find_slot_locked(table, signal);
    if (!slot) return 0;
    previous = slot->value;
    slot->value = update(previous);
  }
  table.changed.notify_all();
  return previous;
}

// Arithmetic wraps like the hardware's 64-bit atomics instead of overflowing.
hsa_signal_value_t wrapping_add(hsa_signal_value_t a, hsa_signal_value_t b) {
  return static_cast<hsa_signal_value_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}

hsa_signal_value_t signal_load(hsa_signal_t signal) {
  SignalTable& table = signals();
  std::lock_guard<std::mutex> lock(table.mutex);
  std::shared_ptr<SignalSlot> slot = find_slot_locked(table, signal);
  return slot ? slot->value : 0;
}

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

hsa_status_t create_signal(hsa_signal_value_t initial_value, uint32_t num_consumers,
                           const hsa_agent_t* consumers, hsa_signal_t* signal) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (signal == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (num_consumers > 0 && consumers == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  std::set<uint64_t> seen;
  for (uint32_t i = 0; i < num_consumers; ++i) {
    uint32_t index = 0;
    if (!agent_index_from_handle(consumers[i], &index)) return HSA_STATUS_ERROR_INVALID_AGENT;
    // ROCr rejects a consumer listed twice.
    if (!seen.insert(consumers[i].handle).second) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  SignalTable& table = signals();
  std::lock_guard<std::mutex> lock(table.mutex);
  auto slot = std::make_shared<SignalSlot>();
  slot->value = initial_value;
  const uint64_t handle = make_handle(HandleTag::kSignal, table.next_serial++);
  table.live.emplace(handle, std::move(slot));
  signal->handle = handle;
  return HSA_STATUS_SUCCESS;
}

using Clock = std::chrono::steady_clock;

// The deadline for a timeout hint in system timestamp ticks (nanoseconds);
// false when the wait is unbounded.
bool deadline_for(uint64_t timeout_hint, Clock::time_point* deadline) {
  // Beyond about a century is "forever"; that also keeps the time_point
  // arithmetic from overflowing.
  constexpr uint64_t kForeverNs = uint64_t{100} * 365 * 24 * 3600 * kTimestampFrequencyHz;
  if (timeout_hint >= kForeverNs) return false;
  *deadline = Clock::now() + std::chrono::nanoseconds(timeout_hint);
  return true;
}

// hsa_signal_wait_*: the value that satisfied the condition, or the current
// value when the timeout (an upper bound here) expires. A signal destroyed
// while waited on ends the wait.
hsa_signal_value_t wait_signal(hsa_signal_t signal, hsa_signal_condition_t condition,
                               hsa_signal_value_t compare_value, uint64_t timeout_hint,
                               hsa_wait_state_t /*wait_state_hint*/) {
  SignalTable& table = signals();
  std::unique_lock<std::mutex> lock(table.mutex);
  std::shared_ptr<SignalSlot> slot = find_slot_locked(table, signal);
  if (!slot) return 0;
  auto done = [&] {
    return slot->destroyed || condition_holds(condition, slot->value, compare_value);
  };
  Clock::time_point deadline;
  if (deadline_for(timeout_hint, &deadline)) {
    table.changed.wait_until(lock, deadline, done);
  } else {
    table.changed.wait(lock, done);
  }
  return slot->value;
}

// hsa_amd_signal_wait_any: the index of the first satisfied pair, or
// UINT32_MAX when the timeout expires first. Unknown signals are skipped;
// with none left the wait ends at once.
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
  if (deadline_for(timeout_hint, &deadline)) {
    table.changed.wait_until(lock, deadline, done);
  } else {
    table.changed.wait(lock, done);
  }
  if (satisfied != kNone && satisfying_value != nullptr) {
    *satisfying_value = slots[satisfied]->value;
  }
  return satisfied;
}

// Whether every dependency reads 0 (a destroyed one counts as satisfied):
// with block, waits until they do and answers false only when the runtime is
// shutting down and one still is not; without, answers at once.
bool wait_for_dependencies(const std::vector<hsa_signal_t>& dependencies, bool block) {
  if (dependencies.empty()) return true;
  SignalTable& table = signals();
  std::unique_lock<std::mutex> lock(table.mutex);
  std::vector<std::shared_ptr<SignalSlot>> slots;
  for (hsa_signal_t dependency : dependencies) {
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
  if (block) table.changed.wait(lock, [&] { return satisfied() || g_abandon_waits.load(); });
  return satisfied();
}

// ---- copy engines ---------------------------------------------------------------------

struct AsyncJob {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t size = 0;
  std::vector<hsa_signal_t> dependencies;
  hsa_signal_t completion{0};
};

// A burst of copies and the event recorded behind it.
struct InFlight {
  CUevent event = nullptr;
  std::vector<hsa_signal_t> completions;
};

// Success decrements the completion signal; a driver error stores -1.
void complete(hsa_signal_t completion, bool ok) {
  if (ok) {
    signal_subtract(completion, 1);
  } else {
    signal_store(completion, -1);
  }
}

class CopyEngine {
 public:
  explicit CopyEngine(uint32_t agent_index) : agent_index_(agent_index) {}
  CopyEngine(const CopyEngine&) = delete;
  CopyEngine& operator=(const CopyEngine&) = delete;

  hsa_status_t submit(AsyncJob job) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (stopping_) return HSA_STATUS_ERROR_NOT_INITIALIZED;
    // Started on first use: a program that never copies asynchronously
    // (kernel-replay today) gets no threads and no streams.
    if (!started_ && !start(lock)) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
    pending_.push_back(std::move(job));
    lock.unlock();
    cv_.notify_all();
    return HSA_STATUS_SUCCESS;
  }

  // Runs what is queued (copies whose dependencies will never be satisfied
  // are dropped, see g_abandon_waits), waits for every copy, joins the
  // threads and destroys the stream.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      if (!started_) return;
    }
    cv_.notify_all();
    submitter_.join();
    completer_.join();
    ScopedContext scope(gpu_at(agent_index_).context);
    if (scope.ok()) {
      for (CUevent event : idle_events_) HSA_CUDA_CHECK(cu().cuEventDestroy(event));
      HSA_CUDA_CHECK(cu().cuStreamDestroy(stream_));
    }
    idle_events_.clear();
    stream_ = nullptr;
    started_ = false;
  }

 private:
  // Creates the stream and the two threads; called with the engine's lock
  // held (released only to wind back a half-started engine).
  bool start(std::unique_lock<std::mutex>& lock) {
    ScopedContext scope(gpu_at(agent_index_).context);
    // Non-blocking: the engine must not serialise with the legacy default
    // stream that hsa_memory_copy and the application use; ordering with
    // them is expressed through signals, as in HSA.
    if (!scope.ok() || !HSA_CUDA_CHECK(cu().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING))) {
      return false;
    }
    bool submitter_running = false;
    try {
      submitter_ = std::thread(&CopyEngine::submit_loop, this);
      submitter_running = true;
      completer_ = std::thread(&CopyEngine::complete_loop, this);
    } catch (const std::exception& error) {
      std::fprintf(stderr, "hsa_cuda: cannot start the copy engine of agent %u: %s\n",
                   agent_index_, error.what());
      if (submitter_running) {
        // The submitter waits on this lock: let it see stopping_ and leave.
        stopping_ = true;
        lock.unlock();
        cv_.notify_all();
        submitter_.join();
        lock.lock();
        stopping_ = false;
        submitter_done_ = false;
      }
      HSA_CUDA_CHECK(cu().cuStreamDestroy(stream_));
      stream_ = nullptr;
      return false;
    }
    started_ = true;
    return true;
  }

  void submit_loop() {
    // Each engine thread works in its GPU's context for its whole life.
    const bool context_ok = HSA_CUDA_CHECK(cu().cuCtxSetCurrent(gpu_at(agent_index_).context));
    for (;;) {
      std::deque<AsyncJob> batch;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return !pending_.empty() || stopping_; });
        if (pending_.empty()) break;
        batch.swap(pending_);
      }
      // Everything queued is enqueued back to back and one event follows the
      // burst: copies on one stream complete in order, so that event
      // completes all of them, and a burst of small copies costs one event
      // and one completer wake-up instead of one each.
      std::vector<hsa_signal_t> enqueued;
      for (AsyncJob& job : batch) {
        if (!wait_for_dependencies(job.dependencies, /*block=*/false)) {
          // About to block: what is enqueued must be able to complete first
          // (a dependency may be the completion of one of those copies).
          flush(&enqueued);
          // Dropped at shutdown: its completion signal is left untouched.
          if (!wait_for_dependencies(job.dependencies, /*block=*/true)) continue;
        }
        CopyPlan plan;
        if (!plan_async_copy(job.dst, job.src, job.size, &plan)) {
          // As in the software runtime: counted as a violation, nothing is
          // copied, and the completion is still signalled so that a waiter
          // does not hang.
          signal_subtract(job.completion, 1);
          continue;
        }
        if (!context_ok || !HSA_CUDA_CHECK(cu().cuMemcpyAsync(CUdeviceptr(job.dst),
                                                               CUdeviceptr(job.src), job.size,
                                                               stream_))) {
          signal_store(job.completion, -1);
          continue;
        }
        enqueued.push_back(job.completion);
      }
      flush(&enqueued);
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      submitter_done_ = true;
    }
    cv_.notify_all();
  }

  // Records one event behind the copies enqueued since the last flush and
  // hands their completion signals to the completer.
  void flush(std::vector<hsa_signal_t>* enqueued) {
    if (enqueued->empty()) return;
    std::vector<hsa_signal_t> completions;
    completions.swap(*enqueued);
    CUevent event = take_event();
    if (event != nullptr && !HSA_CUDA_CHECK(cu().cuEventRecord(event, stream_))) {
      HSA_CUDA_CHECK(cu().cuEventDestroy(event));
      event = nullptr;
    }
    if (event == nullptr) {
      // Without an event, wait here: slower, still correct.
      const bool ok = HSA_CUDA_CHECK(cu().cuStreamSynchronize(stream_));
      for (hsa_signal_t completion : completions) complete(completion, ok);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      in_flight_.push_back(InFlight{event, std::move(completions)});
    }
    cv_.notify_all();
  }

  // An event for one burst: a recycled one, or a new one (timing off: the
  // event only orders, and untimed events are cheaper to record).
  CUevent take_event() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!idle_events_.empty()) {
        CUevent event = idle_events_.back();
        idle_events_.pop_back();
        return event;
      }
    }
    CUevent event = nullptr;
    return HSA_CUDA_CHECK(cu().cuEventCreate(&event, CU_EVENT_DISABLE_TIMING)) ? event : nullptr;
  }

  void give_back_event(CUevent event) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (idle_events_.size() < kIdleEventsMax) {
      idle_events_.push_back(event);
      return;
    }
    HSA_CUDA_CHECK(cu().cuEventDestroy(event));
  }

  void complete_loop() {
    HSA_CUDA_CHECK(cu().cuCtxSetCurrent(gpu_at(agent_index_).context));
    for (;;) {
      InFlight copy;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return !in_flight_.empty() || submitter_done_; });
        if (in_flight_.empty()) break;
        copy = std::move(in_flight_.front());
        in_flight_.pop_front();
      }
      const bool ok = HSA_CUDA_CHECK(cu().cuEventSynchronize(copy.event));
      if (ok) {
        give_back_event(copy.event);
      } else {
        HSA_CUDA_CHECK(cu().cuEventDestroy(copy.event));
      }
      for (hsa_signal_t completion : copy.completions) complete(completion, ok);
    }
  }

  const uint32_t agent_index_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<AsyncJob> pending_;
  std::deque<InFlight> in_flight_;
  static constexpr size_t kIdleEventsMax = 256;
  std::vector<CUevent> idle_events_;
  bool started_ = false;
  bool stopping_ = false;
  bool submitter_done_ = false;
  CUstream stream_ = nullptr;
  std::thread submitter_;
  std::thread completer_;
};

// One engine per GPU (index i serves agent i + 1). Built at init, emptied at
// shutdown; read by async copies in between, so it needs no lock.
std::vector<std::unique_ptr<CopyEngine>>* const g_engines =
    new std::vector<std::unique_ptr<CopyEngine>>;

// ---- entry points ----------------------------------------------------------------------

hsa_status_t signal_create(hsa_signal_value_t initial_value, uint32_t num_consumers,
                           const hsa_agent_t* consumers, hsa_signal_t* signal) {
  return create_signal(initial_value, num_consumers, consumers, signal);
}

hsa_status_t amd_signal_create(hsa_signal_value_t initial_value, uint32_t num_consumers,
                               const hsa_agent_t* consumers, uint64_t /*attributes*/,
                               hsa_signal_t* signal) {
  // Attributes (IPC, AMD_GPU_ONLY) select ROCr's signal implementation; every
  // signal here is a host value.
  return create_signal(initial_value, num_consumers, consumers, signal);
}

hsa_status_t signal_destroy(hsa_signal_t signal) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
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

hsa_status_t amd_memory_async_copy(void* dst, hsa_agent_t dst_agent, const void* src,
                                   hsa_agent_t src_agent, size_t size, uint32_t num_dep_signals,
                                   const hsa_signal_t* dep_signals,
                                   hsa_signal_t completion_signal) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (dst == nullptr || src == nullptr) {
    counters().violations.fetch_add(1, std::memory_order_relaxed);
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  if ((num_dep_signals == 0) != (dep_signals == nullptr)) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  uint32_t dst_index = 0;
  uint32_t src_index = 0;
  if (!agent_index_from_handle(dst_agent, &dst_index) ||
      !agent_index_from_handle(src_agent, &src_index)) {
    return HSA_STATUS_ERROR_INVALID_AGENT;
  }
  for (uint32_t i = 0; i < num_dep_signals; ++i) {
    if (!signal_is_live(dep_signals[i])) return HSA_STATUS_ERROR_INVALID_SIGNAL;
  }
  if (!signal_is_live(completion_signal)) return HSA_STATUS_ERROR_INVALID_SIGNAL;
  // ROCr returns success for an empty copy without touching the completion
  // signal.
  if (size == 0) return HSA_STATUS_SUCCESS;
  // The copying agent, as ROCr picks the engine.
  const uint32_t engine_agent =
      is_gpu_index(src_index) ? src_index : is_gpu_index(dst_index) ? dst_index : 1;
  AsyncJob job;
  job.dst = dst;
  job.src = src;
  job.size = size;
  job.dependencies.assign(dep_signals, dep_signals + num_dep_signals);
  job.completion = completion_signal;
  const hsa_status_t status = (*g_engines)[engine_agent - 1]->submit(std::move(job));
  if (status == HSA_STATUS_SUCCESS) {
    counters().async_copies.fetch_add(1, std::memory_order_relaxed);
  }
  return status;
}

}  // namespace

// ---- shared ----------------------------------------------------------------------------

void signals_start(uint32_t gpus) {
  g_abandon_waits.store(false);
  g_engines->clear();
  for (uint32_t i = 0; i < gpus; ++i) g_engines->push_back(std::make_unique<CopyEngine>(i + 1));
}

void signals_shutdown() {
  SignalTable& table = signals();
  g_abandon_waits.store(true);
  {
    // Taking the lock orders the store before any waiter's next check, so
    // the notification cannot be missed.
    std::lock_guard<std::mutex> lock(table.mutex);
  }
  table.changed.notify_all();
  for (auto& engine : *g_engines) engine->stop();
  g_engines->clear();
  {
    std::lock_guard<std::mutex> lock(table.mutex);
    for (auto& entry : table.live) entry.second->destroyed = true;
    table.live.clear();
  }
  table.changed.notify_all();
  g_abandon_waits.store(false);
}

uint64_t live_signal_count() {
  SignalTable& table = signals();
  std::lock_guard<std::mutex> lock(table.mutex);
  return table.live.size();
}

void fill_signal_core_entries(CoreApiTable* core) {
  // Memory-order variants share one implementation: every operation is
  // sequentially consistent under the signal lock, which satisfies them all.
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
  amd->hsa_amd_memory_async_copy_fn = amd_memory_async_copy;
}

}  // namespace hsa_cuda

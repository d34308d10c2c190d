// signals.cpp: HSA signals as host-side 64-bit values, async handlers, and
// the asynchronous copies (linear, on an engine, rect): their argument
// checks, fault injection, and the copy engines that run them (see hsa_rt.h).
//
// A signal is a value under one lock shared by all signals, with one
// condition variable every change notifies when someone waits; waits
// (including an engine's wait for a copy's dependencies) re-check their
// condition on each change. A use of a signal that does not exist is
// counted; such a load or wait returns 0 and a store does nothing.
//
// Each copy engine (backend::engine_count(); the host backend has one, the
// CUDA backend one per GPU) is a thread that takes its copies in submission
// order, waits until every dependency reads 0, checks each row against the
// memory as it is then, and hands the copy to the backend, which performs it
// (host) or enqueues it and completes it later (CUDA). Threads here are
// detached and never joined: the tables and signals are never destroyed, and
// a thread blocked in a wait must not keep the process from exiting.

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <set>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "runtime.h"

namespace hsa_rt {

namespace {

using Clock = std::chrono::steady_clock;

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

// The deadline of a timeout hint; false when the wait is unbounded (beyond
// about a century, which also keeps the arithmetic from overflowing).
bool deadline_for(uint64_t timeout_ns, Clock::time_point* deadline) {
  constexpr uint64_t kForeverNs = uint64_t{100} * 365 * 24 * 3600 * kTimestampHz;
  if (timeout_ns >= kForeverNs) return false;
  *deadline = Clock::now() + std::chrono::nanoseconds(timeout_ns);
  return true;
}

struct Slot {
  hsa_signal_value_t value = 0;
  bool destroyed = false;
  bool runtime = false;  // a queue's doorbell: not counted as live
};

struct AsyncHandler {
  std::shared_ptr<Slot> slot;
  hsa_signal_condition_t condition = HSA_SIGNAL_CONDITION_EQ;
  hsa_signal_value_t value = 0;
  hsa_amd_signal_handler handler = nullptr;
  void* arg = nullptr;
};

struct Signals {
  std::mutex mutex;
  std::condition_variable changed;
  std::unordered_map<uint64_t, std::shared_ptr<Slot>> live;
  uint64_t next_serial = 1;
  std::atomic<uint64_t> invalid_uses{0};
  // Threads blocked on `changed`: an update only notifies when there are any.
  uint32_t waiters = 0;
  std::vector<AsyncHandler> handlers;  // armed, in arming order
  uint32_t handlers_running = 0;
  bool handler_thread = false;
};

Signals& table() {
  static Signals* const signals = new Signals;  // never destroyed
  return *signals;
}

// The slot of a live signal, or null (counted as an invalid use); under the lock.
std::shared_ptr<Slot> find_locked(Signals& t, hsa_signal_t signal) {
  auto it = t.live.find(signal.handle);
  if (it != t.live.end()) return it->second;
  t.invalid_uses.fetch_add(1);
  return nullptr;
}

// Applies update under the lock, wakes the waiters, returns the value before.
template <typename Update>
hsa_signal_value_t modify(hsa_signal_t signal, Update update) {
  Signals& t = table();
  hsa_signal_value_t previous = 0;
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    std::shared_ptr<Slot> slot = find_locked(t, signal);
    if (slot == nullptr) return 0;
    previous = slot->value;
    slot->value = update(previous);
    wake = t.waiters > 0;
  }
  if (wake) t.changed.notify_all();
  return previous;
}

template <typename Done>
void wait_counted(Signals& t, std::unique_lock<std::mutex>& lock, bool has_deadline,
                  Clock::time_point deadline, Done done) {
  ++t.waiters;
  if (has_deadline) {
    t.changed.wait_until(lock, deadline, done);
  } else {
    t.changed.wait(lock, done);
  }
  --t.waiters;
}

hsa_status_t create(hsa_signal_value_t value, uint32_t num_consumers, const hsa_agent_t* consumers,
                    hsa_signal_t* signal, bool runtime) {
  if (!runtime) HSA_RT_REQUIRE_READY();
  if (signal == nullptr || (num_consumers > 0 && consumers == nullptr)) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  // ROCr's consumer check: the first unknown agent INVALID_AGENT, one listed
  // twice INVALID_ARGUMENT, whichever comes first.
  std::set<uint64_t> seen;
  for (uint32_t i = 0; i < num_consumers; ++i) {
    uint32_t index = 0;
    if (!agent_index(consumers[i], &index)) return HSA_STATUS_ERROR_INVALID_AGENT;
    if (!seen.insert(consumers[i].handle).second) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  Signals& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto slot = std::make_shared<Slot>();
  slot->value = value;
  slot->runtime = runtime;
  signal->handle = make_handle(Tag::kSignal, t.next_serial++);
  t.live.emplace(signal->handle, std::move(slot));
  return HSA_STATUS_SUCCESS;
}

hsa_status_t destroy(hsa_signal_t signal) {
  if (signal.handle == 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  Signals& t = table();
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    auto it = t.live.find(signal.handle);
    if (it == t.live.end()) return HSA_STATUS_ERROR_INVALID_SIGNAL;
    it->second->destroyed = true;
    t.live.erase(it);
  }
  t.changed.notify_all();
  return HSA_STATUS_SUCCESS;
}

bool is_live(hsa_signal_t signal) {
  Signals& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  return t.live.count(signal.handle) != 0;
}

// The handler thread: waits until an armed handler's condition holds, calls
// it without the lock, re-arms it when it returns true. Never returns.
[[noreturn]] void run_async_handlers() {
  Signals& t = table();
  std::unique_lock<std::mutex> lock(t.mutex);
  for (;;) {
    size_t ready = 0;
    // Drops the handlers of destroyed signals, finds the first that fires.
    auto find_ready = [&] {
      t.handlers.erase(std::remove_if(t.handlers.begin(), t.handlers.end(),
                                      [](const AsyncHandler& h) { return h.slot->destroyed; }),
                       t.handlers.end());
      for (ready = 0; ready < t.handlers.size(); ++ready) {
        const AsyncHandler& h = t.handlers[ready];
        if (condition_holds(h.condition, h.slot->value, h.value)) return true;
      }
      return false;
    };
    wait_counted(t, lock, false, {}, find_ready);
    AsyncHandler armed = std::move(t.handlers[ready]);
    t.handlers.erase(t.handlers.begin() + static_cast<std::ptrdiff_t>(ready));
    const hsa_signal_value_t observed = armed.slot->value;
    ++t.handlers_running;
    lock.unlock();
    const bool again = armed.handler(observed, armed.arg);
    lock.lock();
    --t.handlers_running;
    if (again && !armed.slot->destroyed) t.handlers.push_back(std::move(armed));
  }
}

// ---- the copy engines -------------------------------------------------------------------

struct Engine {
  std::mutex mutex;
  std::condition_variable work, idle;
  std::deque<AsyncJob> jobs;  // the front job stays queued until it is done
  bool started = false;
  std::atomic<bool> draining{false};
};

std::mutex g_engines_mutex;
std::vector<std::unique_ptr<Engine>>* const g_engines = new std::vector<std::unique_ptr<Engine>>;

Engine& engine(uint32_t index) {
  std::lock_guard<std::mutex> lock(g_engines_mutex);
  while (g_engines->size() <= index) g_engines->push_back(std::make_unique<Engine>());
  return *(*g_engines)[index];
}

// Checks every row at execution time (the memory may have been freed since
// submission) and hands the copy to the backend, under the memory lock. One
// bad row (or, in strict mode, a buffer the copying agent cannot reach)
// makes the whole copy one violation: nothing is copied.
backend::Queued execute(uint32_t index, const AsyncJob& job) {
  SharedLock lock(memory_mutex());
  CopyPlan plan;
  const bool strict = mode(HSA_RT_MODE_STRICT_ASYNC_ACCESS);
  const char* what = job.rect ? "hsa_amd_memory_async_copy_rect" : "hsa_amd_memory_async_copy";
  for (uint64_t row = 0; row < job.rows(); ++row) {
    CopyPlan row_plan;
    void* dst = job.dst_row(row);
    const void* src = job.src_row(row);
    if (!plan_copy_locked(what, dst, src, job.size, &row_plan)) return backend::Queued::kDone;
    if (strict && !(agent_can_access_locked(job.copy_agent, dst) &&
                    agent_can_access_locked(job.copy_agent, src))) {
      count_violation(what, dst, src, job.size, "copying agent",
                      "cannot reach both buffers (strict async access)");
      return backend::Queued::kDone;
    }
    if (row == 0) plan = row_plan;
  }
  count_copy(plan, job.rows() * job.size);
  if (job.inject_error) return backend::Queued::kFailed;
  // A GPU's engine reads and writes SVM memory through its page tables.
  if (is_gpu(job.copy_agent)) {
    for (uint64_t row = 0; row < job.rows(); ++row) {
      svm_access(job.copy_agent, job.dst_row(row), job.size);
      svm_access(job.copy_agent, job.src_row(row), job.size);
    }
  }
  return backend::async_copy(index, job, plan);
}

[[noreturn]] void run_engine(uint32_t index) {
  Engine& e = engine(index);
  for (;;) {
    AsyncJob job;
    {
      std::unique_lock<std::mutex> lock(e.mutex);
      e.work.wait(lock, [&] { return !e.jobs.empty(); });
      job = e.jobs.front();
    }
    // About to block: what the backend holds must be able to complete first
    // (a dependency may be the completion of one of those copies). A reset
    // draining the engine drops a copy whose dependencies are not 0 (its
    // completion signal untouched).
    bool satisfied = dependencies_satisfied(job.dependencies, false, e.draining);
    if (!satisfied) {
      backend::flush(index);
      satisfied = dependencies_satisfied(job.dependencies, true, e.draining);
    }
    if (satisfied) {
      // A violation still completes (copied nothing), so a waiter does not
      // hang; a failure stores -1.
      const backend::Queued queued = execute(index, job);
      if (queued != backend::Queued::kLater) {
        complete_copy(job.completion, queued == backend::Queued::kDone);
      }
    }
    std::lock_guard<std::mutex> lock(e.mutex);
    e.jobs.pop_front();
    if (e.jobs.empty()) {
      backend::flush(index);
      e.idle.notify_all();
    }
  }
}

// Admits a job that passed its argument checks (fault injection, the
// accepted count) and queues it on its copying agent's engine.
hsa_status_t submit(AsyncJob job) {
  const uint32_t index = backend::engine_of(job.copy_agent);
  // The rows moving host memory into device memory, for
  // HSA_RT_FAULT_H2D_COPY_INTO (the memory lock is never taken under the
  // faults' lock).
  std::vector<bool> h2d(job.rows(), false);
  if (with_faults([](Faults& f) { return !f.h2d_into.empty(); })) {
    SharedLock lock(memory_mutex());
    for (uint64_t row = 0; row < job.rows(); ++row) {
      uint32_t owner = 0;
      const char* why = "";
      h2d[row] =
          classify_locked(job.src_row(row), job.size, Role::kSource, &owner, &why) == Side::kHost &&
          classify_locked(job.dst_row(row), job.size, Role::kDestination, &owner, &why) ==
              Side::kDevice;
    }
  }
  const hsa_status_t admitted = with_faults([&](Faults& f) {
    if (nth_fault(&f.async_at, &f.async_seen)) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
    // A host-to-device copy into an address of HSA_RT_FAULT_H2D_COPY_INTO
    // (a rect copy: any row) is refused at submission.
    for (uint64_t row = 0; row < job.rows(); ++row) {
      if (h2d[row] && covers(f.h2d_into, job.dst_row(row), job.size)) {
        counters().copies[1].fetch_add(1);
        return HSA_STATUS_ERROR;
      }
    }
    counters().async_copies.fetch_add(1);
    job.inject_error = nth_fault(&f.async_error_at, &f.async_error_seen);
    // HSA_RT_FAULT_COPIES_INTO / _FROM: accepted, then fails while executing.
    for (uint64_t row = 0; row < job.rows() && !job.inject_error; ++row) {
      job.inject_error = covers(f.copies_into, job.dst_row(row), job.size) ||
                         covers(f.copies_from, job.src_row(row), job.size);
    }
    return HSA_STATUS_SUCCESS;
  });
  if (admitted != HSA_STATUS_SUCCESS) return admitted;
  Engine& e = engine(index);
  {
    std::lock_guard<std::mutex> lock(e.mutex);
    e.jobs.push_back(std::move(job));
    if (!e.started) {
      try {
        std::thread(run_engine, index).detach();
      } catch (const std::system_error&) {
        e.jobs.pop_back();
        return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
      }
      e.started = true;
    }
  }
  e.work.notify_one();
  return HSA_STATUS_SUCCESS;
}

// The checks every async copy starts with: dependencies given without a
// count or the reverse INVALID_ARGUMENT; an unknown dependency or completion
// signal INVALID_SIGNAL.
hsa_status_t check_signals(uint32_t count, const hsa_signal_t* deps, hsa_signal_t completion,
                           bool* bad_signal) {
  *bad_signal = false;
  if ((count == 0) != (deps == nullptr)) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  for (uint32_t i = 0; i < count; ++i) *bad_signal = *bad_signal || !is_live(deps[i]);
  *bad_signal = *bad_signal || !is_live(completion);
  return HSA_STATUS_SUCCESS;
}

// hsa_amd_memory_async_copy's checks, in ROCr's order; job->size 0: nothing
// to do (ROCr answers success without touching the completion signal).
hsa_status_t check_linear(void* dst, hsa_agent_t dst_agent, const void* src, hsa_agent_t src_agent,
                          size_t size, uint32_t num_deps, const hsa_signal_t* deps,
                          hsa_signal_t completion, AsyncJob* job) {
  if (dst == nullptr || src == nullptr) {
    count_violation("hsa_amd_memory_async_copy", dst, src, size, "caller", "passed a NULL side");
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  bool bad_signal = false;
  const hsa_status_t signals = check_signals(num_deps, deps, completion, &bad_signal);
  if (signals != HSA_STATUS_SUCCESS) return signals;
  uint32_t dst_index = 0, src_index = 0;
  if (!agent_index(dst_agent, &dst_index) || !agent_index(src_agent, &src_index)) {
    return HSA_STATUS_ERROR_INVALID_AGENT;
  }
  if (bad_signal) return HSA_STATUS_ERROR_INVALID_SIGNAL;
  job->size = size;
  if (size == 0) return HSA_STATUS_SUCCESS;
  job->dst = dst;
  job->src = src;
  job->dependencies.assign(deps, deps + num_deps);
  job->completion = completion;
  // The agent whose engine copies, as ROCr picks it: the source agent if it
  // is a GPU, else the destination agent if it is a GPU, else the CPU.
  job->copy_agent = is_gpu(src_index) ? src_index : is_gpu(dst_index) ? dst_index : kCpu;
  return HSA_STATUS_SUCCESS;
}

// Whether [base, last byte of the box] stays inside the address space.
bool rect_side_addressable(const hsa_pitched_ptr_t& side, const hsa_dim3_t& offset,
                           const hsa_dim3_t& range) {
  uint64_t layer = 0, row = 0, end = 0;
  const uint64_t last_z = uint64_t{offset.z} + range.z - 1;
  const uint64_t last_y = uint64_t{offset.y} + range.y - 1;
  if (__builtin_mul_overflow(last_z, uint64_t{side.slice}, &layer) ||
      __builtin_mul_overflow(last_y, uint64_t{side.pitch}, &row) ||
      __builtin_add_overflow(layer, row, &end) ||
      __builtin_add_overflow(end, uint64_t{offset.x} + range.x, &end)) {
    return false;
  }
  uintptr_t last = 0;
  return !__builtin_add_overflow(reinterpret_cast<uintptr_t>(side.base), end, &last);
}

void* row_address(const hsa_pitched_ptr_t& side, const hsa_dim3_t& offset,
                  const hsa_dim3_t& range, uint64_t row) {
  const uint64_t z = row / range.y;
  const uint64_t y = row % range.y;
  return static_cast<uint8_t*>(side.base) + (offset.z + z) * side.slice +
         (offset.y + y) * side.pitch + offset.x;
}

}  // namespace

void* AsyncJob::dst_row(uint64_t row) const {
  return rect ? row_address(geometry.dst, geometry.dst_offset, geometry.range, row) : dst;
}

const void* AsyncJob::src_row(uint64_t row) const {
  return rect ? row_address(geometry.src, geometry.src_offset, geometry.range, row) : src;
}

// ---- for the rest of the runtime -----------------------------------------------------------

hsa_signal_value_t load_signal(hsa_signal_t signal) {
  Signals& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  std::shared_ptr<Slot> slot = find_locked(t, signal);
  return slot ? slot->value : 0;
}

void store_signal(hsa_signal_t signal, hsa_signal_value_t value) {
  modify(signal, [value](hsa_signal_value_t) { return value; });
}

void subtract_signal(hsa_signal_t signal, hsa_signal_value_t value) {
  // Arithmetic wraps like the hardware's 64-bit atomics.
  modify(signal, [value](hsa_signal_value_t v) {
    return static_cast<hsa_signal_value_t>(static_cast<uint64_t>(v) - static_cast<uint64_t>(value));
  });
}

hsa_signal_value_t wait_signal(hsa_signal_t signal, hsa_signal_condition_t condition,
                               hsa_signal_value_t compare, uint64_t timeout_ns) {
  Signals& t = table();
  std::unique_lock<std::mutex> lock(t.mutex);
  // The slot outlives a destroy that happens while we sleep, which ends the wait.
  std::shared_ptr<Slot> slot = find_locked(t, signal);
  if (slot == nullptr) return 0;
  if (condition_holds(condition, slot->value, compare)) return slot->value;
  Clock::time_point deadline;
  const bool has_deadline = deadline_for(timeout_ns, &deadline);
  wait_counted(t, lock, has_deadline, deadline, [&] {
    return slot->destroyed || condition_holds(condition, slot->value, compare);
  });
  return slot->value;
}

uint32_t wait_any_signal(uint32_t count, const hsa_signal_t* signals,
                         const hsa_signal_condition_t* conditions,
                         const hsa_signal_value_t* values, uint64_t timeout_ns,
                         hsa_signal_value_t* satisfying) {
  constexpr uint32_t kNone = UINT32_MAX;
  if (count == 0 || signals == nullptr || conditions == nullptr || values == nullptr) return kNone;
  Signals& t = table();
  std::unique_lock<std::mutex> lock(t.mutex);
  std::vector<std::shared_ptr<Slot>> slots;
  for (uint32_t i = 0; i < count; ++i) slots.push_back(find_locked(t, signals[i]));
  uint32_t satisfied = kNone;
  // Unknown signals are skipped (as recent ROCr); with none left it ends.
  auto done = [&] {
    bool any_live = false;
    for (uint32_t i = 0; i < count; ++i) {
      if (!slots[i] || slots[i]->destroyed) continue;
      any_live = true;
      if (condition_holds(conditions[i], slots[i]->value, values[i])) {
        satisfied = i;
        return true;
      }
    }
    return !any_live;
  };
  Clock::time_point deadline;
  const bool has_deadline = deadline_for(timeout_ns, &deadline);
  wait_counted(t, lock, has_deadline, deadline, done);
  if (satisfied != kNone && satisfying != nullptr) *satisfying = slots[satisfied]->value;
  return satisfied;
}

hsa_signal_t create_runtime_signal(hsa_signal_value_t value) {
  hsa_signal_t signal{0};
  create(value, 0, nullptr, &signal, true);
  return signal;
}

void destroy_runtime_signal(hsa_signal_t signal) { destroy(signal); }

bool dependencies_satisfied(const std::vector<hsa_signal_t>& deps, bool block,
                            const std::atomic<bool>& give_up) {
  if (deps.empty()) return true;
  Signals& t = table();
  std::unique_lock<std::mutex> lock(t.mutex);
  std::vector<std::shared_ptr<Slot>> slots;
  for (hsa_signal_t dep : deps) {
    if (std::shared_ptr<Slot> slot = find_locked(t, dep)) slots.push_back(std::move(slot));
  }
  auto satisfied = [&] {
    return std::all_of(slots.begin(), slots.end(),
                       [](const auto& slot) { return slot->destroyed || slot->value == 0; });
  };
  if (block) wait_counted(t, lock, false, {}, [&] { return satisfied() || give_up.load(); });
  return satisfied();
}

void wake_signal_waiters() {
  // Taking the lock orders a give-up flag's store before any waiter's next
  // look, so the notification cannot be missed.
  { std::lock_guard<std::mutex> lock(table().mutex); }
  table().changed.notify_all();
}

void complete_copy(hsa_signal_t completion, bool ok) {
  if (ok) {
    subtract_signal(completion, 1);
  } else {
    store_signal(completion, -1);
  }
}

void drain_engines() {
  std::vector<Engine*> engines;
  {
    std::lock_guard<std::mutex> lock(g_engines_mutex);
    for (auto& e : *g_engines) engines.push_back(e.get());
  }
  for (Engine* e : engines) e->draining = true;
  wake_signal_waiters();
  for (Engine* e : engines) {
    std::unique_lock<std::mutex> lock(e->mutex);
    e->idle.wait(lock, [&] { return e->jobs.empty(); });
    e->draining = false;
  }
  backend::drain();
}

void destroy_all_signals() {
  Signals& t = table();
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    for (auto& entry : t.live) entry.second->destroyed = true;
    t.live.clear();
  }
  t.changed.notify_all();
}

uint64_t live_signal_count() {
  Signals& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  return static_cast<uint64_t>(std::count_if(t.live.begin(), t.live.end(),
                                             [](const auto& e) { return !e.second->runtime; }));
}

uint64_t armed_handler_count() {
  Signals& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  // Those of destroyed signals are dropped: the thread sweeps them next.
  const auto armed = std::count_if(t.handlers.begin(), t.handlers.end(),
                                   [](const AsyncHandler& h) { return !h.slot->destroyed; });
  return static_cast<uint64_t>(armed) + t.handlers_running;
}

uint64_t invalid_signal_uses() { return table().invalid_uses.load(); }
void reset_invalid_signal_uses() { table().invalid_uses = 0; }
bool signal_known(hsa_signal_t signal) { return is_live(signal); }

}  // namespace hsa_rt

// ---- entry points ----------------------------------------------------------------------

namespace hsa_rt::api {

hsa_status_t signal_create(hsa_signal_value_t value, uint32_t num_consumers,
                           const hsa_agent_t* consumers, hsa_signal_t* signal) {
  return create(value, num_consumers, consumers, signal, false);
}

// The attributes select ROCr's signal implementation: nothing changes here.
hsa_status_t amd_signal_create(hsa_signal_value_t value, uint32_t num_consumers,
                               const hsa_agent_t* consumers, uint64_t /*attributes*/,
                               hsa_signal_t* signal) {
  return create(value, num_consumers, consumers, signal, false);
}

hsa_status_t signal_destroy(hsa_signal_t signal) {
  HSA_RT_REQUIRE_READY();
  return destroy(signal);
}

// Every memory-order variant is one function, sequentially consistent.
hsa_signal_value_t signal_load(hsa_signal_t signal) { return load_signal(signal); }

void signal_store(hsa_signal_t signal, hsa_signal_value_t value) { store_signal(signal, value); }

hsa_signal_value_t signal_exchange(hsa_signal_t signal, hsa_signal_value_t value) {
  return modify(signal, [value](hsa_signal_value_t) { return value; });
}

hsa_signal_value_t signal_cas(hsa_signal_t signal, hsa_signal_value_t expected,
                              hsa_signal_value_t value) {
  return modify(signal, [expected, value](hsa_signal_value_t current) {
    return current == expected ? value : current;
  });
}

void signal_add(hsa_signal_t signal, hsa_signal_value_t value) {
  modify(signal, [value](hsa_signal_value_t v) {
    return static_cast<hsa_signal_value_t>(static_cast<uint64_t>(v) + static_cast<uint64_t>(value));
  });
}

void signal_subtract(hsa_signal_t signal, hsa_signal_value_t value) {
  subtract_signal(signal, value);
}

void signal_and(hsa_signal_t signal, hsa_signal_value_t value) {
  modify(signal, [value](hsa_signal_value_t v) { return v & value; });
}

void signal_or(hsa_signal_t signal, hsa_signal_value_t value) {
  modify(signal, [value](hsa_signal_value_t v) { return v | value; });
}

void signal_xor(hsa_signal_t signal, hsa_signal_value_t value) {
  modify(signal, [value](hsa_signal_value_t v) { return v ^ value; });
}

hsa_signal_value_t signal_wait(hsa_signal_t signal, hsa_signal_condition_t condition,
                               hsa_signal_value_t compare, uint64_t timeout_hint,
                               hsa_wait_state_t /*wait_state_hint*/) {
  return wait_signal(signal, condition, compare, timeout_hint);
}

uint32_t amd_signal_wait_any(uint32_t count, hsa_signal_t* signals,
                             hsa_signal_condition_t* conditions, hsa_signal_value_t* values,
                             uint64_t timeout_hint, hsa_wait_state_t /*wait_hint*/,
                             hsa_signal_value_t* satisfying) {
  return wait_any_signal(count, signals, conditions, values, timeout_hint, satisfying);
}

// ROCr's order: a NULL handler INVALID_ARGUMENT, an unknown signal
// INVALID_SIGNAL (not counted as an invalid use); then armed. The condition
// is a level, not an edge: a value holding only between two looks of the
// thread may be missed, as with ROCr's interrupt-driven wait.
hsa_status_t amd_signal_async_handler(hsa_signal_t signal, hsa_signal_condition_t condition,
                                      hsa_signal_value_t value, hsa_amd_signal_handler handler,
                                      void* arg) {
  HSA_RT_REQUIRE_READY();
  if (handler == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  Signals& t = table();
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    auto it = t.live.find(signal.handle);
    if (it == t.live.end()) return HSA_STATUS_ERROR_INVALID_SIGNAL;
    if (!t.handler_thread) {
      try {
        std::thread(run_async_handlers).detach();
      } catch (const std::system_error&) {
        return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
      }
      t.handler_thread = true;
    }
    t.handlers.push_back(AsyncHandler{it->second, condition, value, handler, arg});
  }
  t.changed.notify_all();
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_memory_async_copy(void* dst, hsa_agent_t dst_agent, const void* src,
                                   hsa_agent_t src_agent, size_t size, uint32_t num_dep_signals,
                                   const hsa_signal_t* dep_signals,
                                   hsa_signal_t completion_signal) {
  HSA_RT_REQUIRE_READY();
  AsyncJob job;
  const hsa_status_t checked = check_linear(dst, dst_agent, src, src_agent, size, num_dep_signals,
                                            dep_signals, completion_signal, &job);
  if (checked != HSA_STATUS_SUCCESS || job.size == 0) return checked;
  return submit(std::move(job));
}

#if HSA_RT_HAVE_VMEM
hsa_status_t amd_memory_async_copy_on_engine(void* dst, hsa_agent_t dst_agent, const void* src,
                                             hsa_agent_t src_agent, size_t size,
                                             uint32_t num_dep_signals,
                                             const hsa_signal_t* dep_signals,
                                             hsa_signal_t completion_signal,
                                             hsa_amd_sdma_engine_id_t engine_id,
                                             bool /*force_copy_on_sdma*/) {
  HSA_RT_REQUIRE_READY();
  AsyncJob job;
  const hsa_status_t checked = check_linear(dst, dst_agent, src, src_agent, size, num_dep_signals,
                                            dep_signals, completion_signal, &job);
  if (checked != HSA_STATUS_SUCCESS || job.size == 0) return checked;
  // Runtime::CopyMemoryOnEngine: exactly one bit; a copy between two CPU
  // agents has no engine (HSA_STATUS_ERROR); GpuAgent::DmaCopyOnEngine: the
  // bit must name one of the copying GPU's engines. ROCr's finer rules (xGMI
  // engines for xGMI peers only) are not modelled; the engine changes nothing.
  const auto bits = static_cast<uint32_t>(engine_id);
  if (bits == 0 || (bits & (bits - 1)) != 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (!is_gpu(job.copy_agent)) return HSA_STATUS_ERROR;
  uint32_t position = 1;
  while ((bits >> position) != 0) ++position;
  if (position > agent_description(job.copy_agent).engines) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  return submit(std::move(job));
}
#endif

// ROCr's checks (hsa_amd_memory_async_copy_rect, then
// BlitSdma::SubmitCopyRectCommand), see hsa_rt.h; dir only picks ROCr's
// engine and is not compared with the memory.
hsa_status_t amd_memory_async_copy_rect(const hsa_pitched_ptr_t* dst,
                                        const hsa_dim3_t* dst_offset,
                                        const hsa_pitched_ptr_t* src,
                                        const hsa_dim3_t* src_offset, const hsa_dim3_t* range,
                                        hsa_agent_t copy_agent, hsa_amd_copy_direction_t dir,
                                        uint32_t num_dep_signals,
                                        const hsa_signal_t* dep_signals,
                                        hsa_signal_t completion_signal) {
  HSA_RT_REQUIRE_READY();
  constexpr hsa_status_t kBad = HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (dst == nullptr || src == nullptr || dst_offset == nullptr || src_offset == nullptr ||
      range == nullptr) {
    return kBad;
  }
  bool bad_signal = false;
  if (check_signals(num_dep_signals, dep_signals, completion_signal, &bad_signal) !=
      HSA_STATUS_SUCCESS) {
    return kBad;
  }
  const auto direction = static_cast<uint32_t>(dir);
  if (direction == hsaHostToHost || direction > hsaDeviceToDevice) return kBad;
  uint32_t agent = 0;
  if (!agent_index(copy_agent, &agent) || !is_gpu(agent)) return HSA_STATUS_ERROR_INVALID_AGENT;
  if (bad_signal) return HSA_STATUS_ERROR_INVALID_SIGNAL;
  // A zero range: success with nothing done, the completion untouched.
  if (range->x == 0 || range->y == 0 || range->z == 0) return HSA_STATUS_SUCCESS;
  if (dst->base == nullptr || src->base == nullptr) {
    count_violation("hsa_amd_memory_async_copy_rect", dst->base, src->base, range->x, "caller",
                    "passed a NULL base");
    return kBad;
  }
  const auto dword = [](uint64_t value) { return value % 4 == 0; };
  if (!dword(reinterpret_cast<uintptr_t>(dst->base)) ||
      !dword(reinterpret_cast<uintptr_t>(src->base)) || !dword(dst->pitch) || !dword(src->pitch) ||
      !dword(dst->slice) || !dword(src->slice)) {
    return kBad;
  }
  if (uint64_t{src_offset->x} + range->x > src->pitch ||
      uint64_t{dst_offset->x} + range->x > dst->pitch) {
    return kBad;
  }
  // pitch >= range.x > 0 here, so the divisions are defined.
  if ((src->slice != 0 && uint64_t{src_offset->y} + range->y > src->slice / src->pitch) ||
      (dst->slice != 0 && uint64_t{dst_offset->y} + range->y > dst->slice / dst->pitch)) {
    return kBad;
  }
  if (range->z > 1 && (src->slice == 0 || dst->slice == 0)) return kBad;
  if (!rect_side_addressable(*dst, *dst_offset, *range) ||
      !rect_side_addressable(*src, *src_offset, *range)) {
    return kBad;
  }
  AsyncJob job;
  job.rect = true;
  job.geometry = RectGeometry{*dst, *src, *dst_offset, *src_offset, *range};
  job.size = range->x;
  job.dependencies.assign(dep_signals, dep_signals + num_dep_signals);
  job.completion = completion_signal;
  job.copy_agent = agent;
  return submit(std::move(job));
}

}  // namespace hsa_rt::api

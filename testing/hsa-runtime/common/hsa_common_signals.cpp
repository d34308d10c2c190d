// hsa_common_signals.cpp: the host-side signal table both HSA runtimes share
// (hsa_common_signals.h), compiled into the sim (testing/hsa-runtime/host) and into
// HSA-on-CUDA (testing/hsa-runtime/cuda).

#include "hsa_common_signals.h"

#include <algorithm>
#include <system_error>
#include <thread>

namespace hsa_common {

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

// ---- internals ----------------------------------------------------------------

std::shared_ptr<SignalTable::Slot> SignalTable::find_slot_locked(hsa_signal_t signal) {
  auto it = live_.find(signal.handle);
  if (it != live_.end()) return it->second;
  invalid_uses_.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

SignalTable::Slot* SignalTable::find_raw_slot_locked(hsa_signal_t signal) {
  auto it = live_.find(signal.handle);
  if (it != live_.end()) return it->second.get();
  invalid_uses_.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

template <typename Update>
hsa_signal_value_t SignalTable::modify(hsa_signal_t signal, Update update) {
  hsa_signal_value_t previous = 0;
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Slot* slot = find_raw_slot_locked(signal);
    if (slot == nullptr) return 0;
    previous = slot->value;
    slot->value = update(previous);
    wake = waiters_ > 0;
  }
  if (wake) changed_.notify_all();
  return previous;
}

template <typename Done>
void SignalTable::wait_counted(std::unique_lock<std::mutex>& lock, bool has_deadline,
                               Clock::time_point deadline, Done done) {
  ++waiters_;
  if (has_deadline) {
    changed_.wait_until(lock, deadline, done);
  } else {
    changed_.wait(lock, done);
  }
  --waiters_;
}

bool SignalTable::deadline_for(uint64_t timeout_hint, Clock::time_point* deadline) {
  // Anything beyond about a century is treated as "forever", which also
  // keeps the time_point arithmetic from overflowing.
  constexpr uint64_t kForeverNs = uint64_t{100} * 365 * 24 * 3600 * kTimestampFrequencyHz;
  if (timeout_hint >= kForeverNs) return false;
  *deadline = Clock::now() + std::chrono::nanoseconds(timeout_hint);
  return true;
}

// ---- entry points -------------------------------------------------------------

hsa_status_t SignalTable::create(hsa_signal_value_t initial_value, uint32_t num_consumers,
                                 const hsa_agent_t* consumers, hsa_signal_t* signal) {
  if (hooks_.precondition != nullptr) {
    const hsa_status_t status = hooks_.precondition();
    if (status != HSA_STATUS_SUCCESS) return status;
  }
  if (signal == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (num_consumers > 0 && consumers == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  const hsa_status_t consumers_ok = hooks_.check_consumers(num_consumers, consumers);
  if (consumers_ok != HSA_STATUS_SUCCESS) return consumers_ok;
  std::lock_guard<std::mutex> lock(mutex_);
  auto slot = std::make_shared<Slot>();
  slot->value = initial_value;
  const uint64_t handle = hooks_.make_handle(next_serial_++);
  live_.emplace(handle, std::move(slot));
  signal->handle = handle;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t SignalTable::destroy(hsa_signal_t signal) {
  if (hooks_.precondition != nullptr) {
    const hsa_status_t status = hooks_.precondition();
    if (status != HSA_STATUS_SUCCESS) return status;
  }
  if (signal.handle == 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(signal.handle);
    if (it == live_.end()) return HSA_STATUS_ERROR_INVALID_SIGNAL;
    it->second->destroyed = true;
    live_.erase(it);
  }
  changed_.notify_all();
  return HSA_STATUS_SUCCESS;
}

hsa_signal_value_t SignalTable::load(hsa_signal_t signal) {
  std::lock_guard<std::mutex> lock(mutex_);
  Slot* slot = find_raw_slot_locked(signal);
  return slot ? slot->value : 0;
}

void SignalTable::store(hsa_signal_t signal, hsa_signal_value_t value) {
  modify(signal, [value](hsa_signal_value_t) { return value; });
}

hsa_signal_value_t SignalTable::exchange(hsa_signal_t signal, hsa_signal_value_t value) {
  return modify(signal, [value](hsa_signal_value_t) { return value; });
}

hsa_signal_value_t SignalTable::cas(hsa_signal_t signal, hsa_signal_value_t expected,
                                    hsa_signal_value_t value) {
  return modify(signal, [expected, value](hsa_signal_value_t current) {
    return current == expected ? value : current;
  });
}

void SignalTable::add(hsa_signal_t signal, hsa_signal_value_t value) {
  modify(signal, [value](hsa_signal_value_t v) {
    return static_cast<hsa_signal_value_t>(static_cast<uint64_t>(v) +
                                           static_cast<uint64_t>(value));
  });
}

void SignalTable::subtract(hsa_signal_t signal, hsa_signal_value_t value) {
  modify(signal, [value](hsa_signal_value_t v) {
    return static_cast<hsa_signal_value_t>(static_cast<uint64_t>(v) -
                                           static_cast<uint64_t>(value));
  });
}

void SignalTable::bitwise_and(hsa_signal_t signal, hsa_signal_value_t value) {
  modify(signal, [value](hsa_signal_value_t v) { return v & value; });
}

void SignalTable::bitwise_or(hsa_signal_t signal, hsa_signal_value_t value) {
  modify(signal, [value](hsa_signal_value_t v) { return v | value; });
}

void SignalTable::bitwise_xor(hsa_signal_t signal, hsa_signal_value_t value) {
  modify(signal, [value](hsa_signal_value_t v) { return v ^ value; });
}

hsa_signal_value_t SignalTable::wait(hsa_signal_t signal, hsa_signal_condition_t condition,
                                     hsa_signal_value_t compare_value, uint64_t timeout_hint) {
  std::unique_lock<std::mutex> lock(mutex_);
  // Fast path: already satisfied, no reference needed.
  Slot* raw = find_raw_slot_locked(signal);
  if (raw == nullptr) return 0;
  if (condition_holds(condition, raw->value, compare_value)) return raw->value;
  // The slot must outlive a destroy that happens while we sleep.
  std::shared_ptr<Slot> slot = live_.find(signal.handle)->second;
  auto done = [&] {
    return slot->destroyed || condition_holds(condition, slot->value, compare_value);
  };
  Clock::time_point deadline;
  const bool has_deadline = deadline_for(timeout_hint, &deadline);
  wait_counted(lock, has_deadline, deadline, done);
  return slot->value;
}

uint32_t SignalTable::wait_any(uint32_t signal_count, const hsa_signal_t* signals,
                               const hsa_signal_condition_t* conditions,
                               const hsa_signal_value_t* values, uint64_t timeout_hint,
                               hsa_signal_value_t* satisfying_value) {
  constexpr uint32_t kNone = UINT32_MAX;
  if (signal_count == 0 || signals == nullptr || conditions == nullptr || values == nullptr) {
    return kNone;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  std::vector<std::shared_ptr<Slot>> slots;
  for (uint32_t i = 0; i < signal_count; ++i) slots.push_back(find_slot_locked(signals[i]));
  uint32_t satisfied = kNone;
  auto done = [&] {
    bool any_live = false;
    for (uint32_t i = 0; i < signal_count; ++i) {
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
  const bool has_deadline = deadline_for(timeout_hint, &deadline);
  wait_counted(lock, has_deadline, deadline, done);
  if (satisfied != kNone && satisfying_value != nullptr) {
    *satisfying_value = slots[satisfied]->value;
  }
  return satisfied;
}

hsa_status_t SignalTable::async_handler(hsa_signal_t signal, hsa_signal_condition_t condition,
                                        hsa_signal_value_t value, hsa_amd_signal_handler handler,
                                        void* arg) {
  if (hooks_.precondition != nullptr) {
    const hsa_status_t status = hooks_.precondition();
    if (status != HSA_STATUS_SUCCESS) return status;
  }
  if (handler == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(signal.handle);
    if (it == live_.end()) return HSA_STATUS_ERROR_INVALID_SIGNAL;
    if (!handler_thread_started_) {
      try {
        // Detached and never joined: the table is never destroyed, and a
        // thread blocked waiting for a condition must not keep the process
        // from exiting (the runtimes' copy workers do the same).
        std::thread([this] { run_async_handlers(); }).detach();
      } catch (const std::system_error&) {
        return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
      }
      handler_thread_started_ = true;
    }
    handlers_.push_back(AsyncHandler{it->second, condition, value, handler, arg});
  }
  changed_.notify_all();
  return HSA_STATUS_SUCCESS;
}

void SignalTable::run_async_handlers() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    size_t ready = 0;
    // Drops the handlers of destroyed signals and finds the first armed
    // handler whose condition holds.
    auto find_ready = [&] {
      handlers_.erase(std::remove_if(handlers_.begin(), handlers_.end(),
                                     [](const AsyncHandler& h) { return h.slot->destroyed; }),
                      handlers_.end());
      for (ready = 0; ready < handlers_.size(); ++ready) {
        const AsyncHandler& h = handlers_[ready];
        if (condition_holds(h.condition, h.slot->value, h.value)) return true;
      }
      return false;
    };
    wait_counted(lock, false, {}, find_ready);
    AsyncHandler armed = std::move(handlers_[ready]);
    handlers_.erase(handlers_.begin() + static_cast<std::ptrdiff_t>(ready));
    const hsa_signal_value_t observed = armed.slot->value;
    ++handlers_running_;
    lock.unlock();
    const bool again = armed.handler(observed, armed.arg);
    lock.lock();
    --handlers_running_;
    if (again && !armed.slot->destroyed) handlers_.push_back(std::move(armed));
  }
}

uint64_t SignalTable::armed_handler_count() {
  std::lock_guard<std::mutex> lock(mutex_);
  // Those on destroyed signals are dropped: the thread sweeps them on its
  // next look.
  const auto armed = std::count_if(handlers_.begin(), handlers_.end(),
                                   [](const AsyncHandler& h) { return !h.slot->destroyed; });
  return static_cast<uint64_t>(armed) + handlers_running_;
}

// ---- for the runtime ----------------------------------------------------------

bool SignalTable::is_live(hsa_signal_t signal) {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_.count(signal.handle) != 0;
}

bool SignalTable::dependencies_satisfied(const std::vector<hsa_signal_t>& dependencies,
                                         bool block, const std::atomic<bool>& give_up) {
  if (dependencies.empty()) return true;
  std::unique_lock<std::mutex> lock(mutex_);
  std::vector<std::shared_ptr<Slot>> slots;
  for (hsa_signal_t dependency : dependencies) {
    if (std::shared_ptr<Slot> slot = find_slot_locked(dependency)) slots.push_back(std::move(slot));
  }
  auto satisfied = [&] {
    for (const auto& slot : slots) {
      if (!slot->destroyed && slot->value != 0) return false;
    }
    return true;
  };
  if (block) wait_counted(lock, false, {}, [&] { return satisfied() || give_up.load(); });
  return satisfied();
}

void SignalTable::complete_copy(hsa_signal_t completion, bool ok) {
  if (ok) {
    subtract(completion, 1);
  } else {
    store(completion, -1);
  }
}

void SignalTable::wake_waiters() {
  { std::lock_guard<std::mutex> lock(mutex_); }
  changed_.notify_all();
}

void SignalTable::destroy_all() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& entry : live_) entry.second->destroyed = true;
    live_.clear();
  }
  changed_.notify_all();
}

uint64_t SignalTable::live_count() {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_.size();
}

}  // namespace hsa_common

/* hsa_common_signals.h: HSA signals as host-side 64-bit values, shared by the
 * sim (c_tests/sim/hsa_sim_signals.cpp) and HSA-on-CUDA
 * (gpu/hsa_cuda/hsa_cuda_signals.cpp), and the argument checks of
 * hsa_amd_memory_async_copy both run before handing a copy to their own
 * engine (the sim's one worker thread; HSA-on-CUDA's CUDA streams).
 *
 * A signal is a value under one lock shared by all signals of a table, with
 * one condition variable every change notifies when someone waits; waits
 * (including an engine's wait for a copy's dependencies) re-check their
 * condition on each change and honour the timeout hint (ticks of the 1 GHz
 * system timestamp, i.e. nanoseconds) as an upper bound. Every memory-order
 * variant is sequentially consistent. A use of a signal that does not exist
 * is counted (invalid_uses); such a load or wait returns 0 and such a store
 * does nothing.
 *
 * What differs between the runtimes comes in through SignalTable::Hooks: the
 * handle encoding (the sim's signals outlive its resets and carry no epoch;
 * HSA-on-CUDA's carry its init epoch), how consumer agents are validated, and
 * whether create/destroy first need an initialised runtime (HSA-on-CUDA).
 */
#ifndef HSA_COMMON_SIGNALS_H
#define HSA_COMMON_SIGNALS_H

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include <hsa/hsa_api_trace.h>

#include "hsa_common.h"

namespace hsa_common {

// Whether value satisfies condition against compare.
bool condition_holds(hsa_signal_condition_t condition, hsa_signal_value_t value,
                     hsa_signal_value_t compare);

// hsa_signal_create's consumer check, as ROCr does it: the first consumer that
// is_agent(hsa_agent_t) rejects is INVALID_AGENT, one listed twice
// INVALID_ARGUMENT, whichever comes first in the list.
template <typename IsAgent>
hsa_status_t check_consumer_list(uint32_t num_consumers, const hsa_agent_t* consumers,
                                 IsAgent is_agent) {
  std::set<uint64_t> seen;
  for (uint32_t i = 0; i < num_consumers; ++i) {
    if (!is_agent(consumers[i])) return HSA_STATUS_ERROR_INVALID_AGENT;
    if (!seen.insert(consumers[i].handle).second) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  return HSA_STATUS_SUCCESS;
}

class SignalTable {
 public:
  struct Hooks {
    // Answered by create and destroy before anything else unless SUCCESS;
    // NULL: always go on (the sim).
    hsa_status_t (*precondition)();
    // Validates the consumer list (use check_consumer_list).
    hsa_status_t (*check_consumers)(uint32_t num_consumers, const hsa_agent_t* consumers);
    // The handle of the serial-th signal created (serials start at 1).
    uint64_t (*make_handle)(uint64_t serial);
  };

  explicit SignalTable(const Hooks& hooks) : hooks_(hooks) {}
  SignalTable(const SignalTable&) = delete;
  SignalTable& operator=(const SignalTable&) = delete;

  // ---- the entry points (SignalEntries puts them in the tables) ----
  hsa_status_t create(hsa_signal_value_t initial_value, uint32_t num_consumers,
                      const hsa_agent_t* consumers, hsa_signal_t* signal);
  hsa_status_t destroy(hsa_signal_t signal);
  hsa_signal_value_t load(hsa_signal_t signal);
  void store(hsa_signal_t signal, hsa_signal_value_t value);
  hsa_signal_value_t exchange(hsa_signal_t signal, hsa_signal_value_t value);
  hsa_signal_value_t cas(hsa_signal_t signal, hsa_signal_value_t expected,
                         hsa_signal_value_t value);
  // Arithmetic wraps like the hardware's 64-bit atomics instead of overflowing.
  void add(hsa_signal_t signal, hsa_signal_value_t value);
  void subtract(hsa_signal_t signal, hsa_signal_value_t value);
  void bitwise_and(hsa_signal_t signal, hsa_signal_value_t value);
  void bitwise_or(hsa_signal_t signal, hsa_signal_value_t value);
  void bitwise_xor(hsa_signal_t signal, hsa_signal_value_t value);
  // hsa_signal_wait_*: the value that satisfied the condition, or the current
  // value when the timeout expires. A signal destroyed while waited on ends
  // the wait.
  hsa_signal_value_t wait(hsa_signal_t signal, hsa_signal_condition_t condition,
                          hsa_signal_value_t compare_value, uint64_t timeout_hint);
  // hsa_amd_signal_wait_any: the index of the first satisfied pair, or
  // UINT32_MAX when the timeout expires first. Unknown signals are skipped (as
  // recent ROCr does); with none left the wait ends at once.
  uint32_t wait_any(uint32_t signal_count, const hsa_signal_t* signals,
                    const hsa_signal_condition_t* conditions, const hsa_signal_value_t* values,
                    uint64_t timeout_hint, hsa_signal_value_t* satisfying_value);

  // ---- for the runtime ----
  // Whether the signal exists (not counted as a use).
  bool is_live(hsa_signal_t signal);
  // Whether every dependency reads 0 (a destroyed or unknown one counts as
  // satisfied, and an unknown one as an invalid use). With block, waits
  // until they do, and answers false only once give_up is set (then call
  // wake_waiters) while one still is not; without, answers at once.
  bool dependencies_satisfied(const std::vector<hsa_signal_t>& dependencies, bool block,
                              const std::atomic<bool>& give_up);
  // The end of an asynchronous copy: ok (copied, or refused as a violation,
  // so that a waiter does not hang) subtracts 1 from the completion signal;
  // a failure stores -1, as ROCr reports an error during a copy.
  void complete_copy(hsa_signal_t completion, bool ok);
  // Wakes every waiter to re-check its condition (after setting a give_up
  // flag); taking the lock first orders the flag's store before any waiter's
  // next check, so the notification cannot be missed.
  void wake_waiters();
  // Destroys every signal, ending every wait on them.
  void destroy_all();
  uint64_t live_count();
  uint64_t invalid_uses() const { return invalid_uses_.load(); }
  void reset_invalid_uses() { invalid_uses_.store(0); }

 private:
  struct Slot {
    hsa_signal_value_t value = 0;
    bool destroyed = false;
  };
  using Clock = std::chrono::steady_clock;

  // The slot of a live signal, or null (counted as an invalid use). The
  // lock is held.
  std::shared_ptr<Slot> find_slot_locked(hsa_signal_t signal);
  // As find_slot_locked, without taking a reference: for an operation that
  // finishes before the lock is released.
  Slot* find_raw_slot_locked(hsa_signal_t signal);
  // Applies update under the lock, wakes the waiters and returns the value
  // before the update (0 for an unknown signal, which is left alone).
  template <typename Update>
  hsa_signal_value_t modify(hsa_signal_t signal, Update update);
  // Blocks on changed_ until done() (or the deadline), counted in waiters_.
  template <typename Done>
  void wait_counted(std::unique_lock<std::mutex>& lock, bool has_deadline,
                    Clock::time_point deadline, Done done);
  // The deadline for a timeout hint; false when the wait is unbounded.
  static bool deadline_for(uint64_t timeout_hint, Clock::time_point* deadline);

  const Hooks hooks_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::unordered_map<uint64_t, std::shared_ptr<Slot>> live_;
  uint64_t next_serial_ = 1;
  std::atomic<uint64_t> invalid_uses_{0};
  // Threads blocked on changed_; an update only notifies when there are any
  // (real signals are plain memory: an update with nobody waiting costs a
  // store, and so should it here).
  uint32_t waiters_ = 0;
};

// The table entries of one runtime's SignalTable (returned by Table()).
// fill_core puts every hsa_signal_* entry in the core table, the memory-order
// variants sharing one implementation; fill_amd puts hsa_amd_signal_create
// (whose attributes, which select ROCr's signal implementation, change
// nothing here) and hsa_amd_signal_wait_any in the AMD extension table.
template <SignalTable& (*Table)()>
struct SignalEntries {
  static hsa_status_t create(hsa_signal_value_t initial_value, uint32_t num_consumers,
                             const hsa_agent_t* consumers, hsa_signal_t* signal) {
    return Table().create(initial_value, num_consumers, consumers, signal);
  }
  static hsa_status_t amd_create(hsa_signal_value_t initial_value, uint32_t num_consumers,
                                 const hsa_agent_t* consumers, uint64_t /*attributes*/,
                                 hsa_signal_t* signal) {
    return Table().create(initial_value, num_consumers, consumers, signal);
  }
  static hsa_status_t destroy(hsa_signal_t signal) { return Table().destroy(signal); }
  static hsa_signal_value_t load(hsa_signal_t signal) { return Table().load(signal); }
  static void store(hsa_signal_t signal, hsa_signal_value_t value) { Table().store(signal, value); }
  static hsa_signal_value_t exchange(hsa_signal_t signal, hsa_signal_value_t value) {
    return Table().exchange(signal, value);
  }
  static hsa_signal_value_t cas(hsa_signal_t signal, hsa_signal_value_t expected,
                                hsa_signal_value_t value) {
    return Table().cas(signal, expected, value);
  }
  static void add(hsa_signal_t signal, hsa_signal_value_t value) { Table().add(signal, value); }
  static void subtract(hsa_signal_t signal, hsa_signal_value_t value) {
    Table().subtract(signal, value);
  }
  static void bitwise_and(hsa_signal_t signal, hsa_signal_value_t value) {
    Table().bitwise_and(signal, value);
  }
  static void bitwise_or(hsa_signal_t signal, hsa_signal_value_t value) {
    Table().bitwise_or(signal, value);
  }
  static void bitwise_xor(hsa_signal_t signal, hsa_signal_value_t value) {
    Table().bitwise_xor(signal, value);
  }
  static hsa_signal_value_t wait(hsa_signal_t signal, hsa_signal_condition_t condition,
                                 hsa_signal_value_t compare_value, uint64_t timeout_hint,
                                 hsa_wait_state_t /*wait_state_hint*/) {
    return Table().wait(signal, condition, compare_value, timeout_hint);
  }
  static uint32_t wait_any(uint32_t signal_count, hsa_signal_t* signals,
                           hsa_signal_condition_t* conditions, hsa_signal_value_t* values,
                           uint64_t timeout_hint, hsa_wait_state_t /*wait_hint*/,
                           hsa_signal_value_t* satisfying_value) {
    return Table().wait_any(signal_count, signals, conditions, values, timeout_hint,
                            satisfying_value);
  }

  static void fill_core(CoreApiTable* core) {
    core->hsa_signal_create_fn = create;
    core->hsa_signal_destroy_fn = destroy;
    core->hsa_signal_load_relaxed_fn = load;
    core->hsa_signal_load_scacquire_fn = load;
    core->hsa_signal_store_relaxed_fn = store;
    core->hsa_signal_store_screlease_fn = store;
    core->hsa_signal_silent_store_relaxed_fn = store;
    core->hsa_signal_silent_store_screlease_fn = store;
    core->hsa_signal_wait_relaxed_fn = wait;
    core->hsa_signal_wait_scacquire_fn = wait;

    core->hsa_signal_and_relaxed_fn = bitwise_and;
    core->hsa_signal_and_scacquire_fn = bitwise_and;
    core->hsa_signal_and_screlease_fn = bitwise_and;
    core->hsa_signal_and_scacq_screl_fn = bitwise_and;
    core->hsa_signal_or_relaxed_fn = bitwise_or;
    core->hsa_signal_or_scacquire_fn = bitwise_or;
    core->hsa_signal_or_screlease_fn = bitwise_or;
    core->hsa_signal_or_scacq_screl_fn = bitwise_or;
    core->hsa_signal_xor_relaxed_fn = bitwise_xor;
    core->hsa_signal_xor_scacquire_fn = bitwise_xor;
    core->hsa_signal_xor_screlease_fn = bitwise_xor;
    core->hsa_signal_xor_scacq_screl_fn = bitwise_xor;
    core->hsa_signal_add_relaxed_fn = add;
    core->hsa_signal_add_scacquire_fn = add;
    core->hsa_signal_add_screlease_fn = add;
    core->hsa_signal_add_scacq_screl_fn = add;
    core->hsa_signal_subtract_relaxed_fn = subtract;
    core->hsa_signal_subtract_scacquire_fn = subtract;
    core->hsa_signal_subtract_screlease_fn = subtract;
    core->hsa_signal_subtract_scacq_screl_fn = subtract;
    core->hsa_signal_exchange_relaxed_fn = exchange;
    core->hsa_signal_exchange_scacquire_fn = exchange;
    core->hsa_signal_exchange_screlease_fn = exchange;
    core->hsa_signal_exchange_scacq_screl_fn = exchange;
    core->hsa_signal_cas_relaxed_fn = cas;
    core->hsa_signal_cas_scacquire_fn = cas;
    core->hsa_signal_cas_screlease_fn = cas;
    core->hsa_signal_cas_scacq_screl_fn = cas;
  }

  static void fill_amd(AmdExtTable* amd) {
    amd->hsa_amd_signal_create_fn = amd_create;
    amd->hsa_amd_signal_wait_any_fn = wait_any;
  }
};

// ---- hsa_amd_memory_async_copy --------------------------------------------------

// A copy accepted by check_async_copy, for the runtime's engine.
struct AsyncCopy {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t size = 0;
  std::vector<hsa_signal_t> dependencies;
  hsa_signal_t completion{0};
  // The agent whose engine performs the copy (copy_agent in hsa_common.h).
  uint32_t copy_agent = kCpuAgentIndex;
};

// hsa_amd_memory_async_copy's argument checks, in ROCr's order: a NULL dst
// or src is a violation (count_violation()) and INVALID_ARGUMENT;
// dependencies given without a count or a count without dependencies
// INVALID_ARGUMENT; an unknown agent (resolve_agents(dst_agent, src_agent,
// uint32_t* dst_index, uint32_t* src_index) -> bool) INVALID_AGENT; an
// unknown dependency or completion signal INVALID_SIGNAL. On SUCCESS *copy is
// the copy to hand to the engine, copying agent chosen with
// `fallback_copy_agent`; or, for size 0, copy->size is 0 and there is nothing
// to do: ROCr returns success for an empty copy without touching the
// completion signal.
template <typename CountViolation, typename ResolveAgents>
hsa_status_t check_async_copy(SignalTable& signals, void* dst, hsa_agent_t dst_agent,
                              const void* src, hsa_agent_t src_agent, size_t size,
                              uint32_t num_dep_signals, const hsa_signal_t* dep_signals,
                              hsa_signal_t completion_signal, uint32_t fallback_copy_agent,
                              CountViolation count_violation, ResolveAgents resolve_agents,
                              AsyncCopy* copy) {
  copy->size = 0;
  if (dst == nullptr || src == nullptr) {
    count_violation();
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  if ((num_dep_signals == 0) != (dep_signals == nullptr)) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  uint32_t dst_index = 0;
  uint32_t src_index = 0;
  if (!resolve_agents(dst_agent, src_agent, &dst_index, &src_index)) {
    return HSA_STATUS_ERROR_INVALID_AGENT;
  }
  for (uint32_t i = 0; i < num_dep_signals; ++i) {
    if (!signals.is_live(dep_signals[i])) return HSA_STATUS_ERROR_INVALID_SIGNAL;
  }
  if (!signals.is_live(completion_signal)) return HSA_STATUS_ERROR_INVALID_SIGNAL;
  if (size == 0) return HSA_STATUS_SUCCESS;
  copy->dst = dst;
  copy->src = src;
  copy->size = size;
  copy->dependencies.assign(dep_signals, dep_signals + num_dep_signals);
  copy->completion = completion_signal;
  copy->copy_agent = hsa_common::copy_agent(src_index, dst_index, fallback_copy_agent);
  return HSA_STATUS_SUCCESS;
}

}  // namespace hsa_common

#endif /* HSA_COMMON_SIGNALS_H */

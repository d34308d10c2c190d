/* hsa_common_signals.h: HSA signals as host-side 64-bit values, shared by the
 * sim (testing/hsa-runtime/host/hsa_sim_signals.cpp) and HSA-on-CUDA
 * (testing/hsa-runtime/cuda/hsa_cuda_signals.cpp), and the argument checks of
 * hsa_amd_memory_async_copy both run before handing a copy to their own
 * engine (the sim's one worker thread; HSA-on-CUDA's CUDA streams), with
 * those of hsa_amd_memory_async_copy_on_engine and
 * hsa_amd_memory_async_copy_rect.
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
 * hsa_amd_signal_async_handler is the table's too: one handler thread per
 * table, started by the first registration and never joined (like the
 * tables, a SignalTable is never destroyed, so the thread can stay blocked
 * while the process exits), calls each armed handler once its condition
 * holds; see SignalTable::async_handler.
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

  // hsa_amd_signal_async_handler, in ROCr's order: the precondition hook;
  // a NULL handler INVALID_ARGUMENT; a signal that does not exist
  // INVALID_SIGNAL (not counted as an invalid use). Then the handler is
  // armed: the table's handler thread (started lazily; OUT_OF_RESOURCES if it
  // cannot be) calls handler(value, arg) once the condition holds, with the
  // value it observed. A handler that returns true is armed again with the
  // same parameters (so it is called again at once if the condition still
  // holds); false ends it. Handlers run one at a time, without the table's
  // lock held, so they may call any signal entry (register handlers, destroy
  // signals). A signal destroyed while a handler is armed on it drops the
  // handler without calling it (ROCr leaves that undefined); one destroyed
  // while its handler runs is not re-armed. The condition is a level, not an
  // edge: a value that satisfies it only briefly, between two looks of the
  // thread, may be missed, as with ROCr's interrupt-driven wait.
  hsa_status_t async_handler(hsa_signal_t signal, hsa_signal_condition_t condition,
                             hsa_signal_value_t value, hsa_amd_signal_handler handler,
                             void* arg);

  // ---- for the runtime ----
  // Handlers armed and not yet ended (one running counts until it returns).
  uint64_t armed_handler_count();
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

  // One registration of hsa_amd_signal_async_handler.
  struct AsyncHandler {
    std::shared_ptr<Slot> slot;
    hsa_signal_condition_t condition = HSA_SIGNAL_CONDITION_EQ;
    hsa_signal_value_t value = 0;
    hsa_amd_signal_handler handler = nullptr;
    void* arg = nullptr;
  };

  // The handler thread: waits until an armed handler's condition holds,
  // calls it without the lock, re-arms it when it returns true. Never returns.
  [[noreturn]] void run_async_handlers();

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
  // Armed async handlers, in arming order (a re-armed one goes to the end).
  std::vector<AsyncHandler> handlers_;
  // Handlers being called now (taken out of handlers_ while they run).
  uint32_t handlers_running_ = 0;
  bool handler_thread_started_ = false;
};

// The table entries of one runtime's SignalTable (returned by Table()).
// fill_core puts every hsa_signal_* entry in the core table, the memory-order
// variants sharing one implementation; fill_amd puts hsa_amd_signal_create
// (whose attributes, which select ROCr's signal implementation, change
// nothing here), hsa_amd_signal_wait_any and hsa_amd_signal_async_handler in
// the AMD extension table.
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
  static hsa_status_t async_handler(hsa_signal_t signal, hsa_signal_condition_t condition,
                                    hsa_signal_value_t value, hsa_amd_signal_handler handler,
                                    void* arg) {
    return Table().async_handler(signal, condition, value, handler, arg);
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
    amd->hsa_amd_signal_async_handler_fn = async_handler;
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

// ---- hsa_amd_memory_async_copy_on_engine ---------------------------------------------

// What hsa_amd_memory_async_copy_on_engine checks beyond
// hsa_amd_memory_async_copy's arguments (check_async_copy, which answers a
// size-0 copy first, as ROCr does), for a copy check_async_copy accepted:
//   engine_id (an hsa_amd_sdma_engine_id_t) must be exactly one bit, else
//     INVALID_ARGUMENT (Runtime::CopyMemoryOnEngine);
//   a copy between two CPU agents has no engine: HSA_STATUS_ERROR (what the
//     CPU agent's DmaCopyOnEngine answers);
//   the bit's position (1 = HSA_AMD_SDMA_ENGINE_0) must not be past the
//     copying GPU's engine_count engines (SDMA + xGMI SDMA), else
//     INVALID_ARGUMENT (GpuAgent::DmaCopyOnEngine).
// ROCr's finer rules (xGMI engines only for xGMI peers, gfx90a's
// host-to-device limit) are not modelled; force_copy_on_sdma changes nothing.
inline hsa_status_t check_copy_engine(uint32_t engine_id, uint32_t copy_agent,
                                      uint32_t engine_count) {
  if (engine_id == 0 || (engine_id & (engine_id - 1)) != 0) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  if (!is_gpu_index(copy_agent)) return HSA_STATUS_ERROR;
  uint32_t position = 1;
  while ((engine_id >> position) != 0) ++position;
  return position <= engine_count ? HSA_STATUS_SUCCESS : HSA_STATUS_ERROR_INVALID_ARGUMENT;
}

// ---- hsa_amd_memory_async_copy_rect -----------------------------------------------

// A 3-D box between two pitched buffers: range.x bytes per row, range.y rows
// per layer, range.z layers; a row's address is base + (offset.z + z) * slice
// + (offset.y + y) * pitch + offset.x on each side. Rows are numbered
// z * range.y + y.
struct RectGeometry {
  hsa_pitched_ptr_t dst{};
  hsa_pitched_ptr_t src{};
  hsa_dim3_t dst_offset{};
  hsa_dim3_t src_offset{};
  hsa_dim3_t range{};

  uint64_t rows() const { return uint64_t{range.y} * range.z; }
  size_t row_bytes() const { return range.x; }
  void* dst_row(uint64_t row) const { return row_address(dst, dst_offset, row); }
  const void* src_row(uint64_t row) const { return row_address(src, src_offset, row); }

 private:
  void* row_address(const hsa_pitched_ptr_t& side, const hsa_dim3_t& offset, uint64_t row) const {
    const uint64_t z = row / range.y;
    const uint64_t y = row % range.y;
    return static_cast<uint8_t*>(side.base) + (offset.z + z) * side.slice +
           (offset.y + y) * side.pitch + offset.x;
  }
};

// A rect copy accepted by check_async_copy_rect, for the runtime's engine.
struct AsyncRectCopy {
  RectGeometry geometry;
  std::vector<hsa_signal_t> dependencies;
  hsa_signal_t completion{0};
  uint32_t copy_agent = kCpuAgentIndex;  // the copy_agent argument (a GPU)
  bool empty = true;  // a zero range: nothing to do
};

// Whether [base + 0, base + last byte of the box] stays inside the address
// space on one side (so that every row address can be formed).
inline bool rect_side_addressable(const hsa_pitched_ptr_t& side, const hsa_dim3_t& offset,
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

// hsa_amd_memory_async_copy_rect's checks, in ROCr's order
// (hsa_amd_memory_async_copy_rect, then BlitSdma::SubmitCopyRectCommand):
//   a NULL dst, dst_offset, src, src_offset or range: INVALID_ARGUMENT;
//   dependencies given without a count or a count without them:
//     INVALID_ARGUMENT;
//   dir hsaHostToHost (and, here, any value past hsaDeviceToDevice):
//     INVALID_ARGUMENT; otherwise dir only picks ROCr's engine and is not
//     checked against the memory;
//   copy_agent unknown (resolve_agent(hsa_agent_t, uint32_t*) -> bool) or not
//     a GPU: INVALID_AGENT;
//   an unknown dependency or completion signal: INVALID_SIGNAL;
//   a range with a zero component: SUCCESS with nothing to do
//     (copy->empty), the completion signal untouched;
//   a NULL base on either side (here): a violation (count_violation()) and
//     INVALID_ARGUMENT;
//   a base, pitch or slice not a multiple of 4: INVALID_ARGUMENT;
//   offset.x + range.x past a pitch: INVALID_ARGUMENT;
//   offset.y + range.y past slice / pitch on a side whose slice is not 0:
//     INVALID_ARGUMENT;
//   range.z > 1 with a slice of 0: INVALID_ARGUMENT;
//   a box whose last byte is past the end of the address space (here):
//     INVALID_ARGUMENT.
template <typename CountViolation, typename ResolveAgent>
hsa_status_t check_async_copy_rect(SignalTable& signals, const hsa_pitched_ptr_t* dst,
                                   const hsa_dim3_t* dst_offset, const hsa_pitched_ptr_t* src,
                                   const hsa_dim3_t* src_offset, const hsa_dim3_t* range,
                                   hsa_agent_t copy_agent, hsa_amd_copy_direction_t dir,
                                   uint32_t num_dep_signals, const hsa_signal_t* dep_signals,
                                   hsa_signal_t completion_signal, CountViolation count_violation,
                                   ResolveAgent resolve_agent, AsyncRectCopy* copy) {
  constexpr hsa_status_t kBad = HSA_STATUS_ERROR_INVALID_ARGUMENT;
  copy->empty = true;
  if (dst == nullptr || src == nullptr || dst_offset == nullptr || src_offset == nullptr ||
      range == nullptr) {
    return kBad;
  }
  if ((num_dep_signals == 0) != (dep_signals == nullptr)) return kBad;
  const auto direction = static_cast<uint32_t>(dir);
  if (direction == static_cast<uint32_t>(hsaHostToHost) ||
      direction > static_cast<uint32_t>(hsaDeviceToDevice)) {
    return kBad;
  }
  uint32_t agent_index = 0;
  if (!resolve_agent(copy_agent, &agent_index) || !is_gpu_index(agent_index)) {
    return HSA_STATUS_ERROR_INVALID_AGENT;
  }
  for (uint32_t i = 0; i < num_dep_signals; ++i) {
    if (!signals.is_live(dep_signals[i])) return HSA_STATUS_ERROR_INVALID_SIGNAL;
  }
  if (!signals.is_live(completion_signal)) return HSA_STATUS_ERROR_INVALID_SIGNAL;
  if (range->x == 0 || range->y == 0 || range->z == 0) return HSA_STATUS_SUCCESS;
  if (dst->base == nullptr || src->base == nullptr) {
    count_violation();
    return kBad;
  }
  const auto dword_aligned = [](uint64_t value) { return value % 4 == 0; };
  if (!dword_aligned(reinterpret_cast<uintptr_t>(dst->base)) ||
      !dword_aligned(reinterpret_cast<uintptr_t>(src->base)) || !dword_aligned(dst->pitch) ||
      !dword_aligned(src->pitch) || !dword_aligned(dst->slice) || !dword_aligned(src->slice)) {
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
  copy->geometry = RectGeometry{*dst, *src, *dst_offset, *src_offset, *range};
  copy->dependencies.assign(dep_signals, dep_signals + num_dep_signals);
  copy->completion = completion_signal;
  copy->copy_agent = agent_index;
  copy->empty = false;
  return HSA_STATUS_SUCCESS;
}

}  // namespace hsa_common

#endif /* HSA_COMMON_SIGNALS_H */

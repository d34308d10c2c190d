// hsa_cuda_signals.cpp: HSA signals (host-side 64-bit values) and the
// asynchronous copy engines.
//
// Signals are the host-side signal table shared with the sim
// (testing/hsa-runtime/common/hsa_common_signals.h): 64-bit values under one lock,
// with waits that re-check their condition on each change and honour the
// timeout hint. Here they belong to the runtime's lifetime: their handles
// carry the init epoch, create and destroy answer NOT_INITIALIZED before
// init, and hsa_cuda_shutdown destroys them all.
//
// hsa_amd_memory_async_copy (and, with 6.0+ headers, _on_engine) hands a job
// to the copy engine of the copying agent (the source agent if it is a GPU,
// else the destination agent if it is a GPU, else the first GPU);
// hsa_amd_memory_async_copy_rect to the engine of its copy_agent. Each
// engine is a pair of threads over one non-blocking stream in that GPU's
// primary context:
//   the submitter takes jobs in order, waits on the host until every
//   dependency signal reads 0 (as a barrier packet in front of the copy
//   would), checks both ranges (every row of a rect copy) and enqueues
//   cuMemcpyAsync on the stream (one per row of a rect copy); one event is
//   recorded behind each burst of copies enqueued together;
//   the completer waits for those events in order and then decrements the
//   completion signal by one, or stores -1 when the driver reports an error,
//   as ROCr reports an error during a copy. Its events spin rather than
//   sleep (lower completion latency, as ROCr's copy completion busy-waits
//   first), and only while copies are in flight: an idle completer waits on a
//   condition variable. Events are recycled through a small pool.
// Copies therefore overlap with the host and with each other's submission,
// and complete in submission order per engine.

#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "hsa_common_signals.h"
#include "hsa_cuda_internal.h"

namespace hsa_cuda {

namespace {

// ---- signal table -------------------------------------------------------------------

// Signals need an initialised runtime: create and destroy answer
// NOT_INITIALIZED before hsa_cuda_init (the sim has no such state).
hsa_status_t require_ready() {
  return ready() ? HSA_STATUS_SUCCESS : HSA_STATUS_ERROR_NOT_INITIALIZED;
}

hsa_status_t check_consumers(uint32_t num_consumers, const hsa_agent_t* consumers) {
  return hsa_common::check_consumer_list(num_consumers, consumers, [](hsa_agent_t agent) {
    uint32_t index = 0;
    return agent_index_from_handle(agent, &index);
  });
}

uint64_t signal_handle(uint64_t serial) { return make_handle(HandleTag::kSignal, serial); }

hsa_common::SignalTable& signals() {
  // Never destroyed: a waiter may still be blocked while the process exits.
  static hsa_common::SignalTable* const table = new hsa_common::SignalTable(
      hsa_common::SignalTable::Hooks{require_ready, check_consumers, signal_handle});
  return *table;
}

using Entries = hsa_common::SignalEntries<signals>;

// Set while the runtime shuts down: dependency waits of queued copies give up.
std::atomic<bool> g_abandon_waits{false};

// Whether every dependency reads 0 (see SignalTable::dependencies_satisfied);
// a blocking wait gives up at shutdown.
bool wait_for_dependencies(const std::vector<hsa_signal_t>& dependencies, bool block) {
  return signals().dependencies_satisfied(dependencies, block, g_abandon_waits);
}

// ---- copy engines ---------------------------------------------------------------------

// A queued copy: linear (copy.dst, copy.src, copy.size) or, for a rect copy,
// the box's rows (copy.size unused).
struct AsyncJob {
  hsa_common::AsyncCopy copy;
  bool rect = false;
  hsa_common::RectGeometry geometry;
};

// A burst of copies and the event recorded behind it.
struct InFlight {
  CUevent event = nullptr;
  std::vector<hsa_signal_t> completions;
};

// Success decrements the completion signal; a driver error stores -1.
void complete(hsa_signal_t completion, bool ok) { signals().complete_copy(completion, ok); }

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
        const hsa_common::AsyncCopy& copy = job.copy;
        if (!wait_for_dependencies(copy.dependencies, /*block=*/false)) {
          // About to block: what is enqueued must be able to complete first
          // (a dependency may be the completion of one of those copies).
          flush(&enqueued);
          // Dropped at shutdown: its completion signal is left untouched.
          if (!wait_for_dependencies(copy.dependencies, /*block=*/true)) continue;
        }
        CopyPlan plan;
        const bool planned = job.rect ? plan_async_rect(job.geometry, &plan)
                                      : plan_async_copy(copy.dst, copy.src, copy.size, &plan);
        if (!planned) {
          // As in the software runtime: counted as a violation, nothing is
          // copied, and the completion is still signalled so that a waiter
          // does not hang.
          complete(copy.completion, true);
          continue;
        }
        if (!context_ok || !enqueue(job)) {
          complete(copy.completion, false);
          continue;
        }
        enqueued.push_back(copy.completion);
      }
      flush(&enqueued);
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      submitter_done_ = true;
    }
    cv_.notify_all();
  }

  // Enqueues the job's copies on the stream: one, or one per row of a rect
  // copy (all of them or, on a driver error, the rows before it: the
  // completion then reports the failure).
  bool enqueue(const AsyncJob& job) {
    if (!job.rect) {
      return HSA_CUDA_CHECK(cu().cuMemcpyAsync(CUdeviceptr(job.copy.dst),
                                               CUdeviceptr(job.copy.src), job.copy.size, stream_));
    }
    const uint64_t rows = job.geometry.rows();
    for (uint64_t row = 0; row < rows; ++row) {
      if (!HSA_CUDA_CHECK(cu().cuMemcpyAsync(CUdeviceptr(job.geometry.dst_row(row)),
                                             CUdeviceptr(job.geometry.src_row(row)),
                                             job.geometry.row_bytes(), stream_))) {
        return false;
      }
    }
    return true;
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

}  // namespace

// ---- shared ----------------------------------------------------------------------------

void signals_start(uint32_t gpus) {
  g_abandon_waits.store(false);
  g_engines->clear();
  for (uint32_t i = 0; i < gpus; ++i) g_engines->push_back(std::make_unique<CopyEngine>(i + 1));
}

void signals_shutdown() {
  g_abandon_waits.store(true);
  // Orders the store before any waiter's next check, so the notification
  // cannot be missed.
  signals().wake_waiters();
  for (auto& engine : *g_engines) engine->stop();
  g_engines->clear();
  signals().destroy_all();
  g_abandon_waits.store(false);
}

uint64_t live_signal_count() { return signals().live_count(); }

hsa_common::SignalTable& signal_table() { return signals(); }

void fill_signal_core_entries(CoreApiTable* core) { Entries::fill_core(core); }

void fill_signal_amd_entries(AmdExtTable* amd) { Entries::fill_amd(amd); }

namespace {

void count_violation() { counters().violations.fetch_add(1, std::memory_order_relaxed); }

bool resolve_agents(hsa_agent_t dst_agent, hsa_agent_t src_agent, uint32_t* dst_index,
                    uint32_t* src_index) {
  return agent_index_from_handle(dst_agent, dst_index) &&
         agent_index_from_handle(src_agent, src_index);
}

// The checks of hsa_amd_memory_async_copy; the copying agent as ROCr picks
// the engine, and with neither agent a GPU the first GPU's (this runtime
// copies on GPU streams only).
hsa_status_t check_linear(void* dst, hsa_agent_t dst_agent, const void* src, hsa_agent_t src_agent,
                          size_t size, uint32_t num_dep_signals, const hsa_signal_t* dep_signals,
                          hsa_signal_t completion_signal, AsyncJob* job) {
  constexpr uint32_t kFirstGpu = 1;
  return hsa_common::check_async_copy(signals(), dst, dst_agent, src, src_agent, size,
                                      num_dep_signals, dep_signals, completion_signal, kFirstGpu,
                                      count_violation, resolve_agents, &job->copy);
}

hsa_status_t submit(AsyncJob job) {
  CopyEngine& engine = *(*g_engines)[job.copy.copy_agent - 1];
  const hsa_status_t status = engine.submit(std::move(job));
  if (status == HSA_STATUS_SUCCESS) {
    counters().async_copies.fetch_add(1, std::memory_order_relaxed);
  }
  return status;
}

}  // namespace

namespace api {

hsa_status_t amd_memory_async_copy(void* dst, hsa_agent_t dst_agent, const void* src,
                                   hsa_agent_t src_agent, size_t size, uint32_t num_dep_signals,
                                   const hsa_signal_t* dep_signals,
                                   hsa_signal_t completion_signal) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  AsyncJob job;
  const hsa_status_t checked = check_linear(dst, dst_agent, src, src_agent, size, num_dep_signals,
                                            dep_signals, completion_signal, &job);
  // size 0: success without touching the completion signal, as ROCr.
  if (checked != HSA_STATUS_SUCCESS || job.copy.size == 0) return checked;
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
  (void)force_copy_on_sdma;  // CUDA picks its copy engine itself
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  AsyncJob job;
  const hsa_status_t checked = check_linear(dst, dst_agent, src, src_agent, size, num_dep_signals,
                                            dep_signals, completion_signal, &job);
  if (checked != HSA_STATUS_SUCCESS || job.copy.size == 0) return checked;
  // The engines a copy may name are the copying GPU's CUDA copy engines; a
  // copy between two CPU agents has none (HSA_STATUS_ERROR, as ROCr and the
  // sim), although this runtime would run it on the first GPU's stream. The
  // copy itself runs on the copying GPU's stream like any other.
  uint32_t dst_index = 0;
  uint32_t src_index = 0;
  resolve_agents(dst_agent, src_agent, &dst_index, &src_index);
  const uint32_t engine_agent = hsa_common::copy_agent(src_index, dst_index, kCpuAgentIndex);
  const uint32_t engines = is_gpu_index(engine_agent) ? gpu_at(engine_agent).copy_engines : 0;
  const hsa_status_t engine =
      hsa_common::check_copy_engine(static_cast<uint32_t>(engine_id), engine_agent, engines);
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
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  hsa_common::AsyncRectCopy rect;
  const hsa_status_t checked = hsa_common::check_async_copy_rect(
      signals(), dst, dst_offset, src, src_offset, range, copy_agent, dir, num_dep_signals,
      dep_signals, completion_signal, count_violation, agent_index_from_handle, &rect);
  // A zero range: success without touching the completion signal, as ROCr.
  if (checked != HSA_STATUS_SUCCESS || rect.empty) return checked;
  AsyncJob job;
  job.rect = true;
  job.geometry = rect.geometry;
  job.copy.dependencies = std::move(rect.dependencies);
  job.copy.completion = rect.completion;
  job.copy.copy_agent = rect.copy_agent;
  return submit(std::move(job));
}

}  // namespace api

}  // namespace hsa_cuda

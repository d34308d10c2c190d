// signals.cpp: signals and async handlers, the asynchronous copies (linear,
// strict, rect, on an engine), shutdown, and what is left at exit.

#include <atomic>

#include "conformance.h"

using namespace conformance;

CASE("signals: values, waits and their timeouts, errors, wait_any, kept over reset", kBoth) {
  hsa_rt_reset(1);
  const uint64_t live_before = count(HSA_RT_COUNT_LIVE_SIGNALS);
  hsa_signal_t signal = make_signal(5);
  CHECK(count(HSA_RT_COUNT_LIVE_SIGNALS) == live_before + 1);
  CHECK(core().hsa_signal_load_relaxed_fn(signal) == 5);
  core().hsa_signal_store_screlease_fn(signal, 3);
  CHECK(core().hsa_signal_load_scacquire_fn(signal) == 3);
  core().hsa_signal_subtract_screlease_fn(signal, 1);
  core().hsa_signal_subtract_relaxed_fn(signal, 1);
  CHECK(core().hsa_signal_load_relaxed_fn(signal) == 1);
  core().hsa_signal_add_relaxed_fn(signal, 4);
  CHECK(core().hsa_signal_exchange_relaxed_fn(signal, 9) == 5);
  CHECK(core().hsa_signal_cas_relaxed_fn(signal, 9, 2) == 9);
  CHECK(core().hsa_signal_cas_relaxed_fn(signal, 9, 7) == 2);
  CHECK(core().hsa_signal_load_relaxed_fn(signal) == 2);

  // Conditions, satisfied at once.
  const uint64_t no_wait = 0;
  CHECK(core().hsa_signal_wait_relaxed_fn(signal, HSA_SIGNAL_CONDITION_EQ, 2, no_wait,
                                          HSA_WAIT_STATE_ACTIVE) == 2);
  CHECK(core().hsa_signal_wait_relaxed_fn(signal, HSA_SIGNAL_CONDITION_NE, 0, no_wait,
                                          HSA_WAIT_STATE_ACTIVE) == 2);
  CHECK(core().hsa_signal_wait_relaxed_fn(signal, HSA_SIGNAL_CONDITION_LT, 3, no_wait,
                                          HSA_WAIT_STATE_ACTIVE) == 2);
  CHECK(core().hsa_signal_wait_relaxed_fn(signal, HSA_SIGNAL_CONDITION_GTE, 2, no_wait,
                                          HSA_WAIT_STATE_ACTIVE) == 2);

  // The timeout is an upper bound.
  const auto start = std::chrono::steady_clock::now();
  const hsa_signal_value_t seen = core().hsa_signal_wait_scacquire_fn(
      signal, HSA_SIGNAL_CONDITION_EQ, 0, 50000000 /* 50 ms */, HSA_WAIT_STATE_BLOCKED);
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(seen == 2);
  CHECK(waited >= std::chrono::milliseconds(45) && waited < std::chrono::seconds(5));

  // A store from another thread wakes an unbounded wait.
  std::thread setter([signal] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    core().hsa_signal_store_relaxed_fn(signal, 0);
  });
  CHECK(core().hsa_signal_wait_scacquire_fn(signal, HSA_SIGNAL_CONDITION_EQ, 0, UINT64_MAX,
                                            HSA_WAIT_STATE_BLOCKED) == 0);
  setter.join();

  // Creation and destruction errors.
  hsa_signal_t other{0};
  CHECK_STATUS(core().hsa_signal_create_fn(0, 0, nullptr, nullptr),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_signal_create_fn(0, 1, nullptr, &other),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  const hsa_agent_t consumers[] = {cpu(), gpu(0)};
  CHECK_STATUS(core().hsa_signal_create_fn(0, 2, consumers, &other), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_signal_destroy_fn(other), HSA_STATUS_SUCCESS);
  const hsa_agent_t twice[] = {cpu(), cpu()};
  CHECK_STATUS(core().hsa_signal_create_fn(0, 2, twice, &other),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(amd().hsa_amd_signal_create_fn(1, 0, nullptr, 0, &other), HSA_STATUS_SUCCESS);
  CHECK(core().hsa_signal_load_relaxed_fn(other) == 1);
  CHECK_STATUS(core().hsa_signal_destroy_fn(other), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_signal_destroy_fn(other), HSA_STATUS_ERROR_INVALID_SIGNAL);
  CHECK_STATUS(core().hsa_signal_destroy_fn(hsa_signal_t{0}), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(count(HSA_RT_COUNT_INVALID_SIGNAL_USES) == 0);
  CHECK(core().hsa_signal_load_relaxed_fn(other) == 0);
  core().hsa_signal_store_relaxed_fn(other, 1);
  CHECK(count(HSA_RT_COUNT_INVALID_SIGNAL_USES) == 2);

  // Waiting for any of several signals.
  hsa_signal_t pair[2] = {make_signal(3), make_signal(3)};
  hsa_signal_condition_t conds[2] = {HSA_SIGNAL_CONDITION_EQ, HSA_SIGNAL_CONDITION_LT};
  hsa_signal_value_t values[2] = {0, 1};
  hsa_signal_value_t satisfying = 99;
  CHECK(amd().hsa_amd_signal_wait_any_fn(2, pair, conds, values, 20000000, HSA_WAIT_STATE_BLOCKED,
                                         &satisfying) == UINT32_MAX);
  CHECK(satisfying == 99);
  std::thread lower([pair] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    core().hsa_signal_store_relaxed_fn(pair[1], -4);
  });
  CHECK(amd().hsa_amd_signal_wait_any_fn(2, pair, conds, values, UINT64_MAX,
                                         HSA_WAIT_STATE_BLOCKED, &satisfying) == 1);
  CHECK(satisfying == -4);
  lower.join();
  core().hsa_signal_destroy_fn(pair[0]);
  core().hsa_signal_destroy_fn(pair[1]);

  // Signals outlive reset.
  hsa_rt_reset(1);
  CHECK(core().hsa_signal_load_relaxed_fn(signal) == 0);
  CHECK(count(HSA_RT_COUNT_INVALID_SIGNAL_USES) == 0);
  CHECK_STATUS(core().hsa_signal_destroy_fn(signal), HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_LIVE_SIGNALS) == live_before);
}

CASE("async copies: dependencies, order, checks at execution, faults, reset", kBoth) {
  hsa_rt_reset(1);
  char* dev = static_cast<char*>(device_alloc(8192));
  std::vector<char> host(8192, 'a');
  std::vector<char> back(8192, 0);
  hsa_signal_t gate = make_signal(1);
  hsa_signal_t done = make_signal(1);

  // Waits for its dependency, then copies and decrements the completion signal.
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dev, gpu(0), host.data(), cpu(), 8192, 1, &gate,
                                                  done),
               HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_ASYNC_COPIES) == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(core().hsa_signal_load_relaxed_fn(done) == 1);
  CHECK(count(HSA_RT_COUNT_COPIES_HOST_TO_DEVICE) == 0);
  core().hsa_signal_store_screlease_fn(gate, 0);
  CHECK(wait_for(done, 0));
  CHECK(dev_byte(dev) == 'a' && dev_byte(dev, 8191) == 'a');
  CHECK(count(HSA_RT_COUNT_COPIES_HOST_TO_DEVICE) == 1);

  // Back again, no dependencies; submission order is execution order.
  core().hsa_signal_store_relaxed_fn(done, 2);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dev + 4096, gpu(0), dev, gpu(0), 4096, 0,
                                                  nullptr, done),
               HSA_STATUS_SUCCESS);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(back.data(), cpu(), dev + 4096, gpu(0), 4096, 0,
                                                  nullptr, done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(back[0] == 'a' && back[4095] == 'a');
  CHECK(count(HSA_RT_COUNT_COPIES_DEVICE_TO_DEVICE) == 1 &&
        count(HSA_RT_COUNT_COPIES_DEVICE_TO_HOST) == 1);

  // Validation.
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(nullptr, gpu(0), host.data(), cpu(), 1, 0,
                                                  nullptr, done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(violations() == 1);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dev, gpu(0), host.data(), cpu(), 1, 1, nullptr,
                                                  done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dev, hsa_agent_t{9}, host.data(), cpu(), 1, 0,
                                                  nullptr, done),
               HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dev, gpu(0), host.data(), cpu(), 1, 0, nullptr,
                                                  hsa_signal_t{0}),
               HSA_STATUS_ERROR_INVALID_SIGNAL);
  const hsa_signal_t bogus{12345};
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dev, gpu(0), host.data(), cpu(), 1, 1, &bogus,
                                                  done),
               HSA_STATUS_ERROR_INVALID_SIGNAL);
  // Size 0 succeeds without touching the completion signal (as ROCr).
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dev, gpu(0), host.data(), cpu(), 0, 0, nullptr,
                                                  done),
               HSA_STATUS_SUCCESS);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(core().hsa_signal_load_relaxed_fn(done) == 1);

  // Memory freed before the copy runs: a violation at execution time,
  // nothing copied, completion still signalled.
  char* doomed = static_cast<char*>(device_alloc(4096));
  core().hsa_signal_store_relaxed_fn(gate, 1);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(doomed, gpu(0), host.data(), cpu(), 4096, 1,
                                                  &gate, done),
               HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_memory_free_fn(doomed), HSA_STATUS_SUCCESS);
  core().hsa_signal_store_relaxed_fn(gate, 0);
  CHECK(wait_for(done, 0));
  CHECK(violations() == 2);
  CHECK(hsa_rt_quarantine_intact());

  // Injected refusals leave the completion signal alone.
  core().hsa_signal_store_relaxed_fn(done, 1);
  hsa_rt_inject(HSA_RT_FAULT_NTH_ASYNC_COPY, 0, 2);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(back.data(), cpu(), dev, gpu(0), 16, 0, nullptr,
                                                  done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(back.data(), cpu(), dev, gpu(0), 16, 0, nullptr,
                                                  done),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  hsa_rt_inject(HSA_RT_FAULT_H2D_COPY_INTO, reinterpret_cast<uintptr_t>(dev + 100), 0);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dev, gpu(0), host.data(), cpu(), 200, 0,
                                                  nullptr, done),
               HSA_STATUS_ERROR);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(core().hsa_signal_load_relaxed_fn(done) == 1);
  CHECK(count(HSA_RT_COUNT_ASYNC_COPIES) == 5);
  CHECK(violations() == 2);

  // An injected failure during the copy: nothing copied, completion -1.
  hsa_rt_inject(HSA_RT_FAULT_H2D_COPY_INTO, 0, 0);
  hsa_rt_inject(HSA_RT_FAULT_NTH_ASYNC_COPY_COMPLETION, 0, 1);
  core().hsa_signal_store_relaxed_fn(done, 1);
  dev_fill(dev, 'o', 16);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dev, gpu(0), host.data(), cpu(), 16, 0, nullptr,
                                                  done),
               HSA_STATUS_SUCCESS);
  CHECK(core().hsa_signal_wait_scacquire_fn(done, HSA_SIGNAL_CONDITION_LT, 0, 5000000000ull,
                                            HSA_WAIT_STATE_BLOCKED) == -1);
  CHECK(dev_byte(dev) == 'o');
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dev, gpu(0), host.data(), cpu(), 16, 0, nullptr,
                                                  done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(dev_byte(dev) == 'a');

  // Reset drops a copy still blocked on its dependency.
  core().hsa_signal_store_relaxed_fn(done, 1);
  core().hsa_signal_store_relaxed_fn(gate, 1);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(back.data(), cpu(), dev, gpu(0), 16, 1, &gate,
                                                  done),
               HSA_STATUS_SUCCESS);
  hsa_rt_reset(1);
  CHECK(core().hsa_signal_load_relaxed_fn(done) == 1);
  CHECK(count(HSA_RT_COUNT_ASYNC_COPIES) == 0);

  core().hsa_signal_destroy_fn(gate);
  core().hsa_signal_destroy_fn(done);
}

CASE("async copies: strict mode: the copying agent must reach both buffers", kBoth) {
  if (!reset(2)) return;
  hsa_rt_set_mode(HSA_RT_MODE_STRICT_ASYNC_ACCESS, true);
  char* dev0 = static_cast<char*>(device_alloc(4096, 0));
  char* dev1 = static_cast<char*>(device_alloc(4096, 1));
  char* staging =
      static_cast<char*>(pool_alloc(pool(cpu(), HSA_RT_POOL_SYSTEM_FINE), 4096));
  std::vector<char> heap(4096, 's');
  hsa_signal_t done = make_signal(0);

  auto copy = [&](void* dst, hsa_agent_t dst_agent, const void* src, hsa_agent_t src_agent) {
    core().hsa_signal_store_relaxed_fn(done, 1);
    CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dst, dst_agent, src, src_agent, 64, 0,
                                                    nullptr, done),
                 HSA_STATUS_SUCCESS);
    CHECK(wait_for(done, 0));
    return violations();
  };
  // GPU 0 copies within its own memory: fine.
  CHECK(copy(dev0 + 64, gpu(0), dev0, gpu(0)) == 0);
  // Plain heap memory is not mapped for a GPU engine.
  CHECK(copy(dev0, gpu(0), heap.data(), cpu()) == 1);
  // Nor is restricted system pool memory until access is granted.
  CHECK(copy(dev0, gpu(0), staging, cpu()) == 2);
  const hsa_agent_t gpu0[] = {gpu(0)};
  CHECK_STATUS(amd().hsa_amd_agents_allow_access_fn(1, gpu0, nullptr, staging),
               HSA_STATUS_SUCCESS);
  CHECK(copy(dev0, gpu(0), staging, cpu()) == 2);
  CHECK(copy(staging, cpu(), dev0, gpu(0)) == 2);
  // Peer memory needs a grant too; the source GPU's engine does the copy.
  CHECK(copy(dev1, gpu(1), dev0, gpu(0)) == 3);
  CHECK_STATUS(amd().hsa_amd_agents_allow_access_fn(1, gpu0, nullptr, dev1), HSA_STATUS_SUCCESS);
  CHECK(copy(dev1, gpu(1), dev0, gpu(0)) == 3);
  // System memory from hsa_memory_allocate is mapped to every GPU.
  void* region_memory = nullptr;
  CHECK_STATUS(core().hsa_memory_allocate_fn(hsa_rt_region(cpu(), HSA_RT_POOL_SYSTEM_FINE),
                                             4096, &region_memory),
               HSA_STATUS_SUCCESS);
  CHECK(copy(region_memory, cpu(), dev1, gpu(1)) == 3);
  // CPU-to-CPU copies run on the CPU, which reaches host memory.
  CHECK(copy(heap.data(), cpu(), staging, cpu()) == 3);
  // Off by default: after reset, heap memory is accepted again.
  hsa_rt_reset(2);
  char* dev = static_cast<char*>(device_alloc(4096));
  CHECK(copy(dev, gpu(0), heap.data(), cpu()) == 0);
  core().hsa_signal_destroy_fn(done);
}

namespace {

hsa_status_t rect_copy(const hsa_pitched_ptr_t& dst, hsa_dim3_t dst_offset,
                       const hsa_pitched_ptr_t& src, hsa_dim3_t src_offset, hsa_dim3_t range,
                       hsa_agent_t agent, hsa_amd_copy_direction_t dir, hsa_signal_t done,
                       uint32_t num_deps = 0, const hsa_signal_t* deps = nullptr) {
  return amd().hsa_amd_memory_async_copy_rect_fn(&dst, &dst_offset, &src, &src_offset, &range,
                                                 agent, dir, num_deps, deps, done);
}


}  // namespace

CASE("async copies: rect: boxes between pitched buffers, ROCr's checks, faults", kBoth) {
  if (!reset(2)) return;
  CHECK(amd().hsa_amd_memory_async_copy_rect_fn != nullptr);
  // Device: 3 layers of 4 rows of 64 bytes. Host: 2 layers of 5 rows of 32.
  uint8_t* dev = static_cast<uint8_t*>(device_alloc(3 * 256));
  dev_fill(dev, 0, 3 * 256);
  std::vector<uint8_t> host(2 * 160);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint8_t>(i);
  const hsa_pitched_ptr_t dev_ptr{dev, 64, 256};
  const hsa_pitched_ptr_t host_ptr{host.data(), 32, 160};
  hsa_signal_t done = make_signal(1);
  hsa_signal_t gate = make_signal(1);
  const uint64_t accepted = count(HSA_RT_COUNT_ASYNC_COPIES);

  // 12 bytes x 3 rows x 2 layers from host (4, 1, 0) to device (8, 0, 1),
  // after a dependency.
  CHECK_STATUS(rect_copy(dev_ptr, {8, 0, 1}, host_ptr, {4, 1, 0}, {12, 3, 2}, gpu(0),
                         hsaHostToDevice, done, 1, &gate),
               HSA_STATUS_SUCCESS);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(core().hsa_signal_load_relaxed_fn(done) == 1);
  core().hsa_signal_store_relaxed_fn(gate, 0);
  CHECK(wait_for(done, 0));
  CHECK(count(HSA_RT_COUNT_ASYNC_COPIES) == accepted + 1);
  CHECK(count(HSA_RT_COUNT_COPIES_HOST_TO_DEVICE) == 1);
  bool exact = true;
  std::vector<uint8_t> landed(3 * 256);
  dev_read(landed.data(), dev, landed.size());
  for (size_t z = 0; z < 3; ++z) {
    for (size_t y = 0; y < 4; ++y) {
      for (size_t x = 0; x < 64; ++x) {
        const bool inside = z >= 1 && z < 3 && y < 3 && x >= 8 && x < 20;
        const uint8_t expected =
            inside ? host[(z - 1) * 160 + (y + 1) * 32 + (x - 8 + 4)] : uint8_t{0};
        exact = exact && landed[z * 256 + y * 64 + x] == expected;
      }
    }
  }
  CHECK(exact);

  // Back to a 2-D host buffer with no slice (one layer), device to host.
  std::vector<uint8_t> back(4 * 16, 0xEE);
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(rect_copy({back.data(), 16, 0}, {0, 1, 0}, dev_ptr, {8, 0, 1}, {12, 3, 1}, gpu(1),
                         hsaDeviceToHost, done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  // back row 1 + y = device layer 1 row y from byte 8 = host layer 0 row
  // 1 + y from byte 4.
  CHECK(back[16] == host[32 + 4] && back[16 + 11] == host[32 + 15]);
  CHECK(back[3 * 16 + 11] == host[3 * 32 + 15]);
  CHECK(back[0] == 0xEE && back[15] == 0xEE && back[16 + 12] == 0xEE);
  CHECK(count(HSA_RT_COUNT_COPIES_DEVICE_TO_HOST) == 1);

  // Argument checks, in ROCr's order.
  const hsa_dim3_t zero{0, 0, 0};
  const hsa_dim3_t box{4, 1, 1};
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_rect_fn(nullptr, &zero, &host_ptr, &zero, &box,
                                                       gpu(0), hsaHostToDevice, 0, nullptr, done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_rect_fn(&dev_ptr, &zero, &host_ptr, &zero, nullptr,
                                                       gpu(0), hsaHostToDevice, 0, nullptr, done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(rect_copy(dev_ptr, zero, host_ptr, zero, box, gpu(0), hsaHostToDevice, done, 1),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(rect_copy(dev_ptr, zero, host_ptr, zero, box, gpu(0), hsaHostToHost, done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(rect_copy(dev_ptr, zero, host_ptr, zero, box, gpu(0),
                         static_cast<hsa_amd_copy_direction_t>(7), done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(rect_copy(dev_ptr, zero, host_ptr, zero, box, cpu(), hsaHostToDevice, done),
               HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK_STATUS(rect_copy(dev_ptr, zero, host_ptr, zero, box, hsa_agent_t{9}, hsaHostToDevice,
                         done),
               HSA_STATUS_ERROR_INVALID_AGENT);
  const hsa_signal_t bogus{12345};
  CHECK_STATUS(rect_copy(dev_ptr, zero, host_ptr, zero, box, gpu(0), hsaHostToDevice, done, 1,
                         &bogus),
               HSA_STATUS_ERROR_INVALID_SIGNAL);
  CHECK_STATUS(rect_copy(dev_ptr, zero, host_ptr, zero, box, gpu(0), hsaHostToDevice,
                         hsa_signal_t{0}),
               HSA_STATUS_ERROR_INVALID_SIGNAL);
  // A zero range succeeds without touching the signal (even with bad pitches).
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(rect_copy({dev, 3, 0}, zero, host_ptr, zero, {4, 0, 1}, gpu(0), hsaHostToDevice,
                         done),
               HSA_STATUS_SUCCESS);
  // Geometry (BlitSdma::SubmitCopyRectCommand).
  CHECK_STATUS(rect_copy({dev, 62, 0}, zero, host_ptr, zero, box, gpu(0), hsaHostToDevice, done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(rect_copy({dev + 2, 64, 0}, zero, host_ptr, zero, box, gpu(0), hsaHostToDevice,
                         done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(rect_copy({dev, 64, 130}, zero, host_ptr, zero, box, gpu(0), hsaHostToDevice, done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(rect_copy(dev_ptr, {61, 0, 0}, host_ptr, zero, box, gpu(0), hsaHostToDevice, done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(rect_copy(dev_ptr, zero, host_ptr, {0, 4, 0}, {4, 2, 1}, gpu(0), hsaHostToDevice,
                         done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(rect_copy({dev, 64, 0}, zero, host_ptr, zero, {4, 1, 2}, gpu(0), hsaHostToDevice,
                         done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  const uint64_t refused = violations();
  CHECK_STATUS(rect_copy({nullptr, 64, 0}, zero, host_ptr, zero, box, gpu(0), hsaHostToDevice,
                         done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(violations() == refused + 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(core().hsa_signal_load_relaxed_fn(done) == 1);
  CHECK(count(HSA_RT_COUNT_ASYNC_COPIES) == accepted + 2);

  // One row out of bounds (the second runs past the allocation's end): the
  // whole copy is one violation, nothing copied, completion still signalled.
  dev_fill(dev, 0, 4096);
  CHECK_STATUS(rect_copy({dev + 3968, 96, 0}, zero, {host.data(), 64, 0}, zero, {64, 2, 1},
                         gpu(0), hsaHostToDevice, done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(violations() == refused + 2);
  CHECK(dev_byte(dev, 3968) == 0 && dev_byte(dev, 4031) == 0);
  // A host buffer too short for its rows: the same.
  core().hsa_signal_store_relaxed_fn(done, 1);
  std::vector<uint8_t> small(40);
  hsa_rt_note_host_block(small.data(), small.size());
  CHECK_STATUS(rect_copy(dev_ptr, zero, {small.data(), 32, 0}, zero, {16, 2, 1}, gpu(0),
                         hsaHostToDevice, done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(violations() == refused + 3);
  hsa_rt_forget_host_block(small.data());

  // Fault injection applies as to linear copies.
  core().hsa_signal_store_relaxed_fn(done, 1);
  hsa_rt_inject(HSA_RT_FAULT_NTH_ASYNC_COPY, 0, 1);
  CHECK_STATUS(rect_copy(dev_ptr, zero, host_ptr, zero, box, gpu(0), hsaHostToDevice, done),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  hsa_rt_inject(HSA_RT_FAULT_NTH_ASYNC_COPY_COMPLETION, 0, 1);
  CHECK_STATUS(rect_copy(dev_ptr, zero, host_ptr, zero, box, gpu(0), hsaHostToDevice, done),
               HSA_STATUS_SUCCESS);
  CHECK(core().hsa_signal_wait_scacquire_fn(done, HSA_SIGNAL_CONDITION_LT, 0, 5000000000ull,
                                            HSA_WAIT_STATE_BLOCKED) == -1);
  CHECK(dev_byte(dev) == 0);
  // A fault address in the second row only.
  core().hsa_signal_store_relaxed_fn(done, 1);
  hsa_rt_inject(HSA_RT_FAULT_COPIES_INTO, reinterpret_cast<uintptr_t>(dev + 64 + 2), 0);
  CHECK_STATUS(rect_copy(dev_ptr, zero, host_ptr, zero, {4, 2, 1}, gpu(0), hsaHostToDevice, done),
               HSA_STATUS_SUCCESS);
  CHECK(core().hsa_signal_wait_scacquire_fn(done, HSA_SIGNAL_CONDITION_LT, 0, 5000000000ull,
                                            HSA_WAIT_STATE_BLOCKED) == -1);
  CHECK(dev_byte(dev) == 0 && dev_byte(dev, 64) == 0);
  hsa_rt_inject(HSA_RT_FAULT_COPIES_INTO, 0, 0);
  core().hsa_signal_store_relaxed_fn(done, 1);
  hsa_rt_inject(HSA_RT_FAULT_H2D_COPY_INTO, reinterpret_cast<uintptr_t>(dev + 64), 0);
  CHECK_STATUS(rect_copy(dev_ptr, zero, host_ptr, zero, {4, 2, 1}, gpu(0), hsaHostToDevice, done),
               HSA_STATUS_ERROR);
  hsa_rt_inject(HSA_RT_FAULT_H2D_COPY_INTO, 0, 0);

  // Strict async access: the copy agent must reach every row.
  hsa_rt_set_mode(HSA_RT_MODE_STRICT_ASYNC_ACCESS, true);
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(rect_copy(dev_ptr, zero, dev_ptr, {0, 1, 0}, {4, 1, 1}, gpu(1), hsaDeviceToDevice,
                         done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(violations() == refused + 4);
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(rect_copy(dev_ptr, zero, dev_ptr, {0, 1, 0}, {4, 1, 1}, gpu(0), hsaDeviceToDevice,
                         done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(violations() == refused + 4);
  CHECK(count(HSA_RT_COUNT_COPIES_DEVICE_TO_DEVICE) == 1);
  core().hsa_signal_destroy_fn(done);
  core().hsa_signal_destroy_fn(gate);
}

namespace {

struct HandlerLog {
  std::atomic<int> calls{0};
  std::atomic<hsa_signal_value_t> last{0};
  int stop_after = 1;  // returns false on this call
  hsa_signal_t rearm_signal{0};  // stored back to 1 by the handler, if set
};

bool log_handler(hsa_signal_value_t value, void* arg) {
  auto* log = static_cast<HandlerLog*>(arg);
  log->last = value;
  const int calls = ++log->calls;
  // Handlers may call signal entries: the runtime holds no lock meanwhile.
  if (log->rearm_signal.handle != 0) core().hsa_signal_store_relaxed_fn(log->rearm_signal, 1);
  return calls < log->stop_after;
}

}  // namespace


CASE("signals: async handlers: arguments, once, re-armed, two per signal, dropped", kBoth) {
  hsa_rt_reset(1);
  CHECK(amd().hsa_amd_signal_async_handler_fn != nullptr);
  const auto async_handler = amd().hsa_amd_signal_async_handler_fn;
  const uint64_t armed_before = count(HSA_RT_COUNT_SIGNAL_HANDLERS);
  hsa_signal_t signal = make_signal(1);
  HandlerLog once;
  CHECK_STATUS(async_handler(signal, HSA_SIGNAL_CONDITION_EQ, 0, nullptr, &once),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(async_handler(hsa_signal_t{12345}, HSA_SIGNAL_CONDITION_EQ, 0, log_handler, &once),
               HSA_STATUS_ERROR_INVALID_SIGNAL);
  CHECK(count(HSA_RT_COUNT_SIGNAL_HANDLERS) == armed_before);

  // Fires once the condition holds, with the value seen; false ends it.
  CHECK_STATUS(async_handler(signal, HSA_SIGNAL_CONDITION_GTE, 5, log_handler, &once),
               HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_SIGNAL_HANDLERS) == armed_before + 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(once.calls == 0);
  core().hsa_signal_store_screlease_fn(signal, 7);
  CHECK(eventually([&] { return once.calls == 1; }));
  CHECK(once.last == 7);
  CHECK(eventually([&] { return count(HSA_RT_COUNT_SIGNAL_HANDLERS) == armed_before; }));
  core().hsa_signal_store_relaxed_fn(signal, 9);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(once.calls == 1);

  // true re-arms with the same parameters: three rounds, then it ends.
  core().hsa_signal_store_relaxed_fn(signal, 1);
  HandlerLog thrice;
  thrice.stop_after = 3;
  thrice.rearm_signal = signal;
  CHECK_STATUS(async_handler(signal, HSA_SIGNAL_CONDITION_EQ, 0, log_handler, &thrice),
               HSA_STATUS_SUCCESS);
  for (int round = 1; round <= 3; ++round) {
    core().hsa_signal_store_relaxed_fn(signal, 0);
    CHECK(eventually([&] { return thrice.calls == round; }));
    CHECK(eventually([&] { return core().hsa_signal_load_relaxed_fn(signal) == 1; }));
  }
  CHECK(eventually([&] { return count(HSA_RT_COUNT_SIGNAL_HANDLERS) == armed_before; }));
  core().hsa_signal_store_relaxed_fn(signal, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(thrice.calls == 3);

  // Two registrations on one signal are independent; both fire.
  core().hsa_signal_store_relaxed_fn(signal, 1);
  HandlerLog first, second;
  CHECK_STATUS(async_handler(signal, HSA_SIGNAL_CONDITION_LT, 1, log_handler, &first),
               HSA_STATUS_SUCCESS);
  CHECK_STATUS(async_handler(signal, HSA_SIGNAL_CONDITION_NE, 1, log_handler, &second),
               HSA_STATUS_SUCCESS);
  core().hsa_signal_store_relaxed_fn(signal, -2);
  CHECK(eventually([&] { return first.calls == 1 && second.calls == 1; }));
  CHECK(first.last == -2 && second.last == -2);

  // A signal destroyed while a handler is armed drops the handler uncalled;
  // handlers survive reset like signals.
  hsa_signal_t doomed = make_signal(1);
  HandlerLog never;
  CHECK_STATUS(async_handler(doomed, HSA_SIGNAL_CONDITION_EQ, 0, log_handler, &never),
               HSA_STATUS_SUCCESS);
  CHECK(eventually([&] { return count(HSA_RT_COUNT_SIGNAL_HANDLERS) == armed_before + 1; }));
  hsa_rt_reset(1);
  CHECK(count(HSA_RT_COUNT_SIGNAL_HANDLERS) == armed_before + 1);
  CHECK_STATUS(core().hsa_signal_destroy_fn(doomed), HSA_STATUS_SUCCESS);
  CHECK(eventually([&] { return count(HSA_RT_COUNT_SIGNAL_HANDLERS) == armed_before; }));
  CHECK(never.calls == 0);
  CHECK(count(HSA_RT_COUNT_INVALID_SIGNAL_USES) == 0);
  core().hsa_signal_destroy_fn(signal);
}

#if HSA_RT_HAVE_VMEM
CASE("async copies: on an engine: one of the copying GPU's, then as any copy", kBoth) {
  hsa_rt_reset(1);
  const auto on_engine = amd().hsa_amd_memory_async_copy_on_engine_fn;
  CHECK(on_engine != nullptr);
  char* dev = static_cast<char*>(device_alloc(4096));
  std::vector<char> host(4096, 'e');
  hsa_signal_t done = make_signal(1);
  const uint64_t accepted = count(HSA_RT_COUNT_ASYNC_COPIES);
  CHECK_STATUS(on_engine(dev, gpu(0), host.data(), cpu(), 4096, 0, nullptr, done,
                         HSA_AMD_SDMA_ENGINE_0, false),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(dev_byte(dev) == 'e' && dev_byte(dev, 4095) == 'e');
  CHECK(count(HSA_RT_COUNT_COPIES_HOST_TO_DEVICE) == 1 &&
        count(HSA_RT_COUNT_ASYNC_COPIES) == accepted + 1);
  core().hsa_signal_store_relaxed_fn(done, 1);
  // The host backend's GPUs have 8 engines (an MI250X GCD); a CUDA GPU has
  // its copy engines (CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT).
  CHECK_STATUS(on_engine(host.data(), cpu(), dev, gpu(0), 16, 0, nullptr, done,
                         on_host() ? HSA_AMD_SDMA_ENGINE_7 : HSA_AMD_SDMA_ENGINE_0, true),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));

  // The engine: one bit, one of the GPU's; none for CPU to CPU.
  CHECK_STATUS(on_engine(dev, gpu(0), host.data(), cpu(), 16, 0, nullptr, done,
                         static_cast<hsa_amd_sdma_engine_id_t>(0), false),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(on_engine(dev, gpu(0), host.data(), cpu(), 16, 0, nullptr, done,
                         static_cast<hsa_amd_sdma_engine_id_t>(0x3), false),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(on_engine(dev, gpu(0), host.data(), cpu(), 16, 0, nullptr, done,
                         on_host() ? HSA_AMD_SDMA_ENGINE_8
                                   : static_cast<hsa_amd_sdma_engine_id_t>(1u << 20),
                         false),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  std::vector<char> other(16);
  CHECK_STATUS(on_engine(other.data(), cpu(), host.data(), cpu(), 16, 0, nullptr, done,
                         HSA_AMD_SDMA_ENGINE_0, false),
               HSA_STATUS_ERROR);
  // The shared checks first, size 0 before the engine.
  const uint64_t refused = violations();
  CHECK_STATUS(on_engine(nullptr, gpu(0), host.data(), cpu(), 16, 0, nullptr, done,
                         HSA_AMD_SDMA_ENGINE_0, false),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(violations() == refused + 1);
  CHECK_STATUS(on_engine(dev, hsa_agent_t{9}, host.data(), cpu(), 16, 0, nullptr, done,
                         HSA_AMD_SDMA_ENGINE_0, false),
               HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK_STATUS(on_engine(dev, gpu(0), host.data(), cpu(), 16, 0, nullptr, hsa_signal_t{0},
                         HSA_AMD_SDMA_ENGINE_0, false),
               HSA_STATUS_ERROR_INVALID_SIGNAL);
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(on_engine(dev, gpu(0), host.data(), cpu(), 0, 0, nullptr, done,
                         static_cast<hsa_amd_sdma_engine_id_t>(0), false),
               HSA_STATUS_SUCCESS);
  // Faults and violations as for hsa_amd_memory_async_copy.
  hsa_rt_inject(HSA_RT_FAULT_NTH_ASYNC_COPY, 0, 1);
  CHECK_STATUS(on_engine(dev, gpu(0), host.data(), cpu(), 16, 0, nullptr, done,
                         HSA_AMD_SDMA_ENGINE_0, false),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(core().hsa_signal_load_relaxed_fn(done) == 1);
  hsa_rt_inject(HSA_RT_FAULT_NTH_ASYNC_COPY_COMPLETION, 0, 1);
  CHECK_STATUS(on_engine(dev, gpu(0), host.data(), cpu(), 16, 0, nullptr, done,
                         HSA_AMD_SDMA_ENGINE_0, false),
               HSA_STATUS_SUCCESS);
  CHECK(core().hsa_signal_wait_scacquire_fn(done, HSA_SIGNAL_CONDITION_LT, 0, 5000000000ull,
                                            HSA_WAIT_STATE_BLOCKED) == -1);
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(on_engine(dev + 4000, gpu(0), host.data(), cpu(), 200, 0, nullptr, done,
                         HSA_AMD_SDMA_ENGINE_0, false),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(violations() == refused + 2);
  CHECK(count(HSA_RT_COUNT_ASYNC_COPIES) == accepted + 4);
  core().hsa_signal_destroy_fn(done);
}
#endif

CASE("runtime: shutdown frees everything; entries answer NOT_INITIALIZED until init",
     kBoth | kLast) {
  hsa_rt_reset(1);
  const hsa_amd_memory_pool_t vram = pool(gpu(0), HSA_RT_POOL_DEVICE_COARSE);
  CHECK(device_alloc(4096) != nullptr);
  const hsa_signal_t signal = make_signal(1);
  static char locked[4096];
  void* agent_ptr = nullptr;
  CHECK_STATUS(amd().hsa_amd_memory_lock_fn(locked, sizeof(locked), nullptr, 0, &agent_ptr),
               HSA_STATUS_SUCCESS);
  hsa_rt_shutdown();
  CHECK(!hsa_rt_initialized() && hsa_rt_gpu_count() == 0 && cpu().handle == 0);
  CHECK(count(HSA_RT_COUNT_LIVE_SIGNALS) == 0 && count(HSA_RT_COUNT_LIVE_ALLOCATIONS) == 0 &&
        count(HSA_RT_COUNT_VMEM_MAPPINGS) == 0 && count(HSA_RT_COUNT_VMEM_HANDLES) == 0 &&
        count(HSA_RT_COUNT_VMEM_RESERVATIONS) == 0 && count(HSA_RT_COUNT_LOCKED_RANGES) == 0);
  void* ptr = nullptr;
  CHECK_STATUS(amd().hsa_amd_memory_pool_allocate_fn(vram, 64, 0, &ptr),
               HSA_STATUS_ERROR_NOT_INITIALIZED);
  CHECK_STATUS(core().hsa_signal_destroy_fn(signal), HSA_STATUS_ERROR_NOT_INITIALIZED);
  CHECK(hsa_rt_init() == HSA_RT_INIT_OK && hsa_rt_initialized() && hsa_rt_gpu_count() >= 1);
  CHECK_STATUS(core().hsa_signal_destroy_fn(signal), HSA_STATUS_ERROR_INVALID_SIGNAL);
}

CASE("runtime: a copy and a handler left blocked do not hold up exit", kBoth | kLast) {
  hsa_rt_reset(1);
  static char host[16];
  void* dev = device_alloc(16);
  hsa_signal_t gate = make_signal(1);
  hsa_signal_t done = make_signal(1);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dev, gpu(0), host, cpu(), 16, 1, &gate, done),
               HSA_STATUS_SUCCESS);
  // And an async handler armed on a signal that never satisfies it: its
  // thread stays blocked while the process exits.
  static HandlerLog pending;
  hsa_signal_t never = make_signal(1);
  CHECK_STATUS(amd().hsa_amd_signal_async_handler_fn(never, HSA_SIGNAL_CONDITION_EQ, 0,
                                                     log_handler, &pending),
               HSA_STATUS_SUCCESS);
}

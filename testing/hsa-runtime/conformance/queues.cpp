// queues.cpp: AQL queues and their packet processors: creation, indices,
// dispatches of the library's kernels (kernels/replay_kernels.cu) checked
// against a reference on the host, barrier packets, and what a failing
// dispatch does.

#include <atomic>
#include <cstdio>

#include "conformance.h"

using namespace conformance;

namespace {

// What a queue's error callback saw.
struct QueueErrors {
  std::atomic<int> calls{0};
  std::atomic<uint32_t> status{0};
  std::atomic<hsa_queue_t*> queue{nullptr};
};

void record_queue_error(hsa_status_t status, hsa_queue_t* queue, void* data) {
  auto* errors = static_cast<QueueErrors*>(data);
  errors->status = static_cast<uint32_t>(status);
  errors->queue = queue;
  ++errors->calls;
}

hsa_queue_t* make_queue(hsa_agent_t agent, QueueErrors* errors, uint32_t size = 64) {
  hsa_queue_t* queue = nullptr;
  CHECK_STATUS(core().hsa_queue_create_fn(agent, size, HSA_QUEUE_TYPE_MULTI, record_queue_error,
                                          errors, UINT32_MAX, UINT32_MAX, &queue),
               HSA_STATUS_SUCCESS);
  return queue;
}

// Kernel argument memory as the library gets it: the kernarg pool, made
// reachable by the GPU (ROCr's pool allocations are the CPU's until then).
void* kernarg_alloc(size_t size, hsa_agent_t agent) {
  void* ptr = pool_alloc(pool(cpu(), HSA_RT_POOL_SYSTEM_KERNARG), size);
  CHECK_STATUS(amd().hsa_amd_agents_allow_access_fn(1, &agent, nullptr, ptr), HSA_STATUS_SUCCESS);
  return ptr;
}

// One lane of replay_kernels.h's hash of a block.
uint64_t lane(const uint8_t* block, uint64_t len, const uint32_t* keys, uint32_t which) {
  uint64_t both[2];
  reference_hash(block, len, keys, both);
  return both[which];
}

// The library's kernels loaded on GPU 0, a queue with an error callback, a
// completion signal, hash keys in device memory (and their host copy).
struct DispatchFixture {
  hsa_executable_t exe{0};
  Kernel scatter, hash, compare;
  QueueErrors errors;
  hsa_queue_t* queue = nullptr;
  hsa_signal_t done{0};
  uint32_t* keys = nullptr;  // device memory
  std::vector<uint32_t> host_keys = std::vector<uint32_t>(KR_HASH_KEYS);

  bool set_up(uint32_t gpus = 1) {
    if (!reset(gpus)) return false;
    const std::vector<uint8_t> object = library_code_object();
    if (object.empty()) {
      kr_case_skip("no code object of the library's kernels ($KERNEL_REPLAY_CODE_OBJECT)");
      return false;
    }
    CHECK_STATUS(load_executable(object, gpu(0), &exe), HSA_STATUS_SUCCESS);
    const bool found = find_kernel(exe, gpu(0), "kr_scatter_copy.kd", &scatter) &&
                       find_kernel(exe, gpu(0), "kr_hash_blocks.kd", &hash) &&
                       find_kernel(exe, gpu(0), "kr_compare_copy.kd", &compare);
    queue = make_queue(gpu(0), &errors);
    done = make_signal(0);
    keys = static_cast<uint32_t*>(device_alloc(KR_HASH_KEYS * sizeof(uint32_t)));
    uint64_t seed = 12345;
    for (uint32_t& key : host_keys) key = static_cast<uint32_t>(next_random(&seed) >> 16);
    dev_write(keys, host_keys.data(), KR_HASH_KEYS * sizeof(uint32_t));
    return CHECK(found && queue != nullptr);
  }

  // One dispatch of `workgroups` workgroups; waited for, false when it did
  // not complete (10 s: the stand-in driver runs kernels on one thread).
  bool run(const Kernel& kernel, const void* kernarg, uint32_t workgroups,
           uint16_t workgroup_x = KR_WORKGROUP, bool wait = true) {
    core().hsa_signal_store_screlease_fn(done, 1);
    hsa_rt_submit_dispatch(queue, kernel.object, kernarg, workgroups * uint32_t{workgroup_x},
                           workgroup_x, kernel.group_size, done);
    return !wait || core().hsa_signal_wait_scacquire_fn(done, HSA_SIGNAL_CONDITION_EQ, 0,
                                                        10000000000ull,
                                                        HSA_WAIT_STATE_BLOCKED) == 0;
  }

  void tear_down() {
    core().hsa_signal_destroy_fn(done);
    if (queue != nullptr) CHECK_STATUS(core().hsa_queue_destroy_fn(queue), HSA_STATUS_SUCCESS);
  }
};

}  // namespace

CASE("queues: creation checks as ROCr's, the ring, the indices, retired by reset", kBoth) {
  if (!reset(2, 1)) return;
  const auto create = [](hsa_agent_t agent, uint32_t size, hsa_queue_type32_t type,
                         uint32_t private_size, hsa_queue_t** queue) {
    return core().hsa_queue_create_fn(agent, size, type, nullptr, nullptr, private_size,
                                      UINT32_MAX, queue);
  };
  hsa_queue_t* queue = nullptr;
  CHECK_STATUS(create(gpu(0), 64, HSA_QUEUE_TYPE_MULTI, 0, nullptr),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(create(gpu(0), 0, HSA_QUEUE_TYPE_MULTI, 0, &queue),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(create(gpu(0), 100, HSA_QUEUE_TYPE_MULTI, 0, &queue),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(create(gpu(0), 64, 3, 0, &queue), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(create(hsa_agent_t{5}, 64, HSA_QUEUE_TYPE_MULTI, 0, &queue),
               HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK_STATUS(create(cpu(), 64, HSA_QUEUE_TYPE_MULTI, 0, &queue), HSA_STATUS_ERROR);
  CHECK_STATUS(create(gpu(0), 64, HSA_QUEUE_TYPE_COOPERATIVE, 0, &queue),
               HSA_STATUS_ERROR_INVALID_QUEUE_CREATION);
  CHECK_STATUS(create(gpu(0), 0x40000, HSA_QUEUE_TYPE_MULTI, 0, &queue),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK_STATUS(create(gpu(0), 32, HSA_QUEUE_TYPE_MULTI, 0, &queue),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(create(gpu(0), 64, HSA_QUEUE_TYPE_MULTI, 300000, &queue),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  hsa_rt_inject(HSA_RT_FAULT_NEXT_QUEUE_CREATIONS, 0, 1);
  CHECK_STATUS(create(gpu(0), 64, HSA_QUEUE_TYPE_MULTI, 0, &queue),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK(count(HSA_RT_COUNT_LIVE_QUEUES) == 0);

  const uint64_t signals_before = count(HSA_RT_COUNT_LIVE_SIGNALS);
  CHECK_STATUS(create(gpu(0), 64, HSA_QUEUE_TYPE_SINGLE, UINT32_MAX, &queue), HSA_STATUS_SUCCESS);
  CHECK(queue != nullptr && count(HSA_RT_COUNT_LIVE_QUEUES) == 1);
  if (queue == nullptr) return;
  CHECK(queue->size == 64 && queue->type == HSA_QUEUE_TYPE_SINGLE);
  CHECK(queue->base_address != nullptr && queue->doorbell_signal.handle != 0);
  CHECK((queue->features & HSA_QUEUE_FEATURE_KERNEL_DISPATCH) != 0);
  CHECK(count(HSA_RT_COUNT_LIVE_SIGNALS) == signals_before);  // the doorbell is the runtime's
  // Every slot starts INVALID.
  const auto* ring = static_cast<const uint16_t*>(queue->base_address);
  CHECK((ring[0] & 0xff) == HSA_PACKET_TYPE_INVALID &&
        (ring[63 * 32] & 0xff) == HSA_PACKET_TYPE_INVALID);
  // Indices: real atomics.
  CHECK(core().hsa_queue_load_write_index_relaxed_fn(queue) == 0);
  CHECK(core().hsa_queue_add_write_index_scacq_screl_fn(queue, 3) == 0);
  CHECK(core().hsa_queue_cas_write_index_screlease_fn(queue, 3, 5) == 3);
  CHECK(core().hsa_queue_cas_write_index_relaxed_fn(queue, 3, 9) == 5);
  core().hsa_queue_store_write_index_relaxed_fn(queue, 0);
  CHECK(core().hsa_queue_load_write_index_scacquire_fn(queue) == 0);
  CHECK(core().hsa_queue_load_read_index_scacquire_fn(queue) == 0);
  CHECK_STATUS(core().hsa_queue_destroy_fn(queue), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_queue_destroy_fn(queue), HSA_STATUS_ERROR_INVALID_QUEUE);
  CHECK_STATUS(core().hsa_queue_destroy_fn(nullptr), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(count(HSA_RT_COUNT_LIVE_QUEUES) == 0 &&
        count(HSA_RT_COUNT_LIVE_SIGNALS) == signals_before);

  // Reset retires every queue; a stale pointer is still harmless.
  QueueErrors errors;
  queue = make_queue(gpu(last_gpu()), &errors);
  hsa_rt_reset(2);
  CHECK(count(HSA_RT_COUNT_LIVE_QUEUES) == 0);
  CHECK(core().hsa_queue_load_write_index_relaxed_fn(queue) == 0);
  CHECK_STATUS(core().hsa_queue_destroy_fn(queue), HSA_STATUS_ERROR_INVALID_QUEUE);
}

CASE("queues: the library's kernels from a code object reader, their attributes", kBoth) {
  if (!reset(2, 1)) return;
  const std::vector<uint8_t> object = library_code_object();
  if (object.empty()) {
    kr_case_skip("no code object of the library's kernels ($KERNEL_REPLAY_CODE_OBJECT)");
    return;
  }
  hsa_code_object_reader_t reader{0};
  CHECK_STATUS(core().hsa_code_object_reader_create_from_memory_fn(nullptr, 4, &reader),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_code_object_reader_create_from_memory_fn(object.data(), object.size(),
                                                                   &reader),
               HSA_STATUS_SUCCESS);
  hsa_executable_t exe{0};
  CHECK_STATUS(core().hsa_executable_create_alt_fn(HSA_PROFILE_FULL,
                                                   HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT,
                                                   nullptr, &exe),
               HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_executable_load_agent_code_object_fn(exe, gpu(0), reader, nullptr,
                                                               nullptr),
               HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_executable_freeze_fn(exe, nullptr), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_executable_freeze_fn(exe, nullptr), HSA_STATUS_ERROR_FROZEN_EXECUTABLE);
  CHECK_STATUS(core().hsa_executable_load_agent_code_object_fn(exe, gpu(0), reader, nullptr,
                                                               nullptr),
               HSA_STATUS_ERROR_FROZEN_EXECUTABLE);
  CHECK_STATUS(core().hsa_code_object_reader_destroy_fn(reader), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_code_object_reader_destroy_fn(reader),
               HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER);
  int executables = 0;
  CHECK_STATUS(hsa_rt_iterate_executables(count_executable, &executables), HSA_STATUS_SUCCESS);
  CHECK(executables == 1);
  Kernel scatter, hash, compare;
  CHECK(find_kernel(exe, gpu(0), "kr_scatter_copy.kd", &scatter) &&
        find_kernel(exe, gpu(0), "kr_hash_blocks.kd", &hash) &&
        find_kernel(exe, gpu(0), "kr_compare_copy.kd", &compare));
  CHECK(scatter.object != 0 && scatter.object != hash.object);
  CHECK(scatter.kernarg_size == sizeof(kr_scatter_copy_args) &&
        hash.kernarg_size == sizeof(kr_hash_blocks_args) &&
        compare.kernarg_size == sizeof(kr_compare_copy_args));
  // Host: the descriptors' segment sizes; CUDA: the hash's static shared
  // memory (two lanes of sums per work-item).
  CHECK(on_host() ? compare.private_size == 16 && hash.group_size == 0
                  : hash.group_size >= 2 * KR_WORKGROUP * 8);
  hsa_executable_symbol_t missing{0};
  hsa_agent_t agent = gpu(0);
  CHECK_STATUS(core().hsa_executable_get_symbol_by_name_fn(exe, "no_such_kernel.kd", &agent,
                                                           &missing),
               HSA_STATUS_ERROR_INVALID_SYMBOL_NAME);
  agent = gpu(last_gpu());
  CHECK(last_gpu() == 0 || core().hsa_executable_get_symbol_by_name_fn(
                               exe, "kr_scatter_copy.kd", &agent, &missing) ==
                               HSA_STATUS_ERROR_INVALID_SYMBOL_NAME);  // loaded for GPU 0 only
  CHECK_STATUS(core().hsa_executable_destroy_fn(exe), HSA_STATUS_SUCCESS);
}

CASE("queues: dispatches of the library's kernels match the host reference", kBoth) {
  DispatchFixture f;
  if (!f.set_up()) return;
  // Scatter: three records between device buffers, in one dispatch.
  auto* src = static_cast<uint8_t*>(device_alloc(3 * 4096));
  auto* dst = static_cast<uint8_t*>(device_alloc(3 * 4096));
  std::vector<uint8_t> host_src(3 * 4096), back(3 * 4096);
  for (int i = 0; i < 3 * 4096; ++i) host_src[size_t(i)] = static_cast<uint8_t>(i * 7 + 1);
  dev_write(src, host_src.data(), host_src.size());
  dev_fill(dst, 0, 3 * 4096);
  auto* records = static_cast<kr_copy_record*>(kernarg_alloc(3 * sizeof(kr_copy_record), gpu(0)));
  for (uint64_t i = 0; i < 3; ++i) {
    records[i] = kr_copy_record{reinterpret_cast<uintptr_t>(dst + i * 4096),
                                reinterpret_cast<uintptr_t>(src + (2 - i) * 4096), 4096 - i * 100};
  }
  auto* scatter_args =
      static_cast<kr_scatter_copy_args*>(kernarg_alloc(sizeof(kr_scatter_copy_args), gpu(0)));
  *scatter_args = kr_scatter_copy_args{records, 3};
  const uint64_t refused = violations();
  CHECK(f.run(f.scatter, scatter_args, 3));
  dev_read(back.data(), dst, back.size());
  for (uint64_t i = 0; i < 3; ++i) {
    CHECK(std::memcmp(back.data() + i * 4096, host_src.data() + (2 - i) * 4096,
                      4096 - i * 100) == 0);
  }
  CHECK(back[2 * 4096 - 1] == 0);  // record 1 stopped 100 bytes short
  CHECK(hsa_rt_dispatch_count("kr_scatter_copy") == 1);
  CHECK(hsa_rt_dispatch_count("kr_scatter_copy.kd") == 1);
  CHECK(core().hsa_queue_load_read_index_relaxed_fn(f.queue) == 1);

  // Hash: every block, both lanes, against the reference. Four records
  // (one workgroup's worth), two of them in the dispatch.
  auto* blocks = static_cast<kr_hash_block*>(
      kernarg_alloc(KR_BLOCKS_PER_GROUP * sizeof(kr_hash_block), gpu(0)));
  blocks[0] = kr_hash_block{reinterpret_cast<uintptr_t>(src), 4096};
  blocks[1] = kr_hash_block{reinterpret_cast<uintptr_t>(src + 4096), 1001};  // a short block
  for (uint32_t i = 2; i < KR_BLOCKS_PER_GROUP; ++i) {
    blocks[i] = kr_hash_block{reinterpret_cast<uintptr_t>(src + 2 * 4096), 4096};
  }
  const size_t hash_bytes = 2 * KR_BLOCKS_PER_GROUP * sizeof(uint64_t);
  auto* hashes = static_cast<uint64_t*>(device_alloc(hash_bytes));
  std::vector<uint64_t> seen(2 * KR_BLOCKS_PER_GROUP, 7);
  dev_write(hashes, seen.data(), hash_bytes);
  auto* hash_args =
      static_cast<kr_hash_blocks_args*>(kernarg_alloc(sizeof(kr_hash_blocks_args), gpu(0)));
  *hash_args = kr_hash_blocks_args{blocks, 2, f.keys, hashes};
  CHECK(f.run(f.hash, hash_args, 1));
  dev_read(seen.data(), hashes, hash_bytes);
  const uint32_t* keys = f.host_keys.data();
  CHECK(seen[0] == lane(host_src.data(), 4096, keys, 0));
  CHECK(seen[1] == lane(host_src.data(), 4096, keys, 1));
  CHECK(seen[2] == lane(host_src.data() + 4096, 1001, keys, 0));
  CHECK(seen[3] == lane(host_src.data() + 4096, 1001, keys, 1));
  CHECK(seen[4] == 7 && seen[6] == 7);  // past count: not written
  // KR_BLOCKS_PER_GROUP blocks per workgroup and none past count: a count
  // larger than the grid touches only the grid's blocks (here the first four).
  hash_args->count = uint64_t{1} << 60;
  CHECK(f.run(f.hash, hash_args, 1));
  dev_read(seen.data(), hashes, hash_bytes);
  CHECK(seen[0] == lane(host_src.data(), 4096, keys, 0));
  CHECK(seen[6] == lane(host_src.data() + 2 * 4096, 4096, keys, 0));
  hash_args->count = 2;

  // Compare-and-copy (a restore): live blocks are dst; one changed since the
  // hashes were taken, so only it is copied back from the arena (src).
  auto* live = static_cast<uint8_t*>(device_alloc(2 * 4096));
  std::vector<uint8_t> host_live(host_src.begin(), host_src.begin() + 2 * 4096);
  host_live[4096 + 10] ^= 0xFF;
  dev_write(live, host_live.data(), host_live.size());
  auto* pairs = static_cast<kr_block_pair*>(kernarg_alloc(2 * sizeof(kr_block_pair), gpu(0)));
  pairs[0] = kr_block_pair{reinterpret_cast<uintptr_t>(live), reinterpret_cast<uintptr_t>(src),
                           4096};
  pairs[1] = kr_block_pair{reinterpret_cast<uintptr_t>(live + 4096),
                           reinterpret_cast<uintptr_t>(src + 4096), 1001};
  auto* changed = static_cast<uint64_t*>(device_alloc(sizeof(uint64_t)));
  const uint64_t zero = 0;
  dev_write(changed, &zero, sizeof(zero));
  auto* compare_args =
      static_cast<kr_compare_copy_args*>(kernarg_alloc(sizeof(kr_compare_copy_args), gpu(0)));
  *compare_args = kr_compare_copy_args{pairs, 2, f.keys, hashes, changed, 0, 0};
  CHECK(f.run(f.compare, compare_args, 2));
  uint64_t copied = 0;
  dev_read(&copied, changed, sizeof(copied));
  dev_read(host_live.data(), live, host_live.size());
  CHECK(copied == 1);
  CHECK(std::memcmp(host_live.data(), host_src.data(), 4096 + 1001) == 0);
  CHECK(hsa_rt_dispatch_count(nullptr) == 4);
  CHECK(violations() == refused);
  CHECK(f.errors.calls == 0);

  // A barrier-AND with a completion signal waits for its dependency.
  hsa_signal_t dependency = make_signal(1);
  hsa_signal_t barrier_done = make_signal(1);
  hsa_rt_submit_barrier(f.queue, false, &dependency, 1, barrier_done);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(core().hsa_signal_load_relaxed_fn(barrier_done) == 1);
  core().hsa_signal_store_relaxed_fn(dependency, 0);
  CHECK(wait_for(barrier_done, 0));
  core().hsa_signal_destroy_fn(dependency);
  core().hsa_signal_destroy_fn(barrier_done);
  f.tear_down();
}

namespace {

// Runs one dispatch (0: kr_scatter_copy of a good record, else kernarg's
// own) on a fresh fixture and returns what its queue's error callback got.
template <typename Prepare>
hsa_status_t fault_status(Prepare prepare, uint64_t kernel, uint32_t workgroups,
                          uint16_t workgroup_x = KR_WORKGROUP, uint32_t group_size = 0) {
  DispatchFixture g;
  if (!g.set_up()) return HSA_STATUS_SUCCESS;
  const void* kernarg = prepare(g);
  Kernel k = kernel == 0 ? g.scatter : kernel == 1 ? g.hash : Kernel{kernel, 0, 0, 0};
  if (group_size != 0) k.group_size = group_size;
  g.run(k, kernarg, workgroups, workgroup_x, /*wait=*/false);
  CHECK(eventually([&] { return g.errors.calls.load() == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(g.errors.calls.load() == 1 && g.errors.queue == g.queue);
  CHECK(core().hsa_signal_load_relaxed_fn(g.done) == 1);  // never signalled
  const auto status = static_cast<hsa_status_t>(g.errors.status.load());
  g.tear_down();
  return status;
}

const void* good_args(DispatchFixture&) {
  auto* s = static_cast<uint8_t*>(device_alloc(4096));
  auto* r = static_cast<kr_copy_record*>(kernarg_alloc(sizeof(kr_copy_record), gpu(0)));
  *r = kr_copy_record{reinterpret_cast<uintptr_t>(s + 2048), reinterpret_cast<uintptr_t>(s), 1024};
  auto* a = static_cast<kr_scatter_copy_args*>(kernarg_alloc(sizeof(kr_scatter_copy_args), gpu(0)));
  *a = kr_scatter_copy_args{r, 1};
  return a;
}

}  // namespace

CASE("queues: a dispatch the front end refuses suspends the queue, tells its callback", kBoth) {
  if (library_code_object().empty()) {
    kr_case_skip("no code object of the library's kernels ($KERNEL_REPLAY_CODE_OBJECT)");
    return;
  }
  hsa_rt_inject(HSA_RT_FAULT_NEXT_DISPATCHES, 0, 1);  // armed before set_up's reset: cleared
  CHECK(fault_status([](DispatchFixture& g) {
          hsa_rt_inject(HSA_RT_FAULT_NEXT_DISPATCHES, 0, 1);
          return good_args(g);
        }, 0, 1) == kAperture);
  CHECK(violations() == 0 && hsa_rt_dispatch_count(nullptr) == 0);  // an injected fault
  // Unknown kernel object; a workgroup of 0 or past 1024 work-items.
  CHECK(fault_status(good_args, 64, 1) == HSA_STATUS_ERROR_INVALID_CODE_OBJECT);
  CHECK(fault_status(good_args, 0, 1, 0) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(fault_status(good_args, 0, 1, 2048) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
}

CASE("queues: a dispatch touching what its GPU may not: a violation, nothing run", kHost) {
  DispatchFixture f;
  if (!f.set_up()) return;
  auto* src = static_cast<uint8_t*>(device_alloc(4096));
  auto* dst = static_cast<uint8_t*>(device_alloc(4096));
  std::memset(dst, 0, 4096);
  std::memset(src, 0x5A, 4096);
  auto* records = static_cast<kr_copy_record*>(kernarg_alloc(2 * sizeof(kr_copy_record), gpu(0)));
  auto* args =
      static_cast<kr_scatter_copy_args*>(kernarg_alloc(sizeof(kr_scatter_copy_args), gpu(0)));
  // A record whose destination was freed: one violation, nothing written
  // (the quarantine stays poison, the good record is not copied either), the
  // queue suspended, its callback told as ROCr tells a memory fault.
  auto* freed = static_cast<uint8_t*>(device_alloc(4096));
  CHECK_STATUS(amd().hsa_amd_memory_pool_free_fn(freed), HSA_STATUS_SUCCESS);
  records[0] =
      kr_copy_record{reinterpret_cast<uintptr_t>(dst), reinterpret_cast<uintptr_t>(src), 4096};
  records[1] =
      kr_copy_record{reinterpret_cast<uintptr_t>(freed), reinterpret_cast<uintptr_t>(src), 64};
  *args = kr_scatter_copy_args{records, 2};
  f.run(f.scatter, args, 2, KR_WORKGROUP, /*wait=*/false);
  CHECK(eventually([&] { return f.errors.calls.load() == 1; }));
  CHECK(f.errors.status == static_cast<uint32_t>(kAperture) && f.errors.queue == f.queue);
  CHECK(violations() == 1 && hsa_rt_quarantine_intact());
  CHECK(dst[0] == 0);
  CHECK(core().hsa_signal_load_relaxed_fn(f.done) == 1);  // never signalled
  CHECK(core().hsa_queue_load_read_index_relaxed_fn(f.queue) == 0);
  CHECK(hsa_rt_dispatch_count(nullptr) == 0);
  f.tear_down();

  // A shape the host builds of the kernels do not run.
  CHECK(fault_status(good_args, 0, 1, 64) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  // Kernarg memory the GPU was never given: a violation (ROCr maps pool
  // allocations for the CPU only until hsa_amd_agents_allow_access).
  CHECK(fault_status([](DispatchFixture&) -> const void* {
          return pool_alloc(pool(cpu(), HSA_RT_POOL_SYSTEM_KERNARG), 64);
        }, 0, 1) == kAperture);
  CHECK(violations() == 1);
  // A record pointing into host memory the GPU cannot reach.
  static uint8_t host_buffer[256];
  CHECK(fault_status([](DispatchFixture&) -> const void* {
          auto* r = static_cast<kr_copy_record*>(kernarg_alloc(sizeof(kr_copy_record), gpu(0)));
          auto* d = static_cast<uint8_t*>(device_alloc(4096));
          *r = kr_copy_record{reinterpret_cast<uintptr_t>(d),
                              reinterpret_cast<uintptr_t>(host_buffer), sizeof(host_buffer)};
          auto* a = static_cast<kr_scatter_copy_args*>(
              kernarg_alloc(sizeof(kr_scatter_copy_args), gpu(0)));
          *a = kr_scatter_copy_args{r, 1};
          return a;
        }, 0, 1) == kAperture);
  // A hash dispatch whose blocks array runs past its allocation (300
  // blocks of 16 bytes in one 4 KiB granule): the read would overrun.
  CHECK(fault_status([](DispatchFixture& g) -> const void* {
          auto* b = static_cast<kr_hash_block*>(kernarg_alloc(4096, gpu(0)));
          auto* d = static_cast<uint8_t*>(device_alloc(4096));
          for (int i = 0; i < 256; ++i) b[i] = kr_hash_block{reinterpret_cast<uintptr_t>(d), 4096};
          auto* a = static_cast<kr_hash_blocks_args*>(
              kernarg_alloc(sizeof(kr_hash_blocks_args), gpu(0)));
          *a = kr_hash_blocks_args{b, 300, g.keys,
                                   static_cast<uint64_t*>(device_alloc(300 * 16))};
          return a;
        }, 1, 300) == kAperture);
  CHECK(violations() == 1);  // counted since the fixture's reset
  CHECK(hsa_rt_quarantine_intact());
}

CASE("queues: a launch the driver refuses: OUT_OF_RESOURCES to the callback, once", kCuda) {
  if (library_code_object().empty()) {
    kr_case_skip("no code object of the library's kernels ($KERNEL_REPLAY_CODE_OBJECT)");
    return;
  }
  // More dynamic shared memory than any GPU has (the stand-in: 48 KiB).
  CHECK(fault_status(good_args, 0, 1, KR_WORKGROUP, 1u << 30) ==
        HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK(count(HSA_RT_COUNT_BACKEND_ERRORS) == 1);  // printed and counted
}

// A real code object of the library's kernels, built by CMake with clang-19
// when it is found (KR_TEST_CODE_OBJECT): it loads as ROCr would load it
// and the host backend runs a dispatch of it.
CASE("queues: a real gfx942 code object of the library's kernels loads and runs", kHost) {
#ifdef KR_TEST_CODE_OBJECT
  std::FILE* file = std::fopen(KR_TEST_CODE_OBJECT, "rb");
  CHECK(file != nullptr);
  if (file == nullptr) return;
  std::vector<uint8_t> object;
  uint8_t chunk[4096];
  for (size_t n; (n = std::fread(chunk, 1, sizeof(chunk), file)) > 0;) {
    object.insert(object.end(), chunk, chunk + n);
  }
  std::fclose(file);
  hsa_rt_reset(1);
  hsa_executable_t exe{0};
  CHECK_STATUS(load_executable(object, gpu(0), &exe), HSA_STATUS_SUCCESS);
  Kernel scatter, other;
  CHECK(find_kernel(exe, gpu(0), "kr_scatter_copy.kd", &scatter) && scatter.object != 0 &&
        find_kernel(exe, gpu(0), "kr_hash_blocks.kd", &other) &&
        find_kernel(exe, gpu(0), "kr_compare_copy.kd", &other));
  QueueErrors errors;
  hsa_queue_t* queue = make_queue(gpu(0), &errors);
  auto* s = static_cast<uint8_t*>(device_alloc(8192));
  std::memset(s, 0x42, 4096);
  auto* r = static_cast<kr_copy_record*>(kernarg_alloc(sizeof(kr_copy_record), gpu(0)));
  *r = kr_copy_record{reinterpret_cast<uintptr_t>(s + 4096), reinterpret_cast<uintptr_t>(s), 4096};
  auto* a = static_cast<kr_scatter_copy_args*>(kernarg_alloc(sizeof(kr_scatter_copy_args), gpu(0)));
  *a = kr_scatter_copy_args{r, 1};
  hsa_signal_t done = make_signal(1);
  hsa_rt_submit_dispatch(queue, scatter.object, a, KR_WORKGROUP, KR_WORKGROUP, 0, done);
  CHECK(wait_for(done, 0));
  CHECK(s[4096] == 0x42 && s[8191] == 0x42);
  core().hsa_signal_destroy_fn(done);
  CHECK_STATUS(core().hsa_queue_destroy_fn(queue), HSA_STATUS_SUCCESS);
  // The same object on an agent of another processor: refused.
  hsa_rt_set_agent_isa(gpu(0), "amdgcn-amd-amdhsa--gfx1100");
  CHECK_STATUS(load_executable(object, gpu(0), &exe), HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS);
#else
  kr_case_skip("no gfx942 code object of the kernels (no clang-19 found)");
#endif
}


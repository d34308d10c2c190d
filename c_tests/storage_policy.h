/* storage_policy.h: what the behaviour tests (C and C++) need to hold under
 * every storage policy.
 *
 * ctest runs each behaviour program once per policy (KERNEL_REPLAY_STORAGE
 * unset, i.e. auto, then baseline, device, pinned and pageable), so their
 * checks must not depend on where a snapshot keeps its copies:
 *   - a copy may be device-to-device (device tier; the test runtime also counts its
 *     pinned pool as device memory) rather than device-to-host and back, so
 *     tests count copies in every direction (one per region per snapshot and
 *     per restore, whatever the policy);
 *   - a snapshot may hold device memory as well as host memory, and arenas
 *     are retained after the snapshot is freed (kr_trim_retained releases
 *     them), so "nothing held" means: trimmed, then no host and no device
 *     bytes; and only BASELINE holds exactly the captured bytes;
 *   - device and pinned arenas are allocations of the runtime, so live
 *     allocation counts are taken relative to a count with the snapshot (or
 *     after kr_trim_retained / kr_finalize).
 */
#ifndef KR_TEST_STORAGE_POLICY_H
#define KR_TEST_STORAGE_POLICY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hsa_rt.h"
#include "kernel_replay.h"

/* Every copy the runtime performed or refused, whatever its direction. */
static inline uint64_t kr_test_copies(void) {
  return hsa_rt_count(HSA_RT_COUNT_COPIES_HOST_TO_HOST) +
         hsa_rt_count(HSA_RT_COUNT_COPIES_HOST_TO_DEVICE) +
         hsa_rt_count(HSA_RT_COUNT_COPIES_DEVICE_TO_HOST) +
         hsa_rt_count(HSA_RT_COUNT_COPIES_DEVICE_TO_DEVICE);
}

/* Memory the library holds for snapshots, host and device: live snapshots'
 * buffers and arenas, and arenas retained for reuse. */
static inline uint64_t kr_test_held(void) {
  return kr_host_bytes_in_use() + kr_device_bytes_in_use();
}

static inline kr_stats_t kr_test_stats(void) {
  kr_stats_t stats;
  memset(&stats, 0xA5, sizeof stats); /* every field must be written */
  kr_get_stats(&stats);
  return stats;
}

/* Of what is held, the arenas retained for reuse (no live snapshot's). */
static inline uint64_t kr_test_retained(void) {
  const kr_stats_t stats = kr_test_stats();
  return stats.retained_bytes[KR_TIER_DEVICE] + stats.retained_bytes[KR_TIER_PINNED] +
         stats.retained_bytes[KR_TIER_PAGEABLE];
}

/* What live snapshots hold (the baseline's buffers, or leased arenas). */
static inline uint64_t kr_test_leased(void) { return kr_test_held() - kr_test_retained(); }

/* Bytes of a snapshot's regions over the three tiers. */
static inline uint64_t kr_test_tier_total(const kr_snapshot_t* snapshot) {
  return kr_snapshot_tier_bytes(snapshot, KR_TIER_DEVICE) +
         kr_snapshot_tier_bytes(snapshot, KR_TIER_PINNED) +
         kr_snapshot_tier_bytes(snapshot, KR_TIER_PAGEABLE);
}

static inline const char* kr_test_policy_name(kr_storage_policy_t policy) {
  switch (policy) {
    case KR_STORAGE_AUTO:
      return "auto";
    case KR_STORAGE_DEVICE:
      return "device";
    case KR_STORAGE_PINNED:
      return "pinned";
    case KR_STORAGE_PAGEABLE:
      return "pageable";
    case KR_STORAGE_BASELINE:
      return "baseline";
  }
  return "unknown";
}

/* The policy KERNEL_REPLAY_STORAGE asks for, parsed as the library does
 * (trimmed, any case; auto when unset or unknown), so a program can check
 * that ctest really runs it under the policy its name says. */
static inline kr_storage_policy_t kr_test_policy_from_environment(void) {
  static const struct {
    const char* name;
    kr_storage_policy_t policy;
  } names[] = {{"auto", KR_STORAGE_AUTO},
               {"device", KR_STORAGE_DEVICE},
               {"pinned", KR_STORAGE_PINNED},
               {"pageable", KR_STORAGE_PAGEABLE},
               {"baseline", KR_STORAGE_BASELINE}};
  const char* text = getenv("KERNEL_REPLAY_STORAGE");
  char word[16];
  size_t length = 0;
  if (text == NULL) return KR_STORAGE_AUTO;
  while (*text == ' ' || *text == '\t' || *text == '\n') ++text;
  while (text[length] != '\0' && length < sizeof word - 1) {
    const char c = text[length];
    word[length] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    ++length;
  }
  while (length > 0 && (word[length - 1] == ' ' || word[length - 1] == '\t' ||
                        word[length - 1] == '\n')) {
    --length;
  }
  word[length] = '\0';
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
    if (strcmp(word, names[i].name) == 0) return names[i].policy;
  }
  return KR_STORAGE_AUTO;
}

static inline bool kr_test_is_baseline(void) { return kr_storage_policy() == KR_STORAGE_BASELINE; }

/* Where a snapshot of the test runtime's small test footprints keeps everything
 * under `policy`: auto has all the room it needs in device memory (16 GiB
 * pools, the default device budget); the baseline's buffers are pageable. */
static inline kr_storage_tier_t kr_test_tier_of(kr_storage_policy_t policy) {
  switch (policy) {
    case KR_STORAGE_AUTO:
    case KR_STORAGE_DEVICE:
      return KR_TIER_DEVICE;
    case KR_STORAGE_PINNED:
      return KR_TIER_PINNED;
    case KR_STORAGE_PAGEABLE:
    case KR_STORAGE_BASELINE:
      return KR_TIER_PAGEABLE;
  }
  return KR_TIER_PAGEABLE;
}

/* Runtime allocations (device or pinned arenas) one such snapshot adds. */
static inline uint64_t kr_test_runtime_arenas(kr_storage_policy_t policy) {
  const kr_storage_tier_t tier = kr_test_tier_of(policy);
  return tier == KR_TIER_DEVICE || tier == KR_TIER_PINNED ? 1 : 0;
}

/* With no snapshot alive: everything held is retained, kr_trim_retained
 * releases exactly that and returns its size, and then nothing is held,
 * host or device. False (with what differed on stderr) otherwise, e.g. when
 * a freed snapshot leaked its memory. */
static inline bool kr_test_trim_leaves_nothing_held(void) {
  const uint64_t held = kr_test_held();
  const uint64_t retained = kr_test_retained();
  const uint64_t released = kr_trim_retained();
  const uint64_t host_after = kr_host_bytes_in_use();
  const uint64_t device_after = kr_device_bytes_in_use();
  const bool ok = retained == held && released == held && host_after == 0 && device_after == 0;
  if (!ok) {
    fprintf(stderr,
            "  held %llu bytes, %llu of them retained; kr_trim_retained released %llu; "
            "afterwards host %llu, device %llu bytes held\n",
            (unsigned long long)held, (unsigned long long)retained,
            (unsigned long long)released, (unsigned long long)host_after,
            (unsigned long long)device_after);
  }
  return ok;
}

#endif /* KR_TEST_STORAGE_POLICY_H */

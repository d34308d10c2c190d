//! Test seams: what the project's own tests, benches and fuzzer reach that
//! is not API. Not part of the library's interface; see `ARCHITECTURE.md`.

use crate::memory_tracker::TRACKER;

/// The software runtime was reset behind the wrappers' back (every
/// allocation, mapping and executable gone, as after a runtime restart):
/// drops what the tracker recorded, as it does when it finds its wrappers
/// taken out of the tables.
pub fn forget_tracked() {
    crate::memory_tracker::forget_unseen(&TRACKER);
}

/// Whether the inventory holds no region.
pub fn inventory_is_empty() -> bool {
    TRACKER.inventory.is_empty()
}

/// Lets the fuzzer start each input unfinalized (`kr_finalize` is otherwise
/// irreversible). Only in fuzzing builds (`--cfg fuzzing`).
#[cfg(fuzzing)]
pub fn reset_gate_for_fuzzing() {
    TRACKER.gate.reset_for_fuzzing();
}

/// The entries the library wraps or calls (the entry list, for the headers
/// built against), and those of a table the guard requires.
pub use crate::hsa::entries::{ApiTable, LibraryEntry, Need, Role, LIBRARY_ENTRIES};
pub use crate::hsa::tables::required_entries;

/// The one-copy-per-process marker (its tests set and read it as another
/// copy of the library would).
pub use crate::memory_tracker::process_marker;

/// Application async copies in flight on `agent` (the fence's count).
pub fn fence_in_flight(agent: u64) -> u64 {
    TRACKER.fences.in_flight(agent)
}

/// Bytes of the arenas retained for `agent`, per tier.
pub fn retained_for(
    agent: crate::hsa::hsa_agent_t,
) -> crate::memory_snapshot::storage::PerTier<u64> {
    use crate::memory_snapshot::{context::Context, state::SNAPSHOTS};
    SNAPSHOTS
        .storage
        .view(Context::process(), agent)
        .retained
        .map(|bytes| bytes as u64)
}

/// Whether the device kernels are set up on some agent (their queue,
/// executable and buffers are runtime allocations the library holds until
/// `trim_retained` or finalize).
pub fn device_kernels_set_up() -> bool {
    crate::memory_snapshot::state::SNAPSHOTS
        .kernels
        .any_runner()
}

/// The pools snapshots of `agent` allocate from (discovered, or set by
/// `set_storage_pools`): the device pool's handle, and the host pool's with
/// its CPU agent's.
pub fn storage_pools(agent: crate::hsa::hsa_agent_t) -> (Option<u64>, Option<(u64, u64)>) {
    use crate::memory_snapshot::{context::Context, state::SNAPSHOTS};
    let pools = SNAPSHOTS.storage.view(Context::process(), agent).pools;
    (
        pools.device_pool.map(|(pool, _)| pool.handle),
        pools
            .host_pool
            .map(|host| (host.pool.handle, host.cpu_agent.handle)),
    )
}

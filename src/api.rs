//! The safe Rust API: what a Rust component of a profiler calls, and what
//! the C ABI (`ffi`) is a thin shell over.
//!
//! The library's state is process-wide, as the HSA runtime's tables it hooks
//! are: one tracker behind the wrappers, one set of storage arenas. So the
//! API is a set of free functions, plus [`Snapshot`], which owns one
//! capture. Everything here is thread-safe.
//!
//! # Example
//!
//! (Run here against the project's software HSA runtime, `hsa_sim`, which
//! stands in for ROCr; the hidden lines set it up.)
//!
//! ```
//! # use kernel_replay::hsa::{AmdExtTable, CoreApiTable};
//! # let sim = hsa_sim::session(1);
//! # let core: *mut CoreApiTable = hsa_sim::core_table_ptr().cast();
//! # let amd: *mut AmdExtTable = hsa_sim::amd_ext_table_ptr().cast();
//! # let gpu = kernel_replay::hsa::hsa_agent_t { handle: sim.gpu(0).handle };
//! // In the tool's OnLoad, with the tables ROCr passes:
//! // SAFETY: the runtime's live API tables.
//! unsafe { kernel_replay::install(core, amd, 0) }?;
//! kernel_replay::set_tracking(true);
//!
//! // ... the application allocates device memory and writes it ...
//! # let pool = sim.pool(sim.gpu(0), hsa_sim::PoolKind::DeviceCoarse);
//! # let mut buffer = std::ptr::null_mut();
//! # // SAFETY: the runtime's table; an allocation through the wrappers.
//! # unsafe {
//! #     (*amd).hsa_amd_memory_pool_allocate_fn.unwrap()(
//! #         kernel_replay::hsa::sys::hsa_amd_memory_pool_t { handle: pool.handle }, 4096, 0, &mut buffer)
//! # };
//! # let buffer = buffer.cast::<u8>();
//! # // The software runtime's device memory is host memory: "kernels" write it directly.
//! # let kernel = |value: u8| unsafe { std::ptr::write_bytes(buffer, value, 4096) };
//! # let contents = || unsafe { std::slice::from_raw_parts(buffer, 4096) }.to_vec();
//! # kernel(1);
//!
//! // Around one dispatch replayed three times: every pass sees the inputs
//! // of the first.
//! let outcome = kernel_replay::replay(gpu, 3, |pass| {
//!     // dispatch the kernel
//! #   assert!(contents().iter().all(|&b| b == 1));
//! #   kernel(pass as u8 + 7);
//! });
//! assert!(outcome.replayed);
//!
//! // Or step by step:
//! let snapshot = kernel_replay::snap(gpu)?;
//! # kernel(42);
//! let report = snapshot.restore();
//! assert!(report.complete());
//! # assert!(contents().iter().all(|&b| b == 9), "the last pass's bytes are back");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::hsa::sys::hsa_amd_memory_pool_t;
use crate::hsa::{hsa_agent_t, AmdExtTable, CoreApiTable};
use crate::memory_snapshot::context::Context;
use crate::memory_snapshot::state::SNAPSHOTS;
use crate::memory_snapshot::storage::pools::{self, AgentPools, HostPool};
use crate::memory_snapshot::storage::PerTier;
use crate::memory_snapshot::{self, coverage, Decline};
use crate::memory_tracker::install::{self, InstallOutcome};
use crate::memory_tracker::{self, TRACKER};

pub use crate::hsa::entries::{ExecutableCallback, IterateExecutablesFn};
pub use crate::hsa::tables::TableError;
pub use crate::memory_snapshot::coverage::{Footprint, NotCovered};
pub use crate::memory_snapshot::device::batch::DeviceOutcome;
pub use crate::memory_snapshot::device::tool_copy::{BatchCopyFn, CopyDirection, CopyRegion};
pub use crate::memory_snapshot::device::{CopyMethod, Strategy};
pub use crate::memory_snapshot::host_memory::{Coverage, HostMemory};
pub use crate::memory_snapshot::storage::{StoragePolicy, Tier};
pub use crate::memory_snapshot::verify::VerifyOutcome;
pub use crate::memory_snapshot::{DeclineReason, RestoreReport};
pub use crate::memory_tracker::kind::MemoryKind;
pub use crate::replay::ReplayOutcome;
pub use crate::support::logging::LogLevel;
pub use crate::support::stats::Counters;

// ---- installation --------------------------------------------------------------

/// What [`install`] did when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Installed {
    /// The wrappers went into at least one table (for the first time, or
    /// again after a tool had taken them out).
    Installed,
    /// Every table passed already leads to the wrappers (or is a second
    /// table of a kind already installed, or another copy of the library in
    /// the process installed first); nothing was touched.
    AlreadyInstalled,
    /// `lib_instance > 0`: only the first library instance installs (a later
    /// one would chain the wrappers to themselves); nothing was touched.
    Skipped,
}

/// Why [`install`] installed nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstallError {
    /// Both tables were NULL.
    NoTables,
    /// A table's version or size does not match the headers the library was
    /// built against, or an entry it needs is NULL.
    IncompatibleTable(TableError),
}

impl fmt::Display for InstallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InstallError::NoTables => f.write_str("no HSA API table was passed"),
            InstallError::IncompatibleTable(error) => {
                write!(f, "incompatible HSA API table: {error}")
            }
        }
    }
}

impl std::error::Error for InstallError {}

/// Installs the allocation wrappers into the runtime's API tables and
/// captures the entries they replace. Call it from the tool's `OnLoad` with
/// the tables ROCr passes; either may be NULL (not both). Every table is
/// checked before anything is changed. Calling it again with a table the
/// wrappers were taken out of installs them again; with a table that still
/// leads to them, changes nothing.
///
/// # Safety
/// Each non-NULL pointer is the runtime's live API table, readable and
/// writable for `version.minor_id` bytes, and not patched concurrently by
/// anyone else.
///
/// # Example
///
/// ```
/// # let _sim = hsa_sim::session(1);
/// # let core = hsa_sim::core_table_ptr().cast();
/// # let amd = hsa_sim::amd_ext_table_ptr().cast();
/// use kernel_replay::Installed;
///
/// // In the tool's OnLoad, with the tables ROCr passes.
/// // SAFETY: the runtime's live API tables.
/// let installed = unsafe { kernel_replay::install(core, amd, 0) }?;
/// assert_eq!(installed, Installed::Installed);
/// kernel_replay::set_tracking(true);
///
/// // The same tables again, or a later library instance, change nothing.
/// assert_eq!(unsafe { kernel_replay::install(core, amd, 0) }?, Installed::AlreadyInstalled);
/// assert_eq!(unsafe { kernel_replay::install(core, amd, 1) }?, Installed::Skipped);
/// # Ok::<(), kernel_replay::InstallError>(())
/// ```
pub unsafe fn install(
    core: *mut CoreApiTable,
    amd_ext: *mut AmdExtTable,
    lib_instance: u64,
) -> Result<Installed, InstallError> {
    TRACKER.set_make_room(|pool| Context::process().make_room_for_application(pool));
    // Read now, not at the first snapshot: reading allocates, and a snapshot
    // may run under memory pressure.
    SNAPSHOTS.read_environment();
    // SAFETY: the caller's promise about the tables.
    match unsafe { install::install(core, amd_ext, lib_instance) } {
        InstallOutcome::Installed => Ok(Installed::Installed),
        InstallOutcome::AlreadyInstalled => Ok(Installed::AlreadyInstalled),
        InstallOutcome::Skipped => Ok(Installed::Skipped),
        InstallOutcome::InvalidArgument => Err(InstallError::NoTables),
        InstallOutcome::Incompatible(error) => Err(InstallError::IncompatibleTable(error)),
    }
}

/// Turns allocation recording on or off (off by default); returns the state
/// now in force (always false after [`finalize`]).
///
/// # Example
///
/// ```
/// # let sim = hsa_sim::session(1);
/// # let gpu = kernel_replay::hsa::hsa_agent_t { handle: sim.gpu(0).handle };
/// # let amd = hsa_sim::amd_ext_table_ptr().cast();
/// # unsafe { kernel_replay::install(hsa_sim::core_table_ptr().cast(), amd, 0) }.unwrap();
/// # kernel_replay::set_tracking(true);
/// # let pool = sim.pool(sim.gpu(0), hsa_sim::PoolKind::DeviceCoarse).handle;
/// // Allocations made while tracking is off are not captured.
/// kernel_replay::set_tracking(false);
/// # let _before = unsafe { kernel_replay::testing::app_allocate(amd, pool, 4096, 0) };
/// assert_eq!(kernel_replay::tracked(gpu).regions, 0);
///
/// assert!(kernel_replay::set_tracking(true));
/// # let _after = unsafe { kernel_replay::testing::app_allocate(amd, pool, 4096, 0) };
/// assert_eq!(kernel_replay::tracked(gpu).regions, 1);
/// ```
pub fn set_tracking(enabled: bool) -> bool {
    TRACKER.gate.set_tracking(enabled)
}

/// Whether allocations are being recorded.
pub fn tracking() -> bool {
    TRACKER.gate.tracking()
}

/// The teardown guard, irreversible: afterwards the wrappers only chain,
/// nothing is recorded, every snapshot declines with
/// [`DeclineReason::Finalized`] and restores write nothing. Retained arenas
/// go back to the runtime. Call it from the tool's finalizer.
pub fn finalize() {
    memory_tracker::finalize(&TRACKER);
    Context::process().finalize();
}

/// Whether [`finalize`] was called.
pub fn is_finalized() -> bool {
    TRACKER.gate.finalized()
}

/// Sets how snapshots list loaded executables (to find module variables),
/// instead of the runtime loader's own iterator, which they find through the
/// installed core table; `None` goes back to that.
pub fn set_executable_iterator(iterate: Option<IterateExecutablesFn>) {
    SNAPSHOTS.set_executable_iterator(iterate)
}

// ---- snapshots -------------------------------------------------------------------

/// A complete capture of one agent's replay state: its tracked allocations
/// and mappings and the module variables visible to it. Dropping it gives
/// its storage back (kept for the agent's next snapshot).
pub struct Snapshot(memory_snapshot::Snapshot);

/// Why a snapshot could not be taken; the dispatch should run once,
/// unreplayed. Says why in detail through `Display`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Declined {
    agent: hsa_agent_t,
    decline: Decline,
}

impl Declined {
    /// The reason, as a code the C ABI shares.
    pub fn reason(&self) -> DeclineReason {
        self.decline.reason()
    }

    /// The agent whose snapshot declined.
    pub fn agent(&self) -> hsa_agent_t {
        self.agent
    }
}

impl fmt::Display for Declined {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "snapshot of agent {:#x} declined ({}): {}",
            self.agent.handle,
            self.decline.reason(),
            self.decline
        )
    }
}

impl std::error::Error for Declined {}

/// Captures the replay state of `agent`. A snapshot that cannot be
/// completed declines (and logs one warning saying why); it never leaves
/// anything half-taken.
///
/// # Example
///
/// ```
/// # let sim = hsa_sim::session(1);
/// # let gpu = kernel_replay::hsa::hsa_agent_t { handle: sim.gpu(0).handle };
/// # let amd = hsa_sim::amd_ext_table_ptr().cast();
/// # unsafe { kernel_replay::install(hsa_sim::core_table_ptr().cast(), amd, 0) }.unwrap();
/// # kernel_replay::set_tracking(true);
/// # let pool = sim.pool(sim.gpu(0), hsa_sim::PoolKind::DeviceCoarse).handle;
/// # // One 4 KiB device buffer the application allocated, holding 1s.
/// # let buffer = unsafe { kernel_replay::testing::app_allocate(amd, pool, 4096, 1) };
/// # let kernel = |byte: u8| unsafe { buffer.write_bytes(byte, 4096) };
/// # let contents = || unsafe { std::slice::from_raw_parts(buffer, 4096) }.to_vec();
/// let snapshot = match kernel_replay::snap(gpu) {
///     Ok(snapshot) => snapshot,
///     Err(declined) => {
///         // Run the dispatch once, unreplayed; `declined` says why.
///         panic!("{declined}");
///     }
/// };
/// assert_eq!(snapshot.region_count(), 1);
/// assert_eq!(snapshot.byte_count(), 4096);
///
/// // After the teardown guard every snapshot declines.
/// kernel_replay::finalize();
/// let declined = kernel_replay::snap(gpu).unwrap_err();
/// assert_eq!(declined.reason(), kernel_replay::DeclineReason::Finalized);
/// ```
pub fn snap(agent: hsa_agent_t) -> Result<Snapshot, Declined> {
    let snapshot = memory_snapshot::snap(Context::process(), agent);
    match snapshot.decline() {
        None => Ok(Snapshot(snapshot)),
        Some(decline) => Err(Declined { agent, decline }),
    }
}

impl Snapshot {
    /// The agent captured.
    pub fn agent(&self) -> hsa_agent_t {
        self.0.agent()
    }

    /// Regions captured.
    pub fn region_count(&self) -> usize {
        self.0.regions().len()
    }

    /// Bytes captured.
    pub fn byte_count(&self) -> u64 {
        self.0.byte_count()
    }

    /// Bytes kept in `tier`.
    pub fn tier_bytes(&self, tier: Tier) -> u64 {
        self.0.tier_bytes(tier)
    }

    /// Bytes captured of memory kind `memory` (coarse-grained device
    /// memory, fine-grained device memory, ...).
    pub fn kind_bytes(&self, memory: MemoryKind) -> u64 {
        self.0.kind_bytes(memory)
    }

    /// What the agent can write that the snapshot does not cover: host
    /// memory the host-memory setting left out, per kind
    /// ([`NotCovered::bytes`], indexed by [`MemoryKind::index`]), and
    /// whether XNACK made any system memory writable. Nothing for a
    /// declined snapshot.
    pub fn not_covered(&self) -> NotCovered {
        self.0.not_covered()
    }

    /// How the capture moved its bytes (its restores move them the same
    /// way): [`CopyMethod::Copies`], `Scatter`, `DirtyBlocks` or `BatchCopy`.
    pub fn copy_method(&self) -> CopyMethod {
        self.0.copy_method()
    }

    /// Whether the capture copied only the blocks changed since the agent's
    /// previous snapshot, into that snapshot's arenas.
    pub fn incremental(&self) -> bool {
        self.0.incremental()
    }

    /// Writes the snapshot back: every region that is still the allocation,
    /// mapping or variable captured; the others are skipped and never
    /// written. [`RestoreReport::complete`] is rocprofiler-sdk's `restore`
    /// answer.
    ///
    /// # Example
    ///
    /// ```
    /// # let sim = hsa_sim::session(1);
    /// # let gpu = kernel_replay::hsa::hsa_agent_t { handle: sim.gpu(0).handle };
    /// # let amd = hsa_sim::amd_ext_table_ptr().cast();
    /// # unsafe { kernel_replay::install(hsa_sim::core_table_ptr().cast(), amd, 0) }.unwrap();
    /// # kernel_replay::set_tracking(true);
    /// # let pool = sim.pool(sim.gpu(0), hsa_sim::PoolKind::DeviceCoarse).handle;
    /// # // One 4 KiB device buffer the application allocated, holding 1s.
    /// # let buffer = unsafe { kernel_replay::testing::app_allocate(amd, pool, 4096, 1) };
    /// # let kernel = |byte: u8| unsafe { buffer.write_bytes(byte, 4096) };
    /// # let contents = || unsafe { std::slice::from_raw_parts(buffer, 4096) }.to_vec();
    /// let snapshot = kernel_replay::snap(gpu)?;
    /// kernel(7); // the dispatch writes its own input
    /// let report = snapshot.restore();
    /// assert!(report.complete()); // rocprofiler-sdk's `restore` answer
    /// assert_eq!(report.restored, 1);
    /// assert!(contents().iter().all(|&b| b == 1)); // the next pass sees the input again
    /// # Ok::<(), kernel_replay::Declined>(())
    /// ```
    pub fn restore(&self) -> RestoreReport {
        memory_snapshot::restore(Context::process(), &self.0)
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("agent", &self.agent().handle)
            .field("regions", &self.region_count())
            .field("bytes", &self.byte_count())
            .finish()
    }
}

/// The internal snapshot of a [`Snapshot`] or a [`Declined`] one, for the
/// C ABI, whose handles stand for either.
pub(crate) fn snap_either(agent: hsa_agent_t) -> memory_snapshot::Snapshot {
    memory_snapshot::snap(Context::process(), agent)
}

/// Restores an internal snapshot (the C ABI's handles).
pub(crate) fn restore_either(snapshot: &memory_snapshot::Snapshot) -> RestoreReport {
    memory_snapshot::restore(Context::process(), snapshot)
}

// ---- the replay window -----------------------------------------------------------

/// Runs `passes` passes of one dispatch with identical inputs, as
/// rocprofiler-sdk's `queue.cpp` does: with `passes <= 1`, pass 0 once and
/// nothing captured; otherwise snapshot — if it declines, pass 0 exactly once
/// — else passes `0..passes` with a restore before every pass but the first.
///
/// # Example
///
/// ```
/// # let sim = hsa_sim::session(1);
/// # let gpu = kernel_replay::hsa::hsa_agent_t { handle: sim.gpu(0).handle };
/// # let amd = hsa_sim::amd_ext_table_ptr().cast();
/// # unsafe { kernel_replay::install(hsa_sim::core_table_ptr().cast(), amd, 0) }.unwrap();
/// # kernel_replay::set_tracking(true);
/// # let pool = sim.pool(sim.gpu(0), hsa_sim::PoolKind::DeviceCoarse).handle;
/// # // One 4 KiB device buffer the application allocated, holding 1s.
/// # let buffer = unsafe { kernel_replay::testing::app_allocate(amd, pool, 4096, 1) };
/// # let kernel = |byte: u8| unsafe { buffer.write_bytes(byte, 4096) };
/// # let contents = || unsafe { std::slice::from_raw_parts(buffer, 4096) }.to_vec();
/// // A dispatch that adds one to its input: without the restores, pass 2
/// // would see 3s.
/// let outcome = kernel_replay::replay(gpu, 3, |pass| {
///     // submit the dispatch and wait for it
///     assert!(contents().iter().all(|&b| b == 1), "pass {pass} sees pass 0's input");
///     kernel(2);
/// });
/// assert!(outcome.replayed);
/// assert_eq!(outcome.passes_run, 3);
/// assert_eq!(outcome.restore_failures, 0);
/// ```
pub fn replay(agent: hsa_agent_t, passes: u32, run_pass: impl FnMut(u32)) -> ReplayOutcome {
    crate::replay::replay(Context::process(), agent, passes, run_pass)
}

/// True only for a submission that can be replayed: exactly one packet
/// holding exactly one dispatch, no graph launch active (a graph launch and
/// a multi-packet batch each warn once per process).
///
/// # Example
///
/// ```
/// assert!(kernel_replay::replay_gate(1, 1, false));
/// assert!(!kernel_replay::replay_gate(2, 2, false)); // a multi-packet batch
/// assert!(!kernel_replay::replay_gate(1, 1, true)); // inside a graph launch
/// ```
pub fn replay_gate(packet_count: u64, dispatch_count: u64, graph_launch_active: bool) -> bool {
    crate::replay::replay_gate(packet_count, dispatch_count, graph_launch_active)
}

// ---- storage ---------------------------------------------------------------------

/// How much device memory snapshots of one agent may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceBudget {
    /// The agent's free memory less a safety margin (a sixteenth of the
    /// pool, at least 256 MiB). The default.
    Auto,
    /// At most this many bytes (leased and retained arenas); 0 keeps
    /// snapshots off the device tier.
    Bytes(u64),
}

/// Sets the storage policy (default [`StoragePolicy::Auto`], or
/// `KERNEL_REPLAY_STORAGE`).
///
/// # Example
///
/// ```
/// # let sim = hsa_sim::session(1);
/// # let gpu = kernel_replay::hsa::hsa_agent_t { handle: sim.gpu(0).handle };
/// # let amd = hsa_sim::amd_ext_table_ptr().cast();
/// # unsafe { kernel_replay::install(hsa_sim::core_table_ptr().cast(), amd, 0) }.unwrap();
/// # kernel_replay::set_tracking(true);
/// # let pool = sim.pool(sim.gpu(0), hsa_sim::PoolKind::DeviceCoarse).handle;
/// # // One 4 KiB device buffer the application allocated, holding 1s.
/// # let buffer = unsafe { kernel_replay::testing::app_allocate(amd, pool, 4096, 1) };
/// # let kernel = |byte: u8| unsafe { buffer.write_bytes(byte, 4096) };
/// # let contents = || unsafe { std::slice::from_raw_parts(buffer, 4096) }.to_vec();
/// use kernel_replay::{StoragePolicy, Tier};
///
/// kernel_replay::set_storage_policy(StoragePolicy::Pinned);
/// assert_eq!(kernel_replay::storage_policy(), StoragePolicy::Pinned);
/// let snapshot = kernel_replay::snap(gpu)?;
/// assert_eq!(snapshot.tier_bytes(Tier::Pinned), 4096);
/// assert_eq!(snapshot.tier_bytes(Tier::Device), 0);
/// # Ok::<(), kernel_replay::Declined>(())
/// ```
pub fn set_storage_policy(policy: StoragePolicy) {
    SNAPSHOTS.storage.policy.set(policy)
}

/// The storage policy in force.
pub fn storage_policy() -> StoragePolicy {
    SNAPSHOTS.storage.policy.get()
}

/// Caps the device memory snapshots of each agent may hold.
///
/// # Example
///
/// ```
/// # let sim = hsa_sim::session(1);
/// # let gpu = kernel_replay::hsa::hsa_agent_t { handle: sim.gpu(0).handle };
/// # let amd = hsa_sim::amd_ext_table_ptr().cast();
/// # unsafe { kernel_replay::install(hsa_sim::core_table_ptr().cast(), amd, 0) }.unwrap();
/// # kernel_replay::set_tracking(true);
/// # let pool = sim.pool(sim.gpu(0), hsa_sim::PoolKind::DeviceCoarse).handle;
/// # // One 4 KiB device buffer the application allocated, holding 1s.
/// # let buffer = unsafe { kernel_replay::testing::app_allocate(amd, pool, 4096, 1) };
/// # let kernel = |byte: u8| unsafe { buffer.write_bytes(byte, 4096) };
/// # let contents = || unsafe { std::slice::from_raw_parts(buffer, 4096) }.to_vec();
/// use kernel_replay::{DeviceBudget, Tier};
///
/// // No device memory for snapshots: `auto` goes on to pinned host memory.
/// kernel_replay::set_device_budget(DeviceBudget::Bytes(0));
/// let snapshot = kernel_replay::snap(gpu)?;
/// assert_eq!(snapshot.tier_bytes(Tier::Device), 0);
/// assert_eq!(snapshot.tier_bytes(Tier::Pinned), 4096);
/// drop(snapshot);
/// kernel_replay::set_device_budget(DeviceBudget::Auto);
/// # Ok::<(), kernel_replay::Declined>(())
/// ```
pub fn set_device_budget(budget: DeviceBudget) {
    SNAPSHOTS.storage.device_budget.set(match budget {
        DeviceBudget::Auto => crate::memory_snapshot::storage::budget::DEVICE_BUDGET_AUTO,
        DeviceBudget::Bytes(bytes) => bytes,
    })
}

/// Caps the host memory all live snapshots may hold together (`None`, the
/// default: unlimited). A snapshot that would pass it declines with
/// [`DeclineReason::HostMemory`].
///
/// # Example
///
/// ```
/// # let sim = hsa_sim::session(1);
/// # let gpu = kernel_replay::hsa::hsa_agent_t { handle: sim.gpu(0).handle };
/// # let amd = hsa_sim::amd_ext_table_ptr().cast();
/// # unsafe { kernel_replay::install(hsa_sim::core_table_ptr().cast(), amd, 0) }.unwrap();
/// # kernel_replay::set_tracking(true);
/// # let pool = sim.pool(sim.gpu(0), hsa_sim::PoolKind::DeviceCoarse).handle;
/// # // One 4 KiB device buffer the application allocated, holding 1s.
/// # let buffer = unsafe { kernel_replay::testing::app_allocate(amd, pool, 4096, 1) };
/// # let kernel = |byte: u8| unsafe { buffer.write_bytes(byte, 4096) };
/// # let contents = || unsafe { std::slice::from_raw_parts(buffer, 4096) }.to_vec();
/// use kernel_replay::{DeclineReason, StoragePolicy};
///
/// kernel_replay::set_storage_policy(StoragePolicy::Pinned);
/// kernel_replay::set_host_budget(Some(1024));
/// let declined = kernel_replay::snap(gpu).unwrap_err();
/// assert_eq!(declined.reason(), DeclineReason::HostMemory);
///
/// kernel_replay::set_host_budget(None);
/// assert!(kernel_replay::snap(gpu).is_ok());
/// ```
pub fn set_host_budget(bytes: Option<u64>) {
    SNAPSHOTS.storage.host.set_limit(bytes.unwrap_or(0))
}

/// Host memory held for snapshots: live snapshots' buffers and arenas, and
/// pinned and pageable arenas retained for reuse.
pub fn host_bytes_in_use() -> u64 {
    SNAPSHOTS.storage.host.in_use()
}

/// Device memory held for snapshots, all agents (leased and retained).
pub fn device_bytes_in_use() -> u64 {
    SNAPSHOTS.storage.held()[Tier::Device.index()]
}

/// The pools snapshots of an agent allocate from, instead of the
/// discovered ones (see [`set_storage_pools`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoragePools {
    /// A coarse-grained pool of the agent, or `None`: no device tier.
    pub device_pool: Option<hsa_amd_memory_pool_t>,
    /// A host pool the agent can be granted access to, with the CPU agent
    /// owning it, or `None`: no pinned tier.
    pub host_pool: Option<(hsa_amd_memory_pool_t, hsa_agent_t)>,
}

/// Chooses the pools later snapshots of `agent` allocate from; false (and
/// nothing changed) if the library is not installed into both tables.
///
/// # Example
///
/// ```
/// # let sim = hsa_sim::session(1);
/// # let gpu = kernel_replay::hsa::hsa_agent_t { handle: sim.gpu(0).handle };
/// # let amd = hsa_sim::amd_ext_table_ptr().cast();
/// # unsafe { kernel_replay::install(hsa_sim::core_table_ptr().cast(), amd, 0) }.unwrap();
/// # kernel_replay::set_tracking(true);
/// # let pool = sim.pool(sim.gpu(0), hsa_sim::PoolKind::DeviceCoarse).handle;
/// # // One 4 KiB device buffer the application allocated, holding 1s.
/// # let buffer = unsafe { kernel_replay::testing::app_allocate(amd, pool, 4096, 1) };
/// # let kernel = |byte: u8| unsafe { buffer.write_bytes(byte, 4096) };
/// # let contents = || unsafe { std::slice::from_raw_parts(buffer, 4096) }.to_vec();
/// use kernel_replay::{StoragePools, Tier};
///
/// // Neither a device nor a pinned pool for this agent: pageable memory only.
/// let none = StoragePools { device_pool: None, host_pool: None };
/// assert!(kernel_replay::set_storage_pools(gpu, none));
/// let snapshot = kernel_replay::snap(gpu)?;
/// assert_eq!(snapshot.tier_bytes(Tier::Pageable), 4096);
/// # Ok::<(), kernel_replay::Declined>(())
/// ```
pub fn set_storage_pools(agent: hsa_agent_t, pools: StoragePools) -> bool {
    let (Some(_), Some(amd)) = (TRACKER.core(), TRACKER.amd()) else {
        return false;
    };
    let pools = AgentPools {
        is_gpu: true,
        device_pool: pools
            .device_pool
            .map(|pool| (pool, pools::pool_size(amd, pool).unwrap_or(0))),
        host_pool: pools
            .host_pool
            .map(|(pool, cpu_agent)| HostPool { pool, cpu_agent }),
    };
    SNAPSHOTS.storage.set_pools(agent, pools);
    true
}

/// Batches copies where the runtime has asynchronous copies and signals
/// (the default, unless `KERNEL_REPLAY_COPY=blocking`); false forces one
/// blocking copy per region.
///
/// # Example
///
/// ```
/// # let sim = hsa_sim::session(1);
/// # let gpu = kernel_replay::hsa::hsa_agent_t { handle: sim.gpu(0).handle };
/// # let amd = hsa_sim::amd_ext_table_ptr().cast();
/// # unsafe { kernel_replay::install(hsa_sim::core_table_ptr().cast(), amd, 0) }.unwrap();
/// # kernel_replay::set_tracking(true);
/// # let pool = sim.pool(sim.gpu(0), hsa_sim::PoolKind::DeviceCoarse).handle;
/// # // One 4 KiB device buffer the application allocated, holding 1s.
/// # let buffer = unsafe { kernel_replay::testing::app_allocate(amd, pool, 4096, 1) };
/// # let kernel = |byte: u8| unsafe { buffer.write_bytes(byte, 4096) };
/// # let contents = || unsafe { std::slice::from_raw_parts(buffer, 4096) }.to_vec();
/// kernel_replay::set_batched_copies(false); // one blocking copy per region
/// let snapshot = kernel_replay::snap(gpu)?;
/// kernel(9);
/// assert!(snapshot.restore().complete());
/// assert!(contents().iter().all(|&b| b == 1));
/// # Ok::<(), kernel_replay::Declined>(())
/// ```
pub fn set_batched_copies(enabled: bool) {
    SNAPSHOTS.set_batch_copies(enabled)
}

/// How snapshots and restores move their bytes: the runtime's copies, one
/// dispatch of the library's scatter kernel, or dirty blocks (see
/// [`Strategy`]). The default is [`Strategy::Auto`], or
/// `KERNEL_REPLAY_STRATEGY` (auto, copies, scatter, dirty). Takes effect at
/// the next snapshot; a snapshot restores with what it was captured with.
/// Where the kernels cannot run on an agent, copies are used; a registered
/// batch-copy function ([`set_batch_copy`]) moves the regions under every
/// strategy but `Copies`. What one snapshot did is its
/// [`Snapshot::copy_method`].
///
/// # Example
///
/// ```
/// # let sim = hsa_sim::session(1);
/// # let gpu = kernel_replay::hsa::hsa_agent_t { handle: sim.gpu(0).handle };
/// # let amd = hsa_sim::amd_ext_table_ptr().cast();
/// # unsafe { kernel_replay::install(hsa_sim::core_table_ptr().cast(), amd, 0) }.unwrap();
/// # kernel_replay::set_tracking(true);
/// # let pool = sim.pool(sim.gpu(0), hsa_sim::PoolKind::DeviceCoarse).handle;
/// # // One 4 KiB device buffer the application allocated, holding 1s.
/// # let buffer = unsafe { kernel_replay::testing::app_allocate(amd, pool, 4096, 1) };
/// use kernel_replay::{CopyMethod, Strategy};
///
/// kernel_replay::set_strategy(Strategy::Copies);
/// assert_eq!(kernel_replay::strategy(), Strategy::Copies);
/// // What the snapshot's capture did: the runtime's copies.
/// assert_eq!(kernel_replay::snap(gpu)?.copy_method(), CopyMethod::Copies);
/// # Ok::<(), kernel_replay::Declined>(())
/// ```
pub fn set_strategy(strategy: Strategy) {
    SNAPSHOTS.kernels.set_strategy(strategy)
}

/// Sets which host memory granted to an agent its snapshots capture (see
/// [`HostMemory`]; the default is [`HostMemory::Auto`], or
/// `KERNEL_REPLAY_HOST_MEMORY`: auto, all, registered, off). What a
/// snapshot leaves out it reports ([`Snapshot::not_covered`]).
///
/// # Example
///
/// ```
/// # let sim = hsa_sim::session(1);
/// # let gpu = kernel_replay::hsa::hsa_agent_t { handle: sim.gpu(0).handle };
/// # let amd = hsa_sim::amd_ext_table_ptr().cast();
/// # unsafe { kernel_replay::install(hsa_sim::core_table_ptr().cast(), amd, 0) }.unwrap();
/// # kernel_replay::set_tracking(true);
/// # let pool = sim.pool(sim.cpu(), hsa_sim::PoolKind::SystemFine).handle;
/// # // 4 KiB of host memory the application allocated and granted the GPU.
/// # let buffer = unsafe { kernel_replay::testing::app_allocate(amd, pool, 4096, 1) };
/// # unsafe { kernel_replay::testing::app_allow_access(amd, buffer, &[gpu]) };
/// use kernel_replay::{HostMemory, MemoryKind};
///
/// kernel_replay::set_host_memory(HostMemory::Off);
/// let snapshot = kernel_replay::snap(gpu)?;
/// assert_eq!(snapshot.kind_bytes(MemoryKind::Host), 0);
/// assert_eq!(snapshot.not_covered().bytes[MemoryKind::Host.index()], 4096);
///
/// kernel_replay::set_host_memory(HostMemory::All);
/// assert_eq!(kernel_replay::snap(gpu)?.kind_bytes(MemoryKind::Host), 4096);
/// # Ok::<(), kernel_replay::Declined>(())
/// ```
pub fn set_host_memory(rule: HostMemory) {
    SNAPSHOTS.set_host_memory(rule)
}

/// The host-memory setting, as set ([`HostMemory::Auto`] unresolved).
pub fn host_memory() -> HostMemory {
    SNAPSHOTS.host_memory()
}

/// Sets what a snapshot does when memory its agent can write is not
/// covered: [`Coverage::Warn`] (the default, or `KERNEL_REPLAY_COVERAGE`)
/// captures the rest and warns once per agent; [`Coverage::Strict`]
/// declines ([`DeclineReason::UncoveredMemory`]).
pub fn set_coverage(coverage: Coverage) {
    SNAPSHOTS.set_coverage(coverage)
}

/// The coverage setting.
pub fn coverage() -> Coverage {
    SNAPSHOTS.coverage()
}

/// Registers the tool's batch-copy function, which then moves, in one call
/// per capture and per restore, every region kept in device or pinned
/// memory — instead of the library's kernels, under every strategy but
/// [`Strategy::Copies`], whenever copies are batched. The function copies
/// each region and returns once all have completed; an `Err` makes the
/// library copy them itself (counted in `batch_copy_failures`). It runs
/// inside the snapshot's window with the tracker's read views held, so it
/// must not allocate or free through the wrapped entries (async copies it
/// submits through them on the calling thread pass the window). `None`
/// goes back to the library's own kernels; a call already begun finishes.
///
/// # Example
///
/// ```
/// # let sim = hsa_sim::session(1);
/// # let gpu = kernel_replay::hsa::hsa_agent_t { handle: sim.gpu(0).handle };
/// # let amd = hsa_sim::amd_ext_table_ptr().cast();
/// # unsafe { kernel_replay::install(hsa_sim::core_table_ptr().cast(), amd, 0) }.unwrap();
/// # kernel_replay::set_tracking(true);
/// # let pool = sim.pool(sim.gpu(0), hsa_sim::PoolKind::DeviceCoarse).handle;
/// # // One 4 KiB device buffer the application allocated, holding 1s.
/// # let buffer = unsafe { kernel_replay::testing::app_allocate(amd, pool, 4096, 1) };
/// # let kernel = |byte: u8| unsafe { buffer.write_bytes(byte, 4096) };
/// # let contents = || unsafe { std::slice::from_raw_parts(buffer, 4096) }.to_vec();
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// use kernel_replay::{CopyDirection, CopyMethod, CopyRegion};
///
/// static CALLS: AtomicUsize = AtomicUsize::new(0);
/// // The tool's own copy engine; here the memory is host memory.
/// kernel_replay::set_batch_copy(Some(Arc::new(
///     |_agent, regions: &[CopyRegion], _direction: CopyDirection| {
///         CALLS.fetch_add(1, Ordering::Relaxed);
///         for r in regions {
///             // SAFETY: the regions the library hands over, `size` bytes each.
///             unsafe {
///                 std::ptr::copy_nonoverlapping(r.src as *const u8, r.dst as *mut u8, r.size as usize)
///             };
///         }
///         Ok(())
///     },
/// )));
/// let snapshot = kernel_replay::snap(gpu)?;
/// assert_eq!(snapshot.copy_method(), CopyMethod::BatchCopy);
/// kernel(5);
/// assert!(snapshot.restore().complete());
/// assert!(contents().iter().all(|&b| b == 1));
/// assert_eq!(CALLS.load(Ordering::Relaxed), 2); // one capture, one restore
/// kernel_replay::set_batch_copy(None);
/// # Ok::<(), kernel_replay::Declined>(())
/// ```
pub fn set_batch_copy(function: Option<Arc<BatchCopyFn>>) {
    SNAPSHOTS.kernels.tool_copy.set(function)
}

/// The strategy in force (see [`set_strategy`]).
pub fn strategy() -> Strategy {
    SNAPSHOTS.kernels.strategy()
}

/// Verify mode: after every restore, each region still live is compared
/// byte for byte with its snapshot copy; differences are counted in the
/// report ([`RestoreReport::verify`]) and the stats, and make the restore
/// incomplete. Off by default, or on with `KERNEL_REPLAY_VERIFY=1`. It reads
/// every byte back through host memory: for checking, not for speed.
///
/// # Example
///
/// ```
/// # let sim = hsa_sim::session(1);
/// # let gpu = kernel_replay::hsa::hsa_agent_t { handle: sim.gpu(0).handle };
/// # let amd = hsa_sim::amd_ext_table_ptr().cast();
/// # unsafe { kernel_replay::install(hsa_sim::core_table_ptr().cast(), amd, 0) }.unwrap();
/// # kernel_replay::set_tracking(true);
/// # let pool = sim.pool(sim.gpu(0), hsa_sim::PoolKind::DeviceCoarse).handle;
/// # // One 4 KiB device buffer the application allocated, holding 1s.
/// # let buffer = unsafe { kernel_replay::testing::app_allocate(amd, pool, 4096, 1) };
/// # let kernel = |byte: u8| unsafe { buffer.write_bytes(byte, 4096) };
/// # let contents = || unsafe { std::slice::from_raw_parts(buffer, 4096) }.to_vec();
/// kernel_replay::set_verify(true);
/// let snapshot = kernel_replay::snap(gpu)?;
/// kernel(3);
/// let report = snapshot.restore();
/// let verify = report.verify.expect("verify mode compared the restore");
/// assert_eq!(verify.mismatched_regions, 0);
/// assert!(report.complete());
/// # Ok::<(), kernel_replay::Declined>(())
/// ```
pub fn set_verify(enabled: bool) {
    SNAPSHOTS.set_verify(enabled)
}

/// Whether verify mode is on (see [`set_verify`]).
pub fn verify() -> bool {
    SNAPSHOTS.verify()
}

/// Releases the arenas retained for reuse; returns the bytes released.
/// Arenas of live snapshots are not touched. The device kernels' queues and
/// buffers go too (set up again by the next snapshot that uses them; a live
/// snapshot keeps its own until it is dropped).
///
/// # Example
///
/// ```
/// # let sim = hsa_sim::session(1);
/// # let gpu = kernel_replay::hsa::hsa_agent_t { handle: sim.gpu(0).handle };
/// # let amd = hsa_sim::amd_ext_table_ptr().cast();
/// # unsafe { kernel_replay::install(hsa_sim::core_table_ptr().cast(), amd, 0) }.unwrap();
/// # kernel_replay::set_tracking(true);
/// # let pool = sim.pool(sim.gpu(0), hsa_sim::PoolKind::DeviceCoarse).handle;
/// # // One 4 KiB device buffer the application allocated, holding 1s.
/// # let buffer = unsafe { kernel_replay::testing::app_allocate(amd, pool, 4096, 1) };
/// # let kernel = |byte: u8| unsafe { buffer.write_bytes(byte, 4096) };
/// # let contents = || unsafe { std::slice::from_raw_parts(buffer, 4096) }.to_vec();
/// // A freed snapshot's storage is kept for the agent's next one...
/// drop(kernel_replay::snap(gpu)?);
/// assert!(kernel_replay::stats().retained_bytes.iter().sum::<u64>() >= 4096);
/// // ...until it is trimmed.
/// assert!(kernel_replay::trim_retained() >= 4096);
/// assert_eq!(kernel_replay::stats().retained_bytes, [0; 3]);
/// # Ok::<(), kernel_replay::Declined>(())
/// ```
pub fn trim_retained() -> u64 {
    SNAPSHOTS.kernels.finalize();
    SNAPSHOTS.storage.trim(Context::process())
}

/// How long a snapshot or restore waits for application async copies in
/// flight on the agent's tracked memory (default 5 s); past it a snapshot
/// declines with [`DeclineReason::CopiesInFlight`] and a restore writes
/// nothing.
///
/// # Example
///
/// ```
/// # let sim = hsa_sim::session(1);
/// # let gpu = kernel_replay::hsa::hsa_agent_t { handle: sim.gpu(0).handle };
/// # let amd = hsa_sim::amd_ext_table_ptr().cast();
/// # unsafe { kernel_replay::install(hsa_sim::core_table_ptr().cast(), amd, 0) }.unwrap();
/// # kernel_replay::set_tracking(true);
/// # let pool = sim.pool(sim.gpu(0), hsa_sim::PoolKind::DeviceCoarse).handle;
/// # // One 4 KiB device buffer the application allocated, holding 1s.
/// # let buffer = unsafe { kernel_replay::testing::app_allocate(amd, pool, 4096, 1) };
/// # let kernel = |byte: u8| unsafe { buffer.write_bytes(byte, 4096) };
/// # let contents = || unsafe { std::slice::from_raw_parts(buffer, 4096) }.to_vec();
/// use std::time::Duration;
///
/// // Wait at most 50 ms for application async copies into tracked memory.
/// kernel_replay::set_copy_fence_timeout(Duration::from_millis(50));
/// // None in flight: the snapshot does not wait.
/// assert!(kernel_replay::snap(gpu).is_ok());
/// ```
pub fn set_copy_fence_timeout(timeout: Duration) {
    TRACKER.fences.set_timeout(timeout)
}

// ---- what is covered -----------------------------------------------------------------

/// Device memory in use on an agent that snapshots do not cover.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Untracked {
    /// In use on the agent (as the runtime reports it, other processes
    /// included) less what is tracked and less the library's own arenas;
    /// `None` when the runtime does not report the agent's free memory.
    pub bytes: Option<u64>,
    /// Virtual-memory mappings on the agent the wrappers saw but snapshots
    /// do not capture (fine-grained memory, no write access for the agent,
    /// or made while tracking was off).
    pub mappings: usize,
    /// Their bytes.
    pub mapping_bytes: u64,
}

/// What snapshots of `agent` do not cover.
///
/// # Example
///
/// ```
/// # let sim = hsa_sim::session(1);
/// # let gpu = kernel_replay::hsa::hsa_agent_t { handle: sim.gpu(0).handle };
/// # let amd = hsa_sim::amd_ext_table_ptr().cast();
/// # unsafe { kernel_replay::install(hsa_sim::core_table_ptr().cast(), amd, 0) }.unwrap();
/// # kernel_replay::set_tracking(true);
/// # let pool = sim.pool(sim.gpu(0), hsa_sim::PoolKind::DeviceCoarse).handle;
/// // Allocated while tracking was off: in use on the device, not captured.
/// kernel_replay::set_tracking(false);
/// # let _early = unsafe { kernel_replay::testing::app_allocate(amd, pool, 1 << 20, 0) };
/// let untracked = kernel_replay::untracked(gpu);
/// assert!(untracked.bytes >= Some(1 << 20));
/// assert_eq!(untracked.mappings, 0);
/// ```
pub fn untracked(agent: hsa_agent_t) -> Untracked {
    let found = coverage::untracked(Context::process(), agent);
    Untracked {
        bytes: found.bytes,
        mappings: found.vmem_regions,
        mapping_bytes: found.vmem_bytes,
    }
}

/// The bytes and regions a snapshot of `agent` would take now: its tracked
/// allocations and mappings and the module variables of every loaded
/// executable (an executable no snapshot walked yet is walked now, under
/// every storage policy).
///
/// # Example
///
/// ```
/// # let sim = hsa_sim::session(1);
/// # let gpu = kernel_replay::hsa::hsa_agent_t { handle: sim.gpu(0).handle };
/// # let amd = hsa_sim::amd_ext_table_ptr().cast();
/// # unsafe { kernel_replay::install(hsa_sim::core_table_ptr().cast(), amd, 0) }.unwrap();
/// # kernel_replay::set_tracking(true);
/// # let pool = sim.pool(sim.gpu(0), hsa_sim::PoolKind::DeviceCoarse).handle;
/// # // One 4 KiB device buffer the application allocated, holding 1s.
/// # let buffer = unsafe { kernel_replay::testing::app_allocate(amd, pool, 4096, 1) };
/// # let kernel = |byte: u8| unsafe { buffer.write_bytes(byte, 4096) };
/// # let contents = || unsafe { std::slice::from_raw_parts(buffer, 4096) }.to_vec();
/// // What a snapshot would take, before taking it (to admit or refuse a replay).
/// let footprint = kernel_replay::estimate_footprint(gpu);
/// assert_eq!((footprint.bytes, footprint.regions), (4096, 1));
/// ```
pub fn estimate_footprint(agent: hsa_agent_t) -> Footprint {
    coverage::estimate_footprint(Context::process(), agent)
}

/// The tracked allocations and mappings owned by `agent`.
///
/// # Example
///
/// ```
/// # let sim = hsa_sim::session(1);
/// # let gpu = kernel_replay::hsa::hsa_agent_t { handle: sim.gpu(0).handle };
/// # let amd = hsa_sim::amd_ext_table_ptr().cast();
/// # unsafe { kernel_replay::install(hsa_sim::core_table_ptr().cast(), amd, 0) }.unwrap();
/// # kernel_replay::set_tracking(true);
/// # let pool = sim.pool(sim.gpu(0), hsa_sim::PoolKind::DeviceCoarse).handle;
/// # // One 4 KiB device buffer the application allocated, holding 1s.
/// # let buffer = unsafe { kernel_replay::testing::app_allocate(amd, pool, 4096, 1) };
/// # let kernel = |byte: u8| unsafe { buffer.write_bytes(byte, 4096) };
/// # let contents = || unsafe { std::slice::from_raw_parts(buffer, 4096) }.to_vec();
/// let tracked = kernel_replay::tracked(gpu);
/// assert_eq!((tracked.bytes, tracked.regions), (4096, 1));
/// ```
pub fn tracked(agent: hsa_agent_t) -> Footprint {
    let (regions, bytes) = TRACKER.inventory.agent_totals(agent.handle);
    Footprint { bytes, regions }
}

// ---- statistics ------------------------------------------------------------------------

/// The library's cumulative counters, and what it holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// The counters (see their fields).
    pub counters: Counters,
    /// Bytes held now per tier (leased and retained), indexed by
    /// [`Tier::index`].
    pub held_bytes: PerTier<u64>,
    /// Of those, bytes retained for reuse.
    pub retained_bytes: PerTier<u64>,
}

impl Stats {
    /// Declined snapshots for `reason`.
    pub fn declines(&self, reason: DeclineReason) -> u64 {
        self.counters.declines[reason.code() as usize]
    }
}

/// The counters now.
///
/// # Example
///
/// ```
/// # let sim = hsa_sim::session(1);
/// # let gpu = kernel_replay::hsa::hsa_agent_t { handle: sim.gpu(0).handle };
/// # let amd = hsa_sim::amd_ext_table_ptr().cast();
/// # unsafe { kernel_replay::install(hsa_sim::core_table_ptr().cast(), amd, 0) }.unwrap();
/// # kernel_replay::set_tracking(true);
/// # let pool = sim.pool(sim.gpu(0), hsa_sim::PoolKind::DeviceCoarse).handle;
/// # // One 4 KiB device buffer the application allocated, holding 1s.
/// # let buffer = unsafe { kernel_replay::testing::app_allocate(amd, pool, 4096, 1) };
/// # let kernel = |byte: u8| unsafe { buffer.write_bytes(byte, 4096) };
/// # let contents = || unsafe { std::slice::from_raw_parts(buffer, 4096) }.to_vec();
/// kernel_replay::reset_stats();
/// let snapshot = kernel_replay::snap(gpu)?;
/// snapshot.restore();
/// let stats = kernel_replay::stats();
/// assert_eq!(stats.counters.snapshots, 1);
/// assert_eq!(stats.counters.regions_restored, 1);
/// # Ok::<(), kernel_replay::Declined>(())
/// ```
pub fn stats() -> Stats {
    Stats {
        counters: TRACKER.counters.read(),
        held_bytes: SNAPSHOTS.storage.held(),
        retained_bytes: SNAPSHOTS.storage.retained(),
    }
}

/// Zeroes the cumulative counters (not what is held).
pub fn reset_stats() {
    TRACKER.counters.reset()
}

// ---- logging -----------------------------------------------------------------------------

/// Sets the most verbose level the library logs (default WARN, or
/// `KERNEL_REPLAY_LOG`); `None` turns logging off. The library logs through
/// the `log` facade: a Rust program that installed its own logger receives
/// the messages there.
pub fn set_log_level(level: Option<LogLevel>) {
    crate::support::logging::set_level(match level {
        None => log::LevelFilter::Off,
        Some(level) => LogLevel::filter_from_code(level.code()),
    })
}

/// The library version, e.g. "0.1.0".
pub fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

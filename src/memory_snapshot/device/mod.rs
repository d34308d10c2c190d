//! The library's own kernels on the replayed agent (`kernels/replay_kernels.cu`):
//! one-dispatch scatter copies of many regions, and dirty-block restore by
//! device-side hashing.
//!
//! `abi.rs` is their ABI (generated from `kernels/replay_kernels.h`),
//! `hash.rs` the blocks' hash (the keys, and the host's reference the
//! kernels must agree with). `runner.rs` sets the kernels up on an agent (queue, code object,
//! kernarg, signal, keys) through the un-wrapped entries; `buffers.rs` holds
//! the memory they use besides the arenas; `code_object.rs` chooses what is
//! loaded; `plan.rs` is what a snapshot keeps to use them (the block table
//! of dirty blocks), `batch.rs` one capture's or restore's dispatch. Where no code
//! object fits the agent, or the runtime refuses any step, snapshots and
//! restores use their copies as before: the kernels are a faster path,
//! never a requirement.

pub(crate) mod abi;
pub(crate) mod batch;
pub(crate) mod buffers;
pub(crate) mod choose;
pub(crate) mod code_object;
pub(crate) mod hash;
pub(crate) mod plan;
pub(crate) mod runner;
pub mod tool_copy;

#[cfg(test)]
mod code_object_tests;
#[cfg(test)]
mod host_tests;

use std::ffi::CStr;
use std::sync::{Arc, Mutex, OnceLock};

use crate::hsa::entries::{AmdEntries, CoreEntries};
use crate::hsa::hsa_agent_t;
use crate::support::settings::{self, Setting};
use crate::support::sync::Recover;
use hash::HashKeys;
use runner::{Runner, Unavailable};

/// The library's kernels (kernels/replay_kernels.cu).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// One workgroup per (destination, source, size) record.
    ScatterCopy = 0,
    /// One workgroup per block: its two-lane hash.
    HashBlocks = 1,
    /// One workgroup per block pair: hash, compare, copy if changed.
    CompareCopy = 2,
}

/// Every kernel, in index order.
pub(crate) const KERNELS: [Kernel; 3] =
    [Kernel::ScatterCopy, Kernel::HashBlocks, Kernel::CompareCopy];

impl Kernel {
    /// The kernel descriptor's symbol, as ROCr's loader names it.
    pub(crate) fn symbol(self) -> &'static CStr {
        match self {
            Kernel::ScatterCopy => c"kr_scatter_copy.kd",
            Kernel::HashBlocks => c"kr_hash_blocks.kd",
            Kernel::CompareCopy => c"kr_compare_copy.kd",
        }
    }
}

crate::c_enum! {
    /// How snapshots and restores move their bytes: a setting
    /// (`kr_set_strategy`). What one snapshot's capture did is reported as
    /// its copy method (`kr_copy_method_t`).
    pub enum Strategy: "kr_strategy_t", "KR_STRATEGY_" {
        /// The library decides per snapshot: the runtime's copies for a few
        /// regions, one scatter dispatch from 64 on, and dirty blocks for a
        /// footprint of 64 MiB or more kept mostly in pinned host memory
        /// (where a full restore crosses the host link). The default.
        Auto = 0 => "AUTO",
        /// The runtime's copies only (async copies in batches, or blocking).
        Copies = 1 => "COPIES",
        /// The device-resident regions in one dispatch of the library's
        /// scatter kernel; the rest by copies.
        Scatter = 2 => "SCATTER",
        /// Hash every block at snapshot; at restore copy back only the
        /// blocks whose hash changed. A snapshot that gets the agent's
        /// previous snapshot's arenas back, with the same regions, copies
        /// only the blocks changed since (an incremental snapshot).
        DirtyBlocks = 3 => "DIRTY_BLOCKS",
    }
}

crate::c_enum! {
    /// How one snapshot's capture moved the regions the device path can
    /// reach (its restores move them the same way): a report
    /// (`kr_snapshot_copy_method`), never a setting. Each code but
    /// `BATCH_COPY` is that of the strategy of the same name.
    pub enum CopyMethod: "kr_copy_method_t", "KR_COPY_METHOD_" {
        /// The runtime's copies (also: a declined snapshot, or no region
        /// the device path could take).
        Copies = 1 => "COPIES",
        /// One dispatch of the library's scatter kernel.
        Scatter = 2 => "SCATTER",
        /// Dirty blocks: hashed at capture, and only changed blocks copied
        /// back at restore.
        DirtyBlocks = 3 => "DIRTY_BLOCKS",
        /// The tool's batch-copy function (`kr_set_batch_copy`).
        BatchCopy = 4 => "BATCH_COPY",
    }
}

impl Default for CopyMethod {
    /// What ran when no kernel did.
    fn default() -> Self {
        CopyMethod::Copies
    }
}

impl Strategy {
    /// `KERNEL_REPLAY_STRATEGY`'s spelling of a strategy.
    pub fn parse(text: &str) -> Option<Self> {
        Strategy::from_code(u32::from(settings::STRATEGY.parse(text)?))
    }
}

/// One agent's runner, or why it has none (asked once per agent).
type AgentRunner = (u64, Result<Arc<Runner>, Unavailable>);

/// Per-agent kernel runners, created on first use, and the strategy.
pub struct DeviceKernels {
    /// (agent handle, runner or why there is none): one attempt per agent.
    runners: Mutex<Vec<AgentRunner>>,
    keys: OnceLock<Option<HashKeys>>,
    strategy: Setting,
    /// The tool's batch-copy function, which replaces the kernels.
    pub(crate) tool_copy: tool_copy::ToolCopy,
    /// The runners' executables, which discovery skips: they hold kernels
    /// only, and are the library's. A leaf lock of its own, because the
    /// runtime's loader lock is held around discovery's callbacks, while
    /// `runners` is held across runtime calls that take the loader lock.
    own_executables: Mutex<Vec<u64>>,
}

impl DeviceKernels {
    /// No runner yet; the strategy from the environment at first use.
    pub const fn new() -> Self {
        DeviceKernels {
            runners: Mutex::new(Vec::new()),
            keys: OnceLock::new(),
            strategy: Setting::new(&settings::STRATEGY),
            tool_copy: tool_copy::ToolCopy::new(),
            own_executables: Mutex::new(Vec::new()),
        }
    }

    /// The strategy: set, else `KERNEL_REPLAY_STRATEGY`, else auto.
    pub fn strategy(&self) -> Strategy {
        Strategy::from_code(u32::from(self.strategy.code())).unwrap_or(Strategy::Auto)
    }

    /// Sets the strategy.
    pub fn set_strategy(&self, strategy: Strategy) {
        self.strategy.set(strategy as u8);
    }

    /// The agent's runner, set up on first call; `None` when the kernels
    /// cannot run there (logged once per agent).
    pub(crate) fn runner(
        &'static self,
        core: &'static CoreEntries,
        amd: &'static AmdEntries,
        agent: hsa_agent_t,
    ) -> Option<Arc<Runner>> {
        let mut runners = self.runners.locked();
        if let Some((_, known)) = runners.iter().find(|(handle, _)| *handle == agent.handle) {
            return known.as_ref().ok().cloned();
        }
        runners.try_reserve(1).ok()?;
        let made = match self.keys() {
            Some(keys) => {
                Runner::create(core, amd, agent, keys, &self.own_executables).map(Arc::new)
            }
            None => Err(Unavailable::Runtime(
                "drawing hash keys",
                crate::hsa::HSA_STATUS_ERROR,
            )),
        };
        match &made {
            Ok(runner) => log::info!(
                "device kernels ready on agent {:#x} ({})",
                agent.handle,
                runner.isa
            ),
            Err(why) => log::info!(
                "device kernels unavailable on agent {:#x}: {why}; copies are used",
                agent.handle
            ),
        }
        let runner = made.as_ref().ok().cloned();
        if let Some(runner) = &runner {
            let mut own = self.own_executables.locked();
            if own.try_reserve(1).is_err() {
                // Discovery could not tell it apart: do without the kernels.
                return None;
            }
            own.push(runner.executable().handle);
        }
        runners.push((agent.handle, made));
        runner
    }

    /// The process's hash keys, drawn from the OS once.
    fn keys(&self) -> Option<&[u32]> {
        self.keys
            .get_or_init(|| HashKeys::from_os().ok())
            .as_ref()
            .map(HashKeys::as_slice)
    }

    /// Whether a runner is set up on some agent.
    pub(crate) fn any_runner(&self) -> bool {
        self.runners
            .locked()
            .iter()
            .any(|(_, runner)| runner.is_ok())
    }

    /// Whether `executable` is one of the library's own (discovery skips
    /// those).
    pub(crate) fn owns_executable(&self, executable: u64) -> bool {
        self.own_executables.locked().contains(&executable)
    }

    /// Releases every runner (finalize): queues, executables, buffers. A
    /// runner a live snapshot still holds goes when that snapshot does.
    pub fn finalize(&self) {
        let runners = std::mem::take(&mut *self.runners.locked());
        drop(runners);
    }
}

impl Default for DeviceKernels {
    fn default() -> Self {
        Self::new()
    }
}

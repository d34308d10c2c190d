//! The memory snapshot (the SDK's `memory_snapshot.cpp`): capture of one
//! agent's replay state, and its restore between passes.
//!
//! A snapshot holds one copy per region: each tracked allocation owned by
//! the agent, and each module-scope variable visible to it. It is either
//! complete or declined: a partial snapshot restored between passes would
//! write back some regions and leave others carrying a later pass's
//! mutations, so any failure during capture releases what was captured and
//! declines replay with a reason.
//!
//! Where the copies live is the storage policy's choice (`storage/`): packed
//! into reused device, pinned or pageable arenas, copied in batches
//! (`copy.rs`); or, under the `baseline` policy, the design's original path
//! of one fresh pageable buffer and one blocking copy per region.

pub mod capture;
pub mod context;
pub mod copy;
pub mod coverage;
pub mod decline;
pub mod device;
pub mod discovery;
pub mod discovery_cache;
pub mod host_buffer;
pub mod host_memory;
pub mod restore;
pub mod shared;
pub mod snapshot;
pub mod state;
pub mod storage;
pub mod verify;

pub use capture::snap;
pub use decline::{Decline, DeclineReason};
pub use restore::{restore, RestoreReport};
pub use snapshot::Snapshot;

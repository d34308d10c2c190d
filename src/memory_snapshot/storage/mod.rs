//! Where snapshot copies live: the storage tiers, the policy that chooses
//! among them, the arenas that back them, and the budgets that bound them.
//!
//! - **Device**: memory of a coarse-grained pool of the replayed agent,
//!   allocated through the un-wrapped allocator (never tracked, never
//!   captured); copies are device-to-device, at the device's own copy rate.
//! - **Pinned**: a host pool of the CPU agent made accessible to the replayed
//!   agent; copies run at the host link's DMA rate.
//! - **Pageable**: ordinary host memory; the runtime stages copies through
//!   pinned buffers of its own.
//!
//! `auto` fills device memory up to the device budget, then pinned memory up
//! to the host budget, then pageable memory. A policy can force one tier, or
//! select `baseline`: the design's original behaviour (one fresh pageable
//! buffer per region, one blocking copy per region, no arena, no discovery
//! cache), kept so it can be measured beside the rest in one run.

pub mod arena;
pub mod budget;
pub mod layout;
pub mod pools;

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};

/// A storage tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tier {
    Device = 0,
    Pinned = 1,
    Pageable = 2,
}

impl Tier {
    pub const ALL: [Tier; 3] = [Tier::Device, Tier::Pinned, Tier::Pageable];

    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Tier::Device => "device",
            Tier::Pinned => "pinned host",
            Tier::Pageable => "pageable host",
        })
    }
}

/// How a snapshot chooses storage for its regions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoragePolicy {
    /// Device up to the device budget, then pinned, then pageable.
    Auto = 0,
    /// Device memory only; a snapshot that does not fit declines.
    Device = 1,
    /// Pinned host memory only.
    Pinned = 2,
    /// Pageable host memory only (still an arena, still batched where it can).
    Pageable = 3,
    /// The design's original path: a fresh pageable buffer and one blocking
    /// copy per region, no arena, no discovery cache.
    Baseline = 4,
}

impl StoragePolicy {
    pub fn from_u32(value: u32) -> Option<Self> {
        Some(match value {
            0 => StoragePolicy::Auto,
            1 => StoragePolicy::Device,
            2 => StoragePolicy::Pinned,
            3 => StoragePolicy::Pageable,
            4 => StoragePolicy::Baseline,
            _ => return None,
        })
    }

    pub fn parse(text: &str) -> Option<Self> {
        Some(match text.trim().to_ascii_lowercase().as_str() {
            "auto" => StoragePolicy::Auto,
            "device" => StoragePolicy::Device,
            "pinned" => StoragePolicy::Pinned,
            "pageable" => StoragePolicy::Pageable,
            "baseline" => StoragePolicy::Baseline,
            _ => return None,
        })
    }

    /// The one tier a forcing policy allows.
    pub fn forced_tier(self) -> Option<Tier> {
        match self {
            StoragePolicy::Device => Some(Tier::Device),
            StoragePolicy::Pinned => Some(Tier::Pinned),
            StoragePolicy::Pageable => Some(Tier::Pageable),
            StoragePolicy::Auto | StoragePolicy::Baseline => None,
        }
    }
}

/// The policy in force: set through the C API, or read once from
/// `KERNEL_REPLAY_STORAGE` (auto when unset or unknown).
pub struct PolicySetting(AtomicU8);

const UNRESOLVED: u8 = u8::MAX;

impl PolicySetting {
    pub const fn new() -> Self {
        PolicySetting(AtomicU8::new(UNRESOLVED))
    }

    pub fn get(&self) -> StoragePolicy {
        let value = self.0.load(Ordering::Acquire);
        if let Some(policy) = StoragePolicy::from_u32(u32::from(value)) {
            return policy;
        }
        let from_env = std::env::var("KERNEL_REPLAY_STORAGE")
            .ok()
            .and_then(|v| StoragePolicy::parse(&v))
            .unwrap_or(StoragePolicy::Auto);
        // A concurrent set wins over the environment.
        let _ = self.0.compare_exchange(
            UNRESOLVED,
            from_env as u8,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        StoragePolicy::from_u32(u32::from(self.0.load(Ordering::Acquire))).unwrap_or(from_env)
    }

    pub fn set(&self, policy: StoragePolicy) {
        self.0.store(policy as u8, Ordering::Release);
    }
}

impl Default for PolicySetting {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_by_name_and_number() {
        assert_eq!(
            StoragePolicy::parse(" Device "),
            Some(StoragePolicy::Device)
        );
        assert_eq!(
            StoragePolicy::parse("baseline"),
            Some(StoragePolicy::Baseline)
        );
        assert_eq!(StoragePolicy::parse("fast"), None);
        assert_eq!(StoragePolicy::from_u32(2), Some(StoragePolicy::Pinned));
        assert_eq!(StoragePolicy::from_u32(5), None);
        assert_eq!(StoragePolicy::Auto.forced_tier(), None);
        assert_eq!(StoragePolicy::Pageable.forced_tier(), Some(Tier::Pageable));
    }

    #[test]
    fn an_explicit_setting_wins() {
        let setting = PolicySetting::new();
        setting.set(StoragePolicy::Pinned);
        assert_eq!(setting.get(), StoragePolicy::Pinned);
    }
}

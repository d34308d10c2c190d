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

use crate::support::settings::{self, Setting};

crate::c_enum! {
    /// A storage tier (`kr_snapshot_tier_bytes`, the stats' per-tier figures).
    pub enum Tier: "kr_storage_tier_t", "KR_TIER_" {
        /// Device memory of the replayed agent.
        Device = 0 => "DEVICE",
        /// Pinned host memory the agent can reach.
        Pinned = 1 => "PINNED",
        /// Pageable host memory.
        Pageable = 2 => "PAGEABLE",
    }
}

impl Tier {
    /// How many tiers there are: the length of every per-tier array.
    pub const COUNT: usize = Tier::ALL.len();

    /// The tier's index in per-tier arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// One value per tier, indexed by [`Tier::index`].
pub type PerTier<T> = [T; Tier::COUNT];

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Tier::Device => "device",
            Tier::Pinned => "pinned host",
            Tier::Pageable => "pageable host",
        })
    }
}

crate::c_enum! {
    /// Where snapshots keep their copies (`kr_set_storage_policy`).
    pub enum StoragePolicy: "kr_storage_policy_t", "KR_STORAGE_" {
        /// Device memory up to the device budget, then pinned host memory up to
        /// the host budget, then pageable host memory. The default.
        Auto = 0 => "AUTO",
        /// Device memory only; a snapshot that does not fit declines with
        /// `KR_DECLINE_DEVICE_MEMORY`.
        Device = 1 => "DEVICE",
        /// Pinned host memory only.
        Pinned = 2 => "PINNED",
        /// Pageable host memory only.
        Pageable = 3 => "PAGEABLE",
        /// The original design: a fresh pageable buffer and one blocking copy per
        /// region, no arena reuse, no discovery cache. For comparison.
        Baseline = 4 => "BASELINE",
    }
}

impl StoragePolicy {
    /// The policy named by `KERNEL_REPLAY_STORAGE`'s value.
    pub fn parse(text: &str) -> Option<Self> {
        StoragePolicy::from_code(u32::from(settings::STORAGE.parse(text)?))
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
/// `KERNEL_REPLAY_STORAGE` (auto when unset or not understood).
pub struct PolicySetting(Setting);

impl PolicySetting {
    pub const fn new() -> Self {
        PolicySetting(Setting::new(&settings::STORAGE))
    }

    pub fn get(&self) -> StoragePolicy {
        StoragePolicy::from_code(u32::from(self.0.code())).unwrap_or(StoragePolicy::Auto)
    }

    pub fn set(&self, policy: StoragePolicy) {
        self.0.set(policy as u8);
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
        assert_eq!(StoragePolicy::from_code(2), Some(StoragePolicy::Pinned));
        assert_eq!(StoragePolicy::from_code(5), None);
        assert_eq!(StoragePolicy::Auto.forced_tier(), None);
        assert_eq!(StoragePolicy::Pageable.forced_tier(), Some(Tier::Pageable));
    }

    #[test]
    fn every_policy_parses_by_its_name() {
        for policy in [
            StoragePolicy::Auto,
            StoragePolicy::Device,
            StoragePolicy::Pinned,
            StoragePolicy::Pageable,
            StoragePolicy::Baseline,
        ] {
            let name = format!("{policy:?}");
            assert_eq!(StoragePolicy::parse(&name), Some(policy), "{name}");
            assert_eq!(
                StoragePolicy::parse(&name.to_ascii_lowercase()),
                Some(policy),
                "{name}"
            );
        }
    }

    #[test]
    fn tiers_are_named_for_the_log() {
        assert_eq!(Tier::Device.to_string(), "device");
        assert_eq!(Tier::Pinned.to_string(), "pinned host");
        assert_eq!(Tier::Pageable.to_string(), "pageable host");
    }

    #[test]
    fn an_explicit_setting_wins() {
        let setting = PolicySetting::new();
        setting.set(StoragePolicy::Pinned);
        assert_eq!(setting.get(), StoragePolicy::Pinned);
    }
}

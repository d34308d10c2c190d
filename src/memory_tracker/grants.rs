//! Which agents may reach another agent's device memory: the grants of
//! `hsa_amd_agents_allow_access`, so that a snapshot of agent A captures
//! the device memory of agent B that A was given access to (peer memory a
//! multi-GPU kernel writes).
//!
//! A grant is kept on the allocation's inventory entry as a set of agents,
//! one bit per agent: the agents a process has are few and fixed, so each
//! gets a bit the first time it is seen (up to 64; an agent beyond that is
//! never granted here, and its peer memory stays uncaptured and counted).
//! After a successful call the set is what the runtime reports
//! (`hsa_amd_pointer_info`'s accessible agents: ROCr replaces a block's
//! access list, some runtimes add to it), the owner left out. Only memory
//! owned by a GPU is peer memory: host memory granted to GPUs is another
//! kind with hazards of its own (the runtime's staging buffers), not
//! captured this way.

use std::sync::atomic::{AtomicU64, Ordering};

use super::Tracker;
use crate::hsa::entries::CoreEntries;
use crate::hsa::hsa_agent_t;
use crate::hsa::query::device_type;
use crate::hsa::sys::HSA_DEVICE_TYPE_GPU;

/// Bits of a grant set.
const SLOTS: usize = 64;

/// The agents seen so far, each with its bit, and whether it is a GPU.
pub struct AgentBits {
    /// Agent handle per bit, 0 for a free slot; filled in order, never
    /// cleared (agents live as long as the runtime).
    handles: [AtomicU64; SLOTS],
    /// Bit set of the slots whose agent is a GPU.
    gpus: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: AtomicU64 = AtomicU64::new(0);

impl AgentBits {
    pub const fn new() -> Self {
        AgentBits {
            handles: [FREE; SLOTS],
            gpus: AtomicU64::new(0),
        }
    }

    /// The bit of `agent` if it has one.
    pub fn bit_of(&self, agent: u64) -> Option<u64> {
        self.handles
            .iter()
            .take_while(|slot| slot.load(Ordering::Acquire) != 0)
            .position(|slot| slot.load(Ordering::Acquire) == agent)
            .map(|index| 1 << index)
    }

    /// The bit of `agent`, given one if it has none (asking the runtime
    /// once whether it is a GPU); `None` when every slot is taken.
    fn bit_or_insert(&self, core: &CoreEntries, agent: u64) -> Option<u64> {
        if agent == 0 {
            return None;
        }
        for (index, slot) in self.handles.iter().enumerate() {
            match slot.compare_exchange(0, agent, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    if device_type(core, hsa_agent_t { handle: agent }) == Some(HSA_DEVICE_TYPE_GPU)
                    {
                        self.gpus.fetch_or(1 << index, Ordering::Release);
                    }
                    return Some(1 << index);
                }
                Err(found) if found == agent => return Some(1 << index),
                Err(_) => continue,
            }
        }
        None
    }

    /// Whether `agent` is known to be a GPU (it has a bit and the runtime
    /// said so when it got it).
    fn is_gpu(&self, core: &CoreEntries, agent: u64) -> bool {
        self.bit_or_insert(core, agent)
            .is_some_and(|bit| self.gpus.load(Ordering::Acquire) & bit != 0)
    }
}

impl Default for AgentBits {
    fn default() -> Self {
        Self::new()
    }
}

/// After a successful `hsa_amd_agents_allow_access` on `base`: the tracked
/// allocation there, if it is a GPU's, records the agents other than its
/// owner that the runtime now lets reach it. `listed` are the call's
/// agents, used when the runtime does not report the list.
pub fn granted(tracker: &Tracker, base: usize, listed: &[hsa_agent_t]) {
    let (Some(core), Some(amd)) = (tracker.core(), tracker.amd()) else {
        return;
    };
    let Some(owner) = tracker.inventory.owner_at(base) else {
        return;
    };
    if !tracker.agent_bits.is_gpu(core, owner) {
        return;
    }
    let reported = amd.accessible_agents(base);
    let agents: &[u64] = match &reported {
        Ok(agents) => agents,
        Err(_) => &[],
    };
    let listed = listed.iter().map(|a| a.handle);
    let mut grants = 0;
    let mut add = |agent: u64| {
        if agent != owner {
            grants |= tracker.agent_bits.bit_or_insert(core, agent).unwrap_or(0);
        }
    };
    if reported.is_ok() {
        agents.iter().copied().for_each(&mut add);
    } else {
        listed.for_each(&mut add);
    }
    tracker.inventory.set_grants(base, grants, reported.is_ok());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_are_given_in_order_once_per_agent() {
        let bits = AgentBits::new();
        let core = CoreEntries::default();
        assert_eq!(bits.bit_of(7), None);
        assert_eq!(bits.bit_or_insert(&core, 7), Some(1));
        assert_eq!(bits.bit_or_insert(&core, 9), Some(2));
        assert_eq!(bits.bit_or_insert(&core, 7), Some(1));
        assert_eq!(bits.bit_of(9), Some(2));
        assert_eq!(bits.bit_or_insert(&core, 0), None, "no agent");
        // Without a runtime to ask, no agent is known to be a GPU.
        assert!(!bits.is_gpu(&core, 7));
        for agent in 10..72 {
            bits.bit_or_insert(&core, agent);
        }
        assert_eq!(bits.bit_or_insert(&core, 1000), None, "every slot taken");
    }
}

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
//! access list, some runtimes add to it), the owner left out. Memory owned
//! by a GPU is peer memory to the others; host memory (a CPU agent's pool,
//! or locked memory, whose grants are the lock's agents) is captured as
//! host memory by the GPUs granted it, as the host-memory setting says
//! (the runtime's own staging buffers share its pools).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::Tracker;
use crate::hsa::entries::CoreEntries;
use crate::hsa::hsa_agent_t;
use crate::hsa::query::{self, device_type};
use crate::hsa::sys::{hsa_device_type_t, HSA_DEVICE_TYPE_CPU, HSA_DEVICE_TYPE_GPU};

/// Bits of a grant set.
const SLOTS: usize = 64;

/// The agents seen so far, each with its bit, and whether it is a GPU.
pub struct AgentBits {
    /// Agent handle per bit, 0 for a free slot; filled in order, never
    /// cleared (agents live as long as the runtime).
    handles: [AtomicU64; SLOTS],
    /// Bit set of the slots whose agent is a GPU.
    gpus: AtomicU64,
    /// Bit set of the slots whose agent is a CPU.
    cpus: AtomicU64,
    /// Bit set of the slots whose type is known (set after `gpus` and
    /// `cpus`: until then a racing reader asks the runtime itself).
    typed: AtomicU64,
    /// Every agent of the runtime was given its bit (`all_gpus`).
    listed_all: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: AtomicU64 = AtomicU64::new(0);

impl AgentBits {
    pub const fn new() -> Self {
        AgentBits {
            handles: [FREE; SLOTS],
            gpus: AtomicU64::new(0),
            cpus: AtomicU64::new(0),
            typed: AtomicU64::new(0),
            listed_all: AtomicBool::new(false),
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
                    let bit = 1 << index;
                    match device_type(core, hsa_agent_t { handle: agent }) {
                        Some(HSA_DEVICE_TYPE_GPU) => self.gpus.fetch_or(bit, Ordering::Release),
                        Some(HSA_DEVICE_TYPE_CPU) => self.cpus.fetch_or(bit, Ordering::Release),
                        _ => 0,
                    };
                    self.typed.fetch_or(bit, Ordering::Release);
                    return Some(bit);
                }
                Err(found) if found == agent => return Some(1 << index),
                Err(_) => continue,
            }
        }
        None
    }

    /// The runtime's type of `agent`, asked once per agent.
    fn type_of(&self, core: &CoreEntries, agent: u64) -> Option<hsa_device_type_t> {
        match self.bit_or_insert(core, agent) {
            Some(bit) if self.typed.load(Ordering::Acquire) & bit != 0 => {
                if self.gpus.load(Ordering::Acquire) & bit != 0 {
                    Some(HSA_DEVICE_TYPE_GPU)
                } else if self.cpus.load(Ordering::Acquire) & bit != 0 {
                    Some(HSA_DEVICE_TYPE_CPU)
                } else {
                    None
                }
            }
            // No slot left, or another thread is typing it right now.
            _ => device_type(core, hsa_agent_t { handle: agent }),
        }
    }

    /// Whether the runtime says `agent` is a CPU: only then is memory it
    /// owns host memory, copied by the CPU (an agent of unknown type owns
    /// device memory, never touched from the host).
    pub(crate) fn is_cpu(&self, core: &CoreEntries, agent: u64) -> bool {
        self.type_of(core, agent) == Some(HSA_DEVICE_TYPE_CPU)
    }

    /// The bits of every GPU of the runtime (each agent given its bit the
    /// first time this is asked): what "every GPU" means in a lock without
    /// an agent list.
    pub(crate) fn all_gpus(&self, core: &CoreEntries) -> u64 {
        if !self.listed_all.load(Ordering::Acquire) {
            for agent in query::agents(core) {
                self.bit_or_insert(core, agent.handle);
            }
            self.listed_all.store(true, Ordering::Release);
        }
        self.gpus.load(Ordering::Acquire)
    }

    /// The bits of the GPUs among `agents` (CPU agents name no GPU access).
    pub(crate) fn gpus_of(&self, core: &CoreEntries, agents: &[hsa_agent_t]) -> u64 {
        agents.iter().fold(0, |bits, agent| {
            bits | self
                .bit_or_insert(core, agent.handle)
                .filter(|&bit| self.gpus.load(Ordering::Acquire) & bit != 0)
                .unwrap_or(0)
        })
    }
}

impl Default for AgentBits {
    fn default() -> Self {
        Self::new()
    }
}

/// Where an allocation's grants come from.
#[derive(Debug, Clone, Copy)]
pub enum Grant<'a> {
    /// A successful `hsa_amd_agents_allow_access` with these agents.
    Call(&'a [hsa_agent_t]),
    /// Whatever the runtime reports now (a fresh `hsa_memory_allocate`, a
    /// re-validated record).
    Runtime,
}

/// Records on the tracked allocation at `base` the agents other than its
/// owner that the runtime lets reach it. ROCr replaces an allocation's
/// access list with a call's (and its owner, for device memory), except
/// that it adds to it for sub-allocated device memory; so for host memory
/// a call's own list is the answer and the runtime is not asked (a pointer
/// query with its agent list is most of this wrapper's cost), while for
/// device memory the runtime's list is asked for, the call's used only
/// when the runtime gives none.
pub fn granted(tracker: &Tracker, base: usize, grant: Grant<'_>) {
    let (Some(core), Some(amd)) = (tracker.core(), tracker.amd()) else {
        return;
    };
    let Some(owner) = tracker.inventory.owner_at(base) else {
        return;
    };
    let device_memory = !tracker.agent_bits.is_cpu(core, owner);
    let mut grants = 0;
    let mut add = |agent: u64| {
        if agent != owner {
            grants |= tracker.agent_bits.bit_or_insert(core, agent).unwrap_or(0);
        }
    };
    let exact = match grant {
        Grant::Call(listed) if !device_memory => {
            listed.iter().for_each(|a| add(a.handle));
            true
        }
        _ => match (amd.accessible_agents(base), grant) {
            (Ok(agents), _) => {
                agents.iter().copied().for_each(&mut add);
                true
            }
            (Err(_), Grant::Call(listed)) => {
                listed.iter().for_each(|a| add(a.handle));
                false
            }
            (Err(_), Grant::Runtime) => return,
        },
    };
    tracker.inventory.set_grants(base, grants, exact);
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
        // Without a runtime to ask, no agent's type is known.
        assert!(!bits.is_cpu(&core, 7));
        assert_eq!(bits.gpus_of(&core, &[hsa_agent_t { handle: 7 }]), 0);
        for agent in 10..72 {
            bits.bit_or_insert(&core, agent);
        }
        assert_eq!(bits.bit_or_insert(&core, 1000), None, "every slot taken");
    }
}

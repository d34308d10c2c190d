//! Regions two agents can write: one replay at a time.
//!
//! Peer memory makes a region part of two agents' capture sets: GPU B's
//! buffer granted to GPU A is in B's snapshots (its own memory) and in A's
//! (peer memory). Were both agents replaying at once, A's restore could
//! rewrite the buffer in the middle of one of B's passes, and B's in the
//! middle of A's: each pass would read a region torn by the other replay.
//!
//! So a snapshot *claims* every shared region it captures (peer memory, and
//! memory of its own that another agent was granted) for its lifetime, and
//! a snapshot of another agent that would capture a claimed region declines
//! (`KR_DECLINE_SHARED_REGION_BUSY`): its dispatch runs once, unreplayed,
//! and a later window, once the holder's snapshot is freed, replays again.
//! Snapshots of one agent never conflict with each other (an agent replays
//! one window at a time). Regions nobody else may write are never claimed,
//! so a snapshot without shared memory pays one empty scan.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::memory_tracker::inventory::TrackedRegion;
use crate::support::sync::Recover;

/// One shared region held by a live snapshot.
#[derive(Debug, Clone, Copy)]
struct Claim {
    base: usize,
    agent: u64,
    holder: u64,
}

/// The shared regions live snapshots hold.
pub struct SharedClaims {
    claims: Mutex<Vec<Claim>>,
    next_holder: AtomicU64,
}

/// Why claiming failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimRefused {
    /// Another agent's live snapshot holds the region at `base`.
    Busy { base: usize, agent: u64 },
    /// No host memory to record the claims.
    Memory,
}

impl SharedClaims {
    pub const fn new() -> Self {
        SharedClaims {
            claims: Mutex::new(Vec::new()),
            next_holder: AtomicU64::new(1),
        }
    }

    /// Claims the shared regions among `tracked` for a snapshot of `agent`,
    /// or refuses them all. The claims last as long as the guard.
    pub fn claim(
        &'static self,
        agent: u64,
        tracked: &[TrackedRegion],
    ) -> Result<Option<ClaimGuard>, ClaimRefused> {
        let shared = || tracked.iter().filter(|r| r.shared);
        if shared().next().is_none() {
            return Ok(None);
        }
        let mut claims = self.claims.locked();
        if let Some(busy) =
            shared().find_map(|r| claims.iter().find(|c| c.base == r.base && c.agent != agent))
        {
            return Err(ClaimRefused::Busy {
                base: busy.base,
                agent: busy.agent,
            });
        }
        claims
            .try_reserve(shared().count())
            .map_err(|_| ClaimRefused::Memory)?;
        let holder = self.next_holder.fetch_add(1, Ordering::Relaxed);
        claims.extend(shared().map(|r| Claim {
            base: r.base,
            agent,
            holder,
        }));
        Ok(Some(ClaimGuard {
            claims: self,
            holder,
        }))
    }

    fn release(&self, holder: u64) {
        self.claims.locked().retain(|c| c.holder != holder);
    }
}

impl Default for SharedClaims {
    fn default() -> Self {
        Self::new()
    }
}

/// A snapshot's claims; released when it is dropped (with the snapshot).
pub struct ClaimGuard {
    claims: &'static SharedClaims,
    holder: u64,
}

impl Drop for ClaimGuard {
    fn drop(&mut self) {
        self.claims.release(self.holder);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory_tracker::kind::MemoryKind;

    fn region(base: usize, shared: bool) -> TrackedRegion {
        TrackedRegion {
            base,
            size: 64,
            generation: 1,
            memory: MemoryKind::Device,
            owner: 1,
            shared,
            coarse: false,
        }
    }

    #[test]
    fn another_agent_is_refused_a_held_region_until_it_is_released() {
        static CLAIMS: SharedClaims = SharedClaims::new();
        let held = CLAIMS
            .claim(1, &[region(0x1000, true), region(0x2000, false)])
            .unwrap();
        assert!(held.is_some());
        // The same agent: no conflict. Another agent: the shared one is busy,
        // the unshared one was never claimed.
        assert!(CLAIMS.claim(1, &[region(0x1000, true)]).is_ok());
        assert_eq!(
            CLAIMS.claim(2, &[region(0x1000, true)]).err(),
            Some(ClaimRefused::Busy {
                base: 0x1000,
                agent: 1
            })
        );
        assert!(CLAIMS.claim(2, &[region(0x2000, true)]).unwrap().is_some());
        drop(held);
        assert!(CLAIMS.claim(2, &[region(0x1000, true)]).unwrap().is_some());
        // Nothing shared: nothing claimed, nothing allocated.
        assert!(CLAIMS.claim(3, &[region(0x1000, false)]).unwrap().is_none());
    }
}

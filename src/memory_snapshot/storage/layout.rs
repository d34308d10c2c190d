//! Planning a snapshot's storage: which tier each region goes to, at which
//! offset of that tier's arena, and leasing the arenas.

use super::arena::{AcquireError, AgentView, Lease, REGION_ALIGNMENT};
use super::budget::{device_safety_margin, DEVICE_BUDGET_AUTO};
use super::pools::memory_available;
use super::PerTier;
use super::{StoragePolicy, Tier};
use crate::hsa::hsa_agent_t;
use crate::memory_snapshot::context::Context;

/// Where every region of one snapshot goes, with the leased arenas.
pub struct Layout {
    /// Per region, in capture order: tier and offset in that tier's arena.
    pub places: Vec<(Tier, usize)>,
    /// The leased arena of each tier used (indexed by `Tier::index`).
    pub leases: PerTier<Option<Lease>>,
}

/// Why no layout could be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayoutError {
    /// A forced device tier does not fit (budget, pool, or allocation).
    DeviceMemory {
        needed: u64,
        error: Option<AcquireError>,
    },
    /// Host memory (pinned or pageable) does not fit the host budget or
    /// cannot be allocated.
    HostMemory {
        needed: u64,
        error: Option<AcquireError>,
    },
    /// The plan itself could not be allocated.
    Metadata,
}

/// One region to place: its bytes, and whether it is host memory, which is
/// always kept in pageable host memory (the CPU copies it, under every
/// storage policy; it counts against the host budget), or managed memory,
/// which is kept where the replaying GPU can copy it to and from: the
/// device or the pinned tier, never pageable memory (under a forced
/// pageable policy: pinned), so that no CPU copy migrates its pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Need {
    pub size: usize,
    pub host_memory: bool,
    pub managed: bool,
}

/// Plans and leases storage for `regions`.
pub fn lay_out(
    cx: Context,
    agent: hsa_agent_t,
    regions: &[Need],
    policy: StoragePolicy,
) -> Result<Layout, LayoutError> {
    let view = cx.state.storage.view(cx, agent);
    let device_usable = view.pools.is_gpu && view.pools.device_pool.is_some();
    let pinned_usable = view.pools.host_pool.is_some()
        && cx
            .amd()
            .is_some_and(|amd| amd.hsa_amd_agents_allow_access_fn.is_some());
    let mut allowed = match policy.forced_tier() {
        Some(tier) => [
            tier == Tier::Device,
            tier == Tier::Pinned,
            tier == Tier::Pageable,
        ],
        None => [device_usable, pinned_usable, true],
    };
    // A forced tier this agent cannot have declines at once, saying so.
    let needed: u64 = regions
        .iter()
        .filter(|r| !r.host_memory && !r.managed)
        .map(|r| r.size.next_multiple_of(REGION_ALIGNMENT) as u64)
        .sum();
    match policy.forced_tier() {
        Some(Tier::Device) if !device_usable && needed > 0 => {
            return Err(LayoutError::DeviceMemory {
                needed,
                error: Some(AcquireError::NoPool),
            });
        }
        Some(Tier::Pinned) if !pinned_usable && needed > 0 => {
            return Err(LayoutError::HostMemory {
                needed,
                error: Some(AcquireError::NoPool),
            });
        }
        _ => {}
    }
    // What the whole snapshot needs if it all goes to the device: when the
    // retained device arena already holds that, the steady state, no runtime
    // query is needed to size the device tier.
    let managed_bytes: u64 = regions
        .iter()
        .filter(|r| r.managed)
        .map(|r| r.size.next_multiple_of(REGION_ALIGNMENT) as u64)
        .sum();
    let all_device = needed + managed_bytes;
    // Managed memory under a forced pageable policy: pinned, where the GPU
    // reaches it.
    let pinned_for_managed = policy.forced_tier() == Some(Tier::Pageable) && pinned_usable;
    loop {
        let managed_allowed = [allowed[0], allowed[1] || pinned_for_managed, false];
        let rooms = Rooms {
            device: if allowed[0] && device_usable {
                device_room(cx, agent, &view, all_device)
            } else {
                0
            },
            host: cx
                .state
                .storage
                .host
                .room()
                .saturating_add((view.retained[1] + view.retained[2]) as u64),
        };
        let (places, totals) =
            assign(regions, allowed, managed_allowed, rooms).map_err(|error| match error {
                AssignError::Metadata => LayoutError::Metadata,
                AssignError::NoRoom(needed) if policy == StoragePolicy::Device => {
                    LayoutError::DeviceMemory {
                        needed,
                        error: None,
                    }
                }
                AssignError::NoRoom(needed) | AssignError::NoHostRoom(needed) => {
                    LayoutError::HostMemory {
                        needed,
                        error: None,
                    }
                }
            })?;
        let mut leases: PerTier<Option<Lease>> = Default::default();
        let mut retry = false;
        for &tier in Tier::ALL {
            let bytes = totals[tier.index()];
            if bytes == 0 {
                continue;
            }
            match cx.state.storage.acquire(cx, agent, tier, bytes as usize) {
                Ok(lease) => leases[tier.index()] = Some(lease),
                // Auto degrades to the next tier; a forced tier declines.
                // (Managed memory has no tier after pinned: it then finds
                // no room and declines.)
                Err(_) if policy == StoragePolicy::Auto && tier != Tier::Pageable => {
                    allowed[tier.index()] = false;
                    retry = true;
                    break;
                }
                Err(error) if tier == Tier::Device => {
                    return Err(LayoutError::DeviceMemory {
                        needed: bytes,
                        error: Some(error),
                    })
                }
                Err(error) => {
                    return Err(LayoutError::HostMemory {
                        needed: bytes,
                        error: Some(error),
                    })
                }
            }
        }
        if !retry {
            return Ok(Layout { places, leases });
        }
    }
}

#[derive(Clone, Copy)]
struct Rooms {
    device: u64,
    host: u64,
}

/// Per region its tier and offset, and per tier the bytes used.
type Assignment = (Vec<(Tier, usize)>, PerTier<u64>);

#[derive(Debug, PartialEq, Eq)]
enum AssignError {
    /// The bytes that did not fit (the device tier's when forced, or with
    /// the host tiers' when they were allowed).
    NoRoom(u64),
    /// Host memory (kept pageable whatever the policy) that did not fit
    /// the host room: the bytes of the host tiers.
    NoHostRoom(u64),
    Metadata,
}

/// Assigns each region the first allowed tier with room, in the order
/// device, pinned, pageable (host memory: pageable only; managed memory:
/// the tiers of `managed_allowed`). Returns the places and per-tier totals.
fn assign(
    regions: &[Need],
    allowed: PerTier<bool>,
    managed_allowed: PerTier<bool>,
    rooms: Rooms,
) -> Result<Assignment, AssignError> {
    const PAGEABLE_ONLY: PerTier<bool> = [false, false, true];
    let mut places = Vec::new();
    places
        .try_reserve_exact(regions.len())
        .map_err(|_| AssignError::Metadata)?;
    let mut used = [0u64; Tier::COUNT];
    for &Need {
        size,
        host_memory,
        managed,
    } in regions
    {
        let allowed = if host_memory {
            PAGEABLE_ONLY
        } else if managed {
            managed_allowed
        } else {
            allowed
        };
        let aligned = size.next_multiple_of(REGION_ALIGNMENT) as u64;
        let fits = |tier: Tier, used: &PerTier<u64>| -> bool {
            let mut after = *used;
            after[tier.index()] += aligned;
            match tier {
                Tier::Device => after[0] <= rooms.device,
                Tier::Pinned | Tier::Pageable => after[1].saturating_add(after[2]) <= rooms.host,
            }
        };
        let tier = Tier::ALL
            .iter()
            .copied()
            .find(|&t| allowed[t.index()] && fits(t, &used))
            .ok_or(if host_memory {
                AssignError::NoHostRoom(used[1] + used[2] + aligned)
            } else {
                AssignError::NoRoom(used.iter().sum::<u64>() + aligned)
            })?;
        places.push((tier, used[tier.index()] as usize));
        used[tier.index()] += aligned;
    }
    Ok((places, used))
}

/// How large a device arena this snapshot may have: the device budget less
/// what other snapshots of the agent hold, or (auto) the agent's free memory
/// less the safety margin, plus the retained arena this snapshot can reuse.
/// Under auto, a retained arena of at least `wanted` bytes answers at once.
fn device_room(cx: Context, agent: hsa_agent_t, view: &AgentView, wanted: u64) -> u64 {
    let Some((_, pool_size)) = view.pools.device_pool else {
        return 0;
    };
    let held = view.held[0];
    let retained = view.retained[0] as u64;
    match cx.state.storage.device_budget.get() {
        DEVICE_BUDGET_AUTO if retained >= wanted => retained,
        DEVICE_BUDGET_AUTO => {
            let available = cx
                .core()
                .and_then(|core| memory_available(core, agent))
                .unwrap_or_else(|| {
                    // A runtime without the free-memory query: the pool size
                    // less what the application and our arenas hold.
                    let tracked = cx.tracker.inventory.agent_totals(agent.handle).1;
                    pool_size.saturating_sub(tracked).saturating_sub(held)
                });
            available
                .saturating_add(retained)
                .saturating_sub(device_safety_margin(pool_size))
        }
        budget => budget.saturating_sub(held - retained),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: PerTier<bool> = [true; Tier::COUNT];

    const GRANULE: u64 = 64 << 10;

    fn device(sizes: &[usize]) -> Vec<Need> {
        sizes
            .iter()
            .map(|&size| Need {
                size,
                ..Need::default()
            })
            .collect()
    }

    #[test]
    fn device_fills_first_then_host_tiers() {
        let sizes = [GRANULE as usize; 4];
        let (places, totals) = assign(
            &device(&sizes),
            ALL,
            ALL,
            Rooms {
                device: 2 * GRANULE,
                host: u64::MAX,
            },
        )
        .unwrap();
        let tiers: Vec<Tier> = places.iter().map(|p| p.0).collect();
        assert_eq!(
            tiers,
            [Tier::Device, Tier::Device, Tier::Pinned, Tier::Pinned]
        );
        assert_eq!(totals, [2 * GRANULE, 2 * GRANULE, 0]);
        assert_eq!(places[1].1, GRANULE as usize, "packed at aligned offsets");
    }

    #[test]
    fn offsets_are_aligned_and_regions_do_not_overlap() {
        let sizes = [1, 300, 17, 256];
        let (places, totals) = assign(
            &device(&sizes),
            ALL,
            ALL,
            Rooms {
                device: u64::MAX,
                host: 0,
            },
        )
        .unwrap();
        let offsets: Vec<usize> = places.iter().map(|p| p.1).collect();
        assert_eq!(offsets, [0, 256, 768, 1024]);
        assert_eq!(totals[0], 1280);
    }

    #[test]
    fn without_pinned_the_overflow_goes_pageable_and_past_the_host_room_fails() {
        let sizes = [GRANULE as usize; 3];
        let allowed = [true, false, true];
        let (places, _) = assign(
            &device(&sizes),
            allowed,
            allowed,
            Rooms {
                device: GRANULE,
                host: 2 * GRANULE,
            },
        )
        .unwrap();
        assert_eq!(
            places.iter().map(|p| p.0).collect::<Vec<_>>(),
            [Tier::Device, Tier::Pageable, Tier::Pageable]
        );
        assert!(assign(
            &device(&sizes),
            allowed,
            allowed,
            Rooms {
                device: GRANULE,
                host: GRANULE
            }
        )
        .is_err());
    }

    #[test]
    fn host_memory_goes_pageable_whatever_the_tiers_allowed() {
        let mut regions = device(&[GRANULE as usize; 2]);
        regions.insert(
            1,
            Need {
                size: 100,
                host_memory: true,
                managed: false,
            },
        );
        let (places, totals) = assign(
            &regions,
            [true, false, false],
            ALL,
            Rooms {
                device: u64::MAX,
                host: u64::MAX,
            },
        )
        .unwrap();
        assert_eq!(
            places.iter().map(|p| p.0).collect::<Vec<_>>(),
            [Tier::Device, Tier::Pageable, Tier::Device]
        );
        assert_eq!(totals, [2 * GRANULE, 0, 256]);
        // And past the host room it does not fit, even with device room.
        let room = Rooms {
            device: u64::MAX,
            host: 0,
        };
        assert_eq!(
            assign(&regions, ALL, ALL, room),
            Err(AssignError::NoHostRoom(256))
        );
    }

    #[test]
    fn managed_memory_goes_where_the_gpu_reaches_it_never_pageable() {
        let managed = |size| Need {
            size,
            host_memory: false,
            managed: true,
        };
        let regions = [managed(GRANULE as usize), managed(GRANULE as usize)];
        let rooms = Rooms {
            device: GRANULE,
            host: u64::MAX,
        };
        // The device first, then pinned; pageable never, even allowed.
        let (places, _) = assign(&regions, ALL, [true, true, false], rooms).unwrap();
        assert_eq!(
            places.iter().map(|p| p.0).collect::<Vec<_>>(),
            [Tier::Device, Tier::Pinned]
        );
        // Neither tier with room: no place at all.
        assert_eq!(
            assign(&regions, ALL, [true, false, false], rooms),
            Err(AssignError::NoRoom(2 * GRANULE))
        );
    }
}

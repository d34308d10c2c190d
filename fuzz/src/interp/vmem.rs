//! The virtual-memory ops: reservations, physical handles, mappings and
//! their access, through the runtime's AMD table where the library wraps
//! map, unmap, set_access and handle create. Without the vmem API (headers
//! older than ROCm 6.0) every one of them is a no-op.
//!
//! What the model predicts is the README's rule, not the wrapper's code: a
//! mapping is a tracked region of its handle's GPU exactly when the handle
//! comes from a coarse-grained device pool and, at a set_access that
//! succeeded while tracking was on, its owner may read and write it (asked
//! of the runtime with `hsa_amd_vmem_get_access`, whose answer the model
//! takes rather than re-modelling how each ROCm generation combines
//! permissions). It stays tracked, with its generation, while the owner
//! keeps that access; it is retired by an unmap or by a set_access after
//! which the owner may no longer write it.

use kernel_replay::hsa::sys::{
    HSA_STATUS_ERROR_INVALID_ALLOCATION, HSA_STATUS_ERROR_INVALID_ARGUMENT,
    HSA_STATUS_ERROR_RESOURCE_FREE,
};
use kernel_replay::hsa::{hsa_status_t, HSA_STATUS_ERROR};

use super::{stats, Interp};
use crate::app::{self, VmemApi, PERM_NONE, PERM_RO, PERM_RW, SUCCESS};
use crate::model::{
    Handle, Mapping, Reservation, CHUNK, VMEM_HANDLE_CREATE, VMEM_HANDLE_RELEASE, VMEM_MAP,
    VMEM_SET_ACCESS, VMEM_UNMAP,
};
use crate::ops::{Access, Op, Perm, PoolSel};

/// Most reservations, handles and application mappings an input holds.
pub const MAX_RESERVATIONS: usize = 4;
pub const MAX_HANDLES: usize = 8;
pub const MAX_MAPPINGS: usize = 10;

fn perm_value(perm: Perm) -> Option<u32> {
    match perm {
        Perm::Absent => None,
        Perm::None => Some(PERM_NONE),
        Perm::Ro => Some(PERM_RO),
        Perm::Rw => Some(PERM_RW),
    }
}

impl Interp {
    /// Runs one vmem op (a no-op without the vmem API).
    pub(super) fn vmem_op(&mut self, op: &Op) {
        let Some(api) = app::vmem_api() else {
            return;
        };
        match *op {
            Op::VmemReserve { chunks } => {
                self.reserve(op, api, usize::from(chunks % 4) + 1);
            }
            Op::VmemMapNew {
                agent,
                fine,
                chunks,
                at,
                access,
            } => {
                if self.model.vmem.handles.len() >= MAX_HANDLES
                    || self.model.vmem.mappings.len() >= MAX_MAPPINGS
                {
                    return;
                }
                if self.model.vmem.reservations.is_empty() {
                    self.reserve(op, api, 4);
                }
                let gpu = self.agents[usize::from(agent % 2)];
                let size = (usize::from(chunks % 2) + 1) * CHUNK;
                let Some(handle) = self.handle_create(op, api, gpu, !fine, size) else {
                    return;
                };
                let va = self.chunk_address(at);
                if let Some(m) = self.map(op, api, va, handle) {
                    if let Some(access) = access {
                        self.set_access(op, api, &[m], access);
                    }
                }
            }
            Op::VmemMapAlias { handle, at } => {
                let live: Vec<u64> = self
                    .model
                    .vmem
                    .handles
                    .iter()
                    .filter(|h| !h.released)
                    .map(|h| h.value)
                    .collect();
                if live.is_empty() || self.model.vmem.mappings.len() >= MAX_MAPPINGS {
                    return;
                }
                let handle = live[usize::from(handle) % live.len()];
                if self.model.vmem.mappings.iter().any(|m| m.handle == handle) {
                    stats::bump(&stats::ALIASES, 1);
                }
                let va = self.chunk_address(at);
                self.map(op, api, va, handle);
            }
            Op::VmemSetAccess {
                mapping,
                span,
                access,
            } => {
                if self.model.vmem.mappings.is_empty() {
                    return;
                }
                let first = usize::from(mapping) % self.model.vmem.mappings.len();
                let targets = self.contiguous(first, usize::from(span % 3));
                // The application never changes the access of memory a copy
                // of its own is still using.
                if targets
                    .iter()
                    .any(|&t| self.model.copy_touches(self.model.vmem.mappings[t].va))
                {
                    return;
                }
                let vas: Vec<usize> = targets
                    .iter()
                    .map(|&t| self.model.vmem.mappings[t].va)
                    .collect();
                self.set_access(op, api, &vas, access);
            }
            Op::VmemUnmap { mapping, how } => {
                if self.model.vmem.mappings.is_empty() {
                    return;
                }
                let i = usize::from(mapping) % self.model.vmem.mappings.len();
                let (va, size) = {
                    let m = &self.model.vmem.mappings[i];
                    (m.va, m.size)
                };
                if self.model.copy_touches(va) {
                    return;
                }
                // ROCr unmaps whole mappings only.
                let (at, len, predicted) = match how % 4 {
                    0 | 1 => (va, size, None),
                    2 => (va, size / 2, Some(HSA_STATUS_ERROR_INVALID_ARGUMENT)),
                    _ => (
                        va + CHUNK / 2,
                        size - CHUNK / 2,
                        Some(HSA_STATUS_ERROR_INVALID_ALLOCATION),
                    ),
                };
                let predicted = predicted.unwrap_or_else(|| {
                    if self.model.vmem.fails(VMEM_UNMAP) {
                        HSA_STATUS_ERROR
                    } else {
                        SUCCESS
                    }
                });
                let status = (api.unmap)(at as *mut u8, len);
                self.expect_status(op, "unmap", status, predicted);
                if status == SUCCESS {
                    let m = self.model.vmem.mappings.remove(i);
                    self.drop_handle_if_unused(api, m.handle);
                } else {
                    stats::bump(&stats::REFUSED_UNMAPS, 1);
                }
            }
            Op::VmemRelease { handle } => {
                let live: Vec<u64> = self
                    .model
                    .vmem
                    .handles
                    .iter()
                    .filter(|h| !h.released)
                    .map(|h| h.value)
                    .collect();
                if live.is_empty() {
                    return;
                }
                let value = live[usize::from(handle) % live.len()];
                let predicted = if self.model.vmem.fails(VMEM_HANDLE_RELEASE) {
                    HSA_STATUS_ERROR
                } else {
                    SUCCESS
                };
                let status = (api.handle_release)(value);
                self.expect_status(op, "handle release", status, predicted);
                if status == SUCCESS {
                    self.model.vmem.handle_mut(value).released = true;
                    self.drop_handle_if_unused(api, value);
                }
            }
            Op::VmemAddressFree { reservation } => {
                if self.model.vmem.reservations.is_empty() {
                    return;
                }
                let i = usize::from(reservation) % self.model.vmem.reservations.len();
                let (base, chunks) = {
                    let r = &self.model.vmem.reservations[i];
                    (r.base, r.chunks)
                };
                let busy = self.model.vmem.meets_mapping(base, chunks * CHUNK);
                let predicted = if busy {
                    HSA_STATUS_ERROR_RESOURCE_FREE
                } else {
                    SUCCESS
                };
                let status = (api.address_free)(base as *mut u8, chunks * CHUNK);
                self.expect_status(op, "address free", status, predicted);
                if status == SUCCESS {
                    self.model.vmem.reservations.remove(i);
                }
            }
            Op::WriteMapping {
                mapping,
                offset,
                len,
                byte,
            } => {
                if self.model.vmem.mappings.is_empty() {
                    return;
                }
                let i = usize::from(mapping) % self.model.vmem.mappings.len();
                let (handle, size) = {
                    let m = &self.model.vmem.mappings[i];
                    (m.handle, m.size)
                };
                let offset = usize::from(offset) % size;
                let room = size - offset;
                let len = match usize::from(len) % (room + 1) {
                    0 => room,
                    n => n,
                };
                // A kernel's stores land in the physical memory every
                // mapping of the handle shows.
                let h = self.model.vmem.handle_mut(handle);
                // SAFETY: inside the harness's read-write view of the handle.
                unsafe { app::store((h.probe as *mut u8).add(offset), len, byte) };
                h.shadow[offset..offset + len].fill(byte);
            }
            _ => unreachable!("not a vmem op: {op:?}"),
        }
    }

    fn expect_status(&self, op: &Op, what: &str, got: hsa_status_t, want: hsa_status_t) {
        self.note(format_args!("{what}: {got:#x}"));
        if got != want {
            self.fail(
                op,
                format_args!("{what} returned {got:#x}, model {want:#x}"),
            );
        }
    }

    /// Reserves `chunks` chunks (up to [`MAX_RESERVATIONS`]).
    fn reserve(&mut self, op: &Op, api: &VmemApi, chunks: usize) {
        if self.model.vmem.reservations.len() >= MAX_RESERVATIONS {
            return;
        }
        match (api.reserve)(chunks * CHUNK) {
            Ok(va) => self.model.vmem.reservations.push(Reservation {
                base: va as usize,
                chunks,
            }),
            Err(status) => self.fail(op, format_args!("reserve failed with {status:#x}")),
        }
    }

    /// The address of reserved chunk `at` (counted over every reservation
    /// in order), or NULL with nothing reserved (the runtime refuses it).
    fn chunk_address(&self, at: u8) -> usize {
        let total: usize = self.model.vmem.reservations.iter().map(|r| r.chunks).sum();
        if total == 0 {
            return 0;
        }
        let mut at = usize::from(at) % total;
        for r in &self.model.vmem.reservations {
            if at < r.chunks {
                return r.base + at * CHUNK;
            }
            at -= r.chunks;
        }
        unreachable!("inside the total")
    }

    /// Mapping `first` and up to `more` mappings following it without a gap
    /// in the same reservation: their indices.
    fn contiguous(&self, first: usize, more: usize) -> Vec<usize> {
        let mappings = &self.model.vmem.mappings;
        let reservation = self
            .model
            .vmem
            .reservation_holding(mappings[first].va, mappings[first].size)
            .map(|r| (r.base, r.end()))
            .expect("a mapping lies in a reservation");
        let mut targets = vec![first];
        for _ in 0..more {
            let last = &mappings[*targets.last().expect("one at least")];
            let next = last.va + last.size;
            match mappings.iter().position(|m| m.va == next) {
                Some(n) if mappings[n].va + mappings[n].size <= reservation.1 => targets.push(n),
                _ => break,
            }
        }
        targets
    }

    /// `hsa_amd_vmem_handle_create` of `size` bytes from `gpu`'s coarse (or
    /// fine) pool, with its private view; the handle, or None when the
    /// model said the runtime must refuse.
    fn handle_create(
        &mut self,
        op: &Op,
        api: &VmemApi,
        gpu: hsa_sim::Agent,
        coarse: bool,
        size: usize,
    ) -> Option<u64> {
        let kind = if coarse {
            PoolSel::DeviceCoarse
        } else {
            PoolSel::DeviceFine
        };
        let pool = self.sim.pool(gpu, kind.sim_kind());
        // An injected failure is OUT_OF_RESOURCES: retried by the library
        // after releasing the GPU's retained device arena, if there is one.
        let injected = self.model.vmem.fails(VMEM_HANDLE_CREATE);
        let value =
            self.allocate_with_retry(op, gpu, kind, injected, || (api.handle_create)(pool, size))?;
        let cpu = self.sim.cpu();
        let probe = self.outside_faults(|| (api.probe_map)(value, size, cpu)) as usize;
        self.model.vmem.handles.push(Handle {
            value,
            gpu: gpu.handle,
            coarse,
            size,
            released: false,
            probe,
            shadow: vec![0; size],
        });
        Some(value)
    }

    /// `hsa_amd_vmem_map` of all of `handle` at `va`; the new mapping's
    /// address, or None if the runtime refused (as the model predicted).
    fn map(&mut self, op: &Op, api: &VmemApi, va: usize, handle: u64) -> Option<usize> {
        let (size, owner, coarse) = {
            let h = self.model.vmem.handle(handle);
            (h.size, h.gpu, h.coarse)
        };
        let fits = va != 0 && self.model.vmem.reservation_holding(va, size).is_some();
        let predicted = if !fits || self.model.vmem.meets_mapping(va, size) {
            HSA_STATUS_ERROR_INVALID_ARGUMENT
        } else if self.model.vmem.fails(VMEM_MAP) {
            HSA_STATUS_ERROR
        } else {
            SUCCESS
        };
        let status = (api.map)(va as *mut u8, size, handle);
        self.expect_status(op, "map", status, predicted);
        if status != SUCCESS {
            return None;
        }
        // The wrapper notes every mapping the runtime made (finalized or
        // not, tracking on or off); nothing is tracked before a set_access.
        self.model.vmem.mappings.push(Mapping {
            va,
            size,
            handle,
            owner,
            coarse,
            tracked: false,
            id: 0,
            seen: true,
            classified: false,
        });
        Some(va)
    }

    /// One set_access over the mappings at `vas` (contiguous, in order):
    /// descriptors for the first one's owner, the other GPU and the CPU.
    fn set_access(&mut self, op: &Op, api: &VmemApi, vas: &[usize], access: Access) {
        let index = |interp: &Interp, va: usize| {
            interp
                .model
                .vmem
                .mappings
                .iter()
                .position(|m| m.va == va)
                .expect("a live mapping")
        };
        let first = &self.model.vmem.mappings[index(self, vas[0])];
        let owner = self
            .agents
            .iter()
            .copied()
            .find(|a| a.handle == first.owner)
            .expect("a GPU");
        let peer = self.agents[usize::from(owner == self.agents[0])];
        let cpu = self.sim.cpu();
        let descriptors: Vec<(hsa_sim::Agent, u32)> = [
            (owner, access.owner),
            (peer, access.peer),
            (cpu, access.cpu),
            (owner, access.owner_again),
        ]
        .into_iter()
        .filter_map(|(agent, perm)| perm_value(perm).map(|p| (agent, p)))
        .collect();
        let va = vas[0];
        let size: usize = vas
            .iter()
            .map(|&v| self.model.vmem.mappings[index(self, v)].size)
            .sum();

        // What the runtime answers: descriptors and the range are checked
        // first (a fault fires only on a call that passes the checks); one
        // range over several mappings is accepted by ROCm 6.4+ only, which
        // the model learns from the first such call.
        let spans = vas.len() > 1;
        let predicted = if descriptors.is_empty() {
            Some(HSA_STATUS_ERROR_INVALID_ARGUMENT)
        } else if spans && self.model.vmem.spans_accepted == Some(false) {
            Some(HSA_STATUS_ERROR_INVALID_ALLOCATION)
        } else if spans && self.model.vmem.spans_accepted.is_none() {
            None
        } else if self.model.vmem.fails(VMEM_SET_ACCESS) {
            Some(HSA_STATUS_ERROR)
        } else {
            Some(SUCCESS)
        };
        let status = (api.set_access)(va as *mut u8, size, &descriptors);
        let predicted = predicted.unwrap_or_else(|| {
            let accepted = status != HSA_STATUS_ERROR_INVALID_ALLOCATION;
            self.model.vmem.spans_accepted = Some(accepted);
            match (accepted, self.model.vmem.fails(VMEM_SET_ACCESS)) {
                (false, armed) => {
                    // Not reached: the fault stays armed.
                    self.model.vmem.failing[VMEM_SET_ACCESS] = armed;
                    HSA_STATUS_ERROR_INVALID_ALLOCATION
                }
                (true, true) => HSA_STATUS_ERROR,
                (true, false) => SUCCESS,
            }
        });
        self.expect_status(op, "set_access", status, predicted);

        // The wrapper classifies the handles of the mappings in the range
        // (whatever the runtime answers); after a successful call each
        // mapping is tracked exactly when its owner may read and write it.
        let recording = self.model.tracking && !self.model.finalized;
        for &va in vas {
            let i = index(self, va);
            let (owner, tracked, coarse, seen) = {
                let m = &self.model.vmem.mappings[i];
                (m.owner, m.tracked, m.coarse, m.seen)
            };
            let owner_agent = self
                .agents
                .iter()
                .copied()
                .find(|a| a.handle == owner)
                .expect("a GPU");
            let owner_rw = (api.get_access)(va as *mut u8, owner_agent) == Ok(PERM_RW);
            if status == SUCCESS {
                // Whatever a generation does to the others, the agents the
                // call lists have the permission their last descriptor gave.
                for agent in self.agents[..2].iter().copied() {
                    if let Some(&(_, want)) = descriptors.iter().rev().find(|(a, _)| *a == agent) {
                        let got = (api.get_access)(va as *mut u8, agent);
                        if got != Ok(want) {
                            self.fail(
                                op,
                                format_args!(
                                    "after set_access, agent {:#x} has {got:?} at {va:#x}, \
                                     not the {want} it was given",
                                    agent.handle
                                ),
                            );
                        }
                    }
                }
            }
            self.model.vmem.mappings[i].classified |= seen;
            self.note(format_args!(
                "mapping {va:#x}: owner may write it: {owner_rw}, was tracked: {tracked}"
            ));
            if status != SUCCESS {
                continue;
            }
            if tracked && !owner_rw {
                self.model.vmem.mappings[i].tracked = false;
                stats::bump(&stats::MAPPINGS_RETIRED, 1);
            } else if !tracked && owner_rw && coarse && seen && recording {
                let id = self.model.fresh_id();
                let m = &mut self.model.vmem.mappings[i];
                m.tracked = true;
                m.id = id;
                stats::bump(&stats::MAPPINGS_TRACKED, 1);
            }
        }
    }

    /// Runs the harness's own vmem calls with the application's armed vmem
    /// faults paused (the runtime counts every call), armed again after.
    fn outside_faults<R>(&self, body: impl FnOnce() -> R) -> R {
        let armed: Vec<hsa_sim::Fault> = super::VMEM_OPS
            .iter()
            .zip(self.model.vmem.failing)
            .filter(|(_, armed)| *armed)
            .map(|(&op, _)| op)
            .collect();
        for &op in &armed {
            self.sim.inject(op, 0, 0);
        }
        let result = body();
        for &op in &armed {
            self.sim.inject(op, 0, 1);
        }
        result
    }

    /// Drops a handle (and the harness's view of it) once it is released
    /// and no application mapping is left: the runtime frees it then.
    fn drop_handle_if_unused(&mut self, api: &VmemApi, value: u64) {
        let mapped = self.model.vmem.mappings.iter().any(|m| m.handle == value);
        let h = self.model.vmem.handle(value);
        if h.released && !mapped {
            let (probe, size) = (h.probe as *mut u8, h.size);
            self.outside_faults(|| (api.probe_unmap)(probe, size));
            self.model.vmem.handles.retain(|h| h.value != value);
        }
    }

    /// Unmaps, releases and frees everything (faults cleared first), as the
    /// application does before it exits.
    pub(super) fn vmem_cleanup(&mut self) {
        let Some(api) = app::vmem_api() else {
            return;
        };
        for m in std::mem::take(&mut self.model.vmem.mappings) {
            assert_eq!(
                (api.unmap)(m.va as *mut u8, m.size),
                SUCCESS,
                "cleanup unmap"
            );
        }
        for h in std::mem::take(&mut self.model.vmem.handles) {
            if !h.released {
                assert_eq!((api.handle_release)(h.value), SUCCESS, "cleanup release");
            }
            (api.probe_unmap)(h.probe as *mut u8, h.size);
        }
        for r in std::mem::take(&mut self.model.vmem.reservations) {
            assert_eq!(
                (api.address_free)(r.base as *mut u8, r.chunks * CHUNK),
                SUCCESS,
                "cleanup address free"
            );
        }
        assert_eq!(self.sim.count(hsa_sim::Counter::VmemMappings), 0);
        assert_eq!(self.sim.count(hsa_sim::Counter::VmemHandles), 0);
        assert_eq!(self.sim.count(hsa_sim::Counter::VmemReservations), 0);
    }

    /// Device memory and the runtime's counts of what the application holds.
    pub(super) fn check_vmem(&self, op: &Op) {
        if app::vmem_api().is_none() {
            return;
        }
        for h in &self.model.vmem.handles {
            // SAFETY: the harness's read-write view of the live handle.
            let now = unsafe { app::view(h.probe as *const u8, h.size) };
            if now != h.shadow.as_slice() {
                let at = now.iter().zip(&h.shadow).position(|(x, y)| x != y).unwrap();
                self.fail(
                    op,
                    format_args!(
                        "handle {:#x} ({} bytes, mapped at {:x?}) differs at byte {at}: {:#04x}, \
                         model {:#04x}",
                        h.value,
                        h.size,
                        self.model
                            .vmem
                            .mappings
                            .iter()
                            .filter(|m| m.handle == h.value)
                            .map(|m| (m.va, m.tracked))
                            .collect::<Vec<_>>(),
                        now[at],
                        h.shadow[at]
                    ),
                );
            }
        }
        // Each handle has the harness's view: one more mapping and one more
        // reservation.
        let v = &self.model.vmem;
        let want = (
            (v.mappings.len() + v.handles.len()) as u64,
            v.handles.len() as u64,
            (v.reservations.len() + v.handles.len()) as u64,
        );
        let got = (
            self.sim.count(hsa_sim::Counter::VmemMappings),
            self.sim.count(hsa_sim::Counter::VmemHandles),
            self.sim.count(hsa_sim::Counter::VmemReservations),
        );
        if got != want {
            self.fail(
                op,
                format_args!(
                    "the runtime holds (mappings, handles, reservations) {got:?}, model {want:?}"
                ),
            );
        }
    }
}

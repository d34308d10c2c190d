//! Application async copies (`hsa_amd_memory_async_copy`, `_rect`,
//! `_on_engine`) and the library's fence around them.
//!
//! A copy the runtime accepted is pending until it completes. The runtime
//! runs copies one at a time in submission order, each once its
//! dependencies read 0, so the model keeps them in that order: after every
//! op the copies at the front whose dependency was released (or that have
//! none) are waited for (bounded) and their effect applied; what stays
//! pending is held by a dependency. The fence must count each pending copy
//! that touched tracked memory when it was submitted as in flight on that
//! memory's agent; a snapshot of that agent then declines
//! (`KR_DECLINE_COPIES_IN_FLIGHT`) and a restore writes nothing.

use std::time::{Duration, Instant};

use kernel_replay::hsa::sys::HSA_STATUS_ERROR_OUT_OF_RESOURCES;

use super::{stats, Interp};
use crate::app::{self, hsa_signal_t, PERM_RW, SUCCESS};
use crate::model::{Endpoint, Loc, PendingCopy, Row};
use crate::ops::{CopyFault, CopyKind, Op};

/// Most copies pending at once.
pub const MAX_PENDING: usize = 8;
/// How long a runnable copy, or the fence's bookkeeping of one, may take:
/// past it the harness reports a hang.
const BOUNDED: Duration = Duration::from_secs(10);

fn signal(handle: u64) -> hsa_signal_t {
    hsa_signal_t { handle }
}

/// An endpoint candidate: where, and whether its memory is tracked and for
/// which agent.
struct Candidate {
    endpoint: Endpoint,
    owner: hsa_sim::Agent,
    tracked: bool,
}

impl Interp {
    /// The memory an application copy may use: every live allocation, then
    /// every mapping some GPU may read and write (the runtime's engine
    /// needs an agent with access; the CPU's view is not asked).
    fn copy_candidates(&self) -> Vec<Candidate> {
        let owner_of = |handle: u64| {
            self.agents
                .iter()
                .copied()
                .find(|a| a.handle == handle)
                .expect("a known agent")
        };
        let mut candidates: Vec<Candidate> = self
            .model
            .allocs
            .iter()
            .map(|a| Candidate {
                endpoint: Endpoint {
                    loc: Loc::Alloc(a.id),
                    base: a.ptr as usize,
                    size: a.size,
                },
                owner: owner_of(a.owner),
                tracked: a.fenced(),
            })
            .collect();
        if let Some(api) = app::vmem_api() {
            for m in &self.model.vmem.mappings {
                let reachable = self.agents[..2]
                    .iter()
                    .any(|&gpu| (api.get_access)(m.va as *mut u8, gpu) == Ok(PERM_RW));
                if reachable {
                    candidates.push(Candidate {
                        endpoint: Endpoint {
                            loc: Loc::Handle(m.handle),
                            base: m.va,
                            size: m.size,
                        },
                        owner: owner_of(m.owner),
                        tracked: m.tracked,
                    });
                }
            }
        }
        candidates
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn async_copy(
        &mut self,
        op: &Op,
        kind: CopyKind,
        dst: u8,
        src: u8,
        offset: u16,
        len: u16,
        hold: bool,
        fault: CopyFault,
    ) {
        if self.model.copies.len() >= MAX_PENDING {
            return;
        }
        let candidates = self.copy_candidates();
        if candidates.is_empty() {
            return;
        }
        let d = &candidates[usize::from(dst) % candidates.len()];
        let s = &candidates[usize::from(src) % candidates.len()];
        let (offset, len) = (usize::from(offset), usize::from(len));
        // The on-engine entry exists with the vmem API only.
        let kind = match kind {
            CopyKind::Engine if app::vmem_api().is_none() => CopyKind::Linear,
            kind => kind,
        };
        let rows = match kind {
            CopyKind::Linear | CopyKind::Engine => {
                let n = 1 + len % d.endpoint.size.min(s.endpoint.size);
                vec![Row {
                    dst_off: offset % (d.endpoint.size - n + 1),
                    src_off: offset * 7 % (s.endpoint.size - n + 1),
                    len: n,
                }]
            }
            CopyKind::Rect => {
                // Bases and pitch multiples of 4, rows no wider than the
                // pitch, the whole box inside both buffers.
                let pitch = 4 * (1 + (len >> 8) % 64);
                let dst_off = (offset % d.endpoint.size) & !3;
                let src_off = (offset * 7 % s.endpoint.size) & !3;
                let room = (d.endpoint.size - dst_off).min(s.endpoint.size - src_off);
                let mut width = 1 + (len & 0xFF) % pitch;
                let mut count = 1 + (len >> 14) % 4;
                while count > 1 && (count - 1) * pitch + width > room {
                    count -= 1;
                }
                width = width.min(room);
                (0..count)
                    .map(|r| Row {
                        dst_off: dst_off + r * pitch,
                        src_off: src_off + r * pitch,
                        len: width,
                    })
                    .collect()
            }
        };
        // The fence counts the copy on the agents whose tracked memory it
        // touches now.
        let mut fenced = Vec::new();
        for c in [d, s] {
            if c.tracked && !fenced.contains(&c.owner.handle) {
                fenced.push(c.owner.handle);
            }
        }
        // Copies into an address with a copy fault, or out of one, fail
        // while executing (decided when the runtime accepts them).
        let faults = &self.model.faults;
        let fails = fault == CopyFault::FailCompletion
            || rows.iter().any(|r| {
                faults.h2d_covers(d.endpoint.base + r.dst_off, r.len)
                    || faults.from_covers(s.endpoint.base + r.src_off, r.len)
            });
        let (d_end, s_end, d_owner, s_owner) = (d.endpoint, s.endpoint, d.owner, s.owner);
        let dependency = hold.then(|| app::signal_create(1));
        let completion = app::signal_create(1);
        let deps: Vec<hsa_signal_t> = dependency.into_iter().collect();
        match fault {
            CopyFault::Refuse => self.sim.inject(hsa_sim::Fault::NthAsyncCopy, 0, 1),
            CopyFault::FailCompletion => {
                self.sim
                    .inject(hsa_sim::Fault::NthAsyncCopyCompletion, 0, 1)
            }
            CopyFault::None => {}
        }
        let before = app::stats2().fenced_copies;
        let dst_ptr = |r: &Row| (d_end.base + r.dst_off) as *mut u8;
        let src_ptr = |r: &Row| (s_end.base + r.src_off) as *const u8;
        let status = match kind {
            CopyKind::Linear => app::async_copy(
                dst_ptr(&rows[0]),
                d_owner,
                src_ptr(&rows[0]),
                s_owner,
                rows[0].len,
                &deps,
                completion,
            ),
            CopyKind::Engine => {
                let api = app::vmem_api().expect("checked above");
                // An engine copies between two agents, one of them a GPU.
                let dst_agent = if d_owner == self.sim.cpu() && s_owner == self.sim.cpu() {
                    self.agents[0]
                } else {
                    d_owner
                };
                (api.async_copy_on_engine)(
                    dst_ptr(&rows[0]),
                    dst_agent,
                    src_ptr(&rows[0]),
                    s_owner,
                    rows[0].len,
                    &deps,
                    completion,
                )
            }
            CopyKind::Rect => {
                let pitch = if rows.len() > 1 {
                    rows[1].dst_off - rows[0].dst_off
                } else {
                    (rows[0].len + 3) & !3
                };
                let gpu = [d_owner, s_owner]
                    .into_iter()
                    .find(|&a| a != self.sim.cpu())
                    .unwrap_or(self.agents[0]);
                app::async_copy_rect(
                    dst_ptr(&rows[0]),
                    src_ptr(&rows[0]),
                    pitch,
                    rows[0].len,
                    rows.len(),
                    gpu,
                    &deps,
                    completion,
                )
            }
        };
        self.sim.inject(hsa_sim::Fault::NthAsyncCopy, 0, 0);
        self.sim
            .inject(hsa_sim::Fault::NthAsyncCopyCompletion, 0, 0);
        let counted = app::stats2().fenced_copies - before;
        if counted != u64::from(!fenced.is_empty()) {
            self.fail(
                op,
                format_args!(
                    "{counted} fenced copies counted for a copy touching tracked memory of {fenced:x?}"
                ),
            );
        }
        self.note(format_args!(
            "{kind:?} copy of {} row(s) of {} bytes: {status:#x}, fenced on {fenced:x?}, \
             fails: {fails}, held: {hold}",
            rows.len(),
            rows[0].len
        ));
        let refused = fault == CopyFault::Refuse;
        let want = if refused {
            HSA_STATUS_ERROR_OUT_OF_RESOURCES
        } else {
            SUCCESS
        };
        if status != want {
            self.fail(
                op,
                format_args!("{kind:?} copy returned {status:#x}, model {want:#x}"),
            );
        }
        if refused {
            // Refused at submission: the application's signal is never
            // touched.
            stats::bump(&stats::REFUSED_COPIES, 1);
            self.settle_fences(op);
            let value = app::signal_load(completion);
            if value != 1 {
                self.fail(
                    op,
                    format_args!("a refused copy's completion signal is {value}"),
                );
            }
            app::signal_destroy(completion);
            if let Some(dependency) = dependency {
                app::signal_destroy(dependency);
            }
            return;
        }
        stats::bump(&stats::FENCED_COPIES, u64::from(!fenced.is_empty()));
        if let Some(dependency) = dependency {
            self.model.held.push(dependency.handle);
        }
        self.model.copies.push(PendingCopy {
            signal: completion.handle,
            dependency: dependency.map(|s| s.handle),
            dst: d_end,
            src: s_end,
            rows,
            fenced,
            fails,
        });
        self.run_copies(op);
    }

    /// Releases held dependency `index` (oldest first).
    pub(super) fn release_dependency(&mut self, op: &Op, index: u8) {
        if self.model.held.is_empty() {
            return;
        }
        let dependency = self
            .model
            .held
            .remove(usize::from(index) % self.model.held.len());
        app::signal_store(signal(dependency), 0);
        self.run_copies(op);
    }

    /// Waits for the copies at the front of the queue that nothing holds
    /// back any more, checks each one's completion signal (1 → 0, or the
    /// runtime's -1 for a copy that failed) and applies its effect; then
    /// waits for the fence to count exactly the copies still pending.
    pub(super) fn run_copies(&mut self, op: &Op) {
        while let Some(front) = self.model.copies.first() {
            if front
                .dependency
                .is_some_and(|d| self.model.held.contains(&d))
            {
                break;
            }
            let copy = self.model.copies.remove(0);
            let value = app::signal_wait_below(signal(copy.signal), 1, BOUNDED);
            let want = if copy.fails { -1 } else { 0 };
            if value != want {
                self.fail(
                    op,
                    format_args!(
                        "a copy's completion signal is {value} (model {want}; 1: it never \
                         completed within {BOUNDED:?})"
                    ),
                );
            }
            self.note(format_args!("a copy completed: signal {value}"));
            if copy.fails {
                stats::bump(&stats::FAILED_COPIES, 1);
            } else {
                self.model.apply_copy(&copy);
                stats::bump(&stats::COMPLETED_COPIES, 1);
            }
            app::signal_destroy(signal(copy.signal));
            if let Some(dependency) = copy.dependency {
                app::signal_destroy(signal(dependency));
            }
        }
        self.settle_fences(op);
    }

    /// Waits (bounded) until the fence counts in flight exactly the pending
    /// copies the model says it must (its completion handler runs on the
    /// runtime's thread just after the application's signal is set).
    fn settle_fences(&self, op: &Op) {
        let deadline = Instant::now() + BOUNDED;
        for agent in self.agents {
            let want = self.model.in_flight(agent.handle);
            loop {
                let got = kernel_replay::testing::fence_in_flight(agent.handle);
                if got == want {
                    break;
                }
                if got < want || Instant::now() >= deadline {
                    self.fail(
                        op,
                        format_args!(
                            "the fence counts {got} copies in flight on agent {:#x}, model {want}",
                            agent.handle
                        ),
                    );
                }
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    /// Releases every held dependency and waits for every copy.
    pub(super) fn drain_copies(&mut self, op: &Op) {
        for dependency in std::mem::take(&mut self.model.held) {
            app::signal_store(signal(dependency), 0);
        }
        self.run_copies(op);
        assert!(self.model.copies.is_empty(), "copies left pending");
    }
}

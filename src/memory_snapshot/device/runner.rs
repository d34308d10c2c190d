//! Running the library's own kernels on one agent, through the entries the
//! library captured at install (never its wrappers: nothing here is tracked,
//! captured or fenced): an AQL queue created on first use, the code object
//! for the agent's ISA loaded from memory (reader, executable, freeze), one
//! kernarg buffer from the kernarg pool, one completion signal, and the hash
//! keys in device memory.
//!
//! Dispatches on one agent are serialised (one kernarg buffer, one signal):
//! a snapshot or restore issues a few large dispatches, never many small
//! ones. A dispatch that cannot complete — the queue reported an error
//! (ROCr's memory-fault path), or the signal never fell — is an error the
//! caller answers by falling back to its copies.

use crate::support::sync::Recover;
use std::ffi::{c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::abi;
use super::buffers::PoolBuffer;
use super::code_object;
use super::plan::BlockTable;
use super::{Kernel, KERNELS};
use crate::hsa::entries::{check, present, AmdEntries, CoreEntries};
use crate::hsa::sys::{
    hsa_code_object_reader_t, hsa_executable_symbol_t, hsa_kernel_dispatch_packet_t, hsa_queue_t,
    hsa_signal_t, HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT,
    HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE,
    HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE,
    HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT,
    HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE, HSA_FENCE_SCOPE_SYSTEM,
    HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS, HSA_PACKET_HEADER_ACQUIRE_FENCE_SCOPE,
    HSA_PACKET_HEADER_BARRIER, HSA_PACKET_HEADER_RELEASE_FENCE_SCOPE, HSA_PACKET_HEADER_TYPE,
    HSA_PACKET_TYPE_KERNEL_DISPATCH, HSA_PROFILE_FULL, HSA_QUEUE_TYPE_SINGLE,
    HSA_SIGNAL_CONDITION_LT, HSA_WAIT_STATE_BLOCKED,
};
use crate::hsa::{hsa_agent_t, hsa_executable_t, hsa_status_t, HSA_STATUS_ERROR};
use crate::memory_snapshot::storage::PerTier;

/// Packets in the library's queue: a snapshot dispatches one at a time.
const QUEUE_PACKETS: u32 = 64;

/// How long one wait on the completion signal blocks before the queue's
/// health is looked at again, in the runtime's timestamp ticks (a hint).
const WAIT_SLICE_TICKS: u64 = 1_000_000;

/// Whether the runtime has every un-wrapped entry a runner calls besides
/// the `kernels` group of the entry list (which is there whole or not at
/// all): the signal entries and the executable destroy.
fn has_entries(core: &CoreEntries) -> bool {
    core.hsa_signal_create_fn.is_some()
        && core.hsa_signal_store_screlease_fn.is_some()
        && core.hsa_signal_wait_scacquire_fn.is_some()
        && core.hsa_signal_destroy_fn.is_some()
        && core.hsa_executable_destroy_fn.is_some()
        && core.hsa_queue_create_fn.is_some()
}

/// One loaded kernel: what its dispatch packet needs.
#[derive(Clone, Copy, Default)]
struct LoadedKernel {
    object: u64,
    kernarg_size: u32,
    group_size: u32,
    private_size: u32,
}

/// The library's kernels on one agent. See the module documentation.
pub(crate) struct Runner {
    agent: hsa_agent_t,
    /// The captured entries (the runtime's own: the executable destroy is
    /// not the library's wrapper of it).
    core: &'static CoreEntries,
    queue: *mut hsa_queue_t,
    executable: hsa_executable_t,
    kernels: [LoadedKernel; KERNELS.len()],
    /// The dispatch lock: one kernarg buffer and one signal per runner.
    dispatch: Mutex<Dispatch>,
    /// Set by the queue's error callback: the queue is unusable. Boxed: the
    /// callback holds its address from before the runner exists.
    failed: Box<AtomicBool>,
    /// The hash keys, in the agent's memory (every workgroup reads them).
    keys: PoolBuffer,
    /// The ISA name the code object was chosen for.
    pub isa: String,
    /// The scatter records' buffer, grown as needed and reused.
    scratch: Mutex<Option<PoolBuffer>>,
    /// Block tables of dropped snapshots, for the next ones.
    spare_tables: Mutex<Vec<BlockTable>>,
    /// The list of the library's own executables (which discovery skips):
    /// this runner's is in it from its load until its destroy.
    own: &'static Mutex<Vec<u64>>,
}

struct Dispatch {
    kernarg: PoolBuffer,
    signal: hsa_signal_t,
}

// SAFETY: the queue pointer is the runtime's, valid until `Runner::destroy`;
// the runtime's queue functions are thread-safe, and the packet slots a
// dispatch writes are reserved by the write-index increment under the
// dispatch lock.
unsafe impl Send for Runner {}
// SAFETY: as for Send; shared use goes through the dispatch mutex and
// atomics.
unsafe impl Sync for Runner {}

/// Dispatches whose queue reported an error (tests read it).
pub(crate) static QUEUE_ERRORS: AtomicU32 = AtomicU32::new(0);

/// The runtime calls this when the queue hits an error (a memory fault in a
/// kernel, in ROCr's case): the runner stops using it.
unsafe extern "C" fn on_queue_error(
    _status: hsa_status_t,
    _queue: *mut hsa_queue_t,
    data: *mut c_void,
) {
    if !data.is_null() {
        // SAFETY: `data` is the runner's `failed` flag, which outlives the
        // queue (the runner destroys the queue before it is dropped).
        unsafe { &*data.cast::<AtomicBool>() }.store(true, Ordering::Release);
    }
    QUEUE_ERRORS.fetch_add(1, Ordering::Relaxed);
}

/// Why no runner could be made for an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unavailable {
    /// The runtime lacks an entry the runner needs.
    Entries,
    /// No code object for the agent's ISA (nor an override).
    NoCodeObject,
    /// The runtime refused a step; the status it gave.
    Runtime(&'static str, hsa_status_t),
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unavailable::Entries => f.write_str("the runtime lacks queue or code-object entries"),
            Unavailable::NoCodeObject => f.write_str("no code object for the agent's ISA"),
            Unavailable::Runtime(step, status) => write!(f, "{step} failed (status {status:#x})"),
        }
    }
}

impl Runner {
    /// Sets up the kernels on `agent`: picks the code object, creates the
    /// queue, loads and freezes the executable, finds the kernels, allocates
    /// the kernarg buffer, the signal and the keys. Everything made so far
    /// is released again on failure.
    pub(crate) fn create(
        core: &'static CoreEntries,
        amd: &'static AmdEntries,
        agent: hsa_agent_t,
        keys: &[u32],
        own: &'static Mutex<Vec<u64>>,
    ) -> Result<Runner, Unavailable> {
        if !has_entries(core) {
            return Err(Unavailable::Entries);
        }
        let (isa, object) = code_object::for_agent(core, agent).ok_or(Unavailable::NoCodeObject)?;
        // Listed as the library's own before it is loaded, so no snapshot
        // on another thread ever sees it as an application's.
        let mut partial = Partial::new(core, own)?;
        let executable = partial.load(agent, &object)?;
        let kernels = find_kernels(core, executable, agent)?;
        let kernarg_bytes = kernels
            .iter()
            .map(|k| k.kernarg_size as usize)
            .max()
            .unwrap_or(0);
        let kernarg = PoolBuffer::kernarg(core, amd, agent, kernarg_bytes.max(64))
            .ok_or(Unavailable::Runtime("kernarg allocation", HSA_STATUS_ERROR))?;
        let keys = PoolBuffer::device_with(core, amd, agent, keys)
            .ok_or(Unavailable::Runtime("key buffer", HSA_STATUS_ERROR))?;
        let signal = partial.signal()?;
        let failed = Box::new(AtomicBool::new(false));
        let flag = ptr::from_ref::<AtomicBool>(&failed)
            .cast_mut()
            .cast::<c_void>();
        let queue = partial.queue(agent, flag)?;
        partial.keep();
        Ok(Runner {
            agent,
            core,
            queue,
            executable,
            kernels,
            dispatch: Mutex::new(Dispatch { kernarg, signal }),
            failed,
            keys,
            isa,
            scratch: Mutex::new(None),
            spare_tables: Mutex::new(Vec::new()),
            own,
        })
    }

    /// The scatter records' buffer, at least `bytes` long (grown from the
    /// kernarg pool when shorter), locked for one dispatch's use.
    pub(crate) fn scratch(
        &self,
        core: &CoreEntries,
        amd: &'static AmdEntries,
        bytes: usize,
    ) -> Option<MutexGuard<'_, Option<PoolBuffer>>> {
        let mut scratch = self.scratch.locked();
        if scratch.as_ref().is_none_or(|b| b.len() < bytes) {
            *scratch = None;
            *scratch = Some(PoolBuffer::kernarg(core, amd, self.agent, bytes.max(4096))?);
        }
        Some(scratch)
    }

    /// A spare block table of at least `count` blocks: the one whose
    /// hashes describe the arenas leased as `previous`, if it fits.
    pub(crate) fn spare_table(&self, count: usize, previous: PerTier<u64>) -> Option<BlockTable> {
        let mut spares = self.spare_tables.locked();
        let fits = |t: &BlockTable| t.capacity >= count;
        let at = spares
            .iter()
            .position(|t| fits(t) && t.describes == Some(previous))
            .or_else(|| spares.iter().position(fits))?;
        Some(spares.swap_remove(at))
    }

    /// Keeps a dropped snapshot's block table for reuse (at most a few:
    /// the largest stay).
    pub(crate) fn keep_table(&self, table: BlockTable) {
        const KEPT: usize = 2;
        let mut spares = self.spare_tables.locked();
        if spares.try_reserve(1).is_ok() {
            spares.push(table);
            spares.sort_by_key(|t| std::cmp::Reverse(t.capacity));
            spares.truncate(KEPT);
        }
    }

    /// The executable holding the kernels.
    pub(crate) fn executable(&self) -> hsa_executable_t {
        self.executable
    }

    /// The device address of the hash keys.
    pub(crate) fn keys(&self) -> u64 {
        self.keys.address() as u64
    }

    /// Runs `kernel` over `workgroups` workgroups with `args` as its
    /// arguments, and waits for it. `args` must be the kernel's argument
    /// struct (its layout is checked against the code objects' metadata).
    pub(crate) fn run<A: Copy>(
        &self,
        kernel: Kernel,
        args: &A,
        workgroups: u32,
    ) -> Result<(), hsa_status_t> {
        if workgroups == 0 {
            return Ok(());
        }
        if self.failed.load(Ordering::Acquire) {
            return Err(HSA_STATUS_ERROR);
        }
        let loaded = self.kernels[kernel as usize];
        let size = std::mem::size_of::<A>();
        let grid = workgroups
            .checked_mul(abi::KR_WORKGROUP)
            .ok_or(HSA_STATUS_ERROR)?;
        let dispatch = self.dispatch.locked();
        if size > dispatch.kernarg.len() || size > loaded.kernarg_size as usize {
            return Err(HSA_STATUS_ERROR);
        }
        let kernarg = dispatch.kernarg.address() as *mut u8;
        // SAFETY: the kernarg buffer is host memory of ours, at least `size`
        // bytes, not in use by the device (the previous dispatch was waited
        // for), and `A` is plain data.
        unsafe {
            ptr::write_bytes(kernarg, 0, dispatch.kernarg.len());
            ptr::copy_nonoverlapping(ptr::from_ref(args).cast::<u8>(), kernarg, size);
        }
        let e = self.core;
        let (store, wait) = (
            present(e.hsa_signal_store_screlease_fn)?,
            present(e.hsa_signal_wait_scacquire_fn)?,
        );
        let (add_write_index, load_read_index) = (
            present(e.hsa_queue_add_write_index_scacq_screl_fn)?,
            present(e.hsa_queue_load_read_index_scacquire_fn)?,
        );
        // SAFETY: our signal, not in flight.
        unsafe { store(dispatch.signal, 1) };
        // SAFETY: the queue is live until destroy; ROCr's indices are
        // thread-safe.
        let index = unsafe { add_write_index(self.queue, 1) };
        // SAFETY: the queue pointer is the runtime's live queue.
        let queue = unsafe { &*self.queue };
        // Wait for the slot: the packet processor frees it by moving the
        // read index past it.
        // SAFETY: as above.
        while index - unsafe { load_read_index(self.queue) } >= u64::from(queue.size) {
            if self.failed.load(Ordering::Acquire) {
                return Err(HSA_STATUS_ERROR);
            }
            std::thread::yield_now();
        }
        let slot = (index % u64::from(queue.size)) as usize;
        let packet = queue
            .base_address
            .cast::<hsa_kernel_dispatch_packet_t>()
            .wrapping_add(slot);
        // Zeroed, then the fields every header generation names alike (the
        // header word is a union from ROCm 6 on, two fields before).
        // SAFETY: all-zero is a valid packet: integers, a NULL pointer and
        // a zero signal handle.
        let mut body: hsa_kernel_dispatch_packet_t = unsafe { std::mem::zeroed() };
        body.workgroup_size_x = abi::KR_WORKGROUP as u16;
        body.workgroup_size_y = 1;
        body.workgroup_size_z = 1;
        body.grid_size_x = grid;
        body.grid_size_y = 1;
        body.grid_size_z = 1;
        body.private_segment_size = loaded.private_size;
        body.group_segment_size = loaded.group_size;
        body.kernel_object = loaded.object;
        body.kernarg_address = kernarg.cast();
        body.completion_signal = dispatch.signal;
        let header = (HSA_PACKET_TYPE_KERNEL_DISPATCH << HSA_PACKET_HEADER_TYPE)
            | (1 << HSA_PACKET_HEADER_BARRIER)
            | (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_ACQUIRE_FENCE_SCOPE)
            | (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_RELEASE_FENCE_SCOPE);
        let setup = 1u32 << HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS;
        // SAFETY: the slot is ours (reserved above, and free); the body goes
        // in first, then the header with release ordering, as the AQL
        // protocol requires: the packet processor reads nothing of a packet
        // whose header still says INVALID.
        unsafe {
            // Everything after the 4-byte header word.
            let from = ptr::from_ref(&body).cast::<u8>().add(4);
            ptr::copy_nonoverlapping(
                from,
                packet.cast::<u8>().add(4),
                std::mem::size_of_val(&body) - 4,
            );
            let word = &*packet.cast::<std::sync::atomic::AtomicU32>();
            word.store(header | (setup << 16), Ordering::Release);
            store(queue.doorbell_signal, index as i64);
        }
        loop {
            // SAFETY: our signal; the wait only reads it.
            let value = unsafe {
                wait(
                    dispatch.signal,
                    HSA_SIGNAL_CONDITION_LT,
                    1,
                    WAIT_SLICE_TICKS,
                    HSA_WAIT_STATE_BLOCKED,
                )
            };
            if value == 0 {
                return Ok(());
            }
            if value < 0 || self.failed.load(Ordering::Acquire) {
                return Err(HSA_STATUS_ERROR);
            }
        }
    }
}

impl Drop for Runner {
    /// Releases the queue, the executable and the signal (the buffers free
    /// themselves). No dispatch runs: it would hold a borrow of the runner.
    fn drop(&mut self) {
        let signal = self
            .dispatch
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .signal;
        release(
            self.core,
            Some(self.queue),
            Some(self.executable),
            Some(signal),
        );
        forget_own(self.own, self.executable);
    }
}

/// Destroys what a runner made: its queue, executable and signal.
fn release(
    e: &CoreEntries,
    queue: Option<*mut hsa_queue_t>,
    executable: Option<hsa_executable_t>,
    signal: Option<hsa_signal_t>,
) {
    // Each is ours and idle, released once, through the runtime's own
    // entries (present: checked when the runner was made).
    if let (Some(queue), Some(destroy)) = (queue, e.hsa_queue_destroy_fn) {
        // SAFETY: see above.
        unsafe { destroy(queue) };
    }
    if let (Some(executable), Some(destroy)) = (executable, e.hsa_executable_destroy_fn) {
        // SAFETY: see above.
        unsafe { destroy(executable) };
    }
    if let (Some(signal), Some(destroy)) = (signal, e.hsa_signal_destroy_fn) {
        // SAFETY: see above.
        unsafe { destroy(signal) };
    }
}

/// Takes a destroyed executable off the list of the library's own (its
/// handle may be the runtime's for another executable from now on).
fn forget_own(own: &Mutex<Vec<u64>>, executable: hsa_executable_t) {
    own.locked().retain(|&handle| handle != executable.handle);
}

/// The loaded kernels' dispatch attributes, in [`KERNELS`] order.
fn find_kernels(
    core: &CoreEntries,
    executable: hsa_executable_t,
    agent: hsa_agent_t,
) -> Result<[LoadedKernel; KERNELS.len()], Unavailable> {
    let get_symbol = core
        .hsa_executable_get_symbol_by_name_fn
        .ok_or(Unavailable::Entries)?;
    let mut found = [LoadedKernel::default(); KERNELS.len()];
    for (slot, kernel) in found.iter_mut().zip(KERNELS) {
        let mut symbol = hsa_executable_symbol_t { handle: 0 };
        let name: &CStr = kernel.symbol();
        // SAFETY: a NUL-terminated name, the agent, a writable out-pointer.
        check(unsafe { get_symbol(executable, name.as_ptr(), &agent, &mut symbol) })
            .map_err(|status| Unavailable::Runtime("finding a kernel symbol", status))?;
        let runtime = |step, status| Unavailable::Runtime(step, status);
        *slot = LoadedKernel {
            object: core
                .symbol_info(symbol, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT)
                .map_err(|s| runtime("kernel object", s))?,
            kernarg_size: core
                .symbol_info(
                    symbol,
                    HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE,
                )
                .map_err(|s| runtime("kernarg size", s))?,
            group_size: core
                .symbol_info(symbol, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE)
                .map_err(|s| runtime("group segment size", s))?,
            private_size: core
                .symbol_info(
                    symbol,
                    HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE,
                )
                .map_err(|s| runtime("private segment size", s))?,
        };
    }
    Ok(found)
}

/// What `Runner::create` made so far, released on drop unless kept.
struct Partial {
    core: &'static CoreEntries,
    own: &'static Mutex<Vec<u64>>,
    reader: Option<hsa_code_object_reader_t>,
    executable: Option<hsa_executable_t>,
    signal: Option<hsa_signal_t>,
    queue: Option<*mut hsa_queue_t>,
    kept: bool,
}

impl Partial {
    /// `None` when the list of own executables cannot grow (then no
    /// executable may be loaded: discovery could not tell it apart).
    fn new(core: &'static CoreEntries, own: &'static Mutex<Vec<u64>>) -> Result<Self, Unavailable> {
        own.locked()
            .try_reserve(1)
            .map_err(|_| Unavailable::Runtime("own executable list", HSA_STATUS_ERROR))?;
        Ok(Partial {
            core,
            own,
            reader: None,
            executable: None,
            signal: None,
            queue: None,
            kept: false,
        })
    }

    /// Loads `object` for `agent` into a new, frozen executable.
    fn load(&mut self, agent: hsa_agent_t, object: &[u8]) -> Result<hsa_executable_t, Unavailable> {
        let table = self.core;
        let (Some(create_reader), Some(create), Some(load), Some(freeze)) = (
            table.hsa_code_object_reader_create_from_memory_fn,
            table.hsa_executable_create_alt_fn,
            table.hsa_executable_load_agent_code_object_fn,
            table.hsa_executable_freeze_fn,
        ) else {
            return Err(Unavailable::Entries);
        };
        let mut reader = hsa_code_object_reader_t { handle: 0 };
        // SAFETY: `object` outlives the reader (destroyed when this Partial
        // is dropped, after the load copied what it needs).
        check(unsafe { create_reader(object.as_ptr().cast(), object.len(), &mut reader) })
            .map_err(|s| Unavailable::Runtime("code object reader", s))?;
        self.reader = Some(reader);
        let mut executable = hsa_executable_t { handle: 0 };
        // SAFETY: a writable out-pointer; no options.
        check(unsafe {
            create(
                HSA_PROFILE_FULL,
                HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT,
                ptr::null(),
                &mut executable,
            )
        })
        .map_err(|s| Unavailable::Runtime("executable create", s))?;
        self.executable = Some(executable);
        // Capacity was reserved in `new` (a racing runner may have taken
        // it: then this push allocates, which std does infallibly; rare).
        self.own.locked().push(executable.handle);
        // SAFETY: our executable and reader; no options; no loaded-object
        // handle wanted.
        check(unsafe { load(executable, agent, reader, ptr::null(), ptr::null_mut()) })
            .map_err(|s| Unavailable::Runtime("code object load", s))?;
        // SAFETY: our executable; no options.
        check(unsafe { freeze(executable, ptr::null()) })
            .map_err(|s| Unavailable::Runtime("executable freeze", s))?;
        Ok(executable)
    }

    fn signal(&mut self) -> Result<hsa_signal_t, Unavailable> {
        let create = self.core.hsa_signal_create_fn.ok_or(Unavailable::Entries)?;
        let mut signal = hsa_signal_t { handle: 0 };
        // SAFETY: a writable out-pointer; no consumers.
        check(unsafe { create(0, 0, ptr::null(), &mut signal) })
            .map_err(|s| Unavailable::Runtime("signal create", s))?;
        self.signal = Some(signal);
        Ok(signal)
    }

    fn queue(
        &mut self,
        agent: hsa_agent_t,
        flag: *mut c_void,
    ) -> Result<*mut hsa_queue_t, Unavailable> {
        let create = self.core.hsa_queue_create_fn.ok_or(Unavailable::Entries)?;
        let mut queue: *mut hsa_queue_t = ptr::null_mut();
        // SAFETY: `flag` outlives the queue (see Runner::create); no private
        // or group segment limits (u32::MAX: the runtime's defaults).
        check(unsafe {
            create(
                agent,
                QUEUE_PACKETS,
                HSA_QUEUE_TYPE_SINGLE,
                Some(on_queue_error),
                flag,
                u32::MAX,
                u32::MAX,
                &mut queue,
            )
        })
        .map_err(|s| Unavailable::Runtime("queue create", s))?;
        if queue.is_null() {
            return Err(Unavailable::Runtime("queue create", HSA_STATUS_ERROR));
        }
        self.queue = Some(queue);
        Ok(queue)
    }

    fn keep(&mut self) {
        self.kept = true;
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        let destroy_reader = self.core.hsa_code_object_reader_destroy_fn;
        if let (Some(reader), Some(destroy)) = (self.reader.take(), destroy_reader) {
            // SAFETY: our reader; the executable (if loaded) no longer needs it.
            unsafe { destroy(reader) };
        }
        if self.kept {
            return;
        }
        let executable = self.executable.take();
        release(self.core, self.queue.take(), executable, self.signal.take());
        if let Some(executable) = executable {
            forget_own(self.own, executable);
        }
    }
}

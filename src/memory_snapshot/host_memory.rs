//! Which host memory a snapshot captures, and what it does when memory the
//! agent can write is left uncovered.
//!
//! Host memory a GPU was granted (`hipHostMalloc`, `hipHostRegister`) is
//! written by kernels like device memory, but the same pools also hold the
//! HIP runtime's own buffers: the staging buffers of pageable copies
//! (coarse-grained, filled by the CPU while another stream's copy runs),
//! the hostcall buffer of device `printf` (fine-grained, serviced by a
//! listener thread) and the pinning of pageable memory during a copy
//! (a coarse-grained lock). At the HSA level they are made exactly like an
//! application's (same pools, flags 0, access granted to every GPU), and
//! restoring one under the thread that uses it corrupts that copy or
//! desynchronises that listener. So the choice is a setting
//! (`kr_set_host_memory`, `KERNEL_REPLAY_HOST_MEMORY`), and its default
//! takes the conservative side where HIP is loaded: only memory locked for
//! the GPUs through a fine-grained pool or `hsa_amd_memory_lock` (what
//! `hipHostRegister` makes, which HIP never uses for itself), with every
//! other host byte the agent can write reported as not covered. A process
//! without HIP (a pure HSA program, OpenMP offload through the HSA runtime)
//! has no such buffers in the tables the wrappers see: all of its host
//! memory granted to the agent is captured.
//!
//! What is not covered is said: each snapshot reports it per kind
//! (`kr_snapshot_uncovered_bytes`), the first snapshot of each agent that
//! leaves some out warns once, and under the strict coverage setting
//! (`kr_set_coverage`, `KERNEL_REPLAY_COVERAGE=strict`) the snapshot
//! declines instead (`KR_DECLINE_UNCOVERED_MEMORY`). With XNACK on, every
//! byte of system memory is writable by kernels and none of it can be
//! tracked: that is reported the same way.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicU8, Ordering};

use crate::memory_tracker::kind::MemoryKind;
#[cfg(test)]
use crate::support::settings;

crate::c_enum! {
    /// Which host memory granted to an agent its snapshots capture
    /// (`kr_set_host_memory`, `KERNEL_REPLAY_HOST_MEMORY`).
    pub enum HostMemory: "kr_host_memory_t", "KR_HOST_MEMORY_" {
        /// `REGISTERED` in a process where HIP's runtime (`libamdhip64`)
        /// is loaded, whose own buffers share the host pools; `ALL`
        /// otherwise. The default.
        Auto = 0 => "AUTO",
        /// Every host-pool allocation and locked range the agent was
        /// granted. Under HIP, only for programs that run no pageable copy
        /// and no device `printf` concurrently with a replay.
        All = 1 => "ALL",
        /// Memory locked for the GPUs through a fine-grained pool or
        /// `hsa_amd_memory_lock` (`hipHostRegister`); host-pool allocations
        /// and coarse-grained locks (HIP's staging, hostcall and pinning
        /// buffers among them) are reported, not captured.
        Registered = 2 => "REGISTERED",
        /// No host memory (managed memory neither): all of it is reported,
        /// none captured.
        Off = 3 => "OFF",
    }
}

crate::c_enum! {
    /// What a snapshot does when memory its agent can write is not covered
    /// (`kr_set_coverage`, `KERNEL_REPLAY_COVERAGE`).
    pub enum Coverage: "kr_coverage_t", "KR_COVERAGE_" {
        /// Capture what can be captured, report the rest per snapshot and
        /// warn once per agent. The default.
        Warn = 0 => "WARN",
        /// Decline the snapshot (`KR_DECLINE_UNCOVERED_MEMORY`).
        Strict = 1 => "STRICT",
    }
}

impl HostMemory {
    /// The rule in force: `Auto` resolved by whether HIP is loaded.
    pub fn resolved(self, hip_loaded: bool) -> HostMemory {
        match self {
            HostMemory::Auto if hip_loaded => HostMemory::Registered,
            HostMemory::Auto => HostMemory::All,
            rule => rule,
        }
    }

    /// Whether a snapshot under this (resolved) rule captures a region of
    /// `memory`, `coarse` if from (or locked to) a coarse-grained pool.
    /// Device memory is always captured; managed memory under every rule
    /// but `Off` (HIP makes none for itself: it is the application's).
    pub fn captures(self, memory: MemoryKind, coarse: bool) -> bool {
        if memory == MemoryKind::Managed {
            return self != HostMemory::Off;
        }
        if !memory.is_host() {
            return true;
        }
        match self {
            HostMemory::All | HostMemory::Auto => true,
            HostMemory::Registered => memory == MemoryKind::Locked && !coarse,
            HostMemory::Off => false,
        }
    }
}

/// Whether HIP's runtime is loaded: unknown (0), no (1), yes (2). Asked at
/// the first snapshot (HIP loads the HSA runtime, so it is there before any
/// dispatch a tool replays) and kept.
static HIP_LOADED: AtomicU8 = AtomicU8::new(0);

/// Whether `libamdhip64` is loaded in the process.
pub fn hip_loaded() -> bool {
    match HIP_LOADED.load(Ordering::Acquire) {
        0 => {
            let loaded = any_loaded(HIP_LIBRARIES);
            let _ = HIP_LOADED.compare_exchange(
                0,
                if loaded { 2 } else { 1 },
                Ordering::AcqRel,
                Ordering::Acquire,
            );
            HIP_LOADED.load(Ordering::Acquire) == 2
        }
        known => known == 2,
    }
}

/// Tests: what `hip_loaded` answers from now on (`None`: look again).
#[doc(hidden)]
pub fn assume_hip_loaded(loaded: Option<bool>) {
    HIP_LOADED.store(
        match loaded {
            None => 0,
            Some(false) => 1,
            Some(true) => 2,
        },
        Ordering::Release,
    );
}

/// The names HIP's runtime library is loaded under, by its ROCm release.
const HIP_LIBRARIES: &[&CStr] = &[
    c"libamdhip64.so",
    c"libamdhip64.so.5",
    c"libamdhip64.so.6",
    c"libamdhip64.so.7",
    c"libamdhip64.so.8",
];

extern "C" {
    fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
    fn dlclose(handle: *mut c_void) -> c_int;
}

/// glibc's `RTLD_LAZY | RTLD_NOLOAD`: a handle only if already loaded.
const RTLD_LAZY_NOLOAD: c_int = 0x1 | 0x4;

/// Whether a library of one of these names is loaded (never loads one).
fn any_loaded(names: &[&CStr]) -> bool {
    names.iter().any(|name| {
        // SAFETY: a NUL-terminated name; RTLD_NOLOAD never maps a library,
        // it only returns (and references) one that is loaded.
        let handle = unsafe { dlopen(name.as_ptr(), RTLD_LAZY_NOLOAD) };
        if handle.is_null() {
            return false;
        }
        // SAFETY: the reference dlopen just took.
        unsafe { dlclose(handle) };
        true
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_is_registered_under_hip_and_all_without() {
        assert_eq!(HostMemory::Auto.resolved(true), HostMemory::Registered);
        assert_eq!(HostMemory::Auto.resolved(false), HostMemory::All);
        for rule in [HostMemory::All, HostMemory::Registered, HostMemory::Off] {
            assert_eq!(rule.resolved(true), rule);
            assert_eq!(rule.resolved(false), rule);
        }
    }

    #[test]
    fn what_each_rule_captures() {
        use MemoryKind::*;
        let kinds = [(Host, false), (Host, true), (Locked, false), (Locked, true)];
        let taken = |rule: HostMemory| -> Vec<bool> {
            kinds.iter().map(|&(m, c)| rule.captures(m, c)).collect()
        };
        assert_eq!(taken(HostMemory::All), [true, true, true, true]);
        assert_eq!(taken(HostMemory::Registered), [false, false, true, false]);
        assert_eq!(taken(HostMemory::Off), [false, false, false, false]);
        for rule in [HostMemory::All, HostMemory::Registered, HostMemory::Auto] {
            assert!(rule.captures(Managed, false), "{rule:?}");
        }
        assert!(!HostMemory::Off.captures(Managed, false));
        for rule in HostMemory::ALL {
            for device in [Device, DeviceFine, DevicePeer] {
                assert!(rule.captures(device, true) && rule.captures(device, false));
            }
        }
    }

    #[test]
    fn each_spelling_stands_for_its_variant() {
        let host = |text| {
            settings::HOST_MEMORY
                .parse(text)
                .map(u32::from)
                .and_then(HostMemory::from_code)
        };
        assert_eq!(host(" Registered "), Some(HostMemory::Registered));
        assert_eq!(host("off"), Some(HostMemory::Off));
        assert_eq!(host("all"), Some(HostMemory::All));
        assert_eq!(host("auto"), Some(HostMemory::Auto));
        assert_eq!(host("some"), None);
        let coverage = |text| {
            settings::COVERAGE
                .parse(text)
                .map(u32::from)
                .and_then(Coverage::from_code)
        };
        assert_eq!(coverage("STRICT"), Some(Coverage::Strict));
        assert_eq!(coverage("warn"), Some(Coverage::Warn));
    }

    #[test]
    fn a_library_that_is_not_loaded_is_not_found_and_one_that_is_is() {
        assert!(!any_loaded(&[c"libkernel-replay-no-such-library.so.0"]));
        assert!(any_loaded(&[c"libc.so.6"]));
    }
}

//! One copy of kernel-replay per process: the marker the first copy that
//! installs its wrappers leaves in the process, so that a second copy
//! answers `KR_STATUS_ALREADY_INSTALLED` instead of installing its wrappers
//! over the first's (every allocation would then be tracked twice, by two
//! inventories that know nothing of each other).
//!
//! A second copy is loaded when, say, the C++ SDK loads the `.so` while a
//! Rust component of the same process links the rlib, or the `.so` is
//! loaded twice under two paths. Such copies share no symbols (an
//! `RTLD_LOCAL` dlopen, an rlib linked statically into the executable), so
//! no static of ours can be the marker: each copy has its own. The process's
//! environment is one per process whatever the copies, readable and
//! writable with `std` alone. But a child process inherits the environment
//! across `exec` and starts with none of our wrappers installed, so the
//! value carries the pid of the process that set it: a marker naming
//! another pid was inherited, and is ignored (the child's first install
//! then replaces it). The value also names the copy (the address of a
//! static of that copy), so a copy tells its own marker from another's, and
//! its version, for the warning:
//!
//! ```text
//! KERNEL_REPLAY_INSTALLED=<pid>:<copy, hex>:<version>
//! ```
//!
//! Caveats. `setenv` races with a `getenv` on another thread (glibc), so the
//! variable is written once per process, at the first successful install
//! (a tool's `OnLoad`, before the application's threads normally run), and
//! never removed: it survives `kr_finalize`, since a finalized first copy
//! still owns the wrappers in the tables. Two copies installing at the same
//! moment on two threads can both miss the marker (copies share no lock; the
//! runtime loads tools one at a time). A process that replaces its image
//! with `exec` (no fork) keeps its pid, so a copy in the new image may take
//! the marker for another copy's and install nothing; and one that clears
//! its environment loses the marker.

use std::ffi::OsStr;

/// The environment variable.
pub const VAR: &str = crate::support::settings::INSTALLED.name;

/// Which copy of the library installed its wrappers in this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// None: no marker, one inherited from another process, or one that
    /// cannot be read.
    Nobody,
    /// This copy.
    This,
    /// Another copy in this process.
    Other {
        /// Its version, as its marker says.
        version: String,
    },
}

/// Who owns this process's tables, as the marker says.
pub fn owner() -> Owner {
    match std::env::var_os(VAR) {
        Some(value) => parse(&value, std::process::id(), this_copy()),
        None => Owner::Nobody,
    }
}

/// Marks the process as this copy's, after its first successful install.
/// Writes the environment only if it does not say so already.
pub fn claim() {
    if owner() != Owner::This {
        std::env::set_var(
            VAR,
            value(std::process::id(), this_copy(), env!("CARGO_PKG_VERSION")),
        );
    }
}

/// The marker's value for that process, copy and version.
pub fn value(pid: u32, copy: usize, version: &str) -> String {
    format!("{pid}:{copy:x}:{version}")
}

/// What a marker's value says, read by copy `copy` of process `pid`.
fn parse(value: &OsStr, pid: u32, copy: usize) -> Owner {
    let Some(value) = value.to_str() else {
        return Owner::Nobody;
    };
    let mut fields = value.splitn(3, ':');
    let (Some(set_by), Some(set_copy)) = (fields.next(), fields.next()) else {
        return Owner::Nobody;
    };
    let (Ok(set_by), Ok(set_copy)) = (set_by.parse::<u32>(), usize::from_str_radix(set_copy, 16))
    else {
        return Owner::Nobody;
    };
    if set_by != pid {
        Owner::Nobody
    } else if set_copy == copy {
        Owner::This
    } else {
        let version = fields.next().filter(|v| !v.is_empty()).unwrap_or("unknown");
        Owner::Other {
            version: version.to_owned(),
        }
    }
}

/// This copy's identity: the address of one of its statics, distinct in
/// every copy mapped into the process.
fn this_copy() -> usize {
    static COPY: u8 = 0;
    std::ptr::addr_of!(COPY) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(value: &str) -> Owner {
        parse(OsStr::new(value), 42, 0xabc0)
    }

    #[test]
    fn this_copys_marker_is_its_own() {
        assert_eq!(read(&value(42, 0xabc0, "0.1.0")), Owner::This);
    }

    #[test]
    fn another_copy_of_this_process_is_named_with_its_version() {
        assert_eq!(
            read(&value(42, 0xdef0, "0.2.0")),
            Owner::Other {
                version: "0.2.0".into()
            }
        );
        assert_eq!(
            read("42:def0:"),
            Owner::Other {
                version: "unknown".into()
            }
        );
        assert_eq!(
            read("42:def0"),
            Owner::Other {
                version: "unknown".into()
            }
        );
    }

    #[test]
    fn a_marker_of_another_process_is_ignored() {
        // Inherited across exec: the pid is the parent's, whatever the copy.
        assert_eq!(read(&value(41, 0xabc0, "0.1.0")), Owner::Nobody);
        assert_eq!(read(&value(43, 0xdef0, "0.1.0")), Owner::Nobody);
    }

    #[test]
    fn an_unreadable_marker_is_ignored() {
        for value in ["", "42", "x:abc0:0.1.0", "42:xyz:0.1.0", "-42:abc0:0.1.0"] {
            assert_eq!(read(value), Owner::Nobody, "{value:?}");
        }
    }

    #[test]
    fn the_version_may_hold_colons() {
        assert_eq!(
            read("42:1:0.1.0:extra"),
            Owner::Other {
                version: "0.1.0:extra".into()
            }
        );
    }

    #[test]
    fn this_copy_has_one_identity() {
        assert_eq!(this_copy(), this_copy());
        assert_ne!(this_copy(), 0);
    }
}

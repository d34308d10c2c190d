//! The table guard.
//!
//! `CoreApiTable` and `AmdExtTable` change between ROCm releases. ROCr fills
//! `version.major_id` with the table's major version and `version.minor_id`
//! with `sizeof` the table it was built with (the real minor version is
//! `step_id`). Before reading or replacing any entry, the library checks a
//! table against the headers it was built with:
//!
//! - the major version must be the one of those headers: another major is
//!   another layout;
//! - major 1 (ROCm 5.x) must be exactly the size of those headers' table:
//!   5.5 and 5.6 inserted entries into `AmdExtTable` without a new major, so
//!   a different size means entries at other offsets;
//! - from major 2 (ROCm 6.0 on) tables only grow at the end, so any size that
//!   covers every entry the library reads or replaces is accepted: a newer
//!   runtime's longer table, or an older one's shorter table.
//!
//! Otherwise the library installs nothing.
//!
//! Tables are handled through raw pointers: forming a `&CoreApiTable` over a
//! shorter table would itself be undefined behaviour.

use std::fmt;
use std::mem::size_of;

use super::entries::{ApiTable, LibraryEntry, Need};
use super::sys::ApiTableVersion;

/// The entries of a table the guard requires: those the list marks
/// `required` (hsa-sys/hsa_entries.def).
pub fn required_entries<T: ApiTable>() -> impl Iterator<Item = &'static LibraryEntry> {
    T::library_entries().filter(|e| e.need == Need::Required)
}

/// Why a table was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableError {
    /// `version.major_id` differs from the headers the library was built with.
    MajorVersion {
        /// The table's struct name.
        table: &'static str,
        /// `version.major_id` as the runtime wrote it.
        found: u32,
        /// The headers' major version.
        expected: u32,
    },
    /// A major-1 table whose size (`version.minor_id`) is not the size of
    /// the headers' table: another 5.x layout.
    SizeMismatch {
        /// The table's struct name.
        table: &'static str,
        /// `version.minor_id`: the runtime's table size.
        size: u32,
        /// The headers' table size.
        expected: usize,
    },
    /// `version.minor_id` (the table's size) ends before an entry we use.
    TooSmall {
        /// The table's struct name.
        table: &'static str,
        /// `version.minor_id`: the runtime's table size.
        size: u32,
        /// The first entry it does not reach.
        entry: &'static str,
        /// The size that entry needs.
        needed: usize,
    },
    /// An entry we use is NULL in the table.
    MissingEntry {
        /// The table's struct name.
        table: &'static str,
        /// The entry's field name.
        entry: &'static str,
    },
}

impl fmt::Display for TableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TableError::MajorVersion { table, found, expected } => write!(
                f,
                "{table}: major version {found}, this library was built for {expected}"
            ),
            TableError::SizeMismatch { table, size, expected } => write!(
                f,
                "{table}: major version 1 with {size} bytes, this library was built for {expected} \
                 (ROCm 5.x moved entries without a new major version)"
            ),
            TableError::TooSmall { table, size, entry, needed } => write!(
                f,
                "{table}: {size} bytes (version.minor_id) do not reach {entry}, which needs {needed}"
            ),
            TableError::MissingEntry { table, entry } => write!(f, "{table}: {entry} is NULL"),
        }
    }
}

/// Checks the version and size of a table and that every used entry is set.
///
/// # Safety
/// `table` must be non-NULL and point to at least `size_of::<ApiTableVersion>()`
/// readable bytes, followed by `version.minor_id - size_of::<ApiTableVersion>()`
/// more (the runtime's promise about its own table).
pub unsafe fn validate<T: ApiTable>(table: *const T) -> Result<(), TableError> {
    // SAFETY: every table starts with its ApiTableVersion (hsa_api_trace.h
    // makes that the root of the table-passing ABI) and the caller promises
    // at least that much is readable.
    let version = unsafe { table.cast::<ApiTableVersion>().read_unaligned() };
    if version.major_id != T::MAJOR_VERSION {
        return Err(TableError::MajorVersion {
            table: T::NAME,
            found: version.major_id,
            expected: T::MAJOR_VERSION,
        });
    }
    if version.major_id == 1 && version.minor_id as usize != size_of::<T>() {
        return Err(TableError::SizeMismatch {
            table: T::NAME,
            size: version.minor_id,
            expected: size_of::<T>(),
        });
    }
    for entry in required_entries::<T>() {
        let needed = entry.offset + size_of::<usize>();
        if (version.minor_id as usize) < needed {
            return Err(TableError::TooSmall {
                table: T::NAME,
                size: version.minor_id,
                entry: entry.field,
                needed,
            });
        }
        // SAFETY: the entry lies inside the first minor_id bytes, which the
        // runtime promises are its table; entries are pointer-sized and
        // pointer-aligned by the struct layout.
        let value = unsafe { table.cast::<u8>().add(entry.offset).cast::<usize>().read() };
        if value == 0 {
            return Err(TableError::MissingEntry {
                table: T::NAME,
                entry: entry.field,
            });
        }
    }
    Ok(())
}

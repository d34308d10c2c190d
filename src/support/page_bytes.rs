//! Page-aligned host memory, allocated fallibly and left uninitialised: the
//! pageable copies of snapshots.
//!
//! Page-aligned, not the allocator's 16 bytes: host memory a snapshot
//! captures starts on a page, and a `memcpy` whose destination sits 16
//! bytes off its source's alignment runs several times slower on common
//! x86 cores (measured 12-26x at 4-256 KiB and about 3x at 256 MiB; see
//! bench/results/2026-12-03-host-memory-wrappers-and-copies.md).

use std::alloc::{alloc, dealloc, Layout};
use std::ptr::NonNull;

/// The alignment of the bytes.
pub(crate) const PAGE: usize = 4096;

/// `len` page-aligned bytes (at least one page's worth of address space is
/// never asked for a zero length: such a buffer holds no allocation).
pub struct PageBytes {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: plain memory owned by this value alone.
unsafe impl Send for PageBytes {}
// SAFETY: no interior mutability through a shared reference.
unsafe impl Sync for PageBytes {}

impl PageBytes {
    /// `len` bytes, or `None` when they cannot be had (never aborts).
    pub fn try_new(len: usize) -> Option<PageBytes> {
        if len == 0 {
            return Some(PageBytes {
                ptr: NonNull::dangling(),
                len: 0,
            });
        }
        let layout = Layout::from_size_align(len, PAGE).ok()?;
        // SAFETY: a layout of non-zero size.
        let ptr = NonNull::new(unsafe { alloc(layout) })?;
        Some(PageBytes { ptr, len })
    }

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    pub fn len(&self) -> usize {
        self.len
    }
}

impl Drop for PageBytes {
    fn drop(&mut self) {
        if self.len == 0 {
            return;
        }
        // SAFETY: allocated in try_new with this very layout (it was valid
        // then, so it is now).
        unsafe {
            dealloc(
                self.ptr.as_ptr(),
                Layout::from_size_align_unchecked(self.len, PAGE),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_page_aligned_and_impossible_sizes_fail_cleanly() {
        for len in [1, 100, PAGE, 3 * PAGE + 1] {
            let mut bytes = PageBytes::try_new(len).unwrap();
            assert_eq!(bytes.as_ptr() as usize % PAGE, 0);
            assert_eq!(bytes.len(), len);
            // Writable over its whole length.
            // SAFETY: `len` bytes of our own.
            unsafe { std::ptr::write_bytes(bytes.as_mut_ptr(), 7, len) };
        }
        assert_eq!(PageBytes::try_new(0).unwrap().len(), 0);
        assert!(PageBytes::try_new(usize::MAX - PAGE).is_none());
    }
}

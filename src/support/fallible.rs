//! Heap allocation that reports failure instead of aborting the process:
//! the library runs inside someone else's program, where `Box::new` running
//! out of memory would abort it.

use std::alloc::{alloc, Layout};

/// Moves `value` to the heap; `None` if the allocation fails. The result is
/// a `Box`'s allocation (the global allocator, `T`'s layout).
pub fn boxed<T>(value: T) -> Option<Box<T>> {
    let layout = Layout::new::<T>();
    if layout.size() == 0 {
        return Some(Box::new(value));
    }
    // SAFETY: a non-zero-sized layout.
    let ptr = unsafe { alloc(layout) }.cast::<T>();
    if ptr.is_null() {
        return None;
    }
    // SAFETY: a fresh, properly aligned allocation for one T.
    unsafe { ptr.write(value) };
    // SAFETY: allocated by the global allocator with T's layout, initialized.
    Some(unsafe { Box::from_raw(ptr) })
}

/// Moves `value` to the heap for the rest of the process.
pub fn leak<T>(value: T) -> Option<*mut T> {
    boxed(value).map(Box::into_raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_come_back_intact() {
        assert_eq!(*boxed([7u64; 4]).unwrap(), [7; 4]);
        let leaked = leak(5u32).unwrap();
        // SAFETY: just leaked, valid for the rest of the process.
        assert_eq!(unsafe { *leaked }, 5);
        assert_eq!(*boxed(()).unwrap(), ());
    }
}

//! Heap allocation that reports failure instead of aborting the process
//! (and a filter that never allocates):
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

/// Keeps the items whose flag in `kept` is true (an item past the flags
/// is kept): one list filtered in step with another indexed the same way.
pub fn retain_kept<T>(items: &mut Vec<T>, kept: &[bool]) {
    let mut index = 0;
    items.retain(|_| {
        index += 1;
        kept.get(index - 1).copied().unwrap_or(true)
    });
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

    #[test]
    fn retain_kept_filters_by_position() {
        let mut items = vec![10, 11, 12, 13];
        retain_kept(&mut items, &[true, false, true, false]);
        assert_eq!(items, [10, 12]);
        let mut items = vec![1, 2, 3];
        retain_kept(&mut items, &[false]);
        assert_eq!(items, [2, 3], "past the flags: kept");
    }
}

//! FFI plumbing shared by every export: logging set up and panics caught
//! (`support::unwind`), and NULL-safe pointer conversion.

use crate::support::unwind::catch_panic;

/// The boundary of one exported function: logging ready, panics caught.
#[inline(always)]
pub(crate) fn export<R>(on_panic: R, body: impl FnOnce() -> R) -> R {
    crate::support::logging::init();
    catch_panic(on_panic, body)
}

/// Borrows a C pointer, or `None` for NULL.
///
/// # Safety
/// A non-NULL `ptr` must point to a live `T` not mutated for `'a`.
pub(crate) unsafe fn borrow<'a, T>(ptr: *const T) -> Option<&'a T> {
    // SAFETY: forwarded from the caller.
    unsafe { ptr.as_ref() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_in_an_export_becomes_its_error_value() {
        let caught: *mut u8 = export(std::ptr::null_mut(), || panic!("{}", String::from("owned")));
        assert!(caught.is_null());
        assert_eq!(export(1, || 2), 2);
    }
}

//! FFI plumbing shared by every export: the panic boundary and NULL-safe
//! pointer conversion.

use std::panic::{catch_unwind, AssertUnwindSafe};

use log::error;

/// Runs `body`, returning `on_panic` instead of unwinding into C.
///
/// A panic in this library is a bug, but the library runs inside someone
/// else's process, in the path of every device allocation: it must report
/// and carry on, never abort the host.
#[inline(always)]
pub(crate) fn catch_panic<R>(on_panic: R, body: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(value) => value,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("unknown panic");
            // Logging may itself fail; never let that escape either.
            let _ = catch_unwind(|| error!("internal error caught at the C boundary: {what}"));
            on_panic
        }
    }
}

/// The boundary of one exported function: logging ready, panics caught.
#[inline(always)]
pub(crate) fn export<R>(on_panic: R, body: impl FnOnce() -> R) -> R {
    crate::logging::init();
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
    fn a_panic_becomes_the_functions_error_value() {
        assert_eq!(catch_panic(7, || -> i32 { panic!("internal bug") }), 7);
        assert_eq!(catch_panic(7, || 3), 3);
        let caught: *mut u8 = export(std::ptr::null_mut(), || panic!("{}", String::from("owned")));
        assert!(caught.is_null());
    }
}

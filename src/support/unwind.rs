//! The panic boundary: every entry from foreign code (a C export, a wrapper
//! the runtime calls, a callback it runs) goes through [`catch_panic`].

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_the_functions_error_value() {
        assert_eq!(catch_panic(7, || -> i32 { panic!("internal bug") }), 7);
        assert_eq!(catch_panic(7, || 3), 3);
        let owned: *mut u8 =
            catch_panic(std::ptr::null_mut(), || panic!("{}", String::from("owned")));
        assert!(owned.is_null());
    }
}

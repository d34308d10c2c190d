//! Logging: the library logs through the `log` facade into this backend,
//! which writes to stderr or to a callback the tool registers.
//!
//! Default: WARN and above to stderr. `KERNEL_REPLAY_LOG` (error, warn, info,
//! debug, trace, off) sets the level at first use; `kr_set_log_level`
//! changes it later. With a callback set, every message that passes the
//! level goes to the callback instead of stderr.

use std::ffi::{c_char, c_void, CString};
use std::io::Write;
use std::sync::{Once, PoisonError, RwLock};

use log::{LevelFilter, Log, Metadata, Record};

use crate::ffi::types::kr_log_level_t;

/// A log callback and its user data, as the C caller registered them.
#[derive(Clone, Copy)]
pub struct Sink {
    pub callback: unsafe extern "C" fn(kr_log_level_t, *const c_char, *mut c_void),
    pub user_data: *mut c_void,
}

// SAFETY: the user data is the caller's; the C API documents that the
// callback may be called from any thread, so the caller made it shareable.
unsafe impl Send for Sink {}
// SAFETY: as above.
unsafe impl Sync for Sink {}

static SINK: RwLock<Option<Sink>> = RwLock::new(None);
static INIT: Once = Once::new();

struct Backend;
static BACKEND: Backend = Backend;

/// Installs the backend and reads `KERNEL_REPLAY_LOG`, once. Every export
/// that may log calls this first.
pub fn init() {
    INIT.call_once(|| {
        let level = std::env::var("KERNEL_REPLAY_LOG")
            .ok()
            .and_then(|v| parse_level(&v))
            .unwrap_or(LevelFilter::Warn);
        // Fails only if the host (a Rust program linking the rlib) installed
        // its own logger; messages then go there, which is what it asked for.
        let _ = log::set_logger(&BACKEND);
        log::set_max_level(level);
    });
}

fn parse_level(value: &str) -> Option<LevelFilter> {
    match value.trim().to_ascii_lowercase().as_str() {
        "off" | "0" => Some(LevelFilter::Off),
        "error" | "1" => Some(LevelFilter::Error),
        "warn" | "warning" | "2" => Some(LevelFilter::Warn),
        "info" | "3" => Some(LevelFilter::Info),
        "debug" | "4" => Some(LevelFilter::Debug),
        "trace" | "5" => Some(LevelFilter::Trace),
        _ => None,
    }
}

pub fn set_level(level: LevelFilter) {
    init();
    log::set_max_level(level);
}

pub fn set_sink(sink: Option<Sink>) {
    init();
    *SINK.write().unwrap_or_else(PoisonError::into_inner) = sink;
}

impl Log for Backend {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        // Copy the sink out so the callback runs without the lock held: it may
        // call back into the library, even to replace itself.
        let sink = *SINK.read().unwrap_or_else(PoisonError::into_inner);
        match sink {
            Some(sink) => {
                let text = record.args().to_string().replace('\0', " ");
                let level = kr_log_level_t::from_level(record.level());
                if let Ok(message) = CString::new(text) {
                    // SAFETY: a registered C callback with its own user data;
                    // the message outlives the call.
                    unsafe { (sink.callback)(level, message.as_ptr(), sink.user_data) };
                }
            }
            None => {
                let _ = writeln!(
                    std::io::stderr().lock(),
                    "[kernel-replay] {}: {}",
                    record.level(),
                    record.args()
                );
            }
        }
    }

    fn flush(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_by_name_and_number() {
        assert_eq!(parse_level("TRACE"), Some(LevelFilter::Trace));
        assert_eq!(parse_level(" warn "), Some(LevelFilter::Warn));
        assert_eq!(parse_level("3"), Some(LevelFilter::Info));
        assert_eq!(parse_level("off"), Some(LevelFilter::Off));
        assert_eq!(parse_level("loud"), None);
    }
}

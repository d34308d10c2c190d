//! Logging: the library logs through the `log` facade into this backend,
//! which writes to stderr or to a callback the tool registers.
//!
//! Default: WARN and above to stderr. `KERNEL_REPLAY_LOG` (error, warn, info,
//! debug, trace, off) sets the level at first use; `kr_set_log_level`
//! changes it later. With a callback set, every message that passes the
//! level goes to the callback instead of stderr.

use std::ffi::{c_char, c_void};
use std::fmt;
use std::io::Write;
use std::sync::{Once, RwLock};

use log::{LevelFilter, Log, Metadata, Record};

use super::settings;
use super::sync::RecoverRw;

crate::c_enum! {
    /// Log levels, most severe first.
    pub enum LogLevel: "kr_log_level_t", "KR_LOG_" {
        /// Failures the library could not work around.
        Error = 1 => "ERROR",
        /// Declines, drops and anything a profiler's user should hear of.
        Warn = 2 => "WARN",
        /// Notable events (arenas released for the application, ...).
        Info = 3 => "INFO",
        /// What a snapshot or restore did, region by region.
        Debug = 4 => "DEBUG",
        /// Everything, including every allocation seen.
        Trace = 5 => "TRACE",
    }
}

impl LogLevel {
    /// The level of a `log` record.
    pub fn of(level: log::Level) -> Self {
        match level {
            log::Level::Error => LogLevel::Error,
            log::Level::Warn => LogLevel::Warn,
            log::Level::Info => LogLevel::Info,
            log::Level::Debug => LogLevel::Debug,
            log::Level::Trace => LogLevel::Trace,
        }
    }

    /// The filter for a level given as its code: past TRACE clamps to
    /// TRACE, and 0 turns logging off.
    pub fn filter_from_code(code: u32) -> LevelFilter {
        match code {
            0 => LevelFilter::Off,
            1 => LevelFilter::Error,
            2 => LevelFilter::Warn,
            3 => LevelFilter::Info,
            4 => LevelFilter::Debug,
            _ => LevelFilter::Trace,
        }
    }
}

/// A log callback and its user data, as the C caller registered them.
#[derive(Clone, Copy)]
pub struct Sink {
    /// Called with each message that passes the level.
    pub callback: unsafe extern "C" fn(LogLevel, *const c_char, *mut c_void),
    /// Passed back to the callback.
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
        let value = std::env::var_os(settings::LOG.name);
        let (code, warning) = settings::LOG.resolve(value.as_deref());
        // Fails only if the host (a Rust program linking the rlib) installed
        // its own logger; messages then go there, which is what it asked for.
        let _ = log::set_logger(&BACKEND);
        log::set_max_level(LogLevel::filter_from_code(u32::from(code)));
        if let Some(warning) = warning {
            log::warn!("{warning}");
        }
    });
}

pub fn set_level(level: LevelFilter) {
    init();
    log::set_max_level(level);
}

pub fn set_sink(sink: Option<Sink>) {
    init();
    *SINK.write_locked() = sink;
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
        let sink = *SINK.read_locked();
        match sink {
            Some(sink) => {
                let mut message = MessageBuffer::new();
                let _ = fmt::write(&mut message, *record.args());
                let level = LogLevel::of(record.level());
                // SAFETY: a registered C callback with its own user data;
                // the message is NUL-terminated and outlives the call.
                unsafe { (sink.callback)(level, message.as_c_str(), sink.user_data) };
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

/// A message formatted on the stack: logging must work when the heap does
/// not (a snapshot declined for lack of host memory says so), so nothing
/// here allocates. Longer messages are cut short, marked with "...".
struct MessageBuffer {
    bytes: [u8; MESSAGE_CAPACITY],
    len: usize,
    truncated: bool,
}

/// Bytes of a message, NUL included.
const MESSAGE_CAPACITY: usize = 1024;
const ELLIPSIS: &[u8] = b"...";

impl MessageBuffer {
    fn new() -> Self {
        MessageBuffer {
            bytes: [0; MESSAGE_CAPACITY],
            len: 0,
            truncated: false,
        }
    }

    /// The message, NUL-terminated (interior NULs became spaces).
    fn as_c_str(&mut self) -> *const c_char {
        if self.truncated {
            let end = MESSAGE_CAPACITY - 1 - ELLIPSIS.len();
            self.bytes[end..end + ELLIPSIS.len()].copy_from_slice(ELLIPSIS);
            self.len = end + ELLIPSIS.len();
        }
        self.bytes[self.len] = 0;
        self.bytes.as_ptr().cast()
    }
}

impl fmt::Write for MessageBuffer {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        let room = MESSAGE_CAPACITY - 1 - self.len;
        let taken = text.len().min(room);
        for (slot, &byte) in self.bytes[self.len..self.len + taken]
            .iter_mut()
            .zip(text.as_bytes())
        {
            *slot = if byte == 0 { b' ' } else { byte };
        }
        self.len += taken;
        self.truncated |= taken < text.len();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::ffi::CStr;
    use std::fmt::Write as _;

    #[test]
    fn messages_are_nul_terminated_without_interior_nuls_and_cut_when_long() {
        let mut short = MessageBuffer::new();
        write!(short, "a\0b {}", 7).unwrap();
        // SAFETY: as_c_str returns a NUL-terminated buffer owned by `short`.
        let text = unsafe { CStr::from_ptr(short.as_c_str()) };
        assert_eq!(text.to_str().unwrap(), "a b 7");

        let mut long = MessageBuffer::new();
        for _ in 0..MESSAGE_CAPACITY {
            long.write_str("xy").unwrap();
        }
        // SAFETY: as above.
        let text = unsafe { CStr::from_ptr(long.as_c_str()) }.to_str().unwrap();
        assert_eq!(text.len(), MESSAGE_CAPACITY - 1);
        assert!(text.ends_with("...") && text.starts_with("xyxy"));
    }

    #[test]
    fn levels_parse_by_name_and_number() {
        let level = |text: &str| {
            settings::LOG
                .parse(text)
                .map(|code| LogLevel::filter_from_code(u32::from(code)))
        };
        assert_eq!(level("TRACE"), Some(LevelFilter::Trace));
        assert_eq!(level(" warn "), Some(LevelFilter::Warn));
        assert_eq!(level("3"), Some(LevelFilter::Info));
        assert_eq!(level("off"), Some(LevelFilter::Off));
        assert_eq!(level("loud"), None);
    }
}

//! The environment variables the library reads, each declared once here
//! with the values it accepts, and read through one helper: a value the
//! library does not know (or a variable of its prefix it does not know) is
//! warned about once, naming the variable and what it accepts, and the
//! default is used. Nothing here fails or panics: a profiled program's
//! environment is its own.
//!
//! A setting a tool sets through the API wins over its variable, which is
//! then never read; otherwise the variable is read once, at the first use
//! or at install ([`Setting::code`], [`resolve_all`]): reading it allocates,
//! and a snapshot may run under memory pressure.

use std::ffi::OsStr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Once;

/// One environment variable: its name, what it does (for the docs and the
/// warning), and the spellings it accepts with the code each stands for.
#[derive(Debug)]
pub(crate) struct Variable {
    pub name: &'static str,
    pub what: &'static str,
    /// Accepted spellings (compared trimmed, ignoring ASCII case) and their
    /// codes. Empty for a variable whose value is free-form (a path).
    pub values: &'static [(&'static str, u8)],
    /// The code used when the variable is unset or not understood.
    pub default: u8,
}

/// `KERNEL_REPLAY_STORAGE`: codes of `StoragePolicy`.
pub(crate) const STORAGE: Variable = Variable {
    name: "KERNEL_REPLAY_STORAGE",
    what: "where snapshots keep their copies",
    values: &[
        ("auto", 0),
        ("device", 1),
        ("pinned", 2),
        ("pageable", 3),
        ("baseline", 4),
    ],
    default: 0,
};

/// `KERNEL_REPLAY_STRATEGY`: codes of `Strategy`.
pub(crate) const STRATEGY: Variable = Variable {
    name: "KERNEL_REPLAY_STRATEGY",
    what: "how snapshots and restores move their bytes",
    values: &[
        ("auto", 0),
        ("copies", 1),
        ("scatter", 2),
        ("dirty", 3),
        ("dirty_blocks", 3),
        ("dirty-blocks", 3),
    ],
    default: 0,
};

/// `KERNEL_REPLAY_COPY`: 1 batched copies, 0 one blocking copy per region.
pub(crate) const COPY: Variable = Variable {
    name: "KERNEL_REPLAY_COPY",
    what: "whether copies are batched",
    values: &[("batched", 1), ("blocking", 0)],
    default: 1,
};

/// `KERNEL_REPLAY_VERIFY`: 1 every restore checked byte for byte.
pub(crate) const VERIFY: Variable = Variable {
    name: "KERNEL_REPLAY_VERIFY",
    what: "verify mode",
    values: &[
        ("1", 1),
        ("on", 1),
        ("true", 1),
        ("yes", 1),
        ("0", 0),
        ("off", 0),
        ("false", 0),
        ("no", 0),
    ],
    default: 0,
};

/// `KERNEL_REPLAY_HOST_MEMORY`: codes of `HostMemory`.
pub(crate) const HOST_MEMORY: Variable = Variable {
    name: "KERNEL_REPLAY_HOST_MEMORY",
    what: "which host memory granted to an agent its snapshots capture",
    values: &[("auto", 0), ("all", 1), ("registered", 2), ("off", 3)],
    default: 0,
};

/// `KERNEL_REPLAY_COVERAGE`: codes of `Coverage`.
pub(crate) const COVERAGE: Variable = Variable {
    name: "KERNEL_REPLAY_COVERAGE",
    what: "what a snapshot does when memory its agent can write is not covered",
    values: &[("warn", 0), ("strict", 1)],
    default: 0,
};

/// `KERNEL_REPLAY_LOG`: the most verbose level logged (0 off .. 5 trace).
pub(crate) const LOG: Variable = Variable {
    name: "KERNEL_REPLAY_LOG",
    what: "the log level",
    values: &[
        ("off", 0),
        ("error", 1),
        ("warn", 2),
        ("warning", 2),
        ("info", 3),
        ("debug", 4),
        ("trace", 5),
        ("0", 0),
        ("1", 1),
        ("2", 2),
        ("3", 3),
        ("4", 4),
        ("5", 5),
    ],
    default: 2,
};

/// `KERNEL_REPLAY_CODE_OBJECT`: a code object file the device kernels load
/// instead of the embedded ones (a regular file of at most
/// [`CODE_OBJECT_MAX_BYTES`]).
pub(crate) const CODE_OBJECT: Variable = Variable {
    name: "KERNEL_REPLAY_CODE_OBJECT",
    what: "a code object file for the library's kernels",
    values: &[],
    default: 0,
};

/// `KERNEL_REPLAY_INSTALLED`: the library's own marker of which copy
/// installed its wrappers (`memory_tracker/process_marker.rs`), not a
/// setting.
pub(crate) const INSTALLED: Variable = Variable {
    name: "KERNEL_REPLAY_INSTALLED",
    what: "the process's install marker (written by the library)",
    values: &[],
    default: 0,
};

/// Every variable the library reads.
pub(crate) const VARIABLES: &[&Variable] = &[
    &STORAGE,
    &STRATEGY,
    &COPY,
    &VERIFY,
    &HOST_MEMORY,
    &COVERAGE,
    &LOG,
    &CODE_OBJECT,
    &INSTALLED,
];

/// The prefix of every variable of the library.
const PREFIX: &str = "KERNEL_REPLAY_";

/// The largest code object file read: the library's kernels compile to a few
/// hundred KiB for every AMD target; anything far larger is not one.
pub(crate) const CODE_OBJECT_MAX_BYTES: u64 = 64 << 20;

impl Variable {
    /// The code `text` stands for, if the variable accepts it.
    pub fn parse(&self, text: &str) -> Option<u8> {
        let text = text.trim();
        self.values
            .iter()
            .find(|(spelling, _)| spelling.eq_ignore_ascii_case(text))
            .map(|&(_, code)| code)
    }

    /// The spellings it accepts, for messages: "auto, device, ...".
    pub fn accepted(&self) -> String {
        let mut list = String::new();
        for (i, (spelling, _)) in self.values.iter().enumerate() {
            if i > 0 {
                list.push_str(", ");
            }
            list.push_str(spelling);
        }
        list
    }

    /// What a value of the variable means: its code, or the default and the
    /// warning to give (`None`: unset).
    pub fn resolve(&self, value: Option<&OsStr>) -> (u8, Option<String>) {
        let Some(value) = value else {
            return (self.default, None);
        };
        match value.to_str().and_then(|text| self.parse(text)) {
            Some(code) => (code, None),
            None => (
                self.default,
                Some(format!(
                    "{}={:?} is not understood ({}: one of {}); the default is used",
                    self.name,
                    value,
                    self.what,
                    self.accepted()
                )),
            ),
        }
    }

    /// The code the environment gives, warning about a value not understood.
    pub fn read(&self) -> u8 {
        let value = std::env::var_os(self.name);
        let (code, warning) = self.resolve(value.as_deref());
        if let Some(warning) = warning {
            log::warn!("{warning}");
        }
        code
    }
}

/// A setting whose code is set through the API or, failing that, read once
/// from its variable.
pub(crate) struct Setting {
    variable: &'static Variable,
    code: AtomicU8,
}

const UNRESOLVED: u8 = u8::MAX;

impl Setting {
    /// Unresolved: the first [`Setting::code`] reads the variable.
    pub const fn new(variable: &'static Variable) -> Self {
        Setting {
            variable,
            code: AtomicU8::new(UNRESOLVED),
        }
    }

    /// The code in force.
    pub fn code(&self) -> u8 {
        match self.code.load(Ordering::Acquire) {
            UNRESOLVED => {
                let from_environment = self.variable.read();
                // A concurrent set wins over the environment.
                let _ = self.code.compare_exchange(
                    UNRESOLVED,
                    from_environment,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
                self.code.load(Ordering::Acquire)
            }
            code => code,
        }
    }

    /// Sets the code; the variable is not read any more.
    pub fn set(&self, code: u8) {
        self.code.store(code, Ordering::Release);
    }
}

/// The names in `names` that start with the library's prefix but are not
/// one of its variables.
pub(crate) fn unknown_variables<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    names
        .into_iter()
        .filter(|name| name.starts_with(PREFIX) && !VARIABLES.iter().any(|v| v.name == *name))
        .collect()
}

/// Warns once about variables of the library's prefix it does not know (a
/// misspelt setting would otherwise be silently ignored).
pub(crate) fn warn_about_unknown_variables() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let names: Vec<String> = std::env::vars_os()
            .filter_map(|(name, _)| name.into_string().ok())
            .collect();
        for name in unknown_variables(names.iter().map(String::as_str)) {
            let known: Vec<&str> = VARIABLES.iter().map(|v| v.name).collect();
            log::warn!(
                "{name} is not a kernel-replay setting and is ignored (known: {})",
                known.join(", ")
            );
        }
    });
}

/// Reads a file the library is pointed at by a variable, defensively: only
/// a regular file of at most `limit` bytes (opened without blocking, so a
/// FIFO or a device node cannot hang the program), into memory allocated
/// fallibly (a huge file cannot abort it).
pub(crate) fn read_regular_file(path: &OsStr, limit: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    /// O_NONBLOCK (Linux): opening a FIFO for reading does not wait for a
    /// writer; a regular file is read as usual.
    const O_NONBLOCK: i32 = 0o4000;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK)
        .open(path)
        .map_err(|e| e.to_string())?;
    let metadata = file.metadata().map_err(|e| e.to_string())?;
    if !metadata.is_file() {
        return Err("not a regular file".into());
    }
    if metadata.len() > limit {
        return Err(format!(
            "{} bytes, more than the {limit} read at most",
            metadata.len()
        ));
    }
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(metadata.len() as usize)
        .map_err(|_| "no memory to read it".to_string())?;
    // A file that grew since the check is read up to the limit only.
    let read = file
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if read as u64 > limit {
        return Err(format!("grew past the {limit} bytes read at most"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variable_accepts_its_spellings_and_warns_on_anything_else() {
        for variable in VARIABLES.iter().filter(|v| !v.values.is_empty()) {
            assert_eq!(variable.resolve(None), (variable.default, None));
            for &(spelling, code) in variable.values {
                for text in [
                    spelling.to_string(),
                    format!(" {} ", spelling.to_uppercase()),
                ] {
                    assert_eq!(
                        variable.resolve(Some(OsStr::new(&text))),
                        (code, None),
                        "{}={text}",
                        variable.name
                    );
                }
            }
            for bad in ["garbage", "", "auto2", "-1"] {
                let (code, warning) = variable.resolve(Some(OsStr::new(bad)));
                assert_eq!(code, variable.default, "{}={bad}", variable.name);
                let warning = warning.unwrap_or_default();
                assert!(warning.contains(variable.name), "{warning}");
                assert!(warning.contains(&variable.accepted()), "{warning}");
            }
            assert!(!variable.accepted().is_empty());
        }
    }

    #[test]
    fn a_value_that_is_not_unicode_is_not_understood() {
        use std::os::unix::ffi::OsStrExt;
        let (code, warning) = STORAGE.resolve(Some(OsStr::from_bytes(b"dev\xffice")));
        assert_eq!(code, STORAGE.default);
        assert!(warning.is_some_and(|w| w.contains("KERNEL_REPLAY_STORAGE")));
    }

    #[test]
    fn names_of_the_prefix_not_declared_are_unknown() {
        let names = [
            "KERNEL_REPLAY_STORAGE",
            "KERNEL_REPLAY_STORGE",
            "KERNEL_REPLAY_INSTALLED",
            "HOME",
            "KERNEL_REPLAY_",
        ];
        assert_eq!(
            unknown_variables(names),
            ["KERNEL_REPLAY_STORGE", "KERNEL_REPLAY_"]
        );
        let names: Vec<&str> = VARIABLES.iter().map(|v| v.name).collect();
        assert!(
            unknown_variables(names).is_empty(),
            "every declared name is known"
        );
    }

    #[test]
    fn a_set_code_wins_and_the_variable_is_read_once() {
        static NEVER: Variable = Variable {
            name: "KERNEL_REPLAY_TEST_NEVER_SET_4b1d",
            what: "a test",
            values: &[("a", 1)],
            default: 7,
        };
        let setting = Setting::new(&NEVER);
        assert_eq!(setting.code(), 7, "unset: the default");
        setting.set(1);
        assert_eq!(setting.code(), 1);
    }

    #[test]
    fn only_a_regular_file_under_the_limit_is_read() {
        let dir = std::env::temp_dir().join(format!("kr-settings-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("object");
        std::fs::write(&file, [1u8, 2, 3, 4]).unwrap();
        assert_eq!(
            read_regular_file(file.as_os_str(), 4).unwrap(),
            [1, 2, 3, 4]
        );
        assert!(read_regular_file(file.as_os_str(), 3)
            .unwrap_err()
            .contains("more than"));
        assert!(read_regular_file(dir.as_os_str(), 1 << 20)
            .unwrap_err()
            .contains("not a regular file"));
        // A device node and a FIFO: neither read nor waited on.
        assert!(read_regular_file(OsStr::new("/dev/zero"), 1 << 20)
            .unwrap_err()
            .contains("not a regular file"));
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            assert!(read_regular_file(fifo.as_os_str(), 1 << 20)
                .unwrap_err()
                .contains("not a regular file"));
        }
        assert!(read_regular_file(dir.join("missing").as_os_str(), 1).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

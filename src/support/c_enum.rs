//! Enums with a C view, written once.
//!
//! [`c_enum!`](crate::c_enum) defines an idiomatic Rust enum (`#[repr(u32)]`,
//! explicit codes) together with what the C header needs to declare it: the
//! C type name, the prefix of its constants and every variant's code, name
//! and documentation. The header generator (`tests/header.rs`) renders the C
//! `typedef enum` from that description, so a new variant — a decline
//! reason, a storage tier — is one line here and nowhere else.

/// What the C header declares for one enum.
#[derive(Debug, Clone, Copy)]
pub struct CEnumDecl {
    /// The Rust name (the header generator tells cbindgen to use `c_name`
    /// for it).
    pub rust_name: &'static str,
    /// The C type name (`kr_decline_reason_t`).
    pub c_name: &'static str,
    /// The type's documentation.
    pub doc: &'static [&'static str],
    /// The C constants: (name, code, documentation), in code order.
    pub constants: &'static [CConstant],
}

/// One constant of a C enum.
#[derive(Debug, Clone, Copy)]
pub struct CConstant {
    /// The full C name (`KR_DECLINE_NONE`).
    pub name: &'static str,
    /// Its value.
    pub code: u32,
    /// Its documentation, one entry per line.
    pub doc: &'static [&'static str],
}

impl CEnumDecl {
    /// The declaration as the C header carries it.
    pub fn render(&self) -> String {
        let mut out = String::new();
        doc_comment(&mut out, "", self.doc);
        out.push_str(&format!("typedef enum {} {{\n", self.c_name));
        for constant in self.constants {
            doc_comment(&mut out, "  ", constant.doc);
            out.push_str(&format!("  {} = {},\n", constant.name, constant.code));
        }
        out.push_str(&format!("}} {};\n", self.c_name));
        out
    }
}

/// A Doxygen comment, as cbindgen writes the others.
fn doc_comment(out: &mut String, indent: &str, lines: &[&str]) {
    if lines.is_empty() {
        return;
    }
    out.push_str(&format!("{indent}/**\n"));
    for line in lines {
        let line = line.strip_prefix(' ').unwrap_or(line);
        if line.is_empty() {
            out.push_str(&format!("{indent} *\n"));
        } else {
            out.push_str(&format!("{indent} * {line}\n"));
        }
    }
    out.push_str(&format!("{indent} */\n"));
}

/// Defines a `#[repr(u32)]` enum and its C view (see the module docs).
///
/// ```text
/// c_enum! {
///     /// Where snapshots keep their copies.
///     pub enum Tier: "kr_storage_tier_t", "KR_TIER_" {
///         /// Device memory.
///         Device = 0 => "DEVICE",
///     }
/// }
/// ```
///
/// A C-only constant (a value the Rust enum has no variant for, such as
/// `KR_DECLINE_NONE`) goes in a `c_only [ ... ]` list after the prefix.
#[macro_export]
#[doc(hidden)]
macro_rules! c_enum {
    (
        $(#[doc = $doc:literal])*
        $vis:vis enum $name:ident : $c_name:literal, $prefix:literal
        $(, c_only [ $( $(#[doc = $c_doc:literal])* $c_const:literal = $c_code:literal ),* $(,)? ])?
        {
            $(
                $(#[doc = $variant_doc:literal])*
                $variant:ident = $code:literal => $suffix:literal,
            )+
        }
    ) => {
        $(#[doc = $doc])*
        #[repr(u32)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[doc = $variant_doc])* $variant = $code, )+
        }

        impl $name {
            /// Every variant, in code order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The C constant's value.
            pub const fn code(self) -> u32 {
                self as u32
            }

            /// The variant with this C code, if any (codes from C are
            /// checked, never trusted).
            pub const fn from_code(code: u32) -> Option<Self> {
                match code {
                    $($code => Some($name::$variant),)+
                    _ => None,
                }
            }

            /// What the C header declares for this enum.
            #[doc(hidden)]
            pub const C_DECL: $crate::support::c_enum::CEnumDecl = $crate::support::c_enum::CEnumDecl {
                rust_name: stringify!($name),
                c_name: $c_name,
                doc: &[$($doc),*],
                constants: &[
                    $($( $crate::support::c_enum::CConstant {
                        name: concat!($prefix, $c_const),
                        code: $c_code,
                        doc: &[$($c_doc),*],
                    }, )*)?
                    $( $crate::support::c_enum::CConstant {
                        name: concat!($prefix, $suffix),
                        code: $code,
                        doc: &[$($variant_doc),*],
                    }, )+
                ],
            };
        }
    };
}

#[cfg(test)]
mod tests {
    crate::c_enum! {
        /// A test enum.
        enum Sample: "kr_sample_t", "KR_SAMPLE_", c_only [
            /// Nothing.
            "NONE" = 0,
        ] {
            /// The first.
            ///
            /// Second paragraph.
            First = 1 => "FIRST",
            Second = 7 => "SECOND",
        }
    }

    #[test]
    fn codes_round_trip_and_unknown_codes_are_refused() {
        assert_eq!(Sample::ALL, &[Sample::First, Sample::Second]);
        for &v in Sample::ALL {
            assert_eq!(Sample::from_code(v.code()), Some(v));
        }
        assert_eq!(Sample::from_code(0), None);
        assert_eq!(Sample::from_code(2), None);
    }

    #[test]
    fn the_c_declaration_has_every_constant_with_its_docs() {
        let text = Sample::C_DECL.render();
        assert_eq!(
            text,
            "/**\n * A test enum.\n */\ntypedef enum kr_sample_t {\n  /**\n   * Nothing.\n   */\n  \
             KR_SAMPLE_NONE = 0,\n  /**\n   * The first.\n   *\n   * Second paragraph.\n   */\n  \
             KR_SAMPLE_FIRST = 1,\n  KR_SAMPLE_SECOND = 7,\n} kr_sample_t;\n"
        );
    }
}

//! A header's `cwd` must be an absolute path by the rules of the platform
//! the library runs on, as the agents that write the logs judge it
//! (Node's `path.isAbsolute`): on Windows a log written there names its
//! directory `C:\work\project`, which elsewhere is not absolute.

use crate::json::JsString;

/// Whether `cwd` is an absolute path on the platform the library runs on.
pub fn is_absolute(cwd: &JsString) -> bool {
    // The rules read at most the first three code units.
    let mut units = [0u16; 3];
    let mut n = 0;
    for (slot, unit) in units.iter_mut().zip(cwd.code_units_u16()) {
        *slot = unit;
        n += 1;
    }
    let start = &units[..n];
    if cfg!(windows) {
        is_absolute_windows(start)
    } else {
        is_absolute_posix(start)
    }
}

/// POSIX: the path starts with `/`.
fn is_absolute_posix(start: &[u16]) -> bool {
    start.first() == Some(&u16::from(b'/'))
}

/// Windows: the path starts with a separator (`/` or `\`: rooted, or a
/// UNC path), or with a drive letter, `:` and a separator. `C:work` is
/// relative to the drive's current directory, so not absolute.
fn is_absolute_windows(start: &[u16]) -> bool {
    let separator = |u: &u16| *u == u16::from(b'/') || *u == u16::from(b'\\');
    match start {
        [first, ..] if separator(first) => true,
        [drive, colon, sep, ..] => {
            u8::try_from(*drive).is_ok_and(|d| d.is_ascii_alphabetic())
                && *colon == u16::from(b':')
                && separator(sep)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(s: &str) -> Vec<u16> {
        s.encode_utf16().take(3).collect()
    }

    #[test]
    fn posix_paths_are_absolute_from_the_root_only() {
        for yes in ["/", "/home/me/project", "//server"] {
            assert!(is_absolute_posix(&units(yes)), "{yes}");
        }
        for no in [
            "",
            "project",
            "./project",
            "C:\\work",
            "C:/work",
            "\\work",
            "~",
        ] {
            assert!(!is_absolute_posix(&units(no)), "{no}");
        }
    }

    #[test]
    fn windows_paths_are_absolute_from_a_root_a_drive_or_a_share() {
        for yes in [
            "C:\\work\\project",
            "c:/work",
            "Z:\\",
            "\\work",
            "/work",
            "\\\\server\\share\\project",
        ] {
            assert!(is_absolute_windows(&units(yes)), "{yes}");
        }
        for no in [
            "",
            "C:",
            "C:work",
            "work\\project",
            "1:\\work",
            "é:\\work",
            ".\\x",
        ] {
            assert!(!is_absolute_windows(&units(no)), "{no}");
        }
    }

    #[test]
    fn the_running_platform_decides() {
        let drive = JsString::from_str("C:\\work\\project");
        let root = JsString::from_str("/home/me/project");
        assert!(is_absolute(&root));
        assert_eq!(is_absolute(&drive), cfg!(windows));
    }
}

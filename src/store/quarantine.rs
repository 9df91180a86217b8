//! Quarantine: whatever an open or a repair cuts from a stored log (a torn
//! tail, a zero-filled tail, a salvaged frame, undecodable rows) is first
//! copied into a file beside the log, written and synced with its
//! directory before the cut, so no byte leaves storage without a copy.
//!
//! A copy is named after the log and the place of the cut:
//! `<log file name>.cut-<at>` (`session.jsonl.zstd.cut-18230`, or for a
//! SQLite session `<database>.cut-<session>-<seq>`), with `-<n>` added when
//! an earlier copy of the same place holds other bytes. At most
//! [`MAX_COPIES`] copies are kept beside one log: a cut that would make
//! one more is refused (`quarantine.full`) until the host has looked at
//! them and removed some. Nothing here ever removes a copy.

use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use super::platform;

use crate::error::{Error, Result, Status};
use crate::rule::Rule;

/// Copies of cut tails kept beside one log at most.
pub const MAX_COPIES: usize = 16;

fn io_error(rule: Rule, path: &Path, e: &std::io::Error) -> Error {
    Error::new(Status::Io, rule, format!("{}: {e}", path.display())).with_source(clone_io(e))
}

fn clone_io(e: &std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), e.to_string())
}

/// The prefix every copy of `log`'s cuts starts with.
fn prefix(log: &str) -> String {
    format!("{log}.cut-")
}

/// The copies kept in `dir` for the log named `log` (a file name in
/// `dir`), oldest first.
pub fn list(dir: &Path, log: &str) -> Result<Vec<PathBuf>> {
    let prefix = prefix(log);
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error(Rule::IoReaddir, dir, &e)),
    };
    let mut copies = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_error(Rule::IoReaddir, dir, &e))?;
        let name = entry.file_name();
        if !name.to_str().is_some_and(|n| n.starts_with(&prefix)) {
            continue;
        }
        let meta = entry
            .metadata()
            .map_err(|e| io_error(Rule::IoStat, &entry.path(), &e))?;
        if meta.is_file() {
            copies.push((meta.modified().ok(), entry.path()));
        }
    }
    copies.sort();
    Ok(copies.into_iter().map(|(_, p)| p).collect())
}

/// Keep `bytes`, cut at `at` from the log `dir/log`, in a new file beside
/// it (mode 0600 on Unix, a DACL for this user alone on Windows; never
/// through a link), synced with the directory: call
/// before the cut. `label` names the place of the cut in the file name
/// (the offset, or `<session>-<seq>`). A copy of the same place holding the
/// same bytes (left by a repair that failed after its copy) is reused.
pub fn keep(dir: &Path, log: &str, label: &str, bytes: &[u8]) -> Result<PathBuf> {
    let existing = list(dir, log)?;
    let base = format!("{}{label}", prefix(log));
    for n in 0.. {
        let name = if n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        };
        let path = dir.join(&name);
        if existing.contains(&path) {
            if std::fs::read(&path).is_ok_and(|held| held == bytes) {
                return Ok(path);
            }
            continue;
        }
        if existing.len() >= MAX_COPIES {
            return Err(Error::new(
                Status::Io,
                Rule::QuarantineFull,
                format!(
                    "{}: {} copies of cut tails are kept beside this log already ({}...); \
                     look at them (dsh-session verify names them), remove the ones no longer \
                     needed and open the session again",
                    dir.join(log).display(),
                    existing.len(),
                    prefix(log)
                ),
            ));
        }
        let mut file = match platform::create_private(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io_error(Rule::IoOpen, &path, &e)),
        };
        file.write_all(bytes)
            .map_err(|e| io_error(Rule::IoWrite, &path, &e))?;
        file.sync_all()
            .map_err(|e| io_error(Rule::IoFsync, &path, &e))?;
        sync_dir(dir)?;
        return Ok(path);
    }
    unreachable!("an unbounded search ends by returning")
}

/// Sync the directory `dir` (Unix: a failed open is `io.open`, a failed
/// sync `io.fsync`; Windows: [`platform::fsync_dir`]).
#[cfg(unix)]
fn sync_dir(dir: &Path) -> Result<()> {
    let d = std::fs::File::open(dir).map_err(|e| io_error(Rule::IoOpen, dir, &e))?;
    d.sync_all().map_err(|e| io_error(Rule::IoFsync, dir, &e))
}

#[cfg(not(unix))]
fn sync_dir(dir: &Path) -> Result<()> {
    platform::fsync_dir(dir).map_err(|e| io_error(Rule::IoFsync, dir, &e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("dsh-quarantine-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_copy_is_named_after_the_log_and_the_cut_and_reused_for_the_same_bytes() {
        let d = temp("names");
        let a = keep(&d, "session.jsonl", "10", b"abc").unwrap();
        assert_eq!(a, d.join("session.jsonl.cut-10"));
        assert_eq!(keep(&d, "session.jsonl", "10", b"abc").unwrap(), a);
        let b = keep(&d, "session.jsonl", "10", b"xyz").unwrap();
        assert_eq!(b, d.join("session.jsonl.cut-10-1"));
        assert_eq!(std::fs::read(&b).unwrap(), b"xyz");
        #[cfg(unix)]
        {
            let mode = std::os::unix::fs::PermissionsExt::mode(
                &std::fs::metadata(&b).unwrap().permissions(),
            );
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(list(&d, "session.jsonl").unwrap().len(), 2);
        assert!(list(&d, "other.jsonl").unwrap().is_empty());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn copies_are_bounded_and_never_removed() {
        let d = temp("bound");
        for i in 0..MAX_COPIES {
            keep(&d, "l", &i.to_string(), b"x").unwrap();
        }
        let e = keep(&d, "l", "99", b"x").unwrap_err();
        assert_eq!((e.status, e.rule), (Status::Io, Rule::QuarantineFull));
        assert_eq!(list(&d, "l").unwrap().len(), MAX_COPIES);
        // A copy already kept is still found.
        assert!(keep(&d, "l", "3", b"x").is_ok());
        let _ = std::fs::remove_dir_all(&d);
    }
}

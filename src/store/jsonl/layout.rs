//! On-disk layout of a JSONL root (docs/formats.md §3.1): path encodings,
//! lookup of a session's log across project directories, and the
//! encoding / legacy-layout / duplicate-id refusals.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::faults::{self, Point};
use super::Compression;
use crate::error::{Error, Result, Status};
use crate::json::{JsString, Value};
use crate::rule::Rule;
use crate::store::platform::{self, Meta};

/// The project directory of a header without `cwd`.
pub const NO_CWD_DIR: &str = "_no-cwd";

/// Longest slug kept by [`project_key`] (before the `--` wrapping).
const SLUG_MAX: usize = 251;

fn literal(unit: u16) -> Option<char> {
    let c = char::from_u32(u32::from(unit)).filter(char::is_ascii)?;
    (c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')).then_some(c)
}

fn empty_segment(what: &str) -> Error {
    Error::invalid_argument(
        Rule::JsonlEmptySegment,
        format!("cannot encode an empty {what}"),
    )
}

/// `encodeSegment(id)`: the session directory name. Injective over UTF-16
/// strings; refuses `""` (`jsonl.empty-segment`).
pub fn encode_segment(id: &JsString) -> Result<String> {
    if id.is_empty() {
        return Err(empty_segment("path segment"));
    }
    if id == "." {
        return Ok("~002E".to_string());
    }
    if id == ".." {
        return Ok("~002E~002E".to_string());
    }
    let mut out = String::with_capacity(id.len_wtf8());
    for unit in id.code_units_u16() {
        match literal(unit) {
            Some(c) => out.push(c),
            None => {
                let _ = write!(out, "~{unit:04X}");
            }
        }
    }
    Ok(out)
}

/// `projectKey(cwd)`: the project directory name of a working directory.
pub fn project_key(cwd: &JsString) -> Result<String> {
    if cwd.is_empty() {
        return Err(empty_segment("project path"));
    }
    let mut slug = String::with_capacity(cwd.len_wtf8());
    let mut in_separator = false;
    for unit in cwd.code_units_u16() {
        if unit == u16::from(b'/') || unit == u16::from(b'\\') || unit == u16::from(b':') {
            if !in_separator {
                slug.push('-');
                in_separator = true;
            }
            continue;
        }
        in_separator = false;
        match literal(unit) {
            Some(c) => slug.push(c),
            None => {
                let _ = write!(slug, "~{unit:04X}");
            }
        }
    }
    let slug = slug.trim_start_matches('-');
    let slug = if slug.is_empty() { "root" } else { slug };
    // The slug is ASCII, so characters are bytes.
    let slug = &slug[..slug.len().min(SLUG_MAX)];
    Ok(format!("--{slug}--"))
}

/// The project directory of a header: `_no-cwd` or `projectKey(cwd)`.
/// An empty or non-string `cwd` names no directory (`jsonl.empty-segment`;
/// a read turns that into `jsonl.header-path-mismatch`).
pub fn project_dir_of(header: &Value) -> Result<String> {
    match header.as_object().and_then(|h| h.get("cwd")) {
        None => Ok(NO_CWD_DIR.to_string()),
        Some(cwd) => match cwd.as_js_str() {
            Some(cwd) => project_key(cwd),
            None => Err(Error::invalid_argument(
                Rule::JsonlEmptySegment,
                "cannot encode a non-string cwd as a project path",
            )),
        },
    }
}

/// The session id of a header as a JavaScript string (`""` when absent).
pub fn header_js_id(header: &Value) -> JsString {
    header
        .as_object()
        .and_then(|h| h.get("id"))
        .and_then(Value::as_js_str)
        .cloned()
        .unwrap_or_default()
}

/// The file name of a log in `compression`.
pub fn log_name(compression: Compression) -> &'static str {
    match compression {
        Compression::Zstd => "session.jsonl.zstd",
        Compression::None => "session.jsonl",
    }
}

fn other(compression: Compression) -> Compression {
    match compression {
        Compression::Zstd => Compression::None,
        Compression::None => Compression::Zstd,
    }
}

/// `io.*` for a filesystem failure on `path`.
pub fn io_error(rule: Rule, path: &Path, e: &io::Error) -> Error {
    let source = match e.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::new(e.kind(), e.to_string()),
    };
    Error::new(Status::Io, rule, format!("{}: {e}", path.display())).with_source(source)
}

/// How much of a log one read takes, and the most plain text one zstd
/// decoding step of a streaming read yields. Small in tests, so that reads
/// cut frames, lines and characters.
pub const READ_BLOCK: usize = if cfg!(test) { 4096 } else { 1 << 20 };

/// One `read` of `r` into `buf`, retried when interrupted; the number of
/// bytes read (0 at the end). A failure is `io.read` on `path`.
pub fn fill_from(r: &mut impl io::Read, buf: &mut [u8], path: &Path) -> Result<usize> {
    loop {
        match r.read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_error(Rule::IoRead, path, &e)),
        }
    }
}

/// True for "does not exist" (`ENOENT`). A non-directory where a
/// directory should be (`ENOTDIR`) is a fault of the store's tree, not an
/// absence (docs/errors.md `io.*`).
pub fn is_absent(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound
}

/// `jsonl.link`: a symbolic link (on Windows any reparse point) where the
/// store keeps its own entries. Nothing inside a store's root is reached
/// through a link, so a link planted there can lead no write, read or
/// delete outside the store.
pub fn link_refused(path: &Path) -> Error {
    Error::new(
        Status::Io,
        Rule::JsonlLink,
        format!(
            "{} is {}; the store never follows links inside its root (remove it)",
            path.display(),
            platform::LINK_KIND
        ),
    )
}

/// Metadata of the entry `path` inside the root, `None` when absent; a
/// symbolic link (on Windows any reparse point) there is refused
/// (`jsonl.link`), never followed.
pub fn stat(path: &Path) -> Result<Option<Meta>> {
    entry(absent_as_none(platform::lstat(path), path)?, path)
}

/// [`stat`] at the fault injection point `point`.
pub fn stat_at(point: Point, path: &Path) -> Result<Option<Meta>> {
    let m = absent_as_none(
        faults::hit(point, path).and_then(|()| platform::lstat(path)),
        path,
    )?;
    entry(m, path)
}

fn entry(m: Option<Meta>, path: &Path) -> Result<Option<Meta>> {
    match m {
        Some(m) if m.is_link() => Err(link_refused(path)),
        m => Ok(m),
    }
}

fn absent_as_none(stat: io::Result<Meta>, path: &Path) -> Result<Option<Meta>> {
    match stat {
        Ok(m) => Ok(Some(m)),
        Err(e) if is_absent(&e) => Ok(None),
        Err(e) => Err(io_error(Rule::IoStat, path, &e)),
    }
}

/// Open the file `path` inside the root for reading, refusing to follow a
/// symbolic link in its last component (`O_NOFOLLOW`; on Windows a reparse
/// point; the directories on the way were checked by [`stat`] or
/// [`sub_dirs`]).
pub fn open_read(path: &Path) -> io::Result<fs::File> {
    platform::open_no_follow(fs::OpenOptions::new().read(true), path)
}

/// The sub-directories of `dir`; empty when `dir` is absent. A symbolic
/// link among them refuses (`jsonl.link`): it is never followed.
pub fn sub_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error(Rule::IoReaddir, dir, &e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_error(Rule::IoReaddir, dir, &e))?;
        let path = entry.path();
        if stat(&path)?.is_some_and(|m| m.is_dir()) {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// `jsonl.encoding-mismatch` when the session directory `dir` holds a log
/// of the other encoding.
pub fn check_encoding(dir: &Path, compression: Compression) -> Result<()> {
    let foreign = dir.join(log_name(other(compression)));
    if stat(&foreign)?.is_some() {
        return Err(Error::new(
            Status::SchemaMismatch,
            Rule::JsonlEncodingMismatch,
            format!(
                "artifact {} uses the other encoding; use a separate root or the matching compression mode",
                foreign.display()
            ),
        ));
    }
    Ok(())
}

/// True for the names of the old flat layout (`*.jsonl`, `*.jsonl.zstd`).
pub fn is_flat_log_name(name: &str) -> bool {
    name.ends_with(".jsonl") || name.ends_with(".jsonl.zstd")
}

/// `jsonl.legacy-layout` for the flat file `path`.
pub fn legacy_layout(path: &Path) -> Error {
    Error::new(
        Status::SchemaMismatch,
        Rule::JsonlLegacyLayout,
        format!(
            "artifact {} uses the unsupported flat-file layout",
            path.display()
        ),
    )
}

fn check_flat(project: &Path, segment: &str) -> Result<()> {
    for ext in ["jsonl", "jsonl.zstd"] {
        let flat = project.join(format!("{segment}.{ext}"));
        if stat(&flat)?.is_some_and(|m| m.is_file()) {
            return Err(legacy_layout(&flat));
        }
    }
    Ok(())
}

/// Root-wide encoding check (done once when the backend opens).
pub fn check_root_encoding(root: &Path, compression: Compression) -> Result<()> {
    for project in sub_dirs(root)? {
        for session in sub_dirs(&project)? {
            check_encoding(&session, compression)?;
        }
    }
    Ok(())
}

/// Find the log of the session whose directory name is `segment` in every
/// project directory: `None` when absent; `jsonl.duplicate-id` when it is
/// in several; encoding and flat-layout refusals on the way.
pub fn find_log(root: &Path, segment: &str, compression: Compression) -> Result<Option<PathBuf>> {
    let mut found: Option<PathBuf> = None;
    for project in sub_dirs(root)? {
        check_flat(&project, segment)?;
        let dir = project.join(segment);
        // A session directory that is a link refuses (`jsonl.link`).
        if stat(&dir)?.is_none() {
            continue;
        }
        check_encoding(&dir, compression)?;
        let log = dir.join(log_name(compression));
        if stat(&log)?.is_some_and(|m| m.is_file()) {
            match &found {
                // The same physical file reached through another name.
                Some(first) if same_file(first, &log)? => {}
                Some(_) => return Err(duplicate_id(segment)),
                None => found = Some(log),
            }
        }
    }
    Ok(found)
}

/// `jsonl.duplicate-id`.
pub fn duplicate_id(id: &str) -> Error {
    Error::new(
        Status::Corrupt,
        Rule::JsonlDuplicateId,
        format!("duplicate JSONL session id {id} in multiple project directories"),
    )
}

/// `<dev>:<ino>:<size>:<mtimeNs>:<ctimeNs>` (docs/formats.md §7; on
/// Windows the volume and file index, and the last-write and change times).
pub fn revision_of(meta: &Meta) -> String {
    meta.revision()
}

/// The file identity (device, inode) a [`revision_of`] names.
pub fn file_of_revision(revision: &str) -> Option<super::fsio::FileId> {
    let mut parts = revision.split(':');
    let dev = parts.next()?.parse().ok()?;
    let ino = parts.next()?.parse().ok()?;
    Some((dev, ino))
}

/// True when `a` and `b` name the same physical file.
pub fn same_file(a: &Path, b: &Path) -> Result<bool> {
    match (stat(a)?, stat(b)?) {
        (Some(x), Some(y)) => Ok(x.id() == y.id()),
        _ => Ok(false),
    }
}

/// The session ids of a JSONL root found by walking its directories, without
/// a backend (the CLI's `verify` finds what `list` skips this way)
/// (`<root>/<project>/<session-dir>/session.jsonl[.zstd]`), whichever
/// encoding and whatever their header holds. Session directory names are
/// decoded back from `encodeSegment` (docs/formats.md §3.1).
pub fn session_ids(root: &Path) -> Vec<String> {
    let mut ids = Vec::new();
    let mut seen = HashSet::new();
    for project in sorted_dirs(root) {
        for dir in sorted_dirs(&project) {
            let has_log = [log_name(Compression::None), log_name(Compression::Zstd)]
                .iter()
                .any(|n| dir.join(n).is_file());
            let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if let Some(id) = decode_segment(name).filter(|_| has_log) {
                if seen.insert(id.clone()) {
                    ids.push(id);
                }
            }
        }
    }
    ids
}

/// Every log file of session `id` under a JSONL root (one, normally).
pub fn log_paths(root: &Path, id: &str) -> Vec<PathBuf> {
    let Ok(segment) = encode_segment(&JsString::from_str(id)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for project in sorted_dirs(root) {
        for name in [log_name(Compression::Zstd), log_name(Compression::None)] {
            let log = project.join(&segment).join(name);
            if log.is_file() {
                out.push(log);
            }
        }
    }
    out
}

fn sorted_dirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        // Links are never followed (the backend reports them, `jsonl.link`).
        .filter(|p| platform::lstat(p).is_ok_and(|m| m.is_dir()))
        .collect();
    out.sort();
    out
}

/// The id a session directory name encodes (`~XXXX` = one UTF-16 code
/// unit); `None` when the name is not an `encodeSegment` output.
pub fn decode_segment(name: &str) -> Option<String> {
    let bytes = name.as_bytes();
    let mut units: Vec<u16> = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'~' {
            let hex = name.get(i + 1..i + 5)?;
            units.push(u16::from_str_radix(hex, 16).ok()?);
            i += 5;
        } else if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            units.push(u16::from(b));
            i += 1;
        } else {
            return None;
        }
    }
    if units.is_empty() {
        return None;
    }
    Some(JsString::from_utf16(&units).to_string_lossy())
}

/// The encoding of the logs under a JSONL root: raw when every log found
/// is `session.jsonl` (or a flat `*.jsonl`), zstd otherwise (also when there
/// is none).
pub fn detect_compression(root: &Path) -> Compression {
    let mut raw = false;
    let Ok(projects) = std::fs::read_dir(root) else {
        return Compression::Zstd;
    };
    for project in projects.flatten() {
        let Ok(entries) = std::fs::read_dir(project.path()) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".jsonl.zstd") || path.join(log_name(Compression::Zstd)).exists() {
                return Compression::Zstd;
            }
            raw |= name.ends_with(".jsonl") || path.join(log_name(Compression::None)).exists();
        }
    }
    if raw {
        Compression::None
    } else {
        Compression::Zstd
    }
}

#[cfg(test)]
mod walk_tests {
    use super::*;

    #[test]
    fn segments_decode_back() {
        for id in ["demo", "a/b~c", ".", "..", "é x"] {
            let seg = encode_segment(&JsString::from_str(id)).unwrap();
            assert_eq!(decode_segment(&seg).as_deref(), Some(id));
        }
        assert_eq!(decode_segment("a b"), None);
        assert_eq!(decode_segment("~00"), None);
    }
}

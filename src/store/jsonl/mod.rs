//! The JSONL backend (docs/formats.md §3): one append-only log per session
//! at `<root>/<project-dir>/<session-dir>/session.jsonl[.zstd]`, a header
//! line followed by storage records (events or packed chunk rows), plain
//! or as one checksummed Zstandard frame per batch.

mod append;
mod batch;
mod compact;
mod faults;
mod fsio;
mod group;
mod header;
mod layout;
mod pipeline;
mod range;
mod read;
mod reads;
mod scan;
mod stream;
mod zstd_frames;

#[cfg(test)]
#[path = "tests/round_trip.rs"]
mod tests;
#[cfg(test)]
#[path = "tests/compact.rs"]
mod tests_compact;
#[cfg(test)]
#[path = "tests/crash.rs"]
mod tests_crash;
#[cfg(test)]
#[path = "tests/faults.rs"]
mod tests_faults;
#[cfg(test)]
#[path = "tests/layout.rs"]
mod tests_layout;
#[cfg(test)]
#[path = "tests/scan_paths.rs"]
mod tests_scan_paths;
#[cfg(all(test, windows))]
#[path = "tests/windows.rs"]
mod tests_windows;

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::backend::{Backend, Batch, Cut, Detached, Listed, Loaded, RangeReads, Torn, TornAt};
use super::writer::Hurry;
use crate::engine::Event;
use crate::error::{Error, Result, Status};
use crate::json::{JsString, Value};
use crate::rule::Rule;

pub use header::header_line;
pub use layout::{
    decode_segment, detect_compression, encode_segment, log_paths, project_key, session_ids,
};

/// Open append handles kept at most.
const HANDLES_KEPT: usize = 64;

/// The physical encoding of a root's logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// `session.jsonl.zstd`: one checksummed Zstandard frame per batch.
    Zstd,
    /// `session.jsonl`: plain text.
    None,
}

/// What the backend remembers about one session's log.
#[derive(Debug)]
struct LogState {
    /// Where the log lives.
    path: PathBuf,
    /// An open append handle, kept between appends.
    file: Option<File>,
    /// The next seq the log expects, when known.
    next: Option<u64>,
    /// The size a failed append must still be cut back to (its rollback
    /// failed too): see [`fsio::append_durable`].
    rollback: Option<u64>,
    /// The frames at the log's end a merge may take (zstd).
    tail: compact::Tail,
    /// A merge renamed a new file into place whose directory entry is not
    /// durable yet: the next append makes it so before writing.
    dir_unsynced: bool,
    /// An append of this log runs detached (its handle and rollback point
    /// are in the [`append::AppendJob`]): the state is kept, and no merge
    /// touches the log, until it is finished.
    in_flight: bool,
}

/// Session logs under one root directory, held exclusively by this backend.
#[derive(Debug)]
pub struct JsonlBackend {
    root: PathBuf,
    compression: Compression,
    /// The root directory, flocked for the backend's life (a reader,
    /// `"readOnly": true`, holds no lock).
    _lock: Option<File>,
    /// How logs are read: [`read::Reading::Prefix`] for a reader beside the
    /// writer, which never writes.
    reading: read::Reading,
    /// Known logs by session directory name.
    logs: HashMap<String, LogState>,
    /// Resync points of the logs read, by session directory name, so a
    /// windowed session's old events are read without reading the file.
    marks: HashMap<String, range::Marks>,
    /// Where the last range read stopped, with its session directory
    /// name: the next read of that log continues from it (one at a time,
    /// so windowed sessions cost one open file and its buffers at most).
    cursor: Option<(String, range::Cursor)>,
    scratch: batch::Scratch,
    /// The scratches of the threads a group write runs appends on.
    scratches: Vec<batch::Scratch>,
    /// The writer's count of waiting flushes (see [`JsonlBackend::workers`]).
    hurry: Option<Arc<Hurry>>,
    /// Logs this backend linked into place whose publish then failed (the
    /// directory's fsync), by session directory name: the file's identity
    /// and how many events it holds. The next materialize of the session
    /// finishes that publish instead of refusing the file as another's.
    half_published: HashMap<String, (fsio::FileId, u64)>,
    /// Logs whose small frames are due to be merged (see [`compact`]),
    /// by session directory name: done when the writer is idle.
    merges_due: HashSet<String>,
    /// Bytes of the log file the current streaming read has read (see
    /// [`RangeReads::progress`]).
    streamed: Arc<std::sync::atomic::AtomicU64>,
}

impl JsonlBackend {
    /// Open (creating it, mode 0700, if missing) the root `root` with the
    /// given encoding. Takes an exclusive lock on the root (`store.locked`
    /// when another store holds it) and refuses a root holding logs of the
    /// other encoding (`jsonl.encoding-mismatch`).
    pub fn open(root: &Path, compression: Compression) -> Result<JsonlBackend> {
        let root =
            std::path::absolute(root).map_err(|e| layout::io_error(Rule::IoStat, root, &e))?;
        fsio::ensure_root(&root)?;
        let lock = fsio::lock_root(&root)?;
        layout::check_root_encoding(&root, compression)?;
        Ok(JsonlBackend::with(root, compression, Some(lock)))
    }

    /// Open the existing root `root` for reading beside its writer
    /// (`"readOnly": true`): no lock, nothing created or written; a log
    /// is read up to its last complete record, whatever the writer is
    /// appending meanwhile. `store.not-found` when there is no root.
    pub fn open_read_only(root: &Path, compression: Compression) -> Result<JsonlBackend> {
        let root =
            std::path::absolute(root).map_err(|e| layout::io_error(Rule::IoStat, root, &e))?;
        match std::fs::metadata(&root) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(Error::new(
                    Status::Io,
                    Rule::IoNotADirectory,
                    format!("{} exists and is not a directory", root.display()),
                ))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::new(
                    Status::NotFound,
                    Rule::StoreNotFound,
                    format!("no JSONL store at {} to read", root.display()),
                ))
            }
            Err(e) => return Err(layout::io_error(Rule::IoStat, &root, &e)),
        }
        layout::check_root_encoding(&root, compression)?;
        let mut backend = JsonlBackend::with(root, compression, None);
        backend.reading = read::Reading::Prefix;
        Ok(backend)
    }

    fn with(root: PathBuf, compression: Compression, lock: Option<File>) -> JsonlBackend {
        JsonlBackend {
            root,
            compression,
            _lock: lock,
            reading: read::Reading::Stable,
            logs: HashMap::new(),
            marks: HashMap::new(),
            cursor: None,
            scratch: batch::Scratch::default(),
            scratches: Vec::new(),
            hurry: None,
            half_published: HashMap::new(),
            merges_due: HashSet::new(),
            streamed: Arc::default(),
        }
    }

    /// Count the store's waiting flushes in `hurry` (the writer's hint:
    /// with a flush waiting, a write may use every core).
    pub fn set_hurry(&mut self, hurry: Arc<Hurry>) {
        self.hurry = Some(hurry);
    }

    /// zstd worker threads for the write about to start: the machine's
    /// cores (at most 4) while a flush waits, or without a writer (the
    /// caller waits for the write either way); none while appends may run,
    /// so they keep the other core.
    fn workers(&self) -> u32 {
        let waited_for = self.hurry.as_ref().is_none_or(|h| h.is_on());
        if self.compression != Compression::Zstd || !waited_for {
            return 0;
        }
        cores()
    }

    /// The absolute root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The log path the header's `(cwd, id)` names (`locate`).
    pub fn path_of(&self, header: &Value) -> Result<PathBuf> {
        let segment = encode_segment(&layout::header_js_id(header))?;
        Ok(self
            .root
            .join(layout::project_dir_of(header)?)
            .join(segment)
            .join(layout::log_name(self.compression)))
    }

    /// The identity check of a read header: the requested id and the path
    /// its `(cwd, id)` names must match the file read.
    fn check_identity(&self, requested: Option<&str>, header: &Value, path: &Path) -> Result<()> {
        let id = layout::header_js_id(header);
        if requested.is_some_and(|r| id != r) {
            return Err(Error::new(
                Status::Corrupt,
                Rule::JsonlHeaderIdMismatch,
                format!(
                    "corrupt session log {}: requested id does not match header id",
                    path.display()
                ),
            ));
        }
        let mismatch = |other: String| {
            Error::new(
                Status::Corrupt,
                Rule::JsonlHeaderPathMismatch,
                format!(
                    "corrupt session log {}: header id and cwd identify {other}",
                    path.display()
                ),
            )
        };
        let expected = self
            .path_of(header)
            .map_err(|e| mismatch(format!("no path ({})", e.message)))?;
        if expected != path && !layout::same_file(&expected, path)? {
            return Err(mismatch(expected.display().to_string()));
        }
        Ok(())
    }

    /// The state of the log of `header`, created from its path if unknown.
    fn state(&mut self, segment: &str, header: &Value) -> Result<&mut LogState> {
        if !self.logs.contains_key(segment) {
            let path = self.path_of(header)?;
            self.remember(segment, path, None);
        }
        Ok(self.logs.get_mut(segment).expect("inserted above"))
    }

    /// Keep the resync points a read of `segment`'s log at `revision`
    /// found (in place of any earlier ones and the range cursor).
    fn keep_marks(&mut self, segment: &str, mut marks: range::Marks, revision: &str) {
        marks.file = layout::file_of_revision(revision);
        self.marks.insert(segment.to_string(), marks);
        self.forget_cursor(segment);
    }

    /// Drop the range cursor of `segment` (its log was read again, cut or
    /// deleted).
    fn forget_cursor(&mut self, segment: &str) {
        if self.cursor.as_ref().is_some_and(|(s, _)| s == segment) {
            self.cursor = None;
        }
    }

    fn remember(&mut self, segment: &str, path: PathBuf, next: Option<u64>) {
        if let Some(s) = self.logs.get_mut(segment) {
            if s.path != path {
                s.file = None;
                s.tail = compact::Tail::default();
            }
            s.path = path;
            // With a rollback still to do, the log's end is the rollback
            // point, whatever a read of the file found after it.
            if s.rollback.is_none() {
                s.next = next;
            }
            return;
        }
        if self.logs.len() >= HANDLES_KEPT * 4 {
            // A log with a rollback still to do, or an append running, is
            // never forgotten.
            self.logs.retain(|_, s| s.rollback.is_some() || s.in_flight);
        }
        self.logs.insert(
            segment.to_string(),
            LogState {
                path,
                file: None,
                next,
                rollback: None,
                tail: compact::Tail::default(),
                dir_unsynced: false,
                in_flight: false,
            },
        );
    }
}

/// The machine's cores, at most 4, found once per process: std finds them
/// anew at every call, reading the cgroup's quota files, which cost a
/// flush more than compressing its frame did.
fn cores() -> u32 {
    static CORES: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(4)) as u32)
}

impl Backend for JsonlBackend {
    fn kind(&self) -> crate::store::backend::BackendKind {
        crate::store::backend::BackendKind::Jsonl
    }

    fn list(&mut self) -> Result<Vec<Listed>> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let mut seen_files = HashSet::new();
        for project in layout::sub_dirs(&self.root)? {
            let entries = match std::fs::read_dir(&project) {
                Ok(e) => e,
                Err(e) if layout::is_absent(&e) => continue,
                Err(e) => return Err(layout::io_error(Rule::IoReaddir, &project, &e)),
            };
            let mut paths = Vec::new();
            for entry in entries {
                paths.push(
                    entry
                        .map_err(|e| layout::io_error(Rule::IoReaddir, &project, &e))?
                        .path(),
                );
            }
            paths.sort();
            for path in paths {
                let Some(meta) = layout::stat(&path)? else {
                    continue;
                };
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if meta.is_file() && layout::is_flat_log_name(&name) {
                    return Err(layout::legacy_layout(&path));
                }
                if !meta.is_dir() {
                    continue;
                }
                layout::check_encoding(&path, self.compression)?;
                let log = path.join(layout::log_name(self.compression));
                let Some(meta) = layout::stat_at(faults::Point::ListStat, &log)? else {
                    continue;
                };
                if !seen_files.insert(meta.id()) {
                    continue; // the same physical file under another name
                }
                let Some(header) = read::read_first_header(&log, self.compression)? else {
                    continue;
                };
                self.check_identity(None, &header, &log)?;
                let segment = encode_segment(&layout::header_js_id(&header))?;
                if !seen.insert(segment) {
                    return Err(layout::duplicate_id(
                        &layout::header_js_id(&header).to_string_lossy(),
                    ));
                }
                out.push(Listed {
                    header,
                    revision: layout::revision_of(&meta),
                    problem: None,
                });
            }
        }
        Ok(out)
    }

    fn load(&mut self, id: &str) -> Result<Option<Loaded>> {
        self.load_with(id, zstd_frames::Damage::Refuse)
    }

    fn revision(&mut self, id: &str) -> Result<Option<String>> {
        let segment = encode_segment(&JsString::from_str(id))?;
        if let Some(state) = self.logs.get(&segment) {
            if let Some(meta) = layout::stat_at(faults::Point::RevisionStat, &state.path)? {
                return Ok(Some(layout::revision_of(&meta)));
            }
        }
        let Some(path) = layout::find_log(&self.root, &segment, self.compression)? else {
            return Ok(None);
        };
        let meta = layout::stat_at(faults::Point::RevisionStat, &path)?;
        Ok(meta.map(|m| layout::revision_of(&m)))
    }

    fn write(&mut self, batches: &[Batch<'_>]) -> Vec<Result<()>> {
        self.write_group(batches)
    }

    fn detaches_writes(&self) -> bool {
        true
    }

    fn prepare_write(&mut self, batches: &[Batch<'_>]) -> Option<Box<dyn Detached>> {
        Some(Box::new(self.prepare_group(batches)))
    }

    fn finish_write(&mut self, detached: Box<dyn Detached>) -> Vec<Result<()>> {
        self.finish_detached(detached)
    }

    fn delete(&mut self, id: &str) -> Result<bool> {
        let segment = encode_segment(&JsString::from_str(id))?;
        self.logs.remove(&segment);
        self.marks.remove(&segment);
        self.half_published.remove(&segment);
        self.merges_due.remove(&segment);
        self.forget_cursor(&segment);
        let Some(path) = layout::find_log(&self.root, &segment, self.compression)? else {
            return Ok(false);
        };
        compact::remove_leftovers(&path);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if layout::is_absent(&e) => return Ok(false),
            Err(e) => return Err(layout::io_error(Rule::IoUnlink, &path, &e)),
        }
        let Some(dir) = path.parent() else {
            return Ok(true);
        };
        fsio::fsync_dir(dir)?;
        // The session directory goes too when nothing else is in it.
        if std::fs::remove_dir(dir).is_ok() {
            if let Some(project) = dir.parent() {
                fsio::fsync_dir(project)?;
            }
        }
        Ok(true)
    }

    fn commit_repair(
        &mut self,
        header: &Value,
        torn: Option<&Torn>,
        events: &[Arc<Event>],
    ) -> Result<Option<Cut>> {
        let segment = encode_segment(&layout::header_js_id(header))?;
        let mut cut = None;
        if let Some(torn) = torn {
            let TornAt::Byte(at) = torn.at else {
                return Err(Error::new(
                    Status::Internal,
                    Rule::InternalUntracked,
                    format!("a JSONL log is cut at a byte offset, not at {:?}", torn.at),
                ));
            };
            let state = self.state(&segment, header)?;
            state.file = None;
            // No byte leaves the log without a durable copy beside it.
            let copy = fsio::keep_tail(&state.path, at)?;
            fsio::truncate(&state.path, at)?;
            state.rollback = None;
            if let Some(marks) = self.marks.get_mut(&segment) {
                marks.cut(at);
            }
            self.forget_cursor(&segment);
            cut = copy.map(|(copy, length)| Cut {
                at,
                length,
                why: torn.why,
                copy,
            });
        }
        if !events.is_empty() {
            self.append_batch(&segment, header, events)?;
        }
        Ok(cut)
    }

    fn load_salvaging(&mut self, id: &str) -> Result<Option<Loaded>> {
        self.load_with(id, zstd_frames::Damage::Salvage)
    }

    fn writer_running(&mut self, _id: &str) -> Option<bool> {
        // The writer holds the root's lock; this backend, when it is the
        // writer, holds it too.
        crate::store::lockinfo::writer_lock_held(&self.root)
    }

    fn quarantined(&mut self, id: &str) -> Result<Vec<PathBuf>> {
        let segment = encode_segment(&JsString::from_str(id))?;
        let Some(path) = layout::find_log(&self.root, &segment, self.compression)? else {
            return Ok(Vec::new());
        };
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return Ok(Vec::new());
        };
        crate::store::quarantine::list(dir, &name.to_string_lossy())
    }

    fn range_reads(&mut self) -> Option<&mut dyn RangeReads> {
        Some(self)
    }

    fn release(&mut self, id: &str) {
        // A closed session's small frames are merged while nothing more
        // is coming.
        let Ok(segment) = encode_segment(&JsString::from_str(id)) else {
            return;
        };
        self.merges_due.remove(&segment);
        if self.logs.get(&segment).is_some_and(|s| s.tail.due(true)) {
            self.merge_tail(&segment);
        }
    }

    fn has_upkeep(&self) -> bool {
        !self.merges_due.is_empty()
    }

    fn idle(&mut self) {
        for segment in std::mem::take(&mut self.merges_due) {
            self.merge_tail(&segment);
        }
    }
}

//! Durable filesystem steps of the JSONL backend (docs/formats.md §3.4):
//! directory creation with parent fsyncs, atomic publication of a new log,
//! appends with rollback, truncation, and the root lock.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::faults::{self, Point};
use super::layout::{io_error, is_absent};
use crate::error::{Error, Result, Status};
use crate::rule::Rule;
use crate::store::platform;

/// fsync a directory so that entries created in it are durable (nothing
/// to do on Windows: [`platform::fsync_dir`]).
pub fn fsync_dir(dir: &Path) -> Result<()> {
    platform::fsync_dir(dir).map_err(|e| io_error(Rule::IoFsync, dir, &e))
}

fn not_a_directory(path: &Path) -> Error {
    Error::new(
        Status::Io,
        Rule::IoNotADirectory,
        format!("{} exists and is not a directory", path.display()),
    )
}

/// Create `dir` (mode 0700; on Windows a DACL for this user alone) unless
/// it exists, fsyncing its parent after a creation. An existing
/// non-directory refuses.
pub fn ensure_dir(dir: &Path) -> Result<()> {
    match platform::create_dir_private(dir) {
        Ok(()) => match dir.parent() {
            Some(parent) => fsync_dir(parent),
            None => Ok(()),
        },
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => match platform::lstat(dir) {
            Ok(m) if m.is_link() => Err(super::layout::link_refused(dir)),
            Ok(m) if m.is_dir() => Ok(()),
            Ok(_) => Err(not_a_directory(dir)),
            Err(e) => Err(io_error(Rule::IoMkdir, dir, &e)),
        },
        Err(e) => Err(io_error(Rule::IoMkdir, dir, &e)),
    }
}

/// Create the root (and missing ancestors, mode 0700; on Windows a DACL
/// for this user alone) unless it exists; an existing root must be a
/// directory.
pub fn ensure_root(root: &Path) -> Result<()> {
    match fs::metadata(root) {
        Ok(m) if m.is_dir() => return Ok(()),
        Ok(_) => return Err(not_a_directory(root)),
        Err(e) if !is_absent(&e) => return Err(io_error(Rule::IoStat, root, &e)),
        Err(_) => {}
    }
    if let Some(parent) = root.parent() {
        if fs::metadata(parent).is_err() {
            platform::create_dir_all_private(parent)
                .map_err(|e| io_error(Rule::IoMkdir, parent, &e))?;
        }
    }
    ensure_dir(root)
}

/// Take the exclusive lock of `root` (held while the returned file stays
/// open: a `flock` of the root directory on Unix, a `LockFileEx` of the
/// root's lock file on Windows). Another holder → `store.locked`
/// (`DSH_E_CONFLICT`).
pub fn lock_root(root: &Path) -> Result<File> {
    let lock = platform::open_lock(root).map_err(|e| io_error(Rule::IoOpen, root, &e))?;
    match platform::try_lock(&lock) {
        Ok(true) => Ok(lock),
        Ok(false) => Err(Error::new(
            Status::Conflict,
            Rule::StoreLocked,
            format!(
                "the JSONL root {} is in use by another store",
                root.display()
            ),
        )),
        Err(e) => Err(io_error(Rule::IoLock, root, &e)),
    }
}

/// 12 random lowercase hex digits.
pub fn random_hex12() -> String {
    let mut bytes = [0u8; 6];
    #[cfg(unix)]
    let from_os =
        File::open("/dev/urandom").and_then(|mut f| io::Read::read_exact(&mut f, &mut bytes));
    #[cfg(not(unix))]
    let from_os = getrandom::fill(&mut bytes);
    if from_os.is_err() {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let mix = nanos
            ^ (u64::from(std::process::id()) << 40)
            ^ COUNTER.fetch_add(1, Ordering::Relaxed).rotate_left(17);
        bytes.copy_from_slice(&mix.to_le_bytes()[..6]);
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn exists_on_materialize(path: &Path) -> Error {
    Error::new(
        Status::Conflict,
        Rule::JsonlExistsOnMaterialize,
        format!(
            "refusing to materialize {}: a log already exists",
            path.display()
        ),
    )
}

/// A fresh temp name beside `path`: `<path>.<12 hex digits>.tmp` (what
/// [`super::compact::remove_leftovers`] knows as a crashed writer's).
pub fn temp_beside(path: &Path) -> std::path::PathBuf {
    let mut temp = path.as_os_str().to_owned();
    temp.push(format!(".{}.tmp", random_hex12()));
    std::path::PathBuf::from(temp)
}

/// Create the new file `temp` (mode 0600, on Windows a DACL for this user
/// alone; never an existing file or link).
pub fn create_temp(temp: &Path) -> io::Result<File> {
    platform::create_private(temp)
}

/// The identity of a file: (device, inode), on Windows (volume, index).
pub use crate::store::platform::FileId;

/// Publish a new log at `path` with the content `write` puts into a
/// fresh file, atomically and without ever replacing an existing file
/// (`jsonl.exists-on-materialize`). Once the file is linked into place
/// (its content durable), `linked` gets its identity, so a caller whose
/// publish failed after that (the directory's fsync) can tell its own
/// file from another's and finish the publish later.
pub fn publish(
    path: &Path,
    linked: &mut Option<FileId>,
    write: impl FnOnce(&File) -> io::Result<()>,
) -> Result<()> {
    if fs::symlink_metadata(path).is_ok() {
        return Err(exists_on_materialize(path));
    }
    let temp = temp_beside(path);
    let written = create_temp(&temp).and_then(|f| {
        write(&f)?;
        f.sync_all()
    });
    if let Err(e) = written {
        let _ = fs::remove_file(&temp);
        return Err(io_error(Rule::IoWrite, &temp, &e));
    }
    let id = platform::lstat(&temp).map(|m| m.id());
    // A hard link (Unix) or a write-through move (Windows) that never
    // replaces; the temp name is gone either way.
    match platform::publish(&temp, path) {
        Ok(()) => *linked = id.ok(),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            return Err(exists_on_materialize(path))
        }
        Err(e) => return Err(io_error(Rule::IoLink, path, &e)),
    }
    match path.parent() {
        Some(dir) => faults::hit(Point::PublishDirSync, dir)
            .map_err(|e| io_error(Rule::IoFsync, dir, &e))
            .and_then(|()| fsync_dir(dir)),
        None => Ok(()),
    }
}

/// The identity of the file at `path` (following no link).
pub fn file_id(path: &Path) -> Result<FileId> {
    platform::lstat(path)
        .map(|m| m.id())
        .map_err(|e| io_error(Rule::IoStat, path, &e))
}

/// Open `path` for appending; `None` when it does not exist.
pub fn open_append(path: &Path) -> Result<Option<File>> {
    match platform::open_no_follow(OpenOptions::new().append(true), path) {
        Ok(f) => one_name(f, path).map(Some),
        Err(e) if is_absent(&e) => Ok(None),
        Err(e) => Err(io_error(Rule::IoOpen, path, &e)),
    }
}

/// A log the store writes must have one name: through a hard link a write
/// would change the file under its other name too, which may lie outside
/// the store (`jsonl.link`).
fn one_name(file: File, path: &Path) -> Result<File> {
    let links = platform::fstat(&file)
        .map_err(|e| io_error(Rule::IoStat, path, &e))?
        .links();
    if links > 1 {
        return Err(Error::new(
            Status::Io,
            Rule::JsonlLink,
            format!(
                "{} has {links} hard links; the store writes no file that has another name \
                 (a write would change it there too): remove the other names, or copy the log",
                path.display()
            ),
        ));
    }
    Ok(file)
}

/// Append what `write` writes to `file` durably. On failure the file is
/// cut back to its previous size (and that is made durable) before the
/// error returns; when that fails too, the error names both failures and
/// `rollback` keeps the size the file must be cut back to. Every later
/// append first finishes that cut, and writes nothing until it succeeds:
/// the log goes on from its last durable record, never after bytes whose
/// write failed.
pub fn append_durable(
    file: &File,
    path: &Path,
    rollback: &mut Option<u64>,
    write: impl FnOnce(&File) -> io::Result<()>,
) -> Result<()> {
    if let Some(size) = *rollback {
        cut_back(path, size).map_err(|r| {
            Error::new(
                Status::Io,
                Rule::IoTruncate,
                format!(
                    "{}: an earlier failed append is still to be rolled back to {size} bytes, and that failed again ({r}); nothing was written",
                    path.display()
                ),
            )
        })?;
        *rollback = None;
    }
    let size = file
        .metadata()
        .map_err(|e| io_error(Rule::IoStat, path, &e))?
        .len();
    // fdatasync: the appended bytes and the new length (what a read of
    // them needs) are made durable; the modification time is not waited
    // for. (On Apple platforms the standard library issues F_FULLFSYNC
    // for it, on Windows FlushFileBuffers, as for a full sync.)
    let written = write(file)
        .and_then(|()| faults::hit(Point::AppendSync, path))
        .and_then(|()| file.sync_data());
    let Err(e) = written else { return Ok(()) };
    Err(match cut_back(path, size) {
        Ok(()) => io_error(Rule::IoWrite, path, &e),
        Err(r) => {
            *rollback = Some(size);
            Error::new(
                Status::Io,
                Rule::IoWrite,
                format!(
                    "{}: append failed ({e}) and rolling back to {size} bytes failed too ({r})",
                    path.display()
                ),
            )
        }
    })
}

/// Cut `path` back to `size` bytes durably (the rollback of a failed append).
fn cut_back(path: &Path, size: u64) -> io::Result<()> {
    platform::open_no_follow(OpenOptions::new().write(true), path).and_then(|f| {
        faults::hit(Point::RollbackTruncate, path)
            .and_then(|()| f.set_len(size))
            .and_then(|()| f.sync_all())
    })
}

/// Copy the bytes of the log at `path` from `from` to its end into a
/// quarantine file beside it, synced, before a repair cuts them: the
/// copy's path and length, or `None` when there is nothing after `from`.
pub fn keep_tail(path: &Path, from: u64) -> Result<Option<(PathBuf, u64)>> {
    use std::io::{Read, Seek, SeekFrom};
    let file = platform::open_no_follow(OpenOptions::new().read(true), path)
        .map_err(|e| io_error(Rule::IoOpen, path, &e))?;
    // The cut that follows refuses a log with a second name: no copy then.
    let mut file = one_name(file, path)?;
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(from))
        .and_then(|_| file.read_to_end(&mut bytes))
        .map_err(|e| io_error(Rule::IoRead, path, &e))?;
    if bytes.is_empty() {
        return Ok(None);
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Ok(None);
    };
    let name = name.to_string_lossy();
    let copy = crate::store::quarantine::keep(dir, &name, &from.to_string(), &bytes)?;
    Ok(Some((copy, bytes.len() as u64)))
}

/// Cut `path` to `len` bytes durably (crash repair). A file already
/// shorter than `len` changed since it was read and refuses.
pub fn truncate(path: &Path, len: u64) -> Result<()> {
    let file = platform::open_no_follow(OpenOptions::new().write(true), path)
        .map_err(|e| io_error(Rule::IoOpen, path, &e))?;
    let file = one_name(file, path)?;
    let size = file
        .metadata()
        .map_err(|e| io_error(Rule::IoStat, path, &e))?
        .len();
    if size < len {
        return Err(Error::new(
            Status::Io,
            Rule::IoTruncate,
            format!(
                "{}: {size} bytes, shorter than the repair point {len}",
                path.display()
            ),
        ));
    }
    file.set_len(len)
        .and_then(|()| file.sync_all())
        .map_err(|e| io_error(Rule::IoTruncate, path, &e))
}

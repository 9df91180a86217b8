//! The database file (docs/formats.md §4.1, §7): parent directory and file
//! rules, exclusive creation with mode 0600 (on Windows a DACL for this
//! user alone), the single-writer lock, and the file identity used in
//! revisions.
//!
//! The lock is an advisory `flock(LOCK_EX | LOCK_NB)` on a file descriptor of
//! the database that stays open for the backend's whole life (on Windows a
//! `LockFileEx` of a byte far past the database's data and SQLite's own lock
//! bytes, on a handle kept the same way). SQLite's own locks on Unix are
//! POSIX record locks, which the kernel drops when *any* descriptor of the
//! file is closed by the process; so while a connection lives no extra
//! descriptor of the file may be opened and closed. A process-wide registry
//! of locked file identities lets a second in-process open fail without
//! opening a descriptor at all.

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::path::Path;
use std::sync::Mutex;
use std::time::UNIX_EPOCH;

use crate::error::{Error, Result, Status};
use crate::rule::Rule;
use crate::store::platform::{self, FileId, Meta};

/// The identity of every database file locked by a backend of this process.
static LOCKED: Mutex<Vec<FileId>> = Mutex::new(Vec::new());

fn registry() -> std::sync::MutexGuard<'static, Vec<FileId>> {
    LOCKED.lock().unwrap_or_else(|p| p.into_inner())
}

fn io_err(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::new(
        Status::Io,
        Rule::IoSqlite,
        format!("{what} {}: {e}", path.display()),
    )
}

#[cfg(unix)]
fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The exclusive lock on a database file, held until drop.
#[derive(Debug)]
pub struct FileLock {
    file: File,
    /// Device number of the file (Windows: its volume serial number).
    pub dev: u64,
    /// Inode number of the file (Windows: its file index).
    pub ino: u64,
    /// Birth time in nanoseconds since the epoch, or 0 when the file system
    /// or kernel does not report it (`statx` without `STATX_BTIME`).
    pub birth_ns: u128,
}

impl Drop for FileLock {
    fn drop(&mut self) {
        // Closing the descriptor (after this body) releases the flock.
        registry().retain(|k| *k != (self.dev, self.ino));
    }
}

/// `sqlite.path-parent`: `mkdir -p` (0700; Windows: a DACL for this user
/// alone), then a real, user-owned directory without group/other write
/// permission (Windows: no other account may write it).
fn check_parent(path: &Path, create: bool) -> Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if create {
        platform::create_dir_all_private(parent)
            .map_err(|e| io_err("cannot create database directory", parent, e))?;
    }
    let meta = platform::lstat(parent).map_err(|e| io_err("cannot stat", parent, e))?;
    check_owned(parent, &meta, Kind::Directory)
}

/// What [`check_owned`] checks a path to be.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The database's directory (`sqlite.path-parent`): the user's, and
    /// nobody else may write it.
    Directory,
    /// The database (`sqlite.path-file`): the user's, nobody else may
    /// read or write it, and it has no other name (a hard link): SQLite
    /// names the WAL after the path it opens, so through another name a
    /// store would miss the events waiting in this name's WAL, and its
    /// own writes would be undone when that WAL is replayed.
    File,
}

/// `path` (its `meta`) must be a `kind` this user alone controls: not a
/// symbolic link, of that type, owned by the user, without permissions
/// for others, and a file without a second name.
#[cfg(unix)]
fn check_owned(path: &Path, meta: &Meta, kind: Kind) -> Result<()> {
    let p = path.display();
    let mode = meta.mode() & 0o7777;
    let (rule, must, is_kind, what, others) = match kind {
        Kind::Directory => (
            Rule::SqlitePathParent,
            "database parent must be a real directory of this user that nobody else can write",
            meta.is_dir(),
            "a directory",
            0o022,
        ),
        Kind::File => (
            Rule::SqlitePathFile,
            "database must be a regular file of one name that only this user can read and write",
            meta.is_file(),
            "a regular file",
            0o077,
        ),
    };
    let fault = if meta.is_link() {
        match kind {
            Kind::Directory => {
                format!("{p} is a symbolic link; give the path through the directory it points to")
            }
            Kind::File => format!("{p} is a symbolic link; open the file it points to"),
        }
    } else if !is_kind {
        format!("{p} is not {what}")
    } else if meta.uid() != euid() {
        let hint = match kind {
            Kind::Directory => "; use a directory of your own",
            Kind::File => "",
        };
        format!(
            "{p} belongs to uid {}, not to this user ({}){hint}",
            meta.uid(),
            euid()
        )
    } else if kind == Kind::File && meta.links() > 1 {
        second_name(path, meta)
    } else if meta.mode() & others != 0 {
        match kind {
            Kind::Directory => format!("{p} is writable by others (mode {mode:o}); fix it with `chmod go-w {p}`"),
            Kind::File => format!("{p} can be read or written by others (mode {mode:o}; a copy such as a `VACUUM INTO` backup often is); fix it with `chmod 600 {p}`"),
        }
    } else {
        return Ok(());
    };
    Err(Error::new(Status::Io, rule, format!("{must}: {fault}")))
}

/// The fault of a database file with a second name (`sqlite.path-file`).
fn second_name(path: &Path, meta: &Meta) -> String {
    let p = path.display();
    #[cfg(unix)]
    let finder = format!("`find / -xdev -samefile {p}` lists them");
    #[cfg(not(unix))]
    let finder = format!("`fsutil hardlink list {p}` lists them");
    format!(
        "{p} has {} hard links: SQLite keeps the WAL beside the name it opens, so through \
         another name the events waiting in this name's WAL are missing, and what is written \
         there is undone when this WAL is replayed; remove the other names \
         ({finder}) and open the database by the name it \
         was written through, or give this path a copy of its own",
        meta.links()
    )
}

/// Windows: `path` (its `meta`) must be a `kind` this user alone controls:
/// no reparse point, of that type, a file without a second name, owned by
/// the user, and no entry of its DACL granting another account (than
/// SYSTEM and the Administrators) a write of the directory or any use of
/// the file ([`platform::check_private`]).
#[cfg(not(unix))]
fn check_owned(path: &Path, meta: &Meta, kind: Kind) -> Result<()> {
    let p = path.display();
    let (rule, must, is_kind, what) = match kind {
        Kind::Directory => (
            Rule::SqlitePathParent,
            "database parent must be a real directory of this user that nobody else can write",
            meta.is_dir(),
            "a directory",
        ),
        Kind::File => (
            Rule::SqlitePathFile,
            "database must be a regular file of one name that only this user can read and write",
            meta.is_file(),
            "a regular file",
        ),
    };
    let fault = if meta.is_link() {
        match kind {
            Kind::Directory => format!(
                "{p} is {}; give the path through the directory it points to",
                platform::LINK_KIND
            ),
            Kind::File => format!("{p} is {}; open the file it points to", platform::LINK_KIND),
        }
    } else if !is_kind {
        format!("{p} is not {what}")
    } else if kind == Kind::File && meta.links() > 1 {
        second_name(path, meta)
    } else {
        let private = platform::check_private(path, kind == Kind::Directory)
            .map_err(|e| io_err("cannot read the security descriptor of", path, e))?;
        let Some(fault) = private else {
            return Ok(());
        };
        format!(
            "{p} {fault}; give it to this user alone (`icacls {p} /inheritance:r /grant:r \
             %USERNAME%:F` and remove the other entries)"
        )
    };
    Err(Error::new(Status::Io, rule, format!("{must}: {fault}")))
}

/// `sqlite.path-file`: a regular non-symlink file owned by the user with no
/// group/other permission bits and a link count of 1.
fn check_file(path: &Path, meta: &Meta) -> Result<()> {
    check_owned(path, meta, Kind::File)
}

/// The identity `(dev, ino, birth_ns)` of the database a reader opens,
/// after the path rules a writer checks, without creating or locking
/// anything and without opening a descriptor of the file (closing one
/// would drop the POSIX locks this process's SQLite connections hold on
/// it). `store.not-found` when there is no database.
pub fn identify(path: &Path) -> Result<(u64, u64, u128)> {
    let meta = match platform::lstat(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(Error::new(
                Status::NotFound,
                Rule::StoreNotFound,
                format!("no database at {} to read", path.display()),
            ))
        }
        Err(e) => return Err(io_err("cannot stat database", path, e)),
    };
    check_parent(path, false)?;
    check_file(path, &meta)?;
    let birth_ns = meta
        .created()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let (dev, ino) = meta.id();
    Ok((dev, ino, birth_ns))
}

/// fsync the directory holding the database, so that the entries of the
/// database file and its `-wal` are durable. SQLite syncs the directory
/// when it creates a journal but ignores a failure of that sync, and never
/// syncs it for the database file itself. The WAL file lives as long as
/// the writer's connection (SQLite resets it in place and deletes it only
/// when the last connection closes), so one sync after it exists covers
/// every later commit.
pub fn sync_parent(path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    platform::fsync_dir(dir).map_err(|e| {
        Error::new(
            Status::Io,
            Rule::IoFsync,
            format!("cannot fsync directory {}: {e}", dir.display()),
        )
    })
}

/// Validate the path, create the file exclusively (0600; Windows: a DACL
/// for this user alone) when absent, and
/// take the exclusive lock (`store.locked`, `DSH_E_CONFLICT`, when another
/// backend holds it, in this process or another).
pub fn acquire(path: &Path) -> Result<FileLock> {
    check_parent(path, true)?;
    let mut created = None;
    let meta = loop {
        match platform::lstat(path) {
            Ok(meta) => break meta,
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("cannot stat database", path, e)),
        }
        match platform::create_private(path) {
            Ok(f) => created = Some(f),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_err("cannot create database", path, e)),
        }
    };
    check_file(path, &meta)?;
    let key = meta.id();
    let locked = || {
        Error::new(
            Status::Conflict,
            Rule::StoreLocked,
            format!("database {} is in use by another store", path.display()),
        )
    };
    {
        let mut reg = registry();
        if reg.contains(&key) {
            return Err(locked());
        }
        reg.push(key);
    }
    // From here on the registry entry is ours; `FileLock::drop` removes it.
    let file = match created {
        Some(f) => Ok(f),
        None => platform::open_no_follow(OpenOptions::new().read(true), path),
    };
    let file = match file {
        Ok(f) => f,
        Err(e) => {
            registry().retain(|k| *k != key);
            return Err(io_err("cannot open database", path, e));
        }
    };
    let fmeta = match platform::fstat(&file) {
        Ok(m) => m,
        Err(e) => {
            registry().retain(|k| *k != key);
            return Err(io_err("cannot stat database", path, e));
        }
    };
    let birth_ns = fmeta
        .created()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let lock = FileLock {
        file,
        dev: key.0,
        ino: key.1,
        birth_ns,
    };
    if fmeta.id() != key {
        // The path was replaced between the checks and the open.
        return Err(Error::new(
            Status::Io,
            Rule::SqlitePathFile,
            format!(
                "database {} changed while it was being opened",
                path.display()
            ),
        ));
    }
    check_file(path, &fmeta)?;
    match platform::try_lock(&lock.file) {
        Ok(true) => Ok(lock),
        Ok(false) => Err(locked()),
        Err(e) => Err(io_err("cannot lock database", path, e)),
    }
}

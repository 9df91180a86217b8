//! The Unix means: `lstat`, `O_NOFOLLOW`, modes 0600 / 0700, `flock`,
//! `link` + `unlink` to publish, `rename`, `fsync` of a directory, `pread`.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;

use super::FileId;

/// What a refused link is called in messages.
pub const LINK_KIND: &str = "a symbolic link";

/// The metadata of an entry, as `lstat` or `fstat` gave it.
#[derive(Debug, Clone)]
pub struct Meta(fs::Metadata);

impl Meta {
    /// A directory (never a link to one).
    pub fn is_dir(&self) -> bool {
        self.0.is_dir()
    }

    /// A regular file (never a link to one).
    pub fn is_file(&self) -> bool {
        self.0.is_file()
    }

    /// A symbolic link.
    pub fn is_link(&self) -> bool {
        self.0.file_type().is_symlink()
    }

    /// The length in bytes.
    pub fn len(&self) -> u64 {
        self.0.size()
    }

    /// (device, inode).
    pub fn id(&self) -> FileId {
        (self.0.dev(), self.0.ino())
    }

    /// The number of names (hard links) of the file.
    pub fn links(&self) -> u64 {
        self.0.nlink()
    }

    /// The birth time, where the file system and kernel report it.
    pub fn created(&self) -> io::Result<std::time::SystemTime> {
        self.0.created()
    }

    /// `<dev>:<ino>:<size>:<mtimeNs>:<ctimeNs>` (docs/formats.md §7).
    pub fn revision(&self) -> String {
        let meta = &self.0;
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        format!(
            "{}:{}:{}:{}:{}",
            meta.dev(),
            meta.ino(),
            meta.size(),
            ns(meta.mtime(), meta.mtime_nsec()),
            ns(meta.ctime(), meta.ctime_nsec())
        )
    }

    /// The mode bits (the SQLite path rules read them).
    pub fn mode(&self) -> u32 {
        self.0.mode()
    }

    /// The owner's user id (the SQLite path rules read it).
    pub fn uid(&self) -> u32 {
        self.0.uid()
    }
}

/// The entry at `path` itself, following no link (`lstat`).
pub fn lstat(path: &Path) -> io::Result<Meta> {
    fs::symlink_metadata(path).map(Meta)
}

/// The file `file` is open on (`fstat`).
pub fn fstat(file: &File) -> io::Result<Meta> {
    file.metadata().map(Meta)
}

/// Open `path` as `opts` say, never through a symbolic link in its last
/// component (`O_NOFOLLOW`: a link there fails with `ELOOP`).
pub fn open_no_follow(opts: &mut OpenOptions, path: &Path) -> io::Result<File> {
    opts.custom_flags(libc::O_NOFOLLOW).open(path)
}

/// Create the new file `path` for writing, mode 0600, never an existing
/// file or link.
pub fn create_private(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Create the directory `path` (mode 0700); its parent must exist.
pub fn create_dir_private(path: &Path) -> io::Result<()> {
    DirBuilder::new().mode(0o700).create(path)
}

/// Create the directory `path` and its missing ancestors (mode 0700).
pub fn create_dir_all_private(path: &Path) -> io::Result<()> {
    DirBuilder::new().mode(0o700).recursive(true).create(path)
}

/// fsync the directory `dir`, so that the entries made in it are durable.
pub fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir).and_then(|d| d.sync_all())
}

/// What the lock of a store kept in the directory `dir` is taken on: the
/// directory itself.
pub fn open_lock(dir: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(dir)
}

/// Take the exclusive lock of a store on `file` without waiting
/// (`flock(LOCK_EX | LOCK_NB)`, held while `file` stays open): `false`
/// when another open file holds it, in this process or another.
pub fn try_lock(file: &File) -> io::Result<bool> {
    // SAFETY: `file` owns a valid open descriptor for the whole call;
    // flock only reads the descriptor number and flag bits.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        return Ok(false);
    }
    Err(e)
}

/// Give the synced file `temp` the name `path`, never replacing a file
/// there (`AlreadyExists`): a hard link, then the temp name is removed
/// (whether or not the link was made). The directory is not synced.
pub fn publish(temp: &Path, path: &Path) -> io::Result<()> {
    let link = fs::hard_link(temp, path);
    let _ = fs::remove_file(temp);
    link
}

/// Rename `temp` over `path` (replacing it). The directory is not synced.
pub fn rename_replace(temp: &Path, path: &Path) -> io::Result<()> {
    fs::rename(temp, path)
}

/// Read exactly `buf.len()` bytes of `file` at `offset` (`pread`; the
/// file's position does not move).
pub fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    file.read_exact_at(buf, offset)
}

//! The Windows means (docs/decisions.md, "Storage on Windows"):
//! reparse points are looked at, never through (`FILE_FLAG_OPEN_REPARSE_POINT`,
//! then `FILE_ATTRIBUTE_REPARSE_POINT` refuses); new files and directories
//! carry a protected DACL granting this user alone; the store's lock is a
//! `LockFileEx` byte lock; publication and merges rename with
//! `MoveFileExW(MOVEFILE_WRITE_THROUGH)`; file data is made durable by
//! `FlushFileBuffers` (std's `sync_all`).

mod security;

use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::windows::ffi::OsStrExt;
use std::os::windows::fs::{FileExt, OpenOptionsExt};
use std::os::windows::io::{AsRawHandle, FromRawHandle};
use std::path::Path;

use windows_sys::Win32::Foundation::{
    ERROR_LOCK_VIOLATION, ERROR_STOPPED_ON_SYMLINK, GENERIC_READ, GENERIC_WRITE, HANDLE,
    INVALID_HANDLE_VALUE,
};
use windows_sys::Win32::Storage::FileSystem::{
    CreateDirectoryW, CreateFileW, FileBasicInfo, GetFileInformationByHandle,
    GetFileInformationByHandleEx, LockFileEx, MoveFileExW, BY_HANDLE_FILE_INFORMATION, CREATE_NEW,
    FILE_ATTRIBUTE_DIRECTORY, FILE_ATTRIBUTE_NORMAL, FILE_ATTRIBUTE_REPARSE_POINT, FILE_BASIC_INFO,
    FILE_FLAG_BACKUP_SEMANTICS, FILE_FLAG_OPEN_REPARSE_POINT, FILE_READ_ATTRIBUTES,
    FILE_SHARE_DELETE, FILE_SHARE_READ, FILE_SHARE_WRITE, LOCKFILE_EXCLUSIVE_LOCK,
    LOCKFILE_FAIL_IMMEDIATELY, MOVEFILE_REPLACE_EXISTING, MOVEFILE_WRITE_THROUGH,
};
use windows_sys::Win32::System::IO::OVERLAPPED;

pub use security::check_private;
#[cfg(test)]
pub use security::create_with_sddl;

use super::FileId;

/// What a refused link is called in messages.
pub const LINK_KIND: &str = "a symbolic link or another reparse point";

/// The file in a JSONL root whose byte lock is the store's lock (a
/// directory cannot be locked on Windows). Not a name the layout reads:
/// the root's entries that matter are directories.
pub const LOCK_FILE: &str = ".dsh-session.lock";

/// The byte the store's lock covers: far past any byte a database or a
/// lock file holds, so the lock (Windows byte locks are mandatory) never
/// stands in the way of a read or write, nor of SQLite's own locks (at 1 GiB).
const LOCK_OFFSET: u64 = 1 << 62;

/// Every sharing mode: an open of the store's own never stands in the way
/// of another (readers, SQLite's connections, renames and deletes).
const SHARE_ALL: u32 = FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE;

/// The metadata of an entry, read from a handle opened on the entry
/// itself (`GetFileInformationByHandle`, `FileBasicInfo`).
#[derive(Debug, Clone)]
pub struct Meta {
    attributes: u32,
    len: u64,
    id: FileId,
    links: u64,
    /// `FILETIME`s: 100 ns since 1601-01-01.
    created: i64,
    written: i64,
    changed: i64,
}

impl Meta {
    /// A directory that is no reparse point.
    pub fn is_dir(&self) -> bool {
        !self.is_link() && self.attributes & FILE_ATTRIBUTE_DIRECTORY != 0
    }

    /// A file that is neither a directory nor a reparse point.
    pub fn is_file(&self) -> bool {
        !self.is_link() && self.attributes & FILE_ATTRIBUTE_DIRECTORY == 0
    }

    /// A reparse point of any kind: a symbolic link, a junction or mount
    /// point, or another filter's (the store follows none of them).
    pub fn is_link(&self) -> bool {
        self.attributes & FILE_ATTRIBUTE_REPARSE_POINT != 0
    }

    /// The length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// (volume serial number, file index).
    pub fn id(&self) -> FileId {
        self.id
    }

    /// The number of names (hard links) of the file.
    pub fn links(&self) -> u64 {
        self.links
    }

    /// The creation time.
    pub fn created(&self) -> io::Result<std::time::SystemTime> {
        // 1601-01-01 to 1970-01-01 in 100 ns units.
        const TO_UNIX: i64 = 116_444_736_000_000_000;
        let since = self.created.checked_sub(TO_UNIX).filter(|t| *t >= 0);
        since
            .map(|t| std::time::UNIX_EPOCH + std::time::Duration::from_nanos(t as u64 * 100))
            .ok_or_else(|| io::Error::other("a creation time before 1970"))
    }

    /// `<volume>:<file index>:<size>:<lastWriteNs>:<changeNs>`, the times in
    /// ns since 1601: the fields of the revision of docs/formats.md §7 with
    /// Windows's file identity and times.
    pub fn revision(&self) -> String {
        let ns = |t: i64| i128::from(t) * 100;
        format!(
            "{}:{}:{}:{}:{}",
            self.id.0,
            self.id.1,
            self.len,
            ns(self.written),
            ns(self.changed)
        )
    }
}

fn wide(path: &Path) -> Vec<u16> {
    OsStr::new(path).encode_wide().chain(Some(0)).collect()
}

/// `FALSE` from a Win32 call as the thread's last error.
fn check(ok: i32) -> io::Result<()> {
    if ok == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The entry at `path` itself, following no reparse point: a handle
/// opened with `FILE_FLAG_OPEN_REPARSE_POINT` (and backup semantics, for
/// directories) that may only read attributes, sharing everything.
pub fn lstat(path: &Path) -> io::Result<Meta> {
    let file = OpenOptions::new()
        .access_mode(FILE_READ_ATTRIBUTES)
        .share_mode(SHARE_ALL)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)?;
    fstat(&file)
}

/// The file `file` is open on.
pub fn fstat(file: &File) -> io::Result<Meta> {
    let handle = file.as_raw_handle() as HANDLE;
    let mut info: BY_HANDLE_FILE_INFORMATION = Default::default();
    // SAFETY: `handle` is open for the whole call (borrowed from `file`)
    // and `info` is a valid, writable BY_HANDLE_FILE_INFORMATION.
    check(unsafe { GetFileInformationByHandle(handle, &mut info) })?;
    let mut basic: FILE_BASIC_INFO = Default::default();
    // SAFETY: as above; the buffer is a FILE_BASIC_INFO of the size passed.
    check(unsafe {
        GetFileInformationByHandleEx(
            handle,
            FileBasicInfo,
            (&mut basic as *mut FILE_BASIC_INFO).cast(),
            std::mem::size_of::<FILE_BASIC_INFO>() as u32,
        )
    })?;
    let two = |high: u32, low: u32| (u64::from(high) << 32) | u64::from(low);
    Ok(Meta {
        attributes: info.dwFileAttributes,
        len: two(info.nFileSizeHigh, info.nFileSizeLow),
        id: (
            u64::from(info.dwVolumeSerialNumber),
            two(info.nFileIndexHigh, info.nFileIndexLow),
        ),
        links: u64::from(info.nNumberOfLinks),
        created: basic.CreationTime,
        written: basic.LastWriteTime,
        changed: basic.ChangeTime,
    })
}

/// Open `path` as `opts` say (and readable, so its metadata can be read),
/// never through a reparse point in its last component: the entry itself
/// is opened (`FILE_FLAG_OPEN_REPARSE_POINT`), and when it is a reparse
/// point the open fails with `ERROR_STOPPED_ON_SYMLINK`.
pub fn open_no_follow(opts: &mut OpenOptions, path: &Path) -> io::Result<File> {
    let file = opts
        .read(true)
        .custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)?;
    if fstat(&file)?.is_link() {
        return Err(io::Error::from_raw_os_error(
            ERROR_STOPPED_ON_SYMLINK as i32,
        ));
    }
    Ok(file)
}

/// Create the new file `path` for reading and writing, with a protected
/// DACL that grants this user alone (and this user as its owner); never
/// an existing file or link (`CREATE_NEW`).
pub fn create_private(path: &Path) -> io::Result<File> {
    let sd = security::PrivateDescriptor::new()?;
    let name = wide(path);
    // SAFETY: `name` is NUL-terminated and `sd.attributes()` points to a
    // SECURITY_ATTRIBUTES whose descriptor `sd` keeps alive for the call.
    let handle = unsafe {
        CreateFileW(
            name.as_ptr(),
            GENERIC_READ | GENERIC_WRITE,
            SHARE_ALL,
            sd.attributes(),
            CREATE_NEW,
            FILE_ATTRIBUTE_NORMAL | FILE_FLAG_OPEN_REPARSE_POINT,
            std::ptr::null_mut(),
        )
    };
    if handle == INVALID_HANDLE_VALUE {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `handle` is a valid file handle just opened and owned by
    // nothing else; the File closes it.
    Ok(unsafe { File::from_raw_handle(handle.cast()) })
}

/// Create the directory `path` with a protected DACL that grants this
/// user alone (inherited by what is made in it); its parent must exist.
pub fn create_dir_private(path: &Path) -> io::Result<()> {
    let sd = security::PrivateDescriptor::new()?;
    let name = wide(path);
    // SAFETY: `name` is NUL-terminated; the descriptor lives for the call.
    check(unsafe { CreateDirectoryW(name.as_ptr(), sd.attributes()) })
}

/// Create the directory `path` and its missing ancestors, each as
/// [`create_dir_private`] does.
pub fn create_dir_all_private(path: &Path) -> io::Result<()> {
    match create_dir_private(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && path.is_dir() => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            match path.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => create_dir_all_private(parent)?,
                _ => return Err(e),
            }
            match create_dir_private(path) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && path.is_dir() => Ok(()),
                done => done,
            }
        }
        Err(e) => Err(e),
    }
}

/// Nothing to do: Windows has no sync of a directory. The entries the
/// store makes durable are renames, made with `MOVEFILE_WRITE_THROUGH`
/// (the call returns once the rename is on disk), and NTFS keeps every
/// change of a directory in its journal, in order, so that commit also
/// commits the creations before it.
pub fn fsync_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}

/// What the lock of a store kept in the directory `dir` is taken on: the
/// file [`LOCK_FILE`] in it (made private on first use, kept after), opened
/// without following a reparse point.
pub fn open_lock(dir: &Path) -> io::Result<File> {
    let path = dir.join(LOCK_FILE);
    match create_private(&path) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            open_no_follow(OpenOptions::new().read(true), &path)
        }
        made => made,
    }
}

/// Take the exclusive lock of a store on `file` without waiting
/// (`LockFileEx` of the byte at [`LOCK_OFFSET`], exclusive, failing at
/// once; held until `file` is closed): `false` when another handle holds
/// it, in this process or another.
pub fn try_lock(file: &File) -> io::Result<bool> {
    let mut at = OVERLAPPED::default();
    at.Anonymous.Anonymous.Offset = LOCK_OFFSET as u32;
    at.Anonymous.Anonymous.OffsetHigh = (LOCK_OFFSET >> 32) as u32;
    // SAFETY: the handle is open for the whole call (borrowed from
    // `file`, a synchronous handle, so the call completes before it
    // returns) and `at` is a valid OVERLAPPED naming the range.
    let ok = unsafe {
        LockFileEx(
            file.as_raw_handle() as HANDLE,
            LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY,
            0,
            1,
            0,
            &mut at,
        )
    };
    match check(ok) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(ERROR_LOCK_VIOLATION as i32) => Ok(false),
        Err(e) => Err(e),
    }
}

fn move_file(from: &Path, to: &Path, flags: u32) -> io::Result<()> {
    let (from, to) = (wide(from), wide(to));
    // SAFETY: both names are NUL-terminated wide strings alive for the call.
    check(unsafe { MoveFileExW(from.as_ptr(), to.as_ptr(), flags) })
}

/// Give the flushed file `temp` the name `path`, never replacing a file
/// there (`AlreadyExists`): `MoveFileExW` without `MOVEFILE_REPLACE_EXISTING`,
/// with `MOVEFILE_WRITE_THROUGH` (durable when it returns). The temp name
/// is removed when the move fails.
pub fn publish(temp: &Path, path: &Path) -> io::Result<()> {
    let moved = move_file(temp, path, MOVEFILE_WRITE_THROUGH);
    if moved.is_err() {
        let _ = fs::remove_file(temp);
    }
    moved
}

/// Rename `temp` over `path` (replacing it), durable when it returns
/// (`MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH`).
pub fn rename_replace(temp: &Path, path: &Path) -> io::Result<()> {
    move_file(
        temp,
        path,
        MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH,
    )
}

/// Read exactly `buf.len()` bytes of `file` at `offset` (`seek_read`,
/// which moves the file's position: callers that read on from the
/// position seek first).
pub fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match file.seek_read(buf, offset) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "failed to fill whole buffer",
                ))
            }
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

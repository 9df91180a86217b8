//! The file-system steps of the file stores whose means differ between
//! Unix and Windows (docs/decisions.md, "Storage on Windows"): looking at
//! an entry without following a link, opening without following one,
//! creating files and directories only this user can use, the store's
//! exclusive lock, durable publication and renames, directory syncs and
//! reads at an offset. Everything else the backends do goes through std's
//! portable API, in one code path.
//!
//! On Unix these are the calls the store always made (`lstat`,
//! `O_NOFOLLOW`, mode 0600 / 0700, `flock`, `link`, `rename`, `fsync` of
//! the directory, `pread`); on Windows their counterparts are reparse-point
//! checks (`FILE_FLAG_OPEN_REPARSE_POINT`, `FILE_ATTRIBUTE_REPARSE_POINT`),
//! a protected DACL that grants the user alone, `LockFileEx`, and
//! `MoveFileExW` with `MOVEFILE_WRITE_THROUGH`.

// Each backend uses part of this toolbox: a build with one of them
// leaves the other's part unused.
#![cfg_attr(not(all(feature = "jsonl", feature = "sqlite")), allow(dead_code))]

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::*;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::*;

/// The identity of a file: (device, inode) on Unix, (volume serial
/// number, file index) on Windows.
pub type FileId = (u64, u64);

/// Tests: make the existing file `path` this user's alone (Unix: mode
/// 0600; Windows: its bytes in a new private file in its place).
#[cfg(test)]
pub fn make_private(path: &std::path::Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    #[cfg(windows)]
    {
        use std::io::Write;
        let bytes = std::fs::read(path).unwrap();
        std::fs::remove_file(path).unwrap();
        create_private(path).unwrap().write_all(&bytes).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::path::PathBuf;

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("dsh-platform-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_private_file_is_new_and_its_identity_survives_a_publish() {
        let d = temp("publish");
        let tmp = d.join("a.tmp");
        let mut f = create_private(&tmp).unwrap();
        f.write_all(b"hello").unwrap();
        f.sync_all().unwrap();
        let id = fstat(&f).unwrap().id();
        drop(f);
        assert_eq!(
            create_private(&tmp).unwrap_err().kind(),
            std::io::ErrorKind::AlreadyExists
        );
        publish(&tmp, &d.join("a")).unwrap();
        assert!(lstat(&tmp).is_err(), "the temp name is gone");
        let meta = lstat(&d.join("a")).unwrap();
        assert_eq!((meta.id(), meta.len(), meta.links()), (id, 5, 1));
        assert!(meta.is_file() && !meta.is_dir() && !meta.is_link());
        // A publish never replaces a file that is there.
        let other = d.join("b.tmp");
        drop(create_private(&other).unwrap());
        let e = publish(&other, &d.join("a")).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(d.join("a")).unwrap(), b"hello");
        // A rename replaces.
        let mut f = create_private(&other).unwrap();
        f.write_all(b"xy").unwrap();
        drop(f);
        rename_replace(&other, &d.join("a")).unwrap();
        assert_eq!(std::fs::read(d.join("a")).unwrap(), b"xy");
        fsync_dir(&d).unwrap();
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_read_at_an_offset_reads_exactly_there() {
        let d = temp("read-at");
        std::fs::write(d.join("f"), b"0123456789").unwrap();
        let f = std::fs::File::open(d.join("f")).unwrap();
        let mut buf = [0u8; 4];
        read_exact_at(&f, &mut buf, 3).unwrap();
        assert_eq!(&buf, b"3456");
        assert!(read_exact_at(&f, &mut buf, 8).is_err());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_store_lock_excludes_a_second_holder_until_it_is_released() {
        let d = temp("lock");
        let first = open_lock(&d).unwrap();
        assert!(try_lock(&first).unwrap());
        let second = open_lock(&d).unwrap();
        assert!(!try_lock(&second).unwrap(), "a second holder is refused");
        drop(first);
        assert!(try_lock(&second).unwrap(), "the lock goes with its holder");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn private_directories_are_made_with_their_ancestors() {
        let d = temp("dirs");
        let deep = d.join("a").join("b");
        create_dir_all_private(&deep).unwrap();
        assert!(lstat(&deep).unwrap().is_dir());
        assert_eq!(
            create_dir_private(&deep).unwrap_err().kind(),
            std::io::ErrorKind::AlreadyExists
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}

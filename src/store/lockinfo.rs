//! Whether a store's writer is running, seen from a reader that takes no
//! lock: the writer of a file store holds an exclusive `flock` on the
//! store (a JSONL root, a SQLite database file) for its whole life, and
//! Linux lists every such lock in `/proc/locks`, so a reader can see it
//! without taking a lock itself (which could make the writer's own open
//! fail for that moment).

use std::path::Path;

/// Whether some process holds an exclusive `flock` on the file or
/// directory at `path`; `None` where the system does not tell (no
/// `/proc/locks`) or `path` cannot be read.
pub fn writer_lock_held(path: &Path) -> Option<bool> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        let dev = meta.dev();
        let (major, minor) = (libc::major(dev), libc::minor(dev));
        let id = format!("{major:02x}:{minor:02x}:{}", meta.ino());
        let locks = std::fs::read_to_string("/proc/locks").ok()?;
        Some(locks.lines().any(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // "1: FLOCK  ADVISORY  WRITE 6478 fe:00:10166290 0 EOF"
            f.len() >= 6 && f[1] == "FLOCK" && f[3] == "WRITE" && f[5] == id
        }))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        None
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn an_exclusive_flock_is_seen_and_its_release_too() {
        let d = std::env::temp_dir().join(format!("dsh-lockinfo-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        assert_eq!(writer_lock_held(&d), Some(false));
        let f = std::fs::File::open(&d).unwrap();
        // SAFETY: a valid descriptor; flock has no other precondition.
        assert_eq!(
            unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
            0
        );
        assert_eq!(writer_lock_held(&d), Some(true));
        drop(f);
        assert_eq!(writer_lock_held(&d), Some(false));
        let _ = std::fs::remove_dir_all(&d);
    }
}

//! A damaged database file (pages overwritten, a header SQLite cannot
//! read): SQLite's corruption codes are `sqlite.corrupt`
//! (`DSH_E_CORRUPT`) at open and at load, never an I/O failure, and the
//! refused file keeps its bytes.

use crate::rule::Rule;
use std::path::Path;

use super::tests::{header, open, plain, raw, TempDir};
use super::*;

/// A closed database holding session `s`: 200 events whose text fills
/// about twenty pages, all checkpointed into the file.
fn stored(tag: &str) -> TempDir {
    let dir = TempDir::new(tag);
    let text = "x".repeat(300);
    let events: Vec<_> = (0..200)
        .map(|seq| plain(seq, "x/e", &format!(r#"{{"t":"{text}{seq}"}}"#), ""))
        .collect();
    open(&dir.db()).append(&header("s"), &events, true).unwrap();
    assert_eq!(files(&dir.0), ["store.db"], "precondition: no WAL left");
    dir
}

/// The names of the files in `dir`, sorted.
fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Bytes a damage writes: zeros, or pseudo-random bytes.
#[derive(Debug, Clone, Copy)]
enum Fill {
    Zeros,
    Noise,
}

/// Overwrite the pages `pages` (numbered from 1) of the database file at
/// `db` with `fill`; returns the damaged bytes.
fn overwrite(db: &Path, pages: impl IntoIterator<Item = usize>, fill: Fill) -> Vec<u8> {
    let mut bytes = std::fs::read(db).unwrap();
    let size = match u16::from_be_bytes([bytes[16], bytes[17]]) {
        1 => 65536,
        n => usize::from(n),
    };
    let mut seed = 0x5eed_u64;
    for page in pages {
        assert!(page >= 2, "page 1 holds the header");
        for b in &mut bytes[(page - 1) * size..page * size] {
            *b = match fill {
                Fill::Zeros => 0,
                Fill::Noise => {
                    seed = seed
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1_442_695_040_888_963_407);
                    (seed >> 56) as u8
                }
            };
        }
    }
    std::fs::write(db, &bytes).unwrap();
    bytes
}

fn assert_corrupt(err: &Error, what: &str) {
    assert_eq!(
        (err.status, err.rule),
        (Status::Corrupt, Rule::SqliteCorrupt),
        "{what}: {err}"
    );
}

/// Every page but the first (the header and the schema) overwritten, with
/// zeros or noise: the open is refused as corruption, by a writer and by
/// a reader, and the file is left as it was.
#[test]
fn overwritten_pages_refuse_the_open_as_corruption() {
    for fill in [Fill::Zeros, Fill::Noise] {
        let dir = stored("corrupt-pages");
        let len = std::fs::metadata(dir.db()).unwrap().len() as usize;
        let pages = len / 4096;
        assert!(pages > 10, "precondition: {pages} pages");
        let damaged = overwrite(&dir.db(), 2..=pages, fill);
        let err = SqliteBackend::open(&dir.db(), 100).unwrap_err();
        assert_corrupt(&err, &format!("{fill:?}, open"));
        assert!(err.message.contains("malformed"), "{err}");
        let err = SqliteBackend::open_read_only(&dir.db(), 100).unwrap_err();
        assert_corrupt(&err, &format!("{fill:?}, read-only open"));
        assert_eq!(std::fs::read(dir.db()).unwrap(), damaged, "{fill:?}");
        let wal = std::fs::metadata(dir.0.join("store.db-wal")).map_or(0, |m| m.len());
        assert_eq!(wal, 0, "{fill:?}: {:?}", files(&dir.0));
    }
}

/// The leaf pages of the `events` table overwritten: the open succeeds
/// (it reads no event), the load of the session is refused as
/// corruption, whole or streamed, and the file is left as it was.
#[test]
fn overwritten_event_pages_refuse_the_load_as_corruption() {
    for fill in [Fill::Zeros, Fill::Noise] {
        let dir = stored("corrupt-events");
        let leaves: Vec<usize> = {
            let conn = raw(&dir.db());
            let mut stmt = conn
                .prepare("SELECT pageno FROM dbstat WHERE name = 'events' AND pagetype = 'leaf'")
                .unwrap();
            let leaves = stmt
                .query_map([], |r| r.get::<_, i64>(0))
                .unwrap()
                .map(|p| p.unwrap() as usize)
                .collect();
            leaves
        };
        assert!(leaves.len() > 10, "precondition: {leaves:?}");
        let damaged = overwrite(&dir.db(), leaves, fill);
        let mut b = open(&dir.db());
        assert!(b.list().unwrap()[0].problem.is_none(), "{fill:?}");
        let err = b.load("s").unwrap_err();
        assert_corrupt(&err, &format!("{fill:?}, load"));
        let err = b.load_streaming("s", &mut |_, _| Ok(())).unwrap_err();
        assert_corrupt(&err, &format!("{fill:?}, streamed load"));
        drop(b);
        assert_eq!(std::fs::read(dir.db()).unwrap(), damaged, "{fill:?}");
    }
}

/// A header whose page size SQLite cannot read (the file still starts
/// with SQLite's magic and this library's identity): SQLITE_NOTADB, also
/// refused as corruption, the file left as it was.
#[test]
fn an_unreadable_header_is_corruption() {
    let dir = stored("corrupt-header");
    let mut bytes = std::fs::read(dir.db()).unwrap();
    bytes[16..18].copy_from_slice(&3u16.to_be_bytes());
    std::fs::write(dir.db(), &bytes).unwrap();
    let err = SqliteBackend::open(&dir.db(), 100).unwrap_err();
    assert_corrupt(&err, "open");
    assert!(err.message.contains("not a database"), "{err}");
    let err = SqliteBackend::open_read_only(&dir.db(), 100).unwrap_err();
    assert_corrupt(&err, "read-only open");
    assert_eq!(std::fs::read(dir.db()).unwrap(), bytes);
}

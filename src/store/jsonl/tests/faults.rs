//! Races and failures injected at the fault points of the JSONL backend
//! ([`faults::Point`]): a log changing while it is read, a log removed or
//! failing to stat after it was found, an append whose rollback fails.

use crate::rule::Rule;
use crate::store::backend::Stored;
use std::cell::{Cell, RefCell};
use std::fs;
use std::io;
use std::path::PathBuf;
use std::rc::Rc;

use super::faults::{self, Installed, Point};
use super::tests::{assert_same, header, sample_events, TempRoot, BOTH};
use super::tests_crash::log_path;
use super::*;

/// The injected failure of a step, named by `what`.
fn injected(what: &str) -> io::Error {
    io::Error::other(format!("injected {what} failure"))
}

/// Fail the step after `point` once, with an error `error` makes.
pub(super) fn fail_once(point: Point, error: impl Fn() -> io::Error + 'static) -> Installed {
    let mut armed = true;
    faults::install(move |p, _| {
        if p == point && std::mem::take(&mut armed) {
            return Err(error());
        }
        Ok(())
    })
}

/// Fail the fsync of the next append once (its rollback works).
pub(super) fn fail_next_sync() -> Installed {
    fail_once(Point::AppendSync, || injected("fsync"))
}

/// Count the hits of `point` in `hits`, running `act` with the hit's
/// number (from 1) and path at each.
fn at(
    point: Point,
    hits: &Rc<Cell<usize>>,
    mut act: impl FnMut(usize, &Path) -> io::Result<()> + 'static,
) -> Installed {
    let hits = hits.clone();
    faults::install(move |p, path| {
        if p != point {
            return Ok(());
        }
        hits.set(hits.get() + 1);
        act(hits.get(), path)
    })
}

/// A log of `sample_events` for `id` whose first 12 events are one batch
/// and the rest another; returns the bytes of the first batch's log and of
/// the whole log (which is what the file holds).
fn two_batch_log(b: &mut JsonlBackend, id: &str) -> (Vec<u8>, Vec<u8>) {
    let events = sample_events();
    let h = header(id, None);
    b.append(&h, &events[..12], true).unwrap();
    let path = b.path_of(&h).unwrap();
    let short = fs::read(&path).unwrap();
    b.append(&h, &events[12..], false).unwrap();
    (short, fs::read(&path).unwrap())
}

/// docs/formats.md §3.5: stat, read, stat again, retry until both stats
/// agree. A log that grows between the read and the second stat is read
/// again, and the load returns the second read with its revision.
#[test]
fn a_full_read_retries_when_the_log_changes_mid_read() {
    for compression in BOTH {
        let root = TempRoot::new("reread");
        let mut b = JsonlBackend::open(&root.0, compression).unwrap();
        let (short, full) = two_batch_log(&mut b, "m");
        let path = log_path(&root, "m", compression);
        fs::write(&path, &short).unwrap();
        let hits = Rc::new(Cell::new(0));
        let grown = full.clone();
        let hook = at(Point::ReadRestat, &hits, move |n, p| {
            if n == 1 {
                fs::write(p, &grown)?;
            }
            Ok(())
        });
        let loaded = b.load("m").unwrap().unwrap();
        drop(hook);
        assert_eq!(hits.get(), 2, "{compression:?}: read once more");
        assert!(loaded.torn.is_none());
        assert_same(&loaded.values(), &sample_events());
        assert_eq!(Some(loaded.revision), b.revision("m").unwrap());

        // A log that changes at every read: `io.read-unstable` once the
        // retries are used up; the log itself is left as it was.
        let hits = Rc::new(Cell::new(0));
        let versions = [short.clone(), full.clone()];
        // The file holds the whole log: the odd hits shorten it, the even
        // ones restore it (the size changes at every hit).
        let hook = at(Point::ReadRestat, &hits, move |n, p| {
            fs::write(p, &versions[(n + 1) % 2])
        });
        let e = b.load("m").unwrap_err();
        drop(hook);
        assert_eq!((e.rule, e.status), (Rule::IoReadUnstable, Status::Io));
        assert!(e.message.contains(&path.display().to_string()), "{e:?}");
        assert_eq!(hits.get(), read::STABLE_TRIES);
        assert_eq!(fs::read(&path).unwrap(), full, "the last change wrote it");
        assert_same(&b.load("m").unwrap().unwrap().values(), &sample_events());
    }
}

/// The streaming read (windowed open) checks the same: a log that changed
/// during the read answers `None`, so the caller reads the whole log.
#[test]
fn a_streaming_read_of_a_changing_log_defers_to_the_full_read() {
    for compression in BOTH {
        let root = TempRoot::new("restream");
        let mut b = JsonlBackend::open(&root.0, compression).unwrap();
        let (short, full) = two_batch_log(&mut b, "s");
        let path = log_path(&root, "s", compression);
        fs::write(&path, &short).unwrap();
        let hits = Rc::new(Cell::new(0));
        let hook = at(Point::StreamRestat, &hits, move |_, p| fs::write(p, &full));
        let mut streamed = 0;
        let mut sink = |_: &Value, batch: Vec<Stored>| {
            streamed += batch.len();
            Ok(())
        };
        let end = b.load_streaming("s", &mut sink).unwrap();
        drop(hook);
        assert_eq!(hits.get(), 1);
        assert!(end.is_none(), "{compression:?}: a changed log is not taken");
        assert_eq!(streamed, 12, "what was streamed is the first read's");
        // Unchanged, the stream is taken, with the revision of the file.
        let mut streamed = 0;
        let mut sink = |_: &Value, batch: Vec<Stored>| {
            streamed += batch.len();
            Ok(())
        };
        let end = b.load_streaming("s", &mut sink).unwrap().unwrap();
        assert_eq!(streamed, sample_events().len());
        assert_eq!(Some(end.revision), b.revision("s").unwrap());
    }
}

/// `revision` after the log was found (listed in a project directory, or
/// remembered): a stat that finds nothing means "absent", any other stat
/// failure is reported (`io.stat`, `DSH_E_IO`).
#[test]
fn a_revision_stat_after_discovery_tells_absence_from_failure() {
    for compression in BOTH {
        let root = TempRoot::new("revstat");
        let mut b = JsonlBackend::open(&root.0, compression).unwrap();
        let events = sample_events();
        for id in ["v", "w"] {
            b.append(&header(id, None), &events, true).unwrap();
        }
        let rev = |b: &mut JsonlBackend, id| b.revision(id).unwrap().unwrap();
        let (rv, rw) = (rev(&mut b, "v"), rev(&mut b, "w"));
        // A fresh backend remembers no path: `revision` finds the log first.
        drop(b);
        let mut b = JsonlBackend::open(&root.0, compression).unwrap();
        let v = log_path(&root, "v", compression);

        let hook = fail_once(Point::RevisionStat, || {
            io::Error::from_raw_os_error(libc::EACCES)
        });
        let e = b.revision("v").unwrap_err();
        drop(hook);
        assert_eq!((e.rule, e.status), (Rule::IoStat, Status::Io));
        assert!(e.message.contains(&v.display().to_string()), "{e:?}");
        assert!(e.message.contains("os error 13"), "{e:?}");
        assert_eq!(rev(&mut b, "v"), rv, "nothing changed");

        let hook = fail_once(Point::RevisionStat, || {
            io::Error::from_raw_os_error(libc::ENOENT)
        });
        assert_eq!(b.revision("v").unwrap(), None);
        drop(hook);

        // A remembered path (after a load) fails the same way.
        assert_same(&b.load("w").unwrap().unwrap().values(), &events);
        let hook = fail_once(Point::RevisionStat, || {
            io::Error::from_raw_os_error(libc::EIO)
        });
        assert_eq!(b.revision("w").unwrap_err().status, Status::Io);
        drop(hook);
        assert_eq!(rev(&mut b, "w"), rw);

        // Removed between the lookup and the stat: absent, for a found
        // path and for a remembered one alike.
        for id in ["v", "w"] {
            let hits = Rc::new(Cell::new(0));
            let hook = at(Point::RevisionStat, &hits, |_, p| {
                match fs::remove_file(p) {
                    Err(e) if !layout::is_absent(&e) => Err(e),
                    _ => Ok(()),
                }
            });
            assert_eq!(b.revision(id).unwrap(), None, "{id}");
            drop(hook);
            assert_eq!(hits.get(), 1, "{id}: one stat, after the lookup");
        }
    }
}

/// `list` stats each log it found for its revision: a log (or its whole
/// session directory) removed before that stat is left out, the others are
/// listed with their revisions; any other stat failure is reported.
#[test]
fn a_log_removed_between_listing_and_stat_is_omitted() {
    for compression in BOTH {
        let root = TempRoot::new("liststat");
        let mut b = JsonlBackend::open(&root.0, compression).unwrap();
        let events = sample_events();
        for id in ["a", "b", "c"] {
            b.append(&header(id, None), &events[..3], true).unwrap();
        }
        b.append(&header("d", Some("/p")), &events[..3], true)
            .unwrap();
        let rev_a = b.revision("a").unwrap().unwrap();
        let rev_d = b.revision("d").unwrap().unwrap();
        let seen: Rc<RefCell<Vec<PathBuf>>> = Rc::default();
        let log = seen.clone();
        let hook = faults::install(move |p, path| {
            if p != Point::ListStat {
                return Ok(());
            }
            log.borrow_mut().push(path.to_path_buf());
            let dir = path.parent().expect("a session directory");
            match dir.file_name().and_then(|n| n.to_str()) {
                Some("b") => fs::remove_file(path),
                Some("c") => fs::remove_dir_all(dir),
                _ => Ok(()),
            }
        });
        let listed = b.list().unwrap();
        drop(hook);
        let ids: Vec<String> = listed
            .iter()
            .map(|l| layout::header_js_id(&l.header).to_string_lossy())
            .collect();
        let mut ids_sorted = ids.clone();
        ids_sorted.sort();
        assert_eq!(ids_sorted, ["a", "d"], "{compression:?}");
        for l in &listed {
            let id = layout::header_js_id(&l.header).to_string_lossy();
            let expected = if id == "a" { &rev_a } else { &rev_d };
            assert_eq!(&l.revision, expected, "{id}");
        }
        let mut stat_paths = seen.borrow().clone();
        stat_paths.sort();
        let mut expected: Vec<PathBuf> = ["a", "b", "c"]
            .iter()
            .map(|id| log_path(&root, id, compression))
            .collect();
        expected.push(b.path_of(&header("d", Some("/p"))).unwrap());
        expected.sort();
        assert_eq!(stat_paths, expected, "each log found is stat'ed once");
        assert_eq!(b.revision("b").unwrap(), None);
        assert_eq!(b.revision("c").unwrap(), None);

        let hook = fail_once(Point::ListStat, || io::Error::from_raw_os_error(libc::EIO));
        let e = b.list().unwrap_err();
        drop(hook);
        assert_eq!((e.rule, e.status), (Rule::IoStat, Status::Io));
        assert_eq!(b.list().unwrap().len(), 2);
    }
}

/// docs/formats.md §3.4: an append whose write or fsync fails is rolled
/// back; when the rollback fails too, both failures are reported
/// (`io.write`, `DSH_E_IO`), and the committed bytes are untouched.
#[test]
fn a_failed_append_whose_rollback_fails_reports_both() {
    for compression in BOTH {
        let root = TempRoot::new("rollbackfail");
        let mut b = JsonlBackend::open(&root.0, compression).unwrap();
        let h = header("f", None);
        let events = sample_events();
        b.append(&h, &events[..10], true).unwrap();
        let path = log_path(&root, "f", compression);
        let committed = fs::read(&path).unwrap();

        // The rollback works: only the fsync failure is reported.
        let hook = fail_next_sync();
        let e = b.append(&h, &events[10..12], false).unwrap_err();
        drop(hook);
        assert_eq!((e.rule, e.status), (Rule::IoWrite, Status::Io));
        assert!(e.message.contains("injected fsync failure"), "{e:?}");
        assert!(!e.message.contains("rolling back"), "{e:?}");
        assert_eq!(fs::read(&path).unwrap(), committed);

        // The rollback's truncate fails as well.
        let points: Rc<RefCell<Vec<Point>>> = Rc::default();
        let log = points.clone();
        let hook = faults::install(move |p, _| {
            log.borrow_mut().push(p);
            match p {
                Point::AppendSync => Err(injected("fsync")),
                Point::RollbackTruncate => Err(injected("truncate")),
                _ => Ok(()),
            }
        });
        let e = b.append(&h, &events[10..12], false).unwrap_err();
        drop(hook);
        assert_eq!(
            *points.borrow(),
            [Point::AppendSync, Point::RollbackTruncate]
        );
        assert_eq!((e.rule, e.status), (Rule::IoWrite, Status::Io));
        for part in [
            path.display().to_string(),
            "injected fsync failure".to_string(),
            "injected truncate failure".to_string(),
            format!("rolling back to {} bytes", committed.len()),
        ] {
            assert!(e.message.contains(&part), "{part:?} in {e:?}");
        }
        // Not rolled back: the batch follows the committed bytes, which
        // are unchanged and read back as they were.
        let now = fs::read(&path).unwrap();
        assert!(now.len() > committed.len());
        assert_eq!(now[..committed.len()], committed[..]);
        let loaded = b.load("f").unwrap().unwrap();
        assert_same(&loaded.values()[..10], &events[..10]);

        // The writer retries the batch. While the cut back still fails,
        // nothing is written after the bytes whose write failed.
        let hook = fail_once(Point::RollbackTruncate, || injected("truncate"));
        let e = b.append(&h, &events[10..12], false).unwrap_err();
        drop(hook);
        assert_eq!(e.rule, Rule::IoTruncate, "{e:?}");
        assert_eq!(fs::read(&path).unwrap(), now);
        // Once the disk takes it, the log is cut back to its last durable
        // record and the batch follows it once: no seq twice, no gap.
        b.append(&h, &events[10..12], false).unwrap();
        b.append(&h, &events[12..], false).unwrap();
        let loaded = b.load("f").unwrap().unwrap();
        assert_same(&loaded.values(), &events);
    }
}

#[test]
fn a_publish_whose_directory_fsync_fails_is_finished_by_the_retry() {
    for compression in BOTH {
        let root = TempRoot::new("publishdirsync");
        let mut b = JsonlBackend::open(&root.0, compression).unwrap();
        let h = header("p", None);
        let events = sample_events();
        let hook = fail_once(Point::PublishDirSync, || injected("directory fsync"));
        let e = b.append(&h, &events[..6], true).unwrap_err();
        drop(hook);
        assert_eq!((e.rule, e.status), (Rule::IoFsync, Status::Io), "{e:?}");
        // The writer retries from seq 0 with what was appended since: the
        // publish is finished, and nothing is written twice.
        b.append(&h, &events[..12], true).unwrap();
        b.append(&h, &events[12..], false).unwrap();
        let loaded = b.load("p").unwrap().unwrap();
        assert_same(&loaded.values(), &events);
        assert!(loaded.torn.is_none());
        // Once finished, the log is refused as any existing one is.
        let e = b.append(&h, &events[..1], true).unwrap_err();
        assert_eq!(e.rule, Rule::JsonlExistsOnMaterialize);
    }
}

//! Floors: the least any implementation must do besides the raw parse,
//! measured on the same bytes in the same process, so the table shows how
//! close to the machine each ratio target sits.
//!
//! * Append: keep each event's bytes (a copy of the line the raw parse just
//!   read, into new memory). An append that validates and keeps its event
//!   costs at least the raw parse plus this.
//! * Open: read the stored bytes and decompress them into one buffer the
//!   process keeps (JSONL: the session's file; SQLite: every row of the
//!   session, each compressed `data` value inflated). An open that checks
//!   what it loads costs at least this plus the raw parse.
//! * Write-behind to the default (zstd) JSONL log: the append's floor
//!   (the raw parse and keeping each line) and compressing the same bytes
//!   at the appends' level 1, in frames of 1 MiB, all of it spread over
//!   every core of the machine. A write-behind that ends durable does at
//!   least this work before its flush returns.
//! * Open, each event kept apart: the same reading and decompressing, but
//!   into a reused buffer, each event's bytes then copied into an
//!   allocation of its own (JSONL: each line; SQLite: each row). A session
//!   holds every event on its own, so this is the open's floor with the
//!   library's way of keeping events.

use std::path::{Path, PathBuf};

use crate::util::{Secs, Timer};

/// Copy each line to the end of `kept`, one buffer sized for every line
/// up front (so it never moves and, being large, is mapped apart from the
/// heap and returned to the system when dropped); the time.
pub fn keep_lines(lines: &[&str], kept: &mut Vec<u8>) -> Secs {
    let t = Timer::start();
    for l in lines {
        kept.extend_from_slice(l.as_bytes());
    }
    t.stop()
}

/// The floor of an open of session `id` in the store `config` (the bench's
/// own `{"backend": ..., "path": ...}`), whose log is `bytes` bytes of
/// JSON: read and decompress every stored byte into one kept buffer.
/// Returns the time and the number of bytes kept.
pub fn read_store(config: &str, id: &str, bytes: u64) -> (Secs, usize) {
    let (jsonl, root) = store_of(config);
    let mut kept = Vec::with_capacity(bytes as usize + (1 << 20));
    let t = Timer::start();
    if jsonl {
        read_jsonl(&root, id, &mut kept);
    } else {
        read_sqlite(&root, id, &mut kept);
    }
    let d = t.stop();
    std::hint::black_box(&kept);
    (d, kept.len())
}

/// The floor of a write-behind of `lines` to a zstd JSONL log (see the
/// module's documentation), given the raw parse's CPU time `parse_cpu`:
/// the least wall time on `cores` cores, with the keeping and the
/// compression timed here.
pub fn write_behind_zstd(lines: &[&str], parse_cpu: f64, cores: usize) -> WriteBehindFloor {
    let mut kept = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    let keep = keep_lines(lines, &mut kept);
    let mut compressor = zstd::bulk::Compressor::new(1).expect("zstd level 1");
    let mut frame = Vec::new();
    let mut written = 0;
    let t = Timer::start();
    for piece in kept.chunks(1 << 20) {
        frame.clear();
        frame.reserve(zstd::zstd_safe::compress_bound(piece.len()));
        written += compressor
            .compress_to_buffer(piece, &mut frame)
            .expect("a piece compresses");
    }
    let compress = t.stop();
    std::hint::black_box(written);
    WriteBehindFloor {
        seconds: (parse_cpu + keep.cpu + compress.cpu) / cores as f64,
        keep,
        compress,
        cores,
    }
}

/// What [`write_behind_zstd`] measured.
pub struct WriteBehindFloor {
    /// The floor: least wall seconds of the write-behind.
    pub seconds: f64,
    /// Keeping each line (a copy into one buffer sized up front).
    pub keep: Secs,
    /// Compressing the kept bytes at level 1, 1 MiB a frame.
    pub compress: Secs,
    /// The cores the work is spread over.
    pub cores: usize,
}

/// [`read_store`], each event kept in an allocation of its own (see the
/// module's documentation); the time and the number of bytes kept.
pub fn read_store_per_event(config: &str, id: &str) -> (Secs, usize) {
    let (jsonl, root) = store_of(config);
    let mut kept: Vec<Box<[u8]>> = Vec::new();
    let t = Timer::start();
    if jsonl {
        read_jsonl_per_line(&root, id, &mut kept);
    } else {
        read_sqlite_per_row(&root, id, &mut kept);
    }
    let d = t.stop();
    std::hint::black_box(&kept);
    (d, kept.iter().map(|e| e.len()).sum())
}

/// Whether the bench's store `config` is a JSONL store (else SQLite; no
/// other backend has a floor), and its path.
fn store_of(config: &str) -> (bool, PathBuf) {
    let v: serde_json::Value = serde_json::from_str(config).expect("bench store config");
    let root = PathBuf::from(v["path"].as_str().expect("store path"));
    match v["backend"].as_str() {
        Some("jsonl") => (true, root),
        Some("sqlite") => (false, root),
        other => panic!("no floor for backend {other:?}"),
    }
}

/// The session's log file under `root` (`<root>/<project>/<id>/session.jsonl[.zstd]`).
fn jsonl_file(root: &Path, id: &str) -> PathBuf {
    for project in std::fs::read_dir(root).expect("store root") {
        let dir = project.unwrap().path().join(id);
        for name in ["session.jsonl.zstd", "session.jsonl"] {
            if dir.join(name).is_file() {
                return dir.join(name);
            }
        }
    }
    panic!("no log of {id} under {}", root.display())
}

fn read_jsonl(root: &Path, id: &str, kept: &mut Vec<u8>) {
    let path = jsonl_file(root, id);
    if path.extension().is_some_and(|e| e == "zstd") {
        let file = std::fs::read(&path).unwrap();
        zstd::stream::copy_decode(&file[..], &mut *kept).expect("zstd log decodes");
    } else {
        std::io::Read::read_to_end(&mut std::fs::File::open(&path).unwrap(), kept).unwrap();
    }
}

fn read_sqlite(db: &Path, id: &str, kept: &mut Vec<u8>) {
    each_row(db, id, |row, inflate| append_row(row, inflate, kept));
}

/// Call `f` on each stored row of the session, in seq order, with one
/// decompressor for its `data` values.
fn each_row(
    db: &Path,
    id: &str,
    mut f: impl FnMut(&rusqlite::Row, &mut zstd::bulk::Decompressor<'static>),
) {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let mut st = conn
        .prepare(
            "SELECT seq, type, time, data, source_event_seqs, surface_op, ignorable \
             FROM events WHERE session_id = ?1 ORDER BY seq",
        )
        .unwrap();
    let mut inflate = zstd::bulk::Decompressor::new().unwrap();
    let mut rows = st.query([id]).unwrap();
    while let Some(r) = rows.next().unwrap() {
        f(r, &mut inflate);
    }
}

/// The bytes of one row's columns to the end of `out`, its compressed
/// `data` inflated.
fn append_row(r: &rusqlite::Row, inflate: &mut zstd::bulk::Decompressor, out: &mut Vec<u8>) {
    use rusqlite::types::ValueRef;
    for i in 0..7 {
        match r.get_ref(i).unwrap() {
            ValueRef::Text(t) => out.extend_from_slice(t),
            ValueRef::Blob(b) if i == 3 => {
                let n = zstd::zstd_safe::get_frame_content_size(b)
                    .ok()
                    .flatten()
                    .expect("the writer's frames state their size")
                    as usize;
                let at = out.len();
                out.resize(at + n, 0);
                let got = inflate
                    .decompress_to_buffer(b, &mut out[at..])
                    .expect("stored frame inflates");
                assert_eq!(got, n);
            }
            ValueRef::Blob(b) => out.extend_from_slice(b),
            ValueRef::Integer(n) => out.extend_from_slice(&n.to_le_bytes()),
            _ => {}
        }
    }
}

/// The log decoded 1 MiB at a time into one reused buffer; each complete
/// line copied out into its own allocation.
fn read_jsonl_per_line(root: &Path, id: &str, kept: &mut Vec<Box<[u8]>>) {
    use std::io::Read;
    let path = jsonl_file(root, id);
    let file = std::fs::read(&path).unwrap();
    let mut reader: Box<dyn Read> = if path.extension().is_some_and(|e| e == "zstd") {
        Box::new(zstd::stream::read::Decoder::new(&file[..]).expect("zstd log decodes"))
    } else {
        Box::new(&file[..])
    };
    let mut buf = vec![0u8; 1 << 20];
    let mut have = 0;
    loop {
        let n = reader.read(&mut buf[have..]).expect("log reads");
        have += n;
        let mut start = 0;
        while let Some(i) = memchr::memchr(b'\n', &buf[start..have]) {
            kept.push(buf[start..start + i].into());
            start += i + 1;
        }
        buf.copy_within(start..have, 0);
        have -= start;
        if n == 0 {
            break;
        }
        if have == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
    }
    if have > 0 {
        kept.push(buf[..have].into());
    }
}

/// Each row of the session into its own allocation, its compressed `data`
/// inflated into it.
fn read_sqlite_per_row(db: &Path, id: &str, kept: &mut Vec<Box<[u8]>>) {
    let mut row = Vec::new();
    each_row(db, id, |r, inflate| {
        row.clear();
        append_row(r, inflate, &mut row);
        kept.push(row.as_slice().into());
    });
}

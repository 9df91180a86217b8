//! Readers beside a writer (`"readOnly": true`), through the core `Store`
//! API (with tests/store_support, which takes the C ABI's JSON texts): any
//! number of read-only stores next to the one writer, on JSONL (zstd and
//! raw) and SQLite; they see what the writer flushed, keep reading while it
//! appends, never write (no repair, no end-seed marker, the files stay
//! byte-identical) and refuse every write with `store.read-only`.

mod store_support;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ::dsh_session::json::Value;
use store_support::*;

const BACKENDS: [&str; 3] = ["jsonl-zstd", "jsonl-raw", "sqlite"];

/// The writer's configuration of `backend` under `dir`, and the reader's.
fn configs(backend: &str, dir: &Path) -> (String, String) {
    let (backend, extra, path) = match backend {
        "jsonl-zstd" => ("jsonl", r#","compression":"zstd""#, dir.join("root")),
        "jsonl-raw" => ("jsonl", r#","compression":"none""#, dir.join("root")),
        _ => ("sqlite", "", dir.join("store.db")),
    };
    let path = Value::str(path.to_str().unwrap()).to_json();
    let writer = format!(r#"{{"backend":"{backend}","path":{path},"batchWindowMs":5{extra}}}"#);
    let reader = format!(r#"{{"backend":"{backend}","path":{path},"readOnly":true{extra}}}"#);
    (declaring(&writer), declaring(&reader))
}

fn turn(s: &Session, n: u64) {
    s.append_ok("turn/start", &format!(r#"{{"turn":{n}}}"#), None);
    s.append_ok(
        "user/message",
        &format!(
            r#"{{"id":"u{n}","role":"user","content":[{{"type":"text","text":"question {n}"}}],"source":{{"kind":"user"}}}}"#
        ),
        Some(r#"{"surfaceOp":"append"}"#),
    );
    s.append_ok(
        "turn/end",
        &format!(r#"{{"turn":{n},"reason":{{"kind":"completed"}}}}"#),
        None,
    );
}

fn texts(events: &Value) -> Vec<String> {
    events
        .as_array()
        .unwrap()
        .iter()
        .map(Value::to_json)
        .collect()
}

/// Every file under `dir` with its bytes, but SQLite's `-shm`: that is the
/// WAL index in shared memory, where every reader records what it reads.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = file_tree(dir);
    files.retain(|(p, _)| !p.to_string_lossy().ends_with("-shm"));
    files
}

#[test]
fn readers_see_what_the_writer_flushed_and_refuse_every_write() {
    for backend in BACKENDS {
        let dir = temp_dir("readers");
        let (wc, rc) = configs(backend, &dir);
        let writer = Store::open(&wc).unwrap();
        let s = writer.create(r#"{"id":"a"}"#).unwrap();
        turn(&s, 1);
        assert_eq!(s.flush().0, DSH_OK);
        let before = snapshot(&dir);

        // Two readers at once, next to the writer.
        let r1 = Store::open(&rc).unwrap_or_else(|e| panic!("{backend}: reader: {e:?}"));
        let r2 = Store::open(&rc).unwrap();
        let (rs, repaired) = r1.open_session("a").unwrap();
        assert_eq!(texts(&rs.events()), texts(&s.events()), "{backend}");
        let repaired = repaired
            .as_object()
            .and_then(|o| o.get("repaired"))
            .cloned();
        assert_eq!(
            repaired.as_ref().and_then(Value::as_array).map(Vec::len),
            Some(0)
        );
        let (rs2, _) = r2.open_session("a").unwrap();
        assert_eq!(texts(&rs2.events()), texts(&s.events()), "{backend}");
        assert_eq!(rs.derive(), s.derive(), "{backend}");
        assert_eq!(r1.list().as_array().unwrap().len(), 1, "{backend}");

        // Every write is refused, and nothing changes.
        let (st, text) = rs.append("turn/start", r#"{"turn":2}"#, None);
        assert_eq!(
            (st, rule(&text).as_str()),
            (DSH_E_CONFLICT, "store.read-only"),
            "{backend}: {text}"
        );
        let (st, text) = r1.create(r#"{"id":"b"}"#).err().unwrap();
        assert_eq!(
            (st, rule(&text).as_str()),
            (DSH_E_CONFLICT, "store.read-only"),
            "{text}"
        );
        let (st, text) = rs.fork(-1, r#"{"id":"c"}"#).err().unwrap();
        assert_eq!(
            (st, rule(&text).as_str()),
            (DSH_E_CONFLICT, "store.read-only"),
            "{text}"
        );
        let (st, text) = r2.delete("a");
        assert_eq!(
            (st, rule(&text).as_str()),
            (DSH_E_CONFLICT, "store.read-only"),
            "{text}"
        );
        assert_eq!(rs.flush().0, DSH_OK, "{backend}: nothing to flush");
        drop((rs, rs2));
        assert_eq!(r1.close().0, DSH_OK);
        assert_eq!(r2.close().0, DSH_OK);
        assert!(
            before == snapshot(&dir),
            "{backend}: a reader changed the store's files"
        );

        // The writer goes on; a new read sees it.
        turn(&s, 2);
        assert_eq!(s.flush().0, DSH_OK);
        let r = Store::open(&rc).unwrap();
        let (rs, _) = r.open_session("a").unwrap();
        assert_eq!(texts(&rs.events()), texts(&s.events()), "{backend}");
    }
}

#[test]
fn a_reader_keeps_reading_while_the_writer_appends_and_flushes() {
    for backend in BACKENDS {
        let dir = temp_dir("readers-live");
        let (wc, rc) = configs(backend, &dir);
        let writer = Store::open(&wc).unwrap();
        let s = writer.create(r#"{"id":"a"}"#).unwrap();
        turn(&s, 1);
        assert_eq!(s.flush().0, DSH_OK);
        let done = Arc::new(AtomicBool::new(false));
        let reading = {
            let (done, rc) = (done.clone(), rc.clone());
            std::thread::spawn(move || {
                let reader = Store::open(&rc).unwrap();
                let mut seen = Vec::new();
                while !done.load(Ordering::SeqCst) || seen.len() < 3 {
                    let (rs, _) = reader.open_session("a").unwrap();
                    seen.push(texts(&rs.events()));
                    rs.derive();
                }
                seen
            })
        };
        for n in 2..=40 {
            turn(&s, n);
            // A pace an agent keeps, so the reads overlap the writes.
            std::thread::sleep(std::time::Duration::from_millis(2));
            if n % 3 != 0 {
                assert_eq!(s.flush().0, DSH_OK);
            }
        }
        assert_eq!(s.flush().0, DSH_OK);
        done.store(true, Ordering::SeqCst);
        let seen = reading.join().unwrap();
        let all = texts(&s.events());
        let mut last = 0;
        for read in &seen {
            assert!(
                read.len() >= 3,
                "{backend}: a read saw less than the first flush"
            );
            assert!(read.len() >= last, "{backend}: a later read saw less");
            assert_eq!(
                read[..],
                all[..read.len()],
                "{backend}: a read is not a prefix of the log"
            );
            last = read.len();
        }
        let (rs, _) = Store::open(&rc).unwrap().open_session("a").unwrap();
        assert_eq!(texts(&rs.events()), all, "{backend}: the last read");
        eprintln!("{backend}: {} reads while the writer wrote", seen.len());
    }
}

#[test]
fn a_reader_leaves_a_torn_tail_to_the_writer() {
    let (dir, config) = raw_jsonl_store(
        "readers-torn",
        "t",
        &[
            r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
            r#"{"type":"plugin/note","seq":1,"ti"#,
        ],
    );
    let before = snapshot(&dir);
    let reader = config.replacen('{', r#"{"readOnly":true,"#, 1);
    let store = Store::open(&declaring(&reader)).unwrap();
    let (s, _) = store.open_session("t").unwrap();
    // The stored log as it is: no torn record, no closer, no end-seed.
    assert_eq!(types_of(s.events().as_array().unwrap()), ["turn/start"]);
    drop(s);
    drop(store);
    assert!(before == snapshot(&dir), "the reader cut or appended");
    // The writer's open repairs it as always.
    let store = Store::open(&declaring(&config)).unwrap();
    let (s, _) = store.open_session("t").unwrap();
    assert_eq!(
        types_of(s.events().as_array().unwrap()),
        ["turn/start", "turn/end", "session/end-seed"]
    );
}

#[test]
fn an_exclusive_sqlite_writer_admits_no_reader() {
    let dir = temp_dir("readers-exclusive");
    let (wc, rc) = configs("sqlite", &dir);
    let exclusive = wc.replacen('{', r#"{"locking":"exclusive","#, 1);
    let writer = Store::open(&exclusive).unwrap();
    let s = writer.create(r#"{"id":"a"}"#).unwrap();
    turn(&s, 1);
    assert_eq!(s.flush().0, DSH_OK);
    let (st, text) = Store::open(&rc)
        .err()
        .expect("a reader beside an exclusive writer");
    assert_eq!(
        (st, rule(&text).as_str()),
        (DSH_E_CONFLICT, "store.locked"),
        "{text}"
    );
    assert!(text.contains("exclusive"), "{text}");
    drop(s);
    drop(writer);
    // Once the writer is gone the reader opens.
    let r = Store::open(&rc).unwrap();
    assert_eq!(r.list().as_array().unwrap().len(), 1);
}

#[test]
fn a_reader_creates_nothing_and_bad_reader_configs_are_refused() {
    let dir = temp_dir("readers-none");
    for backend in ["jsonl-zstd", "sqlite"] {
        let (_, rc) = configs(backend, &dir);
        let (st, text) = Store::open(&rc).err().expect("no store to read");
        assert_eq!(
            (st, rule(&text).as_str()),
            (DSH_E_NOT_FOUND, "store.not-found"),
            "{text}"
        );
    }
    assert_eq!(
        std::fs::read_dir(&*dir).unwrap().count(),
        0,
        "a reader created files"
    );
    // A reader of a memory store, exclusive locking on JSONL: the core's
    // rules. (What is no configuration at all as JSON, a `"locking"` of
    // `"none"`, a `"readOnly"` or `"trimHeap"` that is no boolean, only
    // the C ABI can be given: crates/ffi-impl/tests/readers.rs.)
    for bad in [
        r#"{"readOnly":true}"#,
        r#"{"backend":"jsonl","path":"/tmp/x","locking":"exclusive"}"#,
    ] {
        let (st, text) = Store::open(bad).err().expect(bad);
        assert_eq!(
            (st, rule(&text).as_str()),
            (DSH_E_INVALID_ARGUMENT, "config.invalid"),
            "{bad}: {text}"
        );
    }
}

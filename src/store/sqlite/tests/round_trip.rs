//! Round trips, headers, sequencing, opening rules and foreign databases.

use crate::rule::Rule;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::*;
use crate::json;

static NEXT_DIR: AtomicUsize = AtomicUsize::new(0);

/// A private temporary directory, removed on drop.
pub(super) struct TempDir(pub(super) PathBuf);

impl TempDir {
    pub(super) fn new(tag: &str) -> TempDir {
        let n = NEXT_DIR.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("dsh-sqlite-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        crate::store::platform::create_dir_private(&path).unwrap();
        TempDir(path)
    }

    pub(super) fn db(&self) -> PathBuf {
        self.0.join("store.db")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(super) fn open(path: &Path) -> SqliteBackend {
    SqliteBackend::open(path, 5000).unwrap()
}

pub(super) fn header(id: &str) -> Value {
    json::parse(&format!(
        r#"{{"version":0,"id":"{id}","createdAt":1700000000000}}"#
    ))
    .unwrap()
}

/// An event from JSON text of its envelope.
pub(super) fn ev(text: &str) -> Arc<Event> {
    Arc::new(Event::from_envelope(json::parse(text).unwrap(), "test event").unwrap())
}

pub(super) fn values(events: &[Arc<Event>]) -> Vec<Value> {
    events.iter().map(|e| e.to_value()).collect()
}

/// A text, reasoning or tool-call delta at `seq`.
pub(super) fn delta(seq: u64, time: i64, kind: &str, text: &str) -> Arc<Event> {
    let chunk = match kind {
        "tool" => format!(
            r#"{{"type":"tool-call-delta","index":0,"id":"call_1","name":"ls","argumentsDelta":"{text}"}}"#
        ),
        "tool-anon" => format!(
            r#"{{"type":"tool-call-delta","index":1,"id":"call_2","argumentsDelta":"{text}"}}"#
        ),
        _ => format!(r#"{{"type":"{kind}-delta","index":0,"text":"{text}"}}"#),
    };
    ev(&format!(
        r#"{{"type":"assistant/chunk","seq":{seq},"time":{time},"data":{{"turn":1,"step":1,"chunk":{chunk}}}}}"#
    ))
}

pub(super) fn plain(seq: u64, ty: &str, data: &str, extra: &str) -> Arc<Event> {
    ev(&format!(
        r#"{{"type":"{ty}","seq":{seq},"time":{},"data":{data}{extra}}}"#,
        1000 + seq
    ))
}

/// A raw connection to inspect or damage a database (the backend must be closed).
pub(super) fn raw(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).unwrap()
}

fn count(conn: &rusqlite::Connection, sql: &str) -> i64 {
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// Every event shape the backend must round-trip.
fn every_shape() -> Vec<Arc<Event>> {
    let mut out = vec![
        plain(0, "turn/start", r#"{"turn":1}"#, ""),
        plain(
            1,
            "user/message",
            r#"{"message":{"role":"user","content":"hi"}}"#,
            r#","sourceEventSeqs":[],"surfaceOp":"append""#,
        ),
    ];
    for (i, t) in [5000, 5003, 5001, 5001, 9000, 9007].into_iter().enumerate() {
        out.push(delta(2 + i as u64, t, "text", &format!("t{i}")));
    }
    out.push(plain(8, "step/start", r#"{"turn":1,"step":2}"#, ""));
    out.push(delta(9, 1, "text", "two"));
    out.push(delta(10, 2, "text", "runs"));
    out.push(plain(11, "tool/call", r#"{"id":"call_1"}"#, ""));
    for i in 0..4 {
        out.push(delta(12 + i, 7, "tool", &format!("{{\\\"a\\\":{i}}}")));
    }
    for i in 0..3 {
        out.push(delta(16 + i, 8, "tool-anon", "x"));
    }
    for i in 0..3 {
        out.push(delta(
            19 + i,
            9,
            "reasoning",
            &format!("\\ud800lone{i}\\udc00"),
        ));
    }
    out.push(plain(
        22,
        "x/custom",
        r#"{"k":[1,2,{"z":null}]}"#,
        r#","ignorable":true"#,
    ));
    out.push(plain(23, "text-chunks", "null", r#","ignorable":true"#));
    let big = "ab".repeat(6000);
    out.push(ev(&format!(
        r#"{{"type":"assistant/message","seq":24,"time":1,"data":{{"message":{{"role":"assistant","content":"{big}"}}}},"surfaceOp":{{"kind":"replace","from":1}},"sourceEventSeqs":[2,3,4]}}"#
    )));
    let mut noise = String::new();
    let mut rng = crate::test_rng::Rng(0x2545_f491_4f6c_dd1d);
    while noise.len() < 6000 {
        noise.push(char::from_u32(0x4e00 + (rng.next() % 20000) as u32).unwrap());
    }
    out.push(plain(
        25,
        "tool/result",
        &format!(r#"{{"output":"{noise}"}}"#),
        "",
    ));
    out.push(plain(
        26,
        "user/message",
        r#"{"\udc00k":"v\ud800","n":-0.5e-7,"e":1e300}"#,
        "",
    ));
    out.push(plain(
        27,
        "turn/end",
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        "",
    ));
    out
}

#[test]
fn round_trip_of_every_shape() {
    let dir = TempDir::new("roundtrip");
    let h = header("s1");
    let first = every_shape();
    let mut second: Vec<Arc<Event>> = (0..1500)
        .map(|i| delta(28 + i, 100 + i as i64, "text", "w"))
        .collect();
    second.push(plain(
        1528,
        "turn/end",
        r#"{"turn":2,"reason":{"kind":"completed"}}"#,
        "",
    ));
    let third: Vec<Arc<Event>> = (0..3).map(|i| delta(1529 + i, 5, "text", "z")).collect();
    {
        let mut b = open(&dir.db());
        b.append(&h, &first, true).unwrap();
        b.append(&h, &second, false).unwrap();
        b.append(&h, &third, false).unwrap();
        let loaded = b.load("s1").unwrap().unwrap();
        let all: Vec<Arc<Event>> = first.iter().chain(&second).chain(&third).cloned().collect();
        assert_eq!(loaded.events, values(&all));
        assert_eq!(loaded.header, h);
        assert!(loaded.torn.is_none());
        assert!(
            loaded.revision.ends_with(":revision:3"),
            "{}",
            loaded.revision
        );
        assert!(loaded.revision.starts_with("file:"), "{}", loaded.revision);
        assert_eq!(b.revision("s1").unwrap(), Some(loaded.revision.clone()));
        // Decoded key order is type, seq, time, data, sourceEventSeqs, surfaceOp.
        let keys: Vec<String> = loaded.values()[24]
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.to_string_lossy())
            .collect();
        assert_eq!(
            keys,
            [
                "type",
                "seq",
                "time",
                "data",
                "sourceEventSeqs",
                "surfaceOp"
            ]
        );
    }
    let conn = raw(&dir.db());
    // Packed: 2..7, 12..15, 16..18, 19..21, then 1500 deltas as 1024 + 476, then 3.
    assert_eq!(
        count(&conn, "SELECT count(*) FROM events WHERE ignorable = 0"),
        7
    );
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM events WHERE seq = 23 AND ignorable = 1"
        ),
        1
    );
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM events WHERE seq IN (9, 10) AND ignorable IS NULL"
        ),
        2
    );
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM events WHERE seq IN (24, 25) AND typeof(data) = 'blob'"
        ),
        2
    );
    assert_eq!(
        count(&conn, "SELECT count(*) FROM events WHERE seq = 1 AND typeof(source_event_seqs) = 'blob' AND length(source_event_seqs) = 0 AND surface_op = '\"append\"'"),
        1
    );
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM events WHERE seq = 24 AND source_event_seqs = X'020202'"
        ),
        1
    );
    assert_eq!(
        count(
            &conn,
            "SELECT count(*) FROM events WHERE seq = 0 AND source_event_seqs IS NULL"
        ),
        1
    );
    drop(conn);
    let mut b = open(&dir.db());
    assert_eq!(b.load("s1").unwrap().unwrap().events.len(), 1532);
}

#[test]
fn headers_round_trip_and_absent_fields_stay_absent() {
    let dir = TempDir::new("headers");
    let mut b = open(&dir.db());
    let full = json::parse(
        r#"{"version":0,"id":"full","createdAt":5,"cwd":"/w\ud800","parentSession":"p","seedLength":3,"origin":"subagent","delegationDepth":2,"agentPreset":"x"}"#,
    )
    .unwrap();
    b.append(&full, &[plain(0, "turn/start", "{}", "")], true)
        .unwrap();
    b.append(&header("min"), &[plain(0, "turn/start", "{}", "")], true)
        .unwrap();
    let listed = b.list().unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0].header, full);
    assert_eq!(listed[0].header.to_json(), full.to_json());
    assert_eq!(listed[1].header, header("min"));
    assert!(listed[1]
        .header
        .as_object()
        .unwrap()
        .get("delegationDepth")
        .is_none());
    assert_ne!(listed[0].revision, listed[1].revision);
}

#[test]
fn lazy_materialization_and_revisions() {
    let dir = TempDir::new("lazy");
    let mut b = open(&dir.db());
    assert!(b.list().unwrap().is_empty());
    assert!(b.load("s").unwrap().is_none());
    assert!(b.revision("s").unwrap().is_none());
    b.append(&header("s"), &[], true).unwrap();
    assert!(b.list().unwrap().is_empty());
    b.append(&header("s"), &[plain(0, "turn/start", "{}", "")], true)
        .unwrap();
    let r1 = b.revision("s").unwrap().unwrap();
    assert!(r1.ends_with(":revision:1"), "{r1}");
    b.append(&header("s"), &[plain(1, "turn/end", "{}", "")], false)
        .unwrap();
    let r2 = b.revision("s").unwrap().unwrap();
    assert!(r2.ends_with(":revision:2"), "{r2}");
    let prefix = |r: &str| r.rsplit_once(":revision:").unwrap().0.to_string();
    assert_eq!(prefix(&r1), prefix(&r2));
    let store_id = r1
        .split(":store:")
        .nth(1)
        .unwrap()
        .split(':')
        .next()
        .unwrap()
        .to_string();
    assert!(crate::store::uuid::is_uuid(&store_id));
    // A session that was never materialized cannot be appended to.
    let err = b
        .append(&header("t"), &[plain(0, "turn/start", "{}", "")], false)
        .unwrap_err();
    assert_eq!(err.rule, Rule::SqliteMetadataMissing);
    assert!(b.load("t").unwrap().is_none());
}

#[test]
fn seq_mismatch_is_refused_and_writes_nothing() {
    let dir = TempDir::new("seq");
    let mut b = open(&dir.db());
    let h = header("s");
    let err = b
        .append(&h, &[plain(1, "turn/start", "{}", "")], true)
        .unwrap_err();
    assert_eq!(
        (err.status, err.rule),
        (Status::Conflict, Rule::SqliteAppendSeqMismatch)
    );
    assert!(b.load("s").unwrap().is_none());
    assert!(b.list().unwrap().is_empty());
    let batch: Vec<_> = (0..4).map(|i| plain(i, "x/e", "{}", "")).collect();
    b.append(&h, &batch, true).unwrap();
    let before = b.revision("s").unwrap();
    for bad in [vec![5, 6], vec![2, 3], vec![4, 6], vec![0]] {
        let events: Vec<_> = bad.iter().map(|&s| plain(s, "x/e", "{}", "")).collect();
        let err = b.append(&h, &events, false).unwrap_err();
        assert_eq!(
            (err.status, err.rule),
            (Status::Conflict, Rule::SqliteAppendSeqMismatch),
            "{bad:?}"
        );
    }
    assert_eq!(b.revision("s").unwrap(), before);
    assert_eq!(b.load("s").unwrap().unwrap().events, values(&batch));
}

/// An append continues from where this connection's last append left the
/// log only while no other connection committed since: after another
/// connection removed the last row, the next append is measured against
/// the stored tail again.
#[test]
fn an_append_after_another_connection_wrote_reads_the_tail_again() {
    let dir = TempDir::new("cursor");
    let mut b = open(&dir.db());
    let h = header("s");
    let batch: Vec<_> = (0..4).map(|i| plain(i, "x/e", "{}", "")).collect();
    b.append(&h, &batch, true).unwrap();
    b.append(&h, &[plain(4, "x/e", "{}", "")], false).unwrap();
    raw(&dir.db())
        .execute("DELETE FROM events WHERE session_id = 's' AND seq = 4", [])
        .unwrap();
    let err = b
        .append(&h, &[plain(5, "x/e", "{}", "")], false)
        .unwrap_err();
    assert_eq!(err.rule, Rule::SqliteAppendSeqMismatch, "{err}");
    b.append(&h, &[plain(4, "x/e", "{\"again\":1}", "")], false)
        .unwrap();
    b.append(&h, &[plain(5, "x/e", "{}", "")], false).unwrap();
    let stored = b.load("s").unwrap().unwrap().events;
    assert_eq!(stored.len(), 6);
    assert_eq!(
        stored[4].to_value(),
        plain(4, "x/e", "{\"again\":1}", "").to_value()
    );
}

#[test]
fn second_open_is_locked() {
    let dir = TempDir::new("locked");
    let b = open(&dir.db());
    let err = SqliteBackend::open(&dir.db(), 0).unwrap_err();
    assert_eq!(
        (err.status, err.rule),
        (Status::Conflict, Rule::StoreLocked)
    );
    assert!(err.message.contains(&dir.db().display().to_string()));
    drop(b);
    let mut b = open(&dir.db());
    assert!(b.list().unwrap().is_empty());
}

#[test]
fn a_lock_held_elsewhere_is_a_conflict() {
    let dir = TempDir::new("flock");
    drop(open(&dir.db()));
    // Another open file description (as another process would have).
    let other = std::fs::File::open(dir.db()).unwrap();
    assert!(crate::store::platform::try_lock(&other).unwrap());
    let err = SqliteBackend::open(&dir.db(), 0).unwrap_err();
    assert_eq!(
        (err.status, err.rule),
        (Status::Conflict, Rule::StoreLocked)
    );
    drop(other);
    drop(open(&dir.db()));
}

#[test]
fn delete_removes_header_and_rows() {
    let dir = TempDir::new("delete");
    let mut b = open(&dir.db());
    b.append(&header("d"), &[plain(0, "turn/start", "{}", "")], true)
        .unwrap();
    assert!(b.delete("d").unwrap());
    assert!(!b.delete("d").unwrap());
    assert!(b.load("d").unwrap().is_none());
    assert!(b.list().unwrap().is_empty());
    b.append(&header("d"), &[plain(0, "turn/start", "{}", "")], true)
        .unwrap();
    assert_eq!(b.load("d").unwrap().unwrap().events.len(), 1);
}

#[test]
fn memory_database() {
    let mut b = SqliteBackend::open(Path::new(":memory:"), 100).unwrap();
    b.append(&header("m"), &[plain(0, "turn/start", "{}", "")], true)
        .unwrap();
    let r = b.revision("m").unwrap().unwrap();
    assert!(
        r.starts_with("memory:store:") && r.ends_with(":revision:1"),
        "{r}"
    );
}

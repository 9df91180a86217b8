//! Damaged rows: the physical scan (torn tail vs committed corruption),
//! column validation, the append tail check and repair.

use crate::rule::Rule;
use std::sync::Arc;

use super::tests::{delta, header, open, plain, raw, values, TempDir};
use super::*;

/// 0 turn/start, 1 user/message, 2..=6 packed deltas, 7 assistant/message,
/// 8 turn/end, 9 turn/start, 10 user/message, 11 and 12 scalar deltas.
fn log() -> Vec<Arc<Event>> {
    let mut out = vec![
        plain(0, "turn/start", r#"{"turn":1}"#, ""),
        plain(1, "user/message", r#"{"m":1}"#, r#","sourceEventSeqs":[0]"#),
    ];
    out.extend((2..=6).map(|s| delta(s, 50, "text", "x")));
    out.push(plain(
        7,
        "assistant/message",
        "{}",
        r#","sourceEventSeqs":[2],"surfaceOp":"append""#,
    ));
    out.push(plain(8, "turn/end", r#"{"turn":1}"#, ""));
    out.push(plain(9, "turn/start", r#"{"turn":2}"#, ""));
    out.push(plain(
        10,
        "user/message",
        r#"{"m":2}"#,
        r#","sourceEventSeqs":[9]"#,
    ));
    out.push(delta(11, 60, "text", "y"));
    out.push(delta(12, 61, "text", "z"));
    out
}

/// A database holding [`log`] under id `s`, damaged by `sql`.
fn damaged(tag: &str, sql: &str) -> (TempDir, Vec<Arc<Event>>) {
    let dir = TempDir::new(tag);
    let events = log();
    open(&dir.db()).append(&header("s"), &events, true).unwrap();
    raw(&dir.db()).execute_batch(sql).unwrap();
    (dir, events)
}

fn load_err(dir: &TempDir) -> Error {
    open(&dir.db()).load("s").unwrap_err()
}

#[test]
fn bad_blob_before_the_last_turn_end_is_committed_corruption() {
    let (dir, _) = damaged(
        "committed",
        "UPDATE events SET source_event_seqs = X'80' WHERE seq = 1",
    );
    let err = load_err(&dir);
    assert_eq!(
        (err.status, err.rule),
        (Status::Corrupt, Rule::LoadCorruptCommittedRow)
    );
    assert_eq!(err.cause, Some(Rule::CodecTruncated));
    assert!(err.message.contains("at seq 1"), "{}", err.message);
}

#[test]
fn bad_packed_row_before_the_last_turn_end_is_committed_corruption() {
    let (dir, _) = damaged(
        "packed",
        "UPDATE events SET data = '{\"turn\":1}' WHERE seq = 2",
    );
    let err = load_err(&dir);
    assert_eq!(
        (err.rule, err.cause),
        (Rule::LoadCorruptCommittedRow, Some(Rule::RowDataKeys))
    );
}

#[test]
fn bad_blob_after_the_last_turn_end_is_a_torn_tail_that_repair_cuts() {
    let (dir, events) = damaged(
        "torn",
        "UPDATE events SET source_event_seqs = X'8000' WHERE seq = 10",
    );
    let mut b = open(&dir.db());
    let loaded = b.load("s").unwrap().unwrap();
    assert_eq!(loaded.events, values(&events[..10]));
    let torn = loaded.torn.clone().unwrap();
    assert_eq!(
        (torn.at.value(), torn.recovered, torn.why),
        (10, 0, TornKind::UndecodableRows)
    );
    assert!(torn.length > 0);
    let closers = [plain(
        10,
        "turn/end",
        r#"{"turn":2}"#,
        r#","surfaceOp":"append""#,
    )];
    // Stale or omitted markers and stale closers are refused, changing nothing.
    let stale = Torn {
        at: crate::store::backend::TornAt::Row(11),
        ..torn.clone()
    };
    let err = b
        .commit_repair(&header("s"), Some(&stale), &closers)
        .unwrap_err();
    assert_eq!(
        (err.status, err.rule),
        (Status::Conflict, Rule::SqliteRepairStaleTail)
    );
    let err = b.commit_repair(&header("s"), None, &closers).unwrap_err();
    assert_eq!(err.rule, Rule::SqliteRepairOmittedTail);
    let wrong = [plain(11, "turn/end", "{}", "")];
    let err = b
        .commit_repair(&header("s"), Some(&torn), &wrong)
        .unwrap_err();
    assert_eq!(
        (err.status, err.rule),
        (Status::Conflict, Rule::SqliteRepairStaleCloser)
    );
    assert_eq!(b.revision("s").unwrap(), Some(loaded.revision.clone()));
    let copies = |dir: &std::path::Path| {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().contains(".cut-"))
            .collect::<Vec<_>>()
    };
    assert!(
        copies(dir.db().parent().unwrap()).is_empty(),
        "a refused repair kept a copy"
    );
    let cut = b
        .commit_repair(&header("s"), Some(&torn), &closers)
        .unwrap()
        .expect("the rows cut are reported");
    // The rows are kept beside the database, one JSON line each, before
    // they are deleted.
    assert_eq!(
        (cut.at, cut.length, cut.why),
        (10, torn.length, TornKind::UndecodableRows)
    );
    assert_eq!(copies(dir.db().parent().unwrap()), vec![cut.copy.clone()]);
    let kept = std::fs::read_to_string(&cut.copy).unwrap();
    assert_eq!(kept.lines().count() as u64, torn.length);
    assert!(kept.starts_with("{\"session_id\":"), "{kept}");
    assert!(kept.contains("\"seq\":10"), "{kept}");
    assert!(
        kept.contains("\"hex\":\"8000\""),
        "the damaged blob as stored: {kept}"
    );
    assert_eq!(b.quarantined("s").unwrap(), vec![cut.copy.clone()]);
    assert!(b.quarantined("t").unwrap().is_empty());
    let repaired = b.load("s").unwrap().unwrap();
    let mut want = values(&events[..10]);
    want.extend(values(&closers));
    assert_eq!(repaired.events, want);
    assert!(repaired.torn.is_none());
    assert_ne!(repaired.revision, loaded.revision);
    // Nothing to do: no write, no revision change.
    b.commit_repair(&header("s"), None, &[]).unwrap();
    assert_eq!(b.revision("s").unwrap(), Some(repaired.revision));
}

#[test]
fn bad_zstd_after_the_last_turn_end_is_torn() {
    let (dir, _) = damaged(
        "zstd",
        "UPDATE events SET data = X'28B52FFD0000' WHERE seq = 12",
    );
    let loaded = open(&dir.db()).load("s").unwrap().unwrap();
    assert_eq!(loaded.events.len(), 12);
    let torn = loaded.torn.unwrap();
    assert_eq!(
        (torn.at.value(), torn.recovered, torn.why),
        (12, 0, TornKind::UndecodableRows)
    );
}

#[test]
fn truncated_zstd_frame_is_a_codec_error() {
    let text = format!(r#"{{"big":"{}"}}"#, "ab".repeat(5000));
    let frame = zstd::bulk::compress(text.as_bytes(), 3).unwrap();
    let hex: String = frame[..frame.len() - 3]
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect();
    let sql = format!("UPDATE events SET data = X'{hex}' WHERE seq = 1");
    let (dir, _) = damaged("zstd-cut", &sql);
    let err = load_err(&dir);
    assert_eq!(
        (err.rule, err.cause),
        (Rule::LoadCorruptCommittedRow, Some(Rule::CodecZstd))
    );
}

#[test]
fn wrong_column_types_are_errors_not_torn_tails() {
    let cases = [
        "UPDATE events SET data = 42 WHERE seq = 12",
        "UPDATE events SET source_event_seqs = 'text' WHERE seq = 12",
        "UPDATE events SET type = '' WHERE seq = 12",
        "UPDATE events SET seq = -5 WHERE seq = 12",
        "UPDATE events SET time = 9007199254740992 WHERE seq = 12",
        "PRAGMA ignore_check_constraints = ON; UPDATE events SET ignorable = 2 WHERE seq = 12",
    ];
    for sql in cases {
        let (dir, _) = damaged("columns", sql);
        let err = load_err(&dir);
        assert_eq!(
            (err.status, err.rule),
            (Status::Corrupt, Rule::SqliteRowEvent),
            "{sql}"
        );
        if !sql.contains("SET seq") {
            // The damaged row is still the last one: the append tail check reads it.
            let mut b = open(&dir.db());
            let err = b
                .append(&header("s"), &[plain(13, "x/e", "{}", "")], false)
                .unwrap_err();
            assert_eq!(err.rule, Rule::SqliteRowEvent, "{sql}");
        }
    }
}

#[test]
fn seq_gaps() {
    // A gap before the last turn/end is committed corruption.
    let (dir, _) = damaged("gap-committed", "DELETE FROM events WHERE seq = 7");
    let err = load_err(&dir);
    assert_eq!(err.rule, Rule::LoadCorruptCommittedRow);
    assert!(err.message.contains("at seq 8"), "{}", err.message);
    // A gap after it starts the torn tail at the first row past the gap.
    let (dir, events) = damaged("gap-torn", "DELETE FROM events WHERE seq = 11");
    let mut b = open(&dir.db());
    let loaded = b.load("s").unwrap().unwrap();
    assert_eq!(loaded.events, values(&events[..11]));
    let torn = loaded.torn.unwrap();
    assert_eq!(torn.at.value(), 12);
    let err = b
        .append(&header("s"), &[plain(13, "x/e", "{}", "")], false)
        .unwrap_err();
    assert_eq!(
        (err.status, err.rule),
        (Status::Corrupt, Rule::SqliteAppendTornTail)
    );
    b.commit_repair(
        &header("s"),
        Some(&torn),
        &[plain(11, "turn/end", "{}", "")],
    )
    .unwrap();
    b.append(&header("s"), &[plain(12, "x/e", "{}", "")], false)
        .unwrap();
    assert_eq!(b.load("s").unwrap().unwrap().events.len(), 13);
}

#[test]
fn append_sees_a_torn_last_row() {
    let (dir, _) = damaged(
        "tail",
        "UPDATE events SET source_event_seqs = X'80' WHERE seq = 12",
    );
    let mut b = open(&dir.db());
    let err = b
        .append(&header("s"), &[plain(13, "x/e", "{}", "")], false)
        .unwrap_err();
    assert_eq!(
        (err.status, err.rule),
        (Status::Corrupt, Rule::SqliteAppendTornTail)
    );
    assert_eq!(err.cause, Some(Rule::CodecTruncated));
}

#[test]
fn append_expands_a_packed_predecessor_of_the_tail() {
    // Rows 11 and 12 overlap the packed row at 10 (members 10..=12): the
    // last two rows alone look contiguous, the packed predecessor does not.
    let dir = TempDir::new("predecessor");
    let mut events: Vec<_> = (0..10).map(|s| plain(s, "x/e", "{}", "")).collect();
    events.extend((10..13).map(|s| delta(s, 5, "text", "p")));
    open(&dir.db()).append(&header("s"), &events, true).unwrap();
    raw(&dir.db())
        .execute_batch(
            "INSERT INTO events (session_id, seq, type, time, data) VALUES ('s', 11, 'x/e', 0, '{}'); \
             INSERT INTO events (session_id, seq, type, time, data) VALUES ('s', 12, 'x/e', 0, '{}');",
        )
        .unwrap();
    let mut b = open(&dir.db());
    let err = b
        .append(&header("s"), &[plain(13, "x/e", "{}", "")], false)
        .unwrap_err();
    assert_eq!(err.rule, Rule::SqliteAppendTornTail);
    assert!(err.message.contains("at seq 11"), "{}", err.message);
}

#[test]
fn repair_closers_are_scalar_rows() {
    let dir = TempDir::new("closers");
    let h = header("s");
    let mut b = open(&dir.db());
    b.append(&h, &[plain(0, "turn/start", r#"{"turn":1}"#, "")], true)
        .unwrap();
    let closers: Vec<_> = (1..5).map(|s| delta(s, 9, "text", "c")).collect();
    b.commit_repair(&h, None, &closers).unwrap();
    let loaded = b.load("s").unwrap().unwrap();
    assert_eq!(loaded.events.len(), 5);
    assert_eq!(loaded.events[1..], values(&closers)[..]);
    assert!(loaded.revision.ends_with(":revision:2"));
    drop(b);
    let conn = raw(&dir.db());
    let packed: i64 = conn
        .query_row("SELECT count(*) FROM events WHERE ignorable = 0", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(packed, 0);
    drop(conn);
    let err = open(&dir.db())
        .commit_repair(&header("none"), None, &[plain(0, "turn/end", "{}", "")])
        .unwrap_err();
    assert_eq!(
        (err.status, err.rule),
        (Status::Corrupt, Rule::SqliteMetadataMissing)
    );
}

/// The repair after a load reuses the load's scan only while nothing was
/// written since: a commit by another connection in between sends it back
/// to a full scan, which sees the damage.
#[test]
fn repair_rescans_when_another_connection_wrote_after_the_load() {
    let dir = TempDir::new("rescan");
    let events = log();
    open(&dir.db()).append(&header("s"), &events, true).unwrap();
    let mut b = open(&dir.db());
    let loaded = b.load("s").unwrap().unwrap();
    assert!(loaded.torn.is_none());
    raw(&dir.db())
        .execute_batch("UPDATE events SET source_event_seqs = X'8000' WHERE seq = 10")
        .unwrap();
    let closers = [plain(13, "turn/end", r#"{"turn":2}"#, "")];
    let err = b.commit_repair(&header("s"), None, &closers).unwrap_err();
    assert_eq!(err.rule, Rule::SqliteRepairOmittedTail);
    // Without the foreign write the load's scan is used and the closers go in.
    drop(b);
    raw(&dir.db())
        .execute_batch("UPDATE events SET source_event_seqs = NULL WHERE seq = 10")
        .unwrap();
    let mut b = open(&dir.db());
    b.load("s").unwrap().unwrap();
    b.commit_repair(&header("s"), None, &closers).unwrap();
    assert_eq!(b.load("s").unwrap().unwrap().events.len(), 14);
}

//! Packed chunk rows and `data` encoding (docs/formats.md §4.4, §4.7):
//! incompressible data, malformed packed rows before and after the last
//! `turn/end`, size bounds of packed TEXT and zstd data.

use crate::rule::Rule;
use std::sync::Arc;

use super::tests::{delta, header, open, plain, raw, values, TempDir};
use super::*;
use crate::test_rng::Rng;

/// 0 turn/start, 1..=5 packed deltas, 6 turn/end, 7 turn/start,
/// 8..=12 packed deltas (the tail after the last `turn/end`).
fn log() -> Vec<Arc<Event>> {
    let mut out = vec![plain(0, "turn/start", r#"{"turn":1}"#, "")];
    out.extend((1..=5).map(|s| delta(s, 50, "text", "a")));
    out.push(plain(6, "turn/end", r#"{"turn":1}"#, ""));
    out.push(plain(7, "turn/start", r#"{"turn":2}"#, ""));
    out.extend((8..=12).map(|s| delta(s, 70, "text", "b")));
    out
}

/// A database holding [`log`] under id `s` (rows: 0, 1 packed, 6, 7, 8 packed).
fn stored(tag: &str) -> (TempDir, Vec<Arc<Event>>) {
    let dir = TempDir::new(tag);
    let events = log();
    open(&dir.db()).append(&header("s"), &events, true).unwrap();
    let conn = raw(&dir.db());
    let packed: Vec<i64> = conn
        .prepare("SELECT seq FROM events WHERE ignorable = 0 ORDER BY seq")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(packed, [1, 8], "the two delta runs are packed rows");
    (dir, events)
}

/// Set `data` of the row at `seq` to `value`.
fn set_data(dir: &TempDir, seq: i64, value: rusqlite::types::Value) {
    raw(&dir.db())
        .execute(
            "UPDATE events SET data = ?1 WHERE session_id = 's' AND seq = ?2",
            rusqlite::params![value, seq],
        )
        .unwrap();
}

fn text(s: &str) -> rusqlite::types::Value {
    rusqlite::types::Value::Text(s.to_string())
}

fn blob(b: Vec<u8>) -> rusqlite::types::Value {
    rusqlite::types::Value::Blob(b)
}

/// The `data` text of the packed row at seq 1 as stored.
fn row1_data(dir: &TempDir) -> String {
    raw(&dir.db())
        .query_row("SELECT data FROM events WHERE seq = 1", [], |r| r.get(0))
        .unwrap()
}

/// Load `s` expecting committed corruption; returns its cause.
fn committed_cause(dir: &TempDir) -> Option<Rule> {
    let err = open(&dir.db()).load("s").unwrap_err();
    assert_eq!(
        (err.status, err.rule),
        (Status::Corrupt, Rule::LoadCorruptCommittedRow),
        "{err}"
    );
    err.cause
}

/// compression #1: data over the compression threshold whose zstd frame is
/// not smaller than its text stays TEXT (`typeof(data) = 'text'`) and reads
/// back exactly; compressible data of the same size becomes a BLOB.
#[test]
fn incompressible_large_data_stays_text() {
    // Random bytes spread over the byte values UTF-8 text can hold: zstd
    // finds no matches and no profitable literal coding.
    let ascii: Vec<u8> = (0x20u8..0x80)
        .filter(|b| *b != b'"' && *b != b'\\')
        .collect();
    let lead2: Vec<u8> = (0xC2u8..0xE0).collect();
    let lead3: Vec<u8> = (0xE1u8..0xF0).filter(|b| *b != 0xED).collect();
    let lead4 = [0xF1u8, 0xF2, 0xF3];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut bytes = Vec::new();
    while bytes.len() < 16_000 {
        let k = rng.below(141);
        let (lead, more) = match k {
            0..=93 => (ascii[k], 0),
            94..=123 => (lead2[k - 94], 1),
            124..=137 => (lead3[k - 124], 2),
            _ => (lead4[k - 138], 3),
        };
        bytes.push(lead);
        for _ in 0..more {
            bytes.push(0x80 | rng.below(64) as u8);
        }
    }
    let noise = String::from_utf8(bytes).unwrap();
    let data = format!(r#"{{"noise":"{noise}"}}"#);
    let frame = zstd::bulk::compress(data.as_bytes(), 3).unwrap();
    assert!(frame.len() >= data.len(), "precondition: incompressible");
    let compressible = format!(r#"{{"noise":"{}"}}"#, "ab".repeat(8000));

    let dir = TempDir::new("incompressible");
    let events = vec![
        plain(0, "x/big", &data, ""),
        plain(1, "x/big", &compressible, ""),
    ];
    open(&dir.db()).append(&header("s"), &events, true).unwrap();
    let conn = raw(&dir.db());
    let kinds: Vec<String> = conn
        .prepare("SELECT typeof(data) FROM events ORDER BY seq")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(kinds, ["text", "blob"]);
    let stored: String = conn
        .query_row("SELECT data FROM events WHERE seq = 0", [], |r| r.get(0))
        .unwrap();
    assert_eq!(stored, data);
    drop(conn);
    let loaded = open(&dir.db()).load("s").unwrap().unwrap();
    assert_eq!(loaded.events, values(&events));
}

/// compression #6: malformed packed data before the last `turn/end` is
/// committed corruption naming the row rule (data shape, member arrays,
/// `dt`, number and id types, time overflow, member bounds, codec
/// failures); a packed row whose members leave a gap or overlap the next
/// row is refused too.
#[test]
fn malformed_packed_data_is_committed_corruption() {
    let five = r#"["a","a","a","a","a"]"#;
    let row = |turn: &str, dt: &str, texts: &str| {
        format!(r#"{{"turn":{turn},"step":1,"index":0,"dt":{dt},"texts":{texts}}}"#)
    };
    let many = format!("[{}]", vec![r#""a""#; 1025].join(","));
    let many_dt = format!("[{}]", vec!["0"; 1024].join(","));
    let cases: Vec<(String, Rule)> =
        vec![
        ("null".into(), Rule::RowDataObject),
        ("7".into(), Rule::RowDataObject),
        ("[1,2,3]".into(), Rule::RowDataKeys),
        (
            r#"{"turn":1,"step":1,"index":0,"dt":[0,0,0,0],"texts":["a","a","a","a","a"],"x":1}"#
                .into(),
            Rule::RowDataKeys,
        ),
        (row(r#""1""#, "[0,0,0,0]", five), Rule::RowNumbers),
        (row("1", "[0]", r#"["a","a"]"#), Rule::RowMembers),
        (row("1", "[0,0,0,0]", r#"["a",1,"a","a","a"]"#), Rule::RowMembers),
        (row("1", &many_dt, &many), Rule::RowMembers),
        (row("1", "[0,0,0]", five), Rule::RowDt),
        (row("1", "[0,0.5,0,0]", five), Rule::RowDt),
        (row("1", "[9007199254740991,0,0,0]", five), Rule::RowTimeOverflow),
        ("{not json".into(), Rule::CodecDataJson),
    ];
    for (data, cause) in cases {
        let (dir, _) = stored("malformed");
        set_data(&dir, 1, text(&data));
        assert_eq!(committed_cause(&dir), Some(cause), "{data}");
    }
    // A tool-call row whose id is not a string.
    let (dir, _) = stored("tool-id");
    raw(&dir.db())
        .execute_batch(
            r#"UPDATE events SET type = 'tool-call-chunks', data = '{"turn":1,"step":1,"index":0,"id":5,"dt":[0,0,0,0],"args":["a","a","a","a","a"]}' WHERE seq = 1"#,
        )
        .unwrap();
    assert_eq!(committed_cause(&dir), Some(Rule::RowToolId));
    // Codec failures of a packed BLOB.
    let not_utf8 = zstd::bulk::compress(b"{\"turn\":\xff}", 3).unwrap();
    for (value, cause) in [
        (blob(b"not a zstd frame".to_vec()), Rule::CodecZstd),
        (blob(not_utf8), Rule::CodecUtf8),
    ] {
        let (dir, _) = stored("codec");
        set_data(&dir, 1, value);
        assert_eq!(committed_cause(&dir), Some(cause));
    }
    // Members ending before the next row (a gap) or running into it.
    for (data, at) in [
        (row("1", "[0,0,0]", r#"["a","a","a","a"]"#), "at seq 6"),
        (
            row("1", "[0,0,0,0,0]", r#"["a","a","a","a","a","a"]"#),
            "at seq 6",
        ),
    ] {
        let (dir, _) = stored("gap");
        set_data(&dir, 1, text(&data));
        let err = open(&dir.db()).load("s").unwrap_err();
        assert_eq!(
            (err.status, err.rule, err.cause),
            (Status::Corrupt, Rule::LoadCorruptCommittedRow, None),
            "{data}"
        );
        assert!(err.message.contains(at), "{}", err.message);
    }
}

/// compression #8: a packed row with either surface column set is refused
/// (`row.packed-surface-fields`).
#[test]
fn surface_columns_on_a_packed_row_are_refused() {
    for sql in [
        r#"UPDATE events SET surface_op = '"append"' WHERE seq = 1"#,
        "UPDATE events SET source_event_seqs = X'' WHERE seq = 1",
        "UPDATE events SET source_event_seqs = X'01' WHERE seq = 1",
    ] {
        let (dir, _) = stored("surface");
        raw(&dir.db()).execute_batch(sql).unwrap();
        assert_eq!(
            committed_cause(&dir),
            Some(Rule::RowPackedSurfaceFields),
            "{sql}"
        );
    }
}

/// compression #9: the packed discriminator (`ignorable = 0`) on a row
/// whose type is not a chunk tag is refused (`row.packed-tag`): committed
/// corruption before the last `turn/end`, a refused append tail after it.
#[test]
fn packed_discriminator_on_a_scalar_type_is_refused() {
    let (dir, _) = stored("tag");
    raw(&dir.db())
        .execute_batch("UPDATE events SET ignorable = 0 WHERE seq = 0")
        .unwrap();
    assert_eq!(committed_cause(&dir), Some(Rule::RowPackedTag));
    let (dir, events) = stored("tag-tail");
    raw(&dir.db())
        .execute_batch("UPDATE events SET ignorable = 0 WHERE seq = 7")
        .unwrap();
    let mut b = open(&dir.db());
    let err = b
        .append(&header("s"), &[plain(13, "x/e", "{}", "")], false)
        .unwrap_err();
    assert_eq!(
        (err.status, err.rule, err.cause),
        (
            Status::Corrupt,
            Rule::SqliteAppendTornTail,
            Some(Rule::RowPackedTag)
        )
    );
    let loaded = b.load("s").unwrap().unwrap();
    assert_eq!(loaded.events, values(&events[..7]));
    assert_eq!(loaded.torn.map(|t| t.at.value()), Some(7));
}

/// compression #15: packed TEXT data over 1,048,576 bytes is refused
/// (`row.too-large`) before it is parsed — even text that is not JSON —
/// while the same row padded to exactly the bound loads.
#[test]
fn oversized_packed_text_is_refused_before_parsing() {
    const LIMIT: usize = 1_048_576;
    let (dir, events) = stored("too-large");
    let original = row1_data(&dir);
    let pad = |n: usize| format!("{original}{}", " ".repeat(n - original.len()));
    set_data(&dir, 1, text(&pad(LIMIT)));
    assert_eq!(
        open(&dir.db()).load("s").unwrap().unwrap().events,
        values(&events)
    );
    for data in [pad(LIMIT + 1), "x".repeat(LIMIT + 1)] {
        set_data(&dir, 1, text(&data));
        assert_eq!(committed_cause(&dir), Some(Rule::RowTooLarge));
    }
}

/// compression #16: packed zstd data is decompressed with a 1 MiB bound:
/// a frame inflating past it (a "zstd bomb", with or without a recorded
/// content size) is `codec.zstd`; a frame of exactly the bound loads.
#[test]
fn packed_zstd_data_is_bounded_while_decompressing() {
    const LIMIT: usize = 1_048_576;
    let (dir, events) = stored("bomb");
    let original = row1_data(&dir);
    let pad = |n: usize| format!("{original}{}", " ".repeat(n - original.len()));
    set_data(
        &dir,
        1,
        blob(zstd::bulk::compress(pad(LIMIT).as_bytes(), 3).unwrap()),
    );
    assert_eq!(
        open(&dir.db()).load("s").unwrap().unwrap().events,
        values(&events)
    );
    let just_over = zstd::bulk::compress(pad(LIMIT + 1).as_bytes(), 3).unwrap();
    let big = zstd::bulk::compress(&vec![b' '; 64 << 20], 19).unwrap();
    let no_size = {
        use std::io::Write;
        let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        for _ in 0..64 {
            enc.write_all(&[b' '; 1 << 20]).unwrap();
        }
        enc.finish().unwrap()
    };
    assert_eq!(
        zstd::zstd_safe::get_frame_content_size(&no_size).unwrap(),
        None,
        "precondition: no recorded size"
    );
    for frame in [just_over, big, no_size] {
        set_data(&dir, 1, blob(frame));
        assert_eq!(committed_cause(&dir), Some(Rule::CodecZstd));
    }
}

/// compression #18: a malformed packed row after the last `turn/end` is a
/// torn tail starting at the row's first seq; appending is refused, and
/// repair removes the whole physical row (every member) and nothing before.
#[test]
fn malformed_packed_tail_row_is_one_removable_row() {
    for damage in [
        r#"UPDATE events SET data = '{"turn":2}' WHERE seq = 8"#,
        // Only the last member is wrong (a non-string text).
        r#"UPDATE events SET data = '{"turn":1,"step":1,"index":0,"dt":[0,0,0,0],"texts":["b","b","b","b",4]}' WHERE seq = 8"#,
    ] {
        let (dir, events) = stored("packed-tail");
        raw(&dir.db()).execute_batch(damage).unwrap();
        let mut b = open(&dir.db());
        let err = b
            .append(&header("s"), &[plain(13, "x/e", "{}", "")], false)
            .unwrap_err();
        assert_eq!(
            (err.status, err.rule),
            (Status::Corrupt, Rule::SqliteAppendTornTail)
        );
        let loaded = b.load("s").unwrap().unwrap();
        assert_eq!(loaded.events, values(&events[..8]), "{damage}");
        let torn = loaded.torn.clone().unwrap();
        assert_eq!(torn.at.value(), 8, "{damage}");
        let closers = [plain(8, "turn/end", r#"{"turn":2}"#, "")];
        b.commit_repair(&header("s"), Some(&torn), &closers)
            .unwrap();
        let repaired = b.load("s").unwrap().unwrap();
        let mut want = values(&events[..8]);
        want.extend(values(&closers));
        assert_eq!(repaired.events, want);
        assert!(repaired.torn.is_none());
        drop(b);
        let conn = raw(&dir.db());
        let seqs: Vec<i64> = conn
            .prepare("SELECT seq FROM events ORDER BY seq")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(seqs, [0, 1, 6, 7, 8]);
        let packed: i64 = conn
            .query_row("SELECT count(*) FROM events WHERE ignorable = 0", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(packed, 1, "the committed packed row is kept");
    }
}

/// An `assistant/chunk` at `seq` and `time` with `chunk` (JSON text) and
/// `extra` data keys.
fn chunk(seq: u64, time: i64, chunk: &str, extra: &str) -> Arc<Event> {
    crate::store::sqlite::tests::ev(&format!(
        r#"{{"type":"assistant/chunk","seq":{seq},"time":{time},"data":{{"turn":1,"step":1,"chunk":{chunk}{extra}}}}}"#
    ))
}

/// Store `events` as one batch; the seqs of its packed and scalar rows
/// (the log must read back unchanged).
fn rows_of(events: &[Arc<Event>]) -> (Vec<i64>, Vec<i64>) {
    let dir = TempDir::new("packer");
    let mut b = open(&dir.db());
    b.append(&header("p"), events, true).unwrap();
    assert_eq!(b.load("p").unwrap().unwrap().events, values(events));
    drop(b);
    let conn = raw(&dir.db());
    let seqs = |sql: &str| -> Vec<i64> {
        conn.prepare(sql)
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect()
    };
    (
        seqs("SELECT seq FROM events WHERE ignorable = 0 ORDER BY seq"),
        seqs("SELECT seq FROM events WHERE ignorable IS NULL ORDER BY seq"),
    )
}

/// compression #5: deltas off the packable shape (an extra chunk key, a
/// `usage` data key, a non-string text) are stored as scalar rows and
/// split the run around them; an inexact time difference near ±2^53, a
/// call id change and a change in `name` presence break a run too.
#[test]
fn off_format_deltas_stay_scalar_and_break_runs() {
    let text = |s: u64, t: i64| chunk(s, t, r#"{"type":"text-delta","index":0,"text":"a"}"#, "");
    let odd = [
        chunk(
            2,
            0,
            r#"{"type":"text-delta","index":0,"text":"a","extra":1}"#,
            "",
        ),
        chunk(
            2,
            0,
            r#"{"type":"text-delta","index":0,"text":"a"}"#,
            r#","usage":{"tokens":1}"#,
        ),
        chunk(2, 0, r#"{"type":"text-delta","index":0,"text":7}"#, ""),
    ];
    for bad in odd {
        let events = vec![
            text(0, 0),
            text(1, 0),
            bad,
            text(3, 0),
            text(4, 0),
            text(5, 0),
        ];
        assert_eq!(rows_of(&events), (vec![3], vec![0, 1, 2]));
    }
    // All well-formed: one row.
    let events: Vec<_> = (0..6).map(|s| text(s, s as i64 - 3)).collect();
    assert_eq!(rows_of(&events), (vec![0], vec![]));
    // -2^53+1 to 2^53-1 is not an exact difference: two rows.
    const SAFE: i64 = 9_007_199_254_740_991;
    let events: Vec<_> = (0..6)
        .map(|s| text(s, if s < 3 { -SAFE } else { SAFE }))
        .collect();
    assert_eq!(rows_of(&events), (vec![0, 3], vec![]));
    let tool = |s: u64, id: &str, name: &str| {
        chunk(
            s,
            0,
            &format!(
                r#"{{"type":"tool-call-delta","index":0,"id":"{id}"{name},"argumentsDelta":"x"}}"#
            ),
            "",
        )
    };
    let named = r#","name":"ls""#;
    let same: Vec<_> = (0..6).map(|s| tool(s, "c1", named)).collect();
    assert_eq!(rows_of(&same), (vec![0], vec![]));
    let presence: Vec<_> = (0..6)
        .map(|s| tool(s, "c1", if s < 3 { named } else { "" }))
        .collect();
    assert_eq!(rows_of(&presence), (vec![0, 3], vec![]));
    let ids: Vec<_> = (0..6)
        .map(|s| tool(s, if s < 3 { "c1" } else { "c2" }, named))
        .collect();
    assert_eq!(rows_of(&ids), (vec![0, 3], vec![]));
}

/// sqlite.spec #3: a long run of small paced appends (streaming) keeps the
/// WAL bounded (checkpoints happen) and never rewrites committed rows: the
/// rows written early are byte-for-byte unchanged at the end.
#[test]
fn paced_streaming_keeps_the_wal_bounded_without_rewrites() {
    let dir = TempDir::new("paced");
    let mut b = open(&dir.db());
    let snapshot = |conn: &rusqlite::Connection| -> Vec<(i64, String, i64, Vec<u8>)> {
        conn.prepare("SELECT seq, type, time, CAST(data AS BLOB) FROM events ORDER BY seq")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .map(|r| r.unwrap())
            .collect()
    };
    let mut wal = dir.db().into_os_string();
    wal.push("-wal");
    let mut largest_wal = 0;
    let mut early = Vec::new();
    let mut all = Vec::new();
    let mut seq = 0;
    for round in 0..1500u64 {
        // A step: a few deltas (packed when three or more), then a message.
        let n = 1 + round % 5;
        let mut batch: Vec<_> = (0..n)
            .map(|k| delta(seq + k, 1000 + (seq + k) as i64, "text", "tok"))
            .collect();
        batch.push(plain(seq + n, "x/msg", &format!(r#"{{"r":{round}}}"#), ""));
        b.append(&header("s"), &batch, round == 0).unwrap();
        seq += n + 1;
        all.extend(batch);
        largest_wal = largest_wal.max(std::fs::metadata(&wal).map_or(0, |m| m.len()));
        if round == 20 {
            // The backend's own connection: it holds the database exclusively.
            early = snapshot(&b.conn);
        }
    }
    // Every commit adds at least two pages (an events page and the
    // sessions row) to the WAL: without checkpoints it would pass 12 MB.
    assert!(largest_wal < 6 << 20, "WAL grew to {largest_wal} bytes");
    let end = snapshot(&b.conn);
    assert_eq!(end[..early.len()], early[..], "early rows rewritten");
    assert_eq!(b.load("s").unwrap().unwrap().events, values(&all));
}

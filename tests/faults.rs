//! Fault injection on stored sessions, through the core `Store` API (with
//! tests/store_support, which takes the C ABI's JSON texts): every damage ends
//! in a clean repair or `DSH_E_CORRUPT` with a rule id — never a panic, never
//! a silent change of committed data.

mod store_support;

use std::path::Path;

use ::dsh_session::json::Value;
use store_support::*;

fn sqlite_config(path: &Path) -> String {
    format!(
        r#"{{"backend":"sqlite","path":{},"batchWindowMs":0}}"#,
        Value::str(path.to_str().unwrap()).to_json()
    )
}

/// Two closed turns, then an open one: events 0..=5 are committed (the last
/// `turn/end` is seq 5), 6..=8 are the open tail.
fn write_session(config: &str) -> Value {
    let store = Store::open(&declaring(config)).unwrap();
    let s = store.create(r#"{"id":"f"}"#).unwrap();
    for turn in 1..=2 {
        s.append_ok("turn/start", &format!(r#"{{"turn":{turn}}}"#), None);
        s.append_ok(
            "user/message",
            &format!(r#"{{"id":"u{turn}","role":"user","content":[],"source":{{"kind":"user"}}}}"#),
            Some(r#"{"surfaceOp":"append"}"#),
        );
        s.append_ok(
            "turn/end",
            &format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
            None,
        );
    }
    s.append_ok("turn/start", r#"{"turn":3}"#, None);
    s.append_ok(
        "user/message",
        r#"{"id":"u3","role":"user","content":[],"source":{"kind":"user"}}"#,
        Some(r#"{"surfaceOp":"append","sourceEventSeqs":[0]}"#),
    );
    s.append_ok("plugin/note", "{}", None);
    let events = s.events();
    drop(s);
    drop(store);
    events
}

fn damage_sqlite(path: &Path, sql: &str) {
    let db = rusqlite::Connection::open(path).unwrap();
    db.execute_batch(sql).unwrap();
}

fn open_after(config: &str) -> Result<Value, Failure> {
    let store = Store::open(&declaring(config)).unwrap();
    let (s, _) = store.open_session("f")?;
    Ok(s.events())
}

fn first(events: &Value, n: usize) -> Vec<Value> {
    // Fewer than `n` events compare unequal instead of panicking here.
    events.as_array().unwrap().iter().take(n).cloned().collect()
}

#[test]
fn sqlite_damage_in_the_committed_region_is_corrupt_and_left_alone() {
    let cases = [
        (
            "malformed source_event_seqs blob",
            "UPDATE events SET source_event_seqs = x'80' WHERE seq = 4",
        ),
        ("a missing row", "DELETE FROM events WHERE seq = 2"),
        (
            "undecodable data",
            "UPDATE events SET data = '{not json' WHERE seq = 1",
        ),
    ];
    for (what, sql) in cases {
        let dir = temp_dir("fault-sqlite");
        let db = dir.join("s.db");
        let config = sqlite_config(&db);
        write_session(&config);
        damage_sqlite(&db, sql);
        let before = std::fs::read(&db).unwrap();
        let err = open_after(&config)
            .err()
            .unwrap_or_else(|| panic!("{what}: opened"));
        assert_eq!(err.0, DSH_E_CORRUPT, "{what}: {}", err.1);
        assert_eq!(rule(&err.1), "load.corrupt-committed-row", "{what}");
        assert_eq!(
            std::fs::read(&db).unwrap(),
            before,
            "{what}: the database was changed"
        );
    }
}

#[test]
fn sqlite_wrong_column_types_are_corrupt() {
    let dir = temp_dir("fault-sqlite-types");
    let db = dir.join("s.db");
    let config = sqlite_config(&db);
    write_session(&config);
    damage_sqlite(
        &db,
        "UPDATE events SET source_event_seqs = 'text' WHERE seq = 7",
    );
    let err = open_after(&config).expect_err("refused");
    assert_eq!(
        (err.0, rule(&err.1).as_str()),
        (DSH_E_CORRUPT, "sqlite.row-event"),
        "{}",
        err.1
    );
}

#[test]
fn sqlite_damage_after_the_last_turn_end_is_a_torn_tail_that_open_repairs() {
    for sql in [
        "UPDATE events SET source_event_seqs = x'0080' WHERE seq = 7",
        "DELETE FROM events WHERE seq = 7",
    ] {
        let dir = temp_dir("fault-sqlite-torn");
        let db = dir.join("s.db");
        let config = sqlite_config(&db);
        let written = write_session(&config);
        damage_sqlite(&db, sql);
        let events = open_after(&config).unwrap_or_else(|e| panic!("{sql}: {e:?}"));
        // Seqs 0..=6 survive byte for byte; the tail from 7 is cut and the
        // open turn 3 gets its closer, then the end-seed marker.
        assert_eq!(first(&events, 7), first(&written, 7), "{sql}");
        let types = types_of(&events.as_array().unwrap()[7..]);
        assert_eq!(types, ["turn/end", "session/end-seed"], "{sql}");
        // The repair was durable: a second open reads the same log.
        assert_eq!(open_after(&config).unwrap(), events, "{sql}");
    }
}

#[test]
fn random_sqlite_blob_damage_never_panics_or_changes_committed_events() {
    let mut x: u64 = 0x9e3779b97f4a7c15;
    for round in 0..40 {
        let dir = temp_dir("fault-sqlite-random");
        let db = dir.join("s.db");
        let config = sqlite_config(&db);
        let written = write_session(&config);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let seq = x % 9;
        let blob: String = (0..(x >> 8) % 6)
            .map(|i| format!("{:02x}", (x >> (i * 8)) as u8))
            .collect();
        damage_sqlite(
            &db,
            &format!("UPDATE events SET source_event_seqs = x'{blob}' WHERE seq = {seq}"),
        );
        match open_after(&config) {
            Ok(events) => {
                // Whatever decoded cleanly before the damaged row is kept as written.
                let keep = (seq as usize).min(events.as_array().unwrap().len());
                assert_eq!(first(&events, keep), first(&written, keep), "round {round}");
            }
            Err((status, text)) => {
                assert!(
                    [DSH_E_CORRUPT, DSH_E_REJECTED].contains(&status)
                        || rule(&text).starts_with("load."),
                    "round {round}: {text}"
                );
                assert!(
                    !rule(&text).is_empty(),
                    "round {round}: no rule id in {text}"
                );
            }
        }
    }
}

fn jsonl_config(root: &Path, zstd: bool) -> String {
    format!(
        r#"{{"backend":"jsonl","path":{},"compression":"{}","batchWindowMs":0}}"#,
        Value::str(root.to_str().unwrap()).to_json(),
        if zstd { "zstd" } else { "none" }
    )
}

fn jsonl_log(root: &Path, zstd: bool) -> std::path::PathBuf {
    root.join("_no-cwd").join("f").join(if zstd {
        "session.jsonl.zstd"
    } else {
        "session.jsonl"
    })
}

/// Byte offsets where each append's frame or line ends (window 0: one
/// append, one write).
fn write_session_marking_ends(config: &str, log: &Path) -> (Value, Vec<u64>) {
    let store = Store::open(&declaring(config)).unwrap();
    let s = store.create(r#"{"id":"f"}"#).unwrap();
    let mut ends = Vec::new();
    let mut append = |ty: &str, data: &str, intent: Option<&str>| {
        s.append_ok(ty, data, intent);
        ends.push(std::fs::metadata(log).unwrap().len());
    };
    append("turn/start", r#"{"turn":1}"#, None);
    append(
        "user/message",
        r#"{"id":"u1","role":"user","content":[],"source":{"kind":"user"}}"#,
        Some(r#"{"surfaceOp":"append"}"#),
    );
    append(
        "turn/end",
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        None,
    );
    append("turn/start", r#"{"turn":2}"#, None);
    append(
        "compaction/summary",
        &format!(r#"{{"text":"{}"}}"#, "lorem ipsum dolor ".repeat(40)),
        None,
    );
    let events = s.events();
    drop(s);
    drop(store);
    (events, ends)
}

#[test]
fn jsonl_truncation_at_every_byte_of_the_last_record_repairs_cleanly() {
    for zstd in [true, false] {
        let dir = temp_dir("fault-jsonl-trunc");
        let root = dir.join("root");
        let config = jsonl_config(&root, zstd);
        let log = jsonl_log(&root, zstd);
        let (written, ends) = write_session_marking_ends(&config, &log);
        let original = std::fs::read(&log).unwrap();
        let (start, end) = (ends[ends.len() - 2], ends[ends.len() - 1]);
        for cut in start..=end {
            std::fs::write(&log, &original[..cut as usize]).unwrap();
            let events =
                open_after(&config).unwrap_or_else(|e| panic!("zstd {zstd}, cut at {cut}: {e:?}"));
            // What the open cut is kept beside the log, byte for byte.
            let now = std::fs::read(&log).unwrap().len();
            let kept_bytes = take_copies(&log);
            if let Some((at, bytes)) = kept_bytes.first() {
                assert_eq!(kept_bytes.len(), 1, "zstd {zstd}, cut at {cut}");
                assert_eq!(
                    bytes[..],
                    original[*at..cut as usize],
                    "zstd {zstd}, cut at {cut}"
                );
                assert!(*at <= now, "zstd {zstd}, cut at {cut}");
            } else {
                assert!(
                    now as u64 >= cut,
                    "zstd {zstd}, cut at {cut}: cut without a copy"
                );
            }
            // The last record survives when the cut spares all of it (a torn
            // zstd frame may still yield its whole plaintext).
            let kept = events.as_array().unwrap().len() - 2;
            assert!(
                kept == 4 || kept == 5,
                "zstd {zstd}, cut at {cut}: {kept} kept"
            );
            assert!(
                cut < end || kept == 5,
                "zstd {zstd}: the untouched log lost an event"
            );
            assert_eq!(
                first(&events, kept),
                first(&written, kept),
                "zstd {zstd}, cut at {cut}"
            );
            // Turn 2 is open in the kept prefix: repair closes it, durably.
            let last_types = types_of(&events.as_array().unwrap()[kept..]);
            assert_eq!(
                last_types,
                ["turn/end", "session/end-seed"],
                "zstd {zstd}, cut at {cut}"
            );
            assert_eq!(
                open_after(&config).unwrap(),
                events,
                "zstd {zstd}, cut at {cut}: repair not durable"
            );
        }
    }
}

#[test]
fn zstd_bit_flips_in_committed_frames_are_corrupt_and_left_alone() {
    let dir = temp_dir("fault-jsonl-flip");
    let root = dir.join("root");
    let config = jsonl_config(&root, true);
    let log = jsonl_log(&root, true);
    let (written, ends) = write_session_marking_ends(&config, &log);
    let original = std::fs::read(&log).unwrap();
    // Frames up to the one holding the first turn/end are the committed
    // region. Every flip must end in DSH_E_CORRUPT or, where the bit does
    // not change what decodes, in the same events.
    let committed_end = ends[2] as usize;
    let mut x: u64 = 0x2545F4914F6CDD1D;
    for round in 0..60 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let pos = (x as usize) % committed_end;
        let bit = 1u8 << ((x >> 32) % 8);
        let mut damaged = original.clone();
        damaged[pos] ^= bit;
        std::fs::write(&log, &damaged).unwrap();
        match open_after(&config) {
            Err((status, text)) => {
                assert!(
                    [DSH_E_CORRUPT, DSH_E_SCHEMA_MISMATCH].contains(&status),
                    "round {round} (byte {pos}): {text}"
                );
                assert!(
                    !rule(&text).is_empty(),
                    "round {round}: no rule id in {text}"
                );
                assert_eq!(
                    std::fs::read(&log).unwrap(),
                    damaged,
                    "round {round}: the log was changed"
                );
            }
            Ok(events) => {
                // A few header bits (e.g. the window size) do not change
                // what decodes; then nothing committed may have changed.
                assert_eq!(
                    first(&events, 5),
                    first(&written, 5),
                    "round {round}: a flipped bit at byte {pos} changed committed events"
                );
                std::fs::write(&log, &original).unwrap();
            }
        }
    }
}

/// The quarantine copies beside `log`, removed, as (offset of the cut,
/// bytes), by offset.
fn take_copies(log: &Path) -> Vec<(usize, Vec<u8>)> {
    let name = log.file_name().unwrap().to_string_lossy().into_owned();
    let prefix = format!("{name}.cut-");
    let mut copies = Vec::new();
    for entry in std::fs::read_dir(log.parent().unwrap()).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        if let Some(at) = file.strip_prefix(&prefix) {
            let at: usize = at.split('-').next().unwrap().parse().unwrap();
            copies.push((at, std::fs::read(&path).unwrap()));
            std::fs::remove_file(&path).unwrap();
        }
    }
    copies.sort();
    copies
}

#[test]
fn zstd_zeros_after_the_last_good_frame_are_cut_and_damage_of_it_refuses() {
    let dir = temp_dir("fault-zstd-tail");
    let root = dir.join("root");
    let config = jsonl_config(&root, true);
    let log = jsonl_log(&root, true);
    let (written, ends) = write_session_marking_ends(&config, &log);
    let original = std::fs::read(&log).unwrap();
    // What a power cut leaves: the size grew, the data never arrived. The
    // zeros are cut, with a copy kept.
    for zeros in [1usize, 3, 4, 5, 64, 4096] {
        let mut damaged = original.clone();
        damaged.resize(original.len() + zeros, 0);
        std::fs::write(&log, &damaged).unwrap();
        let events = open_after(&config).unwrap_or_else(|e| panic!("{zeros} zeros: {e:?}"));
        assert_eq!(first(&events, 5), first(&written, 5), "{zeros} zeros");
        assert_eq!(take_copies(&log), vec![(original.len(), vec![0; zeros])]);
        assert_eq!(
            open_after(&config).unwrap(),
            events,
            "{zeros} zeros: not durable"
        );
        std::fs::write(&log, &original).unwrap();
    }
    // Every byte of the last frame damaged in turn: the open refuses and
    // leaves the log as it is (or, where the bit changes nothing that
    // decodes, opens with every event as written).
    let (start, end) = (ends[3] as usize, ends[4] as usize);
    for pos in start..end {
        let mut damaged = original.clone();
        damaged[pos] ^= 1 << (pos % 8);
        std::fs::write(&log, &damaged).unwrap();
        match open_after(&config) {
            Err((status, text)) => {
                assert_eq!(status, DSH_E_CORRUPT, "byte {pos}: {text}");
                assert_eq!(std::fs::read(&log).unwrap(), damaged, "byte {pos}: changed");
            }
            Ok(events) => assert_eq!(first(&events, 5), first(&written, 5), "byte {pos}"),
        }
        assert!(take_copies(&log).is_empty(), "byte {pos}: a cut");
        std::fs::write(&log, &original).unwrap();
    }
}

#[test]
fn zstd_damage_before_a_later_intact_frame_stays_corrupt() {
    let dir = temp_dir("fault-zstd-middle");
    let root = dir.join("root");
    let config = jsonl_config(&root, true);
    let log = jsonl_log(&root, true);
    let (_, ends) = write_session_marking_ends(&config, &log);
    let original = std::fs::read(&log).unwrap();
    for (what, range) in [
        ("zeroed magic", ends[2] as usize..ends[2] as usize + 4),
        ("zeroed frame", ends[2] as usize..ends[3] as usize),
    ] {
        let mut damaged = original.clone();
        damaged[range].fill(0);
        std::fs::write(&log, &damaged).unwrap();
        let (status, text) = open_after(&config)
            .err()
            .unwrap_or_else(|| panic!("{what}: opened"));
        assert_eq!(status, DSH_E_CORRUPT, "{what}: {text}");
        assert_eq!(
            std::fs::read(&log).unwrap(),
            damaged,
            "{what}: the log was changed"
        );
    }
}

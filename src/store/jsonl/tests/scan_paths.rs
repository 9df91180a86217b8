//! JSONL scanning and paths (docs/tests-checklist.md, jsonl.spec rows): records
//! split across read blocks, a bad packed row in the tail, shared project
//! directories, ids that cannot name a path, and file-system faults that
//! must surface instead of reading as absence.

use crate::rule::Rule;
use crate::store::backend::TornKind;
use std::fs;
use std::path::PathBuf;
use std::sync::Arc;

use super::tests::{ev, header, TempRoot, BOTH};
use super::*;
use crate::store::backend::{RangeReads, Stored};

fn texts(values: &[Value]) -> Vec<String> {
    values.iter().map(Value::to_json).collect()
}

fn stored_texts(stored: &[Stored]) -> Vec<String> {
    stored.iter().map(|s| s.to_value().to_json()).collect()
}

fn event_texts(events: &[Arc<Event>]) -> Vec<String> {
    events.iter().map(|e| e.to_value().to_json()).collect()
}

/// Events whose text crosses the 1 MiB read blocks of a streaming read
/// with 4-byte characters everywhere, shifted by `shift` bytes so a block
/// boundary falls at each position inside a character.
fn wide_events(shift: usize) -> Vec<Arc<Event>> {
    let mut out = vec![ev(
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
    )];
    out.push(ev(&format!(
        r#"{{"type":"x/pad","seq":1,"time":1,"data":{{"p":"{}"}}}}"#,
        "p".repeat(shift)
    )));
    // 2.7 MiB of text in 27 KiB events: `😀` and `é` mixed.
    for i in 0..100u64 {
        let body: String = (0..8192)
            .map(|k| if k % 3 == 0 { "é" } else { "😀" })
            .collect();
        out.push(ev(&format!(
            r#"{{"type":"x/wide","seq":{},"time":1,"data":{{"w":"{body}"}}}}"#,
            2 + i
        )));
    }
    out
}

/// jsonl.spec #40: records and multi-byte characters split across the
/// blocks of a streaming read (file blocks, zstd output chunks) scan
/// exactly as the whole-file read does; ranged reads across the
/// boundaries agree too.
#[test]
fn records_split_across_read_blocks_scan_identically() {
    for compression in BOTH {
        for shift in 0..4 {
            let root = TempRoot::new("split");
            let events = wide_events(shift);
            let want = event_texts(&events);
            {
                let mut b = JsonlBackend::open(&root.0, compression).unwrap();
                // One batch: one zstd frame far larger than a block.
                b.append(&header("w", None), &events, true).unwrap();
            }
            let mut b = JsonlBackend::open(&root.0, compression).unwrap();
            let mut streamed = Vec::new();
            let end = b
                .load_streaming("w", &mut |_, batch| {
                    streamed.extend(stored_texts(&batch));
                    Ok(())
                })
                .unwrap();
            assert!(end.is_some(), "{compression:?}: clean log streams");
            assert_eq!(streamed, want, "{compression:?} shift {shift}");
            let loaded = b.load("w").unwrap().unwrap();
            assert!(loaded.torn.is_none());
            assert_eq!(texts(&loaded.values()), want);
            for (from, to) in [(0, 102), (15, 19), (37, 41), (60, 102)] {
                let range = b.load_range("w", from, to).unwrap();
                assert_eq!(
                    stored_texts(&range),
                    want[from as usize..to as usize],
                    "{compression:?} shift {shift} range {from}..{to}"
                );
            }
        }
    }
}

/// A plain root holding `_no-cwd/<id>/session.jsonl` = header + `lines`.
fn raw_log(root: &TempRoot, id: &str, lines: &[&str]) -> PathBuf {
    let dir = root.0.join("_no-cwd").join(id);
    fs::create_dir_all(&dir).unwrap();
    let mut text = format!(
        r#"{{"type":"session","version":0,"id":"{id}","createdAt":1,"delegationDepth":0}}"#
    );
    text.push('\n');
    for l in lines {
        text.push_str(l);
        text.push('\n');
    }
    let path = dir.join("session.jsonl");
    fs::write(&path, text).unwrap();
    path
}

/// jsonl.spec #58: a packed row after the last `turn/end` whose members do
/// not continue the seqs (a gap, or an overlap) is dropped whole: the
/// torn marker is the row's first byte, no member is kept, and the repair
/// cuts exactly there.
#[test]
fn a_packed_tail_row_off_the_seqs_is_dropped_whole() {
    let committed = [
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
        r#"{"type":"turn/end","seq":1,"time":1,"data":{"turn":1}}"#,
        r#"{"type":"turn/start","seq":2,"time":1,"data":{"turn":2}}"#,
    ];
    for seq0 in [4, 2, 1] {
        let row = format!(
            r#"{{"type":"text-chunks","seq0":{seq0},"time0":5,"data":{{"turn":2,"step":1,"index":0,"dt":[0,1],"texts":["a","b","c"]}}}}"#
        );
        let root = TempRoot::new("packed-gap");
        let mut lines = committed.to_vec();
        lines.push(&row);
        let path = raw_log(&root, "g", &lines);
        let before = fs::read(&path).unwrap();
        let row_at = before.len() - row.len() - 1;
        let mut b = JsonlBackend::open(&root.0, Compression::None).unwrap();
        let loaded = b.load("g").unwrap().unwrap();
        assert_eq!(
            texts(&loaded.values()),
            committed.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            "seq0 {seq0}"
        );
        let torn = loaded.torn.clone().unwrap();
        assert_eq!(
            torn,
            Torn {
                at: crate::store::backend::TornAt::Byte(row_at as u64),
                recovered: 0,
                why: TornKind::PartialLine,
                length: (before.len() - row_at) as u64,
            },
            "seq0 {seq0}"
        );
        let closer = ev(r#"{"type":"turn/end","seq":3,"time":2,"data":{"turn":2}}"#);
        b.commit_repair(&loaded.header, Some(&torn), std::slice::from_ref(&closer))
            .unwrap();
        let after = fs::read(&path).unwrap();
        assert_eq!(after[..row_at], before[..row_at], "committed bytes kept");
        assert_eq!(
            &after[row_at..],
            format!("{}\n", closer.to_value().to_json()).as_bytes()
        );
    }
}

/// jsonl.spec #63: cwds that normalize to the same project key share one
/// project directory; each session keeps its own cwd and loads.
#[test]
fn cwds_with_one_project_key_share_its_directory() {
    for compression in BOTH {
        let root = TempRoot::new("project-key");
        let mut b = JsonlBackend::open(&root.0, compression).unwrap();
        let first = [ev(
            r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
        )];
        let cwds = ["/a/b", "/a//b", "\\a:b", "//a\\/b"];
        for (i, cwd) in cwds.iter().enumerate() {
            b.append(&header(&format!("s{i}"), Some(cwd)), &first, true)
                .unwrap();
        }
        let dirs: Vec<String> = fs::read_dir(&root.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(dirs, ["--a-b--"], "{compression:?}");
        let mut sessions: Vec<String> = fs::read_dir(root.0.join("--a-b--"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        sessions.sort();
        assert_eq!(sessions, ["s0", "s1", "s2", "s3"]);
        let mut listed: Vec<(String, String)> = b
            .list()
            .unwrap()
            .iter()
            .map(|l| {
                let h = l.header.as_object().unwrap();
                (
                    h.get("id").unwrap().as_str().unwrap().to_string(),
                    h.get("cwd").unwrap().as_str().unwrap().to_string(),
                )
            })
            .collect();
        listed.sort();
        let want: Vec<(String, String)> = cwds
            .iter()
            .enumerate()
            .map(|(i, c)| (format!("s{i}"), c.to_string()))
            .collect();
        assert_eq!(listed, want);
        for (i, cwd) in cwds.iter().enumerate() {
            let loaded = b.load(&format!("s{i}")).unwrap().unwrap();
            assert_eq!(
                loaded.header.as_object().unwrap().get("cwd"),
                Some(&Value::str(cwd))
            );
            assert_eq!(loaded.events.len(), 1);
        }
    }
}

/// jsonl.spec #73: `list` refuses a stored header whose id cannot name a
/// path (the empty id): `jsonl.header-path-mismatch`, `DSH_E_CORRUPT`.
#[test]
fn list_refuses_a_header_whose_id_cannot_name_a_path() {
    let root = TempRoot::new("empty-id");
    raw_log(&root, "ok", &[]);
    let dir = root.0.join("_no-cwd").join("e");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("session.jsonl"),
        "{\"type\":\"session\",\"version\":0,\"id\":\"\",\"createdAt\":1,\"delegationDepth\":0}\n",
    )
    .unwrap();
    let mut b = JsonlBackend::open(&root.0, Compression::None).unwrap();
    let err = b.list().unwrap_err();
    assert_eq!(
        (err.status, err.rule),
        (Status::Corrupt, Rule::JsonlHeaderPathMismatch)
    );
}

/// jsonl.spec #81: a root that becomes unusable after the open (replaced
/// by a regular file) makes `list` fail with `DSH_E_IO`, not answer
/// "nothing stored".
#[test]
fn list_surfaces_a_root_that_became_unusable() {
    for compression in BOTH {
        let root = TempRoot::new("root-gone");
        let mut b = JsonlBackend::open(&root.0, compression).unwrap();
        b.append(
            &header("r", None),
            &[ev(
                r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
            )],
            true,
        )
        .unwrap();
        fs::remove_dir_all(&root.0).unwrap();
        fs::write(&root.0, b"not a directory").unwrap();
        let err = b.list().unwrap_err();
        assert_eq!(err.status, Status::Io, "{compression:?}: {err}");
        assert!(err.rule.as_str().starts_with("io."), "{err}");
        fs::remove_file(&root.0).unwrap();
    }
}

/// jsonl.spec #82 and #22: lookup and listing surface file-system errors
/// other than "not found" — here a log that is a symlink loop (ELOOP) —
/// as `DSH_E_IO` instead of treating the session as absent. (A Unix
/// condition: on Windows any reparse point is `jsonl.link`, tests_windows.)
#[cfg(unix)]
#[test]
fn lookup_and_listing_surface_non_enoent_errors() {
    for compression in BOTH {
        let name = layout::log_name(compression);
        // A symlink loop where the log should be.
        let root = TempRoot::new("eloop");
        let dir = root.0.join("_no-cwd").join("l");
        fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(dir.join(name), dir.join(name)).unwrap();
        let mut b = JsonlBackend::open(&root.0, compression).unwrap();
        let err = b.load("l").unwrap_err();
        assert_eq!(err.status, Status::Io, "{compression:?} load: {err}");
        let err = b.list().unwrap_err();
        assert_eq!(err.status, Status::Io, "{compression:?} list: {err}");
    }
}

/// jsonl.spec #83: materializing a session whose project directory cannot
/// be created (a regular file is in its place) fails with `DSH_E_IO` and
/// leaves nothing behind.
#[test]
fn materialization_surfaces_a_project_directory_fault() {
    for compression in BOTH {
        let root = TempRoot::new("project-fault");
        let mut b = JsonlBackend::open(&root.0, compression).unwrap();
        fs::write(root.0.join("--w--"), b"x").unwrap();
        let err = b
            .append(
                &header("p", Some("/w")),
                &[ev(
                    r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
                )],
                true,
            )
            .unwrap_err();
        assert_eq!(err.status, Status::Io, "{compression:?}: {err}");
        assert!(err.rule.as_str().starts_with("io."), "{err}");
        assert_eq!(fs::read(root.0.join("--w--")).unwrap(), b"x");
        fs::remove_file(root.0.join("--w--")).unwrap();
        assert!(b.load("p").unwrap().is_none(), "nothing was written");
    }
}

/// A plain log is scanned as it is read, a block (4 KiB under test) at a
/// time: cut anywhere, its load keeps the complete lines, marks the end of
/// the last one as the torn tail, and reads the same events whole.
#[test]
fn a_plain_log_cut_anywhere_loads_its_complete_lines() {
    let root = TempRoot::new("plain-cuts");
    let mut b = JsonlBackend::open(&root.0, Compression::None).unwrap();
    let h = header("p", None);
    let events: Vec<_> = (0..600)
        .map(|i| {
            ev(&format!(
                r#"{{"type":"plugin/x","seq":{i},"time":5,"data":{{"t":"é{}"}}}}"#,
                "w".repeat(i as usize % 90)
            ))
        })
        .collect();
    b.append(&h, &events, true).unwrap();
    let path = b.path_of(&h).unwrap();
    let full = fs::read(&path).unwrap();
    let header_len = full.iter().position(|&c| c == b'\n').unwrap() + 1;
    let mut r = crate::test_rng::Rng(0xC0_7A11);
    let mut cuts: Vec<usize> = (0..30)
        .map(|_| header_len + r.below(full.len() - header_len))
        .collect();
    cuts.extend([header_len, full.len()]);
    for cut in cuts {
        fs::write(&path, &full[..cut]).unwrap();
        let loaded = b.load("p").unwrap().unwrap();
        let line_end = full[..cut].iter().rposition(|&c| c == b'\n').unwrap() + 1;
        let lines = full[header_len..line_end]
            .iter()
            .filter(|&&c| c == b'\n')
            .count();
        assert_eq!(loaded.events.len(), lines, "cut {cut}");
        assert_eq!(
            stored_texts(&loaded.events),
            event_texts(&events[..lines]),
            "cut {cut}"
        );
        let torn = loaded.torn.map(|t| (t.at.value(), t.recovered));
        let want = (line_end < cut).then_some((line_end as u64, 0));
        assert_eq!(torn, want, "cut {cut}");
    }
    // Without the header's end the log has no header.
    fs::write(&path, &full[..header_len - 1]).unwrap();
    assert_eq!(b.load("p").unwrap_err().rule, Rule::JsonlHeaderMissing);
}

#[test]
fn zstd_uses_worker_threads_only_while_a_flush_waits() {
    let hurry = Arc::new(Hurry::default());
    for compression in BOTH {
        let root = TempRoot::new("workers");
        let mut b = JsonlBackend::open(&root.0, compression).unwrap();
        let zstd = compression == Compression::Zstd;
        // No writer: whoever writes waits for the write.
        assert_eq!(b.workers() > 0, zstd);
        b.set_hurry(hurry.clone());
        assert_eq!(b.workers(), 0, "appends may run: the other core is theirs");
        let waiting = hurry.enter();
        assert_eq!(b.workers() > 0, zstd);
        drop(waiting);
        assert_eq!(b.workers(), 0);
    }
}

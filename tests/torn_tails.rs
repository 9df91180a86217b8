//! Damage is not a torn write: a JSONL log whose last zstd frame is
//! damaged anywhere refuses to open (`DSH_E_CORRUPT`) and is left byte for
//! byte as it was; what a crash leaves (a frame cut short, zeros where the
//! file grew) is cut by the open, with a copy of the cut bytes kept beside
//! the log and the cut reported; a salvage cuts damage the same way when
//! asked to.
#![cfg(feature = "jsonl")]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_session::engine::Event;
use dsh_session::store::{
    BackendConfig, CreateOptions, RepairOptions, Store, StoreConfig, TornKind,
};
use dsh_session::{Rule, Status};

mod common;

use common::Temp;

fn store(dir: &Path, zstd: bool) -> Arc<Store> {
    let mut c = StoreConfig::new(BackendConfig::Jsonl {
        path: dir.to_path_buf(),
        zstd,
    });
    c.batch_window_ms = 0;
    Store::open(c).unwrap()
}

/// A closed session "t" of `turns` turns, a flush after each event, so its
/// zstd log is merged into large frames when it is closed. Returns the
/// log's path and every event's text.
fn write_session(dir: &Path, zstd: bool, turns: u64) -> (PathBuf, Vec<String>) {
    let s = store(dir, zstd);
    let live = s.create(CreateOptions::with_id("t")).unwrap();
    let mut texts = Vec::new();
    let mut keep = |e: Arc<Event>| texts.push(e.text().to_string());
    for turn in 1..=turns {
        keep(
            live.append_text("turn/start", &format!(r#"{{"turn":{turn}}}"#), None)
                .unwrap(),
        );
        for step in 1..=2 {
            let data = format!(
                r#"{{"turn":{turn},"step":{step},"chunk":{{"type":"text-delta","index":0,"text":"step {step} of turn {turn}, some words to compress"}}}}"#
            );
            keep(live.append_text("assistant/chunk", &data, None).unwrap());
            live.flush().unwrap();
        }
        let end = format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#);
        keep(live.append_text("turn/end", &end, None).unwrap());
        live.flush().unwrap();
    }
    live.close().unwrap();
    let name = if zstd {
        "session.jsonl.zstd"
    } else {
        "session.jsonl"
    };
    (dir.join("_no-cwd/t").join(name), texts)
}

/// The byte ranges of the complete zstd frames of `bytes`.
fn frames(bytes: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let n = zstd::zstd_safe::find_frame_compressed_size(&bytes[at..]).unwrap();
        out.push(at..at + n);
        at += n;
    }
    out
}

fn copies(log: &Path) -> Vec<PathBuf> {
    let name = log.file_name().unwrap().to_string_lossy().into_owned();
    let mut v: Vec<PathBuf> = std::fs::read_dir(log.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!("{name}.cut-"))
        })
        .collect();
    v.sort();
    v
}

#[test]
fn every_byte_of_the_last_frame_flipped_refuses_the_open_and_changes_nothing() {
    let dir = Temp::new("torn-flip");
    let (log, texts) = write_session(&dir.0, true, 40);
    let clean = std::fs::read(&log).unwrap();
    let f = frames(&clean);
    let last = f.last().unwrap().clone();
    assert!(
        f.len() >= 2 && last.len() > 400,
        "the log was not merged: {f:?}"
    );
    let s = store(&dir.0, true);
    let mut benign = 0;
    for i in last.clone() {
        // The whole byte; and every bit on its own in the frame's header,
        // its first block header and its checksum (where a flip can make
        // a complete frame look cut short, or end early).
        let structure = i < last.start + 32 || i >= last.end - 8;
        let bits: &[u8] = if structure {
            &[0xFF, 1, 2, 4, 8, 16, 32, 64, 128]
        } else {
            &[0xFF]
        };
        for &flip in bits {
            let mut bytes = clean.clone();
            bytes[i] ^= flip;
            std::fs::write(&log, &bytes).unwrap();
            match s.open_session("t") {
                Err(e) => {
                    assert_eq!(
                        e.status,
                        Status::Corrupt,
                        "byte {} of the last frame ^ {flip:#x}: {e}",
                        i - last.start
                    );
                    assert_eq!(
                        std::fs::read(&log).unwrap(),
                        bytes,
                        "byte {i}: the log changed"
                    );
                }
                Ok(opened) => {
                    // A bit no decoder reads (a flip that leaves the frame's
                    // content and checksum as they were) destroys nothing:
                    // every event is there, nothing was cut.
                    assert!(flip != 0xFF, "byte {} ^ 0xff opened", i - last.start);
                    assert!(
                        opened.cut.is_none() && opened.repaired.is_empty(),
                        "byte {i} ^ {flip:#x}"
                    );
                    let stored = s.inspect("t").unwrap();
                    opened.session.close().unwrap();
                    let got: Vec<&str> = stored
                        .events
                        .iter()
                        .map(|e| e.text())
                        .take(texts.len())
                        .collect();
                    assert_eq!(got, texts.iter().map(String::as_str).collect::<Vec<_>>());
                    benign += 1;
                }
            }
        }
    }
    assert!(copies(&log).is_empty());
    eprintln!("{benign} single-bit flips left the frame's content intact");
}

#[test]
fn truncated_and_zero_filled_tails_are_cut_with_a_copy_and_reported() {
    for zstd in [true, false] {
        let dir = Temp::new(if zstd { "torn-cut-z" } else { "torn-cut-p" });
        let (log, texts) = write_session(&dir.0, zstd, 8);
        let clean = std::fs::read(&log).unwrap();
        let s = store(&dir.0, zstd);
        let tails: Vec<(Vec<u8>, TornKind)> = vec![
            // A batch being written when the process died: a prefix of it.
            (
                b"{\"type\":\"turn/start\",\"seq\":".to_vec(),
                TornKind::PartialLine,
            ),
            (vec![0; 700], TornKind::ZeroFilled),
        ];
        for (tail, kind) in tails {
            let (tail, kind) = match (zstd, kind) {
                (false, TornKind::ZeroFilled) => (tail, TornKind::PartialLine),
                (true, TornKind::PartialLine) => {
                    // A frame of a whole batch, cut short.
                    let mut frame = Vec::new();
                    let lines: String = (0..40)
                        .map(|i| {
                            let seq = texts.len() + i;
                            format!("{{\"type\":\"test/x\",\"seq\":{seq},\"time\":1,\"data\":{{\"i\":{i}}},\"ignorable\":true}}\n")
                        })
                        .collect();
                    let mut enc = zstd::stream::Encoder::new(&mut frame, 1).unwrap();
                    enc.include_checksum(true).unwrap();
                    std::io::Write::write_all(&mut enc, lines.as_bytes()).unwrap();
                    enc.finish().unwrap();
                    (frame[..frame.len() / 2].to_vec(), TornKind::IncompleteFrame)
                }
                (_, kind) => (tail, kind),
            };
            let torn = [clean.clone(), tail.clone()].concat();
            std::fs::write(&log, &torn).unwrap();
            let opened = s.open_session("t").unwrap();
            let cut = opened.cut.clone().expect("the cut is reported");
            assert_eq!(
                (cut.at, cut.length, cut.why),
                (clean.len() as u64, tail.len() as u64, kind)
            );
            assert_eq!(
                std::fs::read(&cut.copy).unwrap(),
                tail,
                "the copy holds the cut bytes"
            );
            assert_eq!(
                cut.copy.parent(),
                log.parent(),
                "the copy is beside the log"
            );
            // The events are the committed prefix, byte for byte, and the
            // log is clean again (the open adds its end-seed marker).
            let stored = s.inspect("t").unwrap();
            opened.session.close().unwrap();
            assert!(stored.torn.is_none());
            assert_eq!(stored.quarantined, vec![cut.copy.clone()]);
            let got: Vec<&str> = stored.events.iter().map(|e| e.text()).collect();
            assert_eq!(
                &got[..texts.len()],
                &texts.iter().map(String::as_str).collect::<Vec<_>>()[..]
            );
            std::fs::remove_file(&cut.copy).unwrap();
            std::fs::write(&log, &clean).unwrap();
        }
    }
}

#[test]
fn a_salvage_keeps_the_prefix_and_a_copy_of_the_damage() {
    let dir = Temp::new("torn-salvage");
    let (log, texts) = write_session(&dir.0, true, 40);
    let clean = std::fs::read(&log).unwrap();
    let f = frames(&clean);
    let last = f.last().unwrap().clone();
    let mut damaged = clean.clone();
    for b in &mut damaged[last.start + last.len() / 2..][..8] {
        *b = 0x55;
    }
    std::fs::write(&log, &damaged).unwrap();
    let s = store(&dir.0, true);
    let e = s.open_session("t").unwrap_err();
    assert_eq!((e.status, e.rule), (Status::Corrupt, Rule::ZstdFrameDecode));
    // A plain repair refuses too; a dry-run salvage says what it would cut.
    assert_eq!(
        s.repair("t", RepairOptions::default()).unwrap_err().status,
        Status::Corrupt
    );
    let dry = RepairOptions {
        dry_run: true,
        salvage: true,
    };
    let report = s.repair("t", dry).unwrap();
    assert_eq!(
        report.torn.as_ref().map(|t| t.why),
        Some(TornKind::Salvaged)
    );
    assert_eq!(std::fs::read(&log).unwrap(), damaged, "a dry run wrote");
    let salvage = RepairOptions {
        dry_run: false,
        salvage: true,
    };
    let report = s.repair("t", salvage).unwrap();
    let cut = report.cut.expect("the salvage cut");
    assert_eq!(
        (cut.at, cut.length, cut.why),
        (last.start as u64, last.len() as u64, TornKind::Salvaged)
    );
    assert_eq!(std::fs::read(&cut.copy).unwrap(), &damaged[last.clone()]);
    // The log now holds the events before the damaged frame, and opens.
    let stored = s.inspect("t").unwrap();
    let kept = report.stored;
    assert!(kept > 0 && kept < texts.len());
    let got: Vec<&str> = stored.events.iter().map(|e| e.text()).take(kept).collect();
    assert_eq!(
        got,
        texts[..kept].iter().map(String::as_str).collect::<Vec<_>>()
    );
    s.open_session("t").unwrap().session.close().unwrap();
}

#[test]
fn a_last_frame_whose_end_never_arrived_is_cut_and_zeros_elsewhere_refuse() {
    let dir = Temp::new("torn-zeroed");
    let (log, texts) = write_session(&dir.0, true, 60);
    let clean = std::fs::read(&log).unwrap();
    let last = frames(&clean).last().unwrap().clone();
    assert!(last.len() > 1100, "{last:?}");
    let s = store(&dir.0, true);
    // Zeros from a sector boundary inside the last frame to its end: the
    // frame's data never fully arrived.
    let z = (last.start + 5).div_ceil(512) * 512;
    assert!(z < last.end);
    let mut zeroed = clean.clone();
    zeroed[z..].fill(0);
    // Not from a sector boundary: a complete frame that fails its checksum.
    let mut odd = clean.clone();
    odd[z + 3..].fill(0);
    std::fs::write(&log, &odd).unwrap();
    assert_eq!(s.open_session("t").unwrap_err().status, Status::Corrupt);
    assert_eq!(std::fs::read(&log).unwrap(), odd);
    std::fs::write(&log, &zeroed).unwrap();
    let opened = s.open_session("t").unwrap();
    let cut = opened.cut.clone().unwrap();
    assert_eq!(
        (cut.at, cut.length, cut.why),
        (last.start as u64, last.len() as u64, TornKind::ZeroFilled)
    );
    assert_eq!(std::fs::read(&cut.copy).unwrap(), &zeroed[last.clone()]);
    // What was read before the zeros is kept, as written; then come the
    // closers and the end-seed marker.
    let kept = match opened.repaired.first() {
        Some(c) => c.seq as usize,
        None => s.inspect("t").unwrap().events.len() - 1,
    };
    opened.session.close().unwrap();
    assert!(kept > 0 && kept < texts.len());
    let stored = s.inspect("t").unwrap();
    let got: Vec<&str> = stored.events.iter().take(kept).map(|e| e.text()).collect();
    assert_eq!(
        got,
        texts[..got.len()]
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
    );
}

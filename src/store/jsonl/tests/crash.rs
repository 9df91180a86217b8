//! Crash, corruption and failure tests of the JSONL backend, plus a timing.

use crate::rule::Rule;
use crate::store::backend::TornKind;
use std::fs;
use std::path::PathBuf;
use std::sync::Arc;

use super::tests::{assert_same, ev, header, sample_events, TempRoot, BOTH};
use super::tests_faults::fail_next_sync;
use super::*;

pub(super) fn log_path(root: &TempRoot, id: &str, compression: Compression) -> PathBuf {
    root.0
        .join("_no-cwd")
        .join(id)
        .join(layout::log_name(compression))
}

fn as_events(values: &[Value]) -> Vec<Arc<Event>> {
    values
        .iter()
        .map(|v| Arc::new(Event::from_envelope(v.clone(), "recovered").unwrap()))
        .collect()
}

/// Cut the last batch of a log at every byte offset: a load gives a prefix
/// of what was appended, repair leaves a clean log, and appending the rest
/// afterwards restores the whole log.
#[test]
fn truncation_at_every_offset_of_the_last_batch_repairs_cleanly() {
    for compression in BOTH {
        let root = TempRoot::new("torn");
        let mut b = JsonlBackend::open(&root.0, compression).unwrap();
        let events = sample_events();
        let h = header("t", None);
        b.append(&h, &events[..12], true).unwrap();
        let path = log_path(&root, "t", compression);
        let start = fs::metadata(&path).unwrap().len() as usize;
        b.append(&h, &events[12..], false).unwrap();
        let full = fs::read(&path).unwrap();
        let mut recovered_any = false;
        for cut in start..=full.len() {
            fs::write(&path, &full[..cut]).unwrap();
            let loaded = b.load("t").unwrap().unwrap();
            let n = loaded.events.len();
            assert!(n >= 12, "cut {cut}: committed events lost");
            assert_same(&loaded.values(), &events[..n]);
            let torn = loaded.torn.clone();
            match (&torn, compression) {
                (None, _) if cut == full.len() => assert_eq!(n, events.len()),
                (None, Compression::None) => assert_eq!(full[cut - 1], b'\n', "cut {cut}"),
                (None, Compression::Zstd) => assert_eq!((cut, n), (start, 12)),
                (Some(t), Compression::None) => {
                    assert_eq!(t.recovered, 0);
                    assert!(t.at.value() as usize <= cut && t.at.value() as usize >= start);
                }
                (Some(t), Compression::Zstd) => {
                    assert_eq!(t.at.value() as usize, start);
                    assert_eq!(t.recovered, n - 12);
                    recovered_any |= t.recovered > 0;
                    if cut >= full.len() - 4 {
                        assert_eq!(n, events.len(), "only the checksum is torn");
                    }
                }
            }
            let recovered = torn.as_ref().map_or(0, |t| t.recovered);
            let cut_made = b
                .commit_repair(
                    &h,
                    torn.as_ref(),
                    &as_events(&loaded.values()[n - recovered..]),
                )
                .unwrap();
            // What was cut is kept, byte for byte, beside the log.
            match (&torn, cut_made) {
                (Some(t), Some(c)) => {
                    let at = t.at.value() as usize;
                    assert_eq!(
                        (c.at, c.length, c.why),
                        (t.at.value(), (cut - at) as u64, t.why)
                    );
                    assert_eq!(fs::read(&c.copy).unwrap(), &full[at..cut], "cut {cut}");
                    fs::remove_file(&c.copy).unwrap();
                }
                (None, None) => {}
                (t, c) => panic!("cut {cut}: torn {t:?}, cut {c:?}"),
            }
            let again = b.load("t").unwrap().unwrap();
            assert!(again.torn.is_none(), "cut {cut}: repair left a torn tail");
            assert_same(&again.values(), &events[..n]);
            if n < events.len() {
                b.append(&h, &events[n..], false).unwrap();
            }
            let whole = b.load("t").unwrap().unwrap();
            assert!(whole.torn.is_none());
            assert_same(&whole.values(), &events);
        }
        assert_eq!(recovered_any, compression == Compression::Zstd);
    }
}

/// Pseudo-random text that does not compress much.
pub(super) fn noise(seed: &mut u64, len: usize) -> String {
    (0..len)
        .map(|_| {
            *seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            char::from(b'a' + ((*seed >> 33) % 26) as u8)
        })
        .collect()
}

fn big_events(from: u64, n: u64, text_len: usize) -> Vec<Arc<Event>> {
    let mut seed = from + 7;
    (from..from + n)
        .map(|seq| {
            ev(&format!(
                r#"{{"type":"user/message","seq":{seq},"time":{seq},"data":{{"message":{{"role":"user","content":"{}"}}}}}}"#,
                noise(&mut seed, text_len)
            ))
        })
        .collect()
}

#[test]
fn a_torn_multi_block_frame_gives_back_its_complete_records() {
    let root = TempRoot::new("bigtorn");
    let mut b = JsonlBackend::open(&root.0, Compression::Zstd).unwrap();
    let h = header("big", None);
    let events = big_events(0, 400, 1000);
    b.append(&h, &events[..1], true).unwrap();
    let path = log_path(&root, "big", Compression::Zstd);
    let start = fs::metadata(&path).unwrap().len() as usize;
    b.append(&h, &events[1..], false).unwrap();
    let full = fs::read(&path).unwrap();
    let mut seen = Vec::new();
    for cut in (start + 1..full.len()).step_by(4999) {
        fs::write(&path, &full[..cut]).unwrap();
        let loaded = b.load("big").unwrap().unwrap();
        assert_eq!(loaded.torn.as_ref().unwrap().at.value() as usize, start);
        assert_same(&loaded.values(), &events[..loaded.values().len()]);
        seen.push(loaded.events.len());
    }
    assert!(seen.windows(2).all(|w| w[0] <= w[1]));
    assert!(
        seen.iter().any(|&n| n > 1 && n < 400),
        "partial frames recover records: {seen:?}"
    );
}

#[test]
fn damage_before_a_later_turn_end_is_corruption() {
    let root = TempRoot::new("damage");
    let mut b = JsonlBackend::open(&root.0, Compression::None).unwrap();
    let h = header("d", None);
    let events = sample_events();
    b.append(&h, &events, true).unwrap();
    let path = log_path(&root, "d", Compression::None);
    let clean = fs::read(&path).unwrap();
    let second_line = clean.iter().position(|&c| c == b'\n').unwrap() + 1;
    let mut flipped = clean.clone();
    flipped[second_line] ^= 0x01;
    fs::write(&path, &flipped).unwrap();
    let e = b.load("d").unwrap_err();
    assert_eq!(
        (e.rule, e.status),
        (Rule::LoadCorruptUnparsable, Status::Corrupt)
    );
    assert!(e.message.contains("line 2"), "{}", e.message);
    let text = String::from_utf8(clean.clone()).unwrap();
    fs::write(&path, text.replacen("\"seq\":1,", "\"seq\":7,", 1)).unwrap();
    let e = b.load("d").unwrap_err();
    assert_eq!(
        (e.rule, e.status),
        (Rule::LoadCorruptSeqGap, Status::Corrupt)
    );
    // A bad row is like bad JSON.
    fs::write(&path, text.replacen("\"dt\":[3,3,3,3]", "\"dt\":[3]", 1)).unwrap();
    assert_eq!(b.load("d").unwrap_err().rule, Rule::LoadCorruptUnparsable);
    // After the last turn/end damage only bounds the prefix.
    let tail = ev(r#"{"type":"turn/start","seq":25,"time":1,"data":{"turn":2}}"#)
        .text()
        .to_string();
    fs::write(&path, format!("{text}garbage\n{tail}\n")).unwrap();
    let loaded = b.load("d").unwrap().unwrap();
    assert_same(&loaded.values(), &events);
    assert_eq!(
        loaded.torn,
        Some(Torn {
            at: crate::store::backend::TornAt::Byte(clean.len() as u64),
            recovered: 0,
            why: TornKind::PartialLine,
            length: (fs::metadata(&path).unwrap().len() - clean.len() as u64),
        })
    );
    b.commit_repair(&h, loaded.torn.as_ref(), &[]).unwrap();
    assert_eq!(fs::read(&path).unwrap(), clean);
    // Header damage.
    fs::write(&path, &clean[second_line..]).unwrap();
    assert_eq!(b.load("d").unwrap_err().rule, Rule::JsonlHeaderInvalid);
}

#[test]
fn zstd_damage_is_corruption() {
    let root = TempRoot::new("zdamage");
    let mut b = JsonlBackend::open(&root.0, Compression::Zstd).unwrap();
    let h = header("z", None);
    let events = sample_events();
    b.append(&h, &events[..10], true).unwrap();
    b.append(&h, &events[10..], false).unwrap();
    let path = log_path(&root, "z", Compression::Zstd);
    let clean = fs::read(&path).unwrap();
    let frames = zstd_frames::scan_frames(&clean, None).unwrap().complete;
    for (i, f) in frames.iter().enumerate().take(2) {
        let mut bytes = clean.clone();
        bytes[(f.start + f.end) / 2] ^= 0x04;
        fs::write(&path, &bytes).unwrap();
        let e = b.load("z").unwrap_err();
        assert_eq!(
            (e.rule, e.status),
            (Rule::ZstdFrameDecode, Status::Corrupt),
            "frame {i}"
        );
    }
    let mut bytes = clean.clone();
    bytes[frames[1].start] = 0;
    fs::write(&path, &bytes).unwrap();
    assert_eq!(b.load("z").unwrap_err().rule, Rule::ZstdBadMagic);
    let header_frame = &clean[frames[0].clone()];
    let frame = |plain: &str| {
        let mut out = header_frame.to_vec();
        zstd_frames::compress_frame(plain.as_bytes(), &mut out).unwrap();
        out
    };
    let line0 = events[0].text().to_string();
    for bad in [
        format!("{line0}\ngarbage\n"),
        format!("{line0}\n{{\"type\""),
    ] {
        fs::write(&path, frame(&bad)).unwrap();
        let e = b.load("z").unwrap_err();
        assert_eq!(
            (e.rule, e.status),
            (Rule::ZstdTornRecordInFrame, Status::Corrupt)
        );
    }
    // A record split over two complete frames is fine.
    let (a, c) = line0.split_at(10);
    let mut split = frame(a);
    zstd_frames::compress_frame(format!("{c}\n").as_bytes(), &mut split).unwrap();
    fs::write(&path, split).unwrap();
    assert_same(&b.load("z").unwrap().unwrap().values(), &events[..1]);
}

/// Rewrite the (only) block size of the single-block frame at `frame` so
/// the frame ends at `end`.
fn resize_frame(bytes: &mut [u8], frame: &std::ops::Range<usize>, end: usize) {
    let d = bytes[frame.start + 4];
    let fcs = match d >> 6 {
        0 => usize::from(d & 0x20 != 0),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let block =
        frame.start + 5 + usize::from(d & 0x20 == 0) + [0, 1, 2, 4][usize::from(d & 3)] + fcs;
    let checksum = if d & 0x04 != 0 { 4 } else { 0 };
    let h = u32::from(bytes[block])
        | u32::from(bytes[block + 1]) << 8
        | u32::from(bytes[block + 2]) << 16;
    assert_eq!(
        block + 3 + (h >> 3) as usize + checksum,
        frame.end,
        "one block"
    );
    let size = (end - block - 3 - checksum) as u32;
    let h = (h & 7) | size << 3;
    bytes[block..block + 3].copy_from_slice(&h.to_le_bytes()[..3]);
}

/// A flipped bit in a block size can make a committed frame swallow the
/// frames after it, ending at the end of the file or inside a later frame
/// (the bytes after it then read as a damaged tail). The frame fails its
/// checksum, but complete frames start inside its span: corruption, never
/// a torn tail that would cut committed events away.
#[test]
fn a_frame_that_swallows_later_frames_is_corruption() {
    let root = TempRoot::new("zswallow");
    let mut b = JsonlBackend::open(&root.0, Compression::Zstd).unwrap();
    let h = header("w", None);
    let events = sample_events();
    b.append(&h, &events[..8], true).unwrap();
    b.append(&h, &events[8..16], false).unwrap();
    b.append(&h, &events[16..], false).unwrap();
    let path = log_path(&root, "w", Compression::Zstd);
    let clean = fs::read(&path).unwrap();
    let frames = zstd_frames::scan_frames(&clean, None).unwrap().complete;
    assert_eq!(frames.len(), 4);
    let last = &frames[3];
    for end in [clean.len(), (last.start + last.end) / 2] {
        let mut bytes = clean.clone();
        resize_frame(&mut bytes, &frames[1], end);
        fs::write(&path, &bytes).unwrap();
        let e = b.load("w").unwrap_err();
        // Ending at the end of the file it is a complete frame that fails
        // to decode; ending inside a later frame, the bytes after it are
        // damage (that no crash leaves).
        assert!(
            matches!(
                e.rule,
                Rule::ZstdDamagedFrame | Rule::ZstdFrameDecode | Rule::ZstdBadMagic
            ) && e.status == Status::Corrupt,
            "frame ending at {end}: {}",
            e.message
        );
        assert_eq!(fs::read(&path).unwrap(), bytes, "the log was changed");
    }
    // The last frame swallowing nothing but garbage fails its checksum:
    // damage too, never a torn tail. A salvage keeps the frames before it.
    let mut bytes = clean.clone();
    bytes.extend_from_slice(&[7; 40]);
    resize_frame(&mut bytes, last, clean.len() + 40);
    fs::write(&path, &bytes).unwrap();
    let e = b.load("w").unwrap_err();
    assert_eq!((e.rule, e.status), (Rule::ZstdFrameDecode, Status::Corrupt));
    assert_eq!(fs::read(&path).unwrap(), bytes, "the log was changed");
    let loaded = b.load_salvaging("w").unwrap().unwrap();
    let torn = loaded.torn.as_ref().unwrap();
    assert_eq!(
        (torn.at.value() as usize, torn.why),
        (last.start, TornKind::Salvaged)
    );
    assert_same(&loaded.values(), &events[..16]);
}

#[test]
fn a_failed_append_is_rolled_back_and_can_be_retried() {
    for compression in BOTH {
        let root = TempRoot::new("rollback");
        let mut b = JsonlBackend::open(&root.0, compression).unwrap();
        let h = header("r", None);
        let mut events = sample_events();
        b.append(&h, &events[..10], true).unwrap();
        let path = log_path(&root, "r", compression);
        let before = fs::read(&path).unwrap();
        let fail = fail_next_sync();
        let e = b.append(&h, &events[10..], false).unwrap_err();
        drop(fail);
        assert_eq!((e.rule, e.status), (Rule::IoWrite, Status::Io));
        assert_eq!(fs::read(&path).unwrap(), before);
        b.append(&h, &events[10..], false).unwrap();
        // A batch large enough to be written in chunks by the helper thread.
        let big = big_events(events.len() as u64, 3000, 1000);
        let before = fs::read(&path).unwrap();
        let fail = fail_next_sync();
        assert_eq!(b.append(&h, &big, false).unwrap_err().rule, Rule::IoWrite);
        drop(fail);
        assert_eq!(fs::read(&path).unwrap(), before);
        b.append(&h, &big, false).unwrap();
        events.extend(big);
        let loaded = b.load("r").unwrap().unwrap();
        assert!(loaded.torn.is_none());
        assert_same(&loaded.values(), &events);
        if compression == Compression::Zstd {
            let bytes = fs::read(&path).unwrap();
            assert_eq!(
                zstd_frames::scan_frames(&bytes, None)
                    .unwrap()
                    .complete
                    .len(),
                4
            );
        }
        // A large first batch is materialized the same way.
        let h2 = header("r2", None);
        let big = big_events(0, 3000, 1000);
        b.append(&h2, &big, true).unwrap();
        assert_same(&b.load("r2").unwrap().unwrap().values(), &big);
    }
}

//! Merging a zstd log's small frames (`compact`): the records and their
//! text stay byte for byte, the merged log keeps the format's reader rules
//! and is torn-tail safe, and a merge that fails or races leaves the log.

use std::cell::Cell;
use std::fs;
use std::io;
use std::rc::Rc;

use super::compact::{Tail, FULL_TEXT};
use super::faults::{self, Point};
use super::tests::{assert_same, ev, header, TempRoot};
use super::tests_crash::{log_path, noise};
use super::*;

/// Events `from..from + n`: runs of chunks (stored packed) between user
/// messages of compressible text.
fn step_events(from: u64, n: u64) -> Vec<Arc<Event>> {
    (from..from + n)
        .map(|i| {
            if i % 5 < 3 {
                ev(&format!(
                    r#"{{"type":"assistant/chunk","seq":{i},"time":{i},"data":{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"word {i} "}}}}}}"#
                ))
            } else {
                ev(&format!(
                    r#"{{"type":"user/message","seq":{i},"time":{i},"data":{{"id":"u{i}","role":"user","content":[{{"type":"text","text":"please look at file number {} and tell me what it does, step {i}"}}],"source":{{"kind":"user"}}}}}}"#,
                    i % 17
                ))
            }
        })
        .collect()
}

/// A zstd log "m" of `batches` batches of `per` events, one frame each;
/// returns the backend, the log's path and the events.
fn stepped_log(
    root: &TempRoot,
    batches: u64,
    per: u64,
) -> (JsonlBackend, PathBuf, Vec<Arc<Event>>) {
    let mut b = JsonlBackend::open(&root.0, Compression::Zstd).unwrap();
    let h = header("m", None);
    let mut all = Vec::new();
    for k in 0..batches {
        let batch = step_events(k * per, per);
        b.append(&h, &batch, k == 0).unwrap();
        all.extend(batch);
    }
    (b, log_path(root, "m", Compression::Zstd), all)
}

/// The frames of a zstd log.
fn frames_of(bytes: &[u8]) -> Vec<std::ops::Range<usize>> {
    let frames = zstd_frames::scan_frames(bytes, None).unwrap();
    assert_eq!(frames.torn_start, None);
    frames.complete
}

/// The text every frame decodes to, in order.
fn text_of(bytes: &[u8]) -> Vec<u8> {
    zstd::stream::decode_all(bytes).unwrap()
}

/// Merge the log of "m" from its first body frame on, as the writer does
/// when enough small frames piled up.
fn merge_all(b: &mut JsonlBackend, path: &Path) {
    let bytes = fs::read(path).unwrap();
    let frames = frames_of(&bytes);
    let state = b.logs.get_mut("m").unwrap();
    state.tail = Tail {
        from: Some(frames[1].start as u64),
        fresh: bytes.len() as u64,
        len: Some(bytes.len() as u64),
    };
    b.merge_tail("m");
}

/// The format's reader rules (docs/formats.md §3.4) on a merged log: every
/// frame complete with a checksum that holds, the first one exactly the
/// header line, every other one whole lines.
fn assert_reader_rules(bytes: &[u8]) {
    let frames = frames_of(bytes);
    for (i, f) in frames.iter().enumerate() {
        let frame = &bytes[f.clone()];
        assert_ne!(frame[4] & 0x04, 0, "frame {i} has a checksum");
        let text = zstd_frames::decode_frame(frame, Rule::ZstdFrameDecode, f.start).unwrap();
        assert_eq!(text.last(), Some(&b'\n'), "frame {i} ends a line");
        if i == 0 {
            assert_eq!(
                text.iter().filter(|&&c| c == b'\n').count(),
                1,
                "header frame"
            );
        }
    }
}

#[test]
fn a_merge_keeps_every_byte_of_text_in_fewer_frames() {
    let root = TempRoot::new("merge");
    let (mut b, path, all) = stepped_log(&root, 300, 7);
    let before = fs::read(&path).unwrap();
    merge_all(&mut b, &path);
    let after = fs::read(&path).unwrap();
    assert_eq!(text_of(&after), text_of(&before), "the same text");
    let (old, new) = (frames_of(&before), frames_of(&after));
    assert_eq!(old.len(), 301);
    assert_eq!(new.len(), 2, "header frame + one merged frame");
    assert_eq!(
        after[new[0].clone()],
        before[old[0].clone()],
        "header frame copied"
    );
    assert!(
        after.len() * 3 < before.len(),
        "{} -> {} bytes",
        before.len(),
        after.len()
    );
    assert_reader_rules(&after);
    assert_same(&b.load("m").unwrap().unwrap().values(), &all);
    // Appends go on in the new file.
    let more = step_events(all.len() as u64, 9);
    b.append(&header("m", None), &more, false).unwrap();
    let mut all = all;
    all.extend(more);
    let loaded = b.load("m").unwrap().unwrap();
    assert!(loaded.torn.is_none());
    assert_same(&loaded.values(), &all);
    // No merge leftovers beside the log.
    let names: Vec<_> = fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["session.jsonl.zstd"]);
}

#[test]
fn merged_frames_hold_at_most_full_text_and_full_frames_stay() {
    let root = TempRoot::new("merge-full");
    // About 2.5 × FULL_TEXT of text in small frames.
    let per = 200;
    let size = batch::batch_text(&step_events(0, per)).len();
    let batches = (FULL_TEXT * 5 / 2 / size) as u64;
    let (mut b, path, all) = stepped_log(&root, batches, per);
    merge_all(&mut b, &path);
    let once = fs::read(&path).unwrap();
    let frames = frames_of(&once);
    assert_eq!(frames.len(), 4, "header + 2 full + 1 partial");
    let texts: Vec<usize> = frames
        .iter()
        .map(|f| {
            zstd_frames::decode_frame(&once[f.clone()], Rule::ZstdFrameDecode, 0)
                .unwrap()
                .len()
        })
        .collect();
    assert!(
        texts[1] <= FULL_TEXT && texts[1] > FULL_TEXT - 4096,
        "{texts:?}"
    );
    assert!(texts[3] < FULL_TEXT, "{texts:?}");
    assert_eq!(
        b.logs["m"].tail.from,
        Some(frames[3].start as u64),
        "the partial frame is where the next merge starts"
    );
    // The next merge takes the partial frame and what follows, never the
    // full frames before it.
    let h = header("m", None);
    let mut all = all;
    for k in 0..20 {
        let batch = step_events(all.len() as u64, 5 + k % 3);
        b.append(&h, &batch, false).unwrap();
        all.extend(batch);
    }
    let state = b.logs.get_mut("m").unwrap();
    state.tail.fresh = u64::MAX / 2;
    b.merge_tail("m");
    let twice = fs::read(&path).unwrap();
    assert_eq!(twice[..frames[3].start], once[..frames[3].start]);
    assert_eq!(frames_of(&twice).len(), 4);
    assert_reader_rules(&twice);
    assert_same(&b.load("m").unwrap().unwrap().values(), &all);
}

#[test]
fn a_merged_log_cut_at_any_byte_of_its_last_frames_is_a_torn_tail() {
    let root = TempRoot::new("merge-torn");
    let (mut b, path, mut all) = stepped_log(&root, 40, 6);
    merge_all(&mut b, &path);
    let merged_end = fs::read(&path).unwrap().len();
    let h = header("m", None);
    for k in 0..2 {
        let batch = step_events(all.len() as u64, 4 + k);
        b.append(&h, &batch, false).unwrap();
        all.extend(batch);
    }
    let full = fs::read(&path).unwrap();
    let frames = frames_of(&full);
    let merged = &frames[1];
    assert_eq!(merged.end, merged_end);
    // Each frame's events, by the frame's end.
    let held = |end: usize| {
        let mut r = JsonlBackend::open_read_only(&root.0, Compression::Zstd).unwrap();
        fs::write(&path, &full[..end]).unwrap();
        let n = r.load("m").unwrap().unwrap().events.len();
        fs::write(&path, &full).unwrap();
        n
    };
    let ends: Vec<usize> = frames.iter().map(|f| f.end).collect();
    let counts: Vec<usize> = ends.iter().map(|&e| held(e)).collect();
    assert_eq!(counts[counts.len() - 1], all.len());
    drop(b);
    let mut b = JsonlBackend::open(&root.0, Compression::Zstd).unwrap();
    for cut in merged.start + 1..full.len() {
        fs::write(&path, &full[..cut]).unwrap();
        let loaded = b.load("m").unwrap().unwrap();
        if let Some(k) = ends.iter().position(|&e| e == cut) {
            assert!(loaded.torn.is_none(), "cut {cut} at a frame end");
            assert_eq!(loaded.events.len(), counts[k]);
            continue;
        }
        // The frame the cut falls in is the torn one.
        let k = ends.iter().position(|&e| e > cut).unwrap();
        let torn = loaded.torn.as_ref().unwrap_or_else(|| panic!("cut {cut}"));
        assert_eq!(torn.at.value() as usize, frames[k].start, "cut {cut}");
        let n = loaded.events.len();
        assert!(n >= counts[k - 1] && n <= counts[k], "cut {cut}: {n}");
        assert_same(&loaded.values(), &all[..n]);
    }
}

#[test]
fn a_failed_merge_leaves_the_log_and_the_writer_goes_on() {
    let root = TempRoot::new("merge-fail");
    let (mut b, path, mut all) = stepped_log(&root, 30, 5);
    let before = fs::read(&path).unwrap();
    // A crashed earlier writer's leftover is removed; a foreign file stays.
    let dir = path.parent().unwrap().to_path_buf();
    fs::write(dir.join("session.jsonl.zstd.0123456789ab.tmp"), b"old").unwrap();
    fs::write(dir.join("session.jsonl.zstd.notes.tmp"), b"mine").unwrap();
    let fail = faults::install(|p, _| match p {
        Point::CompactRename => Err(io::Error::other("injected")),
        _ => Ok(()),
    });
    merge_all(&mut b, &path);
    drop(fail);
    assert_eq!(fs::read(&path).unwrap(), before, "the log is as it was");
    let mut names: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["session.jsonl.zstd", "session.jsonl.zstd.notes.tmp"]
    );
    assert_eq!(b.logs["m"].tail.fresh, 0, "tried again after more appends");
    let more = step_events(all.len() as u64, 5);
    b.append(&header("m", None), &more, false).unwrap();
    all.extend(more);
    assert_same(&b.load("m").unwrap().unwrap().values(), &all);
}

#[test]
fn a_log_that_changed_during_the_merge_is_not_replaced() {
    let root = TempRoot::new("merge-race");
    let (mut b, path, _) = stepped_log(&root, 30, 5);
    let target = path.clone();
    let fail = faults::install(move |p, _| {
        if p == Point::CompactRename {
            // Someone appends to the log while the merge writes its copy.
            let mut f = fs::OpenOptions::new().append(true).open(&target)?;
            io::Write::write_all(&mut f, b"x")?;
        }
        Ok(())
    });
    merge_all(&mut b, &path);
    drop(fail);
    let after = fs::read(&path).unwrap();
    assert_eq!(frames_of(&after[..after.len() - 1]).len(), 31, "not merged");
    assert_eq!(after.last(), Some(&b'x'));
}

#[test]
fn a_failed_directory_sync_after_the_rename_is_finished_by_the_next_append() {
    let root = TempRoot::new("merge-dirsync");
    let (mut b, path, mut all) = stepped_log(&root, 30, 5);
    let synced = Rc::new(Cell::new(0));
    let seen = synced.clone();
    let fail = faults::install(move |p, _| {
        if p == Point::CompactDirSync {
            seen.set(seen.get() + 1);
            return Err(io::Error::other("injected"));
        }
        Ok(())
    });
    merge_all(&mut b, &path);
    drop(fail);
    assert_eq!(synced.get(), 1);
    assert_eq!(frames_of(&fs::read(&path).unwrap()).len(), 2, "renamed");
    assert!(b.logs["m"].dir_unsynced);
    let more = step_events(all.len() as u64, 5);
    b.append(&header("m", None), &more, false).unwrap();
    assert!(
        !b.logs["m"].dir_unsynced,
        "the append made the rename durable"
    );
    all.extend(more);
    assert_same(&b.load("m").unwrap().unwrap().values(), &all);
}

#[test]
fn range_reads_after_a_merge_are_slices_of_a_full_read_here_and_in_a_reader() {
    let root = TempRoot::new("merge-range");
    let (mut b, path, _) = stepped_log(&root, 400, 9);
    let all = b.load("m").unwrap().unwrap().events;
    // A reader beside the writer remembers the old file's offsets.
    let mut r = JsonlBackend::open_read_only(&root.0, Compression::Zstd).unwrap();
    assert_eq!(r.load("m").unwrap().unwrap().events, all);
    assert_eq!(r.load_range("m", 2000, 2010).unwrap(), &all[2000..2010]);
    merge_all(&mut b, &path);
    assert_eq!(frames_of(&fs::read(&path).unwrap()).len(), 2);
    for (from, to) in [(0, 5), (1500, 1600), (3590, 3700), (2000, 2010)] {
        let want = &all[from..to.min(all.len())];
        assert_eq!(
            b.load_range("m", from as u64, to as u64).unwrap(),
            want,
            "writer {from}"
        );
        assert_eq!(
            r.load_range("m", from as u64, to as u64).unwrap(),
            want,
            "reader {from}"
        );
    }
}

#[test]
fn the_writer_merges_as_small_frames_pile_up_and_at_release() {
    let root = TempRoot::new("merge-policy");
    let mut b = JsonlBackend::open(&root.0, Compression::Zstd).unwrap();
    let h = header("m", None);
    let path = log_path(&root, "m", Compression::Zstd);
    let mut all: Vec<Arc<Event>> = Vec::new();
    let mut most_frames = 0;
    let mut seed = 11;
    // Poorly compressible steps: about 1 MiB of frames in all.
    for k in 0..1500u64 {
        let text = noise(&mut seed, 600);
        let e = ev(&format!(
            r#"{{"type":"plugin/note","seq":{},"time":1,"data":{{"text":"{text}"}}}}"#,
            all.len()
        ));
        b.append(&h, std::slice::from_ref(&e), k == 0).unwrap();
        all.push(e);
        if b.has_upkeep() {
            b.idle();
        }
        most_frames = most_frames.max(frames_of(&fs::read(&path).unwrap()).len());
    }
    assert!(
        most_frames < 1000,
        "merged along the way: {most_frames} frames at most"
    );
    let frames = frames_of(&fs::read(&path).unwrap()).len();
    assert!(
        frames > 2,
        "a tail of small frames stays until enough pile up"
    );
    b.release("m");
    assert!(
        frames_of(&fs::read(&path).unwrap()).len() < frames,
        "release merges the tail"
    );
    assert_same(&b.load("m").unwrap().unwrap().values(), &all);
    // A reopened log's run of small frames is known from its read.
    drop(b);
    let mut b = JsonlBackend::open(&root.0, Compression::Zstd).unwrap();
    drop(b.load("m").unwrap());
    assert!(b.logs["m"].tail.from.is_some());
}

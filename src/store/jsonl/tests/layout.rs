//! Layout, listing, lookup and deletion tests of the JSONL backend.

use crate::rule::Rule;
use std::fs;

use super::tests::{assert_same, files_under, header, sample_events, TempRoot, BOTH};
use super::*;
use crate::store::backend::header_id;

#[test]
fn encoding_mismatch_is_refused_both_ways() {
    for compression in BOTH {
        let other = if compression == Compression::Zstd {
            Compression::None
        } else {
            Compression::Zstd
        };
        let root = TempRoot::new("mismatch");
        {
            let mut b = JsonlBackend::open(&root.0, compression).unwrap();
            b.append(&header("m", None), &sample_events(), true)
                .unwrap();
        }
        let e = JsonlBackend::open(&root.0, other).unwrap_err();
        assert_eq!(
            (e.rule, e.status),
            (Rule::JsonlEncodingMismatch, Status::SchemaMismatch)
        );
        // A foreign artifact appearing after open: lookup, listing and
        // materialization refuse.
        let root2 = TempRoot::new("mismatch2");
        let mut b = JsonlBackend::open(&root2.0, other).unwrap();
        let dir = root2.0.join("_no-cwd/m");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join(layout::log_name(compression)), b"x").unwrap();
        assert_eq!(b.load("m").unwrap_err().rule, Rule::JsonlEncodingMismatch);
        assert_eq!(b.list().unwrap_err().rule, Rule::JsonlEncodingMismatch);
        let err = b
            .append(&header("m", None), &sample_events(), true)
            .unwrap_err();
        assert_eq!(err.rule, Rule::JsonlEncodingMismatch);
    }
}

#[test]
fn layout_refusals() {
    for compression in BOTH {
        let root = TempRoot::new("refusals");
        let mut b = JsonlBackend::open(&root.0, compression).unwrap();
        let events = sample_events();
        b.append(&header("a", Some("/x")), &events, true).unwrap();
        let e = b
            .append(&header("a", Some("/x")), &events, true)
            .unwrap_err();
        assert_eq!(
            (e.rule, e.status),
            (Rule::JsonlExistsOnMaterialize, Status::Conflict)
        );
        let e = b
            .append(&header("a", Some("/y")), &events, true)
            .unwrap_err();
        assert_eq!(e.rule, Rule::JsonlExistsOnMaterialize);
        let e = b.append(&header("", None), &events, true).unwrap_err();
        assert_eq!(
            (e.rule, e.status),
            (Rule::JsonlEmptySegment, Status::InvalidArgument)
        );
        assert_eq!(b.load("").unwrap_err().rule, Rule::JsonlEmptySegment);
        // The same id under two project directories.
        let name = layout::log_name(compression);
        let src = root.0.join("--x--/a").join(name);
        fs::create_dir_all(root.0.join("--z--/a")).unwrap();
        fs::copy(&src, root.0.join("--z--/a").join(name)).unwrap();
        let e = b.load("a").unwrap_err();
        assert_eq!(
            (e.rule, e.status),
            (Rule::JsonlDuplicateId, Status::Corrupt)
        );
        assert_eq!(b.list().unwrap_err().rule, Rule::JsonlHeaderPathMismatch);
        fs::remove_dir_all(root.0.join("--z--")).unwrap();
        // A log whose header names another place.
        fs::create_dir_all(root.0.join("--w--/a2")).unwrap();
        fs::copy(&src, root.0.join("--w--/a2").join(name)).unwrap();
        assert_eq!(b.load("a2").unwrap_err().rule, Rule::JsonlHeaderIdMismatch);
        assert_eq!(b.list().unwrap_err().rule, Rule::JsonlHeaderPathMismatch);
        fs::remove_dir_all(root.0.join("--w--")).unwrap();
        // A symlinked project directory is never followed, even to the same
        // file: the store's tree holds no links (Windows: tests_windows).
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(root.0.join("--x--"), root.0.join("--v--")).unwrap();
            assert_eq!(b.load("a").unwrap_err().rule, Rule::JsonlLink);
            assert_eq!(b.list().unwrap_err().rule, Rule::JsonlLink);
            fs::remove_file(root.0.join("--v--")).unwrap();
            assert_same(&b.load("a").unwrap().unwrap().values(), &events);
        }
        // The flat layout.
        fs::create_dir_all(root.0.join("--q--")).unwrap();
        fs::write(root.0.join("--q--").join(format!("f.{}", &name[8..])), b"").unwrap();
        assert_eq!(b.load("f").unwrap_err().rule, Rule::JsonlLegacyLayout);
        assert_eq!(b.list().unwrap_err().rule, Rule::JsonlLegacyLayout);
    }
}

#[test]
fn listing_skips_what_is_not_a_log_and_keeps_foreign_versions() {
    let root = TempRoot::new("listing");
    let mut b = JsonlBackend::open(&root.0, Compression::None).unwrap();
    b.append(&header("ok", None), &sample_events(), true)
        .unwrap();
    let mk = |id: &str, body: &str| {
        let dir = root.0.join("_no-cwd").join(id);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("session.jsonl"), body).unwrap();
    };
    mk("empty", "");
    mk(
        "frag",
        r#"{"type":"session","version":0,"id":"frag","createdAt":1,"delegationDepth":0}"#,
    );
    mk("nothdr", "[1,2]\n");
    mk("newer", "{\"type\":\"session\",\"version\":1,\"id\":\"newer\",\"createdAt\":1,\"delegationDepth\":0}\n");
    fs::create_dir_all(root.0.join("_no-cwd/nolog")).unwrap();
    fs::write(root.0.join("stray-file"), b"").unwrap();
    let mut ids: Vec<String> = b
        .list()
        .unwrap()
        .iter()
        .map(|l| header_id(&l.header).to_string())
        .collect();
    ids.sort();
    assert_eq!(ids, ["newer", "ok"]);
    assert_eq!(b.load("newer").unwrap_err().rule, Rule::LoadVersionNewer);
    assert_eq!(b.load("empty").unwrap_err().rule, Rule::JsonlHeaderMissing);
    assert_eq!(b.load("frag").unwrap_err().rule, Rule::JsonlHeaderMissing);
    assert_eq!(b.load("nothdr").unwrap_err().rule, Rule::JsonlHeaderInvalid);
    mk("retired", "{\"type\":\"session\",\"version\":0,\"id\":\"retired\",\"createdAt\":1,\"delegationDepth\":0,\"approvalPolicy\":1}\n");
    assert_eq!(b.list().unwrap_err().rule, Rule::JsonlHeaderRetiredFields);
}

#[test]
fn zstd_listing_reads_only_the_header_frame() {
    let root = TempRoot::new("zlisting");
    let mut b = JsonlBackend::open(&root.0, Compression::Zstd).unwrap();
    let h = header("z", None);
    b.append(&h, &sample_events(), true).unwrap();
    let path = root.0.join("_no-cwd/z/session.jsonl.zstd");
    let mut bytes = fs::read(&path).unwrap();
    let frames = zstd_frames::scan_frames(&bytes, None).unwrap();
    let mid = (frames.complete[1].start + frames.complete[1].end) / 2;
    bytes[mid] ^= 0x10;
    fs::write(&path, &bytes).unwrap();
    assert_eq!(
        b.list().unwrap().len(),
        1,
        "a corrupt event frame does not affect listing"
    );
    // The damaged frame is the last: damage all the same, the log
    // untouched; only a salvage cuts it (whole: nothing of a frame that
    // fails its checksum is trusted).
    assert_eq!(frames.complete.len(), 2);
    let e = b.load("z").unwrap_err();
    assert_eq!((e.rule, e.status), (Rule::ZstdFrameDecode, Status::Corrupt));
    assert_eq!(fs::read(&path).unwrap(), bytes);
    let loaded = b.load_salvaging("z").unwrap().unwrap();
    assert!(loaded.events.is_empty());
    assert_eq!(
        loaded.torn.map(|t| (t.at.value(), t.recovered, t.why)),
        Some((
            frames.complete[1].start as u64,
            0,
            crate::store::backend::TornKind::Salvaged
        ))
    );
    // Empty and torn header frames are skipped; a multi-line one refuses.
    fs::write(&path, b"").unwrap();
    assert!(b.list().unwrap().is_empty());
    fs::write(&path, &bytes[..frames.complete[0].end - 1]).unwrap();
    assert!(b.list().unwrap().is_empty());
    assert_eq!(b.load("z").unwrap_err().rule, Rule::JsonlHeaderMissing);
    let mut two = Vec::new();
    zstd_frames::compress_frame(
        format!("{}{}", header_line(&h), "{}\n").as_bytes(),
        &mut two,
    )
    .unwrap();
    fs::write(&path, &two).unwrap();
    assert_eq!(b.list().unwrap_err().rule, Rule::ZstdHeaderFrame);
    assert_eq!(b.load("z").unwrap_err().rule, Rule::ZstdHeaderFrame);
    let mut hdr = bytes[..frames.complete[0].end].to_vec();
    let n = hdr.len();
    hdr[n - 1] ^= 0xFF;
    fs::write(&path, &hdr).unwrap();
    assert_eq!(b.list().unwrap_err().rule, Rule::ZstdHeaderFrameDecode);
    assert_eq!(b.load("z").unwrap_err().rule, Rule::ZstdFrameDecode);
}

#[test]
fn delete_removes_the_log() {
    for compression in BOTH {
        let root = TempRoot::new("delete");
        let mut b = JsonlBackend::open(&root.0, compression).unwrap();
        let h = header("gone", Some("/p"));
        b.append(&h, &sample_events(), true).unwrap();
        assert!(b.delete("gone").unwrap());
        assert!(b.load("gone").unwrap().is_none());
        assert!(b.revision("gone").unwrap().is_none());
        assert!(b.list().unwrap().is_empty());
        assert!(!b.delete("gone").unwrap());
        assert!(files_under(&root.0).is_empty());
        // The id can be materialized again.
        b.append(&h, &sample_events(), true).unwrap();
        assert_same(&b.load("gone").unwrap().unwrap().values(), &sample_events());
    }
}

#[test]
fn headers_longer_than_a_read_chunk_list_and_load() {
    for compression in BOTH {
        let root = TempRoot::new("longheader");
        let mut b = JsonlBackend::open(&root.0, compression).unwrap();
        let cwd = format!("/{}", "deep/".repeat(4000));
        let h = header("long", Some(&cwd));
        b.append(&h, &sample_events(), true).unwrap();
        let listed = b.list().unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(
            listed[0]
                .header
                .as_object()
                .unwrap()
                .get("cwd")
                .unwrap()
                .as_str(),
            Some(cwd.as_str())
        );
        assert_same(&b.load("long").unwrap().unwrap().values(), &sample_events());
    }
}

/// A log with a second name (a hard link, maybe outside the store) is
/// never written: an append or a repair's cut would change the file under
/// its other name too.
#[test]
fn a_log_with_a_second_name_is_not_written() {
    for compression in BOTH {
        let root = TempRoot::new("hardlink");
        let outside = TempRoot::new("hardlink-outside");
        let mut b = JsonlBackend::open(&root.0, compression).unwrap();
        let h = header("a", None);
        let events = sample_events();
        b.append(&h, &events[..4], true).unwrap();
        let log = root.0.join("_no-cwd/a").join(layout::log_name(compression));
        fs::create_dir_all(&outside.0).unwrap();
        let other = outside.0.join("foreign");
        fs::hard_link(&log, &other).unwrap();
        let before = fs::read(&other).unwrap();
        // A fresh backend, as after a restart: it opens the log anew.
        drop(b);
        let mut b = JsonlBackend::open(&root.0, compression).unwrap();
        let e = b.append(&h, &events[4..], false).unwrap_err();
        assert_eq!(
            (e.rule, e.status),
            (Rule::JsonlLink, Status::Io),
            "{}",
            e.message
        );
        let torn = Torn {
            at: crate::store::backend::TornAt::Byte(1),
            recovered: 0,
            why: crate::store::backend::TornKind::PartialLine,
            length: 1,
        };
        assert_eq!(
            b.commit_repair(&h, Some(&torn), &[]).unwrap_err().rule,
            Rule::JsonlLink
        );
        assert_eq!(fs::read(&other).unwrap(), before, "the other name changed");
        fs::remove_file(&other).unwrap();
        b.append(&h, &events[4..], false).unwrap();
    }
}

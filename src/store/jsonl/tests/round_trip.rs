//! Layout, format and round-trip tests of the JSONL backend.

use crate::rule::Rule;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::layout::{encode_segment, project_key};
use super::*;
use crate::json::{self, JsString};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A unique temporary root, removed on drop.
pub(super) struct TempRoot(pub PathBuf);

impl TempRoot {
    pub(super) fn new(tag: &str) -> TempRoot {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!(
            "dsh-jsonl-{tag}-{}-{nanos}-{n}",
            std::process::id()
        ));
        TempRoot(dir)
    }
}

impl Drop for TempRoot {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

pub(super) const BOTH: [Compression; 2] = [Compression::None, Compression::Zstd];

pub(super) fn ev(text: &str) -> Arc<Event> {
    Arc::new(Event::from_envelope(json::parse(text).unwrap(), "test event").unwrap())
}

pub(super) fn header(id: &str, cwd: Option<&str>) -> Value {
    let mut h = vec![
        ("version", Value::Number(0.0)),
        ("id", Value::str(id)),
        ("createdAt", Value::Number(1_700_000_000_000.0)),
    ];
    if let Some(cwd) = cwd {
        h.push(("cwd", Value::str(cwd)));
    }
    Value::obj(h)
}

/// A log with every storage shape: packed runs of each kind, short runs,
/// verbatim chunks, surface fields, `ignorable`, lone surrogates.
pub(super) fn sample_events() -> Vec<Arc<Event>> {
    let t = 1_700_000_000_000i64;
    let chunk = |seq: u64, dt: i64, chunk: &str| {
        ev(&format!(
            r#"{{"type":"assistant/chunk","seq":{seq},"time":{},"data":{{"turn":1,"step":1,"chunk":{chunk}}}}}"#,
            t + dt
        ))
    };
    let mut out = vec![
        ev(&format!(
            r#"{{"type":"turn/start","seq":0,"time":{t},"data":{{"turn":1}}}}"#
        )),
        ev(&format!(
            r#"{{"type":"user/message","seq":1,"time":{t},"data":{{"message":{{"role":"user","content":"hi \ud800 there \u00e9"}}}},"sourceEventSeqs":[]}}"#
        )),
        ev(&format!(
            r#"{{"type":"step/start","seq":2,"time":{t},"data":{{"turn":1,"step":1}}}}"#
        )),
    ];
    for k in 0..5 {
        out.push(chunk(
            3 + k,
            k as i64 * 3,
            &format!(r#"{{"type":"text-delta","index":0,"text":"t{k} \n\"q\""}}"#),
        ));
    }
    for k in 0..2 {
        out.push(chunk(
            8 + k,
            20,
            r#"{"type":"reasoning-delta","index":0,"text":"r"}"#,
        ));
    }
    for (k, dt) in [30, 25, 40, 40].into_iter().enumerate() {
        out.push(chunk(
            10 + k as u64,
            dt,
            &format!(r#"{{"type":"tool-call-delta","index":1,"id":"c1","name":"bash","argumentsDelta":"{{\"a{k}"}}"#),
        ));
    }
    for k in 0..3 {
        out.push(chunk(
            14 + k,
            50,
            &format!(r#"{{"type":"tool-call-delta","index":2,"id":"c2","argumentsDelta":"x{k}"}}"#),
        ));
    }
    out.push(chunk(
        17,
        51,
        r#"{"type":"text-delta","index":0,"text":"extra","more":1}"#,
    ));
    for k in 0..3 {
        out.push(chunk(
            18 + k,
            52,
            r#"{"type":"text-delta","index":0,"text":"\udc00lone\ud83d"}"#,
        ));
    }
    out.extend([
        ev(&format!(
            r#"{{"type":"plugin/thing","seq":21,"time":{t},"data":{{"x":[1,2.5,null,true]}},"ignorable":true}}"#
        )),
        ev(&format!(
            r#"{{"type":"assistant/message","seq":22,"time":{t},"data":{{"message":{{"role":"assistant","content":[]}}}},"sourceEventSeqs":[3,4],"surfaceOp":{{"kind":"replace"}}}}"#
        )),
        ev(&format!(r#"{{"seq":23,"type":"step/end","data":{{"turn":1,"step":1}},"time":{t}}}"#)),
        ev(&format!(
            r#"{{"type":"turn/end","seq":24,"time":{t},"data":{{"turn":1,"reason":{{"kind":"completed"}}}}}}"#
        )),
    ]);
    out
}

/// `load(id).events` equals the appended events, value by value.
pub(super) fn assert_same(loaded: &[Value], appended: &[Arc<Event>]) {
    assert_eq!(loaded.len(), appended.len());
    for (l, a) in loaded.iter().zip(appended) {
        assert!(
            *l == a.to_value(),
            "loaded {l:?} != appended {:?}",
            a.to_value()
        );
    }
}

/// The files under `dir`, but for the root's lock file (Windows).
pub(super) fn files_under(dir: &Path) -> Vec<PathBuf> {
    #[cfg(windows)]
    let lock = dir.join(crate::store::platform::LOCK_FILE);
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.path().is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path());
            }
        }
    }
    #[cfg(windows)]
    out.retain(|p| *p != lock);
    out
}

#[test]
fn path_encodings_follow_the_spec_examples() {
    let pk = |s: &str| project_key(&JsString::from_str(s)).unwrap();
    assert_eq!(pk("/home/u/my proj"), "--home-u-my~0020proj--");
    assert_eq!(pk("C:\\Users\\x"), "--C-Users-x--");
    assert_eq!(pk("/"), "--root--");
    assert_eq!(pk("//a//b/"), "--a-b---");
    assert_eq!(pk("/~x"), "--~007Ex--");
    assert_eq!(pk("-/-a"), "--a--");
    assert_eq!(
        pk(&format!("/{}", "a".repeat(300))),
        format!("--{}--", "a".repeat(251))
    );
    assert_eq!(
        project_key(&JsString::from_str("")).unwrap_err().rule,
        Rule::JsonlEmptySegment
    );
    let seg = |s: &str| encode_segment(&JsString::from_str(s)).unwrap();
    assert_eq!(seg("a/b~c"), "a~002Fb~007Ec");
    assert_eq!(seg("."), "~002E");
    assert_eq!(seg(".."), "~002E~002E");
    assert_eq!(seg("..."), "...");
    assert_eq!(seg("é😀"), "~00E9~D83D~DE00");
    assert_eq!(
        encode_segment(&JsString::from_utf16(&[0xD800])).unwrap(),
        "~D800"
    );
    let e = encode_segment(&JsString::from_str("")).unwrap_err();
    assert_eq!(
        (e.rule, e.status),
        (Rule::JsonlEmptySegment, Status::InvalidArgument)
    );
}

#[test]
fn header_line_is_exact_and_reads_back_with_delegation_depth() {
    let h = json::parse(
        r#"{"version":0,"id":"s","createdAt":5,"agentPreset":"p","origin":"subagent","cwd":"/w","seedLength":2,"parentSession":"x","extra":1}"#,
    )
    .unwrap();
    let line = header_line(&h);
    assert_eq!(
        line,
        "{\"type\":\"session\",\"version\":0,\"id\":\"s\",\"createdAt\":5,\"cwd\":\"/w\",\"parentSession\":\"x\",\"seedLength\":2,\"origin\":\"subagent\",\"delegationDepth\":0,\"agentPreset\":\"p\"}\n"
    );
    let back = header::read_header(line.as_bytes(), Path::new("x"), header::Mode::Load)
        .unwrap()
        .unwrap();
    assert_eq!(
        back.to_json(),
        r#"{"version":0,"id":"s","createdAt":5,"cwd":"/w","parentSession":"x","seedLength":2,"origin":"subagent","delegationDepth":0,"agentPreset":"p"}"#
    );
    let with_depth =
        json::parse(r#"{"version":0,"id":"s","createdAt":5,"delegationDepth":3}"#).unwrap();
    assert_eq!(
        header_line(&with_depth),
        "{\"type\":\"session\",\"version\":0,\"id\":\"s\",\"createdAt\":5,\"delegationDepth\":3}\n"
    );
}

#[test]
fn header_refusals() {
    let read = |line: &str| {
        header::read_header(line.as_bytes(), Path::new("/r/x.jsonl"), header::Mode::Load)
    };
    let rule = |line: &str| read(line).unwrap_err();
    let newer = rule(r#"{"type":"other","version":2,"id":7}"#);
    assert_eq!(
        (newer.rule, newer.status),
        (Rule::LoadVersionNewer, Status::SchemaMismatch)
    );
    assert!(newer.message.contains("/r/x.jsonl") && newer.message.contains('7'));
    assert_eq!(rule(r#"{"version":-1}"#).rule, "load.version-older");
    assert_eq!(rule("[1]").rule, Rule::JsonlHeaderInvalid);
    assert_eq!(rule("{not json").rule, Rule::JsonlHeaderNotJson);
    let base = r#""type":"session","version":0,"id":"s""#;
    for bad in ["-0", "1.5", "-1", "9007199254740992", "\"1\""] {
        assert_eq!(
            rule(&format!(
                r#"{{{base},"createdAt":{bad},"delegationDepth":0}}"#
            ))
            .rule,
            Rule::JsonlHeaderInvalid
        );
        assert_eq!(
            rule(&format!(
                r#"{{{base},"createdAt":1,"delegationDepth":{bad}}}"#
            ))
            .rule,
            Rule::JsonlHeaderInvalid
        );
    }
    assert_eq!(
        rule(&format!(r#"{{{base},"createdAt":1}}"#)).rule,
        Rule::JsonlHeaderInvalid
    );
    assert_eq!(
        rule(&format!(
            r#"{{{base},"createdAt":1,"delegationDepth":0,"origin":"x"}}"#
        ))
        .rule,
        Rule::JsonlHeaderInvalid
    );
    assert_eq!(
        rule(&format!(
            r#"{{{base},"createdAt":1,"delegationDepth":0,"agentPreset":1}}"#
        ))
        .rule,
        Rule::JsonlHeaderInvalid
    );
    let retired = rule(&format!(
        r#"{{{base},"createdAt":1,"delegationDepth":0,"sandboxMode":"x"}}"#
    ));
    assert_eq!(
        (retired.rule, retired.status),
        (Rule::JsonlHeaderRetiredFields, Status::SchemaMismatch)
    );
    assert!(read(&format!(
        "{{{base},\"createdAt\":1,\"delegationDepth\":0}}\r\n"
    ))
    .is_ok());
    let list =
        |line: &str| header::read_header(line.as_bytes(), Path::new("x"), header::Mode::List);
    assert!(
        list(r#"{"type":"session","version":1,"id":"s","createdAt":1,"delegationDepth":0}"#)
            .unwrap()
            .is_some()
    );
    assert!(list("nope").unwrap().is_none());
    assert!(list("{}").unwrap().is_none());
}

#[test]
fn round_trip_every_shape_in_both_encodings() {
    for compression in BOTH {
        let root = TempRoot::new("roundtrip");
        let events = sample_events();
        let h = header("sess/1", Some("/home/u/my proj"));
        {
            let mut b = JsonlBackend::open(&root.0, compression).unwrap();
            assert!(b.load("sess/1").unwrap().is_none());
            assert!(b.revision("sess/1").unwrap().is_none());
            assert!(b.list().unwrap().is_empty());
            assert!(
                files_under(&root.0).is_empty(),
                "nothing on disk before the first append"
            );
            b.append(&h, &events[..2], true).unwrap();
            b.append(&h, &events[2..12], false).unwrap();
            b.append(&h, &events[12..], false).unwrap();
            let loaded = b.load("sess/1").unwrap().unwrap();
            assert_same(&loaded.values(), &events);
            assert!(loaded.torn.is_none());
            assert_eq!(
                loaded.header.to_json(),
                r#"{"version":0,"id":"sess/1","createdAt":1700000000000,"cwd":"/home/u/my proj","delegationDepth":0}"#
            );
            assert_eq!(
                b.revision("sess/1").unwrap().as_deref(),
                Some(loaded.revision.as_str())
            );
        }
        let mut b = JsonlBackend::open(&root.0, compression).unwrap();
        let loaded = b.load("sess/1").unwrap().unwrap();
        assert_same(&loaded.values(), &events);
        // Events in canonical key order come back byte-identical.
        for (l, a) in loaded.values().iter().zip(&events) {
            assert_eq!(l.to_json(), a.text().to_string());
        }
        let listed = b.list().unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].header, loaded.header);
        assert_eq!(listed[0].revision, loaded.revision);
        let path = root
            .0
            .join("--home-u-my~0020proj--")
            .join("sess~002F1")
            .join(layout::log_name(compression));
        assert!(path.is_file());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                fs::metadata(&path).unwrap().permissions().mode() & 0o777,
                0o600
            );
            assert_eq!(
                fs::metadata(path.parent().unwrap())
                    .unwrap()
                    .permissions()
                    .mode()
                    & 0o777,
                0o700
            );
        }
        // Windows: the log and its directory are this user's alone.
        #[cfg(windows)]
        for (p, dir) in [(path.as_path(), false), (path.parent().unwrap(), true)] {
            assert_eq!(crate::store::platform::check_private(p, dir).unwrap(), None);
        }
        assert_eq!(files_under(&root.0), vec![path]);
        // Appending after a reopen continues the log and changes the revision.
        let more = ev(r#"{"type":"turn/start","seq":25,"time":1,"data":{"turn":2}}"#);
        b.append(&h, &[more], false).unwrap();
        assert_ne!(b.revision("sess/1").unwrap().unwrap(), loaded.revision);
        assert_eq!(b.load("sess/1").unwrap().unwrap().events.len(), 26);
        let gap = ev(r#"{"type":"turn/start","seq":30,"time":1,"data":{"turn":2}}"#);
        assert_eq!(
            b.append(&h, &[gap], false).unwrap_err().rule,
            Rule::PersistAppendSeqMismatch
        );
    }
}

#[test]
fn plain_file_holds_the_header_line_and_packed_rows() {
    let root = TempRoot::new("plainbytes");
    let events = sample_events();
    let mut b = JsonlBackend::open(&root.0, Compression::None).unwrap();
    let h = header("p", None);
    b.append(&h, &events, true).unwrap();
    let text = fs::read_to_string(root.0.join("_no-cwd/p/session.jsonl")).unwrap();
    let lines: Vec<&str> = text.split_terminator('\n').collect();
    assert_eq!(
        lines[0],
        r#"{"type":"session","version":0,"id":"p","createdAt":1700000000000,"delegationDepth":0}"#
    );
    assert!(text.ends_with('\n'));
    assert_eq!(
        lines[4],
        r#"{"type":"text-chunks","seq0":3,"time0":1700000000000,"data":{"turn":1,"step":1,"index":0,"dt":[3,3,3,3],"texts":["t0 \n\"q\"","t1 \n\"q\"","t2 \n\"q\"","t3 \n\"q\"","t4 \n\"q\""]}}"#
    );
    assert!(lines[5].starts_with(r#"{"type":"assistant/chunk","seq":8"#));
    assert!(lines[7].starts_with(r#"{"type":"tool-call-chunks","seq0":10,"time0":1700000000030,"data":{"turn":1,"step":1,"index":1,"dt":[-5,15,0],"id":"c1","name":"bash","args":"#));
    assert!(lines[8].contains(r#""id":"c2","args":["x0","x1","x2"]"#));
    assert!(lines[10].contains(r#""texts":["\udc00lone\ud83d""#));
    assert_eq!(lines.len(), 1 + 3 + 1 + 2 + 1 + 1 + 1 + 1 + 4);
}

#[test]
fn zstd_file_is_one_header_frame_then_one_frame_per_batch() {
    let root = TempRoot::new("zframes");
    let events = sample_events();
    let mut b = JsonlBackend::open(&root.0, Compression::Zstd).unwrap();
    let h = header("z", None);
    b.append(&h, &events[..5], true).unwrap();
    b.append(&h, &events[5..6], false).unwrap();
    b.append(&h, &events[6..], false).unwrap();
    let bytes = fs::read(root.0.join("_no-cwd/z/session.jsonl.zstd")).unwrap();
    let frames = zstd_frames::scan_frames(&bytes, None).unwrap();
    assert_eq!(frames.complete.len(), 4);
    assert_eq!(frames.torn_start, None);
    let plain: Vec<Vec<u8>> = frames
        .complete
        .iter()
        .map(|r| zstd_frames::decode_frame(&bytes[r.clone()], Rule::ZstdFrameDecode, 0).unwrap())
        .collect();
    assert_eq!(plain[0], header_line(&h).into_bytes());
    for (i, r) in frames.complete.iter().enumerate() {
        assert_ne!(
            bytes[r.start + 4] & 0x04,
            0,
            "frame {i} has a content checksum"
        );
    }
    assert_eq!(
        plain[2],
        [events[5].text().to_string().as_bytes(), b"\n"].concat()
    );
    // The platform decoder reads the concatenation as the plain JSONL text.
    let all = zstd::stream::decode_all(&bytes[..]).unwrap();
    assert_eq!(all, plain.concat());
}

#[test]
fn reference_layout_log_written_by_hand_reads_back() {
    for compression in BOTH {
        let root = TempRoot::new("handwritten");
        let dir = root.0.join("--work-p--").join("h~0020x");
        fs::create_dir_all(&dir).unwrap();
        let text = concat!(
            "{\"type\":\"session\",\"version\":0,\"id\":\"h x\",\"createdAt\":12,\"cwd\":\"/work/p\",\"delegationDepth\":1,\"zzz\":true}\n",
            "{\"type\":\"turn/start\",\"seq\":0,\"time\":100,\"data\":{\"turn\":1}}\n",
            "{\"type\":\"text-chunks\",\"seq0\":1,\"time0\":101,\"data\":{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[2],\"texts\":[\"a\",\"b\"]}}\n",
            "  {\"type\":\"turn/end\",\"seq\":3,\"time\":104,\"data\":{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}}\r\n",
        );
        match compression {
            Compression::None => fs::write(dir.join("session.jsonl"), text).unwrap(),
            Compression::Zstd => {
                let (first, rest) = text.split_at(text.find('\n').unwrap() + 1);
                let mut bytes = Vec::new();
                zstd_frames::compress_frame(first.as_bytes(), &mut bytes).unwrap();
                bytes.extend(zstd::stream::encode_all(rest.as_bytes(), 19).unwrap());
                fs::write(dir.join("session.jsonl.zstd"), bytes).unwrap();
            }
        }
        let mut b = JsonlBackend::open(&root.0, compression).unwrap();
        let loaded = b.load("h x").unwrap().unwrap();
        assert_eq!(
            loaded.header.to_json(),
            r#"{"version":0,"id":"h x","createdAt":12,"cwd":"/work/p","delegationDepth":1}"#
        );
        let got: Vec<String> = loaded.values().iter().map(|v| v.to_json()).collect();
        assert_eq!(
            got,
            [
                r#"{"type":"turn/start","seq":0,"time":100,"data":{"turn":1}}"#,
                r#"{"type":"assistant/chunk","seq":1,"time":101,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"a"}}}"#,
                r#"{"type":"assistant/chunk","seq":2,"time":103,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"b"}}}"#,
                r#"{"type":"turn/end","seq":3,"time":104,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
            ]
        );
        assert!(loaded.torn.is_none());
        assert_eq!(b.list().unwrap().len(), 1);
    }
}

#[test]
fn a_second_open_of_the_root_is_locked() {
    let root = TempRoot::new("lock");
    let b = JsonlBackend::open(&root.0, Compression::Zstd).unwrap();
    let e = JsonlBackend::open(&root.0, Compression::Zstd).unwrap_err();
    assert_eq!((e.rule, e.status), (Rule::StoreLocked, Status::Conflict));
    assert!(e.message.contains(&root.0.display().to_string()));
    drop(b);
    JsonlBackend::open(&root.0, Compression::Zstd).unwrap();
}

#[test]
fn root_handling() {
    let root = TempRoot::new("rootfile");
    let nested = root.0.join("a/b");
    JsonlBackend::open(&nested, Compression::None).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            fs::metadata(&nested).unwrap().permissions().mode() & 0o777,
            0o700
        );
    }
    #[cfg(windows)]
    assert_eq!(
        crate::store::platform::check_private(&nested, true).unwrap(),
        None
    );
    let file = root.0.join("file");
    fs::write(&file, b"").unwrap();
    assert_eq!(
        JsonlBackend::open(&file, Compression::None)
            .unwrap_err()
            .status,
        Status::Io
    );
}

/// Differential #1: an ignorable logical event whose type is a storage tag
/// (possible only through a seed) is written as an event line and read
/// back as that event, not taken for a packed row.
#[test]
fn ignorable_events_named_like_storage_tags_round_trip() {
    let t = 1_700_000_000_000i64;
    let events = vec![
        ev(&format!(
            r#"{{"type":"turn/start","seq":0,"time":{t},"data":{{"turn":1}}}}"#
        )),
        ev(&format!(
            r#"{{"type":"text-chunks","seq":1,"time":{t},"data":null,"ignorable":true}}"#
        )),
        ev(&format!(
            r#"{{"type":"tool-call-chunks","seq":2,"time":{t},"data":{{"turn":1,"step":1,"index":0,"id":"c","dt":[],"args":["a"]}},"ignorable":true}}"#
        )),
        ev(&format!(
            r#"{{"ignorable":true,"data":{{}},"time":{t},"seq":3,"type":"reasoning-chunks"}}"#
        )),
        ev(&format!(
            r#"{{"type":"turn/end","seq":4,"time":{t},"data":{{"turn":1,"reason":{{"kind":"completed"}}}}}}"#
        )),
    ];
    for compression in BOTH {
        let root = TempRoot::new("tag-named");
        let h = header("s", None);
        JsonlBackend::open(&root.0, compression)
            .unwrap()
            .append(&h, &events, true)
            .unwrap();
        let loaded = JsonlBackend::open(&root.0, compression)
            .unwrap()
            .load("s")
            .unwrap()
            .unwrap();
        assert!(loaded.torn.is_none());
        assert_same(&loaded.values(), &events);
    }
}

//! The checklist items that are about the C ABI itself: handles (a closed
//! one, NULL options), the ownership of the caller's input strings and of
//! the output buffers. Each has a counterpart over the core API in the
//! repository's `tests/checklist_*.rs`, where the rest of the checklist
//! runs.

mod checklist_abi_support;

use std::ffi::CString;

use checklist_abi_support::*;

/// Call `f`, check it succeeded, overwrite the returned bytes, free them.
fn scribble(f: impl FnOnce(*mut dsh_buf) -> dsh_status) {
    let mut buf = dsh_buf {
        ptr: std::ptr::null_mut(),
        len: 0,
        cap: 0,
    };
    assert_eq!(f(&mut buf), DSH_OK);
    // SAFETY: the library filled `len` bytes at `ptr`; the buffer is ours.
    unsafe { std::ptr::write_bytes(buf.ptr, b'#', buf.len) };
    // SAFETY: filled by the library.
    unsafe { dsh_buf_free(&mut buf) };
}

/// Overwrite every byte of a C string the library has already read.
fn overwrite(c: CString) {
    let mut bytes = c.into_bytes_with_nul();
    let n = bytes.len() - 1;
    bytes[..n].fill(b' ');
    std::hint::black_box(&bytes);
}

/// The todo fold of docs/events.md §10.3 over a log (the library exposes the log).
fn current_todos(events: &J) -> J {
    events
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|e| e["type"] == "todo/write")
        .map_or(json!([]), |e| e["data"]["todos"].clone())
}

fn sample_session(store: &Store) -> Sess {
    let mut log = Log::new();
    closed_turn(&mut log, 1);
    log.push(
        "request/context",
        json!({"provider": "p", "model": "m", "contextWindow": 64000}),
    );
    store.seeded("s", &log.json())
}

// From the checklist's store suite (tests/checklist_store.rs).
#[test]
fn bare_store_created_session_gets_a_current_version_header() {
    let store = Store::open();
    let mut raw = std::ptr::null_mut();
    // SAFETY: live store, NULL options, valid out-pointers.
    let (st, text) =
        call(|out| unsafe { dsh_session_create(store.raw, std::ptr::null(), &mut raw, out) });
    assert_eq!(st, DSH_OK, "{text}");
    let h = parse(&text);
    let keys: Vec<&String> = h.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["version", "id", "createdAt"]);
    assert_eq!(h["version"], json!(0));
    assert!(h["id"].as_str().is_some_and(|id| !id.is_empty()));
    assert!(h["createdAt"]
        .as_u64()
        .is_some_and(|t| t > 1_600_000_000_000));
    // SAFETY: handle made above.
    unsafe { dsh_session_close(raw, std::ptr::null_mut()) };
    let s = store.session("named");
    assert_eq!(s.header["version"], json!(0));
    assert_eq!(s.header["id"], "named");
    assert_eq!(s.info()["header"], s.header);
}

// From the checklist's store suite (tests/checklist_store.rs).
#[test]
fn todo_write_stores_the_whole_list_as_a_snapshot() {
    let store = Store::open();
    let s = store.session("s");
    let list = json!({"todos": [{"content": "a", "status": "pending"}, {"content": "b", "status": "in_progress"}]});
    let (t, d) = (cstr("todo/write"), cstr(&list.to_string()));
    // SAFETY: live session, valid strings.
    let (st, _) = call(|out| unsafe {
        dsh_session_append(s.raw, t.as_ptr(), d.as_ptr(), std::ptr::null(), out)
    });
    assert_eq!(st, DSH_OK);
    let mut bytes = d.into_bytes_with_nul();
    let n = bytes.len() - 1;
    bytes[..n].fill(b'x');
    std::hint::black_box(&bytes);
    assert_eq!(s.events()[0]["data"], list);
    let second = json!({"todos": [{"content": "b", "status": "completed"}]});
    s.log("todo/write", second.clone());
    s.log("plugin/other", json!({"todos": ["not a todo write"]}));
    assert_eq!(current_todos(&s.events()), second["todos"]);
    assert_eq!(
        s.events()[0]["data"],
        list,
        "earlier snapshots are untouched"
    );
}

// From the checklist's session_data suite (tests/checklist_session_data.rs).
#[test]
fn returned_views_are_snapshots_the_caller_cannot_alter() {
    let store = Store::open();
    let s = sample_session(&store);
    let before = (
        s.surface(),
        s.events_text(),
        s.derive_text(),
        s.request_context(),
        s.info(),
    );
    // SAFETY: live session; each call fills a local buffer.
    unsafe {
        scribble(|o| dsh_session_surface(s.raw, o));
        scribble(|o| dsh_session_events(s.raw, 0, u64::MAX, o));
        scribble(|o| dsh_session_derive(s.raw, o));
        scribble(|o| dsh_session_request_context(s.raw, o));
        scribble(|o| dsh_session_info(s.raw, o));
    }
    assert_eq!(
        (
            s.surface(),
            s.events_text(),
            s.derive_text(),
            s.request_context(),
            s.info()
        ),
        before
    );
}

// From the checklist's session_data suite (tests/checklist_session_data.rs).
#[test]
fn append_data_and_seeds_are_copied_from_caller_memory() {
    let store = Store::open();
    let seed = Log {
        events: vec![ev(0, "plugin/seeded", json!({"v": "original"}), None)],
    };
    let options = cstr(&json!({"id": "s", "seed": seed.json(), "cwd": "/orig"}).to_string());
    let mut raw = std::ptr::null_mut();
    // SAFETY: live store, valid strings and out-pointers.
    let (st, text) =
        call(|out| unsafe { dsh_session_create(store.raw, options.as_ptr(), &mut raw, out) });
    assert_eq!(st, DSH_OK, "{text}");
    overwrite(options);
    let (t, d) = (cstr("plugin/live"), cstr(r#"{"v":"original"}"#));
    // SAFETY: live session, valid strings.
    let (st, text) = call(|out| unsafe {
        dsh_session_append(raw, t.as_ptr(), d.as_ptr(), std::ptr::null(), out)
    });
    assert_eq!(st, DSH_OK, "{text}");
    overwrite(d);
    overwrite(t);
    // SAFETY: live session.
    let (_, events) = call(|out| unsafe { dsh_session_events(raw, 0, u64::MAX, out) });
    let (_, info) = call(|out| unsafe { dsh_session_info(raw, out) });
    let events = parse(&events);
    assert_eq!(events[0]["data"], json!({"v": "original"}));
    assert_eq!(events[2]["type"], "plugin/live");
    assert_eq!(events[2]["data"], json!({"v": "original"}));
    assert_eq!(parse(&info)["header"]["cwd"], "/orig");
    // SAFETY: handle made above, closed once.
    unsafe { dsh_session_close(raw, std::ptr::null_mut()) };
}

// From the checklist's derive suite (tests/checklist_derive.rs).
#[test]
fn exposed_context_record_is_an_immutable_copy() {
    let store = Store::open();
    let s = store.session("s");
    let c = json!({"provider": "p", "model": "m", "contextWindow": 1000});
    s.log("request/context", c.clone());
    let mut buf = dsh_buf {
        ptr: std::ptr::null_mut(),
        len: 0,
        cap: 0,
    };
    // SAFETY: live session; the returned buffer is ours to scribble and free.
    unsafe {
        assert_eq!(dsh_session_request_context(s.raw, &mut buf), DSH_OK);
        std::ptr::write_bytes(buf.ptr, b'0', buf.len);
        dsh_buf_free(&mut buf);
    }
    let mut copy = s.request_context();
    copy["contextWindow"] = json!(1);
    assert_eq!(s.request_context(), c);
    assert_eq!(s.events()[0]["data"], c);
}

// From the checklist's fork_repair suite (tests/checklist_fork_repair.rs).
#[test]
fn fork_from_a_closed_handle_is_refused() {
    // The ABI resolves the source through its handle: an unknown / detached
    // source is a closed handle (docs/c-api.md, DSH_E_CLOSED).
    let store = Store::open();
    let src = store.session("gone");
    let raw = src.raw;
    assert_eq!(src.close(), DSH_OK);
    let mut child = std::ptr::null_mut();
    // SAFETY: a closed handle must be reported, not dereferenced.
    let (st, text) =
        call(|out| unsafe { dsh_session_fork(raw, -1, std::ptr::null(), &mut child, out) });
    assert_eq!(st, DSH_E_CLOSED, "{text}");
    assert!(child.is_null());
    assert_eq!(parse(&text)["rule"], "handle.closed");
}

// From the checklist's surface_manager suite (tests/checklist_surface_manager.rs).
#[test]
fn source_seqs_and_replace_object_are_copied_from_caller_memory() {
    let store = Store::open();
    let s = store.session("copy");
    let a = s.surf("user/message", user("a", "1"), op_append());
    let (t, d) = (cstr("user/message"), cstr(&user("r", "s").to_string()));
    let intent = cstr(&op_replace(a, a, &[a]).to_string());
    // SAFETY: live session, valid strings.
    let (st, text) = call(|out| unsafe {
        dsh_session_append(s.raw, t.as_ptr(), d.as_ptr(), intent.as_ptr(), out)
    });
    assert_eq!(st, DSH_OK, "{text}");
    // Overwrite the caller's buffer: the stored event must not change.
    let mut bytes = intent.into_bytes_with_nul();
    bytes
        .iter_mut()
        .filter(|b| b.is_ascii_digit())
        .for_each(|b| *b = b'7');
    drop(bytes);
    let e = &s.events()[1];
    assert_eq!(e["sourceEventSeqs"], json!([a]));
    assert_eq!(
        e["surfaceOp"],
        json!({"op": "replace", "start": a, "end": a})
    );
}

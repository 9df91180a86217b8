//! Shared helpers for the checklist tests (`tests/checklist_*.rs`): thin
//! RAII wrappers over the C ABI, JSON builders for events and messages, and a
//! deterministic pseudo-random generator for the property-style tests.
#![allow(dead_code)]

use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr;
use std::sync::Mutex;

pub use ::dsh_session_ffi::*;
pub use serde_json::{json, Value as J};

/// A fixed base time for seeded events.
pub const T0: i64 = 1_755_650_000_000;

#[path = "../support/call.rs"]
mod call;
pub use call::{call, cstr};

fn opt_ptr(s: &Option<CString>) -> *const c_char {
    s.as_ref().map_or(ptr::null(), |c| c.as_ptr())
}

/// Parse library output with serde_json (ordinary values only).
pub fn parse(text: &str) -> J {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("bad JSON {e}: {text:.300}"))
}

/// A failed call: the status and the fields of the error object.
#[derive(Debug, Clone)]
pub struct Fail {
    pub status: dsh_status,
    pub rule: String,
    pub message: String,
    pub index: Option<u64>,
    pub reference_code: Option<String>,
    pub text: String,
}

/// The result of a wrapped call.
pub type R<T> = Result<T, Fail>;

fn fail_of(status: dsh_status, text: &str) -> Fail {
    let v = parse(text);
    assert_eq!(v["code"], J::from(status), "error code field: {text}");
    Fail {
        status,
        rule: v["rule"].as_str().unwrap_or_default().to_string(),
        message: v["message"].as_str().unwrap_or_default().to_string(),
        index: v.get("index").and_then(J::as_u64),
        reference_code: v
            .get("referenceCode")
            .and_then(J::as_str)
            .map(str::to_string),
        text: text.to_string(),
    }
}

fn result((status, text): (dsh_status, String)) -> R<String> {
    if status == DSH_OK {
        Ok(text)
    } else {
        Err(fail_of(status, &text))
    }
}

/// Assert a failure with `status` and `rule`; return it for further checks.
#[track_caller]
pub fn expect_err<T: std::fmt::Debug>(r: R<T>, status: dsh_status, rule: &str) -> Fail {
    match r {
        Ok(v) => panic!("expected {rule} (status {status}), got success {v:?}"),
        Err(f) => {
            assert_eq!(
                (f.status, f.rule.as_str()),
                (status, rule),
                "wrong failure: {}",
                f.text
            );
            f
        }
    }
}

/// Assert success and return the value.
#[track_caller]
pub fn ok<T>(r: R<T>) -> T {
    match r {
        Ok(v) => v,
        Err(f) => panic!("expected success, got {}", f.text),
    }
}

/// A memory store, closed on drop.
pub struct Store {
    pub raw: *mut dsh_store,
}

impl Store {
    /// A memory store under the reference's admission: the checklist
    /// states the reference's behaviour, permissive appends included.
    pub fn open() -> Store {
        Store::open_config(r#"{"admission":"reference"}"#)
    }

    /// A store of `config` (JSON text).
    pub fn open_config(config: &str) -> Store {
        let mut raw = ptr::null_mut();
        let config = cstr(config);
        // SAFETY: valid string and out-pointers.
        let (st, text) = call(|out| unsafe { dsh_store_open(config.as_ptr(), &mut raw, out) });
        assert_eq!(st, DSH_OK, "store open: {text}");
        Store { raw }
    }

    /// `dsh_session_create` with options JSON text.
    pub fn create(&self, options: &str) -> R<Sess> {
        let o = cstr(options);
        let mut raw = ptr::null_mut();
        // SAFETY: live store, valid string and out-pointers.
        let r = call(|out| unsafe { dsh_session_create(self.raw, o.as_ptr(), &mut raw, out) });
        let text = result(r).inspect_err(|_| assert!(raw.is_null(), "handle set on failure"))?;
        Ok(Sess {
            raw,
            header: parse(&text),
            closed: false,
        })
    }

    /// `dsh_session_create` with options as a JSON value.
    pub fn create_json(&self, options: &J) -> R<Sess> {
        self.create(&options.to_string())
    }

    /// A session with id `id` and no seed.
    pub fn session(&self, id: &str) -> Sess {
        ok(self.create_json(&json!({ "id": id })))
    }

    /// A session seeded with `seed`.
    pub fn seeded(&self, id: &str, seed: &J) -> Sess {
        ok(self.create_json(&json!({ "id": id, "seed": seed })))
    }

    /// `dsh_session_open`: `(session, {"header","repaired"})`.
    pub fn open_session(&self, id: &str) -> R<(Sess, J)> {
        let i = cstr(id);
        let mut raw = ptr::null_mut();
        // SAFETY: live store, valid string and out-pointers.
        let r = call(|out| unsafe { dsh_session_open(self.raw, i.as_ptr(), &mut raw, out) });
        let v = parse(&result(r)?);
        Ok((
            Sess {
                raw,
                header: v["header"].clone(),
                closed: false,
            },
            v,
        ))
    }

    /// `dsh_store_list`.
    pub fn list(&self) -> J {
        // SAFETY: live store.
        parse(&ok(result(call(|out| unsafe {
            dsh_store_list(self.raw, out)
        }))))
    }

    /// The ids of the stored sessions.
    pub fn ids(&self) -> Vec<String> {
        let list = self.list();
        list.as_array()
            .expect("list is an array")
            .iter()
            .map(|h| h["id"].as_str().expect("id").to_string())
            .collect()
    }

    /// Install an observer.
    ///
    /// # Safety
    /// `user_data` must stay valid while the store and its sessions live.
    pub unsafe fn set_observer(&self, cb: dsh_observer_fn, user_data: *mut c_void) {
        // SAFETY: forwarded contract.
        let (st, text) =
            call(|out| unsafe { dsh_store_set_observer(self.raw, cb, user_data, out) });
        assert_eq!(st, DSH_OK, "set observer: {text}");
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // SAFETY: handle made by `open`.
        unsafe { dsh_store_close(self.raw, ptr::null_mut()) };
    }
}

/// A session handle, closed on drop.
#[derive(Debug)]
pub struct Sess {
    pub raw: *mut dsh_session,
    /// The header returned at creation.
    pub header: J,
    closed: bool,
}

impl Sess {
    /// Append with data and intent as JSON text.
    pub fn append_raw(&self, ty: &str, data: &str, intent: Option<&str>) -> R<J> {
        let (t, d, i) = (cstr(ty), cstr(data), intent.map(cstr));
        // SAFETY: live session, valid strings.
        let r = call(|out| unsafe {
            dsh_session_append(self.raw, t.as_ptr(), d.as_ptr(), opt_ptr(&i), out)
        });
        Ok(parse(&result(r)?))
    }

    /// Append with data and intent as values.
    pub fn append(&self, ty: &str, data: &J, intent: Option<&J>) -> R<J> {
        self.append_raw(ty, &data.to_string(), intent.map(J::to_string).as_deref())
    }

    /// Append a log-only event that must succeed; return its seq.
    #[track_caller]
    pub fn log(&self, ty: &str, data: J) -> u64 {
        ok(self.append(ty, &data, None))["seq"]
            .as_u64()
            .expect("seq")
    }

    /// Append a surface event that must succeed; return its seq.
    #[track_caller]
    pub fn surf(&self, ty: &str, data: J, intent: J) -> u64 {
        ok(self.append(ty, &data, Some(&intent)))["seq"]
            .as_u64()
            .expect("seq")
    }

    /// `dsh_session_validate` with text arguments.
    pub fn validate_raw(&self, ty: &str, data: &str, intent: Option<&str>) -> R<J> {
        let (t, d, i) = (cstr(ty), cstr(data), intent.map(cstr));
        // SAFETY: live session, valid strings.
        let r = call(|out| unsafe {
            dsh_session_validate(self.raw, t.as_ptr(), d.as_ptr(), opt_ptr(&i), out)
        });
        Ok(parse(&result(r)?))
    }

    /// `dsh_session_append_batch`.
    pub fn batch(&self, items: &J) -> R<J> {
        let b = cstr(&items.to_string());
        // SAFETY: live session, valid string.
        let r = call(|out| unsafe { dsh_session_append_batch(self.raw, b.as_ptr(), out) });
        Ok(parse(&result(r)?))
    }

    /// The whole log as text.
    pub fn events_text(&self) -> String {
        // SAFETY: live session.
        ok(result(call(|out| unsafe {
            dsh_session_events(self.raw, 0, u64::MAX, out)
        })))
    }

    /// The whole log.
    pub fn events(&self) -> J {
        parse(&self.events_text())
    }

    /// The number of events.
    pub fn len(&self) -> usize {
        self.events().as_array().expect("array").len()
    }

    /// `{"nodes","replaceGeneration"}`.
    pub fn surface(&self) -> J {
        // SAFETY: live session.
        parse(&ok(result(call(|out| unsafe {
            dsh_session_surface(self.raw, out)
        }))))
    }

    /// The surface nodes.
    pub fn nodes(&self) -> Vec<u64> {
        seqs(&self.surface()["nodes"])
    }

    /// The derived messages as text.
    pub fn derive_text(&self) -> String {
        // SAFETY: live session.
        ok(result(call(|out| unsafe {
            dsh_session_derive(self.raw, out)
        })))
    }

    /// The derived messages.
    pub fn derive(&self) -> J {
        parse(&self.derive_text())
    }

    /// `dsh_session_info`.
    pub fn info(&self) -> J {
        // SAFETY: live session.
        parse(&ok(result(call(|out| unsafe {
            dsh_session_info(self.raw, out)
        }))))
    }

    /// The folded request header.
    pub fn request_header(&self) -> J {
        // SAFETY: live session.
        parse(&ok(result(call(|out| unsafe {
            dsh_session_request_header(self.raw, out)
        }))))
    }

    /// The latest request context.
    pub fn request_context(&self) -> J {
        // SAFETY: live session.
        parse(&ok(result(call(|out| unsafe {
            dsh_session_request_context(self.raw, out)
        }))))
    }

    /// `dsh_session_fork`.
    pub fn fork(&self, boundary: i64, options: Option<&J>) -> R<Sess> {
        let o = options.map(|o| cstr(&o.to_string()));
        let mut raw = ptr::null_mut();
        // SAFETY: live session, valid string and out-pointers.
        let r =
            call(|out| unsafe { dsh_session_fork(self.raw, boundary, opt_ptr(&o), &mut raw, out) });
        let text = result(r).inspect_err(|_| assert!(raw.is_null(), "child set on failure"))?;
        Ok(Sess {
            raw,
            header: parse(&text),
            closed: false,
        })
    }

    /// Fork with `{"id": child, "boundary": boundary}` (argument -1).
    pub fn fork_at(&self, child: &str, boundary: J) -> R<Sess> {
        self.fork(-1, Some(&json!({ "id": child, "boundary": boundary })))
    }

    /// Close now; return the status.
    pub fn close(mut self) -> dsh_status {
        self.closed = true;
        // SAFETY: handle made by the library, closed once.
        call(|out| unsafe { dsh_session_close(self.raw, out) }).0
    }
}

impl Drop for Sess {
    fn drop(&mut self) {
        if !self.closed {
            // SAFETY: handle made by the library, closed once.
            unsafe { dsh_session_close(self.raw, ptr::null_mut()) };
        }
    }
}

/// `dsh_fold_surface` over a log given as text.
pub fn fold_text(events: &str) -> R<J> {
    let e = cstr(events);
    // SAFETY: valid string.
    Ok(parse(&result(call(|out| unsafe {
        dsh_fold_surface(e.as_ptr(), out)
    }))?))
}

/// `dsh_fold_surface`.
pub fn fold(events: &J) -> R<J> {
    fold_text(&events.to_string())
}

/// `dsh_derive_messages`.
pub fn derive_messages(events: &J) -> R<J> {
    let e = cstr(&events.to_string());
    // SAFETY: valid string.
    Ok(parse(&result(call(|out| unsafe {
        dsh_derive_messages(e.as_ptr(), out)
    }))?))
}

/// `dsh_repair_events`.
pub fn repair(events: &J) -> R<J> {
    let e = cstr(&events.to_string());
    // SAFETY: valid string.
    Ok(parse(&result(call(|out| unsafe {
        dsh_repair_events(e.as_ptr(), out)
    }))?))
}

/// `dsh_derive_event_message` as text.
pub fn event_message_text(event: &str) -> R<String> {
    let e = cstr(event);
    // SAFETY: valid string.
    result(call(|out| unsafe {
        dsh_derive_event_message(e.as_ptr(), out)
    }))
}

/// `dsh_derive_event_message`.
pub fn event_message(event: &J) -> R<J> {
    Ok(parse(&event_message_text(&event.to_string())?))
}

/// A JSON array of seqs as numbers.
pub fn seqs(v: &J) -> Vec<u64> {
    v.as_array()
        .expect("seq array")
        .iter()
        .map(|s| s.as_u64().expect("seq"))
        .collect()
}

/// Remove `time` from an event or from each event of an array.
pub fn strip_time(v: &J) -> J {
    let mut v = v.clone();
    match &mut v {
        J::Object(o) => {
            o.remove("time");
        }
        J::Array(a) => {
            for e in a.iter_mut() {
                if let J::Object(o) = e {
                    o.remove("time");
                }
            }
        }
        _ => {}
    }
    v
}

mod build;
#[allow(unused_imports)]
pub use build::*;

// ------------------------------------------------------------ pseudo-random

/// A 64-bit linear congruential generator (Knuth's MMIX constants).
pub struct Lcg(u64);

impl Lcg {
    pub fn new(seed: u64) -> Lcg {
        Lcg(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    pub fn next_u32(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as u32
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        u64::from(self.next_u32()) % n
    }

    /// True with probability `p` percent.
    pub fn chance(&mut self, p: u64) -> bool {
        self.below(100) < p
    }
}

// ---------------------------------------------------------------- observer

/// Records every notice `(session id, kind, payload)`.
#[derive(Default)]
pub struct Recorder {
    pub notices: Mutex<Vec<(String, String, String)>>,
}

impl Recorder {
    pub fn kinds(&self) -> Vec<String> {
        self.notices
            .lock()
            .unwrap()
            .iter()
            .map(|n| n.1.clone())
            .collect()
    }

    pub fn take(&self) -> Vec<(String, String, String)> {
        std::mem::take(&mut *self.notices.lock().unwrap())
    }
}

fn text_of(p: *const c_char) -> String {
    // SAFETY: the library passes NUL-terminated strings valid for the call.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// An observer callback that records into the `Recorder` behind `user_data`.
///
/// # Safety
/// `user_data` points to a live `Recorder`.
pub unsafe extern "C" fn record(
    user_data: *mut c_void,
    id: *const c_char,
    kind: *const c_char,
    payload: *const c_char,
) {
    // SAFETY: caller contract.
    let r = unsafe { &*(user_data as *const Recorder) };
    r.notices
        .lock()
        .unwrap()
        .push((text_of(id), text_of(kind), text_of(payload)));
}

/// Install `record` with `recorder` on `store`.
pub fn observe(store: &Store, recorder: &Recorder) {
    // SAFETY: the recorder outlives the store in every test (declared first).
    unsafe { store.set_observer(Some(record), recorder as *const Recorder as *mut c_void) };
}

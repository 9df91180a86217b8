//! Helpers for the checklist tests that are about the C ABI itself
//! (`tests/checklist_abi.rs`): thin RAII wrappers over the C ABI and JSON
//! builders for events and messages. The rest of the checklist runs against
//! the core API (the repository's `tests/checklist_*.rs`).
#![allow(dead_code)]

use std::ffi::{c_char, CString};
use std::ptr;

pub use ::dsh_session_ffi::*;
pub use serde_json::{json, Value as J};

#[path = "../../../../tests/checklist_support/outcome.rs"]
mod outcome;

pub use outcome::*;

#[path = "../support/call.rs"]
mod call;
pub use call::{call, cstr};

fn opt_ptr(s: &Option<CString>) -> *const c_char {
    s.as_ref().map_or(ptr::null(), |c| c.as_ptr())
}

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

    /// `{"nodes","replaceGeneration"}`.
    pub fn surface(&self) -> J {
        // SAFETY: live session.
        parse(&ok(result(call(|out| unsafe {
            dsh_session_surface(self.raw, out)
        }))))
    }

    /// The derived messages as text.
    pub fn derive_text(&self) -> String {
        // SAFETY: live session.
        ok(result(call(|out| unsafe {
            dsh_session_derive(self.raw, out)
        })))
    }

    /// `dsh_session_info`.
    pub fn info(&self) -> J {
        // SAFETY: live session.
        parse(&ok(result(call(|out| unsafe {
            dsh_session_info(self.raw, out)
        }))))
    }

    /// The latest request context.
    pub fn request_context(&self) -> J {
        // SAFETY: live session.
        parse(&ok(result(call(|out| unsafe {
            dsh_session_request_context(self.raw, out)
        }))))
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

// The event and message builders of the core's checklist suites.
#[path = "../../../../tests/checklist_support/build.rs"]
mod build;
#[allow(unused_imports)]
pub use build::*;

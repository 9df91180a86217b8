//! Small safe wrappers over the C ABI for integration tests.
#![allow(dead_code)]

use std::ffi::{c_char, CString};
use std::ptr;

#[path = "tempdir.rs"]
mod tempdir;
pub use tempdir::TempDir;

use ::dsh_session::json::{self, Value};
use ::dsh_session_ffi::*;

#[path = "call.rs"]
mod call;
pub use call::{call, cstr};

pub fn c(s: &str) -> CString {
    cstr(s)
}

fn opt(s: &Option<CString>) -> *const c_char {
    s.as_ref().map_or(ptr::null(), |c| c.as_ptr())
}

/// The host event types the integration tests append, declared so a
/// default (strict) store accepts them and every later open reads them.
pub const TEST_EVENT_TYPES: [&str; 6] = [
    "plugin/a",
    "plugin/b",
    "plugin/note",
    "plugin/noise",
    "plugin/x",
    "plugin/reentrant",
];

/// `config` (a store configuration object, or `null`) with
/// [`TEST_EVENT_TYPES`] declared as its `eventTypes`.
pub fn declaring(config: &str) -> String {
    let types: Vec<String> = TEST_EVENT_TYPES
        .iter()
        .map(|t| format!("\"{t}\""))
        .collect();
    let member = format!("\"eventTypes\":[{}]", types.join(","));
    match config.trim() {
        "null" | "{}" => format!("{{{member}}}"),
        c => format!(
            "{{{member},{}",
            c.trim_start().strip_prefix('{').expect("a config object")
        ),
    }
}

pub fn parse(text: &str) -> Value {
    json::parse(text).expect("library output is JSON")
}

/// The `rule` of an error object.
pub fn rule(text: &str) -> String {
    parse(text)
        .as_object()
        .and_then(|o| o.get("rule"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

pub struct Store(pub *mut dsh_store);

// SAFETY: handles are documented as usable from any thread.
unsafe impl Send for Store {}
// SAFETY: as above.
unsafe impl Sync for Store {}

impl Store {
    pub fn open(config: &str) -> Result<Store, (dsh_status, String)> {
        let config = c(config);
        let mut s = ptr::null_mut();
        // SAFETY: valid pointers.
        let (st, text) = call(|out| unsafe { dsh_store_open(config.as_ptr(), &mut s, out) });
        if st == DSH_OK {
            Ok(Store(s))
        } else {
            Err((st, text))
        }
    }

    pub fn create(&self, options: &str) -> Result<Session, (dsh_status, String)> {
        let options = c(options);
        let mut s = ptr::null_mut();
        // SAFETY: valid pointers.
        let (st, text) =
            call(|out| unsafe { dsh_session_create(self.0, options.as_ptr(), &mut s, out) });
        if st == DSH_OK {
            Ok(Session(s))
        } else {
            Err((st, text))
        }
    }

    /// Open a stored session: (session, `{"header","repaired"}`).
    pub fn open_session(&self, id: &str) -> Result<(Session, Value), (dsh_status, String)> {
        let id = c(id);
        let mut s = ptr::null_mut();
        // SAFETY: valid pointers.
        let (st, text) = call(|out| unsafe { dsh_session_open(self.0, id.as_ptr(), &mut s, out) });
        if st == DSH_OK {
            Ok((Session(s), parse(&text)))
        } else {
            Err((st, text))
        }
    }

    /// Open a stored session keeping a tail window resident.
    pub fn open_windowed(
        &self,
        id: &str,
        options: Option<&str>,
    ) -> Result<(Session, Value), (dsh_status, String)> {
        let (id, options) = (c(id), options.map(c));
        let mut s = ptr::null_mut();
        // SAFETY: valid pointers.
        let (st, text) = call(|out| unsafe {
            dsh_session_open_windowed(self.0, id.as_ptr(), opt(&options), &mut s, out)
        });
        if st == DSH_OK {
            Ok((Session(s), parse(&text)))
        } else {
            Err((st, text))
        }
    }

    pub fn list(&self) -> Value {
        // SAFETY: live handle.
        let (st, text) = call(|out| unsafe { dsh_store_list(self.0, out) });
        assert_eq!(st, DSH_OK, "{text}");
        parse(&text)
    }

    pub fn delete(&self, id: &str) -> (dsh_status, String) {
        let id = c(id);
        // SAFETY: live handle, valid string.
        call(|out| unsafe { dsh_store_delete(self.0, id.as_ptr(), out) })
    }

    pub fn close(self) -> (dsh_status, String) {
        let s = self.0;
        std::mem::forget(self);
        // SAFETY: handle made by open, closed once.
        call(|out| unsafe { dsh_store_close(s, out) })
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // SAFETY: handle made by open, closed once.
        unsafe { dsh_store_close(self.0, ptr::null_mut()) };
    }
}

pub struct Session(pub *mut dsh_session);

// SAFETY: handles are documented as usable from any thread.
unsafe impl Send for Session {}
// SAFETY: as above.
unsafe impl Sync for Session {}

impl Session {
    pub fn append(&self, ty: &str, data: &str, intent: Option<&str>) -> (dsh_status, String) {
        let (ty, data, intent) = (c(ty), c(data), intent.map(c));
        // SAFETY: live handle, valid strings.
        call(|out| unsafe {
            dsh_session_append(self.0, ty.as_ptr(), data.as_ptr(), opt(&intent), out)
        })
    }

    pub fn append_ok(&self, ty: &str, data: &str, intent: Option<&str>) -> Value {
        let (st, text) = self.append(ty, data, intent);
        assert_eq!(st, DSH_OK, "append {ty}: {text}");
        parse(&text)
    }

    pub fn batch(&self, batch: &str) -> (dsh_status, String) {
        let batch = c(batch);
        // SAFETY: live handle, valid string.
        call(|out| unsafe { dsh_session_append_batch(self.0, batch.as_ptr(), out) })
    }

    pub fn events(&self) -> Value {
        // SAFETY: live handle.
        let (st, text) = call(|out| unsafe { dsh_session_events(self.0, 0, u64::MAX, out) });
        assert_eq!(st, DSH_OK, "{text}");
        parse(&text)
    }

    pub fn derive(&self) -> Value {
        // SAFETY: live handle.
        let (st, text) = call(|out| unsafe { dsh_session_derive(self.0, out) });
        assert_eq!(st, DSH_OK, "{text}");
        parse(&text)
    }

    pub fn info(&self) -> Value {
        // SAFETY: live handle.
        let (st, text) = call(|out| unsafe { dsh_session_info(self.0, out) });
        assert_eq!(st, DSH_OK, "{text}");
        parse(&text)
    }

    pub fn flush(&self) -> (dsh_status, String) {
        // SAFETY: live handle.
        call(|out| unsafe { dsh_session_flush(self.0, out) })
    }

    pub fn fork(&self, boundary: i64, options: &str) -> Result<Session, (dsh_status, String)> {
        let options = c(options);
        let mut s = ptr::null_mut();
        // SAFETY: valid pointers.
        let (st, text) = call(|out| unsafe {
            dsh_session_fork(self.0, boundary, options.as_ptr(), &mut s, out)
        });
        if st == DSH_OK {
            Ok(Session(s))
        } else {
            Err((st, text))
        }
    }

    pub fn close(self) -> (dsh_status, String) {
        let s = self.0;
        std::mem::forget(self);
        // SAFETY: handle closed once.
        call(|out| unsafe { dsh_session_close(s, out) })
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // SAFETY: handle closed once.
        unsafe { dsh_session_close(self.0, ptr::null_mut()) };
    }
}

/// Remove `time` from an event or an array of events.
pub fn strip_time(mut v: Value) -> Value {
    match &mut v {
        Value::Object(o) => {
            o.remove("time");
        }
        Value::Array(a) => {
            for e in a.iter_mut() {
                if let Some(o) = e.as_object_mut() {
                    o.remove("time");
                }
            }
        }
        _ => {}
    }
    v
}

/// A raw-lines JSONL store (under a fresh temp dir named after `tag`)
/// whose session `id` holds `lines` after the reference's header line.
/// Returns the temp dir and the store config.
#[allow(dead_code)]
pub fn raw_jsonl_store(tag: &str, id: &str, lines: &[&str]) -> (TempDir, String) {
    let dir = temp_dir(tag);
    let root = dir.join("root");
    let log_dir = root.join("_no-cwd").join(id);
    std::fs::create_dir_all(&log_dir).unwrap();
    let mut text = format!(
        r#"{{"type":"session","version":0,"id":"{id}","createdAt":1700000000000,"delegationDepth":0}}"#
    );
    text.push('\n');
    for l in lines {
        text.push_str(l);
        text.push('\n');
    }
    std::fs::write(log_dir.join("session.jsonl"), text).unwrap();
    let config = format!(
        r#"{{"backend":"jsonl","path":{},"compression":"none"}}"#,
        ::dsh_session::json::Value::str(root.to_str().unwrap()).to_json()
    );
    (dir, config)
}

/// A fresh, empty directory under the system temp dir.
pub fn temp_dir(name: &str) -> TempDir {
    tempdir::make("dsh-test", name)
}

/// The `type` of each event of an array.
pub fn types_of(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            e.as_object()
                .and_then(|o| o.get("type"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

/// Every file under `dir` with its bytes, in path order (to show a store's
/// files are left byte-identical).
pub fn file_tree(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// The PostgreSQL server the tests may use (`DSH_TEST_POSTGRES_URL`, which
/// `scripts/test.sh` sets to a throwaway cluster), or `None` with a note
/// on stderr that the PostgreSQL test is skipped.
#[allow(dead_code)]
pub fn postgres_url() -> Option<String> {
    match std::env::var("DSH_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            eprintln!(
                "skipped: no PostgreSQL server (set DSH_TEST_POSTGRES_URL, as scripts/test.sh does)"
            );
            None
        }
    }
}

/// A schema name no other test (or earlier run) uses.
#[allow(dead_code)]
pub fn fresh_schema() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "t_{}_{}_{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A PostgreSQL store configuration in a fresh schema of the test server,
/// with `extra` members (`,"batchWindowMs":5`), or `None` (skipped, as
/// [`postgres_url`] says).
#[allow(dead_code)]
pub fn postgres_config(extra: &str) -> Option<String> {
    let url = postgres_url()?;
    Some(format!(
        r#"{{"backend":"postgres","url":{},"schema":"{}"{extra}}}"#,
        Value::str(&url).to_json(),
        fresh_schema()
    ))
}

//! What every fuzz target shares: calling the C ABI and failing on the
//! outcomes the library must never give (a panic crossing the boundary,
//! `DSH_E_INTERNAL`, output that is not NUL-terminated JSON).
#![allow(dead_code)]

use std::ffi::CString;
use std::ptr;

use ::dsh_session_ffi::*;

/// Run one C call with a fresh buffer: its status and output text. Fails
/// the run on `DSH_E_INTERNAL` or output that is not terminated JSON.
pub fn call(f: impl FnOnce(*mut dsh_buf) -> dsh_status) -> (dsh_status, String) {
    let mut out = dsh_buf {
        ptr: ptr::null_mut(),
        len: 0,
        cap: 0,
    };
    let st = f(&mut out);
    let text = if out.ptr.is_null() {
        String::new()
    } else {
        // SAFETY: the library wrote `len` bytes and a NUL at `ptr`.
        let bytes = unsafe { std::slice::from_raw_parts(out.ptr as *const u8, out.len + 1) };
        assert_eq!(bytes[out.len], 0, "output not NUL-terminated");
        String::from_utf8(bytes[..out.len].to_vec()).expect("output is UTF-8")
    };
    // SAFETY: a buffer the library filled (or left empty).
    unsafe { dsh_buf_free(&mut out) };
    assert_ne!(st, DSH_E_INTERNAL, "internal error: {text}");
    if !text.is_empty() {
        assert!(
            ::dsh_session::json::parse(&text).is_ok(),
            "output is not JSON: {text:.200}"
        );
    }
    (st, text)
}

/// A C string of `s` (the fuzz input never holds NUL where this is used).
pub fn c(s: &str) -> CString {
    CString::new(s).expect("no NUL")
}

/// Open a store with `config`; `None` when it is refused.
pub fn open_store(config: &str) -> Option<*mut dsh_store> {
    let config = c(config);
    let mut store = ptr::null_mut();
    // SAFETY: valid string and out-pointer.
    let (st, _) = call(|out| unsafe { dsh_store_open(config.as_ptr(), &mut store, out) });
    (st == DSH_OK).then_some(store)
}

/// Create a session `id` in `store` (must succeed).
pub fn create(store: *mut dsh_store, id: &str) -> *mut dsh_session {
    let options = c(&format!(r#"{{"id":"{id}"}}"#));
    let mut s = ptr::null_mut();
    // SAFETY: live store, valid string and out-pointer.
    let (st, text) =
        call(|out| unsafe { dsh_session_create(store, options.as_ptr(), &mut s, out) });
    assert_eq!(st, DSH_OK, "create: {text}");
    s
}

/// Open session `id`: the handle, or `None` with the status and text.
pub fn open_session(
    store: *mut dsh_store,
    id: &str,
) -> Result<*mut dsh_session, (dsh_status, String)> {
    let id = c(id);
    let mut s = ptr::null_mut();
    // SAFETY: live store, valid string and out-pointer.
    let (st, text) = call(|out| unsafe { dsh_session_open(store, id.as_ptr(), &mut s, out) });
    if st == DSH_OK {
        Ok(s)
    } else {
        Err((st, text))
    }
}

/// Exercise every read of an open session; nothing may fail internally.
pub fn read_all(s: *mut dsh_session) {
    // SAFETY: live session handle; out-pointers from `call`.
    unsafe {
        call(|out| dsh_session_info(s, out));
        call(|out| dsh_session_events(s, 0, u64::MAX, out));
        call(|out| dsh_session_surface(s, out));
        call(|out| dsh_session_derive(s, out));
        call(|out| dsh_session_derive_since(s, 0, 0, out));
        call(|out| dsh_session_request_header(s, out));
        call(|out| dsh_session_request_context(s, out));
    }
}

/// Close a session and a store handle.
pub fn close(s: *mut dsh_session, store: *mut dsh_store) {
    // SAFETY: handles made by this run, closed once.
    unsafe {
        if !s.is_null() {
            call(|out| dsh_session_close(s, out));
        }
        call(|out| dsh_store_close(store, out));
    }
}

/// A directory of this process for file-backed targets (mode 0700).
pub fn scratch_dir(name: &str) -> std::path::PathBuf {
    use std::os::unix::fs::DirBuilderExt;
    let dir = std::env::temp_dir().join(format!("dsh-fuzz-{}-{name}", std::process::id()));
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(&dir)
            .unwrap();
    }
    dir
}

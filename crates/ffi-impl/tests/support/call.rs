//! The one helper every ABI test needs: call a function that fills a
//! `dsh_buf`, check the buffer contract, return the status and the text.

use std::ffi::{CStr, CString};
use std::ptr;

use ::dsh_session_ffi::{dsh_buf, dsh_buf_free, dsh_status};

/// Call an ABI function that fills a buffer; return (status, text).
pub fn call(f: impl FnOnce(*mut dsh_buf) -> dsh_status) -> (dsh_status, String) {
    let mut buf = dsh_buf {
        ptr: ptr::null_mut(),
        len: 0,
        cap: 0,
    };
    let status = f(&mut buf);
    assert!(!buf.ptr.is_null(), "out buffer not filled");
    // SAFETY: the library filled the buffer with a NUL-terminated string.
    let text = unsafe { CStr::from_ptr(buf.ptr) }
        .to_str()
        .expect("utf-8 out")
        .to_string();
    assert_eq!(text.len(), buf.len, "len excludes the NUL");
    // SAFETY: the buffer was filled by the library.
    unsafe { dsh_buf_free(&mut buf) };
    (status, text)
}

/// A NUL-terminated copy of `s`.
pub fn cstr(s: &str) -> CString {
    CString::new(s).expect("no NUL in test input")
}

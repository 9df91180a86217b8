//! C ABI helpers: RAII wrappers over the `dsh_session_ffi` handles and
//! buffers, called exactly as a C host would call them.

use std::ffi::{CStr, CString};
use std::ptr;

use ::dsh_session_ffi::{
    dsh_buf, dsh_buf_free, dsh_session as DshSession, dsh_session_append, dsh_session_close,
    dsh_session_create, dsh_session_derive, dsh_session_flush, dsh_status, dsh_status_name,
    dsh_store, dsh_store_close, dsh_store_open, DSH_OK,
};
use serde_json::json;

use crate::mix::Ev;

/// A `dsh_buf` freed on drop (and reusable: every call overwrites it).
pub struct Buf(pub dsh_buf);

impl Buf {
    pub fn new() -> Buf {
        Buf(dsh_buf {
            ptr: ptr::null_mut(),
            len: 0,
            cap: 0,
        })
    }
    pub fn out(&mut self) -> *mut dsh_buf {
        &mut self.0
    }
    pub fn text(&self) -> &str {
        if self.0.ptr.is_null() {
            return "";
        }
        // SAFETY: a filled buffer holds `len` bytes of UTF-8.
        unsafe {
            std::str::from_utf8_unchecked(std::slice::from_raw_parts(
                self.0.ptr.cast::<u8>(),
                self.0.len,
            ))
        }
    }
    pub fn free(&mut self) {
        // SAFETY: the buffer is zeroed or was filled by the library.
        unsafe { dsh_buf_free(&mut self.0) };
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        self.free();
    }
}

pub fn check(status: dsh_status, buf: &Buf, what: &str) {
    if status != DSH_OK {
        // SAFETY: dsh_status_name returns a static NUL-terminated string.
        let name = unsafe { CStr::from_ptr(dsh_status_name(status)) };
        panic!("{what}: {} {}", name.to_string_lossy(), buf.text());
    }
}

pub fn cstr(s: &str) -> CString {
    CString::new(s).expect("no NUL in benchmark text")
}

pub struct Store(pub *mut dsh_store);

// SAFETY: the C ABI's handles may be used from any thread (calls on one
// handle are serialized by the library), and the pointer is only handed
// to the library.
unsafe impl Send for Store {}
// SAFETY: as above.
unsafe impl Sync for Store {}

impl Store {
    pub fn open(config: &str) -> Store {
        let mut store = ptr::null_mut();
        let mut out = Buf::new();
        let c = cstr(config);
        // SAFETY: valid pointers, NUL-terminated config.
        let st = unsafe { dsh_store_open(c.as_ptr(), &mut store, out.out()) };
        check(st, &out, "dsh_store_open");
        Store(store)
    }
    pub fn create(&self, id: &str) -> Session {
        let mut s = ptr::null_mut();
        let mut out = Buf::new();
        let c = cstr(&json!({ "id": id }).to_string());
        // SAFETY: valid handle and pointers.
        let st = unsafe { dsh_session_create(self.0, c.as_ptr(), &mut s, out.out()) };
        check(st, &out, "dsh_session_create");
        Session(s)
    }
    pub fn close(self) {
        let mut out = Buf::new();
        // SAFETY: a handle from dsh_store_open, closed once.
        let st = unsafe { dsh_store_close(self.0, out.out()) };
        check(st, &out, "dsh_store_close");
        std::mem::forget(self);
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // SAFETY: a handle from dsh_store_open, closed once.
        unsafe { dsh_store_close(self.0, ptr::null_mut()) };
    }
}

pub struct Session(pub *mut DshSession);

// SAFETY: the C ABI's handles may be used from any thread (calls on one
// handle are serialized by the library), and the pointer is only handed
// to the library.
unsafe impl Send for Session {}
// SAFETY: as above.
unsafe impl Sync for Session {}

impl Session {
    pub fn append(&self, ev: &Ev, out: &mut Buf) {
        // SAFETY: valid handle, NUL-terminated strings.
        let st = unsafe {
            dsh_session_append(
                self.0,
                ev.ty.as_ptr(),
                ev.data.as_ptr(),
                ev.intent.as_ref().map_or(ptr::null(), |i| i.as_ptr()),
                out.out(),
            )
        };
        if st != DSH_OK {
            check(
                st,
                out,
                &format!("dsh_session_append({})", ev.ty.to_string_lossy()),
            );
        }
        out.free();
    }
    pub fn derive(&self, out: &mut Buf) -> usize {
        // SAFETY: valid handle and buffer.
        let st = unsafe { dsh_session_derive(self.0, out.out()) };
        check(st, out, "dsh_session_derive");
        let n = out.0.len;
        out.free();
        n
    }
    pub fn flush(&self) {
        let mut out = Buf::new();
        // SAFETY: valid handle and buffer.
        let st = unsafe { dsh_session_flush(self.0, out.out()) };
        check(st, &out, "dsh_session_flush");
    }
    pub fn close(self) {
        let mut out = Buf::new();
        // SAFETY: a handle from this library, closed once.
        let st = unsafe { dsh_session_close(self.0, out.out()) };
        check(st, &out, "dsh_session_close");
        std::mem::forget(self);
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // SAFETY: a handle from this library, closed once.
        unsafe { dsh_session_close(self.0, ptr::null_mut()) };
    }
}

//! Small safe wrappers over the C ABI for integration tests.
#![allow(dead_code)]

use std::ffi::{c_char, CString};
use std::ptr;

#[path = "../../../../tests/store_support/fixtures.rs"]
mod fixtures;
pub use fixtures::*;

use ::dsh_session::json::Value;
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

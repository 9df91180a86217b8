//! Append data and intent text: the input is `type NUL data NUL intent`
//! (a missing intent is NULL). Every append, valid or not, answers with a
//! status and JSON; one that is accepted reads back, derives and forks.
#![no_main]

#[path = "../common/mod.rs"]
mod common;

use std::ptr;

use ::dsh_session_ffi::*;
use common::*;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    let mut parts = text.splitn(3, '\0');
    let (ty, data, intent) = (
        parts.next().unwrap_or(""),
        parts.next().unwrap_or("null"),
        parts.next(),
    );
    if intent.is_some_and(|i| i.contains('\0')) {
        return;
    }
    let admission = if ty.len() % 2 == 0 {
        "strict"
    } else {
        "reference"
    };
    let store = open_store(&format!(r#"{{"admission":"{admission}"}}"#)).expect("memory store");
    let s = create(store, "f");
    let (cty, cdata, cintent) = (c(ty), c(data), intent.map(c));
    let ip = cintent.as_ref().map_or(ptr::null(), |i| i.as_ptr());
    // SAFETY: live handle, NUL-terminated strings (or NULL intent).
    unsafe {
        call(|out| dsh_session_validate(s, cty.as_ptr(), cdata.as_ptr(), ip, out));
        call(|out| dsh_session_append(s, cty.as_ptr(), cdata.as_ptr(), ip, out));
    }
    read_all(s);
    let mut child = ptr::null_mut();
    let opts = c(r#"{"id":"child"}"#);
    // SAFETY: live handle, valid string and out-pointer.
    let (st, _) = call(|out| unsafe { dsh_session_fork(s, -1, opts.as_ptr(), &mut child, out) });
    if st == DSH_OK {
        read_all(child);
        // SAFETY: the child handle made above, closed once.
        unsafe { call(|out| dsh_session_close(child, out)) };
    }
    close(s, store);
});

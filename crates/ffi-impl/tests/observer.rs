//! Store lifecycle notices (docs/lifecycle.md §9) through `dsh_store_set_observer`.

mod support;

use std::ffi::{c_char, c_void, CStr};
use std::ptr;
use std::sync::Mutex;

use ::dsh_session_ffi::*;
use support::*;

struct Seen {
    notices: Mutex<Vec<(String, String, String)>>,
    /// When set, the callback tries to append to this session re-entrantly.
    reenter: Mutex<Option<*mut dsh_session>>,
    reentrant_status: Mutex<Vec<(dsh_status, String)>>,
}

// SAFETY: the raw session pointer is only used through the thread-safe ABI.
unsafe impl Sync for Seen {}

unsafe extern "C" fn on_notice(
    user: *mut c_void,
    id: *const c_char,
    kind: *const c_char,
    payload: *const c_char,
) {
    // SAFETY: the library passes NUL-terminated strings valid for the call,
    // and `user` is the `Seen` the test installed.
    let (seen, id, kind, payload) = unsafe {
        (
            &*(user as *const Seen),
            CStr::from_ptr(id).to_string_lossy().into_owned(),
            CStr::from_ptr(kind).to_string_lossy().into_owned(),
            CStr::from_ptr(payload).to_string_lossy().into_owned(),
        )
    };
    if kind == "event" {
        if let Some(s) = *seen.reenter.lock().unwrap() {
            let (ty, data) = (c("plugin/reentrant"), c("{}"));
            // SAFETY: live session handle, valid strings.
            let r = call(|out| unsafe {
                dsh_session_append(s, ty.as_ptr(), data.as_ptr(), ptr::null(), out)
            });
            seen.reentrant_status.lock().unwrap().push(r);
        }
    }
    seen.notices.lock().unwrap().push((id, kind, payload));
}

#[test]
fn observer_hears_created_event_flush_and_disposed_in_order() {
    let store = Store::open(&declaring("null")).unwrap();
    let seen = Box::new(Seen {
        notices: Mutex::new(Vec::new()),
        reenter: Mutex::new(None),
        reentrant_status: Mutex::new(Vec::new()),
    });
    let user = &*seen as *const Seen as *mut c_void;
    // SAFETY: `seen` outlives the store (dropped at the end of the test).
    let (st, text) =
        call(|out| unsafe { dsh_store_set_observer(store.0, Some(on_notice), user, out) });
    assert_eq!(st, DSH_OK, "{text}");
    let s = store.create(r#"{"id":"obs","seed":[]}"#).unwrap();
    s.append_ok("plugin/a", r#"{"n":1}"#, None);
    assert_eq!(s.flush().0, DSH_OK);
    assert_eq!(s.close().0, DSH_OK);
    let notices = seen.notices.lock().unwrap().clone();
    let kinds: Vec<&str> = notices.iter().map(|n| n.1.as_str()).collect();
    // The seed's end-seed marker is part of creation, not a published event.
    assert_eq!(kinds, ["created", "event", "flush", "disposed"]);
    assert!(notices.iter().all(|n| n.0 == "obs"));
    assert!(notices[0].2.contains("\"id\":\"obs\""), "{}", notices[0].2);
    assert!(
        notices[1].2.contains("\"type\":\"plugin/a\",\"seq\":1"),
        "{}",
        notices[1].2
    );
    assert_eq!(notices[2].2, r#"{"ok":true}"#);
    assert_eq!(notices[3].2, "null");
    drop(store);
    drop(seen);
}

#[test]
fn an_append_from_inside_the_observer_is_refused_as_reentrant() {
    let store = Store::open(&declaring("null")).unwrap();
    let seen = Box::new(Seen {
        notices: Mutex::new(Vec::new()),
        reenter: Mutex::new(None),
        reentrant_status: Mutex::new(Vec::new()),
    });
    let user = &*seen as *const Seen as *mut c_void;
    // SAFETY: `seen` outlives the store.
    unsafe { dsh_store_set_observer(store.0, Some(on_notice), user, ptr::null_mut()) };
    let s = store.create(r#"{"id":"re"}"#).unwrap();
    *seen.reenter.lock().unwrap() = Some(s.0);
    s.append_ok("plugin/a", "{}", None);
    *seen.reenter.lock().unwrap() = None;
    let statuses = seen.reentrant_status.lock().unwrap().clone();
    assert_eq!(statuses.len(), 1);
    assert_eq!(statuses[0].0, DSH_E_CONFLICT);
    assert_eq!(rule(&statuses[0].1), "append.reentrant");
    // The outer append stands; the refused one changed nothing.
    assert_eq!(s.events().as_array().unwrap().len(), 1);
    // Reading the session from a callback is fine (it does not deadlock).
    s.append_ok("plugin/b", "{}", None);
    // SAFETY: removing the observer.
    unsafe { dsh_store_set_observer(store.0, None, ptr::null_mut(), ptr::null_mut()) };
    drop(s);
    drop(store);
    drop(seen);
}

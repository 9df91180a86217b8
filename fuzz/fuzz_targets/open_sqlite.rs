//! Opening a mutated SQLite database: the input is the database file
//! (seeded with databases the library wrote). Opening the store, listing,
//! inspecting and opening its sessions answer with a status, never a
//! crash; a session that opens answers every read.
#![no_main]

#[path = "../common/mod.rs"]
mod common;

use std::os::unix::fs::PermissionsExt;

use ::dsh_session_ffi::*;
use common::*;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let dir = scratch_dir("sqlite");
    let db = dir.join("s.db");
    for side in ["-wal", "-shm", "-journal"] {
        let mut p = db.as_os_str().to_owned();
        p.push(side);
        let _ = std::fs::remove_file(p);
    }
    std::fs::write(&db, input).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o600)).unwrap();
    let config = format!(
        r#"{{"backend":"sqlite","path":{},"batchWindowMs":0}}"#,
        ::dsh_session::json::Value::str(db.to_str().unwrap()).to_json()
    );
    let Some(store) = open_store(&config) else {
        return;
    };
    // SAFETY: live store.
    let (st, list) = call(|out| unsafe { dsh_store_list(store, out) });
    let mut ids = Vec::new();
    if st == DSH_OK {
        if let Ok(v) = ::dsh_session::json::parse(&list) {
            for row in v.as_array().into_iter().flatten() {
                if let Some(id) = row
                    .as_object()
                    .and_then(|o| o.get("id"))
                    .and_then(|i| i.as_str())
                {
                    if !id.contains('\0') {
                        ids.push(id.to_string());
                    }
                }
            }
        }
    }
    for id in ids.iter().take(4) {
        let cid = c(id);
        // SAFETY: live store, valid string.
        unsafe { call(|out| dsh_store_inspect(store, cid.as_ptr(), out)) };
        if let Ok(s) = open_session(store, id) {
            read_all(s);
            // SAFETY: the handle opened above, closed once.
            unsafe { call(|out| dsh_session_close(s, out)) };
        }
    }
    close(std::ptr::null_mut(), store);
});

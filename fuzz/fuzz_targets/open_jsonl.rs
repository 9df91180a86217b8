//! Opening a mutated JSONL log: the input is the file of session `f`
//! (zstd frames when its first byte is odd, raw lines otherwise). Open,
//! inspect, list and a windowed open answer with a status; a session that
//! opens answers every read.
#![no_main]

#[path = "../common/mod.rs"]
mod common;

use ::dsh_session_ffi::*;
use common::*;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let zstd = input.first().is_some_and(|b| b % 2 == 1);
    let root = scratch_dir(if zstd { "jsonl-zstd" } else { "jsonl-raw" });
    let dir = root.join("_no-cwd").join("f");
    let _ = std::fs::remove_dir_all(root.join("_no-cwd"));
    std::fs::create_dir_all(&dir).unwrap();
    let name = if zstd {
        "session.jsonl.zstd"
    } else {
        "session.jsonl"
    };
    std::fs::write(dir.join(name), input.get(1..).unwrap_or(&[])).unwrap();
    let config = format!(
        r#"{{"backend":"jsonl","path":{},"compression":"{}","batchWindowMs":0}}"#,
        ::dsh_session::json::Value::str(root.to_str().unwrap()).to_json(),
        if zstd { "zstd" } else { "none" }
    );
    let Some(store) = open_store(&config) else {
        return;
    };
    let id = c("f");
    // SAFETY: live store, valid string.
    unsafe {
        call(|out| dsh_store_list(store, out));
        call(|out| dsh_store_inspect(store, id.as_ptr(), out));
    }
    let s = match open_session(store, "f") {
        Ok(s) => {
            read_all(s);
            s
        }
        Err(_) => std::ptr::null_mut(),
    };
    close(s, store);
});

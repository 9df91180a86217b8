//! Every store configuration key `dsh_store_open` accepts is documented
//! where a host looks for it: the header's `dsh_store_open` comment, the
//! configuration table of `docs/c-api.md` and the README's Storage
//! section. The keys are read from the list `options.rs` checks them
//! against, so a new key fails this test until it is documented.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("..")
}

fn read(path: &str) -> String {
    let p = root().join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The keys of `let known = [...]` in `options.rs`'s `store_config`.
fn accepted_keys() -> Vec<String> {
    let text = read("crates/ffi-impl/src/options.rs");
    let start = text.find("pub fn store_config").expect("store_config");
    let list = &text[start..];
    let list = &list[list.find("let known = [").expect("the known keys")..];
    let list = &list[..list.find("];").expect("the end of the known keys")];
    let keys: Vec<String> = list
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    assert!(keys.len() >= 12, "keys not found: {keys:?}");
    keys
}

#[test]
fn every_configuration_key_is_documented() {
    let keys = accepted_keys();
    let header = read("include/dsh_session.h");
    let open = header
        .find("dsh_status dsh_store_open(")
        .expect("dsh_store_open");
    let comment = &header[header[..open].rfind("/**").expect("its comment")..open];
    let c_api = read("docs/c-api.md");
    let readme = read("README.md");
    let storage = &readme[readme.find("## Storage").expect("README: Storage")..];
    let storage = &storage[..storage[3..].find("\n## ").map_or(storage.len(), |i| i + 3)];
    let mut missing = Vec::new();
    for key in &keys {
        if !comment.contains(&format!("`{key}`")) {
            missing.push(format!("include/dsh_session.h (dsh_store_open): {key}"));
        }
        if !c_api.contains(&format!("| `{key}` |")) {
            missing.push(format!("docs/c-api.md (config_json table): {key}"));
        }
        if !storage.contains(&format!("\"{key}\"")) {
            missing.push(format!("README.md (Storage): {key}"));
        }
    }
    assert!(
        missing.is_empty(),
        "undocumented keys:\n{}",
        missing.join("\n")
    );
}

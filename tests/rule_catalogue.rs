//! Every rule id the library raises is in the catalogue `docs/errors.md`:
//! a string literal in `src/` that looks like a rule id of a namespace the
//! catalogue uses (`msg.`, `io.`, `admit.`, …) must be listed there.

use std::collections::BTreeSet;
use std::path::Path;

/// `ns.name` ids in `text`: a lowercase namespace, a dot, then lowercase
/// letters, digits and `-`, ending in a letter or digit.
fn ids(text: &str, quote: char) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for piece in text.split(quote).skip(1).step_by(2) {
        let Some((ns, name)) = piece.split_once('.') else {
            continue;
        };
        let ok = !ns.is_empty()
            && ns.bytes().all(|b| b.is_ascii_lowercase())
            && !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && name.as_bytes()[0].is_ascii_lowercase()
            && !name.ends_with('-')
            // File names, not rule ids.
            && !["db", "zstd", "jsonl"].contains(&name);
        if ok {
            out.insert(piece.to_string());
        }
    }
    out
}

fn sources(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(std::fs::read_to_string(&path).unwrap());
        }
    }
}

#[test]
fn every_rule_id_the_code_raises_is_in_the_catalogue() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let catalogue = std::fs::read_to_string(root.join("docs/errors.md")).unwrap();
    let listed = ids(&catalogue, '`');
    let namespaces: BTreeSet<&str> = listed
        .iter()
        .filter_map(|id| id.split_once('.').map(|(ns, _)| ns))
        .collect();
    for ns in [
        "admit", "msg", "io", "config", "arg", "load", "sqlite", "jsonl", "zstd",
    ] {
        assert!(namespaces.contains(ns), "the catalogue has no {ns}.* rule");
    }
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    for krate in ["ffi-impl", "cli"] {
        sources(&root.join("crates").join(krate).join("src"), &mut files);
    }
    let mut missing = BTreeSet::new();
    for text in &files {
        for id in ids(text, '"') {
            let ns = id.split_once('.').unwrap().0;
            if namespaces.contains(ns) && !listed.contains(&id) {
                missing.insert(id);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "rule ids raised in src/ but missing from docs/errors.md: {missing:?}"
    );
}

//! The rule catalogue is one list: the ids of [`Rule`] are exactly the
//! rule ids `docs/errors.md` lists (the first column of its tables), and no
//! source file outside `src/rule.rs` spells a rule id as a string, so every
//! error is raised with a `Rule`.

use std::collections::BTreeSet;
use std::path::Path;

use dsh_session::Rule;

/// `ns.name` ids in `text`: a lowercase namespace, a dot, then lowercase
/// letters, digits and `-`, ending in a letter or digit. In code,
/// `files` leaves out names that are file names (`store.db`).
fn ids(text: &str, quote: char, files: bool) -> BTreeSet<String> {
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
            && !(files && ["db", "zstd", "jsonl"].contains(&name));
        if ok {
            out.insert(piece.to_string());
        }
    }
    out
}

/// The ids in the first column of the tables of `docs/errors.md`.
fn catalogued() -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("docs/errors.md")).unwrap();
    let mut out = BTreeSet::new();
    for line in text.lines().filter(|l| l.starts_with("| `")) {
        let first = line.split('|').nth(1).unwrap_or("");
        out.extend(ids(first, '`', false));
    }
    out
}

/// The non-test Rust sources under `dir`.
fn sources(dir: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            if name != "tests" {
                sources(&path, out);
            }
        } else if name.ends_with(".rs") && !name.starts_with("tests") && name != "rule.rs" {
            let text = std::fs::read_to_string(&path).unwrap();
            out.push((path.display().to_string(), text));
        }
    }
}

#[test]
fn the_rule_enum_and_the_catalogue_list_the_same_ids() {
    let listed = catalogued();
    let ours: BTreeSet<String> = Rule::ALL.iter().map(|r| r.as_str().to_string()).collect();
    let undocumented: Vec<_> = ours.difference(&listed).collect();
    let unknown: Vec<_> = listed.difference(&ours).collect();
    assert!(
        undocumented.is_empty(),
        "rules missing from docs/errors.md: {undocumented:?}"
    );
    assert!(
        unknown.is_empty(),
        "docs/errors.md lists ids that src/rule.rs lacks: {unknown:?}"
    );
    for rule in Rule::ALL {
        assert_eq!(Rule::from_id(rule.as_str()), Some(*rule));
    }
}

#[test]
fn no_source_spells_a_rule_id_as_a_string() {
    let listed = catalogued();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    for krate in ["ffi-impl", "ffi", "cli"] {
        sources(&root.join("crates").join(krate).join("src"), &mut files);
    }
    assert!(files.len() > 50, "sources not found");
    let mut spelled = BTreeSet::new();
    for (path, text) in &files {
        let code: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        for id in ids(&code, '"', true) {
            if listed.contains(&id) {
                spelled.insert(format!("{path}: {id}"));
            }
        }
    }
    assert!(
        spelled.is_empty(),
        "raise these with dsh_session::Rule, not a string: {spelled:?}"
    );
}

//! Every document the repository cites is a file of the repository.
//!
//! The sources, headers, bindings, scripts, examples, tests and documents
//! are scanned for citations of Markdown files (`docs/formats.md`,
//! `lifecycle.md §6`): each must name a file that exists, relative to the
//! citing file's directory or to the repository root, and a `§` number
//! right after it must be a numbered heading of that file. Paths into a
//! `shared` directory beside the repository, and paths of the reference
//! engine's repository (its TypeScript files, its `packages/<name>/`
//! tree, its owner's name), are refused wherever they appear: the
//! repository's documents stand on their own.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What is scanned, relative to the repository root.
const ROOTS: [&str; 16] = [
    "src",
    "crates",
    "include",
    "docs",
    "bindings",
    "cmake",
    "scripts",
    "examples",
    "tests",
    "fuzz",
    "README.md",
    "CONTRIBUTING.md",
    "CHANGELOG.md",
    "CMakeLists.txt",
    "Package.swift",
    "Cargo.toml",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Text files under `path` (build outputs and hidden directories left out).
fn files(path: &Path, out: &mut Vec<PathBuf>) {
    let name = path.file_name().map(|n| n.to_string_lossy().to_string());
    if path.is_dir() {
        if name.is_some_and(|n| n.starts_with('.') || n == "target" || n == "corpus") {
            return;
        }
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for e in entries {
            files(&e, out);
        }
    } else if path.is_file() {
        out.push(path.to_path_buf());
    }
}

fn is_path_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.' | b'/')
}

/// The path-like tokens of `text` that end in `.{ext}` (followed by
/// something that is not a word character), with their end offsets.
/// A token must have a name before the extension (`*.md` is no citation)
/// and is not part of a URL.
fn tokens<'a>(text: &'a str, ext: &str) -> Vec<(&'a str, usize)> {
    let bytes = text.as_bytes();
    let suffix = format!(".{ext}");
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find(&suffix) {
        let dot = from + i;
        let end = dot + suffix.len();
        from = end;
        if bytes
            .get(end)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        {
            continue;
        }
        let mut start = dot;
        while start > 0 && is_path_char(bytes[start - 1]) {
            start -= 1;
        }
        let before = bytes[dot.saturating_sub(1)];
        let named = dot > 0 && (before.is_ascii_alphanumeric() || matches!(before, b'_' | b'-'));
        let url = start > 0 && bytes[start - 1] == b':';
        if named && !url {
            out.push((&text[start..end], end));
        }
    }
    out
}

/// The `§` numbers right after a citation: `§3.1`, `§3.1, §4.5`, `§3–§6`.
fn sections(after: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = after;
    loop {
        let trimmed = rest.trim_start_matches(|c: char| {
            c.is_whitespace() || matches!(c, '`' | ',' | '–' | '-' | '/' | '(' | '*')
        });
        let trimmed = trimmed.strip_prefix("and ").unwrap_or(trimmed);
        let Some(number) = trimmed.strip_prefix('§') else {
            break;
        };
        let len = number
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(number.len());
        let n = number[..len].trim_end_matches('.');
        if n.is_empty() {
            break;
        }
        out.push(n.to_string());
        rest = &number[len..];
    }
    out
}

/// The numbers of the numbered headings of a Markdown file (`## 3.`,
/// `### 3.1 …` give `3` and `3.1`).
fn headings(path: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim_start();
        let len = title
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(title.len());
        let n = title[..len].trim_end_matches('.');
        if !n.is_empty() {
            out.insert(n.to_string());
        }
    }
    out
}

/// Where a citation in `file` points: beside the file, else at the root.
fn resolve(file: &Path, cited: &str) -> Option<PathBuf> {
    let beside = file.parent().unwrap().join(cited);
    if beside.is_file() {
        return Some(beside);
    }
    let at_root = root().join(cited);
    at_root.is_file().then_some(at_root)
}

/// What the reference engine's repository and a directory beside this one
/// look like in text (this file, which spells them, is not scanned).
fn outside_markers() -> Vec<String> {
    vec![
        ["..", "/shared"].concat(),
        ["shared", "/spec/"].concat(),
        ["shared", "/design/"].concat(),
        ["ton", "info/"].concat(),
        ["packages", "/core/"].concat(),
        ["packages", "/session/"].concat(),
        ["packages", "/llm/"].concat(),
    ]
}

#[test]
fn every_cited_document_is_a_file_of_the_repository() {
    let mut all = Vec::new();
    for r in ROOTS {
        files(&root().join(r), &mut all);
    }
    assert!(
        all.len() > 200,
        "sources not found under {}",
        root().display()
    );
    let markers = outside_markers();
    let mut problems = Vec::new();
    let mut cited = 0;
    for file in &all {
        if file.ends_with("tests/doc_references.rs") {
            continue; // its own examples of what it refuses
        }
        let Ok(text) = std::fs::read_to_string(file) else {
            continue; // not text
        };
        let shown = file.strip_prefix(root()).unwrap().display().to_string();
        let line_of = |offset: usize| text[..offset].lines().count().max(1);
        for (token, end) in tokens(&text, "md") {
            cited += 1;
            let at = format!("{shown}:{}", line_of(end));
            let Some(target) = resolve(file, token) else {
                problems.push(format!("{at}: {token} is not a file of the repository"));
                continue;
            };
            let numbered = headings(&target);
            for n in sections(&text[end..]) {
                if !numbered.contains(&n) {
                    problems.push(format!("{at}: {token} has no section {n}"));
                }
            }
        }
        for (token, end) in tokens(&text, "ts") {
            let at = format!("{shown}:{}", line_of(end));
            problems.push(format!("{at}: {token} names a file of another repository"));
        }
        for m in &markers {
            for (i, _) in text.match_indices(m.as_str()) {
                problems.push(format!(
                    "{shown}:{}: {m:?} points outside the repository",
                    line_of(i)
                ));
            }
        }
    }
    assert!(cited > 50, "only {cited} citations found");
    assert!(
        problems.is_empty(),
        "{} dangling or outside references:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_scanner_finds_what_it_should() {
    let found = |t: &str| -> Vec<String> {
        tokens(t, "md")
            .into_iter()
            .map(|(s, _)| s.to_string())
            .collect()
    };
    assert_eq!(found("see docs/formats.md §3."), ["docs/formats.md"]);
    assert_eq!(found("(`lifecycle.md` §6)"), ["lifecycle.md"]);
    assert_eq!(found("[x](docs/c-api.md#store)"), ["docs/c-api.md"]);
    assert!(found("every *.md file, https://x.org/README.md").is_empty());
    assert!(found("a .mdx file, foo.mdbook").is_empty());
    assert_eq!(found("../shared/x.md"), ["../shared/x.md"]);
    assert_eq!(sections(" §3.1, §4.5 and §6"), ["3.1", "4.5", "6"]);
    assert_eq!(sections("` §3–§6 steps"), ["3", "6"]);
    assert_eq!(sections(" (`x`)"), Vec::<String>::new());
    let ts: Vec<&str> = tokens("in src/index.ts and `.ts` files", "ts")
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    assert_eq!(ts, ["src/index.ts"]);
}

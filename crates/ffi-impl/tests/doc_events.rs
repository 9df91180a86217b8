//! `docs/events.md` shows what the library accepts: its marked example
//! blocks are run, in the order of the page, through the C ABI.
//!
//! Markers (the info string of a fenced block):
//!
//! * ` ```json config `: the store configuration (`dsh_store_open`);
//! * ` ```json create `: the session's create options (`dsh_session_create`);
//! * ` ```json event `: one event as the log holds it. Its `type`, `data`
//!   and intent (`surfaceOp`, `sourceEventSeqs`, `ignorable`) are appended
//!   with `dsh_session_append`, which must return `DSH_OK` and the event
//!   shown, byte for byte apart from `time` and whitespace. A
//!   `session/end-seed` event is not appended: the session is closed and
//!   opened again, and the open must have added it;
//! * ` ```json surface ` / ` ```json derived ` / ` ```json request-header `
//!   / ` ```json request-context `: what `dsh_session_surface` /
//!   `dsh_session_derive` / `dsh_session_request_header` /
//!   `dsh_session_request_context` return at that point;
//! * ` ```text known-types `: the known vocabulary, one type a line.
//!
//! Every core type of the page's first table has an event example. A
//! block with another marker fails the test (a misspelt marker would
//! otherwise drop its example from the check).

mod support;

use std::path::Path;

use ::dsh_session::engine::vocabulary::KNOWN_EVENT_TYPES;
use ::dsh_session::json::{Object, Value};
use ::dsh_session_ffi::*;
use support::*;

/// A fenced block: its line, its marker (the info string) and its text.
struct Block {
    line: usize,
    info: String,
    body: String,
}

fn page() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("..");
    let path = root.join("docs/events.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        match open.take() {
            None => {
                if let Some(info) = line.strip_prefix("```") {
                    open = Some(Block {
                        line: i + 1,
                        info: info.trim().to_string(),
                        body: String::new(),
                    });
                }
            }
            Some(mut b) => {
                if line.trim_end() == "```" {
                    out.push(b);
                } else {
                    b.body.push_str(line);
                    b.body.push('\n');
                    open = Some(b);
                }
            }
        }
    }
    assert!(
        open.is_none(),
        "docs/events.md: a fenced block is not closed"
    );
    out
}

fn json(b: &Block) -> Value {
    ::dsh_session::json::parse(&b.body)
        .unwrap_or_else(|e| panic!("docs/events.md:{}: not JSON: {e}", b.line))
}

fn member<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_object().and_then(|o| o.get(key))
}

/// The event's text without its `time` (the clock's, not the page's).
fn timeless(v: &Value) -> String {
    let mut o = v.as_object().expect("an event object").clone();
    o.remove("time");
    Value::Object(o).to_json()
}

/// The core types: the first column of the page's first table.
fn core_types(text: &str) -> Vec<String> {
    let start = text.find("## 1.").expect("section 1");
    let end = text[start..].find("\n## 2.").expect("section 2") + start;
    text[start..end]
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|(t, _)| t.to_string()))
        .collect()
}

/// A session read call's JSON result.
fn read(
    s: &Session,
    f: unsafe extern "C" fn(*mut dsh_session, *mut dsh_buf) -> dsh_status,
) -> Value {
    // SAFETY: live handle; `f` is one of the library's session reads.
    let (st, text) = call(|out| unsafe { f(s.0, out) });
    assert_eq!(st, DSH_OK, "{text}");
    parse(&text)
}

#[test]
fn every_example_of_the_events_page_is_accepted_as_shown() {
    let text = page();
    let mut store: Option<Store> = None;
    let mut session: Option<Session> = None;
    let mut id = String::new();
    let mut appended: Vec<String> = Vec::new();
    let mut checked = 0;
    for b in blocks(&text) {
        let at = format!("docs/events.md:{}", b.line);
        match b.info.as_str() {
            "json config" => {
                let config = json(&b).to_json();
                store = Some(Store::open(&config).unwrap_or_else(|e| panic!("{at}: {e:?}")));
            }
            "json create" => {
                let options = json(&b);
                id = member(&options, "id")
                    .and_then(Value::as_str)
                    .expect("create options name the id")
                    .to_string();
                let st = store.as_ref().expect("a json config block comes first");
                session = Some(
                    st.create(&options.to_json())
                        .unwrap_or_else(|e| panic!("{at}: {e:?}")),
                );
            }
            "json event" => {
                let event = json(&b);
                let ty = member(&event, "type")
                    .and_then(Value::as_str)
                    .unwrap_or_else(|| panic!("{at}: no type"))
                    .to_string();
                if ty == "session/end-seed" {
                    // Written by an open: close the session and open it again.
                    let s = session.take().expect("a session");
                    let (st, text) = s.close();
                    assert_eq!(st, DSH_OK, "{at}: close: {text}");
                    let (s, opened) = store
                        .as_ref()
                        .expect("a store")
                        .open_session(&id)
                        .unwrap_or_else(|e| panic!("{at}: open: {e:?}"));
                    assert_eq!(
                        member(&opened, "repaired").map(Value::to_json).as_deref(),
                        Some("[]"),
                        "{at}: the open repaired something"
                    );
                    let events = s.events();
                    let last = events.as_array().and_then(|a| a.last()).expect("events");
                    assert_eq!(timeless(last), timeless(&event), "{at}: the open wrote");
                    session = Some(s);
                } else {
                    let data = member(&event, "data")
                        .unwrap_or_else(|| panic!("{at}: no data"))
                        .to_json();
                    let mut intent = Object::new();
                    for key in ["surfaceOp", "sourceEventSeqs", "ignorable"] {
                        if let Some(v) = member(&event, key) {
                            intent.insert_str(key, v.clone());
                        }
                    }
                    let intent = (!intent.is_empty()).then(|| Value::Object(intent).to_json());
                    let s = session.as_ref().expect("a json create block comes first");
                    let (st, out) = s.append(&ty, &data, intent.as_deref());
                    assert_eq!(st, DSH_OK, "{at}: append {ty}: {out}");
                    assert_eq!(
                        timeless(&parse(&out)),
                        timeless(&event),
                        "{at}: the library committed another event than the page shows"
                    );
                }
                appended.push(ty);
            }
            "json surface" | "json derived" | "json request-header" | "json request-context" => {
                let s = session.as_ref().expect("a session");
                let got = match b.info.as_str() {
                    "json surface" => read(s, dsh_session_surface),
                    "json derived" => read(s, dsh_session_derive),
                    "json request-header" => read(s, dsh_session_request_header),
                    _ => read(s, dsh_session_request_context),
                };
                assert_eq!(got.to_json(), json(&b).to_json(), "{at}: {}", b.info);
            }
            "text known-types" => {
                let listed: Vec<&str> = b.body.lines().map(str::trim).collect();
                assert_eq!(listed, KNOWN_EVENT_TYPES, "{at}: the known types");
            }
            other => {
                assert!(
                    !other.contains(' '),
                    "{at}: unknown example marker {other:?} (see crates/ffi-impl/tests/doc_events.rs)"
                );
                continue;
            }
        }
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} example blocks were checked");
    let core = core_types(&text);
    assert_eq!(core.len(), 13, "the core types table: {core:?}");
    for ty in &core {
        assert!(
            KNOWN_EVENT_TYPES.contains(&ty.as_str()),
            "{ty} is not a known type"
        );
        assert!(
            appended.contains(ty),
            "docs/events.md has no `json event` example of {ty}"
        );
    }
}

//! Host event types and strict admission through the C ABI: declared
//! types, ignorable records, the refusals with their rule ids, the store
//! configuration, and logs written before strict admission (read by
//! inspect and the CLI, opened once their type is declared).

mod support;

use ::dsh_session::json::Value;
use ::dsh_session_ffi::*;
use support::*;

const APPEND: Option<&str> = Some(r#"{"surfaceOp":"append"}"#);
const USER: &str =
    r#"{"id":"u1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}"#;

fn field<'a>(v: &'a Value, key: &str) -> &'a Value {
    v.as_object()
        .and_then(|o| o.get(key))
        .unwrap_or_else(|| panic!("no {key} in {}", v.to_json()))
}

fn len(s: &Session) -> usize {
    s.events().as_array().unwrap().len()
}

fn durable_configs(dir: &std::path::Path, extra: &str) -> Vec<String> {
    let path = |name: &str| Value::str(dir.join(name).to_str().unwrap()).to_json();
    vec![
        format!(r#"{{"backend":"jsonl","path":{}{extra}}}"#, path("zstd")),
        format!(
            r#"{{"backend":"jsonl","path":{},"compression":"none"{extra}}}"#,
            path("raw")
        ),
        format!(r#"{{"backend":"sqlite","path":{}{extra}}}"#, path("s.db")),
    ]
}

#[test]
fn an_undeclared_type_is_refused_with_its_rule_and_nothing_changes() {
    let store = Store::open("null").unwrap();
    let s = store.create(r#"{"id":"a"}"#).unwrap();
    assert_eq!(field(&s.info(), "admission"), &Value::str("strict"));
    let (st, text) = s.append("myapp/note", r#"{"x":1}"#, None);
    assert_eq!(
        (st, rule(&text).as_str()),
        (DSH_E_REJECTED, "admit.unknown-type")
    );
    assert!(
        text.contains("myapp/note") && text.contains("eventTypes"),
        "{text}"
    );
    assert_eq!(len(&s), 0);
    // The same append, validated, is refused the same way.
    let (ty, data) = (c("myapp/note"), c("{}"));
    // SAFETY: live handle, valid strings.
    let (st, text) = call(|out| unsafe {
        dsh_session_validate(s.0, ty.as_ptr(), data.as_ptr(), std::ptr::null(), out)
    });
    assert_eq!(
        (st, rule(&text).as_str()),
        (DSH_E_REJECTED, "admit.unknown-type")
    );
    // A batch is refused whole, naming the item.
    let batch = format!(
        r#"[{{"type":"user/message","data":{USER},"intent":{{"surfaceOp":"append"}}}},{{"type":"myapp/note","data":{{}}}}]"#
    );
    let (st, text) = s.batch(&batch);
    assert_eq!(
        (st, rule(&text).as_str()),
        (DSH_E_REJECTED, "admit.unknown-type")
    );
    assert_eq!(field(&parse(&text), "index"), &Value::num(1.0));
    assert_eq!(len(&s), 0);
    // A seed is refused at its index.
    let seed = r#"{"id":"b","seed":[{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}},{"type":"myapp/note","seq":1,"time":1,"data":{}}]}"#;
    let (st, text) = store.create(seed).err().unwrap();
    assert_eq!(
        (st, rule(&text).as_str()),
        (DSH_E_REJECTED, "admit.unknown-type")
    );
    assert_eq!(field(&parse(&text), "index"), &Value::num(1.0));
}

#[test]
fn malformed_messages_and_legacy_shapes_are_refused_with_their_rules() {
    let store = Store::open("null").unwrap();
    let s = store.create(r#"{"id":"m"}"#).unwrap();
    let cases: [(&str, &str, Option<&str>, &str); 7] = [
        (
            "user/message",
            r#"{"id":"u","role":"user","content":"hi","source":{"kind":"user"}}"#,
            APPEND,
            "msg.content",
        ),
        (
            "user/message",
            r#"{"role":"user","content":[],"source":{"kind":"user"}}"#,
            APPEND,
            "msg.unidentified",
        ),
        (
            "assistant/message",
            r#"{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[],"source":{"kind":"user"}}}"#,
            Some(r#"{"surfaceOp":"append","sourceEventSeqs":[]}"#),
            "msg.model-source",
        ),
        (
            "request/header",
            r#"{"header":{"config":{"provider":"p","model":""}},"reason":"initial"}"#,
            None,
            "seed.header-provider-model",
        ),
        (
            "turn/start",
            r#"{"turn":1,"trigger":{"kind":"user"}}"#,
            None,
            "admit.turn-shape",
        ),
        ("turn/start", "null", None, "admit.turn-shape"),
        ("mode/set", r#"{"mode":"plan"}"#, None, "admit.retired-type"),
    ];
    for (ty, data, intent, want) in cases {
        let (st, text) = s.append(ty, data, intent);
        assert_eq!(
            (st, rule(&text).as_str()),
            (DSH_E_REJECTED, want),
            "{ty} {data}"
        );
    }
    assert_eq!(len(&s), 0);
    // The same events in a reference-admission store are accepted, as the
    // reference accepts them.
    let reference = Store::open(r#"{"admission":"reference"}"#).unwrap();
    let r = reference.create(r#"{"id":"m"}"#).unwrap();
    assert_eq!(field(&r.info(), "admission"), &Value::str("reference"));
    for (ty, data, intent, _) in cases {
        let (st, text) = r.append(ty, data, intent);
        assert_eq!(st, DSH_OK, "{ty}: {text}");
    }
    // ... and, as the reference, it ignores an intent's `ignorable`.
    for intent in [r#"{"ignorable":true}"#, r#"{"ignorable":"yes"}"#] {
        let e = r.append_ok("turn/start", r#"{"turn":1}"#, Some(intent));
        assert!(
            e.as_object().unwrap().get("ignorable").is_none(),
            "{}",
            e.to_json()
        );
    }
}

#[test]
fn a_declared_type_is_accepted_and_reopened_on_every_backend() {
    let dir = temp_dir("host-declared");
    for config in durable_configs(&dir, r#","eventTypes":["myapp/note","myapp/tick"]"#) {
        let store = Store::open(&config).unwrap();
        let s = store.create(r#"{"id":"d"}"#).unwrap();
        let info = s.info();
        assert_eq!(
            field(&info, "eventTypes").to_json(),
            r#"["myapp/note","myapp/tick"]"#
        );
        s.append_ok("myapp/note", r#"{"x":1}"#, None);
        s.append_ok("user/message", USER, APPEND);
        // Declared types are log-only: no surface intent.
        let (st, text) = s.append("myapp/tick", "{}", APPEND);
        assert_eq!(st, DSH_E_REJECTED, "{text}");
        let before = s.events();
        drop(s);
        drop(store);
        let store = Store::open(&config).unwrap();
        let (s, _) = store.open_session("d").unwrap();
        let after = s.events();
        assert_eq!(
            after.as_array().unwrap()[..2],
            before.as_array().unwrap()[..]
        );
        assert_eq!(s.derive().as_array().unwrap().len(), 1);
    }
}

#[test]
fn an_ignorable_record_is_kept_by_a_store_that_does_not_know_its_type() {
    let dir = temp_dir("host-ignorable");
    for config in durable_configs(&dir, "") {
        let store = Store::open(&config).unwrap();
        let s = store.create(r#"{"id":"i"}"#).unwrap();
        let e = s.append_ok(
            "other/app-data",
            r#"{"b":1,"a":[2]}"#,
            Some(r#"{"ignorable":true}"#),
        );
        assert_eq!(field(&e, "ignorable"), &Value::Bool(true));
        // Refused on a core type, and only a boolean is taken.
        let (st, text) = s.append("turn/start", r#"{"turn":1}"#, Some(r#"{"ignorable":true}"#));
        assert_eq!(
            (st, rule(&text).as_str()),
            (DSH_E_REJECTED, "append.ignorable-known")
        );
        let (st, text) = s.append("other/app-data", "{}", Some(r#"{"ignorable":"yes"}"#));
        assert_eq!(
            (st, rule(&text).as_str()),
            (DSH_E_INVALID_ARGUMENT, "arg.ignorable")
        );
        let before = strip_time(s.events());
        drop(s);
        drop(store);
        let store = Store::open(&config).unwrap();
        let (s, _) = store.open_session("i").unwrap();
        let after = strip_time(s.events());
        let first = &after.as_array().unwrap()[0];
        assert_eq!(
            first.to_json(),
            r#"{"type":"other/app-data","seq":0,"data":{"b":1,"a":[2]},"ignorable":true}"#
        );
        assert_eq!(first, &before.as_array().unwrap()[0]);
    }
}

#[test]
fn the_store_configuration_checks_the_vocabulary_and_the_admission() {
    let cases = [
        (r#"{"eventTypes":["Bad"]}"#, "config.event-type"),
        (r#"{"eventTypes":["myapp"]}"#, "config.event-type"),
        (r#"{"eventTypes":"myapp/note"}"#, "config.event-type"),
        (
            r#"{"eventTypes":["user/message"]}"#,
            "config.event-type-reserved",
        ),
        (
            r#"{"eventTypes":["steering/message"]}"#,
            "config.event-type-reserved",
        ),
        (r#"{"admission":"loose"}"#, "config.invalid"),
    ];
    for (config, want) in cases {
        let (st, text) = Store::open(config).err().unwrap();
        assert_eq!(
            (st, rule(&text).as_str()),
            (DSH_E_INVALID_ARGUMENT, want),
            "{config}"
        );
    }
}

#[test]
fn an_unknown_type_marked_ignorable_false_is_an_unsupported_format() {
    let (_dir, config) = raw_jsonl_store(
        "host-ignorable-false",
        "f",
        &[r#"{"type":"plugin/x","seq":0,"time":1,"data":{},"ignorable":false}"#],
    );
    let store = Store::open(&config).unwrap();
    let (st, text) = store.open_session("f").err().unwrap();
    assert_eq!(
        (st, rule(&text).as_str()),
        (DSH_E_SCHEMA_MISMATCH, "load.unknown-type")
    );
}

/// A log written under the reference's admission (as every log was before
/// strict admission): an undeclared type at seq 1, a user message whose
/// content is a string at seq 2.
fn pre_strict_log(config_members: &str) -> Store {
    let store = Store::open(&format!(r#"{{"admission":"reference",{config_members}}}"#)).unwrap();
    let s = store.create(r#"{"id":"old"}"#).unwrap();
    s.append_ok("user/message", USER, APPEND);
    s.append_ok("myapp/note", r#"{"x":1}"#, None);
    s.append_ok(
        "user/message",
        r#"{"id":"u2","role":"user","content":"hi","source":{"kind":"user"}}"#,
        APPEND,
    );
    drop(s);
    let t = store.create(r#"{"id":"typed"}"#).unwrap();
    t.append_ok("myapp/note", r#"{"x":2}"#, None);
    t.append_ok("user/message", USER, APPEND);
    drop(t);
    store
}

#[test]
fn a_log_written_before_strict_admission_is_read_by_inspect_and_opened_once_declared() {
    let dir = temp_dir("host-pre-strict");
    for (k, config) in durable_configs(&dir, "").into_iter().enumerate() {
        let members = &config[1..config.len() - 1];
        drop(pre_strict_log(members));
        let store = Store::open(&config).unwrap();
        // The reference's order: the message rules (seq 2) come before the
        // vocabulary (seq 1).
        let (st, text) = store.open_session("old").err().unwrap();
        assert_eq!(
            (st, rule(&text).as_str()),
            (DSH_E_CORRUPT, "load.validation"),
            "{text}"
        );
        assert!(
            text.contains("msg.content") || text.contains("invalid content"),
            "{text}"
        );
        let id = c("old");
        // SAFETY: live handle, valid string.
        let (st, text) = call(|out| unsafe { dsh_store_inspect(store.0, id.as_ptr(), out) });
        assert_eq!(st, DSH_OK, "{text}");
        let inspected = parse(&text);
        assert_eq!(field(&inspected, "events").as_array().unwrap().len(), 3);
        let problems: Vec<(f64, String)> = field(&inspected, "problems")
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let seq = field(p, "seq").as_f64().unwrap();
                (seq, field(p, "rule").as_str().unwrap().to_string())
            })
            .collect();
        assert_eq!(
            problems,
            vec![
                (1.0, "load.unknown-type".to_string()),
                (2.0, "msg.content".to_string())
            ],
            "backend {k}"
        );
        // Nothing was rewritten: the log still refuses, with the type
        // declared too (its malformed message stays).
        drop(store);
        let declared = format!(r#"{{"eventTypes":["myapp/note"],{members}}}"#);
        let store = Store::open(&declared).unwrap();
        let (st, text) = store.open_session("old").err().unwrap();
        assert_eq!(
            (st, rule(&text).as_str()),
            (DSH_E_CORRUPT, "load.validation"),
            "{text}"
        );
        // The log whose only problem is its type opens once it is declared.
        let (s, _) = store.open_session("typed").unwrap();
        assert_eq!(len(&s), 3);
        drop(s);
        drop(store);
        let store = Store::open(&config).unwrap();
        assert_eq!(
            store.open_session("typed").err().unwrap().0,
            DSH_E_SCHEMA_MISMATCH
        );
    }
}

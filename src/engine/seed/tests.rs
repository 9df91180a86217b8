//! The text checks of `msg.*` and the request header against the tree
//! checks they stand in for.
use super::message::{message_of, message_text_check, message_text_ok};
use super::*;
use crate::json::{parse, JsString};
use crate::test_rng::Rng;

const USER: &str = r#"{"id":"u-1","role":"user","content":[{"type":"text","text":"hi \"there\"\n"}],"source":{"kind":"user"}}"#;
const ASSISTANT: &str = r#"{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"tool-call","id":"c","name":"n","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"},"id":"a-1"},"usage":{"inputTokens":1}}"#;
const TOOL: &str = r#"{"turn":1,"step":1,"message":{"source":{"kind":"tool","callId":"call-1"},"content":[{"type":"tool-result","toolCallId":"call-1","content":[{"type":"text","text":"out\\put ]}\""}]}],"role":"user","id":"r-1"},"meta":{"bytes":1}}"#;
const HEADER: &str = r#"{"header":{"config":{"provider":"deepseek","model":"m","reasoningEffort":"high","maxTokens":8},"system":"s","tools":[{"name":"t"}],"adapterDefaults":{"reasoningEffort":true,"maxTokens":true}},"reason":"initial"}"#;

/// A small replacement value.
fn small(r: &mut Rng) -> Value {
    match r.below(9) {
        0 => Value::str(""),
        1 => {
            let words: [&str; 7] = [
                "x",
                "user",
                "assistant",
                "tool",
                "model",
                "call-1",
                "tool-result",
            ];
            let word: &&str = r.pick(&words);
            Value::str(word)
        }
        2 => Value::Number(1.0),
        3 => Value::Bool(true),
        4 => Value::Bool(false),
        5 => Value::Null,
        6 => Value::Array(vec![]),
        7 => parse(r#"[{"type":"tool-result","toolCallId":"call-1","content":[]}]"#).unwrap(),
        _ => Value::obj([]),
    }
}

/// One random edit somewhere in `v`: remove, replace, rename, reorder or add.
fn mutate(r: &mut Rng, v: &mut Value) {
    // Descend to a random container.
    let mut node = v;
    loop {
        let go = r.below(3) > 0;
        let next = match node {
            Value::Object(o) if go && !o.is_empty() => {
                let k = o.keys().nth(r.below(o.len())).unwrap().clone();
                o.get_js(&k)
                    .is_some_and(|c| c.is_object() || c.is_array())
                    .then_some(k)
            }
            _ => None,
        };
        match next {
            Some(k) => node = node.as_object_mut().unwrap().get_js_mut(&k).unwrap(),
            None => break,
        }
    }
    match node {
        Value::Object(o) => {
            let mut entries: Vec<(JsString, Value)> =
                o.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            match r.below(5) {
                0 if !entries.is_empty() => {
                    entries.remove(r.below(entries.len()));
                }
                1 if !entries.is_empty() => {
                    let i = r.below(entries.len());
                    entries[i].1 = small(r);
                }
                2 if !entries.is_empty() => {
                    let i = r.below(entries.len());
                    let k = *r.pick(&[
                        "id",
                        "role",
                        "kind",
                        "content",
                        "type",
                        "callId",
                        "toolCallId",
                        "model",
                        "provider",
                        "maxTokens",
                        "reasoningEffort",
                        "zz",
                    ]);
                    if !entries.iter().any(|(e, _)| *e == k) {
                        entries[i].0 = JsString::from(k);
                    }
                }
                3 => {
                    for i in (1..entries.len()).rev() {
                        entries.swap(i, r.below(i + 1));
                    }
                }
                _ => {
                    let k = *r.pick(&[
                        "adapterDefaults",
                        "extra",
                        "content",
                        "callId",
                        "reasoningEffort",
                    ]);
                    if !entries.iter().any(|(e, _)| *e == k) {
                        entries.push((JsString::from(k), small(r)));
                    }
                }
            }
            *o = Object::from_entries(entries);
        }
        Value::Array(a) => match r.below(3) {
            0 if !a.is_empty() => {
                a.remove(r.below(a.len()));
            }
            1 => a.push(small(r)),
            _ => a.insert(0, small(r)),
        },
        _ => {}
    }
}

fn tree_message_ok(data: &Value, kind: MessageKind) -> bool {
    let message = match kind {
        MessageKind::User => Some(data),
        _ => message_of(data),
    };
    check_message(message, kind, &String::new).is_ok()
}

#[test]
fn text_checks_pass_the_templates() {
    assert_eq!(message_text_check(USER, MessageKind::User), Some(true));
    assert_eq!(
        message_text_check(ASSISTANT, MessageKind::Assistant),
        Some(true)
    );
    assert_eq!(
        message_text_check(TOOL, MessageKind::ToolResult),
        Some(true)
    );
    assert_eq!(request_header_text_check(HEADER), Some(true));
    for (t, kind) in [
        (USER, MessageKind::User),
        (ASSISTANT, MessageKind::Assistant),
        (TOOL, MessageKind::ToolResult),
    ] {
        assert!(tree_message_ok(&parse(t).unwrap(), kind));
    }
    assert!(check_request_header(&parse(HEADER).unwrap(), &String::new).is_ok());
}

/// A text check that says "passes" is never wrong, over random edits of
/// valid messages and headers; and it decides most passing ones itself.
#[test]
fn text_checks_never_pass_what_the_tree_check_refuses() {
    let mut r = Rng(0x5eed_1234);
    let (mut fast, mut passing) = (0, 0);
    for round in 0..6000 {
        let (template, kind) = *r.pick(&[
            (USER, Some(MessageKind::User)),
            (ASSISTANT, Some(MessageKind::Assistant)),
            (TOOL, Some(MessageKind::ToolResult)),
            (HEADER, None),
        ]);
        let mut v = parse(template).unwrap();
        for _ in 0..round % 3 {
            mutate(&mut r, &mut v);
        }
        let text = v.to_json();
        let (text_ok, tree_ok) = match kind {
            Some(kind) => (message_text_ok(&text, kind), tree_message_ok(&v, kind)),
            None => (
                request_header_text_ok(&text),
                check_request_header(&v, &String::new).is_ok(),
            ),
        };
        assert!(!text_ok || tree_ok, "{text}");
        passing += usize::from(tree_ok);
        fast += usize::from(text_ok);
    }
    assert!(fast * 10 >= passing * 9, "{fast} of {passing}");
}

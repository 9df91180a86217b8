//! Request header and request context folds (docs/events.md §10.1, §10.2) and the
//! token usage fold (§10.4).

use super::event::{Event, ASSISTANT_MESSAGE, REQUEST_CONTEXT, REQUEST_HEADER};
use crate::json::{Object, Value};

/// The reference's `value.length > 0` test of a header's `system` and
/// `tools`: a non-empty string or array, or an object whose `length`
/// member compares greater than zero; numbers, booleans and `null` have no
/// length.
fn has_positive_length(v: &Value) -> bool {
    match v {
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => o.get("length").is_some_and(greater_than_zero),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

/// JavaScript's `v > 0` for a JSON value (abstract relational comparison:
/// the value becomes a primitive, then a number).
fn greater_than_zero(v: &Value) -> bool {
    match v {
        Value::Number(n) => *n > 0.0,
        Value::Bool(b) => *b,
        Value::Null => false,
        Value::String(s) => string_positive(&s.to_string_lossy()),
        Value::Array(_) => string_positive(&to_js_string(v)),
        Value::Object(_) => false,
    }
}

/// `String(v)` of a JSON value (arrays join their elements with `,`,
/// `null` elements become empty, objects `[object Object]`).
fn to_js_string(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(_) => v.to_json(),
        Value::String(s) => s.to_string_lossy(),
        Value::Object(_) => "[object Object]".to_string(),
        Value::Array(a) => a
            .iter()
            .map(|e| match e {
                Value::Null => String::new(),
                other => to_js_string(other),
            })
            .collect::<Vec<_>>()
            .join(","),
    }
}

/// Whether `Number(text) > 0` in JavaScript (`StringToNumber`: trimmed,
/// empty is 0, decimal with optional sign and exponent, `Infinity`,
/// unsigned `0x`/`0o`/`0b` integers; anything else is NaN).
fn string_positive(text: &str) -> bool {
    const JS_SPACE: &[char] = &[
        '\u{9}', '\u{a}', '\u{b}', '\u{c}', '\u{d}', ' ', '\u{a0}', '\u{1680}', '\u{2028}',
        '\u{2029}', '\u{202f}', '\u{205f}', '\u{3000}', '\u{feff}',
    ];
    let is_space = |c: char| JS_SPACE.contains(&c) || ('\u{2000}'..='\u{200a}').contains(&c);
    let t = text.trim_matches(is_space);
    for (prefix, radix) in [
        ("0x", 16),
        ("0X", 16),
        ("0o", 8),
        ("0O", 8),
        ("0b", 2),
        ("0B", 2),
    ] {
        if let Some(digits) = t.strip_prefix(prefix) {
            let valid = !digits.is_empty() && digits.chars().all(|c| c.is_digit(radix));
            return valid && digits.chars().any(|c| c != '0');
        }
    }
    let (negative, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if body == "Infinity" {
        return !negative;
    }
    // StrUnsignedDecimalLiteral: digits, an optional fraction, at least one
    // digit in all, then an optional exponent.
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    if !digits(int) || !digits(frac) || int.len() + frac.len() == 0 || !exponent_ok {
        return false;
    }
    !negative && body.parse::<f64>().is_ok_and(|n| n > 0.0)
}

/// `canonicalHeader` (docs/events.md §10.1): `config` as is, `adapterDefaults`
/// only when a marker is `true`, `system` and `tools` only when their
/// `length` is greater than zero.
/// A header that is not an object has no canonical form (`None`).
pub fn canonical_header(header: &Value) -> Option<Value> {
    let h = header.as_object()?;
    let mut out = Object::new();
    if let Some(config) = h.get("config") {
        out.insert_str("config", config.clone());
    }
    if let Some(ad) = h.get("adapterDefaults") {
        let marked = ad.as_object().is_some_and(|o| {
            o.get("reasoningEffort") == Some(&Value::Bool(true))
                || o.get("maxTokens") == Some(&Value::Bool(true))
        });
        if marked {
            out.insert_str("adapterDefaults", ad.clone());
        }
    }
    for key in ["system", "tools"] {
        if let Some(v) = h.get(key).filter(|v| has_positive_length(v)) {
            out.insert_str(key, v.clone());
        }
    }
    Some(Value::Object(out))
}

/// An incremental fold over a growing log: each event is looked at once.
#[derive(Debug, Default, Clone)]
pub struct RequestFolds {
    folded: usize,
    header: Option<Value>,
    context: Option<Value>,
}

impl RequestFolds {
    /// Fold the next event of the log (the one at index [`Self::folded`]).
    pub fn fold(&mut self, e: &Event) {
        self.fold_one(e);
        self.folded += 1;
    }

    fn fold_one(&mut self, e: &Event) {
        if e.ty == REQUEST_HEADER {
            self.header = e
                .parse_data()
                .as_object()
                .and_then(|d| d.get("header"))
                .and_then(canonical_header);
        } else if e.ty == REQUEST_CONTEXT {
            self.context = Some(e.parse_data());
        }
    }

    /// The number of events folded so far.
    pub fn folded(&self) -> usize {
        self.folded
    }

    /// The canonical request header in force, if any.
    pub fn header(&self) -> Option<&Value> {
        self.header.as_ref()
    }

    /// The data of the latest `request/context`, if any.
    pub fn context(&self) -> Option<&Value> {
        self.context.as_ref()
    }
}

/// Token totals (docs/events.md §10.4): `[uncachedInput, output, cacheRead, cacheWrite]`.
pub fn token_usage<'a>(log: impl IntoIterator<Item = &'a Event>) -> [f64; 4] {
    let mut usage = TokenUsage::default();
    for e in log {
        usage.add(e);
    }
    usage.totals()
}

/// [`token_usage`] kept event by event, for a log read a batch at a time.
#[derive(Debug, Clone, Default)]
pub struct TokenUsage {
    totals: [f64; 4],
    /// The turn, step and buckets of the last usage sample.
    last: Option<(Value, Value, [f64; 4])>,
}

impl TokenUsage {
    /// Count the next event of the log.
    pub fn add(&mut self, e: &Event) {
        if e.ty != "assistant/chunk" && e.ty != ASSISTANT_MESSAGE {
            return;
        }
        let data = e.parse_data();
        let Some(data) = data.as_object() else {
            return;
        };
        let sample = if e.ty == "assistant/chunk" {
            data.get("chunk")
                .and_then(Value::as_object)
                .filter(|c| c.get("type").and_then(Value::as_str) == Some("usage"))
                .and_then(|c| c.get("usage"))
        } else {
            data.get("usage")
        };
        let Some(usage) = sample.and_then(Value::as_object) else {
            return;
        };
        let n = |k: &str| usage.get(k).and_then(Value::as_f64).unwrap_or(0.0);
        let buckets = [
            n("inputTokens"),
            n("outputTokens"),
            n("cacheReadTokens"),
            n("cacheWriteTokens"),
        ];
        let turn = data.get("turn").cloned().unwrap_or(Value::Null);
        let step = data.get("step").cloned().unwrap_or(Value::Null);
        match &self.last {
            Some((t, s, prev)) if *t == turn && *s == step => {
                if *prev != buckets {
                    for i in 0..4 {
                        self.totals[i] += buckets[i] - prev[i];
                    }
                    self.last = Some((turn, step, buckets));
                }
            }
            _ => {
                for (total, b) in self.totals.iter_mut().zip(buckets) {
                    *total += b;
                }
                self.last = Some((turn, step, buckets));
            }
        }
    }

    /// The totals so far: `[uncachedInput, output, cacheRead, cacheWrite]`.
    pub fn totals(&self) -> [f64; 4] {
        self.totals
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    /// Counted event by event, in any cut of the log, the totals are the
    /// whole log's: a step's samples replace each other across a cut too.
    #[test]
    fn token_usage_kept_event_by_event_is_the_whole_logs() {
        let texts = [
            r#"{"type":"assistant/chunk","seq":0,"time":1,"data":{"turn":1,"step":1,"chunk":{"type":"usage","usage":{"inputTokens":10,"outputTokens":1}}}}"#,
            r#"{"type":"assistant/chunk","seq":1,"time":1,"data":{"turn":1,"step":1,"chunk":{"type":"usage","usage":{"inputTokens":10,"outputTokens":5}}}}"#,
            r#"{"type":"assistant/message","seq":2,"time":1,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[],"id":"a"},"usage":{"inputTokens":10,"outputTokens":7,"cacheReadTokens":3}}}"#,
            r#"{"type":"assistant/message","seq":3,"time":1,"data":{"turn":1,"step":2,"message":{"role":"assistant","content":[],"id":"b"},"usage":{"inputTokens":4,"outputTokens":2}}}"#,
        ];
        let log: Vec<Event> = texts
            .iter()
            .map(|t| Event::from_envelope(parse(t).unwrap(), "test").unwrap())
            .collect();
        let whole = token_usage(&log);
        assert_eq!(whole, [14.0, 9.0, 3.0, 0.0]);
        for cut in 0..=log.len() {
            let mut usage = TokenUsage::default();
            log[..cut].iter().for_each(|e| usage.add(e));
            let first = usage.clone();
            log[cut..].iter().for_each(|e| usage.add(e));
            assert_eq!(usage.totals(), whole, "cut at {cut}");
            assert_eq!(first.totals(), token_usage(&log[..cut]));
        }
    }

    /// Which of `system` / `tools` the canonical header keeps for `value`.
    fn kept(value: &str) -> bool {
        let h = parse(&format!(
            r#"{{"config":{{}},"system":{value},"tools":{value}}}"#
        ))
        .unwrap();
        let c = canonical_header(&h).unwrap();
        let o = c.as_object().unwrap();
        assert_eq!(o.contains_key("system"), o.contains_key("tools"), "{value}");
        o.contains_key("system")
    }

    #[test]
    fn system_and_tools_are_kept_only_when_their_length_is_above_zero() {
        for v in [
            r#""s""#,
            r#"[0]"#,
            r#"[[]]"#,
            r#"{"length":1}"#,
            r#"{"length":"2"}"#,
            r#"{"length":" 0x1 "}"#,
            r#"{"length":true}"#,
            r#"{"length":[3]}"#,
            r#"{"length":"Infinity"}"#,
            r#"{"length":"1e-3"}"#,
            r#"{"length":".5"}"#,
        ] {
            assert!(kept(v), "{v} is kept");
        }
        for v in [
            r#""""#,
            "[]",
            "{}",
            "0",
            "1",
            "true",
            "false",
            "null",
            r#"{"length":0}"#,
            r#"{"length":-1}"#,
            r#"{"length":"abc"}"#,
            r#"{"length":""}"#,
            r#"{"length":"-Infinity"}"#,
            r#"{"length":"0x"}"#,
            r#"{"length":"-0x1"}"#,
            r#"{"length":"1e"}"#,
            r#"{"length":"."}"#,
            r#"{"length":"infinity"}"#,
            r#"{"length":null}"#,
            r#"{"length":false}"#,
            r#"{"length":[1,2]}"#,
            r#"{"length":[]}"#,
            r#"{"length":{}}"#,
        ] {
            assert!(!kept(v), "{v} is dropped");
        }
    }
}

//! Request header and request context folds (derive.md §4, §5) and the
//! token usage fold (§7).

use super::event::{Event, ASSISTANT_MESSAGE, REQUEST_CONTEXT, REQUEST_HEADER};
use crate::json::{Object, Value};

/// JavaScript truthiness, for the reference's `x ? … : …` tests.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => *n != 0.0 && !n.is_nan(),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// `canonicalHeader` (derive.md §4.1): `config` as is, `adapterDefaults`
/// only when a marker is `true`, `system` and `tools` only when non-empty.
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
    if let Some(system) = h.get("system") {
        if truthy(system) {
            out.insert_str("system", system.clone());
        }
    }
    if let Some(tools) = h.get("tools") {
        let non_empty = match tools {
            Value::Array(a) => !a.is_empty(),
            other => truthy(other),
        };
        if non_empty {
            out.insert_str("tools", tools.clone());
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

/// Token totals (derive.md §7): `[uncachedInput, output, cacheRead, cacheWrite]`.
pub fn token_usage<'a>(log: impl IntoIterator<Item = &'a Event>) -> [f64; 4] {
    let mut totals = [0.0f64; 4];
    let mut last: Option<(Value, Value, [f64; 4])> = None;
    for e in log {
        if e.ty != "assistant/chunk" && e.ty != ASSISTANT_MESSAGE {
            continue;
        }
        let data = e.parse_data();
        let Some(data) = data.as_object() else {
            continue;
        };
        let sample = if e.ty == "assistant/chunk" {
            data.get("chunk")
                .and_then(Value::as_object)
                .filter(|c| c.get("type").and_then(Value::as_str) == Some("usage"))
                .and_then(|c| c.get("usage"))
        } else if e.ty == ASSISTANT_MESSAGE {
            data.get("usage")
        } else {
            None
        };
        let Some(usage) = sample.and_then(Value::as_object) else {
            continue;
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
        match &last {
            Some((t, s, prev)) if *t == turn && *s == step => {
                if *prev != buckets {
                    for i in 0..4 {
                        totals[i] += buckets[i] - prev[i];
                    }
                    last = Some((turn, step, buckets));
                }
            }
            _ => {
                for i in 0..4 {
                    totals[i] += buckets[i];
                }
                last = Some((turn, step, buckets));
            }
        }
    }
    totals
}

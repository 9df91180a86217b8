//! [`Value`], with the iterative drop, clone, equality and lossless walk.

use std::fmt;
use std::mem;

use super::write;

pub use super::object::Object;
pub use super::string::JsString;

/// A JSON value with JavaScript semantics.
///
/// `Value` implements `Drop` (iteratively, so deep nesting cannot overflow the
/// stack); therefore fields cannot be moved out by pattern matching on an
/// owned `Value`. Use [`take`](Value::take), [`into_object`](Value::into_object),
/// [`into_array`](Value::into_array) or [`into_js_string`](Value::into_js_string).
#[derive(Default)]
pub enum Value {
    /// `null`.
    #[default]
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number: any IEEE-754 double (non-finite values serialize as `null`).
    Number(f64),
    /// A string of UTF-16 code units.
    String(JsString),
    /// An array.
    Array(Vec<Value>),
    /// An object in JavaScript property order.
    Object(Object),
}

const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

impl Value {
    /// The object, if this is one.
    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The object, mutable, if this is one.
    pub fn as_object_mut(&mut self) -> Option<&mut Object> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The array, if this is one.
    pub fn as_array(&self) -> Option<&Vec<Value>> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The array, mutable, if this is one.
    pub fn as_array_mut(&mut self) -> Option<&mut Vec<Value>> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The string (which may hold unpaired surrogates), if this is one.
    pub fn as_js_str(&self) -> Option<&JsString> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// A string value without unpaired surrogates.
    pub fn as_str(&self) -> Option<&str> {
        self.as_js_str()?.as_str()
    }

    /// The number, if this is one.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::Number(n) => Some(n),
            _ => None,
        }
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// True for `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// True for an object.
    pub fn is_object(&self) -> bool {
        matches!(self, Value::Object(_))
    }

    /// True for an array.
    pub fn is_array(&self) -> bool {
        matches!(self, Value::Array(_))
    }

    /// True for a string.
    pub fn is_string(&self) -> bool {
        matches!(self, Value::String(_))
    }

    /// True for a number.
    pub fn is_number(&self) -> bool {
        matches!(self, Value::Number(_))
    }

    /// JavaScript `typeof`-style name: `null`, `boolean`, `number`, `string`,
    /// `array`, `object`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        }
    }

    /// `Some(n)` for a Number that is an integer with `0 <= n <= 2^53-1`
    /// (`-0` counts as 0).
    pub fn as_safe_u64(&self) -> Option<u64> {
        match *self {
            Value::Number(n) if n.trunc() == n && (0.0..=MAX_SAFE).contains(&n) => Some(n as u64),
            _ => None,
        }
    }

    /// `Some(n)` for a Number that is an integer with `|n| <= 2^53-1`.
    pub fn as_safe_i64(&self) -> Option<i64> {
        match *self {
            Value::Number(n) if n.trunc() == n && n.abs() <= MAX_SAFE => Some(n as i64),
            _ => None,
        }
    }

    /// `JSON.stringify` of this value.
    pub fn to_json(&self) -> String {
        let mut out = String::new();
        self.write_json(&mut out);
        out
    }

    /// Appends `JSON.stringify` of this value to `out`.
    pub fn write_json(&self, out: &mut String) {
        write::write_value(self, out, usize::MAX);
    }

    /// True when every number inside is finite and not negative zero.
    pub fn is_lossless(&self) -> bool {
        fn ok(n: f64) -> bool {
            n.is_finite() && !(n == 0.0 && n.is_sign_negative())
        }
        let mut work: Vec<&Value> = Vec::new();
        let mut cur = self;
        loop {
            match cur {
                Value::Number(n) if !ok(*n) => return false,
                Value::Array(a) => {
                    for v in a {
                        match v {
                            Value::Number(n) if !ok(*n) => return false,
                            Value::Array(_) | Value::Object(_) => work.push(v),
                            _ => {}
                        }
                    }
                }
                Value::Object(o) => {
                    for v in o.values() {
                        match v {
                            Value::Number(n) if !ok(*n) => return false,
                            Value::Array(_) | Value::Object(_) => work.push(v),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
            match work.pop() {
                Some(v) => cur = v,
                None => return true,
            }
        }
    }

    /// Replaces `self` by `Null` and returns the old value.
    pub fn take(&mut self) -> Value {
        mem::replace(self, Value::Null)
    }

    /// The object, or `Err(self)` for any other value.
    pub fn into_object(mut self) -> Result<Object, Value> {
        match &mut self {
            Value::Object(o) => Ok(mem::take(o)),
            _ => Err(self),
        }
    }

    /// The array, or `Err(self)` for any other value.
    pub fn into_array(mut self) -> Result<Vec<Value>, Value> {
        match &mut self {
            Value::Array(a) => Ok(mem::take(a)),
            _ => Err(self),
        }
    }

    /// The string, or `Err(self)` for any other value.
    pub fn into_js_string(mut self) -> Result<JsString, Value> {
        match &mut self {
            Value::String(s) => Ok(mem::take(s)),
            _ => Err(self),
        }
    }

    /// A string value holding `s`.
    pub fn str(s: &str) -> Value {
        Value::String(JsString::from_str(s))
    }

    /// A number value.
    pub fn num(n: f64) -> Value {
        Value::Number(n)
    }

    /// An object built by inserting `entries` in order (JavaScript property
    /// assignment: index keys sorted first, duplicates keep the first position).
    pub fn obj<'a>(entries: impl IntoIterator<Item = (&'a str, Value)>) -> Value {
        let mut o = Object::new();
        for (k, v) in entries {
            o.insert_str(k, v);
        }
        Value::Object(o)
    }

    /// True for a non-empty array or object.
    #[inline]
    fn has_children(&self) -> bool {
        match self {
            Value::Array(a) => !a.is_empty(),
            Value::Object(o) => !o.is_empty(),
            _ => false,
        }
    }
}

impl Drop for Value {
    fn drop(&mut self) {
        // Only nested containers need the work list; leaves drop normally.
        let deep = match self {
            Value::Array(a) => a.iter().any(Value::has_children),
            Value::Object(o) => o.values().any(Value::has_children),
            _ => false,
        };
        if !deep {
            return;
        }
        let mut work: Vec<Value> = Vec::new();
        let mut cur = self.take();
        loop {
            match &mut cur {
                Value::Array(a) => work.extend(a.drain(..).filter(Value::has_children)),
                Value::Object(o) => work.extend(o.take_values().filter(Value::has_children)),
                _ => {}
            }
            // `cur` now has no nested children: dropping it does not recurse.
            match work.pop() {
                Some(v) => cur = v,
                None => return,
            }
        }
    }
}

enum CloneFrame<'a> {
    Array(std::slice::Iter<'a, Value>, Vec<Value>),
    Object(
        &'a Object,
        std::slice::Iter<'a, (JsString, Value)>,
        Vec<(JsString, Value)>,
    ),
}

impl<'a> CloneFrame<'a> {
    /// Pushes a frame for a non-empty container; returns the clone of anything else.
    fn open(v: &'a Value, stack: &mut Vec<CloneFrame<'a>>) -> Option<Value> {
        match v {
            Value::Null => Some(Value::Null),
            Value::Bool(b) => Some(Value::Bool(*b)),
            Value::Number(n) => Some(Value::Number(*n)),
            Value::String(s) => Some(Value::String(s.clone())),
            Value::Array(a) if a.is_empty() => Some(Value::Array(Vec::new())),
            Value::Object(o) if o.is_empty() => Some(Value::Object(Object::new())),
            Value::Array(a) => {
                stack.push(CloneFrame::Array(a.iter(), Vec::with_capacity(a.len())));
                None
            }
            Value::Object(o) => {
                let it = o.as_slice().iter();
                stack.push(CloneFrame::Object(o, it, Vec::with_capacity(o.len())));
                None
            }
        }
    }

    fn attach(&mut self, v: Value) {
        match self {
            CloneFrame::Array(_, out) => out.push(v),
            CloneFrame::Object(_, _, out) => {
                if let Some(last) = out.last_mut() {
                    last.1 = v;
                }
            }
        }
    }
}

impl Clone for Value {
    fn clone(&self) -> Value {
        let mut stack: Vec<CloneFrame<'_>> = Vec::new();
        if let Some(v) = CloneFrame::open(self, &mut stack) {
            return v;
        }
        loop {
            let Some(top) = stack.last_mut() else {
                return Value::Null; // unreachable: the root frame returns below
            };
            let child = match top {
                CloneFrame::Array(it, _) => it.next(),
                CloneFrame::Object(_, it, out) => it.next().map(|(k, v)| {
                    out.push((k.clone(), Value::Null));
                    v
                }),
            };
            match child {
                Some(c) => {
                    if let Some(leaf) = CloneFrame::open(c, &mut stack) {
                        top_attach(&mut stack, leaf);
                    }
                }
                None => {
                    let done = match stack.pop() {
                        Some(CloneFrame::Array(_, out)) => Value::Array(out),
                        Some(CloneFrame::Object(src, _, out)) => {
                            Value::Object(src.clone_with_entries(out))
                        }
                        None => Value::Null,
                    };
                    if stack.is_empty() {
                        return done;
                    }
                    top_attach(&mut stack, done);
                }
            }
        }
    }
}

fn top_attach(stack: &mut [CloneFrame<'_>], v: Value) {
    if let Some(top) = stack.last_mut() {
        top.attach(v);
    }
}

/// Iterative JSON equality; object key order is ignored.
pub(super) fn json_eq<'a>(mut work: Vec<(&'a Value, &'a Value)>) -> bool {
    while let Some((a, b)) = work.pop() {
        match (a, b) {
            (Value::Null, Value::Null) => {}
            (Value::Bool(x), Value::Bool(y)) if x == y => {}
            (Value::Number(x), Value::Number(y)) if x == y => {}
            (Value::String(x), Value::String(y)) if x == y => {}
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                work.extend(x.iter().zip(y.iter()));
            }
            (Value::Object(x), Value::Object(y)) => {
                if !x.push_value_pairs(y, &mut work) {
                    return false;
                }
            }
            _ => return false,
        }
    }
    true
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        json_eq(vec![(self, other)])
    }
}

/// Debug shows the JSON text, truncated after a few hundred bytes.
impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        let complete = write::write_value(self, &mut out, write::DEBUG_LIMIT);
        write::finish_debug(&mut out, complete);
        f.write_str(&out)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::str(s)
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(JsString::from(s))
    }
}

impl From<JsString> for Value {
    fn from(s: JsString) -> Value {
        Value::String(s)
    }
}

impl From<f64> for Value {
    fn from(n: f64) -> Value {
        Value::Number(n)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

impl From<u64> for Value {
    /// Rounds to the nearest double above 2^53, like JavaScript `Number(n)`.
    fn from(n: u64) -> Value {
        Value::Number(n as f64)
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Value {
        Value::Number(n as f64)
    }
}

impl From<u32> for Value {
    fn from(n: u32) -> Value {
        Value::Number(f64::from(n))
    }
}

impl From<i32> for Value {
    fn from(n: i32) -> Value {
        Value::Number(f64::from(n))
    }
}

impl From<usize> for Value {
    fn from(n: usize) -> Value {
        Value::Number(n as f64)
    }
}

impl From<Vec<Value>> for Value {
    fn from(a: Vec<Value>) -> Value {
        Value::Array(a)
    }
}

impl From<Object> for Value {
    fn from(o: Object) -> Value {
        Value::Object(o)
    }
}

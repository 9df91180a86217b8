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
    #[default]
    Null,
    Bool(bool),
    Number(f64),
    String(JsString),
    Array(Vec<Value>),
    Object(Object),
}

const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

impl Value {
    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    pub fn as_object_mut(&mut self) -> Option<&mut Object> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&Vec<Value>> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_array_mut(&mut self) -> Option<&mut Vec<Value>> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

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

    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::Number(n) => Some(n),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    pub fn is_object(&self) -> bool {
        matches!(self, Value::Object(_))
    }

    pub fn is_array(&self) -> bool {
        matches!(self, Value::Array(_))
    }

    pub fn is_string(&self) -> bool {
        matches!(self, Value::String(_))
    }

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

    pub fn str(s: &str) -> Value {
        Value::String(JsString::from_str(s))
    }

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

#[cfg(test)]
mod tests {
    use super::super::parse::parse;
    use super::*;

    #[test]
    fn safe_integers() {
        let n = |x: f64| Value::Number(x);
        assert_eq!(n(0.0).as_safe_u64(), Some(0));
        assert_eq!(n(-0.0).as_safe_u64(), Some(0));
        assert_eq!(
            n(9_007_199_254_740_991.0).as_safe_u64(),
            Some(9_007_199_254_740_991)
        );
        assert_eq!(n(9_007_199_254_740_992.0).as_safe_u64(), None);
        assert_eq!(n(0.5).as_safe_u64(), None);
        assert_eq!(n(-1.0).as_safe_u64(), None);
        assert_eq!(n(f64::INFINITY).as_safe_u64(), None);
        assert_eq!(n(f64::NAN).as_safe_u64(), None);
        assert_eq!(Value::str("1").as_safe_u64(), None);
        assert_eq!(
            n(-9_007_199_254_740_991.0).as_safe_i64(),
            Some(-9_007_199_254_740_991)
        );
        assert_eq!(n(-9_007_199_254_740_992.0).as_safe_i64(), None);
        assert_eq!(n(-0.0).as_safe_i64(), Some(0));
        assert_eq!(n(-2.5).as_safe_i64(), None);
        assert_eq!(n(f64::NEG_INFINITY).as_safe_i64(), None);
        assert_eq!(parse("1e0").unwrap().as_safe_u64(), Some(1));
        assert_eq!(parse("1.0").unwrap().as_safe_u64(), Some(1));
    }

    #[test]
    fn accessors_and_conversions() {
        let mut v = Value::obj([
            ("a", Value::from(vec![Value::from(1u64)])),
            ("s", "x".into()),
        ]);
        assert!(v.is_object() && !v.is_array() && v.type_name() == "object");
        assert_eq!(v.as_object().unwrap().get("s").unwrap().as_str(), Some("x"));
        v.as_object_mut()
            .unwrap()
            .insert_str("b", Value::Bool(true));
        let a = v.as_object_mut().unwrap().get_mut("a").unwrap();
        a.as_array_mut().unwrap().push(Value::from(-2i64));
        assert_eq!(a.as_array().unwrap().len(), 2);
        assert_eq!(v.to_json(), r#"{"a":[1,-2],"s":"x","b":true}"#);
        assert_eq!(Value::Bool(true).as_bool(), Some(true));
        assert_eq!(Value::from(2.5).as_f64(), Some(2.5));
        assert_eq!(Value::from(String::from("y")).as_js_str().unwrap(), "y");
        assert!(Value::Null.is_null() && Value::default().is_null());
        assert_eq!(Value::from(3i32).to_json(), "3");
        assert_eq!(Value::from(u64::MAX).to_json(), "18446744073709552000");
        assert_eq!(Value::num(1e21).to_json(), "1e+21");
        let mut holder = Value::obj([("o", Value::obj([("k", Value::Null)]))]);
        let inner = holder.as_object_mut().unwrap().get_mut("o").unwrap().take();
        assert_eq!(holder.to_json(), r#"{"o":null}"#);
        let obj = inner.into_object().unwrap();
        assert!(obj.contains_key("k"));
        assert_eq!(Value::from(vec![]).into_array().unwrap().len(), 0);
        assert_eq!(Value::str("z").into_js_string().unwrap(), "z");
        assert_eq!(Value::Null.into_object().unwrap_err(), Value::Null);
    }

    #[test]
    fn equality() {
        let eq = |a: &str, b: &str| parse(a).unwrap() == parse(b).unwrap();
        assert!(eq(
            r#"{"a":1,"b":[1,{"c":2,"d":3}]}"#,
            r#"{"b":[1,{"d":3,"c":2}],"a":1}"#
        ));
        assert!(!eq(r#"{"a":1}"#, r#"{"a":1,"b":1}"#));
        assert!(!eq("[1,2]", "[2,1]"));
        assert!(!eq("[1]", "[1,1]"));
        assert!(eq("0", "-0"));
        assert!(eq("1", "1.0"));
        assert!(!eq("1", "\"1\""));
        assert!(!eq("null", "false"));
        assert!(!eq(r#""\ud800""#, r#""\ud801""#));
        assert!(eq(r#""\ud83d\ude00""#, "\"😀\""));
        assert_ne!(Value::Number(f64::NAN), Value::Number(f64::NAN));
    }

    #[test]
    fn lossless_walk() {
        assert!(parse(r#"{"a":[1,{"b":[0,-1.5,1e308]}],"c":"-0"}"#)
            .unwrap()
            .is_lossless());
        assert!(!parse(r#"{"a":[1,{"b":[0,-0.0]}]}"#).unwrap().is_lossless());
        assert!(!parse(r#"[[[[1e999]]]]"#).unwrap().is_lossless());
        assert!(!Value::Array(vec![Value::Number(f64::NAN)]).is_lossless());
        assert!(!Value::Number(-0.0).is_lossless());
    }

    #[test]
    fn clone_is_deep_and_equal() {
        let v = parse(r#"{"3":[1,{"x":"\ud800","1":[]}],"b":{},"a":[[],[[null]]]}"#).unwrap();
        let mut c = v.clone();
        assert_eq!(c, v);
        assert_eq!(c.to_json(), v.to_json());
        c.as_object_mut().unwrap().insert_str("b", Value::Null);
        assert_ne!(c, v);
        assert_eq!(Value::str("s").clone(), Value::str("s"));
    }

    /// Runs `f` on a thread with a 256 KiB stack.
    fn small_stack(f: impl FnOnce() + Send + 'static) {
        std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(f)
            .unwrap()
            .join()
            .unwrap();
    }

    const DEEP: usize = 200_000;

    fn check_deep(open: &str, close: &str, leaf: &str) {
        let text = format!("{}{leaf}{}", open.repeat(DEEP), close.repeat(DEEP));
        let leaf = leaf.to_string();
        small_stack(move || {
            let v = parse(&text).unwrap();
            assert_eq!(v.to_json(), text);
            assert!(v.is_lossless());
            let c = v.clone();
            assert!(c == v);
            let dbg = format!("{v:?}");
            assert!(dbg.len() < 1000 && dbg.ends_with("..."));
            drop(c);
            let mut other = parse(&text.replacen(&leaf, "[7]", 1)).unwrap();
            assert!(other != v);
            other = Value::Null;
            assert!(other.is_null());
            drop(v);
        });
    }

    #[test]
    fn deep_arrays() {
        check_deep("[", "]", "1");
    }

    #[test]
    fn deep_objects() {
        check_deep("{\"a\":", "}", "1");
    }

    #[test]
    fn deep_mixed() {
        check_deep("[{\"k\":[0,", "]}]", "{}");
    }

    #[test]
    fn deep_edge_cases() {
        small_stack(|| {
            // Built by hand rather than parsed.
            let mut v = Value::Null;
            for i in 0..DEEP {
                v = if i % 2 == 0 {
                    Value::Array(vec![Value::Null, v])
                } else {
                    Value::obj([("x", v), ("y", Value::Bool(true))])
                };
            }
            let mut o = Object::new();
            o.insert_str("v", v.clone());
            let o2 = o.clone();
            assert!(o == o2);
            drop(o);
            drop(o2);
            drop(v);
            // Errors deep inside drop the partial tree.
            assert!(parse(&"[".repeat(DEEP)).is_err());
            assert!(parse(&"{\"a\":[".repeat(DEEP)).is_err());
            assert!(parse(&format!("{}1,]{}", "[".repeat(DEEP), "]".repeat(DEEP - 1))).is_err());
            // A deep non-lossless value.
            let text = format!("{}-0{}", "[".repeat(DEEP), "]".repeat(DEEP));
            assert!(!parse(&text).unwrap().is_lossless());
            let wide: Vec<Value> = (0..100)
                .map(|_| parse(&text[DEEP - 500..DEEP + 502]).unwrap())
                .collect();
            drop(Value::Array(wide));
        });
    }
}

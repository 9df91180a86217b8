//! Tests of [`Value`]: accessors, equality, the lossless walk, and the
//! iterative clone, drop and parse on deeply nested input.

use super::{parse, Object, Value};

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

#[test]
fn parse_checked_flags_every_literal_that_may_not_be_lossless() {
    use super::parse_checked;
    for text in ["-0", "[1,-0.0]", "{\"a\":1e400}", "-1e-400", "[-0e5]"] {
        let (v, hint) = parse_checked(text).unwrap();
        assert!(!hint, "{text}");
        assert!(!v.is_lossless(), "{text}");
    }
    for text in ["0", "[1,2.5,-3]", "{\"a\":{\"b\":[1e20,-1e-7]}}", "\"-0\""] {
        let (v, hint) = parse_checked(text).unwrap();
        assert!(hint, "{text}");
        assert!(v.is_lossless(), "{text}");
    }
    // A suspicious literal shadowed by a later duplicate: the hint is only
    // "maybe", and the walk decides.
    let (v, hint) = parse_checked("{\"a\":-0,\"a\":1}").unwrap();
    assert!(!hint && v.is_lossless());
}

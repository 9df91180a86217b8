//! Runs every conformance vector (tests/conformance/, plus the directory
//! named by `DSH_CONFORMANCE_DIR` when set) through the exported C functions.
//! Codec vectors run against the codec module. Prints `N passed, M failed`
//! per area; fails when a vector fails that is not listed in
//! tests/conformance/known-failures.txt, or when a listed one passes.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{c_char, CString};
use std::path::{Path, PathBuf};
use std::ptr;

use ::dsh_session::json::{self, Value};
use ::dsh_session::store::sqlite::codec;
use ::dsh_session_ffi::*;
use serde_json::Value as J;

#[path = "support/call.rs"]
mod call;
use call::{call, cstr};

fn opt_ptr(s: &Option<CString>) -> *const c_char {
    s.as_ref().map_or(ptr::null(), |c| c.as_ptr())
}

/// Parse with the library's lossless parser (keeps lone surrogates).
fn lossless(text: &str) -> Value {
    json::parse(text)
        .unwrap_or_else(|e| panic!("bad JSON from library or vector: {e}: {text:.200}"))
}

fn expected(step: &J, key: &str) -> Option<Value> {
    if let Some(t) = step.get(format!("{key}Text")) {
        return Some(lossless(t.as_str().expect("…Text is a string")));
    }
    step.get(key).map(|v| lossless(&v.to_string()))
}

fn input_text(step: &J, key: &str) -> Option<String> {
    if let Some(t) = step.get(format!("{key}Text")) {
        return Some(t.as_str().expect("…Text is a string").to_string());
    }
    step.get(key).map(J::to_string)
}

/// Remove `time` from an event (or from each event of an array).
fn strip_time(v: &mut Value) {
    match v {
        Value::Object(o) => {
            o.remove("time");
        }
        Value::Array(a) => a.iter_mut().for_each(strip_time),
        _ => {}
    }
}

fn field<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_object()?.get(key)
}

struct Run {
    store: *mut dsh_store,
    session: *mut dsh_session,
}

impl Drop for Run {
    fn drop(&mut self) {
        // SAFETY: handles made by this run; NULL is tolerated.
        unsafe {
            if !self.session.is_null() {
                dsh_session_close(self.session, ptr::null_mut());
            }
            dsh_store_close(self.store, ptr::null_mut());
        }
    }
}

/// Compare an error result with an `{"ok":false,"rule":…}` expectation.
fn check_error(status: dsh_status, text: &str, exp: &Value) -> Result<(), String> {
    if status == DSH_OK {
        return Err(format!(
            "expected rejection {exp:?}, got success {text:.300}"
        ));
    }
    let got = lossless(text);
    let (want, have) = (field(exp, "rule"), field(&got, "rule"));
    if want != have {
        return Err(format!(
            "expected rule {want:?}, got {have:?} ({text:.300})"
        ));
    }
    Ok(())
}

fn check_value(what: &str, got: &Value, want: &Value) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!(
            "{what}: got {:.600}, want {:.600}",
            got.to_json(),
            want.to_json()
        ))
    }
}

fn session_log(run: &Run) -> String {
    // SAFETY: live handle; out is a local buffer.
    let (st, text) = call(|out| unsafe { dsh_session_events(run.session, 0, u64::MAX, out) });
    assert_eq!(st, DSH_OK, "events: {text}");
    text
}

/// The store every session vector runs on: the reference's admission,
/// which the vectors record.
const VECTOR_STORE: &str = r#"{"admission":"reference"}"#;

fn run_session_vector(v: &J) -> Result<(), String> {
    let mut store = ptr::null_mut();
    let config = cstr(VECTOR_STORE);
    // SAFETY: valid string and out-pointers.
    let (st, text) = call(|out| unsafe { dsh_store_open(config.as_ptr(), &mut store, out) });
    if st != DSH_OK {
        return Err(format!("store open: {text}"));
    }
    let mut run = Run {
        store,
        session: ptr::null_mut(),
    };
    let seed = input_text(v, "seed");
    let options = match &seed {
        Some(s) => format!("{{\"id\":\"s\",\"seed\":{s}}}"),
        None => "{\"id\":\"s\"}".to_string(),
    };
    let options = cstr(&options);
    let mut session = ptr::null_mut();
    // SAFETY: live store, valid strings and out-pointers.
    let (st, text) =
        call(|out| unsafe { dsh_session_create(run.store, options.as_ptr(), &mut session, out) });
    run.session = session;
    let seed_ok = v.get("seedExpect").is_none_or(|e| e["ok"] == J::Bool(true));
    if !seed_ok {
        let exp = expected(v, "seedExpect").expect("seedExpect");
        return check_error(st, &text, &exp).map_err(|e| format!("seed: {e}"));
    }
    if st != DSH_OK {
        return Err(format!("seed rejected: {text:.400}"));
    }
    for (i, step) in v["steps"].as_array().expect("steps").iter().enumerate() {
        run_step(&run, step).map_err(|e| format!("step {i} ({}): {e}", step["op"]))?;
    }
    Ok(())
}

fn run_step(run: &Run, step: &J) -> Result<(), String> {
    let op = step["op"].as_str().expect("op");
    let exp = expected(step, "expect").expect("expect");
    match op {
        "append" | "validate" => {
            let ty = cstr(step["type"].as_str().expect("type"));
            let data = cstr(&input_text(step, "data").expect("data"));
            let intent = input_text(step, "intent").map(|t| cstr(&t));
            let before = session_log(run);
            // SAFETY: live session, valid strings.
            let (st, text) = call(|out| unsafe {
                if op == "append" {
                    dsh_session_append(
                        run.session,
                        ty.as_ptr(),
                        data.as_ptr(),
                        opt_ptr(&intent),
                        out,
                    )
                } else {
                    dsh_session_validate(
                        run.session,
                        ty.as_ptr(),
                        data.as_ptr(),
                        opt_ptr(&intent),
                        out,
                    )
                }
            });
            if field(&exp, "ok") == Some(&Value::Bool(false)) {
                check_error(st, &text, &exp)?;
                if session_log(run) != before {
                    return Err("a rejected call changed the log".into());
                }
                return Ok(());
            }
            if st != DSH_OK {
                return Err(format!("expected success, got {text:.400}"));
            }
            let mut got = lossless(&text);
            if field(&got, "time").and_then(Value::as_safe_i64).is_none() {
                return Err("committed event has no integer time".into());
            }
            strip_time(&mut got);
            check_value("event", &got, field(&exp, "event").expect("event"))?;
            if op == "validate" && session_log(run) != before {
                return Err("validate changed the log".into());
            }
            Ok(())
        }
        "surface" => {
            // SAFETY: live session.
            let (st, text) = call(|out| unsafe { dsh_session_surface(run.session, out) });
            if st != DSH_OK {
                return Err(text);
            }
            check_value("surface", &lossless(&text), &exp)
        }
        "derive" => {
            // SAFETY: live session.
            let (st, text) = call(|out| unsafe { dsh_session_derive(run.session, out) });
            if st != DSH_OK {
                return Err(text);
            }
            check_value("derive", &lossless(&text), &exp)
        }
        "log" => {
            let mut got = lossless(&session_log(run));
            strip_time(&mut got);
            check_value("log", &got, &exp)
        }
        "fold" => {
            let input = input_text(step, "events").unwrap_or_else(|| session_log(run));
            let input = cstr(&input);
            // SAFETY: valid string.
            let (st, text) = call(|out| unsafe { dsh_fold_surface(input.as_ptr(), out) });
            if field(&exp, "ok") == Some(&Value::Bool(false)) {
                return check_error(st, &text, &exp);
            }
            if st != DSH_OK {
                return Err(text);
            }
            check_value("fold", &lossless(&text), &exp)
        }
        "repair" => {
            let log = cstr(&session_log(run));
            // SAFETY: valid string.
            let (st, text) = call(|out| unsafe { dsh_repair_events(log.as_ptr(), out) });
            if st != DSH_OK {
                return Err(text);
            }
            let mut events = lossless(&text);
            strip_time(&mut events);
            let got = Value::obj([("events", events)]);
            check_value("repair", &got, &exp)
        }
        "requestHeader" | "requestContext" => {
            // SAFETY: live session.
            let (st, text) = call(|out| unsafe {
                if op == "requestHeader" {
                    dsh_session_request_header(run.session, out)
                } else {
                    dsh_session_request_context(run.session, out)
                }
            });
            if st != DSH_OK {
                return Err(text);
            }
            check_value(op, &lossless(&text), &exp)
        }
        "fork" => run_fork(run, step, &exp),
        other => Err(format!("unknown op {other}")),
    }
}

fn run_fork(run: &Run, step: &J, exp: &Value) -> Result<(), String> {
    let options = match step.get("upTo") {
        Some(b) => format!("{{\"id\":\"child\",\"boundary\":{b}}}"),
        None => "{\"id\":\"child\"}".to_string(),
    };
    let options = cstr(&options);
    let before = session_log(run);
    let mut child = ptr::null_mut();
    // SAFETY: live session, valid string and out-pointer.
    let (st, text) =
        call(|out| unsafe { dsh_session_fork(run.session, -1, options.as_ptr(), &mut child, out) });
    let result = (|| {
        if session_log(run) != before {
            return Err("fork changed the source".to_string());
        }
        if field(exp, "ok") == Some(&Value::Bool(false)) {
            return check_error(st, &text, exp);
        }
        if st != DSH_OK {
            return Err(format!("fork failed: {text:.400}"));
        }
        let mut header = lossless(&text);
        if let Some(o) = header.as_object_mut() {
            if o.remove("createdAt").is_none() {
                return Err("child header has no createdAt".into());
            }
        }
        // SAFETY: live child handle.
        let (_, log) = call(|out| unsafe { dsh_session_events(child, 0, u64::MAX, out) });
        let mut events = lossless(&log);
        strip_time(&mut events);
        let got = Value::obj([
            ("ok", Value::Bool(true)),
            ("events", events),
            ("header", header),
        ]);
        check_value("fork", &got, exp)
    })();
    if !child.is_null() {
        let id = cstr("child");
        // SAFETY: handles made by this run; the child id is free again after.
        unsafe {
            dsh_session_close(child, ptr::null_mut());
            dsh_store_delete(run.store, id.as_ptr(), ptr::null_mut());
        }
    }
    result
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn run_codec_vector(v: &J) -> Result<(), String> {
    for (i, case) in v["cases"].as_array().expect("cases").iter().enumerate() {
        let exp = &case["expect"];
        let result = if let Some(list) = case.get("encode") {
            let Ok(values) = lossless(&list.to_string()).into_array() else {
                return Err(format!("case {i}: encode input is not an array"));
            };
            codec::encode_values(&values).map(|b| J::String(hex(&b)))
        } else {
            let bytes = unhex(case["decode"].as_str().expect("decode hex"));
            codec::decode(&bytes).map(J::from)
        };
        match (result, exp.get("ok")) {
            (Err(e), Some(J::Bool(false))) => {
                if exp["rule"] != e.rule.as_str() {
                    return Err(format!("case {i}: rule {} != {}", e.rule, exp["rule"]));
                }
            }
            (Err(e), _) => return Err(format!("case {i}: unexpected error {e}")),
            (Ok(got), _) => {
                let want = exp.get("hex").or_else(|| exp.get("seqs"));
                if want != Some(&got) || exp.get("ok") == Some(&J::Bool(false)) {
                    return Err(format!("case {i}: got {got}, want {exp}"));
                }
            }
        }
    }
    Ok(())
}

fn run_vector(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let v: J = serde_json::from_str(&text).map_err(|e| format!("unreadable vector: {e}"))?;
    if v["format"] != "dsh-conformance/1" {
        return Err(format!("unknown format {}", v["format"]));
    }
    if v["area"] == "codec" {
        return run_codec_vector(&v);
    }
    // Deep vectors need more stack in the runner's own serde_json handling.
    run_session_vector(&v)
}

fn vectors(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

fn known_failures(dir: &Path) -> BTreeMap<String, String> {
    let Ok(text) = std::fs::read_to_string(dir.join("known-failures.txt")) else {
        return BTreeMap::new();
    };
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (name, reason) = l.split_once(char::is_whitespace).unwrap_or((l, ""));
            (name.to_string(), reason.trim().to_string())
        })
        .collect()
}

/// Run every vector of `dir`; return the problems (unexpected failures and
/// listed vectors that now pass).
fn run_dir(dir: &Path, enforce_list: bool) -> Vec<String> {
    let known = known_failures(dir);
    let mut per_area: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for path in vectors(dir) {
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let area = name.split('-').next().unwrap_or("?").to_string();
        seen.insert(name.clone());
        let outcome = std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn({
                let path = path.clone();
                move || run_vector(&path)
            })
            .unwrap()
            .join()
            .unwrap_or_else(|_| Err("the runner panicked".to_string()));
        let entry = per_area.entry(area).or_default();
        match outcome {
            Ok(()) => {
                entry.0 += 1;
                if enforce_list && known.contains_key(&name) {
                    problems.push(format!(
                        "{name}: listed in known-failures.txt but passes; remove it"
                    ));
                }
            }
            Err(e) => {
                entry.1 += 1;
                if !(enforce_list && known.contains_key(&name)) {
                    problems.push(format!("{name}: {e}"));
                }
            }
        }
    }
    for name in known.keys() {
        if enforce_list && !seen.contains(name) {
            problems.push(format!(
                "{name}: listed in known-failures.txt but no such vector"
            ));
        }
    }
    println!("conformance vectors in {}:", dir.display());
    let (mut tp, mut tf) = (0, 0);
    for (area, (p, f)) in &per_area {
        println!("{area}: {p} passed, {f} failed");
        tp += p;
        tf += f;
    }
    println!("all: {tp} passed, {tf} failed");
    problems
}

#[test]
fn conformance_vectors_pass_through_the_c_abi() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/conformance");
    let mut problems = run_dir(&dir, true);
    if let Ok(extra) = std::env::var("DSH_CONFORMANCE_DIR") {
        problems.extend(run_dir(Path::new(&extra), false));
    }
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

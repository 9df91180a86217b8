//! How a checklist test reads the outcome of a call, shared by the core
//! checklist (`tests/checklist_support/mod.rs`) and the C ABI's
//! (`crates/ffi-impl/tests/checklist_abi_support/mod.rs`, which includes
//! this file by path): a failure's status and error fields, and the
//! assertions on them. The including module provides `dsh_status` and `J`.

use super::{dsh_status, J};

/// A fixed base time for seeded events.
pub const T0: i64 = 1_755_650_000_000;

/// Parse library output with serde_json (ordinary values only).
pub fn parse(text: &str) -> J {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("bad JSON {e}: {text:.300}"))
}

/// A failed call: the status and the fields of the error.
#[derive(Debug, Clone)]
pub struct Fail {
    pub status: dsh_status,
    pub rule: String,
    pub message: String,
    pub index: Option<u64>,
    pub reference_code: Option<String>,
    /// The error in the C ABI's error-object shape, for messages.
    pub text: String,
}

/// The result of a wrapped call.
pub type R<T> = Result<T, Fail>;

/// Assert a failure with `status` and `rule`; return it for further checks.
#[track_caller]
pub fn expect_err<T: std::fmt::Debug>(r: R<T>, status: dsh_status, rule: &str) -> Fail {
    match r {
        Ok(v) => panic!("expected {rule} (status {status}), got success {v:?}"),
        Err(f) => {
            assert_eq!(
                (f.status, f.rule.as_str()),
                (status, rule),
                "wrong failure: {}",
                f.text
            );
            f
        }
    }
}

/// Assert success and return the value.
#[track_caller]
pub fn ok<T>(r: R<T>) -> T {
    match r {
        Ok(v) => v,
        Err(f) => panic!("expected success, got {}", f.text),
    }
}

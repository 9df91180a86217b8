//! The store configuration as the C ABI reads it from JSON: values that
//! are no configuration at all, refused by the ABI's own parse (or made
//! into values the core refuses). The lifecycle itself runs against the
//! core `Store` API in the root tests/store_lifecycle.rs.

mod support;

use ::dsh_session::json::Value;
use ::dsh_session_ffi::*;
use support::{rule, temp_dir, Store};

fn jsonl(dir: &std::path::Path, extra: &str) -> String {
    format!(
        r#"{{"backend":"jsonl","path":{}{extra}}}"#,
        Value::str(dir.to_str().unwrap()).to_json()
    )
}

/// Write-behind #9: a batch window that is not an integer in range is a
/// configuration error (0 is accepted: synchronous writes).
#[test]
fn an_invalid_batch_window_is_refused() {
    let dir = temp_dir("gap-window");
    for bad in ["1.5", "-1", "2147483648", "\"25\""] {
        let Err((st, text)) = Store::open(&jsonl(&dir, &format!(r#","batchWindowMs":{bad}"#)))
        else {
            panic!("batchWindowMs {bad} accepted")
        };
        assert_eq!(st, DSH_E_INVALID_ARGUMENT, "{bad}: {text}");
        assert_eq!(rule(&text), "config.invalid", "{bad}");
    }
    Store::open(&jsonl(&dir, r#","batchWindowMs":0"#)).unwrap();
}

/// A PostgreSQL statement timeout is an integer of 1 to 2147483647 ms,
/// and a key of the postgres backend only: anything else is refused
/// before a connection is tried.
#[test]
fn an_invalid_statement_timeout_is_refused() {
    let postgres = |extra: &str| {
        format!(r#"{{"backend":"postgres","url":"postgresql://u@127.0.0.1:1/db"{extra}}}"#)
    };
    for bad in ["0", "1.5", "-1", "2147483648", "\"30000\"", "null"] {
        let Err((st, text)) = Store::open(&postgres(&format!(r#","statementTimeoutMs":{bad}"#)))
        else {
            panic!("statementTimeoutMs {bad} accepted")
        };
        assert_eq!(st, DSH_E_INVALID_ARGUMENT, "{bad}: {text}");
        assert_eq!(rule(&text), "config.invalid", "{bad}");
        assert!(text.contains("statementTimeoutMs"), "{text}");
    }
    let dir = temp_dir("gap-statement-timeout");
    let Err((st, text)) = Store::open(&jsonl(&dir, r#","statementTimeoutMs":1000"#)) else {
        panic!("statementTimeoutMs accepted on jsonl")
    };
    assert_eq!(
        (st, rule(&text).as_str()),
        (DSH_E_INVALID_ARGUMENT, "config.invalid"),
        "{text}"
    );
    // A valid one passes the configuration's checks: the open then fails
    // only at the connection (nothing listens on port 1).
    let Err((st, text)) = Store::open(&postgres(r#","statementTimeoutMs":1000"#)) else {
        panic!("a server on port 1")
    };
    assert_eq!(
        (st, rule(&text).as_str()),
        (DSH_E_IO, "postgres.connect"),
        "{text}"
    );
}

/// SQLite #28: a database path containing NUL (a `\u0000` escape in the
/// JSON) is refused.
#[test]
fn a_database_path_with_nul_is_refused() {
    let Err((st, text)) = Store::open(r#"{"backend":"sqlite","path":"/tmp/a\u0000b.db"}"#) else {
        panic!("a path with NUL opened")
    };
    assert_eq!(st, DSH_E_INVALID_ARGUMENT, "{text}");
}

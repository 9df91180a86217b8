//! Reader configurations as the C ABI reads them from JSON: every bad one
//! is refused, those the core's rules refuse and those that are no
//! configuration at all. Readers beside a writer run against the core
//! `Store` API in the root tests/readers.rs.

mod support;

use ::dsh_session_ffi::*;
use support::*;

#[test]
fn bad_reader_configs_are_refused() {
    for bad in [
        r#"{"readOnly":true}"#,
        r#"{"backend":"jsonl","path":"/tmp/x","locking":"exclusive"}"#,
        r#"{"backend":"sqlite","path":"/tmp/x.db","locking":"none"}"#,
        r#"{"backend":"sqlite","path":"/tmp/x.db","readOnly":1}"#,
        r#"{"backend":"sqlite","path":"/tmp/x.db","trimHeap":"yes"}"#,
    ] {
        let (st, text) = Store::open(bad).err().expect(bad);
        assert_eq!(
            (st, rule(&text).as_str()),
            (DSH_E_INVALID_ARGUMENT, "config.invalid"),
            "{bad}: {text}"
        );
    }
}

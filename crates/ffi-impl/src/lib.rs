//! The C ABI: `extern "C"` functions only. Each one checks its pointers and
//! UTF-8, runs inside one panic boundary, and translates between C and the
//! store/engine API. No rule of the session lives here.
#![allow(non_camel_case_types)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod handles;
mod options;
mod pure;
mod render;
mod session;
mod store;
mod window;

pub use handles::{dsh_session, dsh_store};
pub use pure::*;
pub use session::*;
pub use store::*;
pub use window::*;

use std::ffi::{c_char, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use ::dsh_session::engine::session::DataText;
use ::dsh_session::error::{Error, Result, Status};
use ::dsh_session::Rule;

/// Status code returned by every fallible function (`DSH_OK` or a `DSH_E_*` value).
pub type dsh_status = i32;

/// Success.
pub const DSH_OK: dsh_status = 0;
/// The input is not JSON, or not lossless JSON (`json.*` rules).
pub const DSH_E_INVALID_JSON: dsh_status = 1;
/// Well-formed input that breaks a session rule; nothing changed.
pub const DSH_E_REJECTED: dsh_status = 2;
/// Stored data is damaged.
pub const DSH_E_CORRUPT: dsh_status = 3;
/// Stored data is intact but of another format or schema version.
pub const DSH_E_SCHEMA_MISMATCH: dsh_status = 4;
/// Operating-system or SQLite I/O failure.
pub const DSH_E_IO: dsh_status = 5;
/// Unknown session id.
pub const DSH_E_NOT_FOUND: dsh_status = 6;
/// Valid alone but clashes with current state (duplicate id, locked store, stale revision, ...).
pub const DSH_E_CONFLICT: dsh_status = 7;
/// NULL pointer, non-UTF-8 text, bad configuration, bad boundary.
pub const DSH_E_INVALID_ARGUMENT: dsh_status = 8;
/// The handle was closed, or poisoned by an earlier internal failure.
pub const DSH_E_CLOSED: dsh_status = 9;
/// A bug: a panic caught at the boundary.
pub const DSH_E_INTERNAL: dsh_status = 99;

/// A library-owned byte buffer holding UTF-8 JSON.
///
/// `ptr[len] == 0` always holds for a filled buffer, so C can print it with
/// `%s`. Initialise with `DSH_BUF_INIT` and release with `dsh_buf_free`
/// after every call, whatever the status. `cap` is private to the library.
#[repr(C)]
pub struct dsh_buf {
    /// The text (NUL-terminated), or NULL when empty.
    pub ptr: *mut c_char,
    /// The length of the text in bytes, without the terminating NUL.
    pub len: usize,
    /// Private: the allocation's capacity.
    pub cap: usize,
}

/// Fill `*out` (if `out` is not NULL) with `text`, overwriting what was there.
/// `text` copied once into a string with room for the terminating NUL
/// [`write_out`] adds (so handing it over does not copy again).
pub(crate) fn out_text(text: &str) -> String {
    let mut s = String::with_capacity(text.len() + 1);
    s.push_str(text);
    s
}

fn write_out(out: *mut dsh_buf, text: String) {
    if out.is_null() {
        return;
    }
    let mut bytes = text.into_bytes();
    bytes.push(0);
    let mut bytes = std::mem::ManuallyDrop::new(bytes);
    let buf = dsh_buf {
        ptr: bytes.as_mut_ptr().cast(),
        len: bytes.len() - 1,
        cap: bytes.capacity(),
    };
    // SAFETY: `out` is non-NULL and the caller promises it points to a
    // writable `dsh_buf`; we overwrite without reading the old contents.
    unsafe { out.write(buf) };
}

/// The JSON error object of docs/c-api.md.
fn error_json(e: &Error) -> String {
    use ::dsh_session::json::{Object, Value};
    let mut o = Object::new();
    o.insert_str("status", Value::str(status_name(e.status)));
    o.insert_str("code", Value::Number(e.status.code() as f64));
    o.insert_str("rule", Value::str(e.rule.as_str()));
    o.insert_str("message", Value::str(&e.message));
    if let Some(i) = e.index {
        o.insert_str("index", Value::Number(i as f64));
    }
    if let Some(c) = e.code {
        o.insert_str("referenceCode", Value::str(c));
    }
    if let Some(c) = e.cause {
        o.insert_str("cause", Value::str(c.as_str()));
    }
    Value::Object(o).to_json()
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// The one panic boundary: run `f`, write its JSON (or the error object)
/// to `out`, and return the status.
fn guard(out: *mut dsh_buf, f: impl FnOnce() -> Result<String>) -> dsh_status {
    let result = catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        Err(Error::new(
            Status::Internal,
            Rule::InternalPanic,
            format!(
                "internal error (a bug in dsh-session): {}",
                panic_message(&*payload)
            ),
        ))
    });
    // Writing the output cannot panic short of allocation failure, which aborts.
    match result {
        Ok(text) => {
            write_out(out, text);
            DSH_OK
        }
        Err(e) => {
            write_out(out, error_json(&e));
            e.status.code()
        }
    }
}

fn null_arg(name: &str) -> Error {
    Error::invalid_argument(Rule::ArgNull, format!("{name} must not be NULL"))
}

/// A required NUL-terminated UTF-8 argument.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that stays valid for the call.
unsafe fn arg_str<'a>(p: *const c_char, name: &str) -> Result<&'a str> {
    // SAFETY: forwarded contract.
    utf8_arg(unsafe { arg_bytes(p, name) }?, name)
}

/// The bytes of a NUL-terminated argument (`arg.null` for NULL).
///
/// # Safety
/// As [`arg_str`].
unsafe fn arg_bytes<'a>(p: *const c_char, name: &str) -> Result<&'a [u8]> {
    if p.is_null() {
        return Err(null_arg(name));
    }
    // SAFETY: non-NULL and NUL-terminated per the caller's contract.
    Ok(unsafe { CStr::from_ptr(p) }.to_bytes())
}

/// `bytes` as UTF-8 text (`arg.utf8` otherwise).
fn utf8_arg<'a>(bytes: &'a [u8], name: &str) -> Result<&'a str> {
    std::str::from_utf8(bytes).map_err(|e| {
        Error::invalid_argument(Rule::ArgUtf8, format!("{name} is not valid UTF-8: {e}"))
    })
}

/// A JSON text argument: checked canonical in the same pass that proves
/// it UTF-8 when it is (what hosts send), otherwise UTF-8 text the engine
/// parses (`arg.null`, `arg.utf8`).
///
/// # Safety
/// As [`arg_str`].
unsafe fn json_arg<'a>(p: *const c_char, name: &str) -> Result<DataText<'a>> {
    // SAFETY: forwarded contract.
    let bytes = unsafe { arg_bytes(p, name) }?;
    match DataText::canonical(bytes) {
        Some(text) => Ok(text),
        None => Ok(utf8_arg(bytes, name)?.into()),
    }
}

/// An optional NUL-terminated UTF-8 argument (NULL = absent).
///
/// # Safety
/// As [`arg_str`].
unsafe fn opt_str<'a>(p: *const c_char, name: &str) -> Result<Option<&'a str>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: forwarded contract.
    unsafe { arg_str(p, name) }.map(Some)
}

/// Release a buffer filled by the library. NULL-safe; zeroes the struct, so
/// a second call on the same buffer is a no-op.
///
/// # Safety
/// `buf` is NULL or points to a `dsh_buf` that is zeroed or was filled by
/// this library and not modified since.
#[no_mangle]
pub unsafe extern "C" fn dsh_buf_free(buf: *mut dsh_buf) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if buf.is_null() {
            return;
        }
        // SAFETY: non-NULL; the caller promises it points to a valid dsh_buf.
        let b = unsafe { &mut *buf };
        if !b.ptr.is_null() {
            // SAFETY: ptr/len/cap describe a Vec<u8> we leaked in write_out
            // (len + 1 bytes initialised, including the NUL).
            drop(unsafe { Vec::from_raw_parts(b.ptr.cast::<u8>(), b.len + 1, b.cap) });
        }
        b.ptr = std::ptr::null_mut();
        b.len = 0;
        b.cap = 0;
    }));
}

/// The C name of every status, read off the constants above: the list of
/// their identifiers is the one place a constant is named again.
macro_rules! c_names {
    ($($c:ident),* $(,)?) => {
        &[$(($c, match CStr::from_bytes_with_nul(concat!(stringify!($c), "\0").as_bytes()) {
            Ok(name) => name,
            Err(_) => panic!("a status name with a NUL"),
        })),*]
    };
}

/// `(code, C name)` of every status.
const C_NAMES: &[(dsh_status, &CStr)] = c_names![
    DSH_OK,
    DSH_E_INVALID_JSON,
    DSH_E_REJECTED,
    DSH_E_CORRUPT,
    DSH_E_SCHEMA_MISMATCH,
    DSH_E_IO,
    DSH_E_NOT_FOUND,
    DSH_E_CONFLICT,
    DSH_E_INVALID_ARGUMENT,
    DSH_E_CLOSED,
    DSH_E_INTERNAL,
];

fn c_name(code: dsh_status) -> &'static CStr {
    C_NAMES
        .iter()
        .find(|(c, _)| *c == code)
        .map_or(c"DSH_E_UNKNOWN", |(_, name)| name)
}

/// The C name of `status` (`"DSH_E_CORRUPT"`, …): the name hosts see in
/// error objects, and the CLI in its output.
pub fn status_name(status: Status) -> &'static str {
    c_name(status.code()).to_str().unwrap_or("DSH_E_UNKNOWN")
}

/// The name of a status code as a static string (`"DSH_E_UNKNOWN"` for
/// values that are not status codes). Never NULL; do not free.
#[no_mangle]
pub extern "C" fn dsh_status_name(status: dsh_status) -> *const c_char {
    c_name(status).as_ptr()
}

/// The ABI version of this library, derived by build.rs from the crate
/// version (the minor before 1.0, the major after).
const DSH_ABI: u32 = parse_u32(env!("DSH_ABI_VERSION"));

const fn parse_u32(s: &str) -> u32 {
    let b = s.as_bytes();
    let mut i = 0;
    let mut n = 0u32;
    while i < b.len() {
        n = n * 10 + (b[i] - b'0') as u32;
        i += 1;
    }
    n
}

/// The crate version, e.g. `"0.1.0"`. Static; do not free.
#[no_mangle]
pub extern "C" fn dsh_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The ABI version this library was built with; compare it with the
/// `DSH_ABI_VERSION` macro of the header the host was compiled against.
#[no_mangle]
pub extern "C" fn dsh_abi_version() -> u32 {
    DSH_ABI
}

/// Build information: `{"version","abi","features":[...],"sqlite":"3.x.y"}`;
/// `features` names the storage backends and encodings compiled in
/// (`"memory"` always; `"jsonl"`, `"sqlite"`, `"postgres"` as the library
/// was built, and `"zstd"` with either of the first two); `"sqlite"` is
/// `null` without the SQLite backend. A store configuration naming a
/// backend not listed is refused (`config.backend-not-built`).
/// Returns `DSH_OK`.
///
/// # Safety
/// `out` is NULL or points to a writable `dsh_buf`.
#[no_mangle]
pub unsafe extern "C" fn dsh_build_info(out: *mut dsh_buf) -> dsh_status {
    guard(out, || {
        let features: Vec<String> = ::dsh_session::store::FEATURES
            .iter()
            .map(|f| format!("\"{f}\""))
            .collect();
        let sqlite = ::dsh_session::store::sqlite_version()
            .map_or_else(|| "null".to_string(), |v| format!("\"{v}\""));
        Ok(format!(
            "{{\"version\":\"{}\",\"abi\":{},\"features\":[{}],\"sqlite\":{sqlite}}}",
            env!("CARGO_PKG_VERSION"),
            DSH_ABI,
            features.join(","),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_header_matches_the_generated_one() {
        let generated = include_str!(concat!(env!("OUT_DIR"), "/dsh_session.h"));
        let committed = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../include/dsh_session.h"
        ));
        assert!(
            generated == committed,
            "include/dsh_session.h is stale: run `DSH_BLESS_HEADER=1 cargo build` and commit it"
        );
    }

    #[test]
    fn every_status_has_its_c_name() {
        // One constant per core status, with the status's code, and no other.
        assert_eq!(C_NAMES.len(), Status::ALL.len());
        for &status in Status::ALL {
            let named: Vec<_> = C_NAMES
                .iter()
                .filter(|(c, _)| *c == status.code())
                .collect();
            assert_eq!(named.len(), 1, "{status:?}");
            // SAFETY: dsh_status_name returns a static NUL-terminated string.
            let name = unsafe { CStr::from_ptr(dsh_status_name(status.code())) };
            assert_eq!(name.to_str().unwrap(), status_name(status));
            assert!(status_name(status).starts_with("DSH_"), "{status:?}");
        }
        assert_eq!(status_name(Status::Corrupt), "DSH_E_CORRUPT");
        // SAFETY: as above.
        let unknown = unsafe { CStr::from_ptr(dsh_status_name(42)) };
        assert_eq!(unknown.to_str().unwrap(), "DSH_E_UNKNOWN");
    }

    #[test]
    fn a_panic_becomes_dsh_e_internal_with_an_error_object() {
        let mut buf = dsh_buf {
            ptr: std::ptr::null_mut(),
            len: 0,
            cap: 0,
        };
        let status = guard(&mut buf, || panic!("boom"));
        assert_eq!(status, DSH_E_INTERNAL);
        // SAFETY: the guard filled the buffer.
        let text = unsafe { CStr::from_ptr(buf.ptr) }
            .to_str()
            .unwrap()
            .to_string();
        assert!(
            text.contains("\"rule\":\"internal.panic\"") && text.contains("boom"),
            "{text}"
        );
        // SAFETY: filled by the library; freeing twice is a no-op.
        unsafe {
            dsh_buf_free(&mut buf);
            dsh_buf_free(&mut buf);
        }
        assert!(buf.ptr.is_null());
    }
}

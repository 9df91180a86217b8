//! The dsh-session C library. Every `dsh_*` function is defined in
//! `dsh-session-ffi-impl` (crate `dsh_session_ffi`); this package only links
//! them into `libdsh_session.so` and `libdsh_session.a`, under the name the
//! header and the SONAME promise.

pub use dsh_session_ffi::*;

//! Opaque handles and the registry that makes a closed or foreign pointer an
//! error (`DSH_E_CLOSED`) instead of undefined behaviour.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use ::dsh_session::error::{Error, Result, Status};
use ::dsh_session::store::{LiveSession, Store};
use ::dsh_session::Rule;

/// An open store. Opaque; create with `dsh_store_open`, release with `dsh_store_close`.
pub struct dsh_store {
    pub(crate) inner: Arc<Store>,
}

/// An open session. Opaque; create with `dsh_session_create`, `dsh_session_open`
/// or `dsh_session_fork`, release with `dsh_session_close`.
pub struct dsh_session {
    pub(crate) inner: Arc<LiveSession>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Store,
    Session,
}

fn registry() -> &'static Mutex<HashMap<usize, Kind>> {
    static HANDLES: OnceLock<Mutex<HashMap<usize, Kind>>> = OnceLock::new();
    HANDLES.get_or_init(|| Mutex::new(HashMap::new()))
}

fn lock() -> std::sync::MutexGuard<'static, HashMap<usize, Kind>> {
    registry().lock().unwrap_or_else(|p| p.into_inner())
}

fn not_open(what: &str) -> Error {
    Error::new(
        Status::Closed,
        Rule::HandleClosed,
        format!("{what} handle is closed or was never opened"),
    )
}

/// Hand a new store to C.
pub(crate) fn new_store(inner: Arc<Store>) -> *mut dsh_store {
    let p = Box::into_raw(Box::new(dsh_store { inner }));
    lock().insert(p as usize, Kind::Store);
    p
}

/// Hand a new session to C.
pub(crate) fn new_session(inner: Arc<LiveSession>) -> *mut dsh_session {
    let p = Box::into_raw(Box::new(dsh_session { inner }));
    lock().insert(p as usize, Kind::Session);
    p
}

/// The store behind a pointer C gave us.
pub(crate) fn store(p: *const dsh_store) -> Result<Arc<Store>> {
    if p.is_null() {
        return Err(super::null_arg("store"));
    }
    let reg = lock();
    if reg.get(&(p as usize)) != Some(&Kind::Store) {
        return Err(not_open("store"));
    }
    // SAFETY: the registry holds exactly the pointers made by `new_store`
    // that were not released yet, and release happens under this same lock.
    Ok(unsafe { &*p }.inner.clone())
}

/// The session behind a pointer C gave us.
pub(crate) fn session(p: *const dsh_session) -> Result<Arc<LiveSession>> {
    if p.is_null() {
        return Err(super::null_arg("session"));
    }
    let reg = lock();
    if reg.get(&(p as usize)) != Some(&Kind::Session) {
        return Err(not_open("session"));
    }
    // SAFETY: as in `store`.
    Ok(unsafe { &*p }.inner.clone())
}

/// Take a store pointer out of the registry and free the handle.
pub(crate) fn release_store(p: *mut dsh_store) -> Result<Arc<Store>> {
    if p.is_null() {
        return Err(super::null_arg("store"));
    }
    let mut reg = lock();
    if reg.get(&(p as usize)) != Some(&Kind::Store) {
        return Err(not_open("store"));
    }
    reg.remove(&(p as usize));
    // SAFETY: registered pointers come from Box::into_raw in `new_store`
    // and are removed exactly once, here.
    Ok(unsafe { Box::from_raw(p) }.inner)
}

/// Take a session pointer out of the registry and free the handle.
pub(crate) fn release_session(p: *mut dsh_session) -> Result<Arc<LiveSession>> {
    if p.is_null() {
        return Err(super::null_arg("session"));
    }
    let mut reg = lock();
    if reg.get(&(p as usize)) != Some(&Kind::Session) {
        return Err(not_open("session"));
    }
    reg.remove(&(p as usize));
    // SAFETY: as in `release_store`.
    Ok(unsafe { Box::from_raw(p) }.inner)
}

//! The store side of windowed sessions: an [`EventSource`] that reads a
//! session's stored events back through the backend.

use std::sync::{Arc, Weak};

use super::backend::Stored;
use super::writer::lock_backend;
use super::Store;
use crate::engine::window::EventSource;
use crate::engine::Event;
use crate::error::{Error, Result, Status};

/// Reads the events of one stored session back (see
/// [`Store::open_session_windowed`]).
#[derive(Debug)]
pub struct StoredEvents {
    store: Weak<Store>,
    id: String,
}

impl StoredEvents {
    /// A source over session `id` of `store`.
    pub fn new(store: &Arc<Store>, id: &str) -> StoredEvents {
        StoredEvents {
            store: Arc::downgrade(store),
            id: id.to_string(),
        }
    }

    fn read(&self, store: &Store, from: u64, to: u64) -> Result<Vec<Stored>> {
        lock_backend(&store.backend).load_range(&self.id, from, to)
    }
}

/// An engine event from a stored record read back.
fn event_of(stored: Stored) -> Result<Arc<Event>> {
    let event = match stored {
        Stored::Event(e) => e,
        Stored::Canonical(text) => Event::from_canonical_text(text).map_err(|_| {
            Error::new(
                Status::Corrupt,
                "window.reload-mismatch",
                "an event read back from storage is not a stored event",
            )
        })?,
        Stored::Value(v) => Event::from_envelope(v, "stored event")?,
    };
    Ok(Arc::new(event))
}

impl EventSource for StoredEvents {
    fn load(&self, from: u64, to: u64) -> Result<Vec<Arc<Event>>> {
        let store = self.store.upgrade().ok_or_else(|| {
            Error::new(
                Status::Closed,
                "store.closed",
                "the store of this windowed session is closed",
            )
        })?;
        let mut got = self.read(&store, from, to)?;
        if (got.len() as u64) < to - from {
            // Events the writer still holds: make them durable, then read.
            store.writer().flush(&self.id)?;
            got = self.read(&store, from, to)?;
        }
        got.into_iter().map(event_of).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::Store;

    fn temp(tag: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("dsh-window-{tag}-{}", std::process::id()))
    }

    pub(super) fn fill(store: &Arc<Store>, id: &str, turns: usize) {
        let s = store.create(Some(&format!(r#"{{"id":"{id}"}}"#))).unwrap();
        for t in 1..=turns {
            s.append("turn/start", &format!(r#"{{"turn":{t}}}"#), None)
                .unwrap();
            for i in 0..50 {
                let chunk = format!(
                    r#"{{"turn":{t},"step":1,"chunk":{{"type":"text-delta","index":0,"text":"x{i}"}}}}"#
                );
                s.append("assistant/chunk", &chunk, None).unwrap();
            }
            s.append(
                "turn/end",
                &format!(r#"{{"turn":{t},"reason":{{"kind":"completed"}}}}"#),
                None,
            )
            .unwrap();
        }
        s.close().unwrap();
    }

    #[test]
    fn a_clean_jsonl_log_streams_and_a_torn_one_does_not() {
        for compression in ["zstd", "none"] {
            let dir = temp(compression);
            let _ = std::fs::remove_dir_all(&dir);
            let config = format!(
                r#"{{"backend":"jsonl","path":{:?},"compression":"{compression}"}}"#,
                dir.display().to_string()
            );
            let store = Store::open(Some(&config)).unwrap();
            fill(&store, "w", 200);
            let (live, closers) = store.open_streaming("w", 100).unwrap().expect("streamed");
            assert!(closers.is_empty());
            let (len, resident) = live
                .with(|s| Ok((s.events().len(), s.resident_events())))
                .unwrap();
            assert_eq!(len, 200 * 52 + 1);
            assert!(resident < 100 + crate::engine::chunked::CHUNK, "{resident}");
            live.close().unwrap();
            // A torn tail: the streaming read declines, the whole-log open
            // repairs it.
            let log = walk(&dir)
                .into_iter()
                .find(|p| p.is_file() && p.extension().is_some())
                .unwrap();
            let bytes = std::fs::read(&log).unwrap();
            std::fs::write(&log, &bytes[..bytes.len() - 5]).unwrap();
            assert!(store.open_streaming("w", 100).unwrap().is_none());
            // (the cut hit the end-seed marker of the first open, which the
            // second open writes anew)
            let (live, _) = store.open_session_windowed("w", 100).unwrap();
            let (len, windowed) = live
                .with(|s| Ok((s.events().len(), s.is_windowed())))
                .unwrap();
            assert_eq!(len, 200 * 52 + 1);
            assert!(windowed);
            live.close().unwrap();
            drop(store);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
        out
    }
}

#[cfg(test)]
mod sqlite_tests {
    use super::super::Store;

    #[test]
    fn a_clean_sqlite_log_streams() {
        let dir = std::env::temp_dir().join(format!("dsh-window-sqlite-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config = format!(
            r#"{{"backend":"sqlite","path":{:?}}}"#,
            dir.join("s.db").display().to_string()
        );
        let store = Store::open(Some(&config)).unwrap();
        super::tests::fill(&store, "w", 200);
        let (live, _) = store.open_streaming("w", 100).unwrap().expect("streamed");
        let (len, resident) = live
            .with(|s| Ok((s.events().len(), s.resident_events())))
            .unwrap();
        assert_eq!(len, 200 * 52 + 1);
        assert!(resident < 100 + crate::engine::chunked::CHUNK, "{resident}");
        live.close().unwrap();
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

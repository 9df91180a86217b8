//! How the JSONL backend reads a session back: whole, damage treated as
//! the caller says ([`JsonlBackend::load_with`]), streamed in batches, or
//! a range of its events from the resync points a read remembered.

use super::{encode_segment, layout, range, read, stream, zstd_frames, JsonlBackend};
use crate::error::Result;
use crate::json::{JsString, Value};
use crate::store::backend::{
    slice_of, Backend, Loaded, ProgressUnit, RangeReads, ReadProgress, Stored, Streamed, Torn,
};

impl RangeReads for JsonlBackend {
    fn load_streaming(
        &mut self,
        id: &str,
        sink: &mut dyn FnMut(&Value, Vec<Stored>) -> Result<()>,
    ) -> Result<Option<Streamed>> {
        let segment = encode_segment(&JsString::from_str(id))?;
        let Some(path) = layout::find_log(&self.root, &segment, self.compression)? else {
            return Ok(None);
        };
        let mut count = 0u64;
        let mut counted = |h: &Value, batch: Vec<Stored>| {
            count += batch.len() as u64;
            sink(h, batch)
        };
        let end = stream::stream_log(
            &path,
            self.compression,
            (self.reading, &self.streamed),
            |h| self.check_identity(Some(id), h, &path),
            &mut counted,
        )?;
        let Some(end) = end else {
            return Ok(None);
        };
        self.keep_marks(&segment, end.marks, &end.revision);
        self.remember(&segment, path, Some(count));
        Ok(Some(Streamed {
            header: end.header,
            revision: end.revision,
        }))
    }

    fn load_range(&mut self, id: &str, from: u64, to: u64) -> Result<Vec<Stored>> {
        let segment = encode_segment(&JsString::from_str(id))?;
        let path = layout::find_log(&self.root, &segment, self.compression)?;
        if let (Some(path), Some(marks)) = (path, self.marks.get_mut(&segment)) {
            let mut cursor = match self.cursor.take() {
                Some((s, c)) if s == segment => Some(c),
                other => {
                    self.cursor = other;
                    None
                }
            };
            let read = range::read_range(&path, self.compression, marks, &mut cursor, from, to)?;
            if let Some(c) = cursor {
                self.cursor = Some((segment, c));
            }
            if let Some(events) = read {
                return Ok(events);
            }
        }
        // No resync point known: read the whole log (which records them).
        Ok(slice_of(self.load(id)?, from, to))
    }

    fn progress(&mut self, id: &str) -> Option<ReadProgress> {
        let segment = encode_segment(&JsString::from_str(id)).ok()?;
        let path = layout::find_log(&self.root, &segment, self.compression).ok()??;
        let total = std::fs::metadata(path).ok()?.len();
        self.streamed.store(0, std::sync::atomic::Ordering::Relaxed);
        Some(ReadProgress {
            unit: ProgressUnit::Bytes,
            total,
            done: self.streamed.clone(),
        })
    }
}

impl JsonlBackend {
    /// [`Backend::load`], treating damage of a zstd log as `damage` says.
    pub(super) fn load_with(
        &mut self,
        id: &str,
        damage: zstd_frames::Damage,
    ) -> Result<Option<Loaded>> {
        let segment = encode_segment(&JsString::from_str(id))?;
        let Some(path) = layout::find_log(&self.root, &segment, self.compression)? else {
            self.logs.remove(&segment);
            return Ok(None);
        };
        let check = |h: &Value| self.check_identity(Some(id), h, &path);
        let read = read::stable_read_with(&path, self.compression, self.reading, damage, check)?;
        let Some((decoded, revision)) = read else {
            return Ok(None);
        };
        let recovered = decoded.torn.as_ref().map_or(0, |t: &Torn| t.recovered);
        self.keep_marks(&segment, decoded.marks, &revision);
        let committed = (decoded.events.len() - recovered) as u64;
        self.remember(&segment, path, Some(committed));
        if let Some(state) = self.logs.get_mut(&segment) {
            state.tail = decoded.tail.unwrap_or_default();
        }
        Ok(Some(Loaded {
            header: decoded.header,
            events: decoded.events,
            torn: decoded.torn,
            revision,
        }))
    }
}

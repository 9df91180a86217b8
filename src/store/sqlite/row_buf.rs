//! Rows kept past their statement step: every column of every row copied
//! into one byte buffer, so a batch of rows costs no allocation per row and
//! is cleared and refilled rather than freed. The whole-log read passes
//! batches between two threads; with one allocation per column the two
//! threads' allocator arenas contended for each row (a row freed on the
//! decoding thread goes back to the reading thread's arena).

use std::ops::Range;

use super::rows::{RawData, RawRow};

/// Validated rows, owned.
#[derive(Debug, Default)]
pub struct RowBuf {
    /// The columns' bytes, row after row.
    bytes: Vec<u8>,
    rows: Vec<At>,
}

/// Where one row's columns are in [`RowBuf::bytes`].
#[derive(Debug, Clone)]
struct At {
    seq: u64,
    time: i64,
    ignorable: Option<i64>,
    ty: Range<usize>,
    data: Range<usize>,
    blob: bool,
    sources: Option<Range<usize>>,
    op: Option<Range<usize>>,
}

impl RowBuf {
    /// Copy `row` in after the rows already held.
    pub fn push(&mut self, row: &RawRow<'_>) {
        let mut put = |b: &[u8]| {
            let start = self.bytes.len();
            self.bytes.extend_from_slice(b);
            start..self.bytes.len()
        };
        let ty = put(row.ty);
        let (data, blob) = match row.data {
            RawData::Text(t) => (put(t), false),
            RawData::Blob(b) => (put(b), true),
        };
        let sources = row.sources.map(&mut put);
        let op = row.op.map(&mut put);
        self.rows.push(At {
            seq: row.seq,
            time: row.time,
            ignorable: row.ignorable,
            ty,
            data,
            blob,
            sources,
            op,
        });
    }

    /// The number of rows held.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when no row is held.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Drop every row, keeping the memory for the next ones.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.rows.clear();
    }

    /// The rows, in the order they were pushed.
    pub fn iter(&self) -> impl Iterator<Item = RawRow<'_>> {
        let b = &self.bytes[..];
        self.rows.iter().map(move |at| RawRow {
            seq: at.seq,
            ty: &b[at.ty.clone()],
            time: at.time,
            data: if at.blob {
                RawData::Blob(&b[at.data.clone()])
            } else {
                RawData::Text(&b[at.data.clone()])
            },
            sources: at.sources.clone().map(|r| &b[r]),
            op: at.op.clone().map(|r| &b[r]),
            ignorable: at.ignorable,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row<'a>(
        seq: u64,
        ty: &'a [u8],
        data: RawData<'a>,
        sources: Option<&'a [u8]>,
        op: Option<&'a [u8]>,
    ) -> RawRow<'a> {
        RawRow {
            seq,
            ty,
            time: seq as i64 * 7 - 3,
            data,
            sources,
            op,
            ignorable: [None, Some(0), Some(1)][seq as usize % 3],
        }
    }

    #[test]
    fn rows_come_back_as_they_were_pushed_and_after_a_clear() {
        let texts: Vec<Vec<u8>> = (0..40u8)
            .map(|i| vec![b'a' + i % 26; i as usize * 3])
            .collect();
        let mut buf = RowBuf::default();
        for round in 0..2 {
            let rows: Vec<RawRow<'_>> = texts
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let data = if i % 2 == 0 {
                        RawData::Text(t)
                    } else {
                        RawData::Blob(t)
                    };
                    let sources = (i % 3 == 0).then_some(&t[..t.len() / 2]);
                    let op = (i % 5 == 0).then_some(b"{\"kind\":\"append\"}".as_slice());
                    row(i as u64 + round * 100, b"user/message", data, sources, op)
                })
                .collect();
            buf.clear();
            assert!(buf.is_empty());
            for r in &rows {
                buf.push(r);
            }
            assert_eq!(buf.len(), rows.len());
            for (got, want) in buf.iter().zip(&rows) {
                assert_eq!(format!("{got:?}"), format!("{want:?}"));
            }
        }
    }
}

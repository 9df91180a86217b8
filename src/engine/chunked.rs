//! A persistent, chunked vector for append-only logs.
//!
//! [`Chunked<T>`] stores its elements as a run of full, immutable chunks of
//! [`CHUNK`] elements (each an `Arc<[T]>` shared between clones) followed by
//! one mutable tail `Vec<T>` holding fewer than [`CHUNK`] elements. When the
//! tail fills it is sealed into a new shared chunk.
//!
//! Costs, for a log of `n` elements:
//!
//! * [`Chunked::push`]: O(1) amortized (sealing a chunk moves its
//!   [`CHUNK`] elements once);
//! * [`Chunked::get`] / indexing: O(1);
//! * [`Chunked::prefix`] and [`Clone`]: `n / CHUNK` reference-count
//!   increments plus at most `CHUNK - 1` element clones (the partial chunk at
//!   the end), independent of how many full chunks are shared, so forking a
//!   million-event log copies at most one chunk's worth of `Arc`s;
//! * [`Chunked::truncate`]: O(1) inside the tail, otherwise drops whole
//!   chunks and copies at most `CHUNK - 1` elements of the chunk that becomes
//!   the new tail.
//!
//! Full chunks are never mutated, so modifying a clone or a prefix never
//! changes the log it came from, and vice versa.

use std::fmt;
use std::ops::{Bound, Index, RangeBounds};
use std::sync::Arc;

mod iter;

pub use iter::{Iter, SliceIter};

/// The number of elements in one full, shared chunk.
pub const CHUNK: usize = 4096;

/// A persistent vector: shared full chunks of [`CHUNK`] elements plus one
/// mutable tail. See the [module documentation](self) for costs.
pub struct Chunked<T> {
    /// Full chunks, each exactly `CHUNK` elements long.
    chunks: Vec<Arc<[T]>>,
    /// The elements after the last full chunk; always `< CHUNK` long.
    tail: Vec<T>,
}

impl<T> Chunked<T> {
    /// An empty log. Does not allocate.
    pub const fn new() -> Self {
        Chunked {
            chunks: Vec::new(),
            tail: Vec::new(),
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.chunks.len() * CHUNK + self.tail.len()
    }

    /// True when the log holds no elements.
    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty() && self.tail.is_empty()
    }

    /// Appends `value` at the end. O(1) amortized; never clones elements.
    pub fn push(&mut self, value: T) {
        // The tail grows like a Vec (a one-element log, such as a single
        // queued append, must not cost a whole chunk's allocation).
        self.tail.push(value);
        if self.tail.len() == CHUNK {
            let full = std::mem::take(&mut self.tail);
            self.chunks.push(Arc::from(full));
        }
    }

    /// Removes every element. Shared chunks stay alive in the other logs
    /// that share them.
    pub fn clear(&mut self) {
        self.chunks.clear();
        self.tail.clear();
    }

    /// The element at `index`, or `None` when `index >= self.len()`.
    pub fn get(&self, index: usize) -> Option<&T> {
        let c = index / CHUNK;
        match self.chunks.get(c) {
            Some(chunk) => chunk.get(index % CHUNK),
            None => self.tail.get(index - self.chunks.len() * CHUNK),
        }
    }

    /// The first element, or `None` when empty.
    pub fn first(&self) -> Option<&T> {
        self.get(0)
    }

    /// The last element, or `None` when empty.
    pub fn last(&self) -> Option<&T> {
        match self.tail.last() {
            Some(x) => Some(x),
            None => self.chunks.last().and_then(|c| c.last()),
        }
    }

    /// An iterator over all elements, front to back (double-ended, exact
    /// size). It walks chunk slices, not per-index lookups.
    pub fn iter(&self) -> Iter<'_, T> {
        Iter::new(self.slice_iter(..))
    }

    /// An iterator over the elements `[start, len)`.
    ///
    /// # Panics
    ///
    /// When `start > self.len()`.
    pub fn iter_from(&self, start: usize) -> Iter<'_, T> {
        self.range(start..)
    }

    /// An iterator over the elements in `range` (e.g. `a..b`, `a..`, `..=b`).
    ///
    /// # Panics
    ///
    /// Like slice indexing: when the start exceeds the end or the end exceeds
    /// `self.len()`.
    pub fn range<R: RangeBounds<usize>>(&self, range: R) -> Iter<'_, T> {
        Iter::new(self.slice_iter(range))
    }

    /// The storage slices of the whole log, in order: every full chunk, then
    /// the tail if it is not empty. Concatenated, they are the log. Empty
    /// slices are never yielded.
    pub fn chunks(&self) -> SliceIter<'_, T> {
        self.slice_iter(..)
    }

    /// The elements in `range` as contiguous storage slices, in order;
    /// concatenated they are exactly `range`. Never yields an empty slice,
    /// and at most two slices more than `range.len() / CHUNK`. Use this to
    /// process `[a, b)` a slice at a time.
    ///
    /// # Panics
    ///
    /// Like slice indexing: when the start exceeds the end or the end exceeds
    /// `self.len()`.
    pub fn slice_iter<R: RangeBounds<usize>>(&self, range: R) -> SliceIter<'_, T> {
        let (a, b) = bounds(range, self.len());
        if a == b {
            return SliceIter {
                front: &[],
                middle: [].iter(),
                back: &[],
            };
        }
        let (ca, cb) = (a / CHUNK, (b - 1) / CHUNK);
        if ca == cb {
            return SliceIter {
                front: &self.segment(ca)[a - ca * CHUNK..b - ca * CHUNK],
                middle: [].iter(),
                back: &[],
            };
        }
        let middle = &self.chunks[ca + 1..cb];
        SliceIter {
            front: &self.segment(ca)[a - ca * CHUNK..],
            middle: middle.iter(),
            back: &self.segment(cb)[..b - cb * CHUNK],
        }
    }

    /// Storage segment `k`: full chunk `k`, or the tail when `k` is the
    /// number of full chunks.
    fn segment(&self, k: usize) -> &[T] {
        match self.chunks.get(k) {
            Some(c) => c,
            None => &self.tail,
        }
    }

    /// The number of full chunks.
    pub fn full_chunks(&self) -> usize {
        self.chunks.len()
    }

    /// Full chunk `k`, shared; `None` when `k` is not a full chunk.
    pub fn chunk(&self, k: usize) -> Option<&Arc<[T]>> {
        self.chunks.get(k)
    }
}

impl<T: Clone> Chunked<T> {
    /// Shortens the log to `len` elements; does nothing when `len >=
    /// self.len()`. When `len` falls inside a full (possibly shared) chunk,
    /// that chunk's first `len % CHUNK` elements are cloned into a new tail;
    /// the shared chunk itself is never modified.
    pub fn truncate(&mut self, len: usize) {
        if len >= self.len() {
            return;
        }
        let (full, rem) = (len / CHUNK, len % CHUNK);
        if full < self.chunks.len() {
            self.tail = self.head_of(full, rem);
            self.chunks.truncate(full);
        } else {
            self.tail.truncate(rem);
        }
    }

    /// A new log holding the elements `[0, len)`, sharing every full chunk
    /// that lies entirely inside the prefix: `len / CHUNK` reference-count
    /// increments plus at most `CHUNK - 1` element clones.
    ///
    /// # Panics
    ///
    /// When `len > self.len()`.
    pub fn prefix(&self, len: usize) -> Chunked<T> {
        assert!(
            len <= self.len(),
            "prefix length {len} is out of range for a log of {} elements",
            self.len()
        );
        let (full, rem) = (len / CHUNK, len % CHUNK);
        Chunked {
            chunks: self.chunks[..full].to_vec(),
            tail: self.head_of(full, rem),
        }
    }

    /// Appends clones of every element of `values`.
    pub fn extend_from_slice(&mut self, values: &[T]) {
        for v in values {
            self.push(v.clone());
        }
    }

    /// All elements, cloned into a `Vec`.
    pub fn to_vec(&self) -> Vec<T> {
        let mut out = Vec::with_capacity(self.len());
        for s in self.chunks() {
            out.extend_from_slice(s);
        }
        out
    }

    /// Clones of the first `rem` elements of segment `k`.
    fn head_of(&self, k: usize, rem: usize) -> Vec<T> {
        if rem == 0 {
            return Vec::new();
        }
        Self::tail_from(&self.segment(k)[..rem])
    }

    /// A fresh tail holding clones of `items` (`< CHUNK` of them).
    fn tail_from(items: &[T]) -> Vec<T> {
        items.to_vec()
    }
}

/// Resolves `range` against `0..len`, panicking like slice indexing.
pub(crate) fn bounds<R: RangeBounds<usize>>(range: R, len: usize) -> (usize, usize) {
    let a = match range.start_bound() {
        Bound::Included(&a) => a,
        Bound::Excluded(&a) => a.checked_add(1).expect("range start overflows usize"),
        Bound::Unbounded => 0,
    };
    let b = match range.end_bound() {
        Bound::Included(&b) => b.checked_add(1).expect("range end overflows usize"),
        Bound::Excluded(&b) => b,
        Bound::Unbounded => len,
    };
    assert!(a <= b, "range start {a} is greater than range end {b}");
    assert!(
        b <= len,
        "range end {b} is out of range for a log of {len} elements"
    );
    (a, b)
}

impl<T> Default for Chunked<T> {
    /// An empty log, like [`Chunked::new`].
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone> Clone for Chunked<T> {
    /// Shares every full chunk and clones only the tail (`< CHUNK`
    /// elements); the same cost as `self.prefix(self.len())`.
    fn clone(&self) -> Self {
        Chunked {
            chunks: self.chunks.clone(),
            tail: Self::tail_from(&self.tail),
        }
    }
}

impl<T> Index<usize> for Chunked<T> {
    type Output = T;

    /// The element at `index`.
    ///
    /// # Panics
    ///
    /// When `index >= self.len()`.
    fn index(&self, index: usize) -> &T {
        match self.get(index) {
            Some(x) => x,
            None => panic!(
                "index {index} is out of range for a log of {} elements",
                self.len()
            ),
        }
    }
}

impl<T> Extend<T> for Chunked<T> {
    /// Appends every item, in order.
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        for x in iter {
            self.push(x);
        }
    }
}

impl<T> FromIterator<T> for Chunked<T> {
    /// A log of the items, in order.
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut log = Chunked::new();
        log.extend(iter);
        log
    }
}

impl<T> From<Vec<T>> for Chunked<T> {
    /// A log of the vector's elements, moved (not cloned).
    fn from(v: Vec<T>) -> Self {
        v.into_iter().collect()
    }
}

impl<'a, T> IntoIterator for &'a Chunked<T> {
    type Item = &'a T;
    type IntoIter = Iter<'a, T>;

    /// Same as [`Chunked::iter`].
    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

impl<T: fmt::Debug> fmt::Debug for Chunked<T> {
    /// Formats like a list of the elements.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: PartialEq> PartialEq for Chunked<T> {
    /// Element-wise equality.
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl<T: Eq> Eq for Chunked<T> {}

impl<T: PartialEq> PartialEq<[T]> for Chunked<T> {
    fn eq(&self, other: &[T]) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl<T: PartialEq, const N: usize> PartialEq<[T; N]> for Chunked<T> {
    fn eq(&self, other: &[T; N]) -> bool {
        *self == other[..]
    }
}

impl<T: PartialEq> PartialEq<Vec<T>> for Chunked<T> {
    fn eq(&self, other: &Vec<T>) -> bool {
        *self == other[..]
    }
}

#[cfg(test)]
mod tests;

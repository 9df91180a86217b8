//! The iterators of a [`Chunked`] log: over its storage slices and over
//! its elements, both double-ended.

use std::fmt;
use std::iter::FusedIterator;
use std::slice;
use std::sync::Arc;

#[cfg(doc)]
use super::Chunked;
use super::CHUNK;

/// The storage slices of a range of a [`Chunked`] log, from
/// [`Chunked::chunks`] or [`Chunked::slice_iter`]. Double-ended; never
/// yields an empty slice.
pub struct SliceIter<'a, T> {
    /// The first, possibly partial, slice; empty once taken.
    pub(super) front: &'a [T],
    /// Full chunks strictly between `front` and `back`.
    pub(super) middle: slice::Iter<'a, Arc<[T]>>,
    /// The last, possibly partial, slice; empty once taken.
    pub(super) back: &'a [T],
}

impl<T> SliceIter<'_, T> {
    /// The number of elements in the slices not yet yielded.
    fn elements(&self) -> usize {
        self.front.len() + self.middle.len() * CHUNK + self.back.len()
    }
}

impl<T> Clone for SliceIter<'_, T> {
    fn clone(&self) -> Self {
        SliceIter {
            front: self.front,
            middle: self.middle.clone(),
            back: self.back,
        }
    }
}

impl<'a, T> Iterator for SliceIter<'a, T> {
    type Item = &'a [T];

    fn next(&mut self) -> Option<&'a [T]> {
        if !self.front.is_empty() {
            return Some(std::mem::take(&mut self.front));
        }
        if let Some(c) = self.middle.next() {
            return Some(c);
        }
        if !self.back.is_empty() {
            return Some(std::mem::take(&mut self.back));
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::from(!self.front.is_empty())
            + self.middle.len()
            + usize::from(!self.back.is_empty());
        (n, Some(n))
    }
}

impl<'a, T> DoubleEndedIterator for SliceIter<'a, T> {
    fn next_back(&mut self) -> Option<&'a [T]> {
        if !self.back.is_empty() {
            return Some(std::mem::take(&mut self.back));
        }
        if let Some(c) = self.middle.next_back() {
            return Some(c);
        }
        if !self.front.is_empty() {
            return Some(std::mem::take(&mut self.front));
        }
        None
    }
}

impl<T> ExactSizeIterator for SliceIter<'_, T> {}

impl<T> FusedIterator for SliceIter<'_, T> {}

impl<T: fmt::Debug> fmt::Debug for SliceIter<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.clone()).finish()
    }
}

/// An iterator over the elements of a [`Chunked`] log (or a range of it),
/// from [`Chunked::iter`], [`Chunked::iter_from`] or [`Chunked::range`].
/// Double-ended and exact-size; walks storage slices.
pub struct Iter<'a, T> {
    /// The slice being consumed from the front.
    front: slice::Iter<'a, T>,
    /// Slices not yet entered from either end.
    slices: SliceIter<'a, T>,
    /// The slice being consumed from the back.
    back: slice::Iter<'a, T>,
}

impl<'a, T> Iter<'a, T> {
    pub(super) fn new(slices: SliceIter<'a, T>) -> Self {
        Iter {
            front: [].iter(),
            slices,
            back: [].iter(),
        }
    }
}

impl<T> Clone for Iter<'_, T> {
    fn clone(&self) -> Self {
        Iter {
            front: self.front.clone(),
            slices: self.slices.clone(),
            back: self.back.clone(),
        }
    }
}

impl<'a, T> Iterator for Iter<'a, T> {
    type Item = &'a T;

    #[inline]
    fn next(&mut self) -> Option<&'a T> {
        loop {
            if let Some(x) = self.front.next() {
                return Some(x);
            }
            match self.slices.next() {
                Some(s) => self.front = s.iter(),
                None => return self.back.next(),
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.front.len() + self.slices.elements() + self.back.len();
        (n, Some(n))
    }

    fn count(self) -> usize {
        self.len()
    }

    fn last(mut self) -> Option<&'a T> {
        self.next_back()
    }

    /// Skips whole slices at a time: O(n / CHUNK).
    fn nth(&mut self, mut n: usize) -> Option<&'a T> {
        loop {
            let here = self.front.len();
            if n < here {
                return self.front.nth(n);
            }
            n -= here;
            match self.slices.next() {
                Some(s) => self.front = s.iter(),
                None => {
                    self.front = [].iter();
                    return self.back.nth(n);
                }
            }
        }
    }

    fn fold<B, F>(self, init: B, mut f: F) -> B
    where
        F: FnMut(B, &'a T) -> B,
    {
        let mut acc = self.front.fold(init, &mut f);
        for s in self.slices {
            acc = s.iter().fold(acc, &mut f);
        }
        self.back.fold(acc, f)
    }
}

impl<'a, T> DoubleEndedIterator for Iter<'a, T> {
    #[inline]
    fn next_back(&mut self) -> Option<&'a T> {
        loop {
            if let Some(x) = self.back.next_back() {
                return Some(x);
            }
            match self.slices.next_back() {
                Some(s) => self.back = s.iter(),
                None => return self.front.next_back(),
            }
        }
    }

    /// Skips whole slices at a time: O(n / CHUNK).
    fn nth_back(&mut self, mut n: usize) -> Option<&'a T> {
        loop {
            let here = self.back.len();
            if n < here {
                return self.back.nth_back(n);
            }
            n -= here;
            match self.slices.next_back() {
                Some(s) => self.back = s.iter(),
                None => {
                    self.back = [].iter();
                    return self.front.nth_back(n);
                }
            }
        }
    }

    fn rfold<B, F>(self, init: B, mut f: F) -> B
    where
        F: FnMut(B, &'a T) -> B,
    {
        let mut acc = self.back.rfold(init, &mut f);
        for s in self.slices.rev() {
            acc = s.iter().rfold(acc, &mut f);
        }
        self.front.rfold(acc, f)
    }
}

impl<T> ExactSizeIterator for Iter<'_, T> {}

impl<T> FusedIterator for Iter<'_, T> {}

impl<T: fmt::Debug> fmt::Debug for Iter<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.clone()).finish()
    }
}

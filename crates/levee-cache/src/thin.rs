//! [`ThinSlice`]: a boxed slice behind one pointer-sized field, with nothing allocated
//! when empty, for the lists a stored response usually leaves empty (surrogate keys,
//! Vary fields, header names outside the standard ones). At a million entries each
//! pointer-sized word of `Entry` is a megabyte, and the allocator rounds `Entry` up to
//! its next size class (96 bytes now; see ARCHITECTURE.md, "The memory tier").

use std::fmt;
use std::ops::Deref;

/// A boxed slice in 8 bytes (`Box<[T]>` takes 16): empty is `None`, else one more
/// allocation holds the slice's own pointer and length.
#[derive(Clone, PartialEq, Eq)]
pub struct ThinSlice<T>(Option<Box<Box<[T]>>>);

impl<T> ThinSlice<T> {
    /// Empty, in a constant (a `static` default to lend out).
    pub const EMPTY: ThinSlice<T> = ThinSlice(None);

    pub fn as_slice(&self) -> &[T] {
        match &self.0 {
            Some(b) => b,
            None => &[],
        }
    }
}

impl<T> Default for ThinSlice<T> {
    fn default() -> Self {
        ThinSlice(None)
    }
}

impl<T> Deref for ThinSlice<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T> From<Vec<T>> for ThinSlice<T> {
    fn from(v: Vec<T>) -> Self {
        ThinSlice::from(v.into_boxed_slice())
    }
}

impl<T> From<Box<[T]>> for ThinSlice<T> {
    fn from(b: Box<[T]>) -> Self {
        if b.is_empty() {
            ThinSlice(None)
        } else {
            ThinSlice(Some(Box::new(b)))
        }
    }
}

impl<T> FromIterator<T> for ThinSlice<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        ThinSlice::from(iter.into_iter().collect::<Vec<T>>())
    }
}

impl<T: fmt::Debug> fmt::Debug for ThinSlice<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_slice(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_allocates_nothing_and_reads_as_empty() {
        assert_eq!(std::mem::size_of::<ThinSlice<u64>>(), 8);
        let e: ThinSlice<u64> = Vec::new().into();
        assert!(e.0.is_none());
        assert!(e.is_empty());
        let t: ThinSlice<u64> = vec![1, 2].into();
        assert_eq!(&*t, &[1, 2]);
        assert_eq!(t, ThinSlice::from(vec![1, 2]));
        assert_ne!(t, e);
        assert_eq!(format!("{t:?}"), "[1, 2]");
        assert_eq!([1, 2].into_iter().collect::<ThinSlice<u64>>(), t);
    }
}

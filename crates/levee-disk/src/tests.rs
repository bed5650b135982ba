//! Unit tests of the whole tier that need its insides (a paused writer).

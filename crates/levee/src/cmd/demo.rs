//! `levee demo`: placeholder until the embedded origin lands.

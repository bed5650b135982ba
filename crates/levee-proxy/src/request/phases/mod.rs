//! The steps of a request, one module each. The driver (`request/mod.rs`) calls them
//! in order and carries out what each returns; a phase never calls another phase,
//! only the helpers of `request/` (respond, next, route, site, shared, ...).
//! `tests/it/structure.rs` keeps it so.

pub(super) mod acme;
pub(super) mod classify;
pub(super) mod files;
pub(super) mod fill;
pub(super) mod harden;
pub(super) mod https;
pub(super) mod lookup;
pub(super) mod malformed;
pub(super) mod max_forwards;
pub(super) mod pass;
pub(super) mod purge;
pub(super) mod range_miss;
pub(super) mod rules;
pub(super) mod upgrade;

//! levee-cache

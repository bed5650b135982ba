//! levee-config

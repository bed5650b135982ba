//! levee-proxy

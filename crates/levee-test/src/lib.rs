//! levee-test

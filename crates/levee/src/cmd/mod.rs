//! One module per subcommand.

pub mod demo;
pub mod doctor;
pub mod origin;
pub mod purge;
pub mod reload;
pub mod serve;

//! One module per subcommand.

pub mod demo;
pub mod origin;
pub mod purge;
pub mod reload;
pub mod serve;

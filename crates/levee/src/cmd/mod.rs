//! One module per subcommand.

pub mod completions;
pub mod demo;
pub mod doctor;
pub mod manpage;
pub mod origin;
pub mod purge;
pub mod reload;
pub mod serve;

//! One module per subcommand, each with its clap `Args` and a `run`
//! returning how it ended.

pub(crate) mod bench;
pub(crate) mod cluster;
pub(crate) mod cluster_args;
pub(crate) mod consume;
pub(crate) mod demo;
pub(crate) mod dump;
pub(crate) mod log_args;
pub(crate) mod manifest;
pub(crate) mod produce;
pub(crate) mod recover;
pub(crate) mod remote;
pub(crate) mod stat;
pub(crate) mod verify;
pub(crate) mod write;

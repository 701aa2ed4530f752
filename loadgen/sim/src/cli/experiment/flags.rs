//! The `simulate` flags a trace experiment builds its runs from (cluster, model and
//! trace selection), parsed from an argument list the experiment writes: one
//! definition for the fairness, priorities and gangs experiments.

use crate::cli::simulate::{ClusterArgs, ModelArgs};
use crate::trace::options::TraceOptionsArgs;
use clap::Parser;

#[derive(Parser, Debug)]
pub struct TraceFlags {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub selection: TraceOptionsArgs,
}

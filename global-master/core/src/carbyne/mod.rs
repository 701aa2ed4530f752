//! Job ordering policies for the GM's pass, Carbyne's altruistic scheduling among
//! them (Grandl et al., OSDI'16, Pseudocode 1). Pure: time comes in as an argument,
//! the only randomness (which jobs are altruistic, P(altruism)) is a seeded hash.
//!
//! The GM's queues serve tasks in key order; with a policy other than
//! [`JobOrder::Fifo`] (today's behaviour, the default) the GM takes its waiting tasks
//! out at a replanning point (job arrival, job end, task end; at most once per
//! [`OrderConfig::replan_every`]) and queues them again in the order [`plan`] gives.
//! The placement pipeline still decides where each task goes, node by node.
//!
//! Layout: [`config`] (the policy and its knobs); [`model`] (what a job still has to do, the planner's input); [`intra`]
//! (per job: T_k under its share and the reverse-packed schedule: which runnable
//! tasks must start now); [`order`] (the policies: DRF progressive filling, Tetris
//! packing, SJF by critical path, and Carbyne's inter-job / intra-job / leftover
//! steps); [`ledger`] (the GM's record of what each job runs, and when to replan).

pub mod config;
pub mod intra;
pub mod ledger;
pub mod model;
pub mod order;
#[cfg(test)]
mod tests;

pub use config::{JobOrder, OrderConfig};
pub use ledger::JobOrdering;
pub use model::{JobWork, Runnable, StageWork};
pub use order::plan;

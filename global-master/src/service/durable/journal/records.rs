//! The records the journal reads back: how a task ended, and a submission, a job with what
//! happened to it so far (see [`super`]). A leaf.

use common::dag::JobDag;
use common::messages::TaskFailure;
use common::retry::RetryPolicy;
use common::{JobId, Micros, TaskSpec};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a submission said of its job as a whole.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Accepted {
    pub accepted_at: Micros,
    /// The submitting user, when the GM knows users.
    pub user: Option<String>,
    /// The job's own retry policy (`None`: the GM's default).
    pub retry: Option<RetryPolicy>,
    /// The submission's `Idempotency-Key`, written with the job (in the same
    /// transaction) so that a GM killed before the key store took it still answers
    /// a retried submission with this job instead of making a second one.
    pub idempotency: Option<crate::service::durable::idempotency::KeyOf>,
}

/// How a task ended, as its status shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ended {
    /// The run that ended (1 for the first).
    pub attempt: u32,
    pub at: Micros,
    pub node: u32,
    pub failure: Option<TaskFailure>,
    /// Cancelled with its job (then `failure` is `None` and `node` meaningless).
    pub cancelled: bool,
}

/// A job read back from the journal: its tasks, and those that already ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Recovered {
    pub job: JobId,
    pub accepted: Accepted,
    pub tasks: Vec<TaskSpec>,
    pub ended: BTreeMap<u32, Ended>,
    /// Task index -> (the last run it went out as, its runs failed so far), for
    /// tasks retried or resumed before.
    pub runs: BTreeMap<u32, (u32, u32)>,
    /// Its DAG, for a DAG job.
    pub dag: Option<Arc<JobDag>>,
    /// Its name and labels.
    pub names: crate::service::admission::api::JobNames,
    /// Its gang spec, for a gang job.
    pub gang: Option<common::gang::GangSpec>,
}

//! The JSON answers of the public API that are not views of the GM's state (those
//! live with the state: [`crate::service::observe::status`], [`crate::service::observe::nodes`], [`crate::service::observe::report`]): what
//! a submission returns, `/healthz`, and every refusal. Typed, so that the OpenAPI
//! document ([`crate::service::http::openapi`]) is generated from what the handlers really send.

use serde::Serialize;
use utoipa::ToSchema;

/// `202` to `POST /v1/jobs`: the job's id and its tasks' ids (`job.index`).
#[derive(Debug, Serialize, ToSchema)]
pub struct JobAccepted {
    pub job: u64,
    pub tasks: Vec<String>,
}

/// `202` to `POST /v1/lras`: the LRA's id, also the job id of its containers.
#[derive(Debug, Serialize, ToSchema)]
pub struct LraAccepted {
    pub lra: u64,
    pub job: u64,
    pub tasks: Vec<String>,
}

/// Every 4xx/5xx answer: why, and the field at fault (a JSON path, a query
/// parameter, or `designated_gm`) when one is.
#[derive(Debug, Serialize, ToSchema)]
pub struct Refusal {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    pub error: String,
}

/// `GET /healthz`: open (no credential), so it shows counts only.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok`, or `degraded` while some LM's state has not arrived for a while
    /// (`silent_lms`).
    pub status: HealthStatus,
    pub silent_lms: Vec<usize>,
    /// True once the state of every LM arrived.
    pub ready: bool,
    pub queued: usize,
    pub outstanding: usize,
    pub nodes: usize,
    pub capacity: common::Resources,
    /// The state subscription's link; absent (null) without a broker (embedded).
    pub broker_connected: Option<bool>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HealthStatus {
    Ok,
    Degraded,
}

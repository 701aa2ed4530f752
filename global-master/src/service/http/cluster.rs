//! `GET /v1/cluster`: the LMs' authoritative node lists, fetched from each LM's
//! `GET /v1/nodes` (with the cluster credential) and relayed side by side: per node
//! its partition, free and used resources, whether it is down and what it lends to
//! other partitions as logical nodes. The GM's own `GET /v1/nodes` is its (eventually
//! consistent) view, which knows neither down nodes nor logical ones.
//!
//! One LM that does not answer within [`LM_TIMEOUT`] is listed with its error; the
//! others still show. A GM without LM URLs (embedded mode) answers an empty list.

use super::state::ApiState;
use crate::service::actor::GmActor;
use actix::prelude::*;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use std::time::Duration;

/// How long each LM may take to answer.
pub const LM_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug, Serialize)]
pub struct ClusterView {
    pub lms: Vec<LmAnswer>,
    /// The node attribute names jobs may use in `constraints` and utility trees, with
    /// their constraint bits (the GM's `--cluster-file`); empty when the cluster names
    /// none (then constraints are numbers, and trees name them `c0` .. `c63`).
    pub attributes: std::collections::BTreeMap<String, usize>,
}

#[derive(Debug, Serialize)]
pub struct LmAnswer {
    pub lm: u16,
    pub url: String,
    /// The LM's `GET /v1/nodes` answer, as it came.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<serde_json::Value>,
    /// Why there is no state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The LMs' base URLs (index = LM id).
#[derive(Message, Debug)]
#[rtype(result = "Vec<String>")]
pub struct GetLmUrls;

impl Handler<GetLmUrls> for GmActor {
    type Result = MessageResult<GetLmUrls>;

    fn handle(&mut self, _: GetLmUrls, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.lm_urls().to_vec())
    }
}

#[utoipa::path(get, path = "/v1/cluster", tag = "scheduler",
    responses(
        (status = 200, description = "Each LM's own node list (its GET /v1/nodes: down nodes, resources lent to other partitions), or the error reaching it. Its shape follows the LMs' and may change; see docs/dashboard.md", body = Object),
        (status = 401, description = "No, or an unknown, bearer token", body = super::answers::Refusal),
        (status = 503, description = "The GM is shutting down", body = super::answers::Refusal),
    ))]
pub async fn serve(
    State(s): State<ApiState>,
    caller: Option<axum::Extension<crate::service::admission::users::Caller>>,
) -> Response {
    let caller = super::state::caller_of(caller);
    let urls = match s.gm.send(GetLmUrls).await {
        Ok(urls) => urls,
        Err(e) => return super::state::unavailable(&e.to_string()),
    };
    let asks = urls.into_iter().enumerate().map(|(lm, url)| async move {
        let (state, error) = match fetch(&url).await {
            Ok(v) => (Some(v), None),
            Err(e) => {
                tracing::debug!(lm, %url, error = %e, "LM state not fetched for /v1/cluster");
                (None, Some(e))
            }
        };
        LmAnswer {
            lm: lm as u16,
            url,
            state,
            error,
        }
    });
    let mut lms = futures_util::future::join_all(asks).await;
    if !caller.admin {
        hide_others_tasks(&s.auth, &caller, &mut lms).await;
    }
    let names = &s.queues.attributes;
    let attributes = if names.is_numbered() {
        Default::default()
    } else {
        names.names().map(|(n, b)| (n.to_owned(), b)).collect()
    };
    Json(ClusterView { lms, attributes }).into_response()
}

async fn fetch(base: &str) -> Result<serde_json::Value, String> {
    let url = format!("{}/v1/nodes", base.trim_end_matches('/'));
    let answer = super::logs::client()
        .get(&url)
        .timeout(LM_TIMEOUT)
        .send()
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    let status = answer.status();
    if !status.is_success() {
        let body = answer.text().await.unwrap_or_default();
        return Err(format!("{url} answered {status}: {body}"));
    }
    answer.json().await.map_err(|e| format!("{url}: {e}"))
}

/// The job of a task as the LMs write it (`job.index`).
fn job_of(task: &str) -> Option<u64> {
    task.split('.').next()?.parse().ok()
}

/// Takes out of the LMs' lists every task (`nodes[].tasks[]`, `nodes[].lent[]`) of a
/// job the (non-admin) caller may not see: a user learns the load of each node, not
/// which jobs of others run there (issue 32).
async fn hide_others_tasks(
    auth: &crate::service::admission::users::GmAuth,
    caller: &crate::service::admission::users::Caller,
    lms: &mut [LmAnswer],
) {
    let mut jobs = std::collections::BTreeSet::new();
    let nodes = |lms: &mut [LmAnswer]| -> Vec<serde_json::Value> {
        lms.iter()
            .filter_map(|l| l.state.as_ref()?.get("nodes")?.as_array().cloned())
            .flatten()
            .collect()
    };
    for node in nodes(lms) {
        let tasks = node["tasks"].as_array().into_iter().flatten();
        let lent = node["lent"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|l| &l["task"]);
        jobs.extend(tasks.chain(lent).filter_map(|t| job_of(t.as_str()?)));
    }
    let mut visible = std::collections::BTreeSet::new();
    for job in jobs {
        if auth.owns(caller, job).await {
            visible.insert(job);
        }
    }
    let keep = |t: &serde_json::Value| {
        t.as_str()
            .and_then(job_of)
            .is_some_and(|j| visible.contains(&j))
    };
    for lm in lms.iter_mut() {
        let Some(nodes) = lm
            .state
            .as_mut()
            .and_then(|s| s.get_mut("nodes"))
            .and_then(|n| n.as_array_mut())
        else {
            continue;
        };
        for node in nodes {
            if let Some(tasks) = node.get_mut("tasks").and_then(|t| t.as_array_mut()) {
                tasks.retain(keep);
            }
            if let Some(lent) = node.get_mut("lent").and_then(|t| t.as_array_mut()) {
                lent.retain(|l| keep(&l["task"]));
            }
        }
    }
}

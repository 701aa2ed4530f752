//! `after_jobs` naming jobs of other GMs, checked at submission: each is asked of
//! its GM with the submitter's token (`GET /v1/jobs/{id}`, forwarded as any request
//! naming another GM's job), so that another user's job answers exactly like a
//! missing one there, and its outcome so far is known. The job is accepted only
//! when every one answered; a GM that does not is a 503 naming it (nothing
//! accepted). After acceptance, [`crate::service::actor::remote_after::watch`]
//! follows them.

use super::api::ApiError;
use super::route::{job_owner, Route};
use axum::http::HeaderMap;
use common::dag::JobDag;
use common::{GmId, JobId};

/// Each job of another GM in `dag.after_jobs` with its outcome now (`None`: not
/// ended), or the refusal naming `after_jobs[i].job`. Jobs of this GM are left to
/// the GM's actor; so is everything when this GM knows no other GM.
pub async fn check(
    route: Option<&Route>,
    headers: &HeaderMap,
    dag: Option<&JobDag>,
) -> Result<Vec<(JobId, Option<bool>)>, ApiError> {
    let (Some(route), Some(dag)) = (route, dag) else {
        return Ok(Vec::new());
    };
    let mut elsewhere = Vec::new();
    for (index, after) in dag.after_jobs.iter().enumerate() {
        let job = after.job.0;
        let owner = GmId(job_owner(job));
        if owner == route.me || route.url_of(owner).is_none() {
            continue;
        }
        let field = format!("after_jobs[{index}].job");
        let answer =
            super::route::get_json(route, owner, headers, &format!("/v1/jobs/{job}")).await;
        let state = match answer {
            Ok(status) => status["state"].as_str().unwrap_or("active").to_owned(),
            // Unknown there, or another user's (the same answer): as on this GM.
            Err(e) if e.status == Some(404) => {
                return Err(ApiError::new(
                    400,
                    field,
                    format!("job {job} is unknown to GM {}", owner.0),
                ));
            }
            Err(e) => {
                tracing::warn!(gm = %route.me, other = %owner, job, error = %e.error, "after_jobs: the job's GM did not answer; not accepted");
                return Err(ApiError::new(
                    503,
                    field,
                    format!(
                        "cannot check job {job} at its GM {}: {}; not accepted, retry later",
                        owner.0, e.error
                    ),
                ));
            }
        };
        let outcome = match state.as_str() {
            "active" => None,
            ended => Some(ended == "finished"),
        };
        elsewhere.push((after.job, outcome));
    }
    Ok(elsewhere)
}

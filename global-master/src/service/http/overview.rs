//! `GET /v1/overview`: what the dashboard shows beyond the other routes (see
//! [`crate::service::observe::overview`]).

use crate::service::observe::overview::GetOverview;

/// How many jobs and events `GET /v1/overview` answers.
const NEWEST: usize = 50;

/// `GET /v1/overview`: a user sees their own jobs and the events of their jobs only.
#[utoipa::path(get, path = "/v1/overview", tag = "scheduler",
    responses(
        (status = 200, description = "What the dashboard shows beyond the other routes: queues with their shares and usage, Jain's index, the allocation-time histogram, the newest jobs and events (a user's own only), counters. Its shape follows the dashboard and may change; see docs/dashboard.md", body = Object),
        (status = 401, description = "No, or an unknown, bearer token", body = super::answers::Refusal),
        (status = 503, description = "The GM is shutting down", body = super::answers::Refusal),
    ))]
pub async fn serve(
    axum::extract::State(s): axum::extract::State<super::state::ApiState>,
    caller: Option<axum::Extension<crate::service::admission::users::Caller>>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let caller = super::state::caller_of(caller);
    let ask = GetOverview {
        user: (!caller.admin).then(|| caller.user.to_string()),
        jobs: NEWEST,
        fairness: s.queues.fairness.clone(),
    };
    match s.gm.send(ask).await {
        Ok(mut overview) => {
            overview
                .events
                .retain(|e| s.auth.may_see(&caller, e.task.job.0));
            overview.events.truncate(NEWEST);
            axum::Json(overview).into_response()
        }
        Err(e) => super::state::unavailable(&e.to_string()),
    }
}

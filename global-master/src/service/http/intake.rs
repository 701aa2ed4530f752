//! What comes in to be scheduled: a user's job (`POST /v1/jobs`) and an LM's
//! messages (`POST /v1/internal/messages`).

use super::state::{caller_of, error, unavailable, ApiState};
use crate::service::actor::deliver::Deliver;
use crate::service::actor::{SubmitJob, SubmitRefused};
use crate::service::admission::api::{parse_job_request, ApiError, JobRequest};
use crate::service::admission::priority_api::resolve_priority;
use crate::service::admission::users::{check_class, check_queue, Caller};
use crate::service::http::answers::{JobAccepted, Refusal};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use common::codec;
use common::protocol::LmToGm;
use serde_json::json;

#[utoipa::path(post, path = "/v1/jobs", tag = "jobs",
    request_body = JobRequest,
    responses(
        (status = 202, description = "Accepted (durable): the ids", body = JobAccepted,
            links(
                ("job" = (operation_id = "job", parameters(("id" = "$response.body#/job")))),
                ("cancel" = (operation_id = "cancel", parameters(("id" = "$response.body#/job")))),
                ("task" = (operation_id = "task", parameters(("job" = "$response.body#/job"), ("index" = json!(0))))),
                ("logs" = (operation_id = "task_logs", parameters(("job" = "$response.body#/job"), ("index" = json!(0))))),
            )),
        (status = 400, description = "Not JSON of this shape; `field` is the JSON path", body = Refusal),
        (status = 401, description = "No, or an unknown, bearer token", body = Refusal),
        (status = 403, description = "A queue the user may not use, another user named, or a preempting priority class the user may not use", body = Refusal),
        (status = 413, description = "More tasks than --max-job-tasks", body = Refusal),
        (status = 421, description = "A queue served by another GM (named in `error`)", body = Refusal),
        (status = 422, description = "A value out of range; `field` is the JSON path", body = Refusal),
        (status = 429, description = "The GM is full (--max-queued), or the user is over its preempting_jobs_per_minute; retry after `Retry-After` seconds",
            body = Refusal, headers(("Retry-After" = u32, description = "Seconds to wait"))),
        (status = 502, description = "GUARANTEED work: the designated GM did not answer", body = Refusal),
        (status = 503, description = "Shutting down, or the journal failed: not accepted", body = Refusal),
    ))]
pub(crate) async fn submit(
    State(s): State<ApiState>,
    caller: Option<Extension<Caller>>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    let caller = caller_of(caller);
    let mut job = match parse_job_request(&body, s.max_job_tasks, &s.queues) {
        Ok(j) => j,
        Err(e) => return error(e),
    };
    let class = match resolve_priority(&mut job, &s.priorities) {
        Ok(class) => class,
        Err(e) => return error(e),
    };
    for (i, t) in job.tasks.iter().enumerate() {
        let field = format!("tasks[{i}].queue");
        if let Some(refused) = check_queue(&s.auth, &caller, &s.queues, t.queue, &field) {
            return refused;
        }
    }
    // A preempting class is the caller's to use only if the tokens file says so;
    // judged on the class resolved above, before anything is forwarded or reserved.
    if let Some(refused) = check_class(&s.auth, &caller, &class, service_kit::clock::now()) {
        return refused;
    }
    // The job's user is who is calling; only an admin (or open mode) may name another.
    let user = match (&job.user, caller.admin) {
        (Some(named), false) if named.as_str() != &*caller.user => {
            return crate::service::admission::users::forbidden_user(&s.auth, &caller, named);
        }
        (named, true) => named.clone(),
        (_, false) => Some(caller.user.to_string()),
    };
    if job.tasks.iter().any(|t| t.kind.needs_designated_gm()) {
        let route = s.route.as_deref();
        let method = reqwest::Method::POST;
        let routed = crate::service::admission::route::to_designated(
            route,
            &headers,
            method,
            "/v1/jobs",
            Some(body.clone()),
        );
        if let crate::service::admission::route::Routed::Answered(r) = routed.await {
            return r;
        }
    }
    if let Some(l) = s.limits.as_ref().filter(|l| l.publisher.backlogged()) {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "2")],
            Json(json!({
                "error": format!("the broker is behind: {} bytes of events wait for it; retry later", l.publisher.pending_bytes()),
            })),
        )
            .into_response();
    }
    let now = service_kit::clock::now();
    // Jobs of other GMs it runs after: checked there with the caller's token.
    let after_elsewhere = match crate::service::admission::remote_after::check(
        s.route.as_deref(),
        &headers,
        job.dag.as_deref(),
    )
    .await
    {
        Ok(elsewhere) => elsewhere,
        Err(e) => return error(e),
    };
    let reservation = match s
        .idempotency
        .before_submit(&headers, &caller.user, &body, now)
    {
        Ok(r) => r,
        Err(answer) => return *answer,
    };
    let submit = SubmitJob {
        tasks: job.tasks,
        retry: job.retry,
        user,
        dag: job.dag,
        admin: caller.admin,
        idempotency: reservation.as_ref().map(|r| r.key_of()),
        names: job.names,
        after_elsewhere,
        spec: Some(pack_spec(body.clone()).await),
        utility: job.utility,
        gang: job.gang,
    };
    // The submission and its key's settling run on their own task: a client that
    // gives up drops this handler, not the submission, so its key is settled with
    // the job it created (a retry gets that job) instead of staying in flight.
    let gm = s.gm.clone();
    let handled = tokio::spawn(async move {
        let sent = gm.send(submit).await;
        if let Some(r) = reservation {
            let created = match &sent {
                Ok(Ok((job, ids))) => Some((*job, ids.len() as u32, now)),
                _ => None,
            };
            r.settle(created);
        }
        sent
    });
    let sent = match handled.await {
        Ok(sent) => sent,
        Err(e) => return unavailable(&format!("the submission failed: {e}")),
    };
    match sent {
        Ok(Ok((job, ids))) => {
            s.auth.record_owner(job.0, &caller);
            crate::service::durable::idempotency::accepted(job, ids.len() as u32, false)
        }
        Ok(Err(SubmitRefused::QueueFull { held, limit })) => (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, "1")],
            Json(json!({
                "field": "tasks",
                "error": format!("the GM holds {held} tasks (limit {limit}); retry later"),
            })),
        )
            .into_response(),
        Ok(Err(SubmitRefused::UnknownJob { index, job })) => error(ApiError::new(
            400,
            format!("after_jobs[{index}].job"),
            format!("job {job} is unknown to this GM"),
        )),
        Ok(Err(SubmitRefused::OtherGm { index, job, gm })) => error(ApiError::new(
            400,
            format!("after_jobs[{index}].job"),
            format!("job {job} belongs to GM {gm}, whose URL this GM does not know (--gm-url): it cannot check it"),
        )),
        Ok(Err(SubmitRefused::ShuttingDown)) => unavailable("shutting down"),
        Ok(Err(SubmitRefused::JournalFailed)) => {
            unavailable("cannot write the job to this GM's journal (see its log); not accepted")
        }
        Err(e) => unavailable(&e.to_string()),
    }
}

/// The submission's body packed as its spec (see
/// [`crate::service::durable::specs`]); large bodies off the async threads.
async fn pack_spec(body: Bytes) -> crate::service::durable::specs::Packed {
    use crate::service::durable::specs::{pack, Packed};
    if body.len() <= 1 << 20 {
        return pack(&body);
    }
    tokio::task::spawn_blocking(move || pack(&body))
        .await
        .unwrap_or(Packed::TooLarge { packed: usize::MAX })
}

pub(super) async fn from_lm(
    State(s): State<ApiState>,
    signer: Option<Extension<service_kit::auth::signed::Identity>>,
    body: Bytes,
) -> Response {
    let messages: Vec<LmToGm> = match s.cluster.decode(&body, "/v1/internal/messages") {
        Ok(m) => m,
        Err(e) => return error(ApiError::new(400, "body", e.to_string())),
    };
    // An LM with a credential of its own speaks only for itself (issue 32): one
    // message naming another LM refuses the whole call.
    if let Some(id) = signer.and_then(|e| e.0.id) {
        if let Some(m) = messages.iter().find(|m| m.lm().0 != id) {
            s.auth
                .guard
                .counters
                .forbidden
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!(signer = id, names = %m.lm(), kind = m.kind(), "LM message refused: signed by one LM, naming another");
            return error(ApiError::new(
                403,
                "lm",
                format!("signed by lm {id}, a {} names {}", m.kind(), m.lm()),
            ));
        }
    }
    // All or nothing: one message for another GM refuses the whole call.
    if let Some(m) = messages.iter().find(|m| !m.is_for(s.queues.me)) {
        return error(ApiError::new(
            422,
            "gm",
            format!(
                "a {} message for {:?} sent to {}",
                m.kind(),
                m.to(),
                s.queues.me
            ),
        ));
    }
    for message in messages {
        if let Err(e) = s.gm.send(Deliver(crate::core::GmInput::Lm(message))).await {
            return unavailable(&e.to_string());
        }
    }
    match s.cluster.encode(&()) {
        Ok(b) => ([(header::CONTENT_TYPE, codec::CONTENT_TYPE)], b).into_response(),
        Err(e) => unavailable(&e.to_string()),
    }
}

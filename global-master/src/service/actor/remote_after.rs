//! Jobs that run after jobs of other GMs (`after_jobs` across GMs): the submission
//! checked the other job at its GM with the submitter's token (see
//! [`crate::service::admission::remote_after`]); from then on this GM asks each
//! awaited job's GM for its outcome every [`POLL`] on `GET /v1/internal/jobs/{id}`
//! (as a GM, [`watch`]) until it ended, and tells its core as for a job of its own.
//! A GM restarted on its journal resumes its DAG jobs and asks again. The other GM
//! answers from its tracker or, once it forgot the job, from its journal's outcomes;
//! a job it knows nothing of (no journal, or long gone) is taken as failed (logged).
//! A GM that does not answer is asked again at the next poll (logged, counted).

use super::GmActor;
use crate::core::GmInput;
use crate::service::admission::route::{job_owner, Route};
use crate::service::observe::status::JobState;
use actix::{Addr, Context, Handler, Message};
use common::JobId;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How often an awaited job of another GM is asked for.
pub const POLL: Duration = Duration::from_secs(1);

/// What this GM knows of one of its jobs: `None` unknown, `Some(None)` not ended,
/// `Some(Some(ok))` ended (`ok`: finished).
#[derive(Message, Debug)]
#[rtype(result = "Option<Option<bool>>")]
pub struct JobOutcome(pub JobId);

impl Handler<JobOutcome> for GmActor {
    type Result = Option<Option<bool>>;
    fn handle(&mut self, msg: JobOutcome, _: &mut Context<Self>) -> Self::Result {
        match self.tracker.job(msg.0) {
            Some(s) if s.state == JobState::Active => Some(None),
            Some(s) => Some(Some(s.state == JobState::Finished)),
            None => self.journal_outcome(msg.0).map(Some),
        }
    }
}

/// The jobs of other GMs that jobs of this GM wait for.
#[derive(Message, Debug)]
#[rtype(result = "Vec<JobId>")]
pub struct AwaitedElsewhere;

impl Handler<AwaitedElsewhere> for GmActor {
    type Result = Vec<JobId>;
    fn handle(&mut self, _: AwaitedElsewhere, _: &mut Context<Self>) -> Self::Result {
        let me = self.gm().0;
        self.core
            .dags()
            .awaited_jobs()
            .filter(|j| job_owner(j.0) != me)
            .collect()
    }
}

/// A job of another GM that jobs here wait for ended (`ok`: finished).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct EndedElsewhere {
    pub job: JobId,
    pub ok: bool,
}

impl Handler<EndedElsewhere> for GmActor {
    type Result = ();
    fn handle(&mut self, msg: EndedElsewhere, ctx: &mut Context<Self>) {
        if !self.core.dags().awaits(msg.job) {
            return;
        }
        tracing::info!(
            job = msg.job.0,
            ok = msg.ok,
            "a job of another GM that jobs here run after ended"
        );
        self.deliver(
            GmInput::JobEnded {
                job: msg.job,
                ok: msg.ok,
            },
            ctx,
        );
    }
}

/// Asks, every [`POLL`], each awaited job's GM for its outcome and tells `gm` of
/// those that ended. Runs until `gm` stops.
pub async fn watch(gm: Addr<GmActor>, route: Arc<Route>) {
    let counters = &route.counters.after_polls;
    let no_user = axum::http::HeaderMap::new();
    loop {
        tokio::time::sleep(POLL).await;
        let Ok(jobs) = gm.send(AwaitedElsewhere).await else {
            return;
        };
        for job in jobs {
            let owner = common::GmId(job_owner(job.0));
            let path = format!("/v1/internal/jobs/{}", job.0);
            let ok = match crate::service::admission::route::get_json(
                &route, owner, &no_user, &path,
            )
            .await
            {
                Ok(v) => match v["state"].as_str() {
                    Some("active") | None => {
                        counters.active.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    Some(state) => {
                        counters.ended.fetch_add(1, Ordering::Relaxed);
                        state == "finished"
                    }
                },
                Err(e) if e.status == Some(404) => {
                    counters.unknown.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(job = job.0, gm = %owner, "a job that jobs here run after is unknown to its GM (forgotten, or a GM without a journal restarted): taken as failed");
                    false
                }
                Err(e) => {
                    counters.unanswered.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(job = job.0, gm = %owner, error = %e.error, "cannot ask a GM about a job that jobs here run after; asking again");
                    continue;
                }
            };
            if gm.send(EndedElsewhere { job, ok }).await.is_err() {
                return;
            }
        }
    }
}

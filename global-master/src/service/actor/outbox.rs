//! The actor's requests to the LMs: each over its LM's link, sent again while the
//! LM may have carried it out without answering; the answer, a busy LM or a request
//! the transport gave up on comes back as an input (see [`super::deliver`]).

use super::deliver::{Deliver, StillInDoubt};
use super::GmActor;
use crate::core::{GmInput, Undelivered};
use actix::prelude::*;
use common::protocol::GmToLm;
use common::Micros;
use service_kit::links::{call_until_settled_refreshing, LinkError};

impl GmActor {
    /// Sends one request to its LM. A request the LM may have carried out without
    /// answering is sent again (see [`call_until_settled_refreshing`]: the LM answers a repeat
    /// from its record); the answer comes back as an input, and so does a request the
    /// transport gave up on ([`GmInput::Undelivered`]: its tasks go back to their
    /// queues).
    pub(super) fn send(&mut self, message: GmToLm, ctx: &mut Context<Self>) {
        let lm = message.lm();
        let what = message.describe();
        let Some(link) = self.links.get(lm.index()).cloned() else {
            tracing::error!(%lm, what, "no link to this LM");
            ctx.notify(Deliver(GmInput::Undelivered(Undelivered::of(&message))));
            return;
        };
        match &message {
            GmToLm::Launch(_) => self.metrics.batches_sent += 1,
            GmToLm::Preempt(p) => {
                self.preempt.requests += 1;
                tracing::info!(task = %p.task.id, job = p.task.id.job.0, %lm, victim = %p.victim, "asking the LM to preempt");
            }
            GmToLm::Cancel(c) => {
                tracing::debug!(job = c.job.0, %lm, "asking the LM to stop a cancelled job's tasks");
            }
            GmToLm::Reconcile(r) if !r.preempts.is_empty() => {
                tracing::warn!(%lm, requests = r.preempts.len(), "final answer of held preemption requests overdue: asking the LM whether it still holds them or launched them (their tasks stay out of the queues until it answers)");
            }
            GmToLm::Reconcile(_) => {}
            GmToLm::Gang(g) => {
                tracing::debug!(job = g.job.0, %lm, generation = g.generation, op = g.op.label(), "gang request");
            }
        }
        let me = ctx.address();
        let doubt_timeout = self.doubt_timeout;
        let fence = self.fence.clone();
        tokio::spawn(async move {
            // A launch batch sent again keeps only the runs still in doubt: one whose
            // end came meanwhile would run again at an LM restarted since (it no
            // longer knows the batch).
            let asker = me.clone();
            let refresh = move |req: GmToLm| {
                let asker = asker.clone();
                async move {
                    match req {
                        GmToLm::Launch(batch) => {
                            match asker.send(StillInDoubt(batch.clone())).await {
                                Ok(rest) => rest.map(GmToLm::Launch),
                                // The actor is gone (shutting down): sent as it was.
                                Err(_) => Some(GmToLm::Launch(batch)),
                            }
                        }
                        other => Some(other),
                    }
                }
            };
            let settled =
                call_until_settled_refreshing(&link, &message, doubt_timeout, &what, refresh).await;
            let input = match settled {
                Ok(Some(answer)) => GmInput::Lm(answer),
                Ok(None) => return,
                // Nothing was applied: the work goes elsewhere while the LM is busy.
                Err(LinkError::Busy {
                    what: why,
                    retry_after,
                }) => {
                    tracing::info!(%lm, what, retry_after_ms = retry_after.as_millis() as u64, why, "LM busy: it applied nothing; its tasks go back to their queues and other LMs take new work until then");
                    GmInput::Busy {
                        request: Undelivered::of(&message),
                        retry_after: Micros(retry_after.as_micros() as u64),
                    }
                }
                Err(error) => {
                    if let Some(fence) = &fence {
                        fence.check(&error);
                    }
                    tracing::warn!(%lm, what, %error, "request to the LM failed; its tasks go back to their queues");
                    GmInput::Undelivered(Undelivered::of(&message))
                }
            };
            me.do_send(Deliver(input));
        });
    }
}

//! The actor's requests to the LMs: each over its LM's link, sent again while the
//! LM may have carried it out without answering; the answer, a busy LM or a request
//! the transport gave up on comes back as an input (see [`super::deliver`]).

use super::deliver::{Deliver, StillInDoubt};
use super::GmActor;
use crate::core::{GmInput, Undelivered};
use actix::prelude::*;
use common::protocol::facts::Side;
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
        self.metrics.sent.add(message.kind());
        for note in message.notes(Side::Sender) {
            service_kit::log_note!(&note, %lm);
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
                    let GmToLm::Launch(batch) = req else {
                        return Some(req);
                    };
                    match asker.send(StillInDoubt(batch.clone())).await {
                        Ok(rest) => rest.map(GmToLm::Launch),
                        // The actor is gone (shutting down): sent as it was.
                        Err(_) => Some(GmToLm::Launch(batch)),
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

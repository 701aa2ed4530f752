//! A graceful stop (SIGTERM): the GM stops accepting, keeps placing what is queued
//! for up to the drain timeout ([`drain`]), then says on the event stream what
//! becomes of the tasks it still holds in its queues ([`LeaveQueued`]):
//!
//! - a task in the journal (a job accepted by a GM with `--data-dir`, not every
//!   task ended) is taken up again by the GM's next life: `task.suspended`, not
//!   final, so an observer never sees a task `failed` and then `finished`;
//! - any other (no journal, or an LRA container, which is not journalled) will not
//!   run: `task.failed` ("shut down before placing it"), so no accepted task
//!   disappears unseen.
//!
//! Tasks already sent to an LM are not touched: their ends reach the LM, and a
//! restarted GM asks the LMs about them before resuming anything (see `resume`).

use crate::service::actor::queries::{GetLoad, StopAccepting};
use crate::service::actor::GmActor;
use actix::prelude::*;
use std::time::{Duration, Instant};

/// What [`LeaveQueued`] reported for the tasks still queued.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LeftQueued {
    /// In the journal: the next life resumes them (`task.suspended`).
    pub suspended: usize,
    /// Not in a journal: they will not run (`task.failed`).
    pub failed: usize,
}

/// The drain gave up waiting: every task still queued here is reported on the event
/// stream, `suspended` if the journal holds it, else `failed` (each logged).
#[derive(Message, Debug)]
#[rtype(result = "LeftQueued")]
pub struct LeaveQueued;

/// Stops accepting and waits until nothing is queued or outstanding (or the timeout),
/// then reports what is still queued ([`LeaveQueued`]).
pub async fn drain(gm: &Addr<GmActor>, timeout: Duration) {
    gm.do_send(StopAccepting);
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        match gm.send(GetLoad).await {
            Ok(l) if l.queued == 0 && l.outstanding == 0 => return,
            Ok(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(_) => return,
        }
    }
    if let Ok(l) = gm.send(GetLoad).await {
        let left = gm.send(LeaveQueued).await.unwrap_or_default();
        tracing::warn!(
            queued = l.queued,
            outstanding = l.outstanding,
            suspended = left.suspended,
            failed = left.failed,
            "drain timed out; queued tasks were reported on the event stream: suspended (in the journal, resumed by the next life) or failed"
        );
    }
}

#[cfg(test)]
mod tests;

//! Self-fencing: a worker its LM has not confirmed for a while stops what it runs.
//!
//! The LM declares a worker lost when it has heard nothing from it for its worker
//! timeout, and the GMs then retry its tasks elsewhere. A worker that is only cut
//! off (not dead) would go on running them: the task runs twice. So the LM gives
//! every worker its timeout as a *lease* (`WorkerAssignment::lease_ms`), and the
//! worker counts it from the moment it *sent* the last check-in (or registration)
//! the LM answered as registered: the LM heard that message no earlier, so the
//! LM's own clock for this worker started no earlier either. At 3/5 of the lease
//! without a newer confirmation the worker fences: every task it holds stops
//! (SIGKILL within 1/5 of the lease) and is reported lost, and it refuses start
//! orders until the LM confirms it again. The stop is done by 4/5 of the lease,
//! before the LM can declare the worker lost. Only elapsed time on this host is
//! used (monotonic), never a comparison of two hosts' clocks.
//!
//! The price: an LM that is down (or unreachable) for longer than 3/5 of its worker
//! timeout costs its workers their running tasks (their GMs retry them). An LM
//! started with `--worker-fence false` gives no lease, and its workers never fence.

use super::actor::fencing::{Fence, Unfence};
use super::actor::WorkerActor;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// The last confirmation: when the confirmed message was sent, and the lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Confirmed {
    pub sent: Instant,
    pub lease: Duration,
}

/// The part of the lease after which the worker fences ([`crate::core::fence_after`]).
pub fn fence_after(lease: Duration) -> Duration {
    let micros = common::Micros(u64::try_from(lease.as_micros()).unwrap_or(u64::MAX));
    Duration::from_micros(crate::core::fence_after(micros).0)
}

/// When the worker's own fence has killed every run (3/5 + 1/5 of the lease after
/// the confirmed message was sent), and so when the task supervisor kills them
/// itself if the worker could not (it froze): still before the LM's timeout.
pub fn kill_at(c: Confirmed) -> Instant {
    c.sent + fence_after(c.lease) + fence_grace(c.lease)
}

/// How long a fenced task may take to end after SIGTERM (1/5 of the lease).
pub fn fence_grace(lease: Duration) -> Duration {
    lease / 5
}

/// Where confirmations are recorded; [`guard`] watches it. `ms`: the lease the
/// current LM life gave (0: none).
#[derive(Clone, Debug)]
pub struct Lease {
    tx: watch::Sender<Option<Confirmed>>,
    pub ms: u64,
}

impl Lease {
    pub fn new(ms: u64) -> (Lease, watch::Receiver<Option<Confirmed>>) {
        let (tx, rx) = watch::channel(None);
        (Lease { tx, ms }, rx)
    }

    /// The LM answered a message sent at `sent` as from a registered worker, with a
    /// lease of `lease_ms` (0: none, never fence). An older confirmation than the
    /// one held changes nothing (answers may arrive out of order).
    pub fn confirm(&self, sent: Instant, lease_ms: u64) {
        let next = (lease_ms > 0).then(|| Confirmed {
            sent,
            lease: Duration::from_millis(lease_ms),
        });
        self.tx.send_if_modified(|held| {
            let newer = match (*held, next) {
                (Some(h), Some(n)) => n.sent > h.sent || n.lease != h.lease,
                (h, n) => h != n,
            };
            if newer {
                *held = next;
            }
            newer
        });
    }
}

/// Fences the worker when no confirmation comes within [`fence_after`] of the last
/// one, and lifts the fence at the next. Ends when every [`Lease`] is dropped.
///
/// Each confirmation also goes to the task `supervisor`, which kills every run
/// itself at [`kill_at`] unless a newer one comes: a worker that froze (SIGSTOP, a
/// cgroup freezer) cannot fence, and its runs would otherwise go on beside their
/// retries elsewhere (issue 31).
pub async fn guard(
    mut confirmed: watch::Receiver<Option<Confirmed>>,
    worker: actix::Addr<WorkerActor>,
    supervisor: std::sync::Arc<crate::exec::supervisor::Supervisor>,
) {
    let mut fenced = false;
    loop {
        let current = *confirmed.borrow_and_update();
        // Before the fence is lifted, so that the supervisor has the new lease
        // before any start order the lifted fence lets through.
        supervisor.lease(current.map(|c| kill_at(c).into_std()));
        if fenced {
            // Changed since the fence: confirmed again (or the LM life that
            // answered gives no lease).
            fenced = false;
            tracing::info!("the LM confirmed this worker again: the fence is lifted");
            worker.do_send(Unfence);
        }
        let Some(c) = current else {
            if confirmed.changed().await.is_err() {
                return;
            }
            continue;
        };
        let due = c.sent + fence_after(c.lease);
        tokio::select! {
            () = tokio::time::sleep_until(due) => {
                let reason = format!(
                    "its LM did not confirm this worker for {} ms (3/5 of its {} ms lease): the worker stopped it before the LM could declare the worker lost",
                    fence_after(c.lease).as_millis(),
                    c.lease.as_millis()
                );
                fenced = true;
                let fence = Fence { reason, grace: fence_grace(c.lease) };
                if worker.send(fence).await.is_err() {
                    return;
                }
                if confirmed.changed().await.is_err() {
                    return;
                }
            }
            changed = confirmed.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confirmations_only_move_forward_and_a_zero_lease_turns_the_fence_off() {
        let (lease, rx) = Lease::new(10_000);
        let t0 = Instant::now();
        lease.confirm(t0 + Duration::from_secs(2), 10_000);
        assert_eq!(
            rx.borrow().map(|c| c.sent),
            Some(t0 + Duration::from_secs(2))
        );
        // An answer to an earlier check-in, arriving late, does not move it back.
        lease.confirm(t0 + Duration::from_secs(1), 10_000);
        assert_eq!(
            rx.borrow().map(|c| c.sent),
            Some(t0 + Duration::from_secs(2))
        );
        lease.confirm(t0 + Duration::from_secs(3), 10_000);
        assert_eq!(
            rx.borrow().map(|c| c.sent),
            Some(t0 + Duration::from_secs(3))
        );
        // A restarted LM without a lease.
        lease.confirm(t0 + Duration::from_secs(4), 0);
        assert_eq!(*rx.borrow(), None);
        assert_eq!(fence_after(Duration::from_secs(10)), Duration::from_secs(6));
        assert_eq!(fence_grace(Duration::from_secs(10)), Duration::from_secs(2));
    }
}

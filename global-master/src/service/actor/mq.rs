//! The GM's broker side: an exclusive queue bound to the `<cluster>.state` fanout, whose
//! snapshots go to the actor. On reconnection the GM simply waits for the next
//! heartbeats; its view is rebuilt from them (and it places nothing until it has the
//! state of every LM).
//!
//! A snapshot for LM k is taken only from LM k's broker user ([`SnapshotSenders`]):
//! the message's `user_id`, which RabbitMQ checks against the publisher's login,
//! must be the `--lm-broker-user` pattern with k in place of `{lm}`.

use crate::core::GmInput;
use crate::service::actor::deliver::Deliver;
use crate::service::actor::lra_actor::TasksEnded;
use crate::service::actor::GmActor;
use actix::Addr;
use common::messages::LmSnapshot;
use common::protocol::LmToGm;
use common::LmId;
use service_kit::amqp::{subscribe, subscribe_as, LinkStatus, Subscription, SubscriptionHandle};
use service_kit::cluster::Cluster;
use service_kit::topology::Exchange;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Which broker user may publish the state of which LM, and the snapshots refused.
#[derive(Debug, Default)]
pub struct SnapshotSenders {
    /// `--lm-broker-user`: `{lm}` stands for the LM's number; `None`: any user (open).
    pattern: Option<String>,
    /// Refused: published as another broker user than the LM's.
    wrong_user: AtomicU64,
    /// Refused: no `user_id` at all.
    no_user: AtomicU64,
    /// When the last refusal was logged, and refusals since.
    log: Mutex<(Option<Instant>, u64)>,
}

/// Refusals are logged at most this often.
const LOG_EVERY: Duration = Duration::from_secs(10);

impl SnapshotSenders {
    pub fn new(pattern: Option<String>) -> Self {
        if pattern.is_none() {
            tracing::warn!("no --lm-broker-user (MEGHA_LM_BROKER_USER): any broker user may publish the state of any LM into this GM's view; give each LM its own broker user and this GM the pattern (docs/security.md)");
        }
        SnapshotSenders {
            pattern,
            ..Default::default()
        }
    }

    /// The broker user LM `lm` publishes as (`None`: any, open mode).
    pub fn user_of(&self, lm: LmId) -> Option<String> {
        self.pattern
            .as_ref()
            .map(|p| p.replace("{lm}", &lm.0.to_string()))
    }

    /// Whether a snapshot of `lm` published as `user` is taken; counts and logs
    /// (rate-limited) a refusal.
    pub fn admits(&self, lm: LmId, user: Option<&str>) -> bool {
        let Some(expected) = self.user_of(lm) else {
            return true;
        };
        let counter = match user {
            Some(u) if u == expected => return true,
            Some(_) => &self.wrong_user,
            None => &self.no_user,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        log.1 += 1;
        if log.0.is_some_and(|at| at.elapsed() < LOG_EVERY) {
            return false;
        }
        let refused = std::mem::take(&mut log.1);
        log.0 = Some(Instant::now());
        tracing::warn!(
            %lm,
            user = user.unwrap_or("(none)"),
            expected = %expected,
            refused_since_last_log = refused,
            "LM state snapshot refused: not published by that LM's broker user (not applied)"
        );
        false
    }

    /// The `/metrics` lines: `megha_gm_snapshots_refused_total{reason}`.
    pub fn render(&self, page: &mut service_kit::metrics::Page) {
        service_kit::metrics::family(
            page,
            "megha_gm_snapshots_refused_total",
            "counter",
            "LM state snapshots refused because their broker user (user_id) is not the LM's (--lm-broker-user): wrong_user, no_user.",
            "reason",
            &[
                (
                    "wrong_user".into(),
                    self.wrong_user.load(Ordering::Relaxed) as f64,
                ),
                ("no_user".into(), self.no_user.load(Ordering::Relaxed) as f64),
            ],
        );
    }
}

pub fn subscribe_state(
    url: String,
    cluster: Cluster,
    senders: Arc<SnapshotSenders>,
    gm: Addr<GmActor>,
) -> (Arc<LinkStatus>, SubscriptionHandle) {
    let sub = Subscription {
        exchange: Exchange::State,
        binding: String::new(),
        queue: None,
        ack: false,
        prefetch: 0,
    };
    let decoder = cluster.clone();
    subscribe_as(url, cluster, sub, move |_, user, body| {
        match decoder.decode::<LmSnapshot>(body, "state exchange") {
            Ok(snapshot) if !senders.admits(snapshot.lm, user) => {}
            Ok(snapshot) => gm.do_send(Deliver(GmInput::Lm(LmToGm::State(snapshot)))),
            // Counted and logged by the decoder.
            Err(e) if e.is_foreign() => {}
            Err(e) => tracing::warn!(error = %e, "undecodable LM snapshot ignored"),
        }
    })
}

/// The designated GM's view of task ends: `task.finished` and `task.preempted` events
/// (JSON), whose LRA containers stop counting for placement constraints.
pub fn subscribe_ends(url: String, cluster: Cluster, gm: Addr<GmActor>) -> Vec<SubscriptionHandle> {
    ["task.finished", "task.preempted"]
        .into_iter()
        .map(|binding| {
            let sub = Subscription {
                exchange: Exchange::Events,
                binding: binding.to_owned(),
                queue: None,
                ack: false,
                prefetch: 0,
            };
            let gm = gm.clone();
            let (_, handle) = subscribe(url.clone(), cluster.clone(), sub, move |_, body| {
                match service_kit::sinks::decode_events(body) {
                    Ok(events) => {
                        gm.do_send(TasksEnded(events.into_iter().map(|e| e.task).collect()))
                    }
                    Err(e) => tracing::warn!(error = %e, "undecodable task events ignored"),
                }
            });
            handle
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::SnapshotSenders;
    use common::LmId;

    #[test]
    fn a_snapshot_is_taken_only_from_its_lms_broker_user() {
        let s = SnapshotSenders::new(Some("megha-lm{lm}".into()));
        assert!(s.admits(LmId(1), Some("megha-lm1")));
        assert!(!s.admits(LmId(0), Some("megha-lm1")));
        assert!(!s.admits(LmId(0), None));
        let mut page = service_kit::metrics::Page::new();
        s.render(&mut page);
        let text = page.encode();
        assert!(text.contains("megha_gm_snapshots_refused_total{reason=\"wrong_user\"} 1"));
        assert!(text.contains("megha_gm_snapshots_refused_total{reason=\"no_user\"} 1"));
        let open = SnapshotSenders::new(None);
        assert!(open.admits(LmId(0), Some("anyone")) && open.admits(LmId(0), None));
    }
}

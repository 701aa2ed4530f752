//! The GM's broker side: an exclusive queue bound to the `<cluster>.state` fanout, whose
//! snapshots go to the actor. On reconnection the GM simply waits for the next
//! heartbeats; its view is rebuilt from them (and it places nothing until it has the
//! state of every LM).

use super::actor::GmActor;
use super::deliver::Deliver;
use super::lra_actor::TasksEnded;
use crate::core::GmInput;
use actix::Addr;
use common::messages::LmSnapshot;
use common::protocol::LmToGm;
use service_kit::amqp::{subscribe, LinkStatus, Subscription, SubscriptionHandle};
use service_kit::cluster::Cluster;
use service_kit::topology::Exchange;
use std::sync::Arc;

pub fn subscribe_state(
    url: String,
    cluster: Cluster,
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
    subscribe(url, cluster, sub, move |_, body| {
        match decoder.decode::<LmSnapshot>(body, "state exchange") {
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

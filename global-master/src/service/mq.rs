//! The GM's broker side: an exclusive queue bound to the `megha.state` fanout, whose
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
use service_kit::topology::{EVENTS_EXCHANGE, STATE_EXCHANGE};
use std::sync::Arc;

pub fn subscribe_state(url: String, gm: Addr<GmActor>) -> (Arc<LinkStatus>, SubscriptionHandle) {
    let sub = Subscription {
        exchange: STATE_EXCHANGE,
        binding: String::new(),
        queue: None,
        ack: false,
        prefetch: 0,
    };
    subscribe(url, sub, move |_, body| {
        match common::codec::decode::<LmSnapshot>(body) {
            Ok(snapshot) => gm.do_send(Deliver(GmInput::Lm(LmToGm::State(snapshot)))),
            Err(e) => tracing::warn!(error = %e, "undecodable LM snapshot ignored"),
        }
    })
}

/// The designated GM's view of task ends: `task.finished` and `task.preempted` events
/// (JSON), whose LRA containers stop counting for placement constraints.
pub fn subscribe_ends(url: String, gm: Addr<GmActor>) -> Vec<SubscriptionHandle> {
    ["task.finished", "task.preempted"]
        .into_iter()
        .map(|binding| {
            let sub = Subscription {
                exchange: EVENTS_EXCHANGE,
                binding: binding.to_owned(),
                queue: None,
                ack: false,
                prefetch: 0,
            };
            let gm = gm.clone();
            let (_, handle) =
                subscribe(
                    url.clone(),
                    sub,
                    move |_, body| match service_kit::sinks::decode_events(body) {
                        Ok(events) => {
                            gm.do_send(TasksEnded(events.into_iter().map(|e| e.task).collect()))
                        }
                        Err(e) => tracing::warn!(error = %e, "undecodable task events ignored"),
                    },
                );
            handle
        })
        .collect()
}

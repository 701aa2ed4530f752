//! The GM's broker side: an exclusive queue bound to the `megha.state` fanout, whose
//! snapshots go to the actor. On reconnection the GM simply waits for the next
//! heartbeats; its view is rebuilt from them (and it places nothing until it has the
//! state of every LM).

use super::actor::{ApplySnapshot, GmActor};
use actix::Addr;
use common::messages::LmSnapshot;
use service_kit::amqp::{subscribe, LinkStatus, Subscription, SubscriptionHandle};
use service_kit::topology::STATE_EXCHANGE;
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
            Ok(snapshot) => gm.do_send(ApplySnapshot(snapshot)),
            Err(e) => tracing::warn!(error = %e, "undecodable LM snapshot ignored"),
        }
    })
}

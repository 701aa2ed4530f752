//! The state of an embedded GM's real HTTP API ([`global_master::service::http`]):
//! open (no tokens: loopback only), no broker, no memory bounds beyond the body cap,
//! and, with the other GMs' URLs, forwarding to the designated GM and to each job's
//! GM as the services do. For `loadgen dev` and the tests that serve embedded GMs.

use super::EmbeddedCluster;
use common::GmId;
use global_master::service::admission::api::QueueTable;
use global_master::service::admission::route::Route;
use global_master::service::admission::users::GmAuth;
use global_master::service::durable::idempotency::Idempotency;
use global_master::service::http::ApiState;
use std::sync::Arc;

/// Whom GM `g` forwards to: the designated GM and every GM by id (`urls`).
#[derive(Clone, Debug)]
pub struct Peers {
    pub designated: GmId,
    pub urls: Vec<String>,
}

/// The API state of GM `g` of `cluster` (see the module doc); `peers`: `None` for
/// a lone GM.
pub fn api_state(cluster: &EmbeddedCluster, g: usize, peers: Option<Peers>) -> ApiState {
    api_state_with_queues(cluster, g, peers, None)
}

/// [`api_state`] with the user queues the cluster was started with.
pub fn api_state_with_queues(
    cluster: &EmbeddedCluster,
    g: usize,
    peers: Option<Peers>,
    fairness: Option<Arc<common::fairness::FairnessConfig>>,
) -> ApiState {
    let me = GmId(g as u16);
    let designated = peers.as_ref().map_or(me, |p| p.designated);
    let client = reqwest::Client::new();
    let route = peers.map(|p| {
        Arc::new(Route {
            me,
            designated,
            designated_url: p.urls.get(designated.index()).cloned(),
            gm_urls: p.urls,
            client: client.clone(),
            streaming: client.clone(),
            signing: None,
            counters: Default::default(),
        })
    });
    let forwards = route.is_some();
    ApiState {
        gm: cluster.gms[g].clone(),
        max_job_tasks: 1000,
        queues: QueueTable::new(me, fairness),
        priorities: Default::default(),
        broker: None,
        senders: None,
        lra_groups: Default::default(),
        route,
        auth: Arc::new(GmAuth::open(me, designated).forwarding_to_owners(forwards)),
        cluster: service_kit::cluster::Cluster::new(Default::default(), "gm"),
        idempotency: Arc::new(Idempotency::in_memory(Default::default())),
        standby: None,
        limits: None,
    }
}

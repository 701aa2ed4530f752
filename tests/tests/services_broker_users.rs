//! The broker is not a hole (issue 32): an LM publishing on the cluster's broker as
//! another broker user than the one the GM has for that LM (`--lm-broker-user`) is
//! not taken into the GM's view, and is counted. The real LM 0 publishes as its own
//! user; an intruder LM, also numbered 0 but with fewer nodes, publishes on the same
//! virtual host as a user of its own. RabbitMQ checks each message's `user_id`
//! against the publisher's login, so the intruder cannot claim LM 0's user; the GM
//! refuses its snapshots (`megha_gm_snapshots_refused_total{reason="wrong_user"}`) and
//! its view of LM 0 never changes.

use std::time::{Duration, Instant};
use tests::broker::require_rabbitmq;
use tests::lone_lm::LoneLm;
use tests::procs::{get_json, wait_until, LoopbackCluster, RoleArgs};

/// The node count of LM 0 in `gm`'s view (`None`: not known).
fn lm0_nodes(gm: &str) -> Option<u64> {
    let view = get_json(&format!("{gm}/v1/nodes?summary=true"));
    let lm = &view["lms"][0];
    (lm["known"] == true)
        .then(|| lm["nodes"].as_u64())
        .flatten()
}

#[test]
fn a_foreign_broker_user_publishing_as_lm0_is_not_taken_into_the_view() {
    let broker = require_rabbitmq();
    let tag = std::process::id();
    let lm0_url = broker.user(&format!("megha-t{tag}-lm0"));
    let intruder_url = broker.user(&format!("megha-t{tag}-intruder"));
    // Read by the GM only (an environment variable, so that a GM without the
    // setting still starts and the test fails on the view, not on a flag).
    std::env::set_var("MEGHA_LM_BROKER_USER", format!("megha-t{tag}-lm{{lm}}"));
    let dir = std::env::temp_dir().join(format!("megha-broker-users-{tag}"));
    // 1 GM, 1 LM of 3 nodes (one partition), 1 worker; LM 0 logs in as its user.
    let cluster = LoopbackCluster::start_with_args(
        1,
        1,
        3,
        1,
        &broker.url,
        &dir.join("logs"),
        &[],
        &RoleArgs {
            lm_amqp: vec![lm0_url],
            ..RoleArgs::default()
        },
    );
    let gm = cluster.gms[0].url.clone();
    assert_eq!(lm0_nodes(&gm), Some(3));

    // The intruder: also LM 0 of 1 GM and 1 LM, 2 nodes and their worker, heartbeat
    // 50 ms, on the same virtual host as its own broker user.
    let mut intruder = LoneLm::spawn_lm(&dir.join("intruder"), &intruder_url, &[]);
    let mut intruder_worker = LoneLm::spawn_worker(&dir.join("intruder"), &intruder.url, &[]);
    let refused = || cluster.metric(&cluster.gms, "megha_gm_snapshots_refused_total");
    let deadline = Instant::now() + Duration::from_secs(4);
    while Instant::now() < deadline {
        assert_eq!(
            lm0_nodes(&gm),
            Some(3),
            "the GM took the intruder's snapshot of LM 0 into its view (refused so far: {})",
            refused()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    wait_until(
        "the intruder's snapshots counted",
        Duration::from_secs(5),
        || refused() > 10.0,
    );
    let page = tests::procs::http("GET", &format!("{gm}/metrics"), None)
        .expect("metrics")
        .2;
    assert!(
        page.contains("megha_gm_snapshots_refused_total{reason=\"wrong_user\"}"),
        "{page}"
    );
    // The real LM's state still arrives: the view stays fresh.
    let health = get_json(&format!("{gm}/healthz"));
    assert_eq!(health["ready"], true, "{health}");
    intruder_worker.kill();
    intruder.kill();
    std::env::remove_var("MEGHA_LM_BROKER_USER");
}

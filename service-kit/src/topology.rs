//! Names on the broker, in one place. Every name starts with the cluster's name
//! (`--cluster-name`, default `megha`), so that clusters sharing a broker (even one
//! vhost) never see each other's messages:
//!
//! - `<cluster>.state` (fanout, durable): every LM publishes its `LmSnapshot` (bincode via
//!   `common::codec`); every GM binds its own exclusive queue.
//! - `<cluster>.events` (topic, durable): a JSON array of `TaskEvent`s of one kind per
//!   message (see `sinks::decode_events`), routing key `task.<event>` (`task.queued`, `task.started`, ...). Bind `task.#` for all.
//! - named (durable) queues: `<cluster>.<name>` ([`queue_name`]).

use common::events::TaskEventKind;
use common::ClusterName;

/// The exchanges of a cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exchange {
    /// LM snapshots (fanout).
    State,
    /// Task events (topic).
    Events,
}

impl Exchange {
    /// The exchange's name on the broker for `cluster` (`megha.state` by default).
    pub fn name(self, cluster: &ClusterName) -> String {
        match self {
            Exchange::State => format!("{cluster}.state"),
            Exchange::Events => format!("{cluster}.events"),
        }
    }
}

/// The broker name of a named queue of `cluster`.
pub fn queue_name(cluster: &ClusterName, name: &str) -> String {
    format!("{cluster}.{name}")
}

/// The routing key of an event.
pub fn event_key(kind: &TaskEventKind) -> &'static str {
    match kind {
        TaskEventKind::Queued { .. } => "task.queued",
        TaskEventKind::Dispatched { .. } => "task.dispatched",
        TaskEventKind::Requeued { .. } => "task.requeued",
        TaskEventKind::Unplaceable { .. } => "task.unplaceable",
        TaskEventKind::Launched { .. } => "task.launched",
        TaskEventKind::Rejected { .. } => "task.rejected",
        TaskEventKind::Started { .. } => "task.started",
        TaskEventKind::Finished { .. } => "task.finished",
        TaskEventKind::Preempted { .. } => "task.preempted",
        TaskEventKind::Failed { .. } => "task.failed",
        TaskEventKind::Promoted { .. } => "task.promoted",
        TaskEventKind::Cancelled { .. } => "task.cancelled",
        TaskEventKind::Suspended { .. } => "task.suspended",
    }
}

/// Who logs in to a cluster's broker, for the permissions the broker enforces
/// ([`broker_permissions`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrokerUser {
    /// An LM: publishes its state and task events.
    Lm,
    /// A GM: publishes task events, reads the LMs' state and the task events through
    /// queues of its own.
    Gm,
    /// An observer (loadgen, a user's tool): reads task events through queues of its
    /// own; publishes nothing.
    Observer,
}

impl BrokerUser {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "lm" => Some(BrokerUser::Lm),
            "gm" => Some(BrokerUser::Gm),
            "observer" => Some(BrokerUser::Observer),
            _ => None,
        }
    }
}

/// The RabbitMQ permissions (configure, write, read: regular expressions over
/// exchange and queue names) of a broker user of `cluster` on the cluster's virtual
/// host: only an LM may write the state exchange, only LMs and GMs the event
/// exchange, only a GM read the state (GMs and observers read the events; an LM
/// reads nothing); each may declare the cluster's exchanges
/// and its own queues (server-named `amq.gen-*`, or named `<cluster>.<name>`). The
/// scripts, docker compose and the tests give each user these (issue 32).
pub fn broker_permissions(cluster: &ClusterName, who: BrokerUser) -> [String; 3] {
    // Cluster names are `a-z 0-9 - _`: nothing to escape.
    let c = cluster.as_str();
    let own_queues = format!("amq\\.gen-.*|{c}\\.(?!state$|events$).*");
    let configure = format!("^({c}\\.state|{c}\\.events|{own_queues})$");
    match who {
        BrokerUser::Lm => [configure, format!("^{c}\\.(state|events)$"), "^$".into()],
        // A GM reads the events too: the designated GM learns from them that its
        // LRA containers ended (`task.finished`, `task.preempted`).
        BrokerUser::Gm => [
            configure,
            format!("^({c}\\.events|{own_queues})$"),
            format!("^({c}\\.state|{c}\\.events|{own_queues})$"),
        ],
        BrokerUser::Observer => [
            configure,
            format!("^({own_queues})$"),
            format!("^({c}\\.events|{own_queues})$"),
        ],
    }
}

/// RabbitMQ's stored form of `password` (`rabbit_password_hashing_sha256`): base64 of
/// a 4-byte salt followed by SHA-256(salt, password), for a definitions file.
pub fn rabbit_password_hash(password: &str, salt: [u8; 4]) -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    h.update(salt);
    h.update(password.as_bytes());
    let mut out = salt.to_vec();
    out.extend_from_slice(&h.finalize());
    base64::engine::general_purpose::STANDARD.encode(out)
}

#[cfg(test)]
mod permission_tests {
    use super::*;

    #[test]
    fn only_lms_write_state_and_observers_write_nothing_shared() {
        // (What each may read is checked against a real broker too: the designated GM
        // reads the task events, tests/tests/services_broker_permissions.rs.)
        let c = ClusterName::new("blue").expect("name");
        let [lm_conf, lm_write, lm_read] = broker_permissions(&c, BrokerUser::Lm);
        let [_, gm_write, gm_read] = broker_permissions(&c, BrokerUser::Gm);
        let [_, ob_write, ob_read] = broker_permissions(&c, BrokerUser::Observer);
        // The expressions as RabbitMQ reads them (PCRE): checked here on their shape,
        // and against a real broker in tests/tests/services_broker_users.rs.
        assert_eq!(lm_write, "^blue\\.(state|events)$");
        assert_eq!(lm_read, "^$");
        assert!(gm_write.contains("blue\\.events") && !gm_write.contains("blue\\.state|"));
        assert!(gm_read.starts_with("^(blue\\.state|blue\\.events|"));
        assert!(!ob_write.contains("blue\\.events|") && !ob_write.contains("blue\\.state|"));
        assert!(ob_read.starts_with("^(blue\\.events|"));
        assert!(lm_conf.contains("amq\\.gen-.*"));
    }
}

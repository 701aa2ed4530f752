//! Whom the tests' exec tasks run as.

/// Task uids of the tests' workers (no account has them; workers on one host
/// share the range safely).
pub const TASK_UIDS: &str = "3200000-3201023";

/// Whom the tests' exec tasks run as: a uid each when the tests run as root (as
/// CI does), else the test's own user (a worker that is not root cannot switch).
pub fn task_identity() -> worker::exec::identity::IdentityConfig {
    let root = worker::exec::identity::is_root();
    worker::exec::identity::IdentityConfig {
        task_uids: root.then(|| {
            worker::exec::identity::IdentityConfig::parse_range(TASK_UIDS).expect("TASK_UIDS")
        }),
        task_user: None,
        allow_run_as_self: !root,
    }
}

/// The worker flags of [`task_identity`].
pub fn task_identity_args() -> Vec<String> {
    if worker::exec::identity::is_root() {
        vec!["--task-uids".into(), TASK_UIDS.into()]
    } else {
        vec!["--allow-run-as-self".into()]
    }
}

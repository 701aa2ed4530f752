//! The example configurations in `config/` are what the README tells operators to
//! start from: each must load and resolve (unknown keys and bad values are refused).

use clap::Parser;
use tests::procs::workspace_root;

fn example(name: &str) -> String {
    workspace_root()
        .join("config")
        .join(name)
        .to_str()
        .expect("utf-8 path")
        .to_owned()
}

#[test]
fn global_master_example_resolves() {
    let args = global_master::service::config::GmArgs::try_parse_from([
        "global-master",
        "--config",
        &example("global-master.example.toml"),
    ])
    .expect("flags");
    let s = args.resolve().expect("global-master.example.toml resolves");
    assert!(!s.lm_urls.is_empty(), "the example names its LMs");
}

#[test]
fn local_master_example_resolves() {
    let args = local_master::service::config::LmArgs::try_parse_from([
        "local-master",
        "--config",
        &example("local-master.example.toml"),
    ])
    .expect("flags");
    args.resolve().expect("local-master.example.toml resolves");
}

#[test]
fn worker_example_resolves() {
    let args = worker::service::config::WorkerArgs::try_parse_from([
        "worker",
        "--config",
        &example("worker.example.toml"),
    ])
    .expect("flags");
    args.resolve().expect("worker.example.toml resolves");
}

#[test]
fn tokens_example_loads() {
    let path = workspace_root().join("config/tokens.example.toml");
    let users = global_master::service::users::Users::load(&path).expect("tokens example");
    assert_eq!(users.len(), 3);
    let alice = users
        .find(b"EXAMPLE-alice-3q2+Xk9vQ0bR7u")
        .expect("alice's token");
    assert!(alice.may_use("analytics") && !alice.may_use("batch"));
}

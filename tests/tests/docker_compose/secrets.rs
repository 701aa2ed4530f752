//! docker/make-secrets.sh, offline: what the compose `secrets` service gives each
//! process (its own credential file, its broker user and password, TLS files) and
//! the broker (its configuration and the users' definitions).

use std::process::Command;
use tests::procs::{bin_dir, workspace_root};

/// Runs docker/make-secrets.sh on the host (the image's megha-make-role-credentials
/// and loadgen put on PATH) into fresh directories; returns (secrets, roles, broker).
fn run_make_secrets(dir: &std::path::Path, tls: bool) -> [std::path::PathBuf; 3] {
    let root = workspace_root();
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("bin dir");
    let link = |from: &std::path::Path, name: &str| {
        let _ = std::fs::remove_file(bin.join(name));
        std::os::unix::fs::symlink(from, bin.join(name)).expect("symlink");
    };
    link(
        &root.join("scripts/make-role-credentials.sh"),
        "megha-make-role-credentials",
    );
    link(&bin_dir().join("loadgen"), "loadgen");
    let dirs = [
        dir.join("secrets"),
        dir.join("role"),
        dir.join("broker-conf"),
    ];
    for d in &dirs {
        std::fs::create_dir_all(d).expect("dir");
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(root.join("docker/make-secrets.sh"))
        .env("PATH", path)
        .env("SECRETS", &dirs[0])
        .env("ROLES", &dirs[1])
        .env("BROKER_CONF", &dirs[2])
        .env("MEGHA_TLS", if tls { "1" } else { "" })
        .env("MEGHA_WORKER_NETWORKS", "172.16.0.0/12")
        .output()
        .expect("run docker/make-secrets.sh");
    assert!(
        out.status.success(),
        "docker/make-secrets.sh: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    dirs
}

fn files_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn make_secrets_gives_each_role_only_its_own_files_offline() {
    let dir = std::env::temp_dir().join(format!("megha-make-secrets-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // Plain: credentials only, the broker on 5672.
    let [_, roles, broker] = run_make_secrets(&dir.join("plain"), false);
    // Each GM and LM its own credential (usable by its --id only), in its own volume.
    for k in 0..3 {
        assert_eq!(
            files_in(&roles.join(format!("gm-{k}"))),
            ["amqp-password", "amqp-user", "gm.toml", "tokens.toml"]
        );
        assert_eq!(
            files_in(&roles.join(format!("lm-{k}"))),
            ["amqp-password", "amqp-user", "lm.toml"]
        );
        for role in ["gm", "lm"] {
            let file = roles
                .join(format!("{role}-{k}"))
                .join(format!("{role}.toml"));
            let c = service_kit::roles::RoleCredential::parse(
                &std::fs::read_to_string(&file).expect("credential"),
                "test",
            )
            .expect("a credential file");
            assert_eq!(c.id, Some(k), "{}", file.display());
        }
    }
    assert_eq!(files_in(&roles.join("worker")), ["worker.toml"]);
    assert_eq!(
        files_in(&roles.join("loadgen")),
        ["admin-token", "amqp-password", "amqp-user"]
    );
    let conf = std::fs::read_to_string(broker.join("rabbitmq.conf")).expect("conf");
    assert!(conf.contains("listeners.tcp.default = 5672"), "{conf}");
    assert!(
        conf.contains("load_definitions = /broker-conf/definitions.json")
            && !conf.contains("default_user")
            && !conf.contains("guest"),
        "{conf}"
    );
    // A broker user per kind (one per LM), each with its kind's permissions, and each
    // process's volume naming its own.
    let definitions: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(broker.join("definitions.json")).expect("definitions"),
    )
    .expect("definitions JSON");
    use service_kit::topology::{broker_permissions, BrokerUser};
    let cluster = common::ClusterName::default();
    for (user, kind, volume) in [
        ("megha-gm", BrokerUser::Gm, "gm-2"),
        ("megha-lm1", BrokerUser::Lm, "lm-1"),
        ("megha-loadgen", BrokerUser::Observer, "loadgen"),
    ] {
        let p = definitions["permissions"]
            .as_array()
            .and_then(|a| a.iter().find(|p| p["user"] == user))
            .unwrap_or_else(|| panic!("no permissions for {user}: {definitions}"));
        let [configure, write, read] = broker_permissions(&cluster, kind);
        assert_eq!(
            (&p["configure"], &p["write"], &p["read"]),
            (&configure.into(), &write.into(), &read.into()),
            "{user}"
        );
        let named = std::fs::read_to_string(roles.join(volume).join("amqp-user")).expect("user");
        assert_eq!(named.trim(), user);
    }
    assert_eq!(definitions["users"].as_array().map(Vec::len), Some(5));
    assert!(!definitions.to_string().contains("password\":"));

    // TLS: each role also gets the CA and its own certificate, the workers the issuer.
    let [secrets, roles, broker] = run_make_secrets(&dir.join("tls"), true);
    let ca_before = std::fs::read_to_string(secrets.join("tls/ca.pem")).expect("ca");
    for k in 0..3 {
        assert_eq!(
            files_in(&roles.join(format!("gm-{k}"))),
            [
                "amqp-password",
                "amqp-user",
                "ca.pem",
                "gm-key.pem",
                "gm.pem",
                "gm.toml",
                "tokens.toml"
            ]
        );
        assert_eq!(
            files_in(&roles.join(format!("lm-{k}"))),
            [
                "amqp-password",
                "amqp-user",
                "ca.pem",
                "lm-key.pem",
                "lm.pem",
                "lm.toml"
            ]
        );
    }
    assert_eq!(
        files_in(&roles.join("worker")),
        [
            "ca.pem",
            "worker-issuer-key.pem",
            "worker-issuer.pem",
            "worker.toml"
        ]
    );
    assert_eq!(
        files_in(&roles.join("loadgen")),
        ["admin-token", "amqp-password", "amqp-user", "ca.pem"]
    );
    let conf = std::fs::read_to_string(broker.join("rabbitmq.conf")).expect("conf");
    for expected in [
        "listeners.tcp = none",
        "listeners.ssl.default = 5671",
        "ssl_options.certfile = /broker-conf/rabbitmq.pem",
        "ssl_options.keyfile = /broker-conf/rabbitmq-key.pem",
    ] {
        assert!(conf.contains(expected), "{expected}: {conf}");
    }
    // What was issued works: a worker issues itself a certificate for an address in
    // MEGHA_WORKER_NETWORKS (and for no other).
    let read = |f: &str| std::fs::read_to_string(roles.join("worker").join(f)).expect(f);
    let issuer = service_kit::pki::Pem {
        cert: read("worker-issuer.pem"),
        key: read("worker-issuer-key.pem"),
    };
    service_kit::pki::issue_worker_cert(&issuer, "172.18.0.7".parse().expect("ip"))
        .expect("a compose network address");
    assert!(service_kit::pki::issue_worker_cert(&issuer, "10.0.0.7".parse().expect("ip")).is_err());
    // A second run (every `up`) keeps the CA.
    run_make_secrets(&dir.join("tls"), true);
    let ca_after = std::fs::read_to_string(secrets.join("tls/ca.pem")).expect("ca");
    assert_eq!(ca_before, ca_after, "a second run must keep the CA");
    let _ = std::fs::remove_dir_all(&dir);
}

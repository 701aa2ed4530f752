//! Unit tests of `config.rs`.

use super::*;

#[test]
fn flags_beat_env_beat_file_beat_defaults() {
    let file = std::env::temp_dir().join(format!("gm-config-{}.toml", std::process::id()));
    std::fs::write(
        &file,
        "gms = 3\nid = 1\nbatch_size = 7\nmax_queued = 9\nlm_urls = [\"http://a\"]\n",
    )
    .expect("write");
    // The environment sets max_queued (beats the file); the flag sets id (beats both).
    std::env::set_var("MEGHA_GM_MAX_QUEUED", "11");
    std::env::set_var("MEGHA_GM_ID", "0");
    let args = GmArgs::try_parse_from([
        "global-master",
        "--config",
        file.to_str().expect("path"),
        "--id",
        "2",
    ])
    .expect("parse");
    let s = args.resolve().expect("resolve");
    std::env::remove_var("MEGHA_GM_MAX_QUEUED");
    std::env::remove_var("MEGHA_GM_ID");
    assert_eq!(s.id, 2, "flag");
    assert_eq!(s.max_queued, 11, "env");
    assert_eq!((s.gms, s.batch_size), (3, 7), "file");
    assert_eq!(s.max_job_tasks, 10_000, "default");
    assert_eq!(s.lm_urls, vec!["http://a".to_owned()]);
}

/// Settings from these flags, with one LM.
fn resolve(args: &[&str]) -> Result<GmSettings> {
    let mut all = vec!["global-master", "--lm-urls", "http://lm"];
    all.extend_from_slice(args);
    GmArgs::try_parse_from(all).expect("parse").resolve()
}

#[test]
fn queueable_settings_are_checked() {
    let s = resolve(&[]).expect("defaults");
    assert_eq!((s.queueable_top_k, s.queueable_cap), (4, 1.0));
    assert_eq!(s.queueable_quota, QueueableQuota::UNLIMITED);
    let s = resolve(&[
        "--queueable-top-k",
        "2",
        "--queueable-cap",
        "0.5",
        "--queueable-quota",
        "max:4,ratio:2",
    ])
    .expect("valid");
    assert_eq!((s.queueable_top_k, s.queueable_cap), (2, 0.5));
    assert_eq!(
        (s.queueable_quota.max, s.queueable_quota.ratio),
        (Some(4), Some(2.0))
    );
    for (flag, value) in [
        ("--queueable-top-k", "0"),
        ("--queueable-cap", "0"),
        ("--queueable-quota", "max:0"),
    ] {
        let err = resolve(&[flag, value]).expect_err(value);
        assert!(format!("{err:#}").contains(flag), "{flag}: {err:#}");
    }
}

#[test]
fn routing_and_lra_settings() {
    let args = GmArgs::try_parse_from([
        "global-master",
        "--lm-urls",
        "http://lm",
        "--gms",
        "3",
        "--designated-gm",
        "1",
        "--gm-url",
        "http://g0",
        "--gm-url",
        "http://g1",
        "--lra-placer",
        "ilp",
        "--lra-ilp-time-ms",
        "50",
        "--lra-interval-ms",
        "250",
    ])
    .expect("parse");
    let s = args.resolve().expect("resolve");
    assert_eq!(s.designated_url.as_deref(), Some("http://g1"));
    assert_eq!(s.lra.interval, Micros::from_millis(250));
    assert!(matches!(s.lra.placer, Placer::Ilp(c) if c.time_limit_ms == 50));
    for bad in [
        vec!["--lra-placer", "best"],
        vec!["--designated-gm", "3"],
        vec!["--lra-interval-ms", "0"],
        vec![
            "--lra-operator-constraints",
            "/nonexistent/constraints.json",
        ],
    ] {
        let mut argv = vec!["global-master", "--lm-urls", "http://lm", "--gms", "3"];
        argv.extend(bad.iter().copied());
        let args = GmArgs::try_parse_from(argv).expect("parse");
        assert!(args.resolve().is_err(), "{bad:?}");
    }
}

#[test]
fn queues_come_from_repeated_flags_or_the_file() {
    let args = GmArgs::try_parse_from([
        "global-master",
        "--gms",
        "2",
        "--lm-urls",
        "http://a",
        "--queue",
        "a:0.5:0",
        "--queue",
        "b:0.5:1",
        "--share-policy",
        "cpu",
    ])
    .expect("parse");
    let f = args.resolve().expect("resolve").fairness.expect("queues");
    assert_eq!(f.queues.len(), 2);
    assert_eq!(f.policy, SharePolicy::Cpu);
    let file = std::env::temp_dir().join(format!("gm-queues-{}.toml", std::process::id()));
    std::fs::write(
        &file,
        "gms = 2\nlm_urls = [\"http://a\"]\nqueues = [\"a:0.5:0\", \"b:0.7:1\"]\n",
    )
    .expect("write");
    let args = GmArgs::try_parse_from(["global-master", "--config", file.to_str().expect("p")])
        .expect("parse");
    let err = args.resolve().expect_err("shares add up to 1.2");
    assert!(format!("{err:#}").contains("more than 1"), "{err:#}");
    let args = GmArgs::try_parse_from(["global-master", "--lm-urls", "http://a"]).expect("parse");
    assert!(args.resolve().expect("resolve").fairness.is_none());
    assert!(GmArgs::try_parse_from(["global-master", "--share-policy", "mean"]).is_err());
}

#[test]
fn unknown_file_keys_and_bad_values_are_refused() {
    let file = std::env::temp_dir().join(format!("gm-bad-{}.toml", std::process::id()));
    std::fs::write(&file, "colour = 3\n").expect("write");
    let args = GmArgs::try_parse_from(["global-master", "--config", file.to_str().expect("p")])
        .expect("parse");
    assert!(args.resolve().is_err());
    let args = GmArgs::try_parse_from([
        "global-master",
        "--id",
        "3",
        "--gms",
        "2",
        "--lm-urls",
        "http://a",
    ])
    .expect("parse");
    assert!(args.resolve().is_err());
}

#[test]
fn standby_needs_a_data_dir_and_reads_from_flag_env_and_file() {
    assert_eq!(resolve(&[]).expect("defaults").standby, None);
    let err = resolve(&["--standby"]).unwrap_err().to_string();
    assert!(err.contains("--standby needs --data-dir"), "{err}");
    let s = resolve(&["--standby", "--data-dir", "/tmp/gm"]).expect("standby");
    assert_eq!(s.standby, Some(Duration::from_millis(500)));
    let s = resolve(&["--standby=false", "--data-dir", "/tmp/gm"]).expect("off");
    assert_eq!(s.standby, None);
    let s = resolve(&[
        "--standby",
        "--standby-poll-ms",
        "50",
        "--data-dir",
        "/tmp/gm",
    ])
    .expect("poll");
    assert_eq!(s.standby, Some(Duration::from_millis(50)));
    let err = resolve(&[
        "--standby",
        "--standby-poll-ms",
        "0",
        "--data-dir",
        "/tmp/gm",
    ])
    .unwrap_err()
    .to_string();
    assert!(err.contains("--standby-poll-ms"), "{err}");
    let file = std::env::temp_dir().join(format!("gm-standby-{}.toml", std::process::id()));
    std::fs::write(
        &file,
        "standby = true\nstandby_poll_ms = 20\ndata_dir = \"/tmp/gm\"\n",
    )
    .expect("write");
    let s = resolve(&["--config", file.to_str().expect("path")]).expect("file");
    let _ = std::fs::remove_file(&file);
    assert_eq!(s.standby, Some(Duration::from_millis(20)));
}

#[test]
fn the_job_order_defaults_to_fifo_and_bad_values_name_the_flag() {
    use crate::core::carbyne::JobOrder;
    let s = resolve(&[]).expect("defaults");
    assert_eq!((s.order.order, s.order.altruism), (JobOrder::Fifo, 1.0));
    let s = resolve(&["--job-order", "carbyne", "--altruism", "0.5"]).expect("valid");
    assert_eq!((s.order.order, s.order.altruism), (JobOrder::Carbyne, 0.5));
    let err = resolve(&["--job-order", "lifo"]).expect_err("unknown");
    assert!(err.to_string().contains("--job-order"), "{err}");
    let err = resolve(&["--altruism", "2"]).expect_err("out of range");
    assert!(err.to_string().contains("--altruism"), "{err}");
}

/// `--cluster-file`: a described cluster gives jobs its attribute names; a Megha
/// config or none leaves the numbered ones; a file for another GM count, or one that
/// is not a cluster, is refused naming the flag.
#[test]
fn the_cluster_file_names_the_attributes() {
    let dir = std::env::temp_dir().join(format!("gm-cluster-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let described = dir.join("described.json");
    std::fs::write(
        &described,
        r#"{"gms": 2, "lms": [{"nodes": [{"count": 2, "cpus": 1, "memory_mb": 64, "attributes": ["ssd"]}]}]}"#,
    )
    .expect("write");
    let megha = dir.join("megha.json");
    std::fs::write(
        &megha,
        r#"{"LMs": {"1": {"partitions": {"1": ["0b1"], "2": ["0b1"]}}}}"#,
    )
    .expect("write");
    let path = |p: &std::path::Path| p.display().to_string();
    let s = resolve(&["--gms", "2", "--cluster-file", &path(&described)]).expect("described");
    assert_eq!(s.attributes.bit("ssd"), Some(0));
    assert!(!s.attributes.is_numbered());
    let s = resolve(&["--gms", "2", "--cluster-file", &path(&megha)]).expect("megha");
    assert!(s.attributes.is_numbered());
    assert!(resolve(&[]).expect("none").attributes.is_numbered());
    let e = resolve(&["--gms", "3", "--cluster-file", &path(&described)])
        .expect_err("3 GMs")
        .to_string();
    assert!(
        e.contains("--cluster-file") && e.contains("--gms is 3"),
        "{e}"
    );
    let e = format!(
        "{:#}",
        resolve(&["--cluster-file", &path(&dir.join("missing.json"))]).expect_err("missing")
    );
    assert!(e.contains("cannot read --cluster-file"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--soft-ilp-ms` (docs/alsched.md): off by default; flag, environment and file
/// as every setting; 0 or more than a minute refused naming the flag.
#[test]
fn the_soft_ilp_cap_layers_like_every_setting_and_is_checked() {
    assert_eq!(resolve(&[]).expect("defaults").soft_ilp_ms, None);
    let file = std::env::temp_dir().join(format!("gm-soft-ilp-{}.toml", std::process::id()));
    std::fs::write(&file, "soft_ilp_ms = 300\n").expect("write");
    let config = file.to_str().expect("path");
    let s = resolve(&["--config", config]).expect("file");
    assert_eq!(s.soft_ilp_ms, Some(300), "file");
    // Only this test reads the variable (and only valid values are set).
    std::env::set_var("MEGHA_GM_SOFT_ILP_MS", "400");
    let env = resolve(&["--config", config]).expect("env").soft_ilp_ms;
    let flag = resolve(&["--config", config, "--soft-ilp-ms", "500"]).expect("flag");
    std::env::remove_var("MEGHA_GM_SOFT_ILP_MS");
    let _ = std::fs::remove_file(&file);
    assert_eq!(env, Some(400), "env beats file");
    assert_eq!(flag.soft_ilp_ms, Some(500), "flag beats env");
    for bad in ["0", "60001"] {
        let err = resolve(&["--soft-ilp-ms", bad]).expect_err(bad).to_string();
        assert!(
            err.contains("--soft-ilp-ms") && err.contains("between 1 and 60000"),
            "{err}"
        );
    }
}

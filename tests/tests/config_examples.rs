//! The example configurations in `config/` are what the README tells operators to
//! start from: each must load and resolve (unknown keys and bad values are refused).
//! And what `--help` tells them: every flag a role's help names is a real flag.

use clap::{CommandFactory, Parser};
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
    let users = global_master::service::admission::users::Users::load(&path, &Default::default())
        .expect("tokens example");
    assert_eq!(users.len(), 3);
    let alice = users
        .find(b"EXAMPLE-alice-3q2+Xk9vQ0bR7u")
        .expect("alice's token");
    assert!(alice.may_use("analytics") && !alice.may_use("batch"));
    // Its commented `priority_classes`, taken up, holds with the GM example's classes.
    let text = std::fs::read_to_string(&path)
        .expect("tokens example")
        .replace("# priority_classes", "priority_classes")
        .replace("# preempting_jobs_per_minute", "preempting_jobs_per_minute");
    let classes = common::priority::PriorityClasses::parse(
        &["batch:0".into(), "urgent:100:preempting".into()],
        Some("batch"),
        1000,
    )
    .expect("the GM example's classes");
    let users = global_master::service::admission::users::Users::parse(&text, false, &classes)
        .expect("tokens example with priority_classes");
    let bot = users
        .find(b"EXAMPLE-batch-Zp4LmW8sT1yA6e")
        .expect("batch-bot's token");
    assert!(bot.may_preempt_as("urgent"));
    assert_eq!(bot.preempting_per_minute(), Some(10));
    assert!(!alice.may_preempt_as("urgent"));
}

/// The long flags of a command, as `--name`.
fn flags_of(command: &clap::Command) -> Vec<String> {
    command
        .get_arguments()
        .filter_map(|a| a.get_long())
        .map(|l| format!("--{l}"))
        .collect()
}

/// Every `--word` in a text.
fn flags_named_in(text: &str) -> Vec<String> {
    let mut named = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("--") {
        let tail = &rest[at + 2..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
            .unwrap_or(tail.len());
        if end > 0 && tail.starts_with(|c: char| c.is_ascii_lowercase()) {
            named.push(format!("--{}", tail[..end].trim_end_matches('-')));
        }
        rest = &tail[end..];
    }
    named
}

#[test]
fn every_flag_a_role_help_names_exists() {
    let mut roles = [
        (
            "global-master",
            global_master::service::config::GmArgs::command(),
        ),
        (
            "local-master",
            local_master::service::config::LmArgs::command(),
        ),
        ("worker", worker::service::config::WorkerArgs::command()),
    ];
    // A role's help may name another role's flag ("give the LMs --queueable").
    let known: Vec<String> = roles.iter().flat_map(|(_, c)| flags_of(c)).collect();
    let mut unknown = Vec::new();
    for (name, command) in &mut roles {
        let help = command.render_long_help().to_string();
        for flag in flags_named_in(&help) {
            if !known.contains(&flag) && flag != "--help" && flag != "--version" {
                unknown.push(format!("{name} --help names {flag}"));
            }
        }
    }
    assert!(unknown.is_empty(), "no such flag: {unknown:?}");
}

#[test]
fn flags_are_found_in_help_text() {
    assert_eq!(
        flags_named_in("either\n--cluster FILE (a config) or --lms/--partition-size, -- not"),
        ["--cluster", "--lms", "--partition-size"]
    );
}

/// `--print-config` of a role started on its example file: every key the file sets is
/// reported as coming from the file, with the file's value (so no setting is ignored
/// from a file, whatever struct it lives in), and a flag given too wins over the file.
fn example_layers<T>(role: &str, file: &str, flag: (&str, &str))
where
    T: clap::Parser + serde::Serialize + serde::de::DeserializeOwned + Default,
{
    let path = example(file);
    let text = std::fs::read_to_string(&path).expect("example");
    let table: toml::Table = toml::from_str(&text).expect("toml");
    let matches = T::command()
        .try_get_matches_from([role, "--config", &path, flag.0, flag.1])
        .expect("flags");
    let args = T::from_arg_matches(&matches).expect("args");
    let printed = service_kit::settings::effective(&args, &matches, Some(path.as_ref()))
        .expect("effective configuration");
    let flag_key = flag.0.trim_start_matches("--").replace('-', "_");
    for (key, value) in &table {
        if *key == flag_key {
            continue;
        }
        let line = printed
            .lines()
            .find(|l| l.starts_with(&format!("{key} = ")))
            .unwrap_or_else(|| panic!("{role}: `{key}` of {file} missing from:\n{printed}"));
        assert!(line.ends_with(&format!("# file {path}")), "{role}: {line}");
        let shown: toml::Value =
            toml::from_str::<toml::Table>(line.split("  #").next().expect("value"))
                .expect("the printed line is TOML")[key.as_str()]
            .clone();
        let expected = match value {
            toml::Value::String(s) => toml::Value::String(service_kit::amqp::redact(s)),
            other => other.clone(),
        };
        assert_eq!(
            shown, expected,
            "{role}: `{key}` printed as in the file (URL passwords hidden)"
        );
    }
    let flag_line = printed
        .lines()
        .find(|l| l.starts_with(&format!("{flag_key} = ")))
        .expect("the flag's setting");
    assert!(
        flag_line.ends_with(&format!("# flag {}", flag.0)),
        "{flag_line}"
    );
}

#[test]
fn print_config_shows_every_setting_of_each_example_file_as_from_the_file() {
    use global_master::service::config::GmArgs;
    use local_master::service::config::LmArgs;
    use worker::service::config::WorkerArgs;
    example_layers::<GmArgs>(
        "global-master",
        "global-master.example.toml",
        ("--batch-size", "7"),
    );
    example_layers::<LmArgs>(
        "local-master",
        "local-master.example.toml",
        ("--heartbeat-ms", "250"),
    );
    example_layers::<WorkerArgs>("worker", "worker.example.toml", ("--kill-grace-ms", "5"));
}

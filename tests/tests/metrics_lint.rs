//! Every role's `/metrics` page passes `promtool check metrics` (the Prometheus
//! linter: HELP and TYPE lines, `_total` on counters, base units, no reserved
//! suffixes), and the Grafana dashboard `docker/grafana/megha.json` asks only for
//! metric names the services export. A loopback cluster (1 GM with two queues, 1 LM,
//! 2 workers, a real RabbitMQ) runs a few tasks first so that every family has
//! samples. docs/metrics.md must list every family. Fails (never skips) without RabbitMQ or `promtool` (Debian: `apt-get
//! install prometheus`; `scripts/test.sh` installs it).

use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;
use tests::broker::require_rabbitmq;
use tests::procs::{http, submit_tasks, wait_until, workspace_root, LoopbackCluster, Proc};

/// `promtool check metrics` over `page`: its complaints, empty when clean.
fn promtool_complaints(page: &str) -> String {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run promtool ({e}): install it (Debian: apt-get install prometheus)")
        });
    let mut stdin = child.stdin.take().expect("promtool stdin");
    stdin.write_all(page.as_bytes()).expect("write to promtool");
    drop(stdin);
    let out = child.wait_with_output().expect("promtool runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        text
    } else {
        format!("exit {:?}: {text}", out.status.code())
    }
}

fn scrape(p: &Proc) -> String {
    let (status, head, page) =
        http("GET", &format!("{}/metrics", p.url), None).expect("GET /metrics");
    assert_eq!(status, 200, "{}: {page}", p.name);
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{}: {head}",
        p.name
    );
    page
}

/// Sample names in a text page (`name{...} value` or `name value`).
fn sample_names(page: &str) -> BTreeSet<String> {
    page.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect()
}

/// Every `megha_*` identifier in the dashboard's queries.
fn dashboard_metrics(dashboard: &serde_json::Value) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(!panels.is_empty(), "the dashboard has panels");
    for panel in panels {
        let targets = panel["targets"]
            .as_array()
            .expect("every panel has targets");
        for t in targets {
            let expr = t["expr"].as_str().expect("every target has an expr");
            let mut rest = expr;
            while let Some(i) = rest.find("megha_") {
                let tail = &rest[i..];
                let end = tail
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(tail.len());
                names.insert(tail[..end].to_owned());
                rest = &tail[end..];
            }
        }
    }
    names
}

#[test]
fn every_role_exports_lint_clean_metrics_and_the_dashboard_uses_only_them() {
    let broker = require_rabbitmq();
    let dir = std::env::temp_dir().join(format!("megha-metrics-lint-{}", std::process::id()));
    let mut cluster = LoopbackCluster::start_with_queues(
        1,
        1,
        2,
        2,
        &broker.url,
        &dir.join("logs"),
        &["a:0.5:0", "b:0.5:0"],
    );
    let gm = cluster.gms[0].url.clone();
    let task = r#"{"resources":{"cpu_millis":1000,"memory_mb":64},"duration_ms":50,"queue":"a"}"#;
    submit_tasks(&gm, task, 4);
    wait_until("the four tasks to finish", Duration::from_secs(60), || {
        cluster.metric(&cluster.gms, "megha_gm_tasks_finished_total") == 4.0
    });

    // The pages are kept as test artefacts (target/metrics-lint/NAME.prom).
    let artefacts = workspace_root().join("target/metrics-lint");
    std::fs::create_dir_all(&artefacts).expect("target/metrics-lint");
    let mut exported = BTreeSet::new();
    let mut families = BTreeSet::new();
    for p in cluster
        .gms
        .iter()
        .chain(&cluster.lms)
        .chain(&cluster.workers)
    {
        let page = scrape(p);
        std::fs::write(artefacts.join(format!("{}.prom", p.name)), &page).expect("artefact");
        families.extend(
            page.lines()
                .filter_map(|l| l.strip_prefix("# TYPE "))
                .filter_map(|l| l.split(' ').next())
                .map(str::to_owned),
        );
        let complaints = promtool_complaints(&page);
        assert!(
            complaints.trim().is_empty(),
            "promtool check metrics on {}'s /metrics:\n{complaints}\n--- page ---\n{page}",
            p.name
        );
        exported.extend(sample_names(&page));
    }
    // The allocation-time histogram has the samples the dashboard's quantiles use.
    assert!(exported.contains("megha_gm_launch_latency_seconds_bucket"));
    assert!(exported.contains("megha_gm_queue_length"));

    // docs/metrics.md lists every family a service exports.
    let doc =
        std::fs::read_to_string(workspace_root().join("docs/metrics.md")).expect("docs/metrics.md");
    let undocumented: Vec<_> = families
        .iter()
        .filter(|f| !doc.contains(&format!("`{f}`")))
        .collect();
    assert!(
        undocumented.is_empty(),
        "families missing from docs/metrics.md: {undocumented:?}"
    );

    let path = workspace_root().join("docker/grafana/megha.json");
    let text = std::fs::read_to_string(&path).expect("docker/grafana/megha.json");
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("dashboard JSON");
    let used = dashboard_metrics(&dashboard);
    assert!(used.len() >= 6, "the dashboard's main panels: {used:?}");
    let unknown: Vec<_> = used.difference(&exported).collect();
    assert!(
        unknown.is_empty(),
        "the dashboard asks for metrics no service exports: {unknown:?}"
    );
    cluster.terminate_all_cleanly();
}

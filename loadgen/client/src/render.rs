//! The `megha` client's human output: plain aligned tables built from the GM's JSON
//! answers (pure functions, so that each is tested on a sample answer).

use serde_json::Value;
use std::fmt::Write as _;

/// Rows of cells as left-aligned columns separated by two spaces.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: &mut dyn Iterator<Item = String>| {
        let cells: Vec<String> = cells.collect();
        let last = cells.len().saturating_sub(1);
        for (i, cell) in cells.iter().enumerate() {
            if i == last {
                out.push_str(cell);
            } else {
                let pad = widths[i].saturating_sub(cell.chars().count()) + 2;
                out.push_str(cell);
                out.push_str(&" ".repeat(pad));
            }
        }
        out.push('\n');
    };
    line(&mut out, &mut header.iter().map(|h| h.to_string()));
    for row in rows {
        line(&mut out, &mut row.iter().cloned());
    }
    out
}

/// A JSON value as a cell: strings bare, null as `-`.
fn cell(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Per-state counts as `running=2 queued=1`.
fn states(v: &Value) -> String {
    v.as_object()
        .map(|m| {
            m.iter()
                .map(|(k, n)| format!("{k}={n}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// The reason in an error answer (`{"error": ...}` or `{"field":..,"error":..}`).
pub fn reason(body: &str) -> String {
    match serde_json::from_str::<Value>(body) {
        Ok(v) => match (v.get("field"), v.get("error")) {
            (Some(f), Some(e)) => format!("{}: {}", cell(f), cell(e)),
            (None, Some(e)) => cell(e),
            _ => body.to_owned(),
        },
        Err(_) => body.trim().to_owned(),
    }
}

pub fn submitted(answer: &Value) -> String {
    let tasks = answer["tasks"].as_array().map_or(0, Vec::len);
    format!(
        "submitted job {} ({tasks} task{})\n",
        cell(&answer["job"]),
        if tasks == 1 { "" } else { "s" }
    )
}

pub fn jobs(page: &Value) -> String {
    let rows: Vec<Vec<String>> = page["jobs"]
        .as_array()
        .map(|jobs| {
            jobs.iter()
                .map(|j| {
                    vec![
                        cell(&j["job"]),
                        cell(&j["state"]),
                        cell(&j["tasks"]),
                        states(&j["states"]),
                        j["queues"]
                            .as_array()
                            .map(|q| q.iter().map(cell).collect::<Vec<_>>().join(","))
                            .unwrap_or_default(),
                        cell(&j["user"]),
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    let mut out = table(
        &["JOB", "STATE", "TASKS", "BY STATE", "QUEUES", "USER"],
        &rows,
    );
    if let Some(next) = page["next"].as_u64() {
        let _ = writeln!(out, "more: --after {next}");
    }
    for gone in page["unreachable"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "missing: the jobs of GM {}, which did not answer ({})",
            cell(&gone["gm"]),
            cell(&gone["error"])
        );
    }
    out
}

pub fn job(job: &Value, tasks: &[Value]) -> String {
    let mut out = format!(
        "job {}: {} ({} tasks: {})\n",
        cell(&job["job"]),
        cell(&job["state"]),
        cell(&job["tasks"]),
        states(&job["states"])
    );
    if let Some(after) = job["after_jobs"].as_array().filter(|a| !a.is_empty()) {
        let after: Vec<String> = after.iter().map(cell).collect();
        out.push_str(&format!("runs after jobs {}\n", after.join(", ")));
    }
    for stage in job["stages"].as_array().into_iter().flatten() {
        let after: Vec<String> = stage["after"]
            .as_array()
            .into_iter()
            .flatten()
            .map(cell)
            .collect();
        let after = match after.is_empty() {
            true => String::new(),
            false => format!(" after {}", after.join(", ")),
        };
        out.push_str(&format!(
            "stage {}{after}: {}\n",
            cell(&stage["name"]),
            states(&stage["states"])
        ));
    }
    let rows: Vec<Vec<String>> = tasks
        .iter()
        .map(|t| {
            let why = match (&t["failure"], &t["reason"]) {
                (Value::Null, r) => cell(r),
                (f, _) => failure(f),
            };
            vec![
                cell(&t["index"]),
                cell(&t["state"]),
                format!("{}/{}", cell(&t["attempt"]), cell(&t["max_attempts"])),
                match (&t["lm"], &t["node"]) {
                    (Value::Null, _) | (_, Value::Null) => "-".into(),
                    (l, n) => format!("lm{}/node{}", cell(l), cell(n)),
                },
                why,
            ]
        })
        .collect();
    out.push_str(&table(
        &["TASK", "STATE", "ATTEMPT", "WHERE", "REASON"],
        &rows,
    ));
    out
}

/// A task failure (`{"exit":{"code":3}}`...) in words.
pub(crate) fn failure(f: &Value) -> String {
    let Some((kind, detail)) = f.as_object().and_then(|m| m.iter().next()) else {
        return cell(f);
    };
    match kind.as_str() {
        "exit" => format!("exited with code {}", cell(&detail["code"])),
        "signal" => signal_words(detail),
        "start_failed" => format!("could not start: {}", cell(&detail["reason"])),
        "lost" => format!("lost: {}", cell(&detail["reason"])),
        other => format!("{other}: {detail}"),
    }
}

/// A signal failure (`{"signal": 9, "out_of_memory": true}`) in words: an
/// out-of-memory kill says so first (the signal alone reads like a kill by hand).
pub fn signal_words(detail: &Value) -> String {
    let signal = cell(&detail["signal"]);
    if detail["out_of_memory"] == Value::Bool(true) {
        format!("out of memory: killed by signal {signal} at its memory limit")
    } else {
        format!("killed by signal {signal}")
    }
}

/// The answer to `megha cancel`; `ended`: the job had ended before it.
pub fn cancelled(job: &Value, ended: bool) -> String {
    if ended {
        return format!(
            "job {} had already ended ({}): nothing to cancel\n",
            cell(&job["job"]),
            cell(&job["state"])
        );
    }
    format!(
        "job {} cancelled: {} ({})\n",
        cell(&job["job"]),
        cell(&job["state"]),
        states(&job["states"])
    )
}

/// `GET /v1/nodes` (the GM's view), each node marked down or drained and each LM
/// not ready or unreachable as `marks` (the LMs' own lists) say.
pub fn nodes(view: &Value, marks: &super::health::Marks) -> String {
    let res = |r: &Value| format!("{}m/{}MiB", cell(&r["cpu_millis"]), cell(&r["memory_mb"]));
    let mut rows = Vec::new();
    for lm in view["lms"].as_array().into_iter().flatten() {
        let name = format!("lm{}", cell(&lm["lm"]));
        let lm_mark = marks.lm(&lm["lm"]);
        if lm["known"] != Value::Bool(true) {
            rows.push(vec![
                name,
                "-".into(),
                "-".into(),
                "no state yet".into(),
                "-".into(),
                "-".into(),
                lm_mark.unwrap_or("-").to_owned(),
            ]);
            continue;
        }
        let age = format!("{} ms", cell(&lm["state_age_ms"]));
        for p in lm["partitions"].as_array().into_iter().flatten() {
            let partition = format!("gm{}", cell(&p["gm"]));
            match p["nodes"].as_array() {
                None => {
                    let (down, drained) = marks.counts(&lm["lm"]);
                    let state = match (lm_mark, down, drained) {
                        (Some(m), _, _) => format!("lm {m}"),
                        (None, 0, 0) => "ok".into(),
                        (None, d, r) => format!("lm: {d} down, {r} drained"),
                    };
                    rows.push(vec![
                        name.clone(),
                        partition,
                        "*".into(),
                        age.clone(),
                        res(&p["capacity"]),
                        res(&p["free"]),
                        state,
                    ])
                }
                Some(nodes) => {
                    for n in nodes {
                        let state = match (marks.node(&lm["lm"], &n["node"]), lm_mark) {
                            (Some(m), _) => m.to_owned(),
                            (None, Some(m)) => format!("lm {m}"),
                            (None, None) => "ok".into(),
                        };
                        rows.push(vec![
                            name.clone(),
                            partition.clone(),
                            cell(&n["node"]),
                            age.clone(),
                            res(&n["capacity"]),
                            res(&n["free"]),
                            state,
                        ]);
                    }
                }
            }
        }
    }
    table(
        &[
            "LM",
            "PARTITION",
            "NODE",
            "STATE AGE",
            "CAPACITY",
            "FREE",
            "STATE",
        ],
        &rows,
    )
}

/// `GET /v1/pending`: the queued tasks and why each waits.
pub fn pending(list: &Value) -> String {
    let rows: Vec<Vec<String>> = list["shown"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            vec![
                format!("{}/{}", cell(&p["job"]), cell(&p["index"])),
                cell(&p["queue"]),
                cell(&p["attempts"]),
                format!("{:.1} s", p["waiting_s"].as_f64().unwrap_or(0.0)),
                cell(&p["reason"]),
            ]
        })
        .collect();
    let mut out = table(&["TASK", "QUEUE", "ATTEMPTS", "WAITING", "REASON"], &rows);
    let _ = writeln!(out, "{} pending in all", cell(&list["total"]));
    out
}

/// `megha top`: the summary of [`super::top::summarize`].
pub fn top(summary: &Value) -> String {
    let mut out = String::new();
    let t = &summary["tasks"];
    let _ = writeln!(
        out,
        "gm{}  tasks: {} running, {} starting, {} pending  jobs: {}",
        cell(&summary["gm"]),
        cell(&t["running"]),
        cell(&t["starting"]),
        cell(&t["pending"]),
        states(&summary["jobs_by_state"])
    );
    out.push('\n');
    let rows: Vec<Vec<String>> = summary["queues"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|q| {
            ["queue", "active_jobs", "running", "starting", "pending"]
                .iter()
                .map(|k| cell(&q[*k]))
                .collect()
        })
        .collect();
    out.push_str(&table(
        &["QUEUE", "ACTIVE JOBS", "RUNNING", "STARTING", "PENDING"],
        &rows,
    ));
    out.push('\n');
    let used = |lm: &Value| {
        format!(
            "{}/{}m  {}/{}MiB",
            cell(&lm["used"]["cpu_millis"]),
            cell(&lm["capacity"]["cpu_millis"]),
            cell(&lm["used"]["memory_mb"]),
            cell(&lm["capacity"]["memory_mb"])
        )
    };
    let rows: Vec<Vec<String>> = summary["lms"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|lm| {
            let mut row = vec![format!("lm{}", cell(&lm["lm"])), cell(&lm["status"])];
            row.extend(
                ["nodes", "idle", "busy", "full", "down", "drained"]
                    .iter()
                    .map(|k| cell(&lm[*k])),
            );
            row.push(used(lm));
            row
        })
        .collect();
    out.push_str(&table(
        &[
            "LM",
            "STATE",
            "NODES",
            "IDLE",
            "BUSY",
            "FULL",
            "DOWN",
            "DRAINED",
            "USED CPU / MEMORY",
        ],
        &rows,
    ));
    out.push('\n');
    let rows: Vec<Vec<String>> = summary["recent_jobs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|j| {
            vec![
                cell(&j["job"]),
                cell(&j["state"]),
                cell(&j["tasks"]),
                states(&j["states"]),
                cell(&j["user"]),
            ]
        })
        .collect();
    out.push_str(&table(
        &["RECENT JOB", "STATE", "TASKS", "BY STATE", "USER"],
        &rows,
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tables_align_columns_and_show_the_fields_that_matter() {
        let page = json!({"jobs":[
            {"job":7,"state":"active","tasks":2,"states":{"queued":1,"running":1},"queues":["default"],"user":"ana"},
            {"job":12,"state":"failed","tasks":1,"states":{"failed":1},"queues":["default"],"user":null}
        ],"next":12});
        let text = jobs(&page);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "JOB  STATE   TASKS  BY STATE            QUEUES   USER"
        );
        assert_eq!(
            lines[1],
            "7    active  2      queued=1 running=1  default  ana"
        );
        assert_eq!(
            lines[2],
            "12   failed  1      failed=1            default  -"
        );
        assert_eq!(lines[3], "more: --after 12");

        let task = json!({"index":0,"state":"failed","attempt":3,"max_attempts":3,"lm":0,"node":1,
            "failure":{"exit":{"code":3}},"reason":null});
        let text = job(
            &json!({"job":7,"state":"failed","tasks":1,"states":{"failed":1}}),
            &[task],
        );
        assert!(
            text.starts_with("job 7: failed (1 tasks: failed=1)\n"),
            "{text}"
        );
        assert!(
            text.contains("0     failed  3/3      lm0/node1  exited with code 3"),
            "{text}"
        );

        let view = json!({"gm":0,"lms":[{"lm":0,"known":true,"state_age_ms":120,"partitions":[
            {"gm":0,"capacity":{"cpu_millis":2000,"memory_mb":2048},"free":{"cpu_millis":1000,"memory_mb":1024},
             "nodes":[{"node":0,"capacity":{"cpu_millis":1000,"memory_mb":1024},"free":{"cpu_millis":0,"memory_mb":0}}]}]},
            {"lm":1,"known":false}]});
        let text = nodes(&view, &super::super::health::Marks::default());
        assert!(
            text.contains("lm0  gm0        0     120 ms        1000m/1024MiB  0m/0MiB  ok"),
            "{text}"
        );
        assert!(
            text.contains("lm1  -          -     no state yet"),
            "{text}"
        );
        // The LMs' own lists mark a drained node, and an LM that is not ready.
        let cluster = json!({"lms":[{"lm":0,"state":{"ready":true,"nodes":[{"node":0,"down":false,"drained":true}]}},
            {"lm":1,"state":{"ready":false,"nodes":[]}}]});
        let text = nodes(&view, &super::super::health::Marks::of(Some(&cluster)));
        assert!(text.contains("0m/0MiB  drained"), "{text}");
        assert!(
            (text.lines()).any(|l| l.starts_with("lm1") && l.ends_with("  not ready")),
            "{text}"
        );
        // An out-of-memory kill says so.
        let oom = json!({"index":0,"state":"failed","attempt":1,"max_attempts":1,"lm":0,"node":0,
            "failure":{"signal":{"signal":9,"out_of_memory":true}}});
        let text = job(
            &json!({"job":8,"state":"failed","tasks":1,"states":{"failed":1}}),
            &[oom],
        );
        assert!(
            text.contains("out of memory: killed by signal 9 at its memory limit"),
            "{text}"
        );
        assert_eq!(
            reason(r#"{"field":"tasks","error":"a job needs at least one task"}"#),
            "tasks: a job needs at least one task"
        );
        assert_eq!(
            reason(r#"{"error":"job 5 is unknown"}"#),
            "job 5 is unknown"
        );
    }

    #[test]
    fn a_dag_job_shows_its_stages_and_the_jobs_it_runs_after() {
        let status = json!({"job":9,"state":"active","tasks":3,"states":{"blocked":1,"running":2},
            "after_jobs":[7],
            "stages":[{"name":"map","after":[],"states":{"running":2}},
                      {"name":"reduce","after":["map"],"states":{"blocked":1}}]});
        let text = job(&status, &[]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], "runs after jobs 7");
        assert_eq!(lines[2], "stage map: running=2");
        assert_eq!(lines[3], "stage reduce after map: blocked=1");
    }

    #[test]
    fn top_and_pending_show_their_sections() {
        let list = json!({"total":3,"shown":[{"job":7,"index":1,"queue":0,"attempts":2,
            "waiting_s":1.25,"reason":"no node has room"}]});
        let text = pending(&list);
        assert!(
            text.contains("7/1   0      2         1.2 s    no node has room"),
            "{text}"
        );
        assert!(text.ends_with("3 pending in all\n"), "{text}");
        let summary = json!({"gm":0,"tasks":{"running":3,"starting":1,"pending":2},
            "jobs_by_state":{"active":2,"finished":1},
            "queues":[{"queue":"a","active_jobs":1,"running":1,"starting":1,"pending":2}],
            "lms":[{"lm":0,"status":"ok","nodes":3,"idle":1,"busy":1,"full":1,"down":0,"drained":0,
                "used":{"cpu_millis":1500,"memory_mb":1536},"capacity":{"cpu_millis":3000,"memory_mb":3072}}],
            "recent_jobs":[{"job":9,"state":"active","tasks":2,"states":{"running":2},"user":null}]});
        let text = top(&summary);
        assert!(
            text.starts_with("gm0  tasks: 3 running, 1 starting, 2 pending"),
            "{text}"
        );
        assert!(text.contains("jobs: active=2 finished=1"), "{text}");
        assert!(
            text.contains("a      1            1        1         2"),
            "{text}"
        );
        assert!(
            text.contains(
                "lm0  ok     3      1     1     1     0     0        1500/3000m  1536/3072MiB"
            ),
            "{text}"
        );
        assert!(
            text.contains("9           active  2      running=2  -"),
            "{text}"
        );
    }
}

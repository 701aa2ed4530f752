//! Operators' and accountants' commands: `megha node drain|undrain LM/NODE` (an
//! admin takes a node out of service and back; `POST`/`DELETE
//! /v1/lms/{lm}/nodes/{node}/drain`) and `megha usage` (`GET /v1/usage`: runs,
//! wall time and reserved CPU and memory per user and queue). The parsing and the
//! tables are pure (unit-tested).

use super::render::table;
use anyhow::{bail, Result};
use serde_json::Value;
use std::fmt::Write;

/// A node as `megha nodes` and `megha status JOB` show it: `lm0/node3`, or `0/3`.
pub fn parse_node(text: &str) -> Result<(u16, u32)> {
    let Some((lm, node)) = text.split_once('/') else {
        bail!("node {text:?}: give LM/NODE, like lm0/node3 or 0/3 (megha nodes lists them)");
    };
    let lm = lm.strip_prefix("lm").unwrap_or(lm);
    let node = node.strip_prefix("node").unwrap_or(node);
    match (lm.parse(), node.parse()) {
        (Ok(lm), Ok(node)) => Ok((lm, node)),
        _ => bail!("node {text:?}: give LM/NODE, like lm0/node3 or 0/3 (megha nodes lists them)"),
    }
}

/// The path of a node's drain.
pub fn drain_path(lm: u16, node: u32) -> String {
    format!("/v1/lms/{lm}/nodes/{node}/drain")
}

/// The answer to a drain or undrain, in words.
pub fn drained(answer: &Value) -> String {
    let node = format!("lm{}/node{}", answer["lm"], answer["node"]);
    let drained = answer["drained"] == Value::Bool(true);
    let changed = answer["changed"] == Value::Bool(true);
    let mut out = match (drained, changed) {
        (true, true) => format!("{node} drained: no new work lands there"),
        (true, false) => format!("{node} was already drained"),
        (false, true) => format!("{node} undrained: it takes work again"),
        (false, false) => format!("{node} was not drained"),
    };
    let running = answer["running_tasks"].as_u64().unwrap_or(0);
    if drained && running > 0 {
        let _ = write!(out, "; {running} running task(s) finish there");
    }
    if answer["durable"] == Value::Bool(false) {
        out.push_str(" (the LM has no data dir: a restart of it forgets this)");
    }
    out.push('\n');
    out
}

/// `GET /v1/usage`'s answer as a table, with the total and what is not reported.
pub fn usage(report: &Value) -> String {
    let num = |v: &Value, digits: usize| match v.as_f64() {
        Some(x) => format!("{x:.digits$}"),
        None => "-".into(),
    };
    let row = |l: &Value| {
        vec![
            l["user"].as_str().unwrap_or("-").to_owned(),
            l["queue"].as_str().unwrap_or("-").to_owned(),
            l["runs"].to_string(),
            num(&l["wall_seconds"], 1),
            num(&l["cpu_seconds_reserved"], 1),
            num(&l["memory_mb_seconds_reserved"], 0),
            // Used, as measured: CPU over the measured runs, the highest peak.
            match l["runs_measured"].as_u64() {
                Some(n) if n > 0 => format!("{} ({n} runs)", num(&l["cpu_seconds_used"], 1)),
                _ => "-".into(),
            },
            l["memory_peak_mb"]
                .as_u64()
                .map_or_else(|| "-".into(), |m| m.to_string()),
        ]
    };
    let mut rows: Vec<Vec<String>> = report["lines"]
        .as_array()
        .into_iter()
        .flatten()
        .map(row)
        .collect();
    rows.push(row(&report["total"]));
    if let Some(last) = rows.last_mut() {
        last[0] = "TOTAL".into();
        last[1] = String::new();
    }
    let mut out = table(
        &[
            "USER",
            "QUEUE",
            "RUNS",
            "WALL S",
            "CPU CORE-S RESERVED",
            "MEMORY MIB-S RESERVED",
            "CPU S USED",
            "PEAK MIB",
        ],
        &rows,
    );
    let _ = writeln!(
        out,
        "used: {}",
        report["used"].as_str().unwrap_or("not reported by this GM")
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nodes_are_named_as_megha_shows_them() {
        assert_eq!(parse_node("lm0/node3").unwrap(), (0, 3));
        assert_eq!(parse_node("1/2").unwrap(), (1, 2));
        assert_eq!(parse_node("lm2/7").unwrap(), (2, 7));
        for bad in ["3", "lm0/nodeX", "x/1", "", "lm0/"] {
            let e = parse_node(bad).unwrap_err().to_string();
            assert!(e.contains("LM/NODE"), "{bad}: {e}");
        }
        assert_eq!(drain_path(1, 2), "/v1/lms/1/nodes/2/drain");
    }

    #[test]
    fn drains_and_usage_read_as_sentences_and_tables() {
        let a =
            json!({"lm":0,"node":3,"drained":true,"changed":true,"running_tasks":2,"durable":true});
        assert_eq!(
            drained(&a),
            "lm0/node3 drained: no new work lands there; 2 running task(s) finish there\n"
        );
        let again = json!({"lm":0,"node":3,"drained":true,"changed":false,"running_tasks":0,"durable":false});
        assert!(
            drained(&again).starts_with("lm0/node3 was already drained (the LM has no data dir")
        );
        let back = json!({"lm":0,"node":3,"drained":false,"changed":true,"running_tasks":0,"durable":true});
        assert_eq!(drained(&back), "lm0/node3 undrained: it takes work again\n");

        let line = |u: &str, q: &str, runs: u64, wall: f64| {
            json!({"user":u,"queue":q,"runs":runs,"wall_seconds":wall,
                   "cpu_seconds_reserved":wall/2.0,"memory_mb_seconds_reserved":wall*64.0,
                   "runs_measured":runs-1,"cpu_seconds_used":1.25,"memory_peak_mb":40})
        };
        let report = json!({"lines":[line("alice","batch",3,6.5)],"total":line("*","*",3,6.5),
            "used":"measured by the workers"});
        let text = usage(&report);
        assert!(text.contains("alice  batch  3     6.5     3.2"), "{text}");
        assert!(text.contains("1.2 (2 runs)  40"), "{text}");
        assert!(text.contains("TOTAL"), "{text}");
        assert!(text.ends_with("used: measured by the workers\n"), "{text}");
        let unmeasured = json!({"user":"bob","queue":"q","runs":1,"wall_seconds":1.0,
            "cpu_seconds_reserved":1.0,"memory_mb_seconds_reserved":1.0,
            "runs_measured":0,"cpu_seconds_used":0.0,"memory_peak_mb":null});
        let text = usage(&json!({"lines":[unmeasured],"total":unmeasured}));
        let bob: Vec<&str> = (text.lines().nth(1))
            .map(|l| l.split_whitespace().collect())
            .unwrap_or_default();
        assert_eq!(bob.first(), Some(&"bob"), "{text}");
        assert_eq!(bob[bob.len() - 2..], ["-", "-"], "{text}");
    }
}

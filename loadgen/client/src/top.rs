//! `megha top`: a live summary of one GM's cluster, from its public API: its user
//! queues (jobs, running, starting and pending tasks, from `GET /v1/jobs`), its LMs'
//! nodes (idle: nothing used; full: no CPU or no memory left; busy: the others; from
//! `GET /v1/nodes`) and its most recent jobs.
//!
//! [`summarize`] is pure (tested on sample answers); [`super::render::top`] draws it.
//!
//! What the GM's view cannot say comes from the LMs' own lists (`GET /v1/cluster`,
//! [`super::health::Marks`]): a node whose worker was lost, or that an operator
//! drained, has no free resources in its LM's state; it counts as `down` or
//! `drained` (not `full`), and an LM that is not ready or does not answer says so.
//! An LM whose state never arrived, or is older than `stale_ms`, is shown
//! `no state` / `stale` (its nodes may all be down).

use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// The summary (the `--json` output of `megha top`).
///
/// `jobs` is every job the GM holds, oldest first (the pages of `GET /v1/jobs`);
/// `nodes` the answer of `GET /v1/nodes`; `marks` what the LMs' own lists say;
/// `recent` how many of the newest jobs to list; an LM state older than `stale_ms`
/// is `stale`.
pub fn summarize(
    jobs: &[Value],
    nodes: &Value,
    marks: &super::health::Marks,
    recent: usize,
    stale_ms: u64,
) -> Value {
    #[derive(Default)]
    struct Queue {
        jobs: u64,
        running: u64,
        starting: u64,
        pending: u64,
    }
    let count = |j: &Value, states: &[&str]| -> u64 {
        states
            .iter()
            .map(|s| j["states"][*s].as_u64().unwrap_or(0))
            .sum()
    };
    let mut queues: BTreeMap<String, Queue> = BTreeMap::new();
    let mut states: BTreeMap<String, u64> = BTreeMap::new();
    for j in jobs {
        let state = j["state"].as_str().unwrap_or("unknown").to_owned();
        *states.entry(state.clone()).or_default() += 1;
        if state != "active" {
            continue;
        }
        let name = j["queues"]
            .as_array()
            .filter(|q| !q.is_empty())
            .map(|q| {
                q.iter()
                    .map(|n| n.as_str().unwrap_or("?").to_owned())
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_else(|| "-".into());
        let q = queues.entry(name).or_default();
        q.jobs += 1;
        q.running += count(j, &["running"]);
        q.starting += count(j, &["dispatched", "launched"]);
        q.pending += count(j, &["queued", "killed"]);
    }
    let queues: Vec<Value> = queues
        .into_iter()
        .map(|(name, q)| {
            json!({"queue": name, "active_jobs": q.jobs, "running": q.running,
                   "starting": q.starting, "pending": q.pending})
        })
        .collect();
    let lms: Vec<Value> = nodes["lms"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|lm| lm_summary(lm, marks, stale_ms))
        .collect();
    let recent: Vec<Value> = jobs
        .iter()
        .rev()
        .take(recent)
        .map(|j| {
            json!({"job": j["job"], "state": j["state"], "tasks": j["tasks"],
                   "states": j["states"], "queues": j["queues"], "user": j["user"]})
        })
        .collect();
    let total = |key: &str| queues.iter().filter_map(|q| q[key].as_u64()).sum::<u64>();
    json!({
        "gm": nodes["gm"],
        "jobs_by_state": states,
        "tasks": {"running": total("running"), "starting": total("starting"), "pending": total("pending")},
        "queues": queues,
        "lms": lms,
        "recent_jobs": recent,
    })
}

/// One LM: status, node counts by occupation (down and drained nodes apart),
/// resources used of capacity.
fn lm_summary(lm: &Value, marks: &super::health::Marks, stale_ms: u64) -> Value {
    let known = lm["known"] == Value::Bool(true);
    let age = lm["state_age_ms"].as_u64();
    let status = match (known, age, marks.lm(&lm["lm"])) {
        (false, _, None) => "no state".to_owned(),
        (false, _, Some(m)) => format!("no state, {m}"),
        (true, Some(a), _) if a > stale_ms => format!("stale ({} s)", a / 1000),
        (true, _, Some(m)) => m.to_owned(),
        (true, _, None) => "ok".to_owned(),
    };
    let (mut idle, mut busy, mut full) = (0u64, 0u64, 0u64);
    let (mut down, mut drained) = (0u64, 0u64);
    let mut capacity = Map::new();
    let mut used = Map::new();
    for p in lm["partitions"].as_array().into_iter().flatten() {
        for n in p["nodes"].as_array().into_iter().flatten() {
            // Idle: nothing used. Full: some resource has nothing free left.
            let zeros = |r: &Value, all: bool| {
                r.as_object().is_none_or(|m| {
                    let mut zero = m.values().map(|v| v.as_u64() == Some(0));
                    if all {
                        zero.all(|z| z)
                    } else {
                        zero.any(|z| z)
                    }
                })
            };
            let mark = marks.node(&lm["lm"], &n["node"]);
            match (mark, zeros(&n["used"], true), zeros(&n["free"], false)) {
                (Some(m), _, _) if m.contains("down") => down += 1,
                (Some(_), _, _) => drained += 1,
                (None, true, _) => idle += 1,
                (None, false, false) => busy += 1,
                (None, false, true) => full += 1,
            }
            for (key, sum) in [("capacity", &mut capacity), ("used", &mut used)] {
                for (dim, v) in n[key].as_object().into_iter().flatten() {
                    let total = sum.entry(dim.clone()).or_insert(json!(0));
                    *total = json!(total.as_u64().unwrap_or(0) + v.as_u64().unwrap_or(0));
                }
            }
        }
    }
    json!({"lm": lm["lm"], "status": status, "state_age_ms": lm["state_age_ms"],
           "nodes": lm["nodes"], "idle": idle, "busy": busy, "full": full,
           "down": down, "drained": drained,
           "capacity": capacity, "used": used})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_tasks_per_queue_nodes_per_occupation_and_lists_the_newest_jobs() {
        let jobs = vec![
            json!({"job":1,"state":"finished","tasks":1,"states":{"finished":1},"queues":["a"],"user":"ana"}),
            json!({"job":2,"state":"active","tasks":4,"states":{"running":1,"queued":1,"killed":1,"launched":1},"queues":["a"],"user":"ana"}),
            json!({"job":3,"state":"active","tasks":2,"states":{"running":2},"queues":["b"],"user":null}),
            json!({"job":4,"state":"failed","tasks":1,"states":{"failed":1},"queues":[],"user":null}),
        ];
        let res = |c: u64, m: u64| json!({"cpu_millis": c, "memory_mb": m});
        let nodes = json!({"gm":0,"lms":[
            {"lm":0,"known":true,"state_age_ms":100,"nodes":3,"partitions":[{"gm":0,"nodes":[
                {"node":0,"capacity":res(1000,1024),"free":res(1000,1024),"used":res(0,0)},
                {"node":1,"capacity":res(1000,1024),"free":res(500,512),"used":res(500,512)},
                {"node":2,"capacity":res(1000,1024),"free":res(0,0),"used":res(1000,1024)}]}]},
            {"lm":1,"known":true,"state_age_ms":90000,"nodes":0,"partitions":[]},
            {"lm":2,"known":false}]});
        let s = summarize(&jobs, &nodes, &Default::default(), 2, 30_000);
        assert_eq!(
            s["queues"],
            json!([
                {"queue":"a","active_jobs":1,"running":1,"starting":1,"pending":2},
                {"queue":"b","active_jobs":1,"running":2,"starting":0,"pending":0}
            ])
        );
        assert_eq!(s["tasks"], json!({"running":3,"starting":1,"pending":2}));
        assert_eq!(
            s["jobs_by_state"],
            json!({"active":2,"failed":1,"finished":1})
        );
        let lm0 = &s["lms"][0];
        assert_eq!(
            (&lm0["status"], &lm0["idle"], &lm0["busy"], &lm0["full"]),
            (&json!("ok"), &json!(1), &json!(1), &json!(1))
        );
        assert_eq!(lm0["used"], res(1500, 1536));
        assert_eq!(lm0["capacity"], res(3000, 3072));
        assert_eq!(s["lms"][1]["status"], "stale (90 s)");
        assert_eq!(s["lms"][2]["status"], "no state");
        let recent: Vec<&Value> = s["recent_jobs"]
            .as_array()
            .expect("list")
            .iter()
            .map(|j| &j["job"])
            .collect();
        assert_eq!(recent, [&json!(4), &json!(3)]);
    }

    #[test]
    fn down_and_drained_nodes_count_apart_and_an_lm_not_ready_says_so() {
        let res = |c: u64| json!({"cpu_millis": c, "memory_mb": c});
        let node = |n: u64, free: u64| json!({"node": n, "capacity": res(1000), "free": res(free), "used": res(1000 - free)});
        let nodes = json!({"gm":0,"lms":[{"lm":0,"known":true,"state_age_ms":10,"nodes":3,
            "partitions":[{"gm":0,"nodes":[node(0, 0), node(1, 0), node(2, 0)]}]}]});
        let cluster = json!({"lms":[{"lm":0,"state":{"ready":false,"nodes":[
            {"node":0,"down":true,"drained":false},{"node":1,"down":false,"drained":true},
            {"node":2,"down":false,"drained":false}]}}]});
        let marks = super::super::health::Marks::of(Some(&cluster));
        let s = summarize(&[], &nodes, &marks, 2, 30_000);
        let lm = &s["lms"][0];
        assert_eq!(
            (&lm["status"], &lm["down"], &lm["drained"], &lm["full"]),
            (&json!("not ready"), &json!(1), &json!(1), &json!(1))
        );
    }
}

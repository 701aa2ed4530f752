//! Reading a run's `tasks.csv` back, and the invariants every run must keep (from
//! tasks.csv, or from the task events of a services run).

use std::collections::HashMap;
use std::path::Path;

/// One row of tasks.csv (the columns the checks need).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub job: u64,
    pub task: u32,
    pub decision: String,
    /// The GM that queued the task.
    pub gm: Option<u16>,
    pub lm: Option<u16>,
    pub node: Option<u32>,
    pub start: Option<f64>,
    pub finish: Option<f64>,
}

pub fn read_tasks_csv(dir: &Path) -> Vec<Row> {
    let text = std::fs::read_to_string(dir.join("tasks.csv")).expect("tasks.csv");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).expect(name);
    let (job, task, decision, gm, lm, node, start, finish) = (
        col("job"),
        col("task"),
        col("decision"),
        col("gm"),
        col("lm"),
        col("node"),
        col("start_s"),
        col("finish_s"),
    );
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            Row {
                job: f[job].parse().expect("job"),
                task: f[task].parse().expect("task"),
                decision: f[decision].to_owned(),
                gm: f[gm].parse().ok(),
                lm: f[lm].parse().ok(),
                node: f[node].parse().ok(),
                start: f[start].parse().ok(),
                finish: f[finish].parse().ok(),
            }
        })
        .collect()
}

/// The report of a run of the 183-task sample trace in `out`: every task started and
/// finished, no node ran two tasks at once. Returns the rows.
pub fn assert_sample_run(out: &Path) -> Vec<Row> {
    let rows = read_tasks_csv(out);
    assert_eq!(rows.len(), 183, "tasks.csv in {}", out.display());
    assert_all_finished(&rows);
    assert_no_overlap_on_nodes(&rows);
    rows
}

/// Every row started and finished.
pub fn assert_all_finished(rows: &[Row]) {
    let missing: Vec<_> = rows
        .iter()
        .filter(|r| r.start.is_none() || r.finish.is_none())
        .map(|r| (r.job, r.task))
        .collect();
    assert!(missing.is_empty(), "tasks never finished: {missing:?}");
}

/// (start, finish, job, task) of one task on one node.
type Span = (f64, f64, u64, u32);

/// Two tasks that ran on one node at once, as `tasks.csv` reports them (each task's
/// last start and finish): the (job, task) pairs and a description.
pub type Overlap = ((u64, u32), (u64, u32), String);

/// With one-core nodes and one-core tasks, no two tasks may overlap on a node: the
/// pairs that do.
pub fn overlaps_on_nodes(rows: &[Row]) -> Vec<Overlap> {
    let mut by_node: HashMap<(u16, u32), Vec<Span>> = HashMap::new();
    for r in rows {
        if let (Some(lm), Some(node), Some(s), Some(f)) = (r.lm, r.node, r.start, r.finish) {
            by_node
                .entry((lm, node))
                .or_default()
                .push((s, f, r.job, r.task));
        }
    }
    let mut found = Vec::new();
    for (node, mut spans) in by_node {
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        for w in spans.windows(2) {
            if w[1].0 < w[0].1 - 1e-6 {
                found.push((
                    (w[0].2, w[0].3),
                    (w[1].2, w[1].3),
                    format!(
                        "node {node:?} over-committed: task {}.{} [{}, {}] overlaps task {}.{} [{}, {}]",
                        w[0].2, w[0].3, w[0].0, w[0].1, w[1].2, w[1].3, w[1].0, w[1].1
                    ),
                ));
            }
        }
    }
    found
}

/// The descriptions of `overlaps`, a line each.
pub fn describe_overlaps(overlaps: &[Overlap]) -> String {
    (overlaps.iter().map(|o| o.2.as_str()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// With one-core nodes and one-core tasks, no two tasks may overlap on a node.
pub fn assert_no_overlap_on_nodes(rows: &[Row]) {
    let found = overlaps_on_nodes(rows);
    assert!(found.is_empty(), "{}", describe_overlaps(&found));
}

/// Sums a metric family (all label sets) in a Prometheus text page.
pub use service_kit::metrics::sum as metric_sum;

/// One run of a task on a node, from task events: (start, end, task).
pub type EventRun = (common::Micros, common::Micros, common::TaskId);

/// Runs per node from task events, each ended by `Finished` or `Preempted`; panics
/// if a task starts while running or a run never ends.
pub fn event_runs(
    events: &[common::events::TaskEvent],
) -> HashMap<(common::LmId, common::NodeId), Vec<EventRun>> {
    use common::events::TaskEventKind;
    let mut open = HashMap::new();
    let mut out: HashMap<_, Vec<EventRun>> = HashMap::new();
    for e in events {
        match e.kind {
            TaskEventKind::Started { lm, node } => {
                assert!(
                    open.insert(e.task, (lm, node, e.at)).is_none(),
                    "{} started while running",
                    e.task
                );
            }
            TaskEventKind::Finished { .. } | TaskEventKind::Preempted { .. } => {
                if let Some((lm, node, start)) = open.remove(&e.task) {
                    out.entry((lm, node))
                        .or_default()
                        .push((start, e.at, e.task));
                }
            }
            _ => {}
        }
    }
    assert!(open.is_empty(), "runs never ended: {open:?}");
    out
}

/// No node ever ran two tasks at once (one-core nodes, one-core tasks).
pub fn assert_no_overlapping_runs(events: &[common::events::TaskEvent]) {
    for (node, mut spans) in event_runs(events) {
        spans.sort();
        for w in spans.windows(2) {
            assert!(
                w[1].0 >= w[0].1,
                "{node:?} over-committed: {:?} overlaps {:?}",
                w[0],
                w[1]
            );
        }
    }
}

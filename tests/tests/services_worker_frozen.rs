//! Issue 31 ("a run reported lost is never still running when its retry starts"),
//! for a worker that is frozen rather than dead: SIGSTOP (a debugger, a cgroup
//! freezer, a host thrashing in swap). A frozen worker cannot fence itself and
//! its socket to the task supervisor stays open, but its tasks' processes run
//! on. Its LM declares it lost after the worker timeout and the GM retries the
//! tasks elsewhere: without a lease enforced by the supervisor itself, the old and
//! the new run of a task ran side by side until the worker thawed.
//!
//! The tasks append `start|tick|end TASK ATTEMPT` lines to a marker file; after
//! the first line of a task's retry, no line of an earlier run of it may follow.

use std::collections::BTreeMap;
use std::time::Duration;
use tests::procs::{get_json, submit_tasks, wait_until, MarkedCluster};
use worker::exec::helper::processes_with;

fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill")
        .success();
    assert!(ok, "kill {sig} {pid}");
}

/// Marker lines by task: (word, attempt) in file order.
fn runs_by_task(text: &str) -> BTreeMap<String, Vec<(String, u32)>> {
    let mut per_task: BTreeMap<String, Vec<(String, u32)>> = BTreeMap::new();
    for line in text.lines() {
        let mut parts = line.split(' ');
        let (Some(word), Some(task), Some(attempt)) = (parts.next(), parts.next(), parts.next())
        else {
            panic!("marker line {line:?}");
        };
        let attempt = attempt.parse().expect("attempt");
        per_task
            .entry(task.to_owned())
            .or_default()
            .push((word.to_owned(), attempt));
    }
    per_task
}

#[test]
fn a_frozen_workers_runs_end_before_their_retries_start() {
    // 1 GM, 1 LM of 8 one-core nodes, 2 workers (nodes alternate between them).
    let MarkedCluster {
        broker: _broker,
        mut cluster,
        markers,
        dir,
        ..
    } = MarkedCluster::start("worker-frozen", 2);
    let gm = cluster.gms[0].url.clone();
    let tag = format!("megha-frozen-{}", std::process::id());
    // About 12 s of ticks: well past the 2 s worker timeout.
    let task = markers.task_json("$MEGHA_TASK $MEGHA_ATTEMPT", 120, &tag);
    let job = submit_tasks(&gm, &task, 4)["job"].as_u64().expect("job id");
    wait_until("the 4 tasks running", Duration::from_secs(60), || {
        markers.starts() == 4
    });
    // Which of them worker 0 runs (its slot holds the nodes of even index).
    let frozen: Vec<u64> = (0..4)
        .filter(|i| {
            let t = get_json(&format!("{gm}/v1/tasks/{job}/{i}"));
            t["node"].as_u64().is_some_and(|n| n % 2 == 0)
        })
        .collect();
    assert!(
        !frozen.is_empty(),
        "the test needs a task on worker 0 (nodes alternate between the two workers); logs in {}",
        dir.display()
    );
    let pid = cluster.workers[0].pid();
    signal(pid, "-STOP");
    // The LM declares worker 0 lost (2 s) and the GM retries its tasks on worker
    // 1's free nodes: wait for every retry's first line, then a little more.
    wait_until(
        "the frozen worker's tasks started again elsewhere",
        Duration::from_secs(30),
        || {
            let text = markers.read();
            let started = text.lines().filter(|l| l.starts_with("start ")).count();
            started >= 4 + frozen.len()
        },
    );
    std::thread::sleep(Duration::from_secs(2));
    signal(pid, "-CONT");
    wait_until("the job finished", Duration::from_secs(120), || {
        get_json(&format!("{gm}/v1/jobs/{job}"))["state"] == "finished"
    });
    let text = markers.read();
    for (task, lines) in runs_by_task(&text) {
        let last = lines.iter().map(|(_, a)| *a).max().expect("a line");
        let first_of_last = lines.iter().position(|(_, a)| *a == last).expect("first");
        let late: Vec<_> = lines[first_of_last..]
            .iter()
            .filter(|(_, a)| *a != last)
            .collect();
        assert!(
            late.is_empty(),
            "task {task}: an earlier run went on after run {last} started ({} lines, e.g. {:?}); logs in {}",
            late.len(),
            late.first(),
            dir.display()
        );
        let ends = lines.iter().filter(|(w, _)| w == "end").count();
        assert_eq!(ends, 1, "task {task} ran to its end once: {lines:?}");
    }
    assert_eq!(processes_with(&tag), Vec::<u32>::new());
    cluster.terminate_all_cleanly();
    let _ = std::fs::remove_dir_all(&dir);
}

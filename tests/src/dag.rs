//! DAG workloads for the tests: jobs of a diamond of stages, and the check that no
//! task of a stage started before a task of a parent stage finished (for the
//! simulator, embedded mode and the services alike: it reads the task records).

use common::dag::{JobDag, OnParentFailure, Stage};
use common::{Micros, Resources, TaskId, TaskSpec};
use loadgen::sim::workload::Job;
use loadgen::sim::SimOutcome;
use std::sync::Arc;

/// Jobs of a 3-stage diamond (2 map tasks, two middle stages of 3 tasks, 1 reduce)
/// on a small cluster, some of them at once.
pub fn diamond_jobs(n: u64) -> Vec<Job> {
    let stage = |name: &str, after: &[u16]| Stage {
        name: name.into(),
        after: after.to_vec(),
        on_parent_failure: OnParentFailure::Fail,
    };
    let dag = Arc::new(JobDag {
        stages: vec![
            stage("map", &[]),
            stage("left", &[0]),
            stage("right", &[0]),
            stage("reduce", &[1, 2]),
        ],
        task_stage: vec![0, 0, 1, 1, 1, 2, 2, 2, 3],
        after_jobs: Vec::new(),
    });
    (0..n)
        .map(|id| Job {
            id,
            arrival: Micros::from_millis(id * 700),
            tasks: (0..9u32)
                .map(|i| {
                    TaskSpec::short(
                        TaskId::new(id, i),
                        Resources::cores(1, 256),
                        Micros::from_millis(500 + u64::from((i * 7 + id as u32) % 5) * 400),
                    )
                })
                .collect(),
            dag: Some(dag.clone()),
        })
        .collect()
}

/// Tasks of `jobs` (whose DAG is given apart, the runs may not have it) that
/// started before a task of one of their parent stages finished.
pub fn out_of_order(outcome: &SimOutcome, jobs: &[Job], dag: &JobDag) -> Vec<String> {
    let parents: [&[usize]; 4] = [&[], &[0], &[0], &[1, 2]];
    let mut bad = Vec::new();
    for job in jobs {
        let of_stage = |s: usize| {
            outcome
                .records
                .iter()
                .filter(move |r| r.job == job.id && dag.task_stage[r.index as usize] == s as u16)
        };
        for (stage, parents) in parents.iter().enumerate() {
            for child in of_stage(stage) {
                let start = child.start.expect("every task started");
                for &p in *parents {
                    for parent in of_stage(p) {
                        let finish = parent.finish.expect("every task finished");
                        if start < finish {
                            bad.push(format!(
                                "job {} task {} (stage {stage}) started at {start:?}, before task {} of parent stage {p} finished at {finish:?}",
                                job.id, child.index, parent.index
                            ));
                        }
                    }
                }
            }
        }
    }
    bad
}
